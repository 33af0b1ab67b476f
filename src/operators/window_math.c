/*-------------------------------------------------------------------------
 *
 * window_math.c
 *	  Window arithmetic: which windows and slices a time belongs to, when
 *	  a window fires.
 *
 * Windows.  Times are microseconds; windows are aligned to the Unix epoch
 * plus the offset and are [start, end); a window fires when the
 * watermark reaches end - 1 ms, as Flink's isWindowFired.  A TUMBLE of
 * size s has windows [k s + o, (k+1) s + o); a HOP of size s and slide d
 * has one starting at every k d + o; a CUMULATE of size s and step p has,
 * in every TUMBLE window [S, S + s), the windows [S, S + j p).
 *
 * Slices (Flink's SliceAssigner).  Rows go to the slice of their time: a
 * TUMBLE window, the gcd(size, slide) of a HOP (its windows' boundaries
 * are slice boundaries even when the size is not a multiple of the
 * slide), a CUMULATE step.  A window is the slices it spans: with per
 * slice states combined, a row is added once however many windows it
 * belongs to -- the point of Flink's window slicing.  Per slice s:
 *	  window_first_end(s)	the end of the first window containing it
 *	  window_last_end(s)	the end of the last one
 *
 * PostgreSQL's timestamps run from 4714-11-24 BC to before 294277-01-01:
 * a window must start and end within them to have bounds.  A row none of
 * whose windows does is passed over, as a row at infinity is
 * (window_slice_end says no); of a row's windows only those that do are
 * its windows (window_first_end and window_last_end stop at them),
 * whatever the operator.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "operators/window_internal.h"

/* ---- window arithmetic ---- */

static int64
gcd64(int64 a, int64 b)
{
	while (b != 0)
	{
		int64		t = a % b;

		a = b;
		b = t;
	}
	return a;
}

void
window_spec_init(WindowSpec *w, WindowKind kind, int64 size, int64 step, int64 offset)
{
	int64		period;

	w->kind = kind;
	w->size = size;
	if (size <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window %s must be positive", kind == WINDOW_SESSION ? "gap" : "size")));
	switch (kind)
	{
		case WINDOW_TUMBLE:
		case WINDOW_SESSION:
			step = size;
			break;
		case WINDOW_HOP:
		case WINDOW_CUMULATE:
			if (step <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("window %s must be positive",
								kind == WINDOW_HOP ? "slide" : "step")));
			if (kind == WINDOW_CUMULATE && size % step != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("a CUMULATE window's size must be a multiple of its step"),
						 errdetail("The size is %lld microseconds, the step %lld.",
								   (long long) size, (long long) step)));
			/* each row is in about size / step windows: bounded, or a row alone runs away */
			if (size / step > WINDOW_MAX_PER_ROW)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("a %s window puts each row in %lld windows, more than %d",
								kind == WINDOW_HOP ? "HOP" : "CUMULATE",
								(long long) (size / step), WINDOW_MAX_PER_ROW),
						 errdetail("Its size is %lld microseconds, its %s %lld.", (long long) size,
								   kind == WINDOW_HOP ? "slide" : "step", (long long) step),
						 errhint("Give a larger %s.", kind == WINDOW_HOP ? "slide" : "step")));
			break;
	}
	w->step = step;
	w->slice = kind == WINDOW_HOP ? gcd64(size, step) : step;
	/* only the offset modulo the period its windows repeat with matters */
	period = kind == WINDOW_HOP ? step : size;
	w->offset = offset % period;
	if (w->offset < 0)
		w->offset += period;
}

/* floor(a / b) * b, for b > 0 */
static inline int64
floor_to(int64 a, int64 b)
{
	int64		r = a % b;

	return r < 0 ? a - r - b : a - r;
}

/* (t - (epoch + offset)) mod period, in [0, period), without overflow */
static int64
past_grid(PtfTime t, int64 period, int64 offset)
{
	int64		origin = UNIX_EPOCH_PTF + offset;
	int64		r = t % period;
	int64		o = origin % period;

	if (r < 0)
		r += period;
	if (o < 0)
		o += period;
	return r >= o ? r - o : r + (period - o);
}

/*
 * The start of the window of length period (aligned to the epoch plus
 * offset) holding t; false when it is below the int64 range.
 */
bool
window_aligned_start(PtfTime t, int64 period, int64 offset, PtfTime *start)
{
	int64		origin = UNIX_EPOCH_PTF + offset;
	int64		u;

	if (likely(!pg_sub_s64_overflow(t, origin, &u) && u > PG_INT64_MIN + period))
		return !pg_add_s64_overflow(floor_to(u, period), origin, start);

	/*
	 * t - origin overflows for times in the last 30 years of PostgreSQL's
	 * range (times count from 2000, windows from 1970), and floor_to may go
	 * below the int64 range for huge periods: t's distance past its
	 * window's start from the two remainders.
	 */
	return !pg_sub_s64_overflow(t, past_grid(t, period, offset), start);
}

/*
 * The end of the first window of the grid that ends after slice_end - 1
 * and starts at or after PostgreSQL's first timestamp (a HOP's: a slide
 * larger than the size leaves slices in no window, whose "first" window
 * then starts after them); false when it would end past the int64 range.
 */
