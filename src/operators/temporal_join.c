/*-------------------------------------------------------------------------
 *
 * temporal_join.c
 *	  The event-time temporal join (FOR SYSTEM_TIME AS OF probe.rowtime):
 *	  each probe row joins the build version of its key that was valid at
 *	  the probe's own event time.  A port of Flink's
 *	  TemporalRowTimeJoinOperator, INNER and LEFT.
 *
 * State per key (doc/design.md §2.6, doc/flink-semantics.md §7):
 *	  space TJ_SPACE_VERSIONS: the build side's versions by version time; a
 *		later version of the same time replaces the earlier, a -D is kept
 *		as a deletion marker (the key is absent from its time on), a -U is
 *		ignored (its +U supersedes it);
 *	  space TJ_SPACE_PROBES: buffered probe rows by probe time, each with
 *		its arrival number, so that a watermark step reads only the prefix
 *		that fires (Flink's V1 scans every buffered row of the key at each
 *		firing, FLINK-40336);
 *	  space TJ_SPACE_TIMERS: the event timers Flink's timer service would
 *		hold for the key -- usually one, at the smallest pending time, plus
 *		any that an idle-state cleanup left behind (Flink deletes only its
 *		bookkeeping then, and the orphan still fires);
 *	  the key's value: that bookkeeping (registeredTimer) and the TTL
 *		deadline (latestRegisteredCleanupTimer).
 *
 * Firing.  When the join watermark (the least of both sides', kept by the
 * frame) reaches a key's timer, the key's probe rows at or below it are
 * joined in arrival order, each with the greatest version at or below its
 * time (equal counts; a deletion there, or none, or a residual condition
 * that fails means no match: LEFT pads with NULL), then versions no probe
 * can reach any more are dropped: the newest one at or below the
 * watermark and everything newer are kept.  A probe row at or below the
 * watermark on arrival is late and dropped (FLINK-39719); a late build row
 * is still a version, counted late.
 *
 * Idle-state TTL is Flink's scheme (TemporalRowTimeJoinOperator), exactly: a touch (a row of
 * either side, or a firing that leaves state) sets the deadline to now +
 * 1.5 x retention unless the deadline is still more than one retention
 * away; the deadline is a processing-time timer, and when it fires the
 * key's probes and versions are dropped silently.  Only a retention above
 * 1 ms cleans (Flink's "minRetentionTime > 1").
 *
 * When the watermark cannot move before the end of a bounded call (no
 * uid, no delay, no TTL), the call has read every version when the first
 * probe row arrives (the build side is read first), and at the end every
 * probe row would join the final versions anyway: such calls join each
 * probe row on arrival, buffering nothing.  Per key the output order is
 * still arrival order, which is all Flink promises.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "utils/memutils.h"

#include "base/ptf_time.h"
#include "operators/temporal_join.h"
#include "state/row_images.h"

#define TJ_SPACE_VERSIONS	0
#define TJ_SPACE_PROBES		1
#define TJ_SPACE_TIMERS		2

#define TJ_TIMER_FIRE		1	/* event time: emit and clean up the key */
#define TJ_TIMER_CLEANUP	2	/* processing time: the TTL deadline */

/* Flink's retention: cleaning only above 1 ms, the deadline 1.5 x away */
#define TJ_MIN_CLEANING_RETENTION_US 1000

typedef struct TjKey
{
	PtfTime		timer;			/* Flink's registeredTimer, if has_timer */
	PtfTime		deadline;		/* the TTL cleanup timer, if has_deadline */
	PtfTime		last;			/* upsert build: its last row's time, if has_last */
	bool		has_timer;
	bool		has_deadline;
	bool		has_last;
} TjKey;

typedef struct TjVersion
{
	PooledTuple image;			/* NULL for a deletion */
	bool		deleted;
} TjVersion;

typedef struct TjProbe
{
	int64		seq;			/* arrival order */
	PooledTuple image;
} TjProbe;

/* The probe rows of one time: usually one, so the first is inline. */
typedef struct TjProbes
{
	int			n;
	int			cap;			/* of more */
	TjProbe		first;
	TjProbe    *more;			/* rows 1 .. n-1 */
} TjProbes;

/* a due probe row, copied out to be sorted by arrival */
typedef struct TjDue
{
	int64		seq;
	PtfTime		time;
	MinimalTuple image;
} TjDue;

typedef struct TjOperator
{
	PtfOperator base;
	TemporalJoinOptions opts;
	bool		cleaning;		/* the TTL scheme is on */
	int64		min_retention;
	int64		max_retention;
	int64		next_seq;
	TuplePool  *pool;			/* row images, inside the state's context */
	TupleTableSlot *probe_slot; /* a buffered probe row */
	TupleTableSlot *build_slot; /* the chosen version */
	TupleTableSlot *out_slot;	/* (probe, build) */
	MemoryContext emit_cxt;		/* one output row's composites */
	uint64		unknown_deletes;	/* upsert build: deletes of keys never written */
} TjOperator;

