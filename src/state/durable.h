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
	bool		pipeline_step;	/* a step of the uid's pipeline, in its worker */
	bool		keys_by_number; /* options name the keys by column number (a
								 * planned query's): a key column renamed is
								 * the same key */
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

	/*
	 * Owners the stream had before REASSIGN OWNED handed it over: a change
	 * committed before transaction handover_xids[i] commits is read with the
	 * rights of handover_roles[i] (the first such i), as of the change.  A
	 * call that passed the first handovers_passed of them drops them.
	 */
	int			nhandovers;
	Oid		   *handover_roles;
	TransactionId *handover_xids;
	int			handovers_passed;

	/*
	 * ptf.skip_transaction: the commit record of a transaction the stream
	 * is to pass over, or invalid; skip_passed once the stream got there,
	 * when the request goes.
	 */
	XLogRecPtr	skip_lsn;
	bool		skip_passed;
} DurableProgress;

typedef struct DurableState DurableState;

/*
 * Lock the uid, creating its registry row and state table on first use;
 * check owner and identity; return the progress so far.  SPI must be
 * connected.
 */
extern DurableState *durable_open(const DurableIdentity *id,
								  DurableProgress *progress);

/*
 * The uid's second state table, of the rows of its source by primary key
 * (state/images_table.c): made on first use, of id's layout and keys (of
 * id->rowdescs[0]).  Read like the main state (durable_attach and the
 * rest, on the DurableState returned), written back by the main state's
 * durable_commit, and let go of by its durable_close.
 */
extern DurableState *durable_open_images(DurableState *ds, const DurableIdentity *id);

/*
 * What a call does with its uid's state, once open: attach the memory the
 * operator keeps its keys in (empty, or kept from a pipeline's last step)
 * and the codec of its values; read keys into it -- all that memory lacks,
 * or the keys given, or those with a timer due in (after, upto] (the
 * layout's timer_field), once probing started (its indexes made, before
 * any input runs) -- write back what changed (flush: in the middle of the
 * call, before an eviction), and end the call: commit, or close when it
 * changed nothing.  How much to read is the engine's to decide
 * (engine/state_load.c); durable_stats says what it costs.
 */
extern void durable_attach(DurableState *ds, KeyedState *ks, const StateCodec *codec);
extern void durable_read_all(DurableState *ds);
extern bool durable_can_probe(DurableState *ds);
extern void durable_start_probing(DurableState *ds);
extern void durable_read_keys(DurableState *ds, Datum *values, bool *nulls, int n);
extern void durable_read_timers(DurableState *ds, PtfTime after, PtfTime upto);
/* The earliest stored timer field after `after` (PTF_TIME_MAX: none). */
extern PtfTime durable_next_timer(DurableState *ds, PtfTime after);

typedef struct DurableStats
{
	int64		stored_keys;	/* in the table (as counted) */
	Size		table_bytes;
	uint64		probes;			/* keys asked for, this call */
	uint64		loaded_keys;	/* read, this call */
} DurableStats;
extern void durable_stats(DurableState *ds, DurableStats *stats);

/* Write back what changed now (before evicting); count evictions. */
extern void durable_flush(DurableState *ds);
extern void durable_note_evicted(DurableState *ds, uint64 n);
/* Remove keys expired at now from memory, and the stored ones memory lacks too. */
extern void durable_sweep_expired(DurableState *ds, PtfTime now, bool stored_too);

/*
 * Which stored state this is: a pipeline's kept operator is used again
 * only while its stamp is the stored state's (and nothing must be written).
 */
typedef struct DurableStamp
{
	Oid			relid;			/* the state table */
	Oid			filenode;		/* its storage: what record TIDs point into */
	int64		version;		/* moved by every write */
} DurableStamp;
extern void durable_stamp(DurableState *ds, DurableStamp *stamp);

/* Must this call write even if it read nothing (its table was just converted)? */
extern bool durable_must_write(DurableState *ds);

/* End a call that changed nothing: no writes at all. */
extern void durable_close(DurableState *ds);

/* Write back changed keys and namespaces and the new progress. */
extern void durable_commit(DurableState *ds, const DurableProgress *progress);

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

/*
 * ptf.skip_transaction: the uid's stream is to pass over the transaction
 * whose commit record is at final_lsn (the caller's own uid, with a stream,
 * not read that far yet).  SPI must be connected.
 */
extern void durable_skip_transaction(const char *uid, XLogRecPtr final_lsn);

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

/*
 * Another room may forbid a uid's stream to start again on a slot of its
 * own when its slot is lost (src/citus/: a shard group's pipeline on a
 * promoted standby): the hook raises the error that says why.
 */
typedef void (*ptf_stream_lost_hook_type) (const char *uid);
extern ptf_stream_lost_hook_type ptf_stream_lost_hook;

#endif							/* PTF_DURABLE_H */
