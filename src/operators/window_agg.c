/*-------------------------------------------------------------------------
 *
 * window_agg.c
 *	  Flink's sliced window aggregate (TUMBLE, HOP, CUMULATE; SESSION in
 *	  window_session.c): the operator, its slices, firing and durable state.
 *
 * Each key has, per slice, its row count and aggregate states (or the
 * rows of aggregates that cannot be sliced); a window is the slices it
 * spans, combined when it fires (window_math.c says which).  Per key
 * next_fire, the end of its next window to fire, with an event-time timer
 * at next_fire - 1 ms (one live timer per key; superseded ones are
 * ignored).  Which windows have fired is the watermark's to say: every
 * key's window ending at e fires when it passes e - 1 ms.
 *
 * State per key (keyed_state.h namespaces): space SLICES, slice end ->
 * its row count, its SLICED aggregate states and its kept inputs (aggs.h);
 * with updating input also space WINDOWS, window end -> the MOVING states
 * of that window; for SESSION, space SESSIONS (window_session.c).
 * Aggregate states of one slice end (or window end) live in one memory
 * context shared by every key, deleted when the last key lets go of it;
 * by-value states made inline (count, sums of integers) need none.
 *
 * Firing (on the key's timer at window end e): the window's slices are
 * combined (or its MOVING states taken), the output row emitted unless
 * the window is empty (all its rows retracted) or, for CUMULATE with
 * emit_only_on_update, equal to the previous window of its cumulation
 * (the window slicing design's fireWindow); slices whose last window is e
 * go; next_fire moves to the first window after e holding a slice of the
 * key.  Windows fire in window-end order: timers fire in time order (at
 * the end of a bounded input, in that order per key, a key at a time).
 * There a HOP window of counts and integer sums is not combined from its
 * size / slide slices but slid from the key's previous window: the slices
 * that enter are added, those that leave taken away (aggs.h, AggSlide).
 *
 * Late rows (Flink's slicing, FLINK-21305): a row whose slice's windows
 * have all fired (last_end - 1 ms <= watermark) is dropped and counted;
 * one whose slice is fired but whose later windows are not still goes to
 * its slice, and so counts in those later windows.
 *
 * Durable state (a uid) stores keys and their slices and sessions (not the
 * MOVING states of windows: made again from the slices' rows), and in
 * fires_at the time of each key's next window and each session's end, by
 * which a call reading its state a key at a time finds the keys whose
 * windows its watermark closes.  Loaded keys are armed when the call
 * starts (ensure_armed) or, when read in the middle of it, at once
 * (window_agg_loaded).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"

#include "base/ptf_time.h"
#include "operators/window_internal.h"

enum
{
	FIELD_PREV_END,
	FIELD_PREV_VALUES,
	FIELD_NROWS,
	FIELD_STATES,
	FIELD_INPUTS,
	FIELD_SESSION_END,
	FIELD_FIRES_AT
};

/* the word of a row's prefetch scratch holding its slice (operator.h) */
#define PREFETCH_SLICE	KEYED_PREFETCH_WORDS

static const StateField window_agg_fields[] = {
	{"prev_end", SF_TIME, 0},
	{"prev_values", SF_BYTEA, 0},
	{"nrows", SF_INT8, 0},
	{"states", SF_BYTEA, 0},
	{"inputs", SF_BYTEA, 0},
	{"session_end", SF_TIME, 0},
	{"fires_at", SF_TIME, 0},
};

/*
 * fires_at, the timer field (state/layout.h): a key's row holds its next
 * window's timer, next_fire - 1 ms -- the key's one live aligned timer,
 * and every change of next_fire marks the key changed -- and a session's
 * row its session's, end - 1 ms.  Slice rows hold none: a slice's next
 * window is its key's to say.  Both are exact, and later than the
 * watermark they are written under (due timers have fired by then).
 */
const StateLayout window_agg_layout = {lengthof(window_agg_fields), window_agg_fields,
"fires_at"};


/* -- shared memory of slice ends -- */