enum
{
	TJ_FIELD_TIMER,
	TJ_FIELD_DEADLINE,
	TJ_FIELD_DELETED,
	TJ_FIELD_VERSION,
	TJ_FIELD_PROBES,
	TJ_FIELD_SEQS,
	TJ_FIELD_LAST				/* temporal_join_upsert_layout only */
};

/* the deadline is processing time, kept in microseconds whatever the event-time type */
static const StateField tj_fields[] = {
	{"timer", SF_TIME, 0},
	{"deadline", SF_INT8, 0},
	{"deleted", SF_BOOL, 0},
	{"version", SF_IMAGE, TJ_INPUT_BUILD},
	{"probes", SF_IMAGES, TJ_INPUT_PROBE},
	{"seqs", SF_BYTEA, 0},
	{"last_written", SF_TIME, 0},
};

/*
 * Timers by time: a key's registered timer, and every timer of
 * TJ_SPACE_TIMERS (the row's namespace, also in its timer field).  An
 * upsert build side's state has one more field (a uid made before has its
 * table without it).
 */
const StateLayout temporal_join_layout = {lengthof(tj_fields) - 1, tj_fields, "timer"};
const StateLayout temporal_join_upsert_layout = {lengthof(tj_fields), tj_fields, "timer"};

/* ---- row images ---- */

static inline TjProbe *
probes_at(TjProbes *p, int i)
{
	Assert(i >= 0 && i < p->n);
	return i == 0 ? &p->first : &p->more[i - 1];
}

static void
probes_add(TjOperator *j, TjProbes *p, int64 seq, TupleTableSlot *row, MinimalTuple image)
{
	TjProbe    *slot;

	if (p->n > 0 && p->n - 1 >= p->cap)
	{
		MemoryContext cxt = keyed_state_context(j->base.state);
		int			cap = Max(4, p->cap * 2);
		TjProbe    *more = MemoryContextAlloc(cxt, sizeof(TjProbe) * cap);

		if (p->cap > 0)
		{
			memcpy(more, p->more, sizeof(TjProbe) * (p->n - 1));
			pfree(p->more);
		}
		p->more = more;
		p->cap = cap;
	}
	p->n++;
	slot = probes_at(p, p->n - 1);
	memset(slot, 0, sizeof(TjProbe));
	slot->seq = seq;
	if (image)
		tuple_pool_store_image(j->pool, &slot->image, image);
	else
		tuple_pool_store_slot(j->pool, &slot->image, row);
	if (seq >= j->next_seq)
		j->next_seq = seq + 1;
}

static void
probes_free(TjOperator *j, TjProbes *p)
{
	int			i;

	for (i = 0; i < p->n; i++)
		tuple_pool_free(j->pool, &probes_at(p, i)->image);
	if (p->more)
		pfree(p->more);
	p->more = NULL;
	p->n = p->cap = 0;
}

/*
 * A row image as a composite datum of desc's type, in the current context:
 * heap_copy_tuple_as_datum() gives it the header the server expects (type,
 * its version) and flattens any TOAST pointer out of it.
 */
static Datum
image_datum(MinimalTuple mt, TupleDesc desc)
{
	HeapTupleData ht;

	/* the header heap_tuple_from_minimal_tuple() would build, without a copy */
	ht.t_len = mt->t_len + MINIMAL_TUPLE_OFFSET;
	ht.t_data = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
	ItemPointerSetInvalid(&ht.t_self);
	ht.t_tableOid = InvalidOid;
	return heap_copy_tuple_as_datum(&ht, desc);
}

/* ---- output ---- */

/* Emit (probe, version); version NULL: the LEFT join's padding. */
static void
emit_pair(TjOperator *j, TupleTableSlot *probe, MinimalTuple probe_image,
		  MinimalTuple version)
{
	TupleTableSlot *out = j->out_slot;
	MemoryContext old = MemoryContextSwitchTo(j->emit_cxt);

	ExecClearTuple(out);
	/* of the probe's row type: the slot's own may be a query's record */
	if (probe_image)
		out->tts_values[0] = image_datum(probe_image, j->opts.probe_desc);
	else
	{
		bool		should_free;
		HeapTuple	ht = ExecFetchSlotHeapTuple(probe, false, &should_free);

		out->tts_values[0] = heap_copy_tuple_as_datum(ht, j->opts.probe_desc);
	}
	out->tts_isnull[0] = false;
	out->tts_values[1] = version ? image_datum(version, j->opts.build_desc) : (Datum) 0;
	out->tts_isnull[1] = (version == NULL);
	ExecStoreVirtualTuple(out);
	/* the probe's kind: the probe side is insert-only */
	ptf_operator_emit(&j->base, ROWKIND_INSERT, out);
	ExecClearTuple(out);
	MemoryContextSwitchTo(old);
	MemoryContextReset(j->emit_cxt);
}

