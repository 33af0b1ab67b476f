/*-------------------------------------------------------------------------
 *
 * durable.h
 *	  Durable keyed state, named by uid, kept in tables of the extension
 *	  and changed in the caller's transaction.
 *
 * ptf.uid_registry has a row per uid (function, owner, row type, keys,
 * watermark, counters); each uid's keys live in a table of their own,
 * ptf.state_<n>, with the key columns in their own types, so state is
 * plain SQL data: inspectable, WAL-logged, dumped and replicated.
 *
 * A call locks its uid's registry row (calls of one uid serialize), loads
 * the keys into a memory KeyedState, runs, and writes back only the
 * records that changed.  A ROLLBACK undoes all of it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DURABLE_H
#define PTF_DURABLE_H

#include "access/xlogdefs.h"

#include "operators/operator.h"
#include "state/keyed_state.h"

/* What a uid was created for; a later call must agree. */
typedef struct DurableIdentity
{
	const char *uid;
	const char *function;		/* SQL name, e.g. "deduplicate_keep_first" */
	TupleDesc	rowdesc;		/* the input row type */
	KeySpec    *keys;
	const char *on_time;		/* NULL: none */
	Oid			time_type;		/* type of on_time, or InvalidOid */
	bool		keeps_images;	/* the operator stores row images */
	const char *slot_name;		/* change streams: the uid's slot */
	const char *options;		/* what else the state depends on, or NULL */
} DurableIdentity;

/* What carries over between calls besides the keys. */
typedef struct DurableProgress
{
	PtfTime		max_event_time; /* PTF_TIME_MIN: none yet */
	PtfTime		watermark;		/* PTF_TIME_MIN: none yet */
	XLogRecPtr	last_lsn;		/* change streams: end of the last transaction read */
	bool		last_lsn_committed; /* (not written by this transaction) */
	uint64		rows_in;
	uint64		rows_out;
	uint64		rows_late;
	uint64		rows_skipped;
} DurableProgress;

typedef struct DurableState DurableState;

/*
 * Lock the uid, creating its registry row and state table on first use;
 * check owner and identity; return the progress so far.  SPI must be
 * connected.
 */
extern DurableState *durable_open(const DurableIdentity *id,
								  DurableProgress *progress);

/* Load every kept key into ks, values through op->restore_value. */
extern void durable_load(DurableState *ds, KeyedState *ks, PtfOperator *op);

/* Which state this is: the uid, its table, and its version (changed by every write). */
extern const char *durable_uid(DurableState *ds);
extern Oid	durable_state_relid(DurableState *ds);
extern int64 durable_version(DurableState *ds);
extern Oid	durable_state_filenode(DurableState *ds);

/* End a call that changed nothing: no writes at all. */
extern void durable_close(DurableState *ds);

/* Write back changed records and the new progress. */
extern void durable_commit(DurableState *ds, KeyedState *ks, PtfOperator *op,
						   const DurableProgress *progress);

/* ptf.drop_state: forget a uid; false if there was none. */
extern bool durable_drop(const char *uid, bool of_pipeline);

#endif							/* PTF_DURABLE_H */
