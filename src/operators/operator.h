/*-------------------------------------------------------------------------
 *
 * operator.h
 *	  The contract between the frame and an operator.
 *
 * An operator is pure per-row logic: Flink's KeyedProcessFunction, or a
 * two-input one.  The frame (frame.c) feeds it rows of one or more inputs
 * as (kind, row, context), the context saying which input the row came
 * from, its key columns, its event and processing time, what the row
 * knows of its origin and the current watermark; it hands it the timers
 * that are due; it tells it when the watermark moves.  The operator keeps
 * what it needs in its own KeyedState (state/keyed_state.h), registers
 * timers with its TimerService (state/timers.h), and emits rows through a
 * callback.  It knows nothing of SPI, tables, where rows come from or
 * where its output goes, and it may include nothing above state/.
 *
 * What a new operator provides:
 *	  - on_row, and on_timer if it registers timers (on_watermark if it
 *		wants to see every watermark move; prefetch if it can start
 *		fetching a row's state before the row is processed);
 *	  - memory, keys and destroy: the frame measures and frees state only
 *		through them (its spilled partitions run in fresh operators);
 *	  - for durable state, its KeyedState and a StateCodec with the layout
 *		of what it stores (state/layout.h), whose restore re-registers the
 *		timers its values imply.
 * A function (functions/) then only has to parse its arguments, build the
 * operator, and run it through engine/call.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_OPERATOR_H
#define PTF_OPERATOR_H

#include "executor/tuptable.h"

#include "base/base.h"
#include "state/dense_keys.h"
#include "state/keyed_state.h"
#include "state/layout.h"
#include "state/timers.h"

/* Where an operator's output goes. */
typedef void (*PtfEmitFn) (void *arg, RowKind kind, TupleTableSlot *row);

typedef enum PtfRowResult
{
	PTF_ROW_DONE,				/* consumed (emitted, kept or dropped) */
	PTF_ROW_LATE,				/* dropped: behind the watermark */
	PTF_ROW_LATE_KEPT,			/* behind the watermark, yet used (counted late) */
	PTF_ROW_SPILL				/* state is full: the frame must spill it */
} PtfRowResult;

/* What the frame knows of the row it hands over. */
typedef struct PtfRowContext
{
	int			input;			/* which input of the frame, from 0 */
	KeySpec    *keys;			/* that input's key columns */
	const PtfRowMeta *meta;		/* its origin */
	PtfTime		event_time;		/* 0 without on_time */
	PtfTime		proc_time;		/* 0 when no processing time is needed */
	PtfTime		watermark;		/* the operator's: the least of the inputs' */
	/* a batched row's prefetch scratch (methods.prefetch), else NULL */
	const uint64 *prefetched;
} PtfRowContext;

#define PTF_PREFETCH_WORDS 4

typedef struct PtfOperator PtfOperator;

typedef struct PtfOperatorMethods
{
	const char *name;
	PtfRowResult (*on_row) (PtfOperator *op, RowKind kind, TupleTableSlot *row,
							const PtfRowContext *ctx);
	/*
	 * optional: start fetching the state a row will need, in stages 0 ..
	 * prefetch_stages - 1 over a batch of rows (each stage of all rows
	 * before the next, all before the first row is processed); scratch is
	 * the row's, PTF_PREFETCH_WORDS words carried from stage to stage and
	 * then to on_row as ctx->prefetched (keyed state's staged prefetch
	 * takes the first three, the operator the last)
	 */
	void		(*prefetch) (PtfOperator *op, TupleTableSlot *row,
							 const PtfRowContext *ctx, int stage, uint64 *scratch);
	/*
	 * optional, with prefetch: its stages after the first over a whole
	 * batch in one call (scratch[i] the i-th row's), for an operator whose
	 * later stages read only the scratch
	 */
	void		(*prefetch_batch) (PtfOperator *op, int stage, uint64 *const *scratch,
								   int n);
	int			prefetch_stages;	/* 0 counts as 1 */
	int			prefetch_input; /* whose rows are prefetched: 0 for one input */
	/* optional: the watermark moved (before its due timers fire) */
	void		(*on_watermark) (PtfOperator *op, PtfTime watermark,
								 PtfTime proc_time);
	/* a timer is due: watermark and processing time at its firing */
	void		(*on_timer) (PtfOperator *op, const PtfTimer *timer,
							 PtfTime watermark, PtfTime proc_time);
	/* optional: a call starts, under the watermark its state was stored with */
	void		(*on_start) (PtfOperator *op, PtfTime watermark);
	/*
	 * optional: ptf.resync reads the tables' rows as they are now over the
	 * whole state (before: end false), then the operator says the net
	 * effect on keys no row came for (end true).  Without it a stream
	 * cannot be resynchronized.
	 */
	void		(*on_resync) (PtfOperator *op, bool end);
	/* optional: the end of a call's input (a uid's call: the stream goes on) */
	void		(*on_finish) (PtfOperator *op, bool end_of_stream);
	/*
	 * optional: the key of ref leaves memory (durable state read a key at
	 * a time, state/keyed_state.h); release what the value holds and say
	 * true, or false to keep the key (it has a pending timer).  Without it
	 * the operator's keys are never evicted.
	 */
	bool		(*evict) (PtfOperator *op, StateRef *ref);
	/*
	 * optional: the memory it takes, its keys, its end.  NULL: those of
	 * op->cxt and op->state (ptf_operator_memory, _keys, _destroy), which
	 * callers always go through.
	 */
	Size		(*memory) (PtfOperator *op);
	uint64		(*keys) (PtfOperator *op);
	void		(*destroy) (PtfOperator *op);
} PtfOperatorMethods;

