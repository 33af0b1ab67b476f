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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "lib/pairingheap.h"
#include "utils/memutils.h"

#include "operators/operator.h"

typedef struct DedupCandidate
{
	pairingheap_node node;		/* in the timer heap */
	PtfTime		time;
	int64		seq;			/* arrival order, for ties */
	StateRecord *rec;
	MinimalTuple tuple;
} DedupCandidate;

/* The value area of a key's record (event-time mode only). */
typedef struct DedupValue
{
	DedupCandidate *cand;		/* NULL: the key is seen (emitted) */
} DedupValue;

typedef struct DedupOperator
{
	PtfOperator base;
	bool		event_time;
	bool		reset_ttl;
	pairingheap timers;
	MemoryContext cand_cxt;		/* candidates, inside the state's context */
	TupleTableSlot *emit_slot;
	int64		next_seq;
} DedupOperator;

/* min-heap on (time, seq) */
static int
timer_cmp(const pairingheap_node *a, const pairingheap_node *b, void *arg)
{
	const DedupCandidate *ca = pairingheap_const_container(DedupCandidate, node, a);
	const DedupCandidate *cb = pairingheap_const_container(DedupCandidate, node, b);

	if (ca->time != cb->time)
		return ca->time < cb->time ? 1 : -1;
	if (ca->seq != cb->seq)
		return ca->seq < cb->seq ? 1 : -1;
	return 0;
}

static void
candidate_set(DedupOperator *d, DedupValue *v, StateRecord *rec,
			  MinimalTuple tuple, PtfTime time, int64 seq)
{
	DedupCandidate *c = v->cand;

	if (c == NULL)
	{
		c = MemoryContextAllocZero(d->cand_cxt, sizeof(DedupCandidate));
		c->rec = rec;
		v->cand = c;
	}
	else
	{
		pairingheap_remove(&d->timers, &c->node);
		pfree(c->tuple);
	}
	c->tuple = tuple;
	c->time = time;
	c->seq = seq;
	pairingheap_add(&d->timers, &c->node);
}

static MinimalTuple
copy_row(DedupOperator *d, TupleTableSlot *row)
{
	MemoryContext old = MemoryContextSwitchTo(d->cand_cxt);
	MinimalTuple t = ExecCopySlotMinimalTuple(row);

	MemoryContextSwitchTo(old);
	return t;
}

static PtfRowResult
dedup_on_row_arrival(DedupOperator *d, RowKind kind, TupleTableSlot *row,
					 PtfTime proc_time)
{
	KeyedState *ks = d->base.state;
	StateRecord *rec;
	KeyedLookup res;

	if (!ROWKIND_IS_ADDITION(kind))
	{
		/* a retraction never marks a key; of a seen key it is swallowed */
		rec = keyed_state_lookup(ks, row, proc_time, false, &res);
		if (res == KS_FOUND && d->reset_ttl)
			keyed_state_touch(ks, rec, proc_time);
		return PTF_ROW_DONE;
	}

	rec = keyed_state_lookup(ks, row, proc_time, true, &res);
	switch (res)
	{
		case KS_CREATED:
			keyed_state_touch(ks, rec, proc_time);
			ptf_operator_emit(&d->base, ROWKIND_INSERT, row);
			break;
		case KS_FOUND:
			if (d->reset_ttl)
				keyed_state_touch(ks, rec, proc_time);
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
	StateRecord *rec;
	KeyedLookup res;
	DedupValue *v;
	int64		seq;

	if (kind != ROWKIND_INSERT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("deduplicate_keep_first with on_time needs insert-only input, but a %s change arrived",
						rowkind_long_name(kind)),
				 errhint("A watermark finalizes event times that an update could change afterwards; drop on_time to keep the first arrival instead.")));

	if (event_time < watermark)
		return PTF_ROW_LATE;

	seq = d->next_seq++;
	rec = keyed_state_lookup(ks, row, proc_time, true, &res);
	if (res == KS_FULL)
		return PTF_ROW_SPILL;
	v = (DedupValue *) STATE_RECORD_VALUE(rec);

	if (res == KS_CREATED)
	{
		candidate_set(d, v, rec, copy_row(d, row), event_time, seq);
		keyed_state_pin(ks, rec);
		keyed_state_mark_changed(ks, rec);
	}
	else if (v->cand == NULL)
	{
		/* already emitted: a duplicate */
		if (d->reset_ttl)
			keyed_state_touch(ks, rec, proc_time);
	}
	else if (event_time < v->cand->time)
	{
		candidate_set(d, v, rec, copy_row(d, row), event_time, seq);
		keyed_state_mark_changed(ks, rec);
	}
	return PTF_ROW_DONE;
}

