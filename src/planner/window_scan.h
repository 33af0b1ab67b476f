/*-------------------------------------------------------------------------
 *
 * window_scan.h
 *	  The plan node of the window rules: a custom scan that runs a window
 *	  TVF's call with our operator (window_scan.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_PLANNER_WINDOW_SCAN_H
#define PTF_PLANNER_WINDOW_SCAN_H

#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"

#include "planner/planned.h"
#include "planner/tvf_call.h"

/* What a column of the scan's rows holds. */
typedef enum WindowScanColumn
{
	WSCOL_NULL,					/* nothing (NULL) */
	WSCOL_START,
	WSCOL_END,
	WSCOL_TIME,
	WSCOL_KEY,					/* a grouping column: index into key_attnos */
	WSCOL_AGG,					/* an aggregate: index into aggs */
	WSCOL_DATA,					/* the input row */
	WSCOL_ROWNUM,				/* its row number in the window */
	WSCOL_COLUMN				/* a column of the table: out_index is its attno */
} WindowScanColumn;

/*
 * What a rule planned: everything the execution needs, besides the scan's
 * columns (custom_scan_tlist) and the quals on its rows.  Expressions are
 * over the input row (Vars of varno 1): the plan keeps them as they are.
 */
typedef struct WindowScanPlan
{
	PtfPlannedKind kind;
	WindowKind	window;
	FuncExpr   *call;			/* the TVF's call; its arguments run at execution */
	char	   *input_name;		/* the row type's relation, for EXPLAIN */
	List	   *filter;			/* the WHERE on the input's columns */
	List	   *aggs;			/* TargetEntry of one Aggref each */
	List	   *key_attnos;		/* IntList: grouping or partition columns */
	List	   *out_what;		/* IntList: WindowScanColumn of each scan column */
	List	   *out_index;		/* IntList: its index, for keys and aggregates */
	int			limit;			/* Top-N */
	List	   *sort_attnos;	/* IntList */
	List	   *sort_ops;		/* OidList */
	List	   *sort_colls;		/* OidList */
	List	   *sort_nulls_first;	/* IntList */
	char	   *describe;		/* the planned part as text (a uid's identity) */
	/* PTF_PLANNED_FIRST_ROWS: the table's row type, keep-first by a time column */
	Oid			rowtype;
	bool		keep_first;
	int			time_attno;
} WindowScanPlan;

/*
 * A path of rel computing target from the scan's rows (scan_tlist, whose
 * expressions the target's are matched against), with quals over them
 * (the query's HAVING, its WHERE on window columns).  Not parallel safe:
 * the call runs once, in the backend that runs the plan.  fallback, if
 * any: PostgreSQL's path of the stage, run instead when the windows of a
 * timestamp column may meet in a daylight saving gap (window_scan.c).
 */
extern Path *window_scan_path(PlannerInfo *root, RelOptInfo *rel, PathTarget *target,
							  Index rti, const WindowScanPlan *plan, List *scan_tlist,
							  List *quals, double rows, Cost total_cost, Path *fallback);

/*
 * Does a plan of tvf need a fallback: a call without a uid (a stream's
 * windows are window_aggregate's) over a timestamp column, or one whose
 * column is not known until it runs?  The cheapest of paths, then.
 */
/* after planning: a statement that runs a window scan needs no parallel mode */
extern void window_scan_plan_done(PlannedStmt *stmt);

extern Path *window_scan_fallback(const PtfTvf *tvf, List *paths);
extern Path *window_scan_cheapest(List *paths);

/* the deparsed form of expressions over the input row, for describe and EXPLAIN */
extern char *window_scan_deparse(const PtfTvf *tvf, List *exprs, const char *sep);

/* an ORDER BY of columns of relid, as SQL */
extern char *window_scan_order_text(Oid relid, List *attnos, List *ops, List *colls,
									List *nulls_first);

/* from _PG_init: the node's methods, by name, and what runs its calls */
extern void window_scan_register(PtfWindowRunner window_runner,
								 PtfFirstRowsRunner first_rows_runner);

#endif							/* PTF_PLANNER_WINDOW_SCAN_H */