static bool
first_end_checked(const WindowSpec *w, PtfTime slice_end, PtfTime *first)
{
	PtfTime		x;
	PtfTime		s;
	PtfTime		e;

	if (w->kind != WINDOW_HOP || w->slice == w->step)
	{
		*first = slice_end;
		return true;
	}
	/*
	 * The first window starts at the first step after t - size; one that
	 * starts before the range does not count: after MIN_TIMESTAMP - 1 then.
	 */
	if (pg_sub_s64_overflow(slice_end - 1, w->size, &x) || x < MIN_TIMESTAMP - 1)
		x = MIN_TIMESTAMP - 1;
	if (pg_add_s64_overflow(x, w->step - past_grid(x, w->step, w->offset), &s) ||
		pg_add_s64_overflow(s, w->size, &e))
		return false;
	*first = e;
	return true;
}

/*
 * The start of the last window holding the slice ending at slice_end (of
 * the int64 range: its end may be past PostgreSQL's, its start not).
 */
static PtfTime
last_start(const WindowSpec *w, PtfTime slice_end)
{
	PtfTime		s = slice_end - w->slice;

	if (w->kind == WINDOW_HOP && w->slice != w->step)
		(void) window_aligned_start(slice_end - 1, w->step, w->offset, &s);
	else if (w->kind == WINDOW_CUMULATE)
		(void) window_aligned_start(slice_end - 1, w->size, w->offset, &s);
	return s;
}

/*
 * Does a window holding the slice start and end within PostgreSQL's
 * timestamps?  Near either end of them, or for sizes of their order.
 */
static bool
slice_has_window(const WindowSpec *w, PtfTime slice_end)
{
	PtfTime		first;

	/* a TUMBLE's one window, a CUMULATE's period: one start for every window */
	if (w->kind != WINDOW_HOP && last_start(w, slice_end) < MIN_TIMESTAMP)
		return false;
	first = window_first_end(w, slice_end);
	return first < END_TIMESTAMP && first <= window_last_end(w, slice_end);
}

/*
 * The end of the slice holding t; false when no window holding it starts
 * and ends within PostgreSQL's timestamps, where it has no bounds to give:
 * its row is passed over, as a row at infinity is.  Its windows that do
 * not are left out (window_first_end and window_last_end stop at them).
 */
bool
window_slice_end(const WindowSpec *w, PtfTime t, PtfTime *end)
{
	PtfTime		s;
	PtfTime		last_end;
	PtfTime		first_start;

	if (!window_aligned_start(t, w->slice, w->offset, &s) ||
		pg_add_s64_overflow(s, w->slice, end))
		return false;
	/* every window holding the slice ends by a size after its start, starts a size before its end */
	if (likely(!pg_add_s64_overflow(s, w->size, &last_end) && last_end < END_TIMESTAMP &&
			   !pg_sub_s64_overflow(*end, w->size, &first_start) &&
			   first_start >= MIN_TIMESTAMP))
		return true;
	return slice_has_window(w, *end);
}

/*
 * The end of the first window holding the slice that starts within
 * PostgreSQL's timestamps; PG_INT64_MAX, after every window's end, when
 * there is none in the int64 range.
 */
PtfTime
window_first_end(const WindowSpec *w, PtfTime slice_end)
{
	PtfTime		first = slice_end;
	PtfTime		start;
	int64		short_by;
	int64		add;

	if (!first_end_checked(w, slice_end, &first))
		return PG_INT64_MAX;
	/* a TUMBLE's window and a CUMULATE's period start in range (window_slice_end) */
	if (likely(w->kind != WINDOW_HOP ||
			   (!pg_sub_s64_overflow(first, w->size, &start) && start >= MIN_TIMESTAMP)))
		return first;
	/* a HOP's windows start a size before their ends, a slide apart */
	short_by = MIN_TIMESTAMP - start;
	if (pg_mul_s64_overflow(short_by / w->step + (short_by % w->step != 0), w->step, &add) ||
		pg_add_s64_overflow(first, add, &first))
		return PG_INT64_MAX;
	return first;
}

/*
 * The end of the last window holding the slice that ends within
 * PostgreSQL's timestamps: windows past them are left out, as a row past
 * them is.  Of a slice window_slice_end gave, unless it lies between a
 * HOP's windows (a slide larger than the size): then before
 * window_first_end's.
 */
PtfTime
window_last_end(const WindowSpec *w, PtfTime slice_end)
{
	PtfTime		s = 0;
	PtfTime		last;
	PtfTime		first;

	switch (w->kind)
	{
		case WINDOW_HOP:
			/* slices of a step: the window starting with it (no division) */
			if (w->slice == w->step)
				s = slice_end - w->step;
			else
				(void) window_aligned_start(slice_end - 1, w->step, w->offset, &s);
			break;
		case WINDOW_CUMULATE:
			(void) window_aligned_start(slice_end - 1, w->size, w->offset, &s);
			break;
		default:
			return slice_end;
	}
	if (likely(!pg_add_s64_overflow(s, w->size, &last) && last < END_TIMESTAMP))
		return last;
	/* the ends step from the first window's: the last of them in range */
	first = window_first_end(w, slice_end);
	if (first >= END_TIMESTAMP)
		return slice_end - 1;	/* before any end a slice's window can have */
	return first + (END_TIMESTAMP - 1 - first) / w->step * w->step;
}

PtfTime
window_start_of(const WindowSpec *w, PtfTime end)
{
	PtfTime		s = 0;

	if (w->kind == WINDOW_CUMULATE)
	{
		(void) window_aligned_start(end - 1, w->size, w->offset, &s);
		return s;
	}
	return end - w->size;
}

/*
 * The window after e (HOP: the next slide; CUMULATE: the next step); past
 * the int64 range, its largest value, after every window's end: loops up
 * to a window_last_end stop.
 */
PtfTime
window_next_end(const WindowSpec *w, PtfTime e)
{
	PtfTime		next;

	return pg_add_s64_overflow(e, w->step, &next) ? PG_INT64_MAX : next;
}


