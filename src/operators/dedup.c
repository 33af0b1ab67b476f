/*-------------------------------------------------------------------------
 *
 * dedup.c
 *	  DEDUPLICATE_KEEP_FIRST: the first row per key.
 *
 * Arrival order (no on_time): the first +I or +U of a key is emitted and
 * marks the key seen; while the key's state lives, every later change of
 * the key is swallowed.  A -U or -D of a key not seen is ignored and does
 * not mark it (seed 4.1.3.7).
 *
 * Event time (on_time): each key keeps one candidate, the row with the
 * smallest event time so far (ties keep the earlier arrival), and a timer
 * at its time.  When the watermark reaches the timer the candidate is
 * emitted and the key becomes seen.  Rows strictly below the watermark are
 * late: dropped without touching state (seed 4.1.3.5, Flink's
 * RowTimeDeduplicateKeepFirstRowFunction).
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "lib/pairingheap.h"
#include "utils/memutils.h"

#include "operators/operator.h"
#include "state/tuple_pool.h"

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
	pairingheap_node node;		/* timer */
} DedupHot;

#define DEDUP_HOT_NO_TIMER_SIZE offsetof(DedupHot, seq)

typedef struct DedupCold
{
	PooledTuple cand;			/* the candidate; tuple NULL once emitted */
} DedupCold;

typedef struct DedupOperator
{
	PtfOperator base;
	bool		event_time;
	bool		reset_ttl;
	bool		live_timers;	/* the watermark may move during the input */
	pairingheap timers;
	TuplePool  *pool;			/* candidate rows, inside the state's context */
	TupleTableSlot *emit_slot;
	int64		next_seq;
} DedupOperator;

/* min-heap on (time, seq) */
static int
timer_cmp(const pairingheap_node *a, const pairingheap_node *b, void *arg)
{
	const DedupHot *va = pairingheap_const_container(DedupHot, node, a);
	const DedupHot *vb = pairingheap_const_container(DedupHot, node, b);

	if (va->time != vb->time)
		return va->time < vb->time ? 1 : -1;
	if (va->seq != vb->seq)
		return va->seq < vb->seq ? 1 : -1;
	return 0;
}

/* Make the row (or a stored image) the key's candidate. */
static void
candidate_set(DedupOperator *d, StateRef *ref, TupleTableSlot *row,
			  MinimalTuple image, PtfTime time, int64 seq)
{
	DedupHot   *v = (DedupHot *) ref->value;
	DedupCold  *c = (DedupCold *) ref->cold;

	if (d->live_timers && c->cand.tuple != NULL)
		pairingheap_remove(&d->timers, &v->node);
	if (image)
		tuple_pool_store_image(d->pool, &c->cand, image);
	else
		tuple_pool_store_slot(d->pool, &c->cand, row);
	v->time = time;
	if (d->live_timers)
	{
		v->seq = seq;
		pairingheap_add(&d->timers, &v->node);
	}
}