static int
shared_search(WinAggOp *wa, int space, int64 ns)
{
	int			lo = 0;
	int			hi = wa->nshared;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;
		SharedMemory *m = &wa->shared[mid];

		if (m->space < space || (m->space == space && m->ns < ns))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static AggMemory *
shared_acquire(WinAggOp *wa, int space, int64 ns)
{
	int			i = shared_search(wa, space, ns);
	SharedMemory *m;

	if (!wa->needs_memory)
		return NULL;
	if (i < wa->nshared && wa->shared[i].space == space && wa->shared[i].ns == ns)
	{
		wa->shared[i].refs++;
		return wa->shared[i].mem;
	}
	if (wa->nshared == wa->maxshared)
	{
		wa->maxshared = Max(16, wa->maxshared * 2);
		wa->shared = wa->shared == NULL ?
			MemoryContextAlloc(wa->base.cxt, sizeof(SharedMemory) * wa->maxshared) :
			repalloc(wa->shared, sizeof(SharedMemory) * wa->maxshared);
	}
	memmove(&wa->shared[i + 1], &wa->shared[i], sizeof(SharedMemory) * (wa->nshared - i));
	wa->nshared++;
	m = &wa->shared[i];
	m->space = space;
	m->ns = ns;
	m->refs = 1;
	/* under the state's context: its memory counts against the state's budget */
	m->mem = aggs_memory_create(keyed_state_context(wa->base.state));
	return m->mem;
}

static void
shared_release(WinAggOp *wa, int space, int64 ns)
{
	int			i = shared_search(wa, space, ns);

	if (!wa->needs_memory)
		return;
	Assert(i < wa->nshared && wa->shared[i].space == space && wa->shared[i].ns == ns);
	Assert(wa->shared[i].refs > 0);
	if (--wa->shared[i].refs > 0)
		return;
	aggs_memory_delete(wa->shared[i].mem);
	memmove(&wa->shared[i], &wa->shared[i + 1], sizeof(SharedMemory) * (wa->nshared - i - 1));
	wa->nshared--;
}

/* -- slices and windows of a key -- */

static SliceValue *
slice_get(WinAggOp *wa, StateRecord *rec, PtfTime end, const uint64 *prefetched)
{
	bool		created;
	SliceValue *sv = keyed_state_ns_get_prefetched(wa->base.state, rec, SPACE_SLICES, end,
												   prefetched, &created);

	if (created)
	{
		sv->mem = shared_acquire(wa, SPACE_SLICES, end);
		aggs_init_sliced(wa->aggs, sv->accs, sv->mem);
	}
	return sv;
}

static void
slice_remove(WinAggOp *wa, StateRecord *rec, PtfTime end)
{
	keyed_state_ns_remove(wa->base.state, rec, SPACE_SLICES, end);
	shared_release(wa, SPACE_SLICES, end);
}

/* The MOVING states of a window, recomputed from its slices' inputs when new. */
static WindowValue *
window_get(WinAggOp *wa, StateRecord *rec, PtfTime end, bool *created)
{
	WindowValue *wv = keyed_state_ns_get(wa->base.state, rec, SPACE_WINDOWS, end, created);
	KeyedState *ks = wa->base.state;

	if (*created)
	{
		PtfTime		start = window_start_of(&wa->spec, end);
		int			i;

		wv->mem = shared_acquire(wa, SPACE_WINDOWS, end);
		aggs_init_moving(wa->aggs, wv->accs, wv->mem);
		for (i = keyed_state_ns_lower_bound(ks, rec, SPACE_SLICES, start + 1);
			 i < keyed_state_ns_count(ks, rec, SPACE_SLICES); i++)
		{
			int64		s;
			SliceValue *sv = keyed_state_ns_at(ks, rec, SPACE_SLICES, i, &s);

			if (s > end)
				break;
			if (sv == NULL)
				continue;		/* a hole of the grid */
			wv->nrows += sv->nrows;
			aggs_moving_add_rows(wa->aggs, wv->accs, wv->mem, &sv->rows);
		}
	}
	return wv;
}

static void
window_remove(WinAggOp *wa, StateRecord *rec, PtfTime end)
{
	if (keyed_state_ns_find(wa->base.state, rec, SPACE_WINDOWS, end) == NULL)
		return;
	keyed_state_ns_remove(wa->base.state, rec, SPACE_WINDOWS, end);
	shared_release(wa, SPACE_WINDOWS, end);
}

SliceValue *
winagg_slice_get(WinAggOp *wa, StateRecord *rec, PtfTime end)
{
	return slice_get(wa, rec, end, NULL);
}

/* (Re)arm the key's timer for its window ending at end, if earlier than its next. */
static void
schedule(WinAggOp *wa, StateRecord *rec, KeyHot *hot, PtfTime end)
{
	if (hot->next_fire != PTF_TIME_MIN && hot->next_fire <= end)
		return;
	hot->next_fire = end;
	timer_register(wa->base.timers, PTF_EVENT_TIME, end - MS, rec, end, TIMER_WINDOW);
}

/*
 * The first window of slice s that has not fired under watermark: the
 * ends of its windows are window_first_end(s) + j step.  The caller knows its
 * last window has not fired.
 */
static PtfTime
first_unfired(WinAggOp *wa, PtfTime s, PtfTime watermark)
{
	PtfTime		f = window_first_end(&wa->spec, s);

	if (!window_fired(f, watermark))
		return f;
	f += ((watermark + MS - f) / wa->spec.step + 1) * wa->spec.step;
	Assert(!window_fired(f, watermark) && f <= window_last_end(&wa->spec, s));
	return f;
}

/*
 * A key leaves memory (its rows stay in the table, written back): what its
 * slices and windows share is let go of, its sessions' memory freed.  Its
 * timer is found again by fires_at when due (the key's next window and
 * its sessions' ends are stored).
 */
static bool
window_evict(PtfOperator *op, StateRef *ref)
{
	WinAggOp   *wa = (WinAggOp *) op;
	KeyedState *ks = op->state;
	KeyCold    *cold = (KeyCold *) ref->cold;
	int			space;
	int			i;

	for (space = SPACE_SLICES; space <= SPACE_SESSIONS; space++)
		for (i = 0; i < keyed_state_ns_count(ks, ref->rec, space); i++)
		{
			int64		ns;
			void	   *v = keyed_state_ns_at(ks, ref->rec, space, i, &ns);

			if (v == NULL)
				continue;		/* a hole of the grid */
			if (space == SPACE_SESSIONS)
			{
				if (((SessionValue *) v)->mem)
					aggs_memory_delete(((SessionValue *) v)->mem);
			}
			else
				shared_release(wa, space, ns);
		}
	if (cold->prev_values != NULL)
		pfree(cold->prev_values);
	cold->prev_values = NULL;
	return true;
}

/* A key whose windows have all fired goes, what it holds with it. */
void
winagg_key_remove(WinAggOp *wa, StateRecord *rec)
{
	StateRef	ref;
	KeyCold    *cold;

	keyed_state_record_ref(wa->base.state, rec, &ref);
	cold = (KeyCold *) ref.cold;
	if (cold->prev_values != NULL)
		pfree(cold->prev_values);
	keyed_state_remove(wa->base.state, rec);
}

/* The end of the slice holding time t; PTF_TIME_MIN for none (no window holds infinity). */
static PtfTime
row_slice(WinAggOp *wa, PtfTime t)
{
	PtfTime		s = 0;

	if (wa->spec.kind != WINDOW_SESSION && t != PTF_TIME_MIN && t != PTF_TIME_MAX &&
		window_slice_end(&wa->spec, t, &s))
		return s;
	return PTF_TIME_MIN;
}

static PtfRowResult
aligned_on_row(WinAggOp *wa, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	KeyedState *ks = wa->base.state;
	const WindowSpec *w = &wa->spec;
	PtfTime		s;
	PtfTime		last;
	StateRef	ref;
	KeyHot	   *hot;
	SliceValue *sv;
	int			weight = ROWKIND_IS_ADDITION(kind) ? 1 : -1;

	/* a batched row's slice was found by window_agg_prefetch */
	s = ctx->prefetched != NULL ? (PtfTime) ctx->prefetched[PREFETCH_SLICE] :
		row_slice(wa, ctx->event_time);
	if (s == PTF_TIME_MIN)
	{
		wa->skipped++;			/* no window holds infinity */
		return PTF_ROW_DONE;
	}
	last = window_last_end(w, s);
	if (window_fired(last, ctx->watermark))
		return PTF_ROW_LATE;
	/* a late row of a slice already merged goes where it was merged to */
	if (wa->cumulate_merge && window_fired(s, ctx->watermark))
		s = window_start_of(w, s) + w->step;

	switch (keyed_state_lookup_prefetched(ks, ctx->keys, row, ctx->proc_time, weight > 0,
										  ctx->prefetched, &ref))
	{
		case KS_FULL:
			return PTF_ROW_SPILL;
		case KS_ABSENT:
			wa->skipped++;		/* a retraction of a key with nothing */
			return PTF_ROW_DONE;
		case KS_CREATED:
			((KeyHot *) ref.value)->next_fire = PTF_TIME_MIN;
			keyed_state_mark_changed(ks, ref.rec);
			break;
		case KS_FOUND:
			break;
	}
	hot = (KeyHot *) ref.value;

	aggs_eval(wa->aggs, row);
	if (weight < 0 && keyed_state_ns_find(ks, ref.rec, SPACE_SLICES, s) == NULL)
	{
		wa->skipped++;			/* a retraction of a row never added */
		return PTF_ROW_DONE;
	}
	sv = slice_get(wa, ref.rec, s, ctx->prefetched);
	if (aggs_keeps_rows(wa->aggs) && !aggs_rows_apply(wa->aggs, &sv->rows, sv->mem, weight))
	{
		wa->skipped++;
		return PTF_ROW_DONE;
	}
	sv->nrows += weight;
	if (weight > 0)
		aggs_advance_sliced(wa->aggs, sv->accs, sv->mem);
	keyed_state_ns_mark_changed(ks, ref.rec, SPACE_SLICES, s);

	if (wa->changelog)
	{
		PtfTime		e;

		/* the row into every unfired window holding its slice */
		for (e = first_unfired(wa, s, ctx->watermark); e <= last; e = window_next_end(w, e))
		{
			bool		created;
			WindowValue *wv;

			wv = window_get(wa, ref.rec, e, &created);
			if (created)
				continue;		/* made from the slices, the row included */
			wv->nrows += weight;
			if (!wv->failed && !aggs_advance_moving(wa->aggs, wv->accs, wv->mem, weight))
				wv->failed = true;
		}
	}

	schedule(wa, ref.rec, hot, first_unfired(wa, s, ctx->watermark));
	keyed_state_mark_changed(ks, ref.rec);
	/* a late row kept for its later windows is not counted: only dropped ones are */
	return PTF_ROW_DONE;
}

/* The key's timer for the first unfired window of its slice s. */
void
winagg_schedule_slice(WinAggOp *wa, StateRecord *rec, KeyHot *hot, PtfTime s,
					  PtfTime watermark)
{
	schedule(wa, rec, hot, first_unfired(wa, s, watermark));
}

/* The key's key column values, for outputs naming them. */
void
winagg_key_values(WinAggOp *wa, StateRecord *rec)
{
	keyed_state_record_key(wa->base.state, rec, wa->keyvals, wa->keynulls);
}

/*
 * Emit a window's row: the target's columns from the window's bounds, the
 * keys and the aggregates' outputs.  emit_only_on_update compares the
 * outputs with the previous window of the same cumulation.
 */
void
winagg_emit_window(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime end)
{
	TupleTableSlot *out = wa->out;
	int			natts = wa->outdesc->natts;
	int			i;

	aggs_window_finish(wa->aggs, wa->keyvals, wa->keynulls, wa->values, wa->nulls);

	if (wa->emit_only_on_update)
	{
		StateRef	ref;
		KeyCold    *cold;
		StateImages one;
		bytea	   *now;
		MinimalTuple mt;
		bool		same;
		MemoryContext old = MemoryContextSwitchTo(wa->firemem->cxt);

		keyed_state_record_ref(wa->base.state, rec, &ref);
		cold = (KeyCold *) ref.cold;
		/* the outputs as a row, compared as bytes with the previous window's */
		mt = heap_form_minimal_tuple(wa->values_desc, wa->values, wa->nulls);
		one.n = 1;
		one.tuples = &mt;
		now = state_images_to_bytea(&one, wa->values_desc);
		MemoryContextSwitchTo(old);
		same = (cold->prev_values != NULL && cold->prev_end != PTF_TIME_MIN &&
				window_start_of(&wa->spec, cold->prev_end) == start &&
				VARSIZE(cold->prev_values) == VARSIZE(now) &&
				memcmp(cold->prev_values, now, VARSIZE(now)) == 0);
		if (cold->prev_values)
			pfree(cold->prev_values);
		cold->prev_values = MemoryContextAlloc(keyed_state_context(wa->base.state), VARSIZE(now));
		memcpy(cold->prev_values, now, VARSIZE(now));
		cold->prev_end = end;
		keyed_state_mark_changed(wa->base.state, rec);
		if (same)
			return;
	}

	ExecClearTuple(out);
	for (i = 0; i < natts; i++)
	{
		Oid			type = wa->out_types[i];

		out->tts_isnull[i] = false;
		switch (wa->out_window[i])
		{
			case WCOL_START:
				out->tts_values[i] = ptf_time_to_datum_as(start, wa->time_type, type, &wa->gap_warned);
				break;
			case WCOL_END:
				out->tts_values[i] = ptf_time_to_datum_as(end, wa->time_type, type, &wa->gap_warned);
				break;
			case WCOL_TIME:
				out->tts_values[i] = ptf_time_to_datum_as(end - MS, wa->time_type, type, &wa->gap_warned);
				break;
			case WCOL_NONE:
				if (wa->out_agg[i] >= 0)
				{
					out->tts_values[i] = wa->values[wa->out_agg[i]];
					out->tts_isnull[i] = wa->nulls[wa->out_agg[i]];
				}
				else if (wa->out_key[i] >= 0)
				{
					out->tts_values[i] = wa->keyvals[wa->out_key[i]];
					out->tts_isnull[i] = wa->keynulls[wa->out_key[i]];
				}
				else
					out->tts_isnull[i] = true;	/* a dropped column */
				break;
		}
	}
	for (i = 0; i < natts; i++)
		if (OidIsValid(wa->out_coerce[i].fn_oid) && !out->tts_isnull[i])
		{
			MemoryContext old = MemoryContextSwitchTo(wa->firemem->cxt);

			out->tts_values[i] = FunctionCall3(&wa->out_coerce[i], out->tts_values[i],
											   Int32GetDatum(wa->out_typmods[i]),
											   BoolGetDatum(false));
			MemoryContextSwitchTo(old);
		}
	ExecStoreVirtualTuple(out);
	ptf_operator_emit(&wa->base, ROWKIND_INSERT, out);
}

/*
 * CUMULATE, insert-only: when the window ending at e fires, its newest
 * slice (ending at e) is merged into the cumulation's first slice, which
 * then holds the whole window, as Flink's cumulative slice assigner merges
 * into its first slice: a window combines one state, not k.  The merged
 * slice stays, spent, until the cumulation ends (removing it from the
 * middle of the key's slices would move the later ones); rows arriving
 * late for it go to the first slice.  Returns the first slice, or NULL
 * when the cumulation has no row yet.
 */
static SliceValue *
cumulate_window(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime e)
{
	KeyedState *ks = wa->base.state;
	PtfTime		target_end = start + wa->spec.step;
	SliceValue *src;
	SliceValue *target;

	Assert(!wa->changelog);
	/* earlier cumulations' slices are gone: the first slice is the key's first */
	target = NULL;
	if (keyed_state_ns_count(ks, rec, SPACE_SLICES) > 0)
	{
		int64		first_end;
		SliceValue *first = keyed_state_ns_at(ks, rec, SPACE_SLICES, 0, &first_end);

		if (first_end == target_end)
			target = first;
	}
	if (e == target_end)
		return target;
	src = keyed_state_ns_find(ks, rec, SPACE_SLICES, e);
	if (src == NULL)
		return target;			/* no row in the last step */
	if (target == NULL)
		target = slice_get(wa, rec, target_end, NULL);	/* values never move */
	aggs_merge_into(wa->aggs, target->accs, &target->rows, target->mem, src->accs, &src->rows);
	target->nrows += src->nrows;
	keyed_state_ns_mark_changed(ks, rec, SPACE_SLICES, target_end);
	return target;
}

/* slices ahead of the window being fired that are asked for */
#define SLIDE_PREFETCH 4

/*
 * The key's slices with ends in (lo, hi] added to the slide, or taken
 * away; false when a sum overflows (the slide is then of no use).
 */
static bool
slide_slices(WinAggOp *wa, StateRecord *rec, PtfTime lo, PtfTime hi, bool take_away)
{
	KeyedState *ks = wa->base.state;
	int			n;
	const NsEntry *slices = keyed_state_ns_entries(ks, rec, SPACE_SLICES, &n);
	int			i;

	/* adding to the slide reads the slices, and leaves them where they are */
	for (i = keyed_state_ns_lower_bound(ks, rec, SPACE_SLICES, lo + 1); i < n; i++)
	{
		SliceValue *sv = slices[i].value;

		if (slices[i].ns > hi)
			break;
		if (sv == NULL)
			continue;			/* a hole of the grid */
		wa->slide_nrows += take_away ? -sv->nrows : sv->nrows;
		if (!aggs_slide_add(wa->aggs, wa->slide, sv->accs, take_away))
			return false;
	}

	/*
	 * Each window reads one slice it has not read yet, apart in memory:
	 * ask for the next windows' now, so that their misses overlap with the
	 * firing of this one.
	 */
	if (!take_away && i + SLIDE_PREFETCH < n)
		__builtin_prefetch(slices[i + SLIDE_PREFETCH].value);
	return true;
}

/*
 * The window (start, e] as the slide: from the previous window of the key
 * when the slide holds it, with the slices since its end added; else from
 * all of its slices.  false on overflow: the caller combines the slices.
 */
static bool
slide_to(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime e)
{
	PtfTime		from = wa->slide_end;

	if (!wa->slide_valid || wa->slide_start != start)
	{
		aggs_slide_clear(wa->aggs, wa->slide);
		wa->slide_nrows = 0;
		from = start;
	}
	Assert(from <= e);
	wa->slide_valid = false;
	if (!slide_slices(wa, rec, from, e, false))
		return false;
	wa->slide_start = start;
	wa->slide_end = e;
	wa->slide_valid = true;
	return true;
}

/*
 * After the window (start, e] fired: its slices that the next window does
 * not hold leave the slide, before after_fire drops them.
 */
static void
slide_past(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime e)
{
	PtfTime		next_start = start + wa->spec.step;

	Assert(wa->slide_valid && wa->slide_start == start && wa->slide_end == e);
	wa->slide_valid = false;
	if (!slide_slices(wa, rec, start, next_start, true))
		return;
	wa->slide_start = next_start;
	wa->slide_valid = true;
}

/* The window's slices combined one by one into its states; returns its rows. */
static int64
combine_slices(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime e)
{
	KeyedState *ks = wa->base.state;
	int			n = keyed_state_ns_count(ks, rec, SPACE_SLICES);
	int			first = keyed_state_ns_lower_bound(ks, rec, SPACE_SLICES, start + 1);
	int64		nrows = 0;
	int			i;

	/*
	 * The window's slices live apart in memory: ask for all of them before
	 * reading any, so that their cache misses overlap (a HOP window of 12
	 * slices would otherwise wait for 12 misses in a row).
	 */
	for (i = first; i < n; i++)
	{
		int64		s;
		SliceValue *sv = keyed_state_ns_at(ks, rec, SPACE_SLICES, i, &s);

		if (s > e)
			break;
		if (sv == NULL)
			continue;			/* a hole of the grid */
		__builtin_prefetch(sv);
		__builtin_prefetch((char *) sv + 64);
	}
	for (i = first; i < n; i++)
	{
		int64		s;
		SliceValue *sv = keyed_state_ns_at(ks, rec, SPACE_SLICES, i, &s);

		if (s > e)
			break;
		if (sv == NULL)
			continue;
		nrows += sv->nrows;
		aggs_window_add_slice(wa->aggs, sv->accs, &sv->rows);
	}
	return nrows;
}

/*
 * Fire the key's window ending at e.  sliding: the key's windows fire one
 * after the other (the end of a bounded input), and each may be made from
 * the one before it.
 */
static void
fire_aligned(WinAggOp *wa, StateRecord *rec, KeyHot *hot, PtfTime e, bool sliding)
{
	KeyedState *ks = wa->base.state;
	PtfTime		start = window_start_of(&wa->spec, e);
	int64		nrows;
	bool		slid;

	MemoryContextReset(wa->firemem->cxt);
	aggs_window_begin(wa->aggs, wa->firemem);
	if (wa->cumulate_merge)
	{
		SliceValue *sv = cumulate_window(wa, rec, start, e);

		if (sv != NULL && sv->nrows > 0)
		{
			aggs_window_add_slice(wa->aggs, sv->accs, &sv->rows);
			winagg_key_values(wa, rec);
			winagg_emit_window(wa, rec, start, e);
		}
		return;
	}
	slid = sliding && wa->slide != NULL && slide_to(wa, rec, start, e);
#ifdef USE_ASSERT_CHECKING
	/* the slices combined one by one give the same */
	Assert(!slid || combine_slices(wa, rec, start, e) == wa->slide_nrows);
	Assert(!slid || aggs_window_equals_slide(wa->aggs, wa->slide));
#endif
	/* the slide sets every state of the window, or fails on overflow */
	if (slid && aggs_window_from_slide(wa->aggs, wa->slide))
		nrows = wa->slide_nrows;
	else
	{
		if (slid)
			aggs_window_begin(wa->aggs, wa->firemem);	/* states half set */
		slid = false;
		nrows = combine_slices(wa, rec, start, e);
	}
	if (wa->changelog)
	{
		WindowValue *wv = keyed_state_ns_find(ks, rec, SPACE_WINDOWS, e);

		/* the window's MOVING states, or, when an inverse failed, none: replayed */
		if (wv != NULL)
			nrows = wv->nrows;
		aggs_window_set_moving(wa->aggs, wv != NULL && !wv->failed ? wv->accs : NULL);
	}
	if (nrows > 0)
	{
		winagg_key_values(wa, rec);
		winagg_emit_window(wa, rec, start, e);
	}
	if (wa->changelog)
		window_remove(wa, rec, e);
	if (slid)
		slide_past(wa, rec, start, e);
	else
		wa->slide_valid = false;
}

/*
 * Slices no window after e needs go; the key's next window is armed, or,
 * at the end of input, returned to be fired at once (PTF_TIME_MIN when
 * there is none).
 */
static PtfTime
after_fire(WinAggOp *wa, StateRecord *rec, KeyHot *hot, PtfTime e, PtfTime watermark)
{
	KeyedState *ks = wa->base.state;
	int64		s = 0;

	hot->next_fire = PTF_TIME_MIN;
	while (keyed_state_ns_count(ks, rec, SPACE_SLICES) > 0)
	{
		(void) keyed_state_ns_at(ks, rec, SPACE_SLICES, 0, &s);
		if (window_last_end(&wa->spec, s) > e)
			break;
		slice_remove(wa, rec, s);
	}
	if (keyed_state_ns_count(ks, rec, SPACE_SLICES) > 0)
	{
		PtfTime		f;

		(void) keyed_state_ns_at(ks, rec, SPACE_SLICES, 0, &s);
		f = window_first_end(&wa->spec, s);
		if (f <= e)
			f = window_next_end(&wa->spec, e);
		keyed_state_mark_changed(ks, rec);
		if (watermark == PTF_TIME_MAX)
		{
			hot->next_fire = f;
			return f;
		}
		schedule(wa, rec, hot, f);
	}
	else
		winagg_key_remove(wa, rec);	/* nothing left: the key goes */
	return PTF_TIME_MIN;
}


/* ---- the operator ---- */

static void ensure_armed(WinAggOp *wa, PtfTime watermark);

static PtfRowResult
window_agg_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	WinAggOp  *wa = (WinAggOp *) op;

	if (ctx->input == wa->partial_input)
		return winagg_merge_partial(wa, row, ctx);
	Assert(wa->changelog || kind == ROWKIND_INSERT);
	if (!wa->changelog && kind != ROWKIND_INSERT)
		elog(ERROR, "a change of kind %s in insert-only input", rowkind_long_name(kind));
	if (wa->spec.kind == WINDOW_SESSION)
		return winagg_session_on_row(wa, kind, row, ctx);
	return aligned_on_row(wa, kind, row, ctx);
}

