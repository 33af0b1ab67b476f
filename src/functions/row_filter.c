/*-------------------------------------------------------------------------
 *
 * row_filter.c
 *	  A planned query's WHERE on its input's rows (row_filter.h).
 *
 * The planner (planner/) takes a WHERE clause whose quals read only the
 * TVF's data column and hands them here as expressions over the input
 * row: evaluated once per input row, with the executor's expression
 * machinery, before the row reaches the operator -- as PostgreSQL would
 * evaluate them once per row and window, with the same answer, since they
 * do not read the window.  Rows go through an input adapter, so relation,
 * query and change-stream inputs are filtered alike.
 *
 * A row left out still moves the watermark: Flink's watermark is the
 * source's (WATERMARK FOR ts AS ...), and a filter comes after it, so a
 * WHERE only removes rows from windows -- it never keeps a window open
 * for a late row that another row's time had closed.  Such a row goes to
 * the frame marked time_only, in its place among the others, when the
 * input has a watermark and the row's time is past every time passed
 * before it (else it cannot move the watermark).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "utils/memutils.h"

#include "base/ptf_time.h"
#include "functions/row_filter.h"

typedef struct PtfRowFilter
{
	PtfCallInput *in;			/* rows pass into in->handle */
	ExprState  *qual;			/* NULL: every row */
	ExprContext *econtext;
	PtfTime    *range;			/* [least, greatest] event time passed, or NULL */
	PtfTime		latest;			/* the greatest event time passed on, of any row */
} PtfRowFilter;

/* The row's event time; false when it has none (NULL, no time column). */
static bool
row_event_time(PtfRowFilter *f, TupleTableSlot *row, PtfTime *ts)
{
	AttrNumber	time_attno = f->in->frame.on_time_attno;
	bool		isnull;
	Datum		t;

	if (time_attno == InvalidAttrNumber)
		return false;
	t = slot_getattr(row, time_attno, &isnull);
	if (isnull)
		return false;
	*ts = ptf_time_from_datum(t, f->in->frame.on_time_type);
	return true;
}

static void
filter_row(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	PtfRowFilter *f = (PtfRowFilter *) arg;
	PtfTime		ts = PTF_TIME_MIN;

	/* the time only where it is used: a watermark to move, a range to track */
	bool		timed = (f->in->frame.has_delay || f->range != NULL) &&
		row_event_time(f, row, &ts);

	/*
	 * Before anything checks the row's time: a row the WHERE leaves out is
	 * not the query's, NULL time or not (as where PostgreSQL plans the
	 * TVF's inlined form, the WHERE below the time's check).  Its time, if
	 * past every earlier row's, moves the watermark all the same.
	 */
	if (f->qual != NULL)
	{
		ResetExprContext(f->econtext);
		f->econtext->ecxt_scantuple = row;
		if (!ExecQual(f->qual, f->econtext))
		{
			if (timed && f->in->frame.has_delay && ts > f->latest && ts != PTF_TIME_MAX)
			{
				PtfRowMeta	m = meta != NULL ? *meta : ptf_no_meta;

				m.time_only = true;
				f->latest = ts;
				frame_push(f->in->handle, kind, row, &m);
			}
			return;
		}
	}
	/* the frame says what is wrong with a NULL, the operator skips infinity */
	if (timed)
	{
		f->latest = Max(f->latest, ts);
		if (f->range != NULL && ts != PTF_TIME_MIN && ts != PTF_TIME_MAX)
		{
			f->range[0] = Min(f->range[0], ts);
			f->range[1] = Max(f->range[1], ts);
		}
	}
	frame_push(f->in->handle, kind, row, meta);
}

void
ptf_row_filter_attach(PtfCallInput *in, List *quals, PtfTime *range, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PtfRowFilter *f = palloc0(sizeof(PtfRowFilter));

	Assert(in->adapter == NULL);
	f->in = in;
	f->qual = quals != NIL ? ExecInitQual(quals, NULL) : NULL;
	f->econtext = CreateStandaloneExprContext();
	f->range = range;
	f->latest = PTF_TIME_MIN;
	if (range != NULL)
	{
		range[0] = PTF_TIME_MAX;
		range[1] = PTF_TIME_MIN;
	}
	in->adapter = filter_row;
	in->adapter_arg = f;
	MemoryContextSwitchTo(old);
}