/*
 * Join one probe row (in probe, or as probe_image) of time t with the key
 * rec (NULL: no state, or a key with NULL parts, which never matches),
 * its version found by the row's prefetch when it came in a batch
 * (prefetched, see tj_prefetch).  Only the chosen version is tried: no
 * fallback to an older one.
 */
static void
join_probe(TjOperator *j, StateRecord *rec, TupleTableSlot *probe,
		   MinimalTuple probe_image, PtfTime t, const uint64 *prefetched)
{
	KeyedState *ks = j->base.state;
	int			i = rec ? keyed_state_ns_floor_prefetched(ks, rec, TJ_SPACE_VERSIONS, t,
														  prefetched) : -1;

	if (i >= 0)
	{
		TjVersion  *v = keyed_state_ns_at(ks, rec, TJ_SPACE_VERSIONS, i, NULL);

		if (!v->deleted)
		{
			bool		match = true;

			if (j->opts.condition)
			{
				if (probe_image)
				{
					ExecStoreMinimalTuple(probe_image, j->probe_slot, false);
					probe = j->probe_slot;
				}
				ExecStoreMinimalTuple(v->image.tuple, j->build_slot, false);
				match = j->opts.condition(j->opts.condition_arg, probe, j->build_slot);
				ExecClearTuple(j->build_slot);
				ExecClearTuple(j->probe_slot);
			}
			if (match)
			{
				emit_pair(j, probe, probe_image, v->image.tuple);
				return;
			}
		}
	}
	if (j->opts.left)
		emit_pair(j, probe, probe_image, NULL);
}

/* ---- timers and TTL: Flink's bookkeeping ---- */

/* A live event timer of the key at t (Flink's timer service dedups them). */
static void
timer_add(TjOperator *j, StateRecord *rec, PtfTime t)
{
	bool		created;

	keyed_state_ns_get(j->base.state, rec, TJ_SPACE_TIMERS, t, &created);
	if (!created)
		return;
	keyed_state_ns_mark_changed(j->base.state, rec, TJ_SPACE_TIMERS, t);
	timer_register(j->base.timers, PTF_EVENT_TIME, t, rec, t, TJ_TIMER_FIRE);
}

/* One event timer per key, at the least time registered (registerSmallestTimer). */
static void
register_smallest_timer(TjOperator *j, StateRef *ref, PtfTime t)
{
	TjKey	   *k = (TjKey *) ref->value;

	if (k->has_timer && k->timer <= t)
		return;
	/* a deleted timer stays in the queue and is ignored when it fires */
	if (k->has_timer)
		keyed_state_ns_remove(j->base.state, ref->rec, TJ_SPACE_TIMERS, k->timer);
	timer_add(j, ref->rec, t);
	k->timer = t;
	k->has_timer = true;
	keyed_state_mark_changed(j->base.state, ref->rec);
}

/*
 * A touch of the key at processing time now (registerProcessingCleanupTimer):
 * the deadline moves to now + max retention only when now + min retention
 * is past it, that is when it is less than one retention away.
 */
static void
ttl_touch(TjOperator *j, StateRef *ref, PtfTime now)
{
	TjKey	   *k = (TjKey *) ref->value;

	if (!j->cleaning)
		return;
	if (k->has_deadline && ptf_time_add(now, j->min_retention) <= k->deadline)
		return;
	k->deadline = ptf_time_add(now, j->max_retention);
	k->has_deadline = true;
	timer_register(j->base.timers, PTF_PROCESSING_TIME, k->deadline, ref->rec, 0,
				   TJ_TIMER_CLEANUP);
	keyed_state_mark_changed(j->base.state, ref->rec);
}

/* Drop the versions or probe rows of a key, from position `from` on, `n` of them. */
static void
drop_range(TjOperator *j, StateRecord *rec, int space, int from, int n)
{
	KeyedState *ks = j->base.state;
	int			i;

	/* from the back: each removal moves only the entries after it */
	for (i = from + n - 1; i >= from; i--)
	{
		int64		ns;
		void	   *v = keyed_state_ns_at(ks, rec, space, i, &ns);

		if (space == TJ_SPACE_VERSIONS)
			tuple_pool_free(j->pool, &((TjVersion *) v)->image);
		else
			probes_free(j, (TjProbes *) v);
		keyed_state_ns_remove(ks, rec, space, ns);
	}
}