static void
window_agg_on_start(PtfOperator *op, PtfTime watermark)
{
	WinAggOp  *wa = (WinAggOp *) op;

	ensure_armed(wa, watermark);
	wa->live = true;
	wa->watermark = watermark;
}

static void
window_agg_on_watermark(PtfOperator *op, PtfTime watermark, PtfTime proc_time)
{
	((WinAggOp *) op)->watermark = watermark;
	/* a parallel worker's input ends: its slices go to the leader, none fires here */
	if (((WinAggOp *) op)->partial && watermark == PTF_TIME_MAX)
		winagg_emit_partials((WinAggOp *) op);
}

static void
window_agg_on_finish(PtfOperator *op, bool end_of_stream)
{
	((WinAggOp *) op)->live = false;
}

static void
window_agg_on_timer(PtfOperator *op, const PtfTimer *timer, PtfTime watermark,
					PtfTime proc_time)
{
	WinAggOp  *wa = (WinAggOp *) op;
	StateRef	ref;
	KeyHot	   *hot;
	PtfTime		e;

	if (timer->rec->flags & RECORD_REMOVED)
		return;					/* the key went: its timers mean nothing */
	if (wa->partial)
		return;					/* the leader fires the windows */
	if (timer->tag == TIMER_SESSION)
	{
		winagg_fire_session(wa, timer->rec, timer);
		return;
	}
	keyed_state_record_ref(op->state, timer->rec, &ref);
	hot = (KeyHot *) ref.value;
	if (hot->next_fire != timer->ns)
		return;					/* superseded by an earlier window */

	/*
	 * At the end of a bounded input (watermark +infinity) every window
	 * fires: a key's fire one after the other, without a timer each, so
	 * that the slices consecutive windows share are read while they are in
	 * the CPU's caches.  Windows of one key still fire in end order; only
	 * the order between keys differs from the windows' ends, which SQL does
	 * not promise for a function's rows.  A moving watermark fires in time
	 * order, as Flink's timers do.
	 */
	wa->slide_valid = false;	/* another key's */
	for (e = timer->ns; e != PTF_TIME_MIN;)
	{
		CHECK_FOR_INTERRUPTS();
		fire_aligned(wa, timer->rec, hot, e, watermark == PTF_TIME_MAX);
		e = after_fire(wa, timer->rec, hot, e, watermark);
	}
}

