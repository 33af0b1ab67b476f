/*-------------------------------------------------------------------------
 *
 * windows.h
 *	  Window TVF calls that the planner (planner/) runs with an operator
 *	  of ours instead of PostgreSQL's grouping or ranking of their rows.
 *
 * The planner recognizes a query over ptf.tumble/hop/cumulate that our
 * operators answer (TVF + GROUP BY, Window Top-N) and describes what the
 * query does with the TVF's rows: a PtfPlannedWindow.  At execution the
 * TVF's own arguments are checked by the TVF's own code -- the same
 * errors, the same input (relation, query, change stream, uid) -- and the
 * call then runs the planned operator instead of emitting the TVF's rows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_WINDOWS_H
#define PTF_FUNCTIONS_WINDOWS_H

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

/*
 * Run the window TVF call of fcinfo (its arguments, evaluated, and
 * flinfo->fn_expr set for their types) as the planned query pw: the
 * TVF's argument checks, then pw's operator over the TVF's input.
 */
extern void ptf_window_run_planned(FunctionCallInfo fcinfo, WindowKind kind,
								   PtfPlannedWindow *pw);

#endif							/* PTF_FUNCTIONS_WINDOWS_H */
