/*-------------------------------------------------------------------------
 *
 * window_session.c
 *	  SESSION windows of the window aggregate: sessions opened, merged,
 *	  retracted and fired per key.
 *
 * A row opens [t, t + gap); sessions that overlap or touch merge, their
 * states combined; a session fires at end - 1 ms.  A session row is late
 * when the session it merges into has ended.  Each session (space
 * SESSIONS, keyed by its start) has its end, row count, states and inputs,
 * in a memory context of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "datatype/timestamp.h"
#include "funcapi.h"

#include "base/ptf_time.h"
#include "operators/window_internal.h"

/* ---- sessions ---- */

static SessionValue *
session_new(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime end)
{
	bool		created;
	SessionValue *sv = keyed_state_ns_get(wa->base.state, rec, SPACE_SESSIONS, start, &created);

	Assert(created);
	sv->end = end;
	sv->mem = wa->needs_memory ? aggs_memory_create(keyed_state_context(wa->base.state)) : NULL;
	aggs_init_sliced(wa->aggs, sv->accs, sv->mem);
	return sv;
}

static void
session_remove(WinAggOp *wa, StateRecord *rec, PtfTime start)
{
	SessionValue *sv = keyed_state_ns_find(wa->base.state, rec, SPACE_SESSIONS, start);

	if (sv->mem)
		aggs_memory_delete(sv->mem);
	keyed_state_ns_remove(wa->base.state, rec, SPACE_SESSIONS, start);
}

/*
 * Merge the sessions of the key overlapping or touching [lo, hi) with it:
 * the result, a new session, holds their states combined.
 */
static SessionValue *
session_merge(WinAggOp *wa, StateRecord *rec, PtfTime lo, PtfTime hi, PtfTime *start)
{
	KeyedState *ks = wa->base.state;
	int			n = keyed_state_ns_count(ks, rec, SPACE_SESSIONS);
	int			first = -1;
	int			last = -1;
	int			i;
	PtfTime		s_lo = lo;
	PtfTime		s_hi = hi;
	SessionValue *merged;

	for (i = 0; i < n; i++)
	{
		int64		st;
		SessionValue *sv = keyed_state_ns_at(ks, rec, SPACE_SESSIONS, i, &st);

		if (st > hi)
			break;
		if (sv->end < lo)
			continue;
		if (first < 0)
			first = i;
		last = i;
		s_lo = Min(s_lo, st);
		s_hi = Max(s_hi, sv->end);
	}
	*start = s_lo;
	if (first >= 0 && first == last)
	{
		int64		st;
		SessionValue *sv = keyed_state_ns_at(ks, rec, SPACE_SESSIONS, first, &st);

		if (st == s_lo)
		{
			sv->end = s_hi;
			return sv;			/* grown in place */
		}
	}
	if (first < 0)
		return session_new(wa, rec, s_lo, s_hi);

	/* a new session of the merged ones: their states combined into it */
	{
		int64	   *starts = palloc(sizeof(int64) * (last - first + 1));
		int			k;

		for (k = 0, i = first; i <= last; i++, k++)
			(void) keyed_state_ns_at(ks, rec, SPACE_SESSIONS, i, &starts[k]);
		if (keyed_state_ns_find(ks, rec, SPACE_SESSIONS, s_lo) != NULL)
		{
			/* the earliest keeps its start: it absorbs the others */
			SessionValue *target = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, s_lo);

			merged = target;
			for (k = 1; k < last - first + 1; k++)
			{
				SessionValue *other = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, starts[k]);

				aggs_merge_into(wa->aggs, merged->accs, &merged->rows, merged->mem,
								other->accs, &other->rows);
				merged->nrows += other->nrows;
				session_remove(wa, rec, starts[k]);
				merged = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, s_lo);
			}
			merged->end = s_hi;
		}
		else
		{
			merged = session_new(wa, rec, s_lo, s_hi);
			for (k = 0; k < last - first + 1; k++)
			{
				SessionValue *other = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, starts[k]);

				merged = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, s_lo);
				aggs_merge_into(wa->aggs, merged->accs, &merged->rows, merged->mem,
								other->accs, &other->rows);
				merged->nrows += other->nrows;
				session_remove(wa, rec, starts[k]);
			}
			merged = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, s_lo);
		}
		pfree(starts);
	}
	return merged;
}

/*
 * A session's kept rows (updating input keeps every aggregate's inputs,
 * with the event time), regrouped after one of them was taken back: the
 * row may have held two groups together, or been the first or last.  The
 * session goes and a session per group comes, each with its own timer.
 */
