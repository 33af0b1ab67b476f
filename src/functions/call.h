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

/* Builds a uid's operator over ks, for rows of rowdesc (which lives as long as it). */
typedef PtfOperator *(*PtfBuildOperator) (void *arg, KeyedState *ks, TupleDesc rowdesc);

/* The keyed state a uid's operator keeps. */
typedef struct PtfStateSpec
{
	KeySpec    *keys;
	TupleDesc	rowdesc;
	Size		hot;			/* value sizes, as keyed_state_create takes them */
	Size		cold;
	int64		ttl_us;
	int			flags;			/* KEYED_STATE_* besides DURABLE */
} PtfStateSpec;

/*
 * The operator of ds's uid, over its state: loaded from the state table
 * into new keyed state (in call_cxt), or, in a pipeline worker, the one
 * kept from the worker's last step of the uid while it is exactly the
 * stored state -- loading the state every step would cost as much as the
 * state is big.  Its output goes to emit_arg.
 */
extern PtfOperator *ptf_call_durable_operator(DurableState *ds, const PtfStateSpec *spec,
											  MemoryContext call_cxt,
											  PtfBuildOperator build, void *build_arg,
											  void *emit_arg);

/* Pipeline workers: let go of the operators of other uids. */
extern void ptf_call_forget_kept(List *keep_uids);

#endif							/* PTF_FUNCTIONS_CALL_H */
