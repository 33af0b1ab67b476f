/*-------------------------------------------------------------------------
 *
 * change_stream.h
 *	  A table's changes as an input (changes => true): a logical replication
 *	  slot per uid, decoded inside the calling backend, exactly once.
 *
 * The uid's slot is created by its first call, before the call writes
 * anything.  Each call reads from the last position its uid committed,
 * skips what it already processed, and hands whole transactions to the
 * frame; the end LSN of the last transaction read is stored with the
 * uid's state in the caller's transaction.  The slot is moved forward only
 * to a committed position, at the start of the next call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CHANGE_STREAM_H
#define PTF_CHANGE_STREAM_H

#include "access/tupdesc.h"
#include "nodes/pg_list.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

#include "base/base.h"

typedef struct PtfChangeStream PtfChangeStream;

/* What to do when the source is truncated (no row kind says it). */
typedef enum ChangeStreamTruncate
{
	TRUNCATE_SKIP,				/* nothing to emit: note it and go on */
	TRUNCATE_ERROR,				/* a changelog cannot represent it */
	TRUNCATE_PASS				/* handed over as ROWKIND_TRUNCATE */
} ChangeStreamTruncate;

extern int	ptf_max_changes_per_call;	/* GUC; 0: no limit */
extern int	ptf_max_streams_per_role;	/* GUC; -1: no limit */

/* Roles that may start change streams besides superusers and REPLICATION ones. */
#define PTF_STREAM_ROLE "ptf_stream"

/* What the last change_stream_run of this backend read (pipelines report it). */
typedef struct ChangeStreamReport
{
	XLogRecPtr	end_of_wal;		/* read up to here at most */
	XLogRecPtr	position;		/* end of the last transaction read */
	TimestampTz last_commit_time;	/* of that transaction */
	bool		reached_end;	/* not stopped by ptf.max_changes_per_call */
} ChangeStreamReport;

extern ChangeStreamReport change_stream_last_report;

/* Set around a first call that only makes the slot (create_pipeline). */
extern bool change_stream_start_only;

/*
 * Checks the tables (plain tables the caller may read entirely, without
 * row-level security), then makes sure the uid has a slot, creating it if
 * this is the uid's first call -- which needs superuser, REPLICATION or
 * the privileges of PTF_STREAM_ROLE, and a role under its
 * ptf.max_streams_per_role.  Must run before the call writes anything
 * (a slot cannot be created in a transaction that has).  Returns the slot
 * name, for the uid's registry row.
 */
extern char *change_stream_prepare(const char *uid, const Oid *relids, int nrelids);

/* One table whose changes a stream reads, and where its rows go. */
typedef struct ChangeStreamTable
{
	Oid			relid;
	TupleDesc	rowdesc;
	ChangeStreamTruncate on_truncate;
	PtfRowSink	sink;
	void	   *sink_arg;
} ChangeStreamTable;

/*
 * A stream of the changes of one or more tables, read through one slot:
 * the tables' changes arrive interleaved in commit order.
 */
extern PtfChangeStream *change_stream_create(const char *slot_name,
											 const ChangeStreamTable *tables,
											 int ntables);

/*
 * Decode the slot: every transaction ending after resume_after (the uid's
 * stored position, committed or not) is handed to the tables' sinks, up to
 * about ptf.max_changes_per_call rows, stopping at a transaction's end.
 */
extern void change_stream_run(PtfChangeStream *cs, XLogRecPtr resume_after,
							  bool resume_committed);

/* the end LSN of the last transaction read (the position to store) */
/*
 * A stream that starts with a snapshot of its tables: transactions the
 * snapshot saw committed are passed over (their rows were read from it),
 * the position moving past them.  Before change_stream_run.
 */
extern void change_stream_skip_snapshot(PtfChangeStream *cs, TransactionId xmin,
										TransactionId xmax, const TransactionId *xip,
										int nxip);

extern XLogRecPtr change_stream_position(PtfChangeStream *cs);
extern uint64 change_stream_skipped(PtfChangeStream *cs);

/* ptf.drop_state: the uid's slot goes with it (if it is this database's) */
extern void change_stream_drop_slot(const char *slot_name);

/*
 * Can an UPDATE of the table log a new image that lacks values (unchanged
 * TOASTed ones, under any replica identity but FULL)?
 */
extern bool change_stream_images_may_be_incomplete(Oid relid);

/*
 * The same once the transaction commits (if the slot is this database's):
 * for drops that may still fail or roll back (DROP OWNED, DROP EXTENSION).
 */
extern void change_stream_drop_slot_at_commit(const char *slot_name);

/* GUCs of change streams (ptf.max_changes_per_call), from _PG_init */
extern void change_stream_define_gucs(void);

/* Let the slot go of what is before lsn, a committed position. */
extern void change_stream_confirm(const char *slot_name, XLogRecPtr lsn);

#endif							/* PTF_CHANGE_STREAM_H */