typedef struct KeptRow
{
	PtfTime		ts;
	MinimalTuple row;
} KeptRow;

static int
kept_row_cmp(const void *a, const void *b)
{
	PtfTime		x = ((const KeptRow *) a)->ts;
	PtfTime		y = ((const KeptRow *) b)->ts;

	return x < y ? -1 : x > y ? 1 : 0;
}

static void
session_regroup(WinAggOp *wa, StateRecord *rec, PtfTime start)
{
	KeyedState *ks = wa->base.state;
	SessionValue *sv = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, start);
	MemoryContext old = MemoryContextSwitchTo(wa->firemem->cxt);
	KeptRow    *kept;
	int			n = sv->rows.n;
	int			i;
	int			first;

	MemoryContextReset(wa->firemem->cxt);
	kept = palloc(sizeof(KeptRow) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		kept[i].row = heap_copy_minimal_tuple(sv->rows.rows[i]);
		kept[i].ts = ptf_time_from_datum(aggs_kept_row_time(wa->aggs, kept[i].row), wa->time_type);
	}
	MemoryContextSwitchTo(old);
	session_remove(wa, rec, start);
	if (n == 0)
		return;
	qsort(kept, n, sizeof(KeptRow), kept_row_cmp);
	for (first = 0; first < n; first = i)
	{
		PtfTime		end;
		SessionValue *nv;

		/* a group ends where the next row is more than the gap away */
		for (i = first + 1; i < n && kept[i].ts - kept[i - 1].ts <= wa->spec.size; i++)
			;
		end = kept[i - 1].ts + wa->spec.size;
		{
			PtfTime		group_start = kept[first].ts;
			int			k;

			nv = session_new(wa, rec, group_start, end);
			for (k = first; k < i; k++)
			{
				aggs_rows_add(wa->aggs, &nv->rows, nv->mem, kept[k].row);
				nv->nrows++;
			}
			keyed_state_ns_mark_changed(ks, rec, SPACE_SESSIONS, group_start);
			timer_register(wa->base.timers, PTF_EVENT_TIME, end - MS, rec, group_start,
						   TIMER_SESSION);
			nv->timer_end = end;
		}
	}
}


/*
 * A session a regroup left ending at or before the watermark would have
 * fired already, had the row taken out never come: it fires now, rather
 * than at the watermark's next move.
 */
static void
fire_due_sessions(WinAggOp *wa, StateRecord *rec, PtfTime watermark)
{
	KeyedState *ks = wa->base.state;

	while (!(rec->flags & RECORD_REMOVED))
	{
		int			n = keyed_state_ns_count(ks, rec, SPACE_SESSIONS);
		PtfTimer	t;
		int			i;

		memset(&t, 0, sizeof(t));
		for (i = 0; i < n; i++)
		{
			int64		st;
			SessionValue *sv = keyed_state_ns_at(ks, rec, SPACE_SESSIONS, i, &st);

			if (window_fired(sv->end, watermark))
			{
				t.time = sv->end - MS;
				t.rec = rec;
				t.ns = st;
				t.tag = TIMER_SESSION;
				break;
			}
		}
		if (i == n)
			return;
		winagg_fire_session(wa, rec, &t);
	}
}

/*
 * A retraction: its row goes from the session holding its time, which is
 * then regrouped.  A row whose session has fired is late; one never added
 * is passed over.
 */
static PtfRowResult
session_retract(WinAggOp *wa, TupleTableSlot *row, const PtfRowContext *ctx)
{
	KeyedState *ks = wa->base.state;
	PtfTime		ts = ctx->event_time;
	StateRef	ref;
	SessionValue *sv = NULL;
	int64		start = 0;
	int			n;
	int			i;

	switch (keyed_state_lookup(ks, ctx->keys, row, ctx->proc_time, false, &ref))
	{
		case KS_FULL:
			return PTF_ROW_SPILL;	/* the key may be in a spilled partition */
		case KS_FOUND:
			break;
		default:
			wa->skipped++;		/* a key with nothing */
			return PTF_ROW_DONE;
	}
	n = keyed_state_ns_count(ks, ref.rec, SPACE_SESSIONS);
	for (i = 0; i < n; i++)
	{
		SessionValue *o = keyed_state_ns_at(ks, ref.rec, SPACE_SESSIONS, i, &start);

		if (start > ts)
			break;
		if (ts < o->end)
		{
			sv = o;
			break;
		}
	}
	if (sv == NULL)
	{
		/* no open session holds it: fired (late), or never added */
		if (ts + wa->spec.size - MS <= ctx->watermark)
			return PTF_ROW_LATE;
		wa->skipped++;
		return PTF_ROW_DONE;
	}
	aggs_eval(wa->aggs, row);
	if (!aggs_rows_apply(wa->aggs, &sv->rows, sv->mem, -1))
	{
		wa->skipped++;			/* no such row in it */
		return PTF_ROW_DONE;
	}
	sv->nrows--;
	session_regroup(wa, ref.rec, start);
	fire_due_sessions(wa, ref.rec, ctx->watermark);
	if (ref.rec->flags & RECORD_REMOVED)
		return PTF_ROW_DONE;	/* its last session fired: the key went */
	if (keyed_state_ns_count(ks, ref.rec, SPACE_SESSIONS) == 0)
		winagg_key_remove(wa, ref.rec);
	else
		keyed_state_mark_changed(ks, ref.rec);
	return PTF_ROW_DONE;
}

