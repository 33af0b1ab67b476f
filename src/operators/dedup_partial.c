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
 * time never reaches the filter: the worker's frame refuses it, with the
 * serial call's error.
 *
 * State per key is the key (by arrival) or the key and its least time
 * (by event time): never a row.  A key of one integer column filling a
 * range densely (by the rule of dense_keys_create, from the statistics the
 * serial operator asks, with a slot of its own size) is a bit of a bitmap
 * over the range instead, and by event time its least time an entry of an
 * array beside it: a worker's filter then costs what the serial call's
 * bitmap does, not a lookup in a map that, in a fresh process, also
 * faults its pages in.  Keys outside the range, and NULL, go to the map.
 * Each worker's filter is right on its own, whichever way it keeps a key.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "operators/dedup_partial.h"
#include "state/dense_keys.h"

typedef struct DedupPartial
{
	PtfOperator base;
	bool		event_time;
	uint64		overflow;
	DenseKeys  *dense;			/* keys seen in the range, or NULL */
	PtfTime    *dense_least;	/* by event time: their least times */
} DedupPartial;

/* a batched row's range membership, noted by its prefetch (dense_keys_note) */
#define PARTIAL_SCRATCH_DENSE (PTF_PREFETCH_WORDS - 1)

/* A key of the range: pass the row on unless it cannot be the answer. */
static bool
dense_passes(DedupPartial *d, uint64 bit, PtfTime t)
{
	if (!dense_keys_test_and_set(d->dense, bit))
	{
		if (d->dense_least != NULL)
			d->dense_least[bit] = t;
		return true;
	}
	if (d->dense_least == NULL || t >= d->dense_least[bit])
		return false;
	d->dense_least[bit] = t;
	return true;
}

static PtfRowResult
dedup_partial_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row,
					 const PtfRowContext *ctx)
{
	DedupPartial *d = (DedupPartial *) op;
	StateRef	ref;
	PtfTime    *least;

	Assert(ctx->input == 0 && kind == ROWKIND_INSERT);
	if (d->dense != NULL)
	{
		uint64		bit;

		if (dense_keys_covers_noted(d->dense, row,
									ctx->prefetched ?
									&ctx->prefetched[PARTIAL_SCRATCH_DENSE] : NULL,
									&bit))
		{
			if (dense_passes(d, bit, ctx->event_time))
				ptf_operator_emit(op, kind, row);
			return PTF_ROW_DONE;
		}
	}
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
	DedupPartial *d = (DedupPartial *) op;

	/* a key of the range is a bit, in cache: only the map's keys are fetched */
	if (d->dense != NULL)
	{
		scratch[PARTIAL_SCRATCH_DENSE] = dense_keys_note(d->dense, row);
		if (scratch[PARTIAL_SCRATCH_DENSE] != 0)
			return;
	}
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
	Size		least_bytes = 0;

	d = (DedupPartial *) ptf_operator_alloc(sizeof(DedupPartial),
											&dedup_partial_methods, env);
	/* as the serial operator's (dedup.c): at most a quarter of the budget */
	d->dense = dense_keys_create(keys, &env->key_range, env->expected_keys,
								 event_time ? sizeof(PtfTime) : 0,
								 env->mem_limit > 0 ?
								 env->mem_limit / 4 : MaxAllocSize / 4,
								 d->base.cxt);
	if (d->dense != NULL && event_time)
	{
		/* an entry is read only once its key's bit is set, which writes it */
		least_bytes = sizeof(PtfTime) * dense_keys_range_size(d->dense);
		d->dense_least = MemoryContextAllocExtended(d->base.cxt, least_bytes,
													MCXT_ALLOC_HUGE);
	}

	memset(&spec, 0, sizeof(spec));
	spec.keys = keys;
	spec.hot = event_time ? sizeof(PtfTime) : 0;
	spec.mem_limit = env->mem_limit;
	/* the map then holds only keys outside the range: it grows if it must */
	spec.expected_keys = d->dense != NULL ? 0 : env->expected_keys;
	if (d->dense != NULL && env->mem_limit > 0)
		spec.mem_limit -= dense_keys_bytes(d->dense) + least_bytes;
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
