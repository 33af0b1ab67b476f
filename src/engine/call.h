/*-------------------------------------------------------------------------
 *
 * call.h
 *	  The run of a table-function call, the same for every function.
 *
 * A function fills a PtfCall -- its inputs (relation, query, or change
 * stream), its time and keys per input, its operator's constructor and
 * state layout, where the output goes -- and ptf_call_run() does the rest:
 * it prepares the inputs, opens the uid's durable state (or makes memory
 * state), builds (or, in a pipeline worker, reuses) the operator, runs
 * every input through the frame, and stores what the call did with the
 * uid, in the caller's transaction.  A new function is its arguments plus
 * its operator.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_CALL_H
#define PTF_FUNCTIONS_CALL_H

#include "frame.h"
#include "engine/output.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "operators/operator.h"

typedef struct PtfCall PtfCall;

/*
 * How a bounded one-shot call over a relation may be run partly in
 * parallel workers (engine/parallel.c); the function says which way suits
 * its operator, the engine decides whether it runs that way.
 */
typedef enum PtfParallelMode
{
	PTF_PARALLEL_NONE = 0,
	/* keep-first by arrival: workers pass on each key's first row they see */
	PTF_PARALLEL_FIRST_ARRIVAL,
	/* keep-first by event time: workers pass on rows lowering a key's least time */
	PTF_PARALLEL_FIRST_EVENT,
	/* the operator whole in every worker over a share of one input; its output is the call's */
	PTF_PARALLEL_SPLIT,
	/*
	 * workers' operators emit partial rows (call->partial_desc) at the end of
	 * their share, which the leader's operator combines: a further input of
	 * its frame, call->ninputs, keyed by call->partial_keys
	 */
	PTF_PARALLEL_PARTIAL,
	/*
	 * the operator whole in every worker over the rows of its share of the
	 * keys, its one input read whole by each; its output is the call's
	 */
	PTF_PARALLEL_BY_KEY
} PtfParallelMode;

/* What the operator being built is part of (build sees call->parallel_role). */
typedef enum PtfParallelRole
{
	PTF_ROLE_SERIAL = 0,
	PTF_ROLE_LEADER,
	PTF_ROLE_WORKER
} PtfParallelRole;

typedef struct PtfCallInput
{
	const char *name;			/* "input", "probe", "build" (messages) */
	PtfInputArg arg;			/* its row type, and relation */
	const char *query;			/* its rows come from this query, or NULL */
	ChangeStreamTruncate on_truncate;	/* for its change stream */
	ChangeStreamOldRows old_rows;	/* what its stream's old rows must hold */
	bool		inserts_only;	/* its stream's updates are passed over */
	bool		rows_not_kept;	/* no row of it kept to complete an update from */

	/*
	 * An upsert source: its change stream's updates and deletes carry only
	 * these key columns (the table's replica identity), and it is read
	 * through the last row kept per key (engine/upsert.c) -- the first
	 * input only.  NULL: its rows go to the operator as they come.
	 */
	KeySpec    *upsert_keys;

	/*
	 * What the frame needs of it: keys and time columns, set by the
	 * function; the changelog flag is set by the call.  Its row type is the
	 * input's, unless an adapter makes rows of another type of them (CDC
	 * records into rows of the target): the operator and the uid's state
	 * see rows of frame.rowdesc.
	 */
	PtfFrameInputSpec frame;

	/*
	 * Rows go through the adapter, if any, which pushes them into the frame
	 * itself (frame_push with handle); else straight into the frame.
	 */
	PtfRowSink	adapter;
	void	   *adapter_arg;

	/* set by ptf_call_run */
	PtfSqlInput sql;			/* sql.changelog: the query returns (kind, data) */
	PtfFrameInput *handle;
} PtfCallInput;

/* Operators' rowdescs and keys copied for their lifetime. */
typedef struct PtfCallBuild
{
	TupleDesc	rowdescs[FRAME_MAX_INPUTS];
	KeySpec    *keys[FRAME_MAX_INPUTS];
} PtfCallBuild;