/* -- durable state -- */

static void
window_agg_save(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
				Datum *values, bool *nulls)
{
	WinAggOp  *wa = (WinAggOp *) arg;

	if (space == STATE_KEY_SPACE)
	{
		KeyHot	   *hot = (KeyHot *) ref->value;
		KeyCold    *cold = (KeyCold *) ref->cold;

		if (hot->next_fire != PTF_TIME_MIN)
		{
			values[FIELD_FIRES_AT] = Int64GetDatum(hot->next_fire - MS);
			nulls[FIELD_FIRES_AT] = false;
		}
		if (cold->prev_values != NULL)
		{
			values[FIELD_PREV_END] = Int64GetDatum(cold->prev_end);
			nulls[FIELD_PREV_END] = false;
			values[FIELD_PREV_VALUES] = PointerGetDatum(cold->prev_values);
			nulls[FIELD_PREV_VALUES] = false;
		}
		return;
	}
	Assert(space == SPACE_SLICES || space == SPACE_SESSIONS);
	{
		int64		nrows;
		AggAcc	   *accs;
		AggRows    *rows;

		if (space == SPACE_SLICES)
		{
			SliceValue *sv = (SliceValue *) ns_value;

			nrows = sv->nrows;
			accs = sv->accs;
			rows = &sv->rows;
		}
		else
		{
			SessionValue *sv = (SessionValue *) ns_value;

			nrows = sv->nrows;
			accs = sv->accs;
			rows = &sv->rows;
			values[FIELD_SESSION_END] = Int64GetDatum(sv->end);
			nulls[FIELD_SESSION_END] = false;
			values[FIELD_FIRES_AT] = Int64GetDatum(sv->end - MS);
			nulls[FIELD_FIRES_AT] = false;
		}
		values[FIELD_NROWS] = Int64GetDatum(nrows);
		nulls[FIELD_NROWS] = false;
		if (aggs_nsliced(wa->aggs) > 0)
		{
			values[FIELD_STATES] = PointerGetDatum(aggs_serialize_sliced(wa->aggs, accs));
			nulls[FIELD_STATES] = false;
		}
		if (aggs_keeps_rows(wa->aggs))
		{
			values[FIELD_INPUTS] = PointerGetDatum(aggs_serialize_rows(wa->aggs, rows));
			nulls[FIELD_INPUTS] = false;
		}
	}
}

