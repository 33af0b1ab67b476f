/*-------------------------------------------------------------------------
 *
 * dedup.c
 *	  DEDUPLICATE_KEEP_FIRST: the first row per key.
 *
 * Arrival order (no on_time): the first +I or +U of a key is emitted and
 * marks the key seen; while the key's state lives, every later change of
 * the key is swallowed.  A -U or -D of a key not seen is ignored and does
 * not mark it (FLIP-614 §4.1.3.7).
 *
 * Event time (on_time): each key keeps one candidate, the row with the
 * smallest event time so far (ties keep the earlier arrival), and an
 * event-time timer at its time.  When the watermark reaches the timer the
 * candidate is emitted and the key becomes seen.  Rows strictly below the
 * watermark are late: dropped without touching state (FLIP-614 §4.1.3.5,
 * Flink's RowTimeDeduplicateKeepFirstRowFunction).  A replaced candidate's
 * timer is left in the queue and ignored when it fires: the key's
 * candidate is then gone or of another time.
 *
 * TTL is processing time: a seen key expires state_ttl after it was
 * marked, or after its last swallowed change when reset_ttl_on_duplicate.
 * A pending candidate never expires: its timer must be able to fire.
 *
 * The candidate lives in the key's record (records never move), so the
 * common case, a row that is not earlier than the candidate, reads one
 * record and nothing else.  When the watermark cannot move before the end
 * of the input (a bounded input without a delay) there are no timers at
 * all: the end sorts the candidates by time once.
 *
 * A call without a uid or TTL over a table whose statistics say the key is
 * an integer filling a range densely marks the keys of that range in a
 * bitmap (state/dense_keys.c) instead of the keyed state: by arrival a bit
 * a key, in cache, where the map's lookups wait on memory; by event time
 * (without live timers) with a slot per value of the range beside it, the
 * candidate's time and row, found without hashing in an array smaller
 * than the map.  Keys outside the range, and every key of a spilled
 * partition, are the map's; by event time so are the range's keys first
 * seen once the state's budget is spent (the map then spills them).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "utils/memutils.h"

#include "operators/dedup.h"
#include "state/row_images.h"

/*
 * The value of a key in event-time mode, in two parts.  The hot part is
 * read for every row of the key; without live timers it is only the
 * candidate's time, so the inline state is 16 bytes a slot: the smaller,
 * the more of it stays in cache.  The cold part, the candidate row, is
 * touched only when a row replaces it.
 */
typedef struct DedupHot
{
	PtfTime		time;			/* the candidate's event time */
	int64		seq;			/* arrival order, for ties between timers */
} DedupHot;

#define DEDUP_HOT_NO_TIMER_SIZE offsetof(DedupHot, seq)

typedef struct DedupCold
{
	PooledTuple cand;			/* the candidate; tuple NULL once emitted */
} DedupCold;

/* by event time, the candidate of a key in the range, at its bit */
typedef struct DedupDense
{
	PtfTime		time;
	PooledTuple cand;
} DedupDense;

#define DEDUP_TIMER_CANDIDATE 1

typedef struct DedupOperator
{
	PtfOperator base;
	bool		event_time;
	bool		reset_ttl;
	bool		live_timers;	/* the watermark may move during the input */
	TuplePool  *pool;			/* candidate rows, inside the state's context */
	TupleTableSlot *emit_slot;
	int64		next_seq;
	DenseKeys  *dense;			/* keys seen in the range, or NULL */
	DedupDense *dense_slots;	/* by event time: their candidates */
	bool		dense_closed;	/* by event time: no more new keys in the range */
	Size		state_limit;	/* the keyed state's budget, 0: none */
} DedupOperator;

enum
{
	DEDUP_FIELD_EVENT_TIME,
	DEDUP_FIELD_SEQ,
	DEDUP_FIELD_IMAGE
};

static const StateField dedup_fields[] = {
	{"event_time", SF_TIME, 0},
	{"seq", SF_INT8, 0},
	{"image", SF_IMAGE, 0},
};

/* a stored candidate is pending: its timer is at its event time */
const StateLayout dedup_layout = {lengthof(dedup_fields), dedup_fields, "event_time"};

