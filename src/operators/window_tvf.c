/*-------------------------------------------------------------------------
 *
 * window_tvf.c
 *	  Flink's window table-valued functions TUMBLE, HOP and CUMULATE as an
 *	  operator: each row with each of its windows, nothing kept.
 *
 * A row gets its window columns (window_start, window_end, window_time =
 * end - 1 ms) from window_math.c; a HOP or CUMULATE row is emitted once
 * per window holding it.  A row of infinite time, or whose window lies
 * past the ends of the time range, is skipped and counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"

#include "base/ptf_time.h"
#include "operators/window_internal.h"

/* ---- the TVFs ---- */

typedef struct WindowTvf
{
	PtfOperator base;
	WindowSpec	spec;
	Oid			time_type;
	TupleDesc	rowdesc;		/* of data */
	TupleTableSlot *out;
	Oid			col_types[3];
	uint64		skipped;
	bool		gap_warned;		/* a bound in a daylight-saving gap was warned of */
	PtfTimeCache bounds[3];		/* of window_start, window_end, window_time */
} WindowTvf;

static void
tvf_emit(WindowTvf *t, Datum data, PtfTime start, PtfTime end)
{
	TupleTableSlot *out = t->out;

	ExecClearTuple(out);
	out->tts_values[0] = data;
	out->tts_isnull[0] = false;
	out->tts_values[1] = ptf_time_to_datum_cached(&t->bounds[0], t->spec.slice, start,
												  t->time_type, t->col_types[0], &t->gap_warned);
	out->tts_values[2] = ptf_time_to_datum_cached(&t->bounds[1], t->spec.slice, end,
												  t->time_type, t->col_types[1], &t->gap_warned);
	out->tts_values[3] = ptf_time_to_datum_cached(&t->bounds[2], t->spec.slice, end - MS,
												  t->time_type, t->col_types[2], &t->gap_warned);
	out->tts_isnull[1] = out->tts_isnull[2] = out->tts_isnull[3] = false;
	ExecStoreVirtualTuple(out);
	ptf_operator_emit(&t->base, ROWKIND_INSERT, out);
}

bool
window_tumble_start(const WindowSpec *w, PtfTime ts, PtfTime *start)
{
	PtfTime		e;

	Assert(w->kind == WINDOW_TUMBLE);
	return ts != PTF_TIME_MIN && ts != PTF_TIME_MAX &&
		window_slice_end(w, ts, &e) && window_aligned_start(ts, w->size, w->offset, start) &&
		!pg_add_s64_overflow(*start, w->size, &e);
}

/*
 * The windows holding ts, as tvf_on_row gives them, by their ends in
 * ascending order: how many (only the first max written), 0 where the
 * TVF skips the row.  For operators that keep rows per window
 * (window_rank.c) and the inlined HOP and CUMULATE scans.
 */
int
window_assign(const WindowSpec *w, PtfTime ts, PtfTime *ends, int max)
{
	PtfTime		s = 0;
	PtfTime		e = 0;
	PtfTime		last;
	int			n = 0;

	if (ts == PTF_TIME_MIN || ts == PTF_TIME_MAX)
		return 0;
	if (w->kind == WINDOW_TUMBLE)
	{
		if (!window_tumble_start(w, ts, &s))
			return 0;
		if (max > 0)
			ends[0] = s + w->size;
		return 1;
	}
	if (!window_slice_end(w, ts, &e))
		return 0;
	last = window_last_end(w, e);
	for (e = window_first_end(w, e); e <= last; e = window_next_end(w, e), n++)
		if (n < max)
			ends[n] = e;
	return n;
}

int64
window_time_before_end(void)
{
	return MS;
}

static PtfRowResult
tvf_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row, const PtfRowContext *ctx)
{
	WindowTvf  *t = (WindowTvf *) op;
	const WindowSpec *w = &t->spec;
	PtfTime		ts = ctx->event_time;
	PtfTime		s = 0;
	PtfTime		e = 0;
	PtfTime		last;
	Datum		data;

	/* a TVF row is an insert: updates and deletes of a stream pass over */
	if (kind != ROWKIND_INSERT || ts == PTF_TIME_MIN || ts == PTF_TIME_MAX)
	{
		t->skipped++;
		return PTF_ROW_DONE;
	}
	if (w->kind == WINDOW_TUMBLE ? !window_tumble_start(w, ts, &s) : !window_slice_end(w, ts, &e))
	{
		t->skipped++;
		return PTF_ROW_DONE;
	}
	/* data is of the input's row type, whatever slot the row came in */
	slot_getsomeattrs(row, t->rowdesc->natts);
	data = HeapTupleGetDatum(heap_form_tuple(t->rowdesc, row->tts_values, row->tts_isnull));
	if (w->kind == WINDOW_TUMBLE)
	{
		tvf_emit(t, data, s, s + w->size);
		return PTF_ROW_DONE;
	}
	Assert(w->kind == WINDOW_HOP || w->kind == WINDOW_CUMULATE);
	/* a CUMULATE's windows start with its period, a HOP's a size before their ends */
	if (w->kind == WINDOW_CUMULATE)
		(void) window_aligned_start(ts, w->size, w->offset, &s);
	last = window_last_end(w, e);
	for (e = window_first_end(w, e); e <= last; e = window_next_end(w, e))
	{
		/* up to WINDOW_MAX_PER_ROW rows for this one: a cancel is heard */
		CHECK_FOR_INTERRUPTS();
		tvf_emit(t, data, w->kind == WINDOW_HOP ? e - w->size : s, e);
	}
	return PTF_ROW_DONE;
}

static const PtfOperatorMethods tvf_methods = {
	.name = "window table function",
	.on_row = tvf_on_row,
};

PtfOperator *
window_tvf_create(const WindowTvfOptions *opts, const PtfOperatorEnv *env)
{
	WindowTvf  *t = (WindowTvf *) ptf_operator_alloc(sizeof(WindowTvf), &tvf_methods, env);
	MemoryContext old = MemoryContextSwitchTo(t->base.cxt);
	int			i;

	t->spec = opts->spec;
	t->time_type = opts->time_type;
	t->rowdesc = CreateTupleDescCopy(opts->rowdesc);
	/* a pipeline worker keeps the operator beyond the call's memory */
	t->out = MakeSingleTupleTableSlot(CreateTupleDescCopy(opts->outdesc), &TTSOpsVirtual);
	for (i = 0; i < 3; i++)
		t->col_types[i] = TupleDescAttr(opts->outdesc, i + 1)->atttypid;
	MemoryContextSwitchTo(old);
	return &t->base;
}

uint64
window_tvf_skipped(PtfOperator *op)
{
	return ((WindowTvf *) op)->skipped;
}