static PtfRowResult
dedup_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row,
			 PtfTime event_time, PtfTime proc_time, PtfTime watermark)
{
	DedupOperator *d = (DedupOperator *) op;

	if (d->event_time)
		return dedup_on_row_event(d, kind, row, event_time, proc_time, watermark);
	return dedup_on_row_arrival(d, kind, row, proc_time);
}

static void
dedup_on_watermark(PtfOperator *op, PtfTime watermark, PtfTime proc_time)
{
	DedupOperator *d = (DedupOperator *) op;

	while (!pairingheap_is_empty(&d->timers))
	{
		DedupCandidate *c = pairingheap_container(DedupCandidate, node,
												  pairingheap_first(&d->timers));
		StateRecord *rec = c->rec;

		if (c->time > watermark)
			break;
		(void) pairingheap_remove_first(&d->timers);

		ExecStoreMinimalTuple(c->tuple, d->emit_slot, false);
		ptf_operator_emit(op, ROWKIND_INSERT, d->emit_slot);
		ExecClearTuple(d->emit_slot);

		((DedupValue *) STATE_RECORD_VALUE(rec))->cand = NULL;
		pfree(c->tuple);
		pfree(c);
		keyed_state_touch(op->state, rec, proc_time);
		keyed_state_mark_changed(op->state, rec);
	}
}

static void
dedup_save_value(PtfOperator *op, StateRecord *rec, PtfStoredValue *out)
{
	DedupOperator *d = (DedupOperator *) op;
	DedupCandidate *c;

	memset(out, 0, sizeof(PtfStoredValue));
	if (!d->event_time)
		return;
	c = ((DedupValue *) STATE_RECORD_VALUE(rec))->cand;
	if (c == NULL)
		return;
	out->has_image = true;
	out->image = c->tuple;
	out->has_time = true;
	out->event_time = c->time;
	out->seq = c->seq;
}

static void
dedup_restore_value(PtfOperator *op, StateRecord *rec, const PtfStoredValue *in)
{
	DedupOperator *d = (DedupOperator *) op;
	DedupValue *v = (DedupValue *) STATE_RECORD_VALUE(rec);
	MinimalTuple copy;

	if (!d->event_time || !in->has_image)
		return;
	copy = MemoryContextAlloc(d->cand_cxt, in->image->t_len);
	memcpy(copy, in->image, in->image->t_len);
	candidate_set(d, v, rec, copy, in->event_time, in->seq);
	if (in->seq >= d->next_seq)
		d->next_seq = in->seq + 1;
}

static const PtfOperatorMethods dedup_methods = {
	.name = "deduplicate_keep_first",
	.on_row = dedup_on_row,
	.on_watermark = dedup_on_watermark,
	.save_value = dedup_save_value,
	.restore_value = dedup_restore_value,
};

/* value area the keyed state must reserve per key */
Size
dedup_value_size(bool event_time)
{
	return event_time ? sizeof(DedupValue) : 0;
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
	d->timers.ph_compare = timer_cmp;
	d->timers.ph_arg = NULL;
	d->timers.ph_root = NULL;
	d->cand_cxt = AllocSetContextCreate(keyed_state_context(state),
										"ptf dedup candidates",
										ALLOCSET_DEFAULT_SIZES);
	d->emit_slot = MakeSingleTupleTableSlot(opts->rowdesc, &TTSOpsMinimalTuple);
	d->next_seq = 0;
	return &d->base;
}