/* Make the row (or a stored image) the key's candidate, with its timer. */
static void
candidate_set(DedupOperator *d, StateRef *ref, TupleTableSlot *row,
			  MinimalTuple image, PtfTime time, int64 seq)
{
	DedupHot   *v = (DedupHot *) ref->value;
	DedupCold  *c = (DedupCold *) ref->cold;

	if (image)
		tuple_pool_store_image(d->pool, &c->cand, image);
	else
		tuple_pool_store_slot(d->pool, &c->cand, row);
	v->time = time;
	if (d->live_timers)
	{
		v->seq = seq;
		timer_register_seq(d->base.timers, PTF_EVENT_TIME, time, (uint64) seq,
						   ref->rec, 0, DEDUP_TIMER_CANDIDATE);
	}
}

/*
 * Whether the row's key is the range's, and its bit: the first prefetch
 * stage of a batched row works it out once and notes it in the row's
 * scratch for a later stage and for on_row (dense_keys_note).
 */
#define DEDUP_SCRATCH_DENSE (PTF_PREFETCH_WORDS - 1)

static inline bool
dense_row(DedupOperator *d, TupleTableSlot *row, const uint64 *scratch, uint64 *bit)
{
	return dense_keys_covers_noted(d->dense, row,
								   scratch ? &scratch[DEDUP_SCRATCH_DENSE] : NULL, bit);
}

static PtfRowResult
dedup_on_row_arrival(DedupOperator *d, RowKind kind, TupleTableSlot *row,
					 const PtfRowContext *ctx)
{
	KeyedState *ks = d->base.state;
	StateRef	ref;
	uint64		bit;

	if (d->dense != NULL && dense_row(d, row, ctx->prefetched, &bit))
	{
		/* as below, without TTL: a retraction passes over either way */
		if (ROWKIND_IS_ADDITION(kind) && !dense_keys_test_and_set(d->dense, bit))
			ptf_operator_emit(&d->base, ROWKIND_INSERT, row);
		return PTF_ROW_DONE;
	}

	if (!ROWKIND_IS_ADDITION(kind))
	{
		/* a retraction never marks a key; of a seen key it is swallowed */
		switch (keyed_state_lookup(ks, ctx->keys, row, ctx->proc_time, false, &ref))
		{
			case KS_FOUND:
				if (d->reset_ttl)
					keyed_state_touch(ks, ref.rec, ctx->proc_time);
				break;
			case KS_FULL:
				/* the key may be spilled: its partition decides */
				return PTF_ROW_SPILL;
			default:
				break;
		}
		return PTF_ROW_DONE;
	}

	switch (keyed_state_lookup(ks, ctx->keys, row, ctx->proc_time, true, &ref))
	{
		case KS_CREATED:
			keyed_state_touch(ks, ref.rec, ctx->proc_time);
			ptf_operator_emit(&d->base, ROWKIND_INSERT, row);
			break;
		case KS_FOUND:
			if (d->reset_ttl)
				keyed_state_touch(ks, ref.rec, ctx->proc_time);
			break;
		case KS_FULL:
			return PTF_ROW_SPILL;
		case KS_ABSENT:
			Assert(false);
			break;
	}
	return PTF_ROW_DONE;
}

