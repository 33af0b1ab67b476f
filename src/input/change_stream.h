/*-------------------------------------------------------------------------
 *
 * change_stream.h
 *	  A table's changes as an input (changes => true): a logical replication
 *	  slot per uid (input/stream_slot.h), decoded inside the calling
 *	  backend, exactly once.
 *
 * Each call reads from the last position its uid committed, skips what it
 * already processed, decodes whole transactions, and once decoding is
 * done hands their rows to the frame; the end LSN of the last transaction
 * read is stored with the uid's state in the caller's transaction.  The
 * slot is moved forward only to a committed position, at the start of the
 * next call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CHANGE_STREAM_H
#define PTF_CHANGE_STREAM_H

#include "access/tupdesc.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "base/base.h"
#include "base/kept.h"
#include "input/stream_slot.h"

typedef struct PtfChangeStream PtfChangeStream;

/* What to do when the source is truncated (no row kind says it). */
typedef enum ChangeStreamTruncate
{
	TRUNCATE_SKIP,				/* nothing to emit: note it and go on */
	TRUNCATE_ERROR,				/* a changelog cannot represent it */
	TRUNCATE_PASS				/* handed over as ROWKIND_TRUNCATE */
} ChangeStreamTruncate;

/*
 * What a reader needs of an update's or delete's old row, which the WAL
 * holds as the table's replica identity was when the change was made: a
 * change made under a weaker one cannot be read right (the identity
 * switched and back between two calls of a uid).
 */
typedef enum ChangeStreamOldRows
{
	OLD_ROWS_ANY,				/* whatever the WAL has */
	OLD_ROWS_KEY,				/* the key at least: not NOTHING */
	OLD_ROWS_FULL				/* whole rows: REPLICA IDENTITY FULL */
} ChangeStreamOldRows;

extern int	ptf_max_changes_per_call;	/* GUC; 0: no limit */

/* How far a read of a stream went (change_stream_report). */
typedef struct ChangeStreamReport
{
	XLogRecPtr	end_of_wal;		/* read up to here at most */
	XLogRecPtr	position;		/* end of the last transaction read */
	TimestampTz last_commit_time;	/* of that transaction */
	bool		reached_end;	/* not stopped by ptf.max_changes_per_call */
} ChangeStreamReport;

/* One table whose changes a stream reads, and where its rows go. */
typedef struct ChangeStreamTable
{
	Oid			relid;
	TupleDesc	rowdesc;
	ChangeStreamTruncate on_truncate;
	ChangeStreamOldRows old_rows;
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
 * A stream that starts with a snapshot of its tables: transactions the
 * snapshot saw committed are passed over (their rows were read from it),
 * the position moving past them.  Before change_stream_run.
 */
extern void change_stream_skip_snapshot(PtfChangeStream *cs, TransactionId xmin,
										TransactionId xmax, const TransactionId *xip,
										int nxip);

/*
 * A stream REASSIGN OWNED handed over (state/durable.h): a change committed
 * before transaction xids[i] commits is read with the rights of roles[i],
 * the first such i, rather than the caller's.  Before change_stream_run;
 * afterwards, how many of them the stream passed.
 */
extern void change_stream_handovers(PtfChangeStream *cs, const Oid *roles,
									const TransactionId *xids, int n);
extern int	change_stream_handovers_passed(PtfChangeStream *cs);

/*
 * Decode the slot: every transaction ending after resume_after (the uid's
 * stored position, committed or not) is handed to the tables' sinks, up to
 * about ptf.max_changes_per_call rows, stopping at a transaction's end --
 * decoded first, handed over once decoding is done.  kept: where a
 * pipeline worker keeps decoding contexts between its steps, or NULL.
 */
extern void change_stream_run(PtfChangeStream *cs, XLogRecPtr resume_after,
							  bool resume_committed, PtfKeptSet *kept);

/* the end LSN of the last transaction read (the position to store) */
extern XLogRecPtr change_stream_position(PtfChangeStream *cs);

/*
 * ptf.skip_transaction: pass over the transaction whose commit record is at
 * final_lsn, if the stream meets it (before change_stream_run); after the
 * run, whether the stream reached that position -- skipping it, or finding
 * no transaction there (a WARNING) -- so that the request can go.
 */
extern void change_stream_skip_transaction(PtfChangeStream *cs, XLogRecPtr final_lsn);
extern bool change_stream_skip_lsn_passed(PtfChangeStream *cs);
/* truncations and changes without a key passed over */
extern uint64 change_stream_skipped(PtfChangeStream *cs);
/* How far change_stream_run read (a stream not run: nothing, at its end). */
extern void change_stream_report(PtfChangeStream *cs, ChangeStreamReport *report);

/*
 * Let the slot go of what is before lsn, a committed position; a kept
 * decoding context of the slot (in kept) goes on from there.
 */
extern void change_stream_confirm(const char *slot_name, XLogRecPtr lsn, PtfKeptSet *kept);

/*
 * Can an UPDATE of the table log a new image that lacks values (unchanged
 * TOASTed ones, under any replica identity but FULL)?
 */
extern bool change_stream_images_may_be_incomplete(Oid relid);

/* GUCs of change streams (ptf.max_changes_per_call), from _PG_init */
extern void change_stream_define_gucs(void);

#endif							/* PTF_CHANGE_STREAM_H */
