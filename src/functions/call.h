/*-------------------------------------------------------------------------
 *
 * call.h
 *	  The run of a table-function call, the same for every function: the
 *	  input (relation, query or change stream) pushed through the frame, and
 *	  what the call did stored with the uid's state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_CALL_H
#define PTF_FUNCTIONS_CALL_H

#include "frame.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "operators/operator.h"
#include "state/durable.h"

/*
 * Connect SPI and make the input ready: the relation or query in *sql_in,
 * or, with changes, the uid's change stream, whose slot name is returned
 * (NULL otherwise).
 */
extern char *ptf_call_prepare(PtfSqlInput *sql_in, Oid relid, TupleDesc rowdesc,
							  const char *query, bool changes, const char *uid);

/* Where input rows go, when not straight into the frame. */
typedef struct PtfCallSinks
{
	PtfRowSink	rows;			/* a relation's or query's rows */
	PtfMetaRowSink changes;		/* a change stream's */
	void	   *arg;
} PtfCallSinks;

/*
 * Push the input through the frame to its end: the relation or query of
 * sql_in, or, when slot_name is given, the table's change stream from where
 * progress left it; through sinks, if given, which push into the frame
 * themselves.  end_of_stream: a bounded input (no uid) ends its stream,
 * flushing what waits for a watermark.  Returns the change stream read, or
 * NULL.
 */
extern PtfChangeStream *ptf_call_run(PtfSqlInput *sql_in, Oid relid, TupleDesc rowdesc,
									 const char *slot_name,
									 ChangeStreamTruncate on_truncate,
									 const DurableProgress *progress,
									 const PtfCallSinks *sinks,
									 PtfFrame *frame, bool end_of_stream);

/*
 * Store the call's effect with the uid's state, in the caller's
 * transaction: counters, watermark, the stream's position, expired keys
 * swept, changed keys written.  rows_skipped: what the function itself
 * passed over.
 */
extern void ptf_call_store(DurableState *ds, PtfOperator *op, PtfFrame *frame,
						   PtfChangeStream *cs, DurableProgress *progress,
						   uint64 rows_out, uint64 rows_skipped, int64 ttl_us);

/*
 * Operators kept between calls.  A pipeline worker calls the same uid step
 * after step; loading its state from the table every time would cost as
 * much as the state is big.  So the worker keeps the operator (and its
 * keyed state) of each uid, and uses it again while the uid's stored
 * version is the one it wrote last.  Elsewhere nothing is kept.
 *
 * ptf_call_kept_operator: the kept operator of ds's uid, when it is
 * exactly the stored state (it is then the caller's, until
 * ptf_call_store); else NULL.
 * ptf_call_keep_context: where to build an operator to keep (the keyed
 * state's context included), or NULL when operators are not kept; the
 * row type and keys it uses must be copied there too.
 * ptf_call_keep: keep op, built in that context.
 */
extern PtfOperator *ptf_call_kept_operator(DurableState *ds);
extern MemoryContext ptf_call_keep_context(DurableState *ds);
extern void ptf_call_keep(DurableState *ds, PtfOperator *op);

/* Pipeline workers: let go of the operators of other uids. */
extern void ptf_call_forget_kept(List *keep_uids);

#endif							/* PTF_FUNCTIONS_CALL_H */