static PtfRowResult
dedup_on_row_event(DedupOperator *d, RowKind kind, TupleTableSlot *row,
				   const PtfRowContext *ctx)
{
	KeyedState *ks = d->base.state;
	StateRef	ref;
	KeyedLookup res;
	int64		seq;
	uint64		bit;

	if (kind != ROWKIND_INSERT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("deduplicate_keep_first with on_time needs insert-only input, but a change of kind %s arrived",
						rowkind_long_name(kind)),
				 errhint("A watermark finalizes event times that an update could change afterwards; drop on_time to keep the first arrival instead.")));

	if (ctx->event_time < ctx->watermark)
		return PTF_ROW_LATE;

	seq = d->next_seq++;
	if (d->dense_slots != NULL && dense_row(d, row, ctx->prefetched, &bit))
	{
		DedupDense *slot = &d->dense_slots[bit];

		if (dense_keys_test(dense_keys_words(d->dense), bit))
		{
			if (ctx->event_time < slot->time)
			{
				tuple_pool_store_slot(d->pool, &slot->cand, row);
				slot->time = ctx->event_time;
			}
			return PTF_ROW_DONE;
		}
		/* a new key: in the range while the budget lasts, in the map after */
		if (!d->dense_closed && d->state_limit > 0 &&
			keyed_state_memory(ks) > d->state_limit)
			d->dense_closed = true;
		if (!d->dense_closed)
		{
			(void) dense_keys_test_and_set(d->dense, bit);
			tuple_pool_store_slot(d->pool, &slot->cand, row);
			slot->time = ctx->event_time;
			return PTF_ROW_DONE;
		}
	}
	res = keyed_state_lookup(ks, ctx->keys, row, ctx->proc_time, true, &ref);
	if (res == KS_FULL)
		return PTF_ROW_SPILL;

	if (res == KS_CREATED)
	{
		candidate_set(d, &ref, row, NULL, ctx->event_time, seq);
		keyed_state_pin(ks, ref.rec);
		keyed_state_mark_changed(ks, ref.rec);
	}
	/* only live timers emit before the end: otherwise nothing is seen yet */
	else if (d->live_timers && ((DedupCold *) ref.cold)->cand.tuple == NULL)
	{
		/* already emitted: a duplicate */
		if (d->reset_ttl)
			keyed_state_touch(ks, ref.rec, ctx->proc_time);
	}
	else if (ctx->event_time < ((DedupHot *) ref.value)->time)
	{
		candidate_set(d, &ref, row, NULL, ctx->event_time, seq);
		keyed_state_mark_changed(ks, ref.rec);
	}
	return PTF_ROW_DONE;
}

static PtfRowResult
dedup_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	DedupOperator *d = (DedupOperator *) op;

	Assert(ctx->input == 0);
	if (d->event_time)
		return dedup_on_row_event(d, kind, row, ctx);
	return dedup_on_row_arrival(d, kind, row, ctx);
}

/* The candidate is final: emit it, the key is seen from now on. */
static void
finalize(DedupOperator *d, StateRecord *rec, DedupCold *c, PtfTime proc_time)
{
	ExecStoreMinimalTuple(c->cand.tuple, d->emit_slot, false);
	ptf_operator_emit(&d->base, ROWKIND_INSERT, d->emit_slot);
	ExecClearTuple(d->emit_slot);

	tuple_pool_free(d->pool, &c->cand);
	keyed_state_touch(d->base.state, rec, proc_time);
	keyed_state_mark_changed(d->base.state, rec);
}

static void
dedup_on_timer(PtfOperator *op, const PtfTimer *timer, PtfTime watermark,
			   PtfTime proc_time)
{
	DedupOperator *d = (DedupOperator *) op;
	StateRef	ref;
	DedupHot   *v;
	DedupCold  *c;

	Assert(timer->tag == DEDUP_TIMER_CANDIDATE && d->live_timers);
	/* a pending candidate pins its key: neither expired nor removed */
	Assert(!(timer->rec->flags & RECORD_REMOVED));
	keyed_state_record_ref(op->state, timer->rec, &ref);
	v = (DedupHot *) ref.value;
	c = (DedupCold *) ref.cold;
	if (c->cand.tuple == NULL || v->time != timer->time)
		return;					/* emitted, or replaced by an earlier row */
	/* timers fire in time order: an earlier candidate's timer came first */
	Assert(v->time <= watermark);
	finalize(d, timer->rec, c, proc_time);
}

/* candidates emitted at the end are fetched this many ahead */
#define DEDUP_EMIT_AHEAD 8

/* a pending candidate, its time copied out for a fast sort */
typedef struct Pending
{
	PtfTime		time;
	MinimalTuple tuple;
} Pending;

typedef struct PendingList
{
	Pending    *items;
	int64		n;
	int64		max;
} PendingList;