/* A key that holds nothing, not even a timer, is forgotten (no FLINK-21833 leak). */
static void
forget_if_empty(TjOperator *j, StateRef *ref)
{
	KeyedState *ks = j->base.state;
	TjKey	   *k = (TjKey *) ref->value;

	if (keyed_state_ns_count(ks, ref->rec, TJ_SPACE_VERSIONS) == 0 &&
		keyed_state_ns_count(ks, ref->rec, TJ_SPACE_PROBES) == 0 &&
		keyed_state_ns_count(ks, ref->rec, TJ_SPACE_TIMERS) == 0 &&
		!k->has_deadline && !k->has_last)
	{
		Assert(!k->has_timer);
		keyed_state_remove(ks, ref->rec);
	}
}

/* ---- rows ---- */

static bool
key_has_nulls(KeySpec *keys, TupleTableSlot *row)
{
	int			i;

	for (i = 0; i < keys->ncols; i++)
		if (slot_attisnull(row, keys->cols[i].attno))
			return true;
	return false;
}

/* The key's state, made if need be; false: the budget is spent, the row spills. */
static bool
key_state(TjOperator *j, TupleTableSlot *row, const PtfRowContext *ctx, StateRef *ref)
{
	KeyedLookup res = keyed_state_lookup(j->base.state, ctx->keys, row, ctx->proc_time,
										 true, ref);

	Assert(res != KS_ABSENT);
	return res != KS_FULL;
}

/*
 * An upsert build side's delete names only its key: the row it deletes is
 * the key's last row written, whose time is kept.  False: a key with no
 * row written (its row predates the stream, or its state expired), passed
 * over and counted.
 */
static bool
deleted_row_time(TjOperator *j, TupleTableSlot *row, const PtfRowContext *ctx, PtfTime *t)
{
	StateRef	ref;
	TjKey	   *k;

	Assert(j->opts.upsert_build);
	if (keyed_state_lookup(j->base.state, ctx->keys, row, ctx->proc_time, false, &ref) != KS_FOUND ||
		!((TjKey *) ref.value)->has_last)
	{
		j->unknown_deletes++;
		return false;
	}
	k = (TjKey *) ref.value;
	*t = k->last;
	k->has_last = false;
	keyed_state_mark_changed(j->base.state, ref.rec);
	return true;
}

/*
 * A build row: a version at its time, or a deletion marker there.  Late
 * ones (at or below the watermark) are versions too, counted late: they
 * may still matter to probe rows not emitted yet.
 */
static PtfRowResult
on_build(TjOperator *j, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	KeyedState *ks = j->base.state;
	PtfTime		t = ctx->event_time;
	bool		late;
	StateRef	ref;
	TjVersion  *v;
	bool		created;

	/* Flink's planner drops update-befores ahead of the join: the +U follows */
	if (kind == ROWKIND_UPDATE_BEFORE)
		return PTF_ROW_DONE;
	/* a key with a NULL part never joins: nothing to keep */
	if (key_has_nulls(ctx->keys, row))
		return (j->opts.live && !ctx->meta->partial && t <= ctx->watermark) ?
			PTF_ROW_LATE_KEPT : PTF_ROW_DONE;
	/*
	 * An upsert source's delete: at the time of the key's last row.  Other
	 * partial images (an identity with build_time and the key) carry it.
	 */
	if (ctx->meta->partial && j->opts.upsert_build && !deleted_row_time(j, row, ctx, &t))
		return PTF_ROW_DONE;
	late = j->opts.live && t <= ctx->watermark;

	if (!key_state(j, row, ctx, &ref))
		return PTF_ROW_SPILL;

	v = keyed_state_ns_get(ks, ref.rec, TJ_SPACE_VERSIONS, t, &created);
	/* same time: the later change replaces the earlier */
	if (kind == ROWKIND_DELETE)
	{
		tuple_pool_free(j->pool, &v->image);
		v->deleted = true;
	}
	else
	{
		tuple_pool_store_slot(j->pool, &v->image, row);
		v->deleted = false;
		if (j->opts.upsert_build)
		{
			TjKey	   *k = (TjKey *) ref.value;

			/* the key's last row written, whatever its time: what a delete deletes */
			k->last = t;
			k->has_last = true;
			keyed_state_mark_changed(ks, ref.rec);
		}
	}
	keyed_state_ns_mark_changed(ks, ref.rec, TJ_SPACE_VERSIONS, t);

	if (j->opts.live)
	{
		register_smallest_timer(j, &ref, t);
		ttl_touch(j, &ref, ctx->proc_time);
	}
	return late ? PTF_ROW_LATE_KEPT : PTF_ROW_DONE;
}