static void
window_agg_restore(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
				   Datum *values, bool *nulls)
{
	WinAggOp  *wa = (WinAggOp *) arg;
	KeyedState *ks = wa->base.state;

	if (space == STATE_KEY_SPACE)
	{
		KeyHot	   *hot = (KeyHot *) ref->value;
		KeyCold    *cold = (KeyCold *) ref->cold;

		hot->next_fire = PTF_TIME_MIN;
		if (!nulls[FIELD_PREV_VALUES])
		{
			bytea	   *b = DatumGetByteaPP(values[FIELD_PREV_VALUES]);

			cold->prev_end = DatumGetInt64(values[FIELD_PREV_END]);
			cold->prev_values = MemoryContextAlloc(keyed_state_context(ks), VARSIZE_ANY(b));
			memcpy(cold->prev_values, b, VARSIZE_ANY(b));
		}
		/*
		 * Slices may come before or after their key: timers are armed later,
		 * when the call starts (or, in a call, once the key is all loaded:
		 * window_agg_loaded).
		 */
		if (!wa->live)
			wa->armed = false;
		return;
	}
	if (space == SPACE_SLICES)
	{
		SliceValue *sv = (SliceValue *) ns_value;

		sv->mem = shared_acquire(wa, SPACE_SLICES, ns);
		sv->nrows = DatumGetInt64(values[FIELD_NROWS]);
		if (!nulls[FIELD_STATES])
			aggs_deserialize_sliced(wa->aggs, DatumGetByteaPP(values[FIELD_STATES]),
									sv->accs, sv->mem);
		else
			aggs_init_sliced(wa->aggs, sv->accs, sv->mem);
		if (!nulls[FIELD_INPUTS])
			aggs_deserialize_rows(wa->aggs, DatumGetByteaPP(values[FIELD_INPUTS]),
								  &sv->rows, sv->mem);
	}
	else if (space == SPACE_SESSIONS)
	{
		SessionValue *sv = (SessionValue *) ns_value;

		sv->end = DatumGetInt64(values[FIELD_SESSION_END]);
		sv->nrows = DatumGetInt64(values[FIELD_NROWS]);
		sv->mem = wa->needs_memory ? aggs_memory_create(keyed_state_context(ks)) : NULL;
		if (!nulls[FIELD_STATES])
			aggs_deserialize_sliced(wa->aggs, DatumGetByteaPP(values[FIELD_STATES]),
									sv->accs, sv->mem);
		else
			aggs_init_sliced(wa->aggs, sv->accs, sv->mem);
		if (!nulls[FIELD_INPUTS])
			aggs_deserialize_rows(wa->aggs, DatumGetByteaPP(values[FIELD_INPUTS]),
								  &sv->rows, sv->mem);
		timer_register(wa->base.timers, PTF_EVENT_TIME, sv->end - MS, ref->rec, ns,
					   TIMER_SESSION);
		sv->timer_end = sv->end;
	}
}