static void
pending_add(PendingList *list, PtfTime time, MinimalTuple tuple)
{
	if (list->n >= list->max)
	{
		list->max = Max(1024, list->max * 2);
		list->items = list->items ?
			repalloc_huge(list->items, sizeof(Pending) * list->max) :
			palloc_extended(sizeof(Pending) * list->max, MCXT_ALLOC_HUGE);
	}
	list->items[list->n].time = time;
	list->items[list->n].tuple = tuple;
	list->n++;
}

static void
collect_pending(StateRef *ref, void *arg)
{
	DedupCold  *c = (DedupCold *) ref->cold;

	if (c->cand.tuple != NULL)
		pending_add((PendingList *) arg, ((DedupHot *) ref->value)->time, c->cand.tuple);
}

/* sort_pending(): by time, the comparison inlined (a key a candidate) */
#define ST_SORT sort_pending
#define ST_ELEMENT_TYPE Pending
#define ST_COMPARE(a, b) ((a)->time < (b)->time ? -1 : (a)->time > (b)->time ? 1 : 0)
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Without live timers the watermark only ever jumps to the end of the
 * input, where this call's state is about to be thrown away: emit every
 * candidate in event-time order, and leave the memory to the context.
 * (Timers would do the same, a heap entry per key dearer.)
 */
static void
dedup_on_watermark(PtfOperator *op, PtfTime watermark, PtfTime proc_time)
{
	DedupOperator *d = (DedupOperator *) op;
	PendingList list = {0};
	int64		i;

	if (!d->event_time || d->live_timers || watermark != PTF_TIME_MAX)
		return;
	if (d->dense_slots != NULL)
	{
		int64		b;

		for (b = dense_keys_next(d->dense, 0); b >= 0; b = dense_keys_next(d->dense, b + 1))
		{
			Assert(d->dense_slots[b].cand.tuple != NULL);
			pending_add(&list, d->dense_slots[b].time, d->dense_slots[b].cand.tuple);
		}
	}
	keyed_state_foreach(d->base.state, collect_pending, &list);
	if (list.n == 0)
		return;
	sort_pending(list.items, list.n);
	for (i = 0; i < list.n; i++)
	{
		/* in time order the candidates are all over memory: ask ahead */
		if (i + DEDUP_EMIT_AHEAD < list.n)
			__builtin_prefetch(list.items[i + DEDUP_EMIT_AHEAD].tuple);
		ExecStoreMinimalTuple(list.items[i].tuple, d->emit_slot, false);
		ptf_operator_emit(&d->base, ROWKIND_INSERT, d->emit_slot);
	}
	ExecClearTuple(d->emit_slot);
	pfree(list.items);
}

static void
dedup_save(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
		   Datum *values, bool *nulls)
{
	DedupOperator *d = (DedupOperator *) arg;
	DedupHot   *v = (DedupHot *) ref->value;
	DedupCold  *c = (DedupCold *) ref->cold;

	Assert(space == STATE_KEY_SPACE);
	if (!d->event_time || c->cand.tuple == NULL)
		return;
	values[DEDUP_FIELD_EVENT_TIME] = Int64GetDatum(v->time);
	values[DEDUP_FIELD_SEQ] = Int64GetDatum(v->seq);
	values[DEDUP_FIELD_IMAGE] = PointerGetDatum(c->cand.tuple);
	nulls[DEDUP_FIELD_EVENT_TIME] = nulls[DEDUP_FIELD_SEQ] = nulls[DEDUP_FIELD_IMAGE] = false;
}

static void
dedup_restore(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
			  Datum *values, bool *nulls)
{
	DedupOperator *d = (DedupOperator *) arg;
	StateRef	r = *ref;
	int64		seq;

	if (!d->event_time || nulls[DEDUP_FIELD_IMAGE] || nulls[DEDUP_FIELD_EVENT_TIME])
		return;
	Assert(d->live_timers);		/* durable state has a watermark */
	seq = nulls[DEDUP_FIELD_SEQ] ? 0 : DatumGetInt64(values[DEDUP_FIELD_SEQ]);
	candidate_set(d, &r, NULL, (MinimalTuple) DatumGetPointer(values[DEDUP_FIELD_IMAGE]),
				  DatumGetInt64(values[DEDUP_FIELD_EVENT_TIME]), seq);
	if (seq >= d->next_seq)
		d->next_seq = seq + 1;
}

