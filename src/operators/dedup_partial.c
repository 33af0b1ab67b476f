/*-------------------------------------------------------------------------
 *
 * dedup_partial.c
 *	  The workers' half of a parallel keep-first call: a filter that passes
 *	  on the rows that may be a key's answer, and drops the rows that
 *	  cannot.
 *
 * A parallel keep-first call (engine/parallel.c) splits its relation into
 * block ranges; each worker reads its ranges in block order through this
 * filter, and the leader runs the serial operator (dedup.c) over the rows
 * passed on, fed range by range in block order.  The leader thus sees a
 * subsequence of the serial call's input, in the serial order, that holds
 * every key's answer: the serial operator over it makes the serial
 * answer.  What a worker may drop:
 *	  - by arrival, a row whose key it saw before: an earlier row of the key
 *		exists, so this one is not the first;
 *	  - by event time, a row whose time is not below the least time its key
 *		had so far in this worker: an earlier row with a time as small
 *		exists, and the serial rule keeps the earliest of the least times.
 * Everything else is passed on: a key's first row in the worker, a row
 * lowering its key's least time, and, once the memory budget is spent,
 * every row of a key the filter does not hold (nothing spills here; the
 * leader's exact operator spills as the serial call does).  A NULL event
 * time is passed on for the leader to refuse as the serial call does.
 *
 * State per key is the key (by arrival) or the key and its least time
 * (by event time): never a row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "operators/dedup_partial.h"

typedef struct DedupPartial
{
	PtfOperator base;
	bool		event_time;
	uint64		overflow;
} DedupPartial;

static PtfRowResult
dedup_partial_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row,
					 const PtfRowContext *ctx)
{
	DedupPartial *d = (DedupPartial *) op;
	StateRef	ref;
	PtfTime    *least;

	Assert(ctx->input == 0 && kind == ROWKIND_INSERT);
	switch (keyed_state_lookup(op->state, ctx->keys, row, 0, true, &ref))
	{
		case KS_CREATED:
			if (d->event_time)
				*(PtfTime *) ref.value = ctx->event_time;
			break;
		case KS_FOUND:
			if (!d->event_time)
				return PTF_ROW_DONE;
			least = (PtfTime *) ref.value;
			if (ctx->event_time >= *least)
				return PTF_ROW_DONE;
			*least = ctx->event_time;
			break;
		case KS_FULL:
			d->overflow++;
			break;
		case KS_ABSENT:
			Assert(false);
			break;
	}
	ptf_operator_emit(op, kind, row);
	return PTF_ROW_DONE;
}

static void
dedup_partial_prefetch(PtfOperator *op, TupleTableSlot *row, const PtfRowContext *ctx,
					   int stage, uint64 *scratch)
{
	keyed_state_prefetch(op->state, ctx->keys, row);
}

/* no timers: the frame asks for none, and the watermark means nothing here */
static void
dedup_partial_on_timer(PtfOperator *op, const PtfTimer *timer, PtfTime watermark,
					   PtfTime proc_time)
{
	Assert(false);
}

static const PtfOperatorMethods dedup_partial_methods = {
	.name = "deduplicate_keep_first (partial)",
	.on_row = dedup_partial_on_row,
	.on_timer = dedup_partial_on_timer,
};

static const PtfOperatorMethods dedup_partial_prefetching_methods = {
	.name = "deduplicate_keep_first (partial)",
	.on_row = dedup_partial_on_row,
	.prefetch = dedup_partial_prefetch,
	.on_timer = dedup_partial_on_timer,
};

PtfOperator *
dedup_partial_create(KeySpec *keys, bool event_time, const PtfOperatorEnv *env)
{
	DedupPartial *d;
	KeyedStateSpec spec;

	memset(&spec, 0, sizeof(spec));
	spec.keys = keys;
	spec.hot = event_time ? sizeof(PtfTime) : 0;
	spec.mem_limit = env->mem_limit;
	spec.expected_keys = env->expected_keys;
	d = (DedupPartial *) ptf_operator_alloc(sizeof(DedupPartial), &dedup_partial_methods, env);
	d->base.state = keyed_state_create(&spec, d->base.cxt);
	if (keyed_state_can_prefetch(d->base.state))
		d->base.methods = &dedup_partial_prefetching_methods;
	d->event_time = event_time;
	return &d->base;
}

uint64
dedup_partial_overflow(PtfOperator *op)
{
	return ((DedupPartial *) op)->overflow;
}