struct PtfCall
{
	const char *function;		/* SQL name */
	struct PtfStep *step;		/* the step it runs in (engine/step.h), or NULL */
	int			ninputs;
	PtfCallInput inputs[FRAME_MAX_INPUTS];	/* in the order bounded inputs are read */
	const char *uid;			/* NULL: memory state for this call only */
	bool		changes;		/* the inputs' change streams (needs uid) */
	bool		snapshot;		/* a stream's first call starts with its tables' rows */
	bool		need_proc_time; /* TTL or processing-time timers */
	bool		probe_ok;		/* its state may be read a key at a time */
	uint64		expected_keys;	/* set by ptf_call_run: the planner's estimate, 0: none */
	/*
	 * Of those keys, the operator built here holds one share in this many
	 * (a BY_KEY worker, or leader with a share: engine/parallel.c); -1:
	 * none (a BY_KEY leader whose workers hold them all); 0: all of them.
	 */
	int			keys_share_of;

	/* what a uid's state depends on, besides the inputs and keys */
	const char *on_time;
	Oid			time_type;
	const char *options;
	const StateLayout *layout;
	int			nspaces;
	bool		keeps_images;	/* the state holds rows of the inputs */
	bool		keys_by_number; /* options name the keys by column number */
	int64		ttl_us;			/* expired keys are swept before writing */

	/* called once the inputs are planned, before any state is touched */
	void		(*prepared) (PtfCall *call);

	/* the operator, over the rowdescs and keys of b */
	PtfOperator *(*build) (PtfCall *call, const PtfOperatorEnv *env,
						   const PtfCallBuild *b);
	PtfEmitFn	emit;
	void	   *emit_arg;
	PtfOutput  *out;			/* rows_out, and the frame for row checks */

	/* rows the function passed over so far (counted with the uid), or NULL */
	uint64		(*skipped) (PtfCall *call, PtfOperator *op);
	/* called after a successful run, before the call's memory goes, or NULL */
	void		(*finished) (PtfCall *call);
	void	   *arg;			/* the function's */

	/* parallel workers may run it this way (set in prepared), splitting this input */
	PtfParallelMode parallel;
	int			parallel_input;
	TupleDesc	partial_desc;	/* PTF_PARALLEL_PARTIAL */
	KeySpec    *partial_keys;
	PtfParallelRole parallel_role;	/* set by the engine */

	/* set by ptf_call_run */
	MemoryContext cxt;			/* the call's: the caller deletes it */
	PtfFrame   *frame;
	struct PtfUpsert *upsert;	/* the first input's normalizer, or NULL */
	FunctionCallInfo fcinfo;	/* of the SQL call (ptf_call_output) */
};

/* An empty call of function, its memory context made. */
extern void ptf_call_init(PtfCall *call, const char *function);

/* Add an input; returns it for the function to fill its frame spec. */
extern PtfCallInput *ptf_call_add_input(PtfCall *call, const char *name,
										const PtfInputArg *arg, const char *query);

extern void ptf_call_run(PtfCall *call);

/*
 * A fresh operator of a call without a uid (a parallel worker's), and the
 * factory of its spilled partitions' (arg: the call).
 */
extern PtfOperator *ptf_call_build_operator(PtfCall *call, bool durable);
extern void ptf_call_key_estimates(Oid relid, KeySpec *keys, uint64 *expected,
								   PtfKeyRange *range);
extern PtfOperator *ptf_call_spill_factory(void *arg, bool unbounded);

/*
 * The tail every set-returning entry point shares: its rows are the
 * function's materialized result (emit NULL: as they come, into out), and
 * the call is run, finished and its memory freed.
 */
extern void ptf_call_output(PtfCall *call, FunctionCallInfo fcinfo, PtfOutput *out,
							PtfEmitFn emit, void *emit_arg);
extern Datum ptf_call_return(PtfCall *call);

#endif							/* PTF_FUNCTIONS_CALL_H */