typedef struct ArmContext
{
	WinAggOp  *wa;
	PtfTime		watermark;
} ArmContext;

/* a loaded key's next window armed (MOVING states are made as needed) */
static void
arm_key(StateRef *ref, void *arg)
{
	ArmContext *c = (ArmContext *) arg;
	KeyedState *ks = c->wa->base.state;
	KeyHot	   *hot = (KeyHot *) ref->value;
	int64		s = 0;

	if (keyed_state_ns_count(ks, ref->rec, SPACE_SLICES) == 0)
		return;
	(void) keyed_state_ns_at(ks, ref->rec, SPACE_SLICES, 0, &s);
	hot->next_fire = PTF_TIME_MIN;
	schedule(c->wa, ref->rec, hot, first_unfired(c->wa, s, c->watermark));
}

/*
 * A key read in the middle of a call (state read a key at a time) is armed
 * at once, under the call's watermark.  It is read before a timer of it
 * can come due (it is found by fires_at as soon as the rows to be
 * processed can raise the watermark to its timer), so no window of it
 * fired between the stored watermark and this one: its next window is the
 * one it was stored with.  Sessions registered theirs in restore.
 */
static void
window_agg_loaded(void *arg, const StateRef *ref)
{
	WinAggOp  *wa = (WinAggOp *) arg;
	ArmContext	c;

	if (!wa->live || wa->spec.kind == WINDOW_SESSION)
		return;					/* before the call: on_start arms it */
	c.wa = wa;
	c.watermark = wa->watermark;
	arm_key((StateRef *) ref, &c);
}

