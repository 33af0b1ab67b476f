/*-------------------------------------------------------------------------
 *
 * window.h
 *	  Flink's window table-valued functions and the sliced window
 *	  aggregate (window_tvf.c, window_agg.c, window_session.c, their
 *	  arithmetic in window_math.c): TUMBLE, HOP, CUMULATE and SESSION.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_WINDOW_H
#define PTF_WINDOW_H

#include "operators/aggs.h"
#include "operators/operator.h"

typedef enum WindowKind
{
	WINDOW_TUMBLE,
	WINDOW_HOP,
	WINDOW_CUMULATE,
	WINDOW_SESSION
} WindowKind;

/* Windows in time: sizes in microseconds, times as PtfTime. */
typedef struct WindowSpec
{
	WindowKind	kind;
	int64		size;			/* SESSION: the gap */
	int64		step;			/* HOP: the slide; CUMULATE: the step; TUMBLE: size */
	int64		offset;			/* 0 <= offset < the alignment period */
	int64		slice;			/* length of a slice */
} WindowSpec;

/*
 * Windows a row may be in, at most (HOP, CUMULATE: about size / step): a
 * row of more than a million windows is a mistake, and one of 2^31 would
 * count past an int.
 */
#define WINDOW_MAX_PER_ROW 1000000

/*
 * Check and complete a spec: sizes positive, CUMULATE size a multiple of
 * its step, the offset taken modulo the period it matters for; errors
 * (22023) name the arguments; fewer than WINDOW_MAX_PER_ROW windows a row
 * (54000).
 */
extern void window_spec_init(WindowSpec *w, WindowKind kind, int64 size, int64 step,
							 int64 offset);

/* Where a column of window bounds comes from, in an output row. */
typedef enum WindowColumn
{
	WCOL_NONE = 0,				/* not a window column */
	WCOL_START,
	WCOL_END,
	WCOL_TIME					/* end - 1 ms */
} WindowColumn;

/* ---- the TVFs: each row with each of its windows ---- */

typedef struct WindowTvfOptions
{
	WindowSpec	spec;
	Oid			time_type;		/* of on_time */
	TupleDesc	rowdesc;		/* of data: the input's row type */
	TupleDesc	outdesc;		/* (data, window_start, window_end, window_time) */
} WindowTvfOptions;

extern PtfOperator *window_tvf_create(const WindowTvfOptions *opts, const PtfOperatorEnv *env);

/*
 * The start of the TUMBLE window holding ts, as the TVF gives it; false
 * where the TVF skips the row (an infinite time, a window past the ends of
 * the time range).  window_time is a window's end less this many us.
 */
extern bool window_tumble_start(const WindowSpec *w, PtfTime ts, PtfTime *start);
extern int64 window_time_before_end(void);
extern uint64 window_tvf_skipped(PtfOperator *op);

/*
 * The windows holding ts, as the TVFs give them, by their ends in
 * ascending order: how many (only the first max are written to ends), 0
 * where the TVFs skip the row.  window_start_of: the start of the window
 * ending at end.
 */
extern int	window_assign(const WindowSpec *w, PtfTime ts, PtfTime *ends, int max);
extern PtfTime window_start_of(const WindowSpec *w, PtfTime end);

/* ---- the window aggregate ---- */

typedef struct WindowAggOptions
{
	WindowSpec	spec;
	Oid			time_type;		/* of on_time */
	AttrNumber	time_attno;		/* on_time */
	TupleDesc	rowdesc;
	KeySpec    *keys;
	List	   *targetlist;		/* the analyzed aggregates */
	bool		changelog;		/* rows may be retractions */
	bool		emit_only_on_update;	/* CUMULATE: skip unchanged windows */
	TupleDesc	outdesc;		/* the target row type */
	/* per target column: a window bound, or which aggregate output (else -1) */
	WindowColumn *out_window;
	int		   *out_agg;
	int		   *out_key;		/* a partition_by column (its position), or -1 */

	/*
	 * A parallel call (engine/parallel.c): every aggregate combinable and
	 * its states serializable; a worker's operator (partial) emits, at the
	 * end of its input, a row of partial_desc per (key, slice) -- the key
	 * columns, the slice end, its row count and its serialized states --
	 * which the leader's operator combines as rows of input partial_input.
	 */
	bool		parallel;
	bool		partial;
	int			partial_input;	/* -1: none */
	TupleDesc	partial_desc;
} WindowAggOptions;

/* The rows of a worker's partial states: the key columns of rowdesc, then slice end, rows, states. */
extern TupleDesc window_agg_partial_desc(TupleDesc rowdesc, KeySpec *keys);

/* May the aggregates of opts run partly in parallel workers? */
extern bool window_agg_parallel_ok(const WindowAggOptions *opts);

/* what durable state holds: per key, per slice, per session */
extern const StateLayout window_agg_layout;
#define WINDOW_AGG_NSPACES 3

extern PtfOperator *window_agg_create(const WindowAggOptions *opts, const PtfOperatorEnv *env);

/* retractions of rows that were never added, and rows without a usable time */
extern uint64 window_agg_skipped(PtfOperator *op);

#endif							/* PTF_WINDOW_H */