/* A probe row when the watermark moves: buffered until it passes the row. */
static PtfRowResult
on_probe_live(TjOperator *j, TupleTableSlot *row, const PtfRowContext *ctx)
{
	KeyedState *ks = j->base.state;
	StateRef	ref;
	TjProbes   *p;
	bool		created;

	/* newer Flink (FLINK-39719): dropped, not even padded for LEFT */
	if (ctx->event_time <= ctx->watermark)
		return PTF_ROW_LATE;
	/* an inner join never emits a key with NULL parts */
	if (!j->opts.left && key_has_nulls(ctx->keys, row))
		return PTF_ROW_DONE;

	if (!key_state(j, row, ctx, &ref))
		return PTF_ROW_SPILL;
	p = keyed_state_ns_get(ks, ref.rec, TJ_SPACE_PROBES, ctx->event_time, &created);
	probes_add(j, p, j->next_seq, row, NULL);
	keyed_state_ns_mark_changed(ks, ref.rec, TJ_SPACE_PROBES, ctx->event_time);
	register_smallest_timer(j, &ref, ctx->event_time);
	ttl_touch(j, &ref, ctx->proc_time);
	return PTF_ROW_DONE;
}

/* A probe row when every version is in: joined at once. */
static PtfRowResult
on_probe_now(TjOperator *j, TupleTableSlot *row, const PtfRowContext *ctx)
{
	StateRef	ref;

	if (key_has_nulls(ctx->keys, row))
	{
		join_probe(j, NULL, row, NULL, ctx->event_time, NULL);
		return PTF_ROW_DONE;
	}
	switch (keyed_state_lookup_prefetched(j->base.state, ctx->keys, row, ctx->proc_time, false,
										  ctx->prefetched, &ref))
	{
		case KS_FULL:
			/* the key may be spilled with its versions: its partition decides */
			return PTF_ROW_SPILL;
		case KS_FOUND:
			join_probe(j, ref.rec, row, NULL, ctx->event_time, ctx->prefetched);
			break;
		default:
			join_probe(j, NULL, row, NULL, ctx->event_time, NULL);
			break;
	}
	return PTF_ROW_DONE;
}

static PtfRowResult
tj_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	TjOperator *j = (TjOperator *) op;

	if (ctx->input == TJ_INPUT_BUILD)
		return on_build(j, kind, row, ctx);
	/* the function lets only inserts of the probe side through */
	Assert(ctx->input == TJ_INPUT_PROBE && kind == ROWKIND_INSERT);
	return j->opts.live ? on_probe_live(j, row, ctx) : on_probe_now(j, row, ctx);
}

/* ---- firing ---- */