/*
 * Loaded state has no timers yet: they are armed when a call starts,
 * under the watermark the state was stored with.
 */
static void
ensure_armed(WinAggOp *wa, PtfTime watermark)
{
	ArmContext	c;

	if (wa->armed)
		return;
	wa->armed = true;
	if (wa->spec.kind == WINDOW_SESSION)
		return;					/* sessions armed theirs when loaded */
	c.wa = wa;
	c.watermark = watermark;
	keyed_state_foreach(wa->base.state, arm_key, &c);
}

/*
 * A batch of rows asks for their keys' records, then for the slices they
 * go to, before the first of them is processed (keyed_state_prefetch_stage):
 * rows of many keys in no particular order otherwise wait for half a dozen
 * cache misses each, one after the other.  The first stage finds the row's
 * slice, once, also for on_row.
 */
static void
window_agg_prefetch(PtfOperator *op, TupleTableSlot *row, const PtfRowContext *ctx,
					int stage, uint64 *scratch)
{
	PtfTime		s = row_slice((WinAggOp *) op, ctx->event_time);

	Assert(stage == 0);
	scratch[PREFETCH_SLICE] = (uint64) s;
	keyed_state_prefetch_stage(op->state, ctx->keys, row, stage,
							   s == PTF_TIME_MIN ? -1 : SPACE_SLICES, s, scratch);
}

/*
 * The later stages: the key's record, its slices, the row's slice; then
 * the states the slice holds by reference (numeric's sum), which the row's
 * transition would otherwise wait for after the slice.
 */
static void
slice_states_ask(void *arg, void *value)
{
	aggs_prefetch_sliced(((WinAggOp *) arg)->aggs, ((SliceValue *) value)->accs);
}

static void
window_agg_prefetch_batch(PtfOperator *op, int stage, uint64 *const *scratch, int n)
{
	WinAggOp   *wa = (WinAggOp *) op;

	StaticAssertStmt(KEYED_PREFETCH_NO_NS == PTF_TIME_MIN, "no slice is no namespace");
	if (stage < KEYED_PREFETCH_STAGES)
		keyed_state_prefetch_batch(op->state, stage, SPACE_SLICES, PREFETCH_SLICE, scratch, n);
	else if (aggs_sliced_byref(wa->aggs))
		keyed_state_prefetch_batch_values(op->state, SPACE_SLICES, PREFETCH_SLICE, scratch, n,
										  slice_states_ask, wa);
}

static const PtfOperatorMethods window_agg_methods = {
	.name = "window aggregate",
	.on_row = window_agg_on_row,
	.prefetch = window_agg_prefetch,
	.prefetch_batch = window_agg_prefetch_batch,
	.prefetch_stages = KEYED_PREFETCH_STAGES + 1,
	.on_start = window_agg_on_start,
	.on_watermark = window_agg_on_watermark,
	.on_finish = window_agg_on_finish,
	.evict = window_evict,
	.on_timer = window_agg_on_timer,
};