static PtfRowResult
dedup_on_row_arrival(DedupOperator *d, RowKind kind, TupleTableSlot *row,
					 PtfTime proc_time)
{
	KeyedState *ks = d->base.state;
	StateRef	ref;

	if (!ROWKIND_IS_ADDITION(kind))
	{
		/* a retraction never marks a key; of a seen key it is swallowed */
		switch (keyed_state_lookup(ks, row, proc_time, false, &ref))
		{
			case KS_FOUND:
				if (d->reset_ttl)
					keyed_state_touch(ks, ref.rec, proc_time);
				break;
			case KS_FULL:
				/* the key may be spilled: its partition decides */
				return PTF_ROW_SPILL;
			default:
				break;
		}
		return PTF_ROW_DONE;
	}

	switch (keyed_state_lookup(ks, row, proc_time, true, &ref))
	{
		case KS_CREATED:
			keyed_state_touch(ks, ref.rec, proc_time);
			ptf_operator_emit(&d->base, ROWKIND_INSERT, row);
			break;
		case KS_FOUND:
			if (d->reset_ttl)
				keyed_state_touch(ks, ref.rec, proc_time);
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
				   PtfTime event_time, PtfTime proc_time, PtfTime watermark)
{
	KeyedState *ks = d->base.state;
	StateRef	ref;
	KeyedLookup res;
	int64		seq;

	if (kind != ROWKIND_INSERT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("deduplicate_keep_first with on_time needs insert-only input, but a change of kind %s arrived",
						rowkind_long_name(kind)),
				 errhint("A watermark finalizes event times that an update could change afterwards; drop on_time to keep the first arrival instead.")));

	if (event_time < watermark)
		return PTF_ROW_LATE;

	seq = d->next_seq++;
	res = keyed_state_lookup(ks, row, proc_time, true, &ref);
	if (res == KS_FULL)
		return PTF_ROW_SPILL;

	if (res == KS_CREATED)
	{
		candidate_set(d, &ref, row, NULL, event_time, seq);
		keyed_state_pin(ks, ref.rec);
		keyed_state_mark_changed(ks, ref.rec);
	}
	/* only live timers emit before the end: otherwise nothing is seen yet */
	else if (d->live_timers && ((DedupCold *) ref.cold)->cand.tuple == NULL)
	{
		/* already emitted: a duplicate */
		if (d->reset_ttl)
			keyed_state_touch(ks, ref.rec, proc_time);
	}
	else if (event_time < ((DedupHot *) ref.value)->time)
	{
		candidate_set(d, &ref, row, NULL, event_time, seq);
		keyed_state_mark_changed(ks, ref.rec);
	}
	return PTF_ROW_DONE;
}

