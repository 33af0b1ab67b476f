/*-------------------------------------------------------------------------
 *
 * planned.h
 *	  What the window rules planned, as the calls that run it are handed it:
 *	  a window TVF's call and what the query does with its rows, or a
 *	  row_number() per key over a table.
 *
 * The rules (planner/) describe the planned part of a query; the SQL
 * functions' code (functions/windows.c, functions/row_number.c) runs it,
 * with the argument checks and inputs of the TVF it replaces.  The planner
 * builds on the engine and the operators, not on the functions, so the
 * functions give it their runners when the library loads (ptf.c:
 * ptf_planner_init) and the custom scan calls them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_PLANNER_PLANNED_H
#define PTF_PLANNER_PLANNED_H

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/tuplestore.h"

#include "operators/window.h"
#include "operators/window_rank.h"

typedef enum PtfPlannedKind
{
	PTF_PLANNED_AGGREGATE,		/* TVF + GROUP BY: the sliced window aggregate */
	PTF_PLANNED_TOP_N,			/* row_number() over each window, its first N */
	PTF_PLANNED_FIRST_ROWS		/* row_number() per key over a table (row_number.h) */
} PtfPlannedKind;

typedef struct PtfPlannedWindow
{
	PtfPlannedKind kind;

	/*
	 * The query's WHERE on the input's columns (implicitly ANDed, Vars of
	 * varno 1 over the input row type), or NIL: a row it rejects does not
	 * reach the operator.  Rows without a usable time pass unfiltered, so
	 * the errors and skips are the TVF's, which come before any WHERE.
	 */
	List	   *filter;

	/* the planned part of the query, as text: part of a uid's identity */
	const char *describe;

	/* the rows emitted, of outdesc, go to store */
	TupleDesc	outdesc;
	Tuplestorestate *store;
	uint64		rows;

	/* PTF_PLANNED_AGGREGATE: outdesc's columns as in WindowAggOptions */
	List	   *aggs;			/* TargetEntry of one Aggref each, over the input row */
	int			nkeys;
	AttrNumber *key_attnos;		/* the grouping columns of the input */
	WindowColumn *out_window;
	int		   *out_agg;
	int		   *out_key;

	/* PTF_PLANNED_TOP_N: order, N and output as in WindowRankOptions */
	WindowRankOptions rank;

	/*
	 * Set by the run: the windows and the time column's type, and, when
	 * track_range was asked for, the least and greatest event time of the
	 * rows the operator got (time_range[0] > [1]: none).
	 */
	bool		track_range;
	WindowSpec	spec;
	Oid			time_type;
	PtfTime		time_range[2];
} PtfPlannedWindow;

typedef struct PtfPlannedFirstRows
{
	Oid			rowtype;		/* the table's row type: rows are read from it */
	int			nkeys;			/* PARTITION BY: columns of the table */
	AttrNumber *key_attnos;
	List	   *filter;			/* the WHERE, over the row (Vars of varno 1) */

	/*
	 * keep_first: the first row per key by time_attno, ascending, as
	 * ptf.deduplicate_keep_first(on_time) keeps it (N = 1, a time column
	 * that cannot be NULL); else the first rank.limit rows per key in the
	 * order of rank.sort_*.
	 */
	bool		keep_first;
	AttrNumber	time_attno;
	WindowRankOptions rank;

	/* output: per column of outdesc, the table's column (attno), or 0: row_number */
	TupleDesc	outdesc;
	AttrNumber *out_attnos;
	Tuplestorestate *store;
	uint64		rows;
	const char *describe;		/* for last_call_stats */
} PtfPlannedFirstRows;

/*
 * Run the window TVF call of fcinfo (its arguments, evaluated, and
 * flinfo->fn_expr set for their types) as the planned query pw: the
 * TVF's argument checks, then pw's operator over the TVF's input.
 */
typedef void (*PtfWindowRunner) (FunctionCallInfo fcinfo, WindowKind kind,
								 PtfPlannedWindow *pw);

/* Run row_number() per key over a table as p planned it. */
typedef void (*PtfFirstRowsRunner) (PtfPlannedFirstRows *p);

#endif							/* PTF_PLANNER_PLANNED_H */