PtfOperator *
window_agg_create(const WindowAggOptions *opts, const PtfOperatorEnv *env)
{
	WinAggOp  *wa = (WinAggOp *) ptf_operator_alloc(sizeof(WinAggOp), &window_agg_methods, env);
	MemoryContext old = MemoryContextSwitchTo(wa->base.cxt);
	AggSetSpec	as;
	KeyedStateSpec ks;
	AttrNumber *key_attnos = palloc(sizeof(AttrNumber) * Max(opts->keys->ncols, 1));
	int			natts = opts->outdesc->natts;
	int			i;

	wa->spec = opts->spec;
	wa->time_type = opts->time_type;
	wa->changelog = opts->changelog;
	wa->emit_only_on_update = opts->emit_only_on_update;
	wa->cumulate_merge = (opts->spec.kind == WINDOW_CUMULATE && !opts->changelog);
	wa->keys = opts->keys;

	for (i = 0; i < opts->keys->ncols; i++)
		key_attnos[i] = opts->keys->cols[i].attno;
	memset(&as, 0, sizeof(as));
	as.targetlist = opts->targetlist;
	as.rowdesc = opts->rowdesc;
	as.nkeys = opts->keys->ncols;
	as.key_attnos = key_attnos;
	/* a parallel call combines and serializes every slice */
	as.combine = (opts->spec.kind != WINDOW_TUMBLE) || opts->parallel;
	as.one_slice = (opts->spec.kind == WINDOW_TUMBLE);
	as.changelog = opts->changelog;
	as.durable = env->durable || opts->parallel;
	/* sessions over retractions keep their rows, with times, to regroup */
	as.keep_rows = (opts->spec.kind == WINDOW_SESSION && opts->changelog);
	as.time_attno = opts->time_attno;
	wa->aggs = aggs_create(&as, wa->base.cxt);
	wa->base.row_attnos_upto = aggs_inputs_upto(wa->aggs);
	/* durable states are restored, and parallel partials merged, into memory */
	wa->needs_memory = as.durable || aggs_need_memory(wa->aggs);

	memset(&ks, 0, sizeof(ks));
	ks.keys = opts->keys;
	ks.hot = sizeof(KeyHot);
	ks.cold = sizeof(KeyCold);
	ks.nspaces = WINDOW_AGG_NSPACES;
	ks.ns_value_size[SPACE_SLICES] = offsetof(SliceValue, accs) +
		sizeof(AggAcc) * aggs_nsliced(wa->aggs);
	ks.ns_value_size[SPACE_WINDOWS] = offsetof(WindowValue, accs) +
		sizeof(AggAcc) * aggs_nmoving(wa->aggs);
	ks.ns_value_size[SPACE_SESSIONS] = offsetof(SessionValue, accs) +
		sizeof(AggAcc) * aggs_nsliced(wa->aggs);
	/*
	 * Slice ends lie on the grid of the slice: found by arithmetic in a
	 * key's dense set, not searched (rows out of time order insert between).
	 */
	if (opts->spec.kind != WINDOW_SESSION)
		ks.ns_grid[SPACE_SLICES] = opts->spec.slice;
	ks.mem_limit = env->mem_limit;
	ks.expected_keys = env->expected_keys;
	/* timers point at records; keys go when their windows have fired */
	ks.flags = KEYED_STATE_STABLE | KEYED_STATE_REMOVABLE |
		(env->durable ? KEYED_STATE_DURABLE : 0);
	wa->base.state = keyed_state_create(&ks, wa->base.cxt);
	wa->base.codec.layout = &window_agg_layout;
	wa->base.codec.arg = wa;
	wa->base.codec.save = window_agg_save;
	wa->base.codec.restore = window_agg_restore;
	wa->base.codec.loaded = window_agg_loaded;

	/* a pipeline worker keeps the operator beyond the call's memory */
	wa->outdesc = CreateTupleDescCopy(opts->outdesc);
	wa->out = MakeSingleTupleTableSlot(wa->outdesc, &TTSOpsVirtual);
	wa->out_window = palloc(sizeof(WindowColumn) * Max(natts, 1));
	wa->out_agg = palloc(sizeof(int) * Max(natts, 1));
	wa->out_key = palloc(sizeof(int) * Max(natts, 1));
	wa->out_types = palloc(sizeof(Oid) * Max(natts, 1));
	memcpy(wa->out_window, opts->out_window, sizeof(WindowColumn) * natts);
	memcpy(wa->out_agg, opts->out_agg, sizeof(int) * natts);
	memcpy(wa->out_key, opts->out_key, sizeof(int) * natts);
	wa->out_typmods = palloc(sizeof(int32) * Max(natts, 1));
	wa->out_coerce = palloc0(sizeof(FmgrInfo) * Max(natts, 1));
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(opts->outdesc, i);
		Oid			fn;

		wa->out_types[i] = att->atttypid;
		wa->out_typmods[i] = att->atttypmod;
		/* numeric(6,1), varchar(10), timestamp(3): values made to fit, or an error */
		if (att->atttypmod >= 0 &&
			find_typmod_coercion_function(att->atttypid, &fn) == COERCION_PATH_FUNC)
			fmgr_info_cxt(fn, &wa->out_coerce[i], wa->base.cxt);
	}
	wa->values = palloc(sizeof(Datum) * Max(aggs_noutputs(wa->aggs), 1));
	wa->nulls = palloc(sizeof(bool) * Max(aggs_noutputs(wa->aggs), 1));
	wa->keyvals = palloc(sizeof(Datum) * Max(opts->keys->ncols, 1));
	wa->keynulls = palloc(sizeof(bool) * Max(opts->keys->ncols, 1));
	wa->firemem = aggs_memory_create(wa->base.cxt);
	wa->values_desc = CreateTemplateTupleDesc(Max(aggs_noutputs(wa->aggs), 1));
	for (i = 0; i < aggs_noutputs(wa->aggs); i++)
		TupleDescInitEntry(wa->values_desc, i + 1, NULL, aggs_output_type(wa->aggs, i), -1, 0);
	wa->armed = true;
	wa->partial = opts->partial;
	/*
	 * Only windows that overlap slide: a window no longer than its slide
	 * shares no slice with the next, and rows between such windows make
	 * slices no window holds, which the slide would take away unadded.
	 */
	if (opts->spec.kind == WINDOW_HOP && opts->spec.size > opts->spec.step &&
		!opts->changelog && !opts->partial && aggs_can_slide(wa->aggs))
		wa->slide = aggs_slide_create(wa->aggs, wa->base.cxt);
	wa->partial_input = opts->parallel ? opts->partial_input : -1;
	if (opts->parallel)
	{
		Assert(aggs_all_sliced(wa->aggs));
		wa->partial_slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(opts->partial_desc),
													&TTSOpsVirtual);
		wa->scratch_accs = palloc0(sizeof(AggAcc) * Max(aggs_nsliced(wa->aggs), 1));
		wa->scratch_mem = aggs_memory_create(wa->base.cxt);
	}
	MemoryContextSwitchTo(old);
	return &wa->base;
}

uint64
window_agg_skipped(PtfOperator *op)
{
	return ((WinAggOp *) op)->skipped;
}