/*
 * ptf.resync: by arrival, the tables' rows are rows like any -- a key not
 * seen yet is a first row, the others are swallowed -- and no key goes.
 */
static void
dedup_on_resync(PtfOperator *op, bool end)
{
	Assert(!((DedupOperator *) op)->event_time);
}

/*
 * Arrival numbers order candidates of one event time: go on after every
 * row the uid read, whether or not the keys that say so are in memory.
 */
static void
dedup_on_start(PtfOperator *op, PtfTime watermark)
{
	DedupOperator *d = (DedupOperator *) op;

	d->next_seq = Max(d->next_seq, (int64) op->rows_before);
}

static void
dedup_prefetch(PtfOperator *op, TupleTableSlot *row, const PtfRowContext *ctx, int stage,
			   uint64 *scratch)
{
	DedupOperator *d = (DedupOperator *) op;

	if (d->dense != NULL)
		scratch[DEDUP_SCRATCH_DENSE] = dense_keys_note(d->dense, row);
	if (d->dense == NULL || scratch[DEDUP_SCRATCH_DENSE] == 0)
		keyed_state_prefetch(op->state, ctx->keys, row);
}

/* the keys in memory: the map's and the range's */
static uint64
dedup_keys(PtfOperator *op)
{
	DedupOperator *d = (DedupOperator *) op;

	return keyed_state_count(op->state) + (d->dense ? dense_keys_count(d->dense) : 0);
}

/*
 * By event time a row earlier than its key's candidate is copied over the
 * candidate's image, a line of the pool no lookup touched: once the map's
 * lines are in (stage 1), that image is asked for, to be written.
 */
static void
dedup_prefetch_event(PtfOperator *op, TupleTableSlot *row, const PtfRowContext *ctx,
					 int stage, uint64 *scratch)
{
	DedupOperator *d = (DedupOperator *) op;
	uint64		bit;
	void	   *value;
	void	   *cold;
	MinimalTuple cand;

	if (d->dense_slots != NULL && stage == 0)
		scratch[DEDUP_SCRATCH_DENSE] = dense_keys_note(d->dense, row);
	if (d->dense_slots != NULL && dense_row(d, row, scratch, &bit))
	{
		DedupDense *slot = &d->dense_slots[bit];

		/* its slot, then the row it holds if this row replaces it */
		if (stage == 0)
			__builtin_prefetch(slot, 1);
		else if (dense_keys_test(dense_keys_words(d->dense), bit) &&
				 ctx->event_time < slot->time && slot->cand.tuple != NULL)
		{
			__builtin_prefetch(slot->cand.tuple, 1);
			__builtin_prefetch((char *) slot->cand.tuple + 64, 1);
		}
		return;
	}
	if (stage == 0)
	{
		keyed_state_prefetch(op->state, ctx->keys, row);
		return;
	}
	if (ctx->event_time == PTF_TIME_MIN ||
		!keyed_state_prefetch_peek(op->state, ctx->keys, row, &value, &cold))
		return;
	cand = ((DedupCold *) cold)->cand.tuple;
	if (cand != NULL && ctx->event_time < ((DedupHot *) value)->time)
	{
		__builtin_prefetch(cand, 1);
		__builtin_prefetch((char *) cand + 64, 1);
	}
}

/*
 * A key leaves memory, unless its candidate is pending (its timer must
 * fire from memory); a seen key holds nothing else.
 */
static bool
dedup_evict(PtfOperator *op, StateRef *ref)
{
	DedupOperator *d = (DedupOperator *) op;

	return !(d->event_time && ((DedupCold *) ref->cold)->cand.tuple != NULL);
}

static const PtfOperatorMethods dedup_methods = {
	.name = "deduplicate_keep_first",
	.on_row = dedup_on_row,
	.evict = dedup_evict,
	.keys = dedup_keys,
	.on_watermark = dedup_on_watermark,
	.on_timer = dedup_on_timer,
	.on_start = dedup_on_start,
	.on_resync = dedup_on_resync,
};

