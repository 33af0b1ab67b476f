/*-------------------------------------------------------------------------
 *
 * durable.h
 *	  Durable keyed state, named by uid, kept in tables of the extension
 *	  and changed in the caller's transaction.
 *
 * ptf.uid_registry has a row per uid (function, owner, row types, keys,
 * watermarks, counters); each uid's keys live in a table of their own,
 * ptf.state_<n>, laid out as the operator declares (state/layout.h), so
 * state is plain SQL data: inspectable, WAL-logged, dumped and replicated.
 *
 * A call locks its uid (calls of one uid serialize), loads the keys into
 * a memory KeyedState, runs, and writes back only the keys and namespaces
 * that changed.  A ROLLBACK undoes all of it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DURABLE_H
#define PTF_DURABLE_H

#include "access/xlogdefs.h"

#include "state/keyed_state.h"
#include "state/layout.h"

#define DURABLE_MAX_INPUTS 4

/* What a uid was created for; a later call must agree. */
typedef struct DurableIdentity
{
	const char *uid;
	const char *function;		/* SQL name, e.g. "deduplicate_keep_first" */
	int			ninputs;
	TupleDesc	rowdescs[DURABLE_MAX_INPUTS];	/* the inputs' row types */
	KeySpec    *keys;			/* key columns, of the first input */
	const char *on_time;		/* NULL: none */
	Oid			time_type;		/* type of on_time, or InvalidOid */
	const char *slot_name;		/* change streams: the uid's slot */
	const char *options;		/* what else the state depends on, or NULL */
	const StateLayout *layout;	/* what the state table holds */
	int			nspaces;		/* namespaces per key */
	bool		keeps_images;	/* the state holds rows of the inputs */
	Oid			relids[DURABLE_MAX_INPUTS]; /* the inputs' tables, or InvalidOid */
} DurableIdentity;

/* What carries over between calls besides the keys. */
typedef struct DurableProgress
{
	int			ninputs;
	PtfTime		max_event_time[DURABLE_MAX_INPUTS]; /* PTF_TIME_MIN: none yet */
	PtfTime		watermark[DURABLE_MAX_INPUTS];	/* per input */
	PtfTime		last_row_proc_time[DURABLE_MAX_INPUTS]; /* idle rule */
	PtfTime		combined_watermark; /* what the operator saw last */
	XLogRecPtr	last_lsn;		/* change streams: end of the last transaction read */
	bool		last_lsn_committed; /* (not written by this transaction) */
	uint64		rows_in;
	uint64		rows_out;
	uint64		rows_late;
	uint64		rows_skipped;
	bool		created;		/* the uid was made by this call */
	/*
	 * A change stream's initial snapshot (snapshot => true): NULL, "pending"
	 * (asked for, not read yet), "resync" (ptf.resync: asked for over the
	 * state kept), or the snapshot read ("lsn xmin xmax xip..."), whose
	 * transactions the stream skips until it passes lsn.
	 */
	char	   *stream_snapshot;
	bool		snapshot_changed;	/* stream_snapshot must be written */
} DurableProgress;

typedef struct DurableState DurableState;

/*
 * Lock the uid, creating its registry row and state table on first use;
 * check owner and identity; return the progress so far.  SPI must be
 * connected.
 */
extern DurableState *durable_open(const DurableIdentity *id,
								  DurableProgress *progress);

/* Load every kept key into ks, values through the codec. */
extern void durable_load(DurableState *ds, KeyedState *ks, const StateCodec *codec);

/*
 * Reading part of the state (see "Reading" in state/state_io.c).  attach: ks is
 * what memory holds as the call begins (kept from a pipeline's last step,
 * or empty); the calls below then add keys memory does not hold.
 * probe_keys: the keys given (n of them, values and nulls nkeys apiece);
 * probe_timers: keys with a timer in (after, upto] (the layout's
 * timer_field); load_rest: every key not held yet.
 */
extern void durable_attach(DurableState *ds, KeyedState *ks);
extern bool durable_can_probe(DurableState *ds);
extern void durable_prepare_probes(DurableState *ds, KeyedState *ks);
/* Write back what changed now (mid-call, before evicting); count evictions. */
extern void durable_flush(DurableState *ds, KeyedState *ks, const StateCodec *codec);
extern void durable_note_evicted(DurableState *ds, uint64 n);
/* Delete stored keys expired at now that memory does not hold. */
extern void durable_sweep_expired(DurableState *ds, KeyedState *ks, PtfTime now);
extern void durable_probe_keys(DurableState *ds, KeyedState *ks, const StateCodec *codec,
							   Datum *values, bool *nulls, int n);
extern void durable_probe_timers(DurableState *ds, KeyedState *ks, const StateCodec *codec,
								 PtfTime after, PtfTime upto);
extern void durable_load_rest(DurableState *ds, KeyedState *ks, const StateCodec *codec);
/* The earliest stored timer field after `after` (PTF_TIME_MAX: none). */
extern PtfTime durable_next_timer(DurableState *ds, PtfTime after);
extern int64 durable_stored_keys(DurableState *ds);
extern Size durable_table_bytes(DurableState *ds);
extern uint64 durable_probes(DurableState *ds);
extern uint64 durable_loaded_keys(DurableState *ds);

/* Which state this is: the uid, its table, and its version (changed by every write). */
extern const char *durable_uid(DurableState *ds);
extern Oid	durable_state_relid(DurableState *ds);
extern int64 durable_version(DurableState *ds);
extern Oid	durable_state_filenode(DurableState *ds);

/* Must this call write even if it read nothing (its table was just converted)? */
extern bool durable_must_write(DurableState *ds);

/* End a call that changed nothing: no writes at all. */
extern void durable_close(DurableState *ds);

/* Write back changed keys and namespaces and the new progress. */
extern void durable_commit(DurableState *ds, KeyedState *ks, const StateCodec *codec,
						   const DurableProgress *progress);

/*
 * ptf.drop_state: forget a uid; false if there was none.  *slot_name is
 * its change stream's slot, for the caller to drop, or NULL.
 */
extern bool durable_drop(const char *uid, bool of_pipeline, char **slot_name);

/*
 * ptf.resync: the uid's next call reads its tables as they are then and
 * says the net effect on its state, then goes on with the changes after.
 */
extern void durable_resync(const char *uid);

/* A stream that lost its slot goes on, on slot_name, brought in line */
extern bool durable_stream_can_restart(const char *uid);
extern void durable_restart_stream(const char *uid, const char *slot_name);

/* ptf.state: stored keys expired at now, and their rows' bytes; false: not the caller's */
extern bool durable_count_expired(Oid state_relid, PtfTime now, int64 *keys, int64 *bytes);

/* A stored row image (an SF_IMAGE field) as a row of desc: ptf.state_row(). */
extern Datum durable_image_datum(bytea *image, TupleDesc desc);

/* Refusals that name the uid and the way out. */
extern void durable_refuse_pipeline_uid(const char *uid, const char *pipeline);

/* Refused (42501) unless the caller has the rights of the uid's owner. */
extern void durable_check_owner(const char *uid, Oid owner);

/* the uid whose call gave the current transaction its xid, or NULL */
extern const char *durable_xid_writer(void);

#endif							/* PTF_DURABLE_H */