struct PtfOperator
{
	const PtfOperatorMethods *methods;
	MemoryContext cxt;			/* the operator, its state and timers */
	PtfEmitFn	emit;
	void	   *emit_arg;
	TimerService *timers;		/* registered by the operator, fired by the frame */
	/* for durable state (engine/call.c loads and stores it) */
	KeyedState *state;
	StateCodec	codec;
	/*
	 * rows the uid read before this call: arrival numbers go on from there
	 * when the state's keys are not all in memory to say so
	 */
	uint64		rows_before;

	/*
	 * state the operator keeps beside op->state that its prefetch reaches
	 * (bytes): with the state's table, whether rows are worth batching
	 */
	Size		prefetch_bytes;

	/*
	 * the last column of a row its processing reads, beside the key and
	 * time columns (0: none, or not known): a batched row is deformed that
	 * far at once, not a column at a time
	 */
	AttrNumber	row_attnos_upto;
};

static inline void
ptf_operator_emit(PtfOperator *op, RowKind kind, TupleTableSlot *row)
{
	op->emit(op->emit_arg, kind, row);
}

/* Where an operator is made: what every constructor takes besides its options. */
typedef struct PtfOperatorEnv
{
	MemoryContext cxt;			/* the operator and its state live here */
	bool		durable;		/* its state is a uid's, written back */
	Size		mem_limit;		/* state memory budget, 0: unbounded */
	uint64		expected_keys;	/* the planner's estimate of the keys, 0: none */
	PtfKeyRange key_range;		/* and of the values of a one-integer key */
	PtfEmitFn	emit;
	void	   *emit_arg;
} PtfOperatorEnv;

/*
 * A new operator of size bytes (its struct, which starts with PtfOperator),
 * zeroed, in a memory context of its own under env->cxt, with its methods,
 * output and timers set up.  Allocate everything else of it in op->cxt.
 */
extern PtfOperator *ptf_operator_alloc(Size size, const PtfOperatorMethods *methods,
									   const PtfOperatorEnv *env);

/* An operator's memory, keys and end: its methods', or by default op->cxt's and op->state's */
extern Size ptf_operator_memory(PtfOperator *op);
extern uint64 ptf_operator_keys(PtfOperator *op);
extern void ptf_operator_destroy(PtfOperator *op);

/*
 * Recycle the memory of keys the operator removed, when nothing points at
 * them any more: its timers of them are forgotten, and a durable state's
 * changes must have been written back.  The frame calls it between rows,
 * the call after storing a uid's state.  Cheap when there is nothing to
 * do; it does the work only once enough removed keys piled up (min_removed).
 */
extern void ptf_operator_reclaim(PtfOperator *op, int min_removed);

/*
 * Evict the keys of op's durable state not used since the last pass
 * (state/keyed_state.h): nothing of it may wait to be written back.  Their
 * timers are forgotten and their memory recycled; returns how many went,
 * 0 for an operator without an evict method.
 */
extern uint64 ptf_operator_evict(PtfOperator *op);

#endif							/* PTF_OPERATOR_H */