static PtfRowResult
dedup_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row,
			 const PtfRowMeta *meta, PtfTime event_time, PtfTime proc_time,
			 PtfTime watermark)
{
	DedupOperator *d = (DedupOperator *) op;

	if (d->event_time)
		return dedup_on_row_event(d, kind, row, event_time, proc_time, watermark);
	return dedup_on_row_arrival(d, kind, row, proc_time);
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
collect_pending(StateRef *ref, void *arg)
{
	PendingList *list = (PendingList *) arg;
	DedupCold  *c = (DedupCold *) ref->cold;

	if (c->cand.tuple == NULL)
		return;
	if (list->n >= list->max)
	{
		list->max = Max(1024, list->max * 2);
		list->items = list->items ?
			repalloc_huge(list->items, sizeof(Pending) * list->max) :
			palloc_extended(sizeof(Pending) * list->max, MCXT_ALLOC_HUGE);
	}
	list->items[list->n].time = ((DedupHot *) ref->value)->time;
	list->items[list->n].tuple = c->cand.tuple;
	list->n++;
}

static int
pending_cmp(const void *a, const void *b)
{
	const Pending *pa = (const Pending *) a;
	const Pending *pb = (const Pending *) b;

	if (pa->time != pb->time)
		return pa->time < pb->time ? -1 : 1;
	return 0;
}

/*
 * Without live timers the watermark only ever jumps to the end of the
 * input, where this call's state is about to be thrown away: emit every
 * candidate in event-time order, and leave the memory to the context.
 */
static void
flush_at_end(DedupOperator *d)
{
	PendingList list = {0};
	int64		i;

	keyed_state_foreach(d->base.state, collect_pending, &list);
	if (list.n == 0)
		return;
	qsort(list.items, list.n, sizeof(Pending), pending_cmp);
	for (i = 0; i < list.n; i++)
	{
		ExecStoreMinimalTuple(list.items[i].tuple, d->emit_slot, false);
		ptf_operator_emit(&d->base, ROWKIND_INSERT, d->emit_slot);
	}
	ExecClearTuple(d->emit_slot);
	pfree(list.items);
}

static void
dedup_on_watermark(PtfOperator *op, PtfTime watermark, PtfTime proc_time)
{
	DedupOperator *d = (DedupOperator *) op;

	if (!d->event_time)
		return;

	if (!d->live_timers)
	{
		if (watermark == PTF_TIME_MAX)
			flush_at_end(d);
		return;
	}

	while (!pairingheap_is_empty(&d->timers))
	{
		DedupHot   *v = pairingheap_container(DedupHot, node,
											  pairingheap_first(&d->timers));

		if (v->time > watermark)
			break;
		(void) pairingheap_remove_first(&d->timers);
		/* live timers keep values in records, hot then cold part */
		finalize(d, (StateRecord *) ((char *) v - sizeof(StateRecord)),
				 (DedupCold *) ((char *) v + MAXALIGN(sizeof(DedupHot))), proc_time);
	}
}

static void
dedup_save_value(PtfOperator *op, StateRecord *rec, PtfStoredValue *out)
{
	DedupOperator *d = (DedupOperator *) op;
	DedupHot   *v;
	DedupCold  *c;

	memset(out, 0, sizeof(PtfStoredValue));
	if (!d->event_time)
		return;
	v = (DedupHot *) STATE_RECORD_VALUE(rec);
	c = (DedupCold *) ((char *) v + MAXALIGN(sizeof(DedupHot)));
	if (c->cand.tuple == NULL)
		return;
	out->has_image = true;
	out->image = c->cand.tuple;
	out->has_time = true;
	out->event_time = v->time;
	out->seq = v->seq;
}

static void
dedup_restore_value(PtfOperator *op, StateRecord *rec, const PtfStoredValue *in)
{
	DedupOperator *d = (DedupOperator *) op;

	StateRef	ref;

	if (!d->event_time || !in->has_image)
		return;
	Assert(d->live_timers);		/* durable state has a watermark */
	ref.rec = rec;
	ref.value = STATE_RECORD_VALUE(rec);
	ref.cold = (char *) ref.value + MAXALIGN(sizeof(DedupHot));
	candidate_set(d, &ref, NULL, in->image, in->event_time, in->seq);
	if (in->seq >= d->next_seq)
		d->next_seq = in->seq + 1;
}

static void
dedup_prefetch(PtfOperator *op, TupleTableSlot *row)
{
	keyed_state_prefetch(op->state, row);
}

static const PtfOperatorMethods dedup_methods = {
	.name = "deduplicate_keep_first",
	.on_row = dedup_on_row,
	.on_watermark = dedup_on_watermark,
	.save_value = dedup_save_value,
	.restore_value = dedup_restore_value,
};

void
dedup_value_sizes(const DedupOptions *opts, Size *hot, Size *cold)
{
	*hot = *cold = 0;
	if (!opts->event_time)
		return;
	*hot = opts->live_timers ? sizeof(DedupHot) : DEDUP_HOT_NO_TIMER_SIZE;
	*cold = sizeof(DedupCold);
}

PtfOperator *
dedup_create(const DedupOptions *opts, KeyedState *state,
			 PtfEmitFn emit, void *emit_arg)
{
	DedupOperator *d = palloc0(sizeof(DedupOperator));

	d->base.methods = &dedup_methods;
	d->base.state = state;
	d->base.emit = emit;
	d->base.emit_arg = emit_arg;
	d->event_time = opts->event_time;
	d->reset_ttl = opts->reset_ttl_on_duplicate;
	d->live_timers = opts->live_timers;
	d->timers.ph_compare = timer_cmp;
	d->timers.ph_arg = NULL;
	d->timers.ph_root = NULL;
	d->pool = tuple_pool_create(keyed_state_context(state));
	d->emit_slot = MakeSingleTupleTableSlot(opts->rowdesc, &TTSOpsMinimalTuple);
	d->next_seq = 0;
	if (keyed_state_can_prefetch(state))
		d->base.prefetch = dedup_prefetch;
	return &d->base;
}