/* the same, with the rows' state fetched ahead (the inline layout) */
static const PtfOperatorMethods dedup_prefetching_methods = {
	.name = "deduplicate_keep_first",
	.on_row = dedup_on_row,
	.evict = dedup_evict,
	.keys = dedup_keys,
	.prefetch = dedup_prefetch,
	.on_watermark = dedup_on_watermark,
	.on_timer = dedup_on_timer,
	.on_start = dedup_on_start,
	.on_resync = dedup_on_resync,
};

/* and by event time, the candidate's image too */
static const PtfOperatorMethods dedup_prefetching_event_methods = {
	.name = "deduplicate_keep_first",
	.on_row = dedup_on_row,
	.evict = dedup_evict,
	.keys = dedup_keys,
	.prefetch = dedup_prefetch_event,
	.prefetch_stages = 2,
	.on_watermark = dedup_on_watermark,
	.on_timer = dedup_on_timer,
	.on_start = dedup_on_start,
	.on_resync = dedup_on_resync,
};

PtfOperator *
dedup_create(const DedupOptions *opts, const PtfOperatorEnv *env)
{
	DedupOperator *d;
	KeyedStateSpec spec;
	MemoryContext old;

	memset(&spec, 0, sizeof(spec));
	spec.keys = opts->keys;
	d = (DedupOperator *) ptf_operator_alloc(sizeof(DedupOperator), &dedup_methods, env);
	/*
	 * A bitmap, and by event time its slots, of at most a quarter of the
	 * budget, taken from it.  Live timers point at the map's records.
	 */
	if (!env->durable && opts->ttl_us == 0 && !opts->live_timers)
		d->dense = dense_keys_create(opts->keys, &env->key_range, env->expected_keys,
									 opts->event_time ? sizeof(DedupDense) : 0,
									 env->mem_limit > 0 ? env->mem_limit / 4 : MaxAllocSize / 4,
									 d->base.cxt);
	if (d->dense != NULL && opts->event_time)
	{
		/* the slots' bytes: what the frame's batching decision counts beside the map */
		d->base.prefetch_bytes = sizeof(DedupDense) * dense_keys_range_size(d->dense);
		d->dense_slots = MemoryContextAllocExtended(d->base.cxt, d->base.prefetch_bytes,
													MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	}
	if (opts->event_time)
	{
		spec.hot = opts->live_timers ? sizeof(DedupHot) : DEDUP_HOT_NO_TIMER_SIZE;
		spec.cold = sizeof(DedupCold);
	}
	spec.ttl_us = opts->ttl_us;
	spec.mem_limit = env->mem_limit;
	/* the map then holds only keys outside the range: it grows if it must */
	spec.expected_keys = d->dense != NULL ? 0 : env->expected_keys;
	if (d->dense != NULL && env->mem_limit > 0)
		spec.mem_limit -= dense_keys_bytes(d->dense) + d->base.prefetch_bytes;
	d->state_limit = spec.mem_limit;
	/* timers point at records: they must not move */
	spec.flags = (env->durable ? KEYED_STATE_DURABLE : 0) |
		(opts->live_timers ? KEYED_STATE_STABLE : 0);

	old = MemoryContextSwitchTo(d->base.cxt);
	d->base.state = keyed_state_create(&spec, d->base.cxt);
	/* an inline map's rows are fetched ahead, and so then are the range's slots */
	if (keyed_state_can_prefetch(d->base.state))
		d->base.methods = opts->event_time ? &dedup_prefetching_event_methods :
			&dedup_prefetching_methods;
	d->base.codec.layout = &dedup_layout;
	d->base.codec.arg = d;
	d->base.codec.save = dedup_save;
	d->base.codec.restore = dedup_restore;
	d->event_time = opts->event_time;
	/* without a TTL a refresh changes nothing: not even asked */
	d->reset_ttl = opts->reset_ttl_on_duplicate && opts->ttl_us > 0;
	d->live_timers = opts->live_timers;
	d->pool = tuple_pool_create(keyed_state_context(d->base.state),
								 keyed_state_block_size(d->base.state));
	d->emit_slot = MakeSingleTupleTableSlot(opts->rowdesc, &TTSOpsMinimalTuple);
	d->next_seq = 0;
	MemoryContextSwitchTo(old);
	return &d->base;
}