static int
due_cmp(const void *a, const void *b)
{
	int64		sa = ((const TjDue *) a)->seq;
	int64		sb = ((const TjDue *) b)->seq;

	return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

/* Join and drop the key's probe rows at or below wm, in arrival order. */
static void
emit_due(TjOperator *j, StateRecord *rec, PtfTime wm)
{
	KeyedState *ks = j->base.state;
	int			n = keyed_state_ns_count(ks, rec, TJ_SPACE_PROBES);
	int			upto = (wm == PTF_TIME_MAX) ? n :
		keyed_state_ns_lower_bound(ks, rec, TJ_SPACE_PROBES, wm + 1);
	TjDue	   *due;
	int			ndue = 0;
	int			i,
				r;

	if (upto == 0)
		return;
	for (i = 0; i < upto; i++)
		ndue += ((TjProbes *) keyed_state_ns_at(ks, rec, TJ_SPACE_PROBES, i, NULL))->n;
	due = palloc(sizeof(TjDue) * ndue);
	ndue = 0;
	for (i = 0; i < upto; i++)
	{
		int64		t;
		TjProbes   *p = keyed_state_ns_at(ks, rec, TJ_SPACE_PROBES, i, &t);

		for (r = 0; r < p->n; r++)
		{
			due[ndue].seq = probes_at(p, r)->seq;
			due[ndue].time = t;
			due[ndue].image = probes_at(p, r)->image.tuple;
			ndue++;
		}
	}
	if (ndue > 1)
		qsort(due, ndue, sizeof(TjDue), due_cmp);
	for (i = 0; i < ndue; i++)
		join_probe(j, rec, NULL, due[i].image, due[i].time, NULL);
	pfree(due);
	drop_range(j, rec, TJ_SPACE_PROBES, 0, upto);
}

/*
 * Versions no probe row can reach any more: keep the newest at or below
 * wm and everything newer; always at least the latest one.
 */
static void
clean_versions(TjOperator *j, StateRecord *rec, PtfTime wm)
{
	KeyedState *ks = j->base.state;
	int			n = keyed_state_ns_count(ks, rec, TJ_SPACE_VERSIONS);
	int			above = (wm == PTF_TIME_MAX) ? n :
		keyed_state_ns_lower_bound(ks, rec, TJ_SPACE_VERSIONS, wm + 1);
	int			keep = (above == n) ? n - 1 : above - 1;

	if (keep > 0)
		drop_range(j, rec, TJ_SPACE_VERSIONS, 0, keep);
}

/* Flink's onEventTime for one key: emitResultAndCleanUpState at wm. */
static void
fire_key(TjOperator *j, StateRef *ref, PtfTime wm, PtfTime proc_time)
{
	KeyedState *ks = j->base.state;
	TjKey	   *k = (TjKey *) ref->value;
	bool		pending;

	k->has_timer = false;
	keyed_state_mark_changed(ks, ref->rec);
	emit_due(j, ref->rec, wm);
	clean_versions(j, ref->rec, wm);

	/* the next timer: the oldest probe row still waiting */
	pending = keyed_state_ns_count(ks, ref->rec, TJ_SPACE_PROBES) > 0;
	if (pending)
	{
		int64		next;

		keyed_state_ns_at(ks, ref->rec, TJ_SPACE_PROBES, 0, &next);
		timer_add(j, ref->rec, next);
		k->timer = next;
		k->has_timer = true;
	}
	if (j->cleaning)
	{
		if (pending || keyed_state_ns_count(ks, ref->rec, TJ_SPACE_VERSIONS) > 0)
			ttl_touch(j, ref, proc_time);
		else
			k->has_deadline = false;	/* Flink deletes the cleanup timer */
	}
	forget_if_empty(j, ref);
}

/* The deadline passed: the key's whole state goes, silently (cleanupState). */
static void
clean_key(TjOperator *j, StateRef *ref)
{
	KeyedState *ks = j->base.state;
	TjKey	   *k = (TjKey *) ref->value;

	drop_range(j, ref->rec, TJ_SPACE_PROBES, 0,
			   keyed_state_ns_count(ks, ref->rec, TJ_SPACE_PROBES));
	drop_range(j, ref->rec, TJ_SPACE_VERSIONS, 0,
			   keyed_state_ns_count(ks, ref->rec, TJ_SPACE_VERSIONS));
	/* only the bookkeeping: the event timer itself stays, and fires on nothing */
	k->has_timer = false;
	k->has_deadline = false;
	k->has_last = false;
	keyed_state_mark_changed(ks, ref->rec);
	forget_if_empty(j, ref);
}

static void
tj_on_timer(PtfOperator *op, const PtfTimer *timer, PtfTime watermark, PtfTime proc_time)
{
	TjOperator *j = (TjOperator *) op;
	KeyedState *ks = op->state;
	StateRef	ref;
	TjKey	   *k;

	Assert(j->opts.live);
	/* timers are never deleted: one of a forgotten key, or a replaced one, is stale */
	if (timer->rec->flags & RECORD_REMOVED)
		return;
	keyed_state_record_ref(ks, timer->rec, &ref);
	k = (TjKey *) ref.value;
	if (timer->tag == TJ_TIMER_CLEANUP)
	{
		if (k->has_deadline && k->deadline == timer->time)
			clean_key(j, &ref);
		return;
	}
	Assert(timer->tag == TJ_TIMER_FIRE && timer->time <= watermark);
	if (keyed_state_ns_find(ks, timer->rec, TJ_SPACE_TIMERS, timer->time) == NULL)
		return;
	keyed_state_ns_remove(ks, timer->rec, TJ_SPACE_TIMERS, timer->time);
	fire_key(j, &ref, watermark, proc_time);
}

/* ---- durable state ---- */

static void
tj_save(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
		Datum *values, bool *nulls)
{
	TjKey	   *k = (TjKey *) ref->value;

	switch (space)
	{
		case STATE_KEY_SPACE:
			if (k->has_timer)
			{
				values[TJ_FIELD_TIMER] = Int64GetDatum(k->timer);
				nulls[TJ_FIELD_TIMER] = false;
			}
			if (k->has_deadline)
			{
				values[TJ_FIELD_DEADLINE] = Int64GetDatum(k->deadline);
				nulls[TJ_FIELD_DEADLINE] = false;
			}
			if (k->has_last)
			{
				values[TJ_FIELD_LAST] = Int64GetDatum(k->last);
				nulls[TJ_FIELD_LAST] = false;
			}
			break;
		case TJ_SPACE_VERSIONS:
			{
				TjVersion  *v = (TjVersion *) ns_value;

				values[TJ_FIELD_DELETED] = BoolGetDatum(v->deleted);
				nulls[TJ_FIELD_DELETED] = false;
				if (!v->deleted)
				{
					values[TJ_FIELD_VERSION] = PointerGetDatum(v->image.tuple);
					nulls[TJ_FIELD_VERSION] = false;
				}
				break;
			}
		case TJ_SPACE_PROBES:
			{
				TjProbes   *p = (TjProbes *) ns_value;
				StateImages *imgs = palloc(sizeof(StateImages));
				bytea	   *seqs = palloc(VARHDRSZ + sizeof(int64) * p->n);
				int64	   *s = (int64 *) VARDATA(seqs);
				int			i;

				imgs->n = p->n;
				imgs->tuples = palloc(sizeof(MinimalTuple) * p->n);
				for (i = 0; i < p->n; i++)
				{
					imgs->tuples[i] = probes_at(p, i)->image.tuple;
					s[i] = probes_at(p, i)->seq;
				}
				SET_VARSIZE(seqs, VARHDRSZ + sizeof(int64) * p->n);
				values[TJ_FIELD_PROBES] = PointerGetDatum(imgs);
				nulls[TJ_FIELD_PROBES] = false;
				values[TJ_FIELD_SEQS] = PointerGetDatum(seqs);
				nulls[TJ_FIELD_SEQS] = false;
				break;
			}
		case TJ_SPACE_TIMERS:
			/* the namespace is the timer; the field finds it by time */
			values[TJ_FIELD_TIMER] = Int64GetDatum(ns);
			nulls[TJ_FIELD_TIMER] = false;
			break;
	}
}

/* Values back from durable state, and the timers they imply. */
static void
tj_restore(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
		   Datum *values, bool *nulls)
{
	TjOperator *j = (TjOperator *) arg;
	TjKey	   *k = (TjKey *) ref->value;

	switch (space)
	{
		case STATE_KEY_SPACE:
			k->has_timer = !nulls[TJ_FIELD_TIMER];
			k->timer = k->has_timer ? DatumGetInt64(values[TJ_FIELD_TIMER]) : 0;
			k->has_deadline = !nulls[TJ_FIELD_DEADLINE];
			k->deadline = k->has_deadline ? DatumGetInt64(values[TJ_FIELD_DEADLINE]) : 0;
			k->has_last = j->opts.upsert_build && !nulls[TJ_FIELD_LAST];
			k->last = k->has_last ? DatumGetInt64(values[TJ_FIELD_LAST]) : 0;
			if (k->has_deadline)
				timer_register(j->base.timers, PTF_PROCESSING_TIME, k->deadline, ref->rec,
							   0, TJ_TIMER_CLEANUP);
			break;
		case TJ_SPACE_VERSIONS:
			{
				TjVersion  *v = (TjVersion *) ns_value;

				v->deleted = DatumGetBool(values[TJ_FIELD_DELETED]);
				if (!v->deleted)
					tuple_pool_store_image(j->pool, &v->image,
										   (MinimalTuple) DatumGetPointer(values[TJ_FIELD_VERSION]));
				break;
			}
		case TJ_SPACE_PROBES:
			{
				TjProbes   *p = (TjProbes *) ns_value;
				StateImages *imgs = (StateImages *) DatumGetPointer(values[TJ_FIELD_PROBES]);
				bytea	   *seqs = DatumGetByteaPP(values[TJ_FIELD_SEQS]);
				int64		s[1];
				int			i;

				if (VARSIZE_ANY_EXHDR(seqs) != sizeof(int64) * imgs->n)
					ptf_state_corrupted("%d buffered probe rows but %zu bytes of their arrival numbers",
										imgs->n, VARSIZE_ANY_EXHDR(seqs));
				for (i = 0; i < imgs->n; i++)
				{
					memcpy(s, VARDATA_ANY(seqs) + sizeof(int64) * i, sizeof(int64));
					probes_add(j, p, s[0], NULL, imgs->tuples[i]);
				}
				break;
			}
		case TJ_SPACE_TIMERS:
			timer_register(j->base.timers, PTF_EVENT_TIME, ns, ref->rec, ns, TJ_TIMER_FIRE);
			break;
	}
}

/*
 * A key leaves memory (its rows stay in the table, written back): its
 * versions' and buffered rows' images go; its timers are found again by
 * time when due, its TTL deadline when it is read again.
 */
static bool
tj_evict(PtfOperator *op, StateRef *ref)
{
	TjOperator *j = (TjOperator *) op;
	KeyedState *ks = op->state;
	int			i;

	for (i = 0; i < keyed_state_ns_count(ks, ref->rec, TJ_SPACE_VERSIONS); i++)
	{
		int64		ns;
		TjVersion  *v = keyed_state_ns_at(ks, ref->rec, TJ_SPACE_VERSIONS, i, &ns);

		if (!v->deleted)
			tuple_pool_free(j->pool, &v->image);
	}
	for (i = 0; i < keyed_state_ns_count(ks, ref->rec, TJ_SPACE_PROBES); i++)
	{
		int64		ns;

		probes_free(j, (TjProbes *) keyed_state_ns_at(ks, ref->rec, TJ_SPACE_PROBES, i, &ns));
	}
	return true;
}

uint64
temporal_join_unknown_deletes(PtfOperator *op)
{
	return ((TjOperator *) op)->unknown_deletes;
}

/*
 * Probe rows come in batches (the frame's prefetch_input): each row's key
 * record and the search of its versions (keyed_state_prefetch_stage), then
 * the version at or below its time and that version's image, which the
 * output copies -- four cache misses a probe of many keys otherwise waits
 * for one after the other.  The version's position found goes on to
 * join_probe.  A live join buffers its probes: only the record is asked
 * for.
 */
#define TJ_PREFETCH_STAGES	(KEYED_PREFETCH_STAGES + 1)

static void
tj_prefetch(PtfOperator *op, TupleTableSlot *row, const PtfRowContext *ctx, int stage,
			uint64 *scratch)
{
	TjOperator *j = (TjOperator *) op;
	bool		versions = (!j->opts.live && ctx->event_time != PTF_TIME_MIN);

	Assert(ctx->input == TJ_INPUT_PROBE);
	if (stage < KEYED_PREFETCH_STAGES - 1)
		keyed_state_prefetch_stage(op->state, ctx->keys, row, stage,
								   versions ? TJ_SPACE_VERSIONS : -1, ctx->event_time, scratch);
	else if (!versions || scratch[1] == 0)
		return;
	else if (stage == KEYED_PREFETCH_STAGES - 1)
	{
		TjVersion  *v = keyed_state_prefetch_ns_floor(op->state, scratch, TJ_SPACE_VERSIONS,
													 ctx->event_time);

		scratch[KEYED_PREFETCH_WORDS] = (uint64) (uintptr_t) v;
		if (v != NULL)
			__builtin_prefetch(v);
	}
	else
	{
		TjVersion  *v = (TjVersion *) (uintptr_t) scratch[KEYED_PREFETCH_WORDS];

		if (v != NULL && v->image.tuple != NULL)
		{
			__builtin_prefetch(v->image.tuple);
			__builtin_prefetch((char *) v->image.tuple + 64);
		}
	}
}

static const PtfOperatorMethods tj_methods = {
	.name = "temporal_join",
	.on_row = tj_on_row,
	.prefetch = tj_prefetch,
	.prefetch_stages = TJ_PREFETCH_STAGES,
	.prefetch_input = TJ_INPUT_PROBE,
	.evict = tj_evict,
	.on_timer = tj_on_timer,
};

PtfOperator *
temporal_join_create(const TemporalJoinOptions *opts, const PtfOperatorEnv *env)
{
	TjOperator *j;
	KeyedStateSpec spec;
	MemoryContext old;

	/* without a live watermark nothing may need timers */
	Assert(opts->live || opts->retention_us <= TJ_MIN_CLEANING_RETENTION_US);
	Assert(opts->out_desc->natts == 2);

	memset(&spec, 0, sizeof(spec));
	spec.keys = opts->keys;
	spec.hot = sizeof(TjKey);
	spec.nspaces = TJ_NSPACES;
	spec.ns_value_size[TJ_SPACE_VERSIONS] = sizeof(TjVersion);
	spec.ns_value_size[TJ_SPACE_PROBES] = sizeof(TjProbes);
	spec.ns_value_size[TJ_SPACE_TIMERS] = 1;
	spec.mem_limit = env->mem_limit;
	spec.expected_keys = env->expected_keys;
	/* timers point at records, and keys go when they hold nothing */
	spec.flags = (env->durable ? KEYED_STATE_DURABLE : 0) | KEYED_STATE_STABLE |
		KEYED_STATE_REMOVABLE;

	j = (TjOperator *) ptf_operator_alloc(sizeof(TjOperator), &tj_methods, env);
	old = MemoryContextSwitchTo(j->base.cxt);
	j->opts = *opts;
	/* the call's output descriptor: an operator a worker keeps outlives it */
	j->opts.out_desc = CreateTupleDescCopy(opts->out_desc);
	j->base.state = keyed_state_create(&spec, j->base.cxt);
	j->base.codec.layout = opts->upsert_build ? &temporal_join_upsert_layout :
		&temporal_join_layout;
	j->base.codec.arg = j;
	j->base.codec.save = tj_save;
	j->base.codec.restore = tj_restore;
	j->cleaning = opts->retention_us > TJ_MIN_CLEANING_RETENTION_US;
	j->min_retention = opts->retention_us;
	j->max_retention = opts->retention_us * 3 / 2;
	j->pool = tuple_pool_create(keyed_state_context(j->base.state),
								 keyed_state_block_size(j->base.state));
	j->probe_slot = MakeSingleTupleTableSlot(opts->probe_desc, &TTSOpsMinimalTuple);
	j->build_slot = MakeSingleTupleTableSlot(opts->build_desc, &TTSOpsMinimalTuple);
	j->out_slot = MakeSingleTupleTableSlot(j->opts.out_desc, &TTSOpsVirtual);
	j->emit_cxt = AllocSetContextCreate(j->base.cxt, "temporal join output row",
										ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(old);
	return &j->base;
}
