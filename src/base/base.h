/*-------------------------------------------------------------------------
 *
 * base.h
 *	  Vocabulary every room of the extension shares: row kinds, what a row
 *	  knows of its origin, event and processing time, and the role of the
 *	  backend.  It includes nothing of ours, so any room may include it.
 *
 * "PTF" is Flink's name for a process table function: a table function
 * with state, keys, time and a changelog on its input and output.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_BASE_H
#define PTF_BASE_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

/* Flink's RowKind: what a row of a changelog means. */
typedef enum RowKind
{
	ROWKIND_INSERT = 0,			/* +I */
	ROWKIND_UPDATE_BEFORE,		/* -U */
	ROWKIND_UPDATE_AFTER,		/* +U */
	ROWKIND_DELETE				/* -D */
} RowKind;

#define ROWKIND_COUNT 4

/*
 * Not the kind of a row but a table's truncation, with a row of NULLs:
 * handed only to operators whose inputs asked for it (TRUNCATE_PASS of a
 * change stream), never emitted by one but as itself.
 */
#define ROWKIND_TRUNCATE ((RowKind) ROWKIND_COUNT)

/* true for +I and +U: the row is an image that now exists */
#define ROWKIND_IS_ADDITION(k) ((k) == ROWKIND_INSERT || (k) == ROWKIND_UPDATE_AFTER)

extern const char *rowkind_short_name(RowKind kind);	/* "+I" */
extern const char *rowkind_long_name(RowKind kind);	/* "INSERT" */
extern bool rowkind_parse(const char *s, RowKind *kind);

/*
 * Time, event or processing, is microseconds since 2000-01-01 like
 * TimestampTz, so timestamp and timestamptz columns need no conversion.
 * -infinity and +infinity are the smallest and largest values.
 * Conversions live in base/ptf_time.h.
 */
typedef int64 PtfTime;

#define PTF_TIME_MIN PG_INT64_MIN
#define PTF_TIME_MAX PG_INT64_MAX

/*
 * What a row knows about where it came from.  Rows of relations and queries
 * have none of it; rows of a change stream carry the change's LSN, their
 * transaction's commit time and xid, and two warnings: a partial row has
 * only its key columns (an old image under REPLICA IDENTITY DEFAULT), an
 * incomplete one holds unchanged TOAST values the WAL did not carry.
 */
typedef struct PtfRowMeta
{
	XLogRecPtr	lsn;
	TimestampTz commit_time;
	TransactionId xid;
	bool		partial;
	bool		incomplete;
	XLogRecPtr	final_lsn;		/* its transaction's commit record (streams) */
	bool		time_only;		/* left out by the query's WHERE: its event
								 * time moves the watermark, nothing else
								 * sees it (functions/row_filter.c) */
} PtfRowMeta;

/* A row with nothing known of its origin. */
extern const PtfRowMeta ptf_no_meta;

/*
 * An error context that names a change's transaction and its commit record
 * (ptf.skip_transaction takes that LSN): "change of transaction 735,
 * finished at 0/1A2B3C8".  Pushed where a change is decoded, handed over
 * and processed; only the innermost that knows a change speaks (a change
 * processed may be an earlier one than the change handed over, the frame
 * batching rows).  meta may change while pushed; NULL, or one without a
 * transaction, says nothing.
 */
#define PTF_CHANGE_CONTEXT_PREFIX "change of transaction "

/*
 * An error context callback for a stretch of code: pushed before it, popped
 * after it (an error unwinds error_context_stack by itself).
 */
static inline void
ptf_error_context_push(ErrorContextCallback *cb, void (*fn) (void *arg), void *arg)
{
	cb->callback = fn;
	cb->arg = arg;
	cb->previous = error_context_stack;
	error_context_stack = cb;
}

static inline void
ptf_error_context_pop(ErrorContextCallback *cb)
{
	Assert(error_context_stack == cb);
	error_context_stack = cb->previous;
}

typedef struct PtfChangeContext
{
	ErrorContextCallback cb;
	const PtfRowMeta *meta;
} PtfChangeContext;

extern void ptf_change_context_push(PtfChangeContext *cc, const PtfRowMeta *meta);
extern void ptf_change_context_pop(PtfChangeContext *cc);

struct TupleTableSlot;

/*
 * Where an input adapter hands its rows: every adapter (relations and
 * queries, change streams, CDC records) calls one of these.  meta may be
 * NULL: nothing is known of the row's origin.
 */
typedef void (*PtfRowSink) (void *arg, RowKind kind, struct TupleTableSlot *row,
							const PtfRowMeta *meta);

/*
 * Run work(arg) in a subtransaction of its own (base/subxact.c): NULL when
 * it succeeded and its work is kept; else its error, copied into the
 * caller's memory context, with all it did rolled back.
 */
extern ErrorData *ptf_try_in_subtransaction(void (*work) (void *arg), void *arg);

#endif							/* PTF_BASE_H */