PtfRowResult
winagg_session_on_row(WinAggOp *wa, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	KeyedState *ks = wa->base.state;
	PtfTime		ts = ctx->event_time;
	PtfTime		hi;
	PtfTime		start;
	StateRef	ref;
	SessionValue *sv;
	int			n;
	int			i;

	Assert(wa->changelog || ROWKIND_IS_ADDITION(kind));
	/* as for aligned windows: none past the end of PostgreSQL's timestamps */
	if (ts == PTF_TIME_MIN || ts == PTF_TIME_MAX ||
		pg_add_s64_overflow(ts, wa->spec.size, &hi) || !IS_VALID_TIMESTAMP(hi))
	{
		wa->skipped++;
		return PTF_ROW_DONE;
	}
	if (!ROWKIND_IS_ADDITION(kind))
		return session_retract(wa, row, ctx);
	switch (keyed_state_lookup(ks, ctx->keys, row, ctx->proc_time, true, &ref))
	{
		case KS_FULL:
			return PTF_ROW_SPILL;
		case KS_CREATED:
			keyed_state_mark_changed(ks, ref.rec);
			break;
		default:
			break;
	}

	/* late: the session it would be part of has ended (Flink's isWindowLate) */
	{
		PtfTime		would_end = hi;

		n = keyed_state_ns_count(ks, ref.rec, SPACE_SESSIONS);
		for (i = 0; i < n; i++)
		{
			int64		st;
			SessionValue *o = keyed_state_ns_at(ks, ref.rec, SPACE_SESSIONS, i, &st);

			if (st <= hi && o->end >= ts)
				would_end = Max(would_end, o->end);
		}
		if (window_fired(would_end, ctx->watermark))
		{
			if (n == 0)
				winagg_key_remove(wa, ref.rec);
			return PTF_ROW_LATE;
		}
	}

	sv = session_merge(wa, ref.rec, ts, hi, &start);
	aggs_eval(wa->aggs, row);
	if (aggs_keeps_rows(wa->aggs))
		(void) aggs_rows_apply(wa->aggs, &sv->rows, sv->mem, 1);
	aggs_advance_sliced(wa->aggs, sv->accs, sv->mem);
	sv->nrows++;
	keyed_state_ns_mark_changed(ks, ref.rec, SPACE_SESSIONS, start);
	/* a timer for its end, unless the session has one for it already */
	if (sv->timer_end != sv->end)
	{
		timer_register(wa->base.timers, PTF_EVENT_TIME, sv->end - MS, ref.rec, start, TIMER_SESSION);
		sv->timer_end = sv->end;
	}
	return PTF_ROW_DONE;
}

void
winagg_fire_session(WinAggOp *wa, StateRecord *rec, const PtfTimer *t)
{
	KeyedState *ks = wa->base.state;
	SessionValue *sv = keyed_state_ns_find(ks, rec, SPACE_SESSIONS, t->ns);

	/* merged since, or grown: its timer is another */
	if (sv == NULL || sv->end - MS != t->time)
		return;
	MemoryContextReset(wa->firemem->cxt);
	aggs_window_begin(wa->aggs, wa->firemem);
	aggs_window_add_slice(wa->aggs, sv->accs, &sv->rows);
	if (sv->nrows > 0)
	{
		winagg_key_values(wa, rec);
		winagg_emit_window(wa, rec, t->ns, sv->end);
	}
	session_remove(wa, rec, t->ns);
	if (keyed_state_ns_count(ks, rec, SPACE_SESSIONS) == 0)
		winagg_key_remove(wa, rec);
	else
		keyed_state_mark_changed(ks, rec);
}

