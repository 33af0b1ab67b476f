/*-------------------------------------------------------------------------
 *
 * window_scan.c
 *	  The plan node of the window rules (planner/window_agg_rule.c,
 *	  window_rank_rule.c): a custom scan that runs a window TVF's call with
 *	  our operator and returns its rows.
 *
 * Why a custom scan.  The rules replace part of a query -- the grouping of
 * a TVF's rows, or their ranking -- by an operator of ours, and what runs
 * must be exactly what PostgreSQL analyzed: the Aggref nodes of the query
 * with their types, collations, casts, DISTINCT, ORDER BY and FILTER.  A
 * plan node carries those nodes as they are (custom_private), through
 * the plan cache and copyObject, with nothing to parse back: no text
 * round trip, and no SQL-callable function that takes node trees (which
 * crafted input could abuse).  Only the planner makes this node.
 *
 * Its rows are laid out by custom_scan_tlist: the window bounds, the
 * grouping columns and the Aggrefs (or the data column and the
 * row_number() call), as the expressions the query wrote; setrefs.c then
 * turns the plan's target list and quals -- HAVING, expressions over
 * aggregates -- into references to those columns, as it does for a
 * foreign scan that computes aggregates remotely.
 *
 * Execution.  At the first fetch the TVF's arguments are evaluated (they
 * may be parameters of a prepared statement) and the call runs through
 * functions/windows.c: the TVF's own argument checks, its input
 * (relation through SPI -- so privileges and row level security hold as
 * for the TVF -- query, or change stream under a uid, in the caller's
 * transaction), and the planned operator, whose rows fill a tuplestore
 * the scan then returns.  The function's EXECUTE privilege is checked as
 * a function scan checks it.  A rescan returns the same rows: the node
 * takes no executor parameters (the rules refuse them).
 *
 * The node is not parallel safe: the call runs once, in the backend that
 * runs the plan, and its uid's state changes with that backend's
 * transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "catalog/pg_proc.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "parser/parse_type.h"
#include "pgtime.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/tuplestore.h"

#include "planner/window_scan.h"

/* what runs the calls: the functions' code (planned.h) */
static PtfWindowRunner run_window = NULL;
static PtfFirstRowsRunner run_first_rows_call = NULL;

/* ---- the plan's private list ---- */

enum
{
	PRIV_KIND,
	PRIV_WINDOW,
	PRIV_CALL,
	PRIV_INPUT_NAME,
	PRIV_FILTER,
	PRIV_AGGS,
	PRIV_KEYS,
	PRIV_OUT_WHAT,
	PRIV_OUT_INDEX,
	PRIV_LIMIT,
	PRIV_SORT_ATTNOS,
	PRIV_SORT_OPS,
	PRIV_SORT_COLLS,
	PRIV_SORT_NULLS_FIRST,
	PRIV_DESCRIBE,
	PRIV_ROWTYPE,
	PRIV_KEEP_FIRST,
	PRIV_TIME_ATTNO,
	PRIV_COUNT
};

static List *
plan_to_list(const WindowScanPlan *p)
{
	List	   *l = NIL;

	l = lappend(l, makeInteger(p->kind));
	l = lappend(l, makeInteger(p->window));
	l = lappend(l, copyObject(p->call));
	l = lappend(l, makeString(pstrdup(p->input_name)));
	l = lappend(l, copyObject(p->filter));
	l = lappend(l, copyObject(p->aggs));
	l = lappend(l, list_copy(p->key_attnos));
	l = lappend(l, list_copy(p->out_what));
	l = lappend(l, list_copy(p->out_index));
	l = lappend(l, makeInteger(p->limit));
	l = lappend(l, list_copy(p->sort_attnos));
	l = lappend(l, list_copy(p->sort_ops));
	l = lappend(l, list_copy(p->sort_colls));
	l = lappend(l, list_copy(p->sort_nulls_first));
	l = lappend(l, makeString(pstrdup(p->describe)));
	l = lappend(l, list_make1_oid(p->rowtype));
	l = lappend(l, makeInteger(p->keep_first));
	l = lappend(l, makeInteger(p->time_attno));
	Assert(list_length(l) == PRIV_COUNT);
	return l;
}

static void
plan_from_list(List *l, WindowScanPlan *p)
{
	Assert(list_length(l) == PRIV_COUNT);
	p->kind = intVal(list_nth(l, PRIV_KIND));
	p->window = intVal(list_nth(l, PRIV_WINDOW));
	p->call = (FuncExpr *) list_nth(l, PRIV_CALL);
	p->input_name = strVal(list_nth(l, PRIV_INPUT_NAME));
	p->filter = (List *) list_nth(l, PRIV_FILTER);
	p->aggs = (List *) list_nth(l, PRIV_AGGS);
	p->key_attnos = (List *) list_nth(l, PRIV_KEYS);
	p->out_what = (List *) list_nth(l, PRIV_OUT_WHAT);
	p->out_index = (List *) list_nth(l, PRIV_OUT_INDEX);
	p->limit = intVal(list_nth(l, PRIV_LIMIT));
	p->sort_attnos = (List *) list_nth(l, PRIV_SORT_ATTNOS);
	p->sort_ops = (List *) list_nth(l, PRIV_SORT_OPS);
	p->sort_colls = (List *) list_nth(l, PRIV_SORT_COLLS);
	p->sort_nulls_first = (List *) list_nth(l, PRIV_SORT_NULLS_FIRST);
	p->describe = strVal(list_nth(l, PRIV_DESCRIBE));
	p->rowtype = linitial_oid((List *) list_nth(l, PRIV_ROWTYPE));
	p->keep_first = intVal(list_nth(l, PRIV_KEEP_FIRST)) != 0;
	p->time_attno = intVal(list_nth(l, PRIV_TIME_ATTNO));
}

/* ---- deparsing ---- */

char *
window_scan_deparse(const PtfTvf *tvf, List *exprs, const char *sep)
{
	List	   *dpcontext;
	StringInfoData buf;
	ListCell   *lc;

	dpcontext = deparse_context_for(get_rel_name(tvf->relid), tvf->relid);
	initStringInfo(&buf);
	foreach(lc, exprs)
	{
		Node	   *e = (Node *) lfirst(lc);

		if (IsA(e, TargetEntry))
			e = (Node *) ((TargetEntry *) e)->expr;
		appendStringInfo(&buf, "%s%s", foreach_current_index(lc) > 0 ? sep : "",
						 deparse_expression(e, dpcontext, false, false));
	}
	return buf.data;
}

char *
window_scan_order_text(Oid relid, List *attnos, List *ops, List *colls, List *nulls_first)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < list_length(attnos); i++)
	{
		AttrNumber	attno = (AttrNumber) list_nth_int(attnos, i);
		Oid			op = list_nth_oid(ops, i);
		Oid			coll = list_nth_oid(colls, i);
		bool		nf = list_nth_int(nulls_first, i) != 0;
		Oid			opfamily;
		Oid			opcintype;
		int16		strategy;
		bool		desc = false;
		Oid			typid;
		int32		typmod;
		Oid			attcoll;

		if (get_ordering_op_properties(op, &opfamily, &opcintype, &strategy))
			desc = (strategy == BTGreaterStrategyNumber);
		get_atttypetypmodcoll(relid, attno, &typid, &typmod, &attcoll);
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(relid, attno, false)));
		if (OidIsValid(coll) && coll != attcoll)
			appendStringInfo(&buf, " COLLATE %s", generate_collation_name(coll));
		if (desc)
			appendStringInfoString(&buf, " DESC");
		if (nf != desc)
			appendStringInfoString(&buf, nf ? " NULLS FIRST" : " NULLS LAST");
	}
	return buf.data;
}

/* ---- path and plan ---- */

static Plan *plan_window_scan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							  List *tlist, List *clauses, List *custom_plans);

static const CustomPathMethods window_scan_path_methods = {
	.CustomName = "PtfWindowScan",
	.PlanCustomPath = plan_window_scan,
};

static Node *create_window_scan_state(CustomScan *cscan);

static const CustomScanMethods window_scan_methods = {
	.CustomName = "PtfWindowScan",
	.CreateCustomScanState = create_window_scan_state,
};

Path *
window_scan_path(PlannerInfo *root, RelOptInfo *rel, PathTarget *target, Index rti,
				 const WindowScanPlan *plan, List *scan_tlist, List *quals, double rows,
				 Cost total_cost, Path *fallback)
{
	CustomPath *cp = makeNode(CustomPath);

	cp->path.pathtype = T_CustomScan;
	cp->path.parent = rel;
	cp->path.pathtarget = target;
	cp->path.param_info = NULL;
	cp->path.parallel_aware = false;
	cp->path.parallel_safe = false;
	cp->path.parallel_workers = 0;
	cp->path.rows = rows;
	cp->path.startup_cost = total_cost;
	cp->path.total_cost = total_cost;
	cp->path.pathkeys = NIL;
	cp->flags = 0;
	cp->custom_paths = fallback ? list_make1(fallback) : NIL;
	cp->custom_private = list_make4(plan_to_list(plan), scan_tlist, quals, makeInteger(rti));
	cp->methods = &window_scan_path_methods;
	return &cp->path;
}

/* functions the plan calls in expressions that setrefs.c does not see */
static bool
record_functions_walker(Node *node, PlannerInfo *root)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr))
		record_plan_function_dependency(root, ((FuncExpr *) node)->funcid);
	else if (IsA(node, OpExpr) || IsA(node, DistinctExpr) || IsA(node, NullIfExpr))
	{
		set_opfuncid((OpExpr *) node);
		record_plan_function_dependency(root, ((OpExpr *) node)->opfuncid);
	}
	else if (IsA(node, ScalarArrayOpExpr))
	{
		set_sa_opfuncid((ScalarArrayOpExpr *) node);
		record_plan_function_dependency(root, ((ScalarArrayOpExpr *) node)->opfuncid);
	}
	else if (IsA(node, Aggref))
		record_plan_function_dependency(root, ((Aggref *) node)->aggfnoid);
	return expression_tree_walker(node, record_functions_walker, (void *) root);
}

static Plan *
plan_window_scan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cs = makeNode(CustomScan);
	List	   *priv = (List *) linitial(best_path->custom_private);
	WindowScanPlan p;
	Oid			relid;

	plan_from_list(priv, &p);
	cs->scan.plan.targetlist = tlist;
	cs->scan.plan.qual = list_concat(list_copy(clauses),
									 (List *) lthird(best_path->custom_private));
	cs->scan.scanrelid = 0;
	cs->flags = best_path->flags;
	cs->custom_plans = custom_plans;
	cs->custom_exprs = NIL;
	cs->custom_private = priv;
	cs->custom_scan_tlist = (List *) lsecond(best_path->custom_private);
	cs->custom_relids = bms_make_singleton(intVal(lfourth(best_path->custom_private)));
	cs->methods = &window_scan_methods;

	/*
	 * The plan reads the input's table (a change of it, or of its row type,
	 * makes cached plans again) and calls what its expressions call.
	 */
	relid = typeidTypeRelid(p.kind == PTF_PLANNED_FIRST_ROWS ? p.rowtype :
							exprType(linitial(p.call->args)));
	if (OidIsValid(relid))
		root->glob->relationOids = lappend_oid(root->glob->relationOids, relid);
	fix_opfuncids((Node *) p.call);
	fix_opfuncids((Node *) p.filter);
	fix_opfuncids((Node *) p.aggs);
	(void) record_functions_walker((Node *) p.call, root);
	(void) record_functions_walker((Node *) p.filter, root);
	(void) record_functions_walker((Node *) p.aggs, root);
	return &cs->scan.plan;
}

/* ---- execution ---- */

typedef struct WindowScanState
{
	CustomScanState css;
	WindowScanPlan plan;
	List	   *argstates;		/* the TVF's arguments */
	Tuplestorestate *store;
	TupleTableSlot *fetch;		/* rows of the store */
	bool		done;			/* the call has run */
	uint64		rows;
	PlanState  *fallback;		/* PostgreSQL's plan of the stage, or NULL */
	bool		use_fallback;	/* its rows are the answer */
} WindowScanState;

static void begin_window_scan(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *exec_window_scan(CustomScanState *node);
static void end_window_scan(CustomScanState *node);
static void rescan_window_scan(CustomScanState *node);
static void explain_window_scan(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomExecMethods window_scan_exec_methods = {
	.CustomName = "PtfWindowScan",
	.BeginCustomScan = begin_window_scan,
	.ExecCustomScan = exec_window_scan,
	.EndCustomScan = end_window_scan,
	.ReScanCustomScan = rescan_window_scan,
	.ExplainCustomScan = explain_window_scan,
};

static Node *
create_window_scan_state(CustomScan *cscan)
{
	WindowScanState *ws = (WindowScanState *) newNode(sizeof(WindowScanState),
													  T_CustomScanState);

	ws->css.methods = &window_scan_exec_methods;
	plan_from_list(cscan->custom_private, &ws->plan);
	return (Node *) ws;
}

static void
begin_window_scan(CustomScanState *node, EState *estate, int eflags)
{
	WindowScanState *ws = (WindowScanState *) node;
	FuncExpr   *call = ws->plan.call;
	AclResult	aclresult;

	/* as a function scan of the TVF would */
	if (call != NULL)
	{
		aclresult = pg_proc_aclcheck(call->funcid, GetUserId(), ACL_EXECUTE);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(call->funcid));
		ws->argstates = ExecInitExprList(call->args, &node->ss.ps);
	}

	/*
	 * Rows come from a tuplestore, as minimal tuples: the scan slot that
	 * nodeCustom.c made is virtual, and the projection and quals compiled
	 * for it would not deform them.  Both are made again for the slot the
	 * rows are read into.
	 */
	ExecInitScanTupleSlot(estate, &node->ss,
						  CreateTupleDescCopy(node->ss.ss_ScanTupleSlot->tts_tupleDescriptor),
						  &TTSOpsMinimalTuple);
	ExecAssignScanProjectionInfoWithVarno(&node->ss, INDEX_VAR);
	node->ss.ps.qual = ExecInitQual(node->ss.ps.plan->qual, (PlanState *) node);
	ws->fetch = node->ss.ss_ScanTupleSlot;

	/*
	 * The fallback is not among custom_ps: EXPLAIN would show it as a child
	 * of every plan, and it only runs in the rare case gap_possible() finds.
	 */
	if (((CustomScan *) node->ss.ps.plan)->custom_plans != NIL)
		ws->fallback = ExecInitNode(linitial(((CustomScan *) node->ss.ps.plan)->custom_plans),
									estate, eflags);
}

/* parameters of a prepared statement, as constants: the operator runs no executor */
static Node *
bind_params_mutator(Node *node, ParamListInfo params)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXTERN)
	{
		Param	   *p = (Param *) node;
		ParamExternData prmdata;
		ParamExternData *prm = NULL;
		int16		typlen;
		bool		typbyval;

		if (params != NULL && p->paramid > 0 && p->paramid <= params->numParams)
			prm = params->paramFetch != NULL ?
				params->paramFetch(params, p->paramid, false, &prmdata) :
				&params->params[p->paramid - 1];
		if (prm == NULL || !OidIsValid(prm->ptype))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no value found for parameter %d", p->paramid),
					 errhint("Pass a value for every parameter of the prepared statement.")));
		get_typlenbyval(p->paramtype, &typlen, &typbyval);
		return (Node *) makeConst(p->paramtype, p->paramtypmod, p->paramcollid, typlen,
								  prm->isnull ? (Datum) 0 : datumCopy(prm->value, typbyval, typlen),
								  prm->isnull, typbyval);
	}
	return expression_tree_mutator(node, bind_params_mutator, (void *) params);
}

/* ---- windows a daylight saving gap merges ---- */

/* the epoch windows align to (window.c): 1970-01-01, in PtfTime */
#define UNIX_EPOCH_PTF \
	((int64) (UNIX_EPOCH_JDATE - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY)

static PtfTime
unix_seconds_to_ptf(int64 secs)
{
	return (secs - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
		USECS_PER_SEC;
}

static int64
ptf_to_unix_seconds(PtfTime t)
{
	return t / USECS_PER_SEC + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
}

/*
 * Has the grid base + k period a point in [lo, hi)?  From the remainders:
 * base - lo overflows for times in the last 30 years of the range.
 */
static bool
grid_hits(int64 base, int64 period, PtfTime lo, PtfTime hi)
{
	int64		a = base % period;
	int64		b = lo % period;
	int64		r;

	if (a < 0)
		a += period;
	if (b < 0)
		b += period;
	/* the distance from lo up to the grid's next point */
	r = a >= b ? a - b : a + (period - b);
	return lo < hi && r < hi - lo;
}

/* t + d, d >= 0, stopped at the int64 range */
static PtfTime
time_add_saturated(PtfTime t, int64 d)
{
	PtfTime		r;

	return pg_add_s64_overflow(t, d, &r) ? PG_INT64_MAX : r;
}

/* t - d, d >= 0, stopped at the int64 range */
static PtfTime
time_sub_saturated(PtfTime t, int64 d)
{
	PtfTime		r;

	return pg_sub_s64_overflow(t, d, &r) ? PG_INT64_MIN : r;
}

/*
 * A timestamp column is windowed on its own clock, and its window bounds
 * are converted to timestamptz in the session's time zone (doc/design.md §2.5).
 * Local times in a daylight saving gap do not exist, and convert to the
 * same instants as the hour after them: two windows one of whose bounds
 * lies in a gap can come out with the same bounds, which PostgreSQL's
 * GROUP BY or PARTITION BY then takes for one window, the operator not.
 * Could a window of w over local times in range have such a bound?  The
 * gaps of the session's time zone between them (pg_next_dst_boundary),
 * against the grid of window bounds: starts at offset + k step, ends at
 * offset + size + k step, window times 1 ms before.
 */
static bool
gap_possible(const WindowSpec *w, const PtfTime *range)
{
	long		gmtoff;
	pg_time_t	t;
	pg_time_t	until;

	if (range[0] > range[1] || pg_get_timezone_offset(session_timezone, &gmtoff))
		return false;
	/* widened by the windows, and by a day for the zone's offsets */
	t = (pg_time_t) ptf_to_unix_seconds(time_sub_saturated(time_sub_saturated(range[0], w->size),
														   USECS_PER_DAY));
	until = (pg_time_t) ptf_to_unix_seconds(time_add_saturated(time_add_saturated(range[1], w->size),
															   USECS_PER_DAY));
	while (t < until)
	{
		long		before;
		long		after;
		int			before_dst;
		int			after_dst;
		pg_time_t	boundary;
		int			r = pg_next_dst_boundary(&t, &before, &before_dst, &boundary,
											 &after, &after_dst, session_timezone);

		if (r < 0)
			return true;		/* cannot tell: PostgreSQL's answer */
		if (r == 0 || boundary > until)
			break;
		if (after > before)
		{
			PtfTime		lo = unix_seconds_to_ptf((int64) boundary + before);
			PtfTime		hi = unix_seconds_to_ptf((int64) boundary + after);
			int64		base = UNIX_EPOCH_PTF + w->offset;

			if (grid_hits(base, w->step, lo, hi) ||
				grid_hits(base + w->size, w->step, lo, hi) ||
				grid_hits(base + w->size - 1000, w->step, lo, hi))
				return true;
		}
		t = boundary;
	}
	return false;
}

/*
 * row_number() per key over a table (row_number.h).  The table is read
 * whole, "SELECT * FROM t": a role that may read only some of its columns
 * runs PostgreSQL's own plan, which reads only those the query does.
 */
static void
run_first_rows(WindowScanState *ws)
{
	CustomScanState *node = &ws->css;
	EState	   *estate = node->ss.ps.state;
	WindowScanPlan *p = &ws->plan;
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	TupleDesc	scandesc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	PtfPlannedFirstRows fr;
	ListCell   *lc;
	int			ncols = scandesc->natts;
	int			i;

	ws->done = true;
	if (pg_class_aclcheck(typeidTypeRelid(p->rowtype), GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		ws->fallback != NULL)
	{
		ws->use_fallback = true;
		MemoryContextSwitchTo(old);
		return;
	}
	memset(&fr, 0, sizeof(fr));
	fr.rowtype = p->rowtype;
	fr.nkeys = list_length(p->key_attnos);
	fr.key_attnos = palloc(sizeof(AttrNumber) * Max(fr.nkeys, 1));
	foreach(lc, p->key_attnos)
		fr.key_attnos[foreach_current_index(lc)] = (AttrNumber) lfirst_int(lc);
	fr.filter = (List *) bind_params_mutator((Node *) p->filter, estate->es_param_list_info);
	fr.keep_first = p->keep_first;
	fr.time_attno = (AttrNumber) p->time_attno;
	fr.rank.limit = p->limit;
	fr.rank.nsort = list_length(p->sort_attnos);
	fr.rank.sort_attnos = palloc(sizeof(AttrNumber) * Max(fr.rank.nsort, 1));
	fr.rank.sort_ops = palloc(sizeof(Oid) * Max(fr.rank.nsort, 1));
	fr.rank.sort_colls = palloc(sizeof(Oid) * Max(fr.rank.nsort, 1));
	fr.rank.sort_nulls_first = palloc(sizeof(bool) * Max(fr.rank.nsort, 1));
	for (i = 0; i < fr.rank.nsort; i++)
	{
		fr.rank.sort_attnos[i] = (AttrNumber) list_nth_int(p->sort_attnos, i);
		fr.rank.sort_ops[i] = list_nth_oid(p->sort_ops, i);
		fr.rank.sort_colls[i] = list_nth_oid(p->sort_colls, i);
		fr.rank.sort_nulls_first[i] = list_nth_int(p->sort_nulls_first, i) != 0;
	}
	fr.outdesc = CreateTupleDescCopy(scandesc);
	fr.out_attnos = palloc0(sizeof(AttrNumber) * Max(ncols, 1));
	fr.rank.out_cols = palloc(sizeof(RankColumn) * Max(ncols, 1));
	fr.rank.out_attnos = fr.out_attnos;
	for (i = 0; i < ncols; i++)
	{
		WindowScanColumn what = list_nth_int(p->out_what, i);

		fr.out_attnos[i] = what == WSCOL_COLUMN ? (AttrNumber) list_nth_int(p->out_index, i) : 0;
		fr.rank.out_cols[i] = what == WSCOL_COLUMN ? RCOL_COLUMN : RCOL_ROWNUM;
	}
	ws->store = tuplestore_begin_heap(true, false, work_mem);
	fr.store = ws->store;
	fr.describe = p->describe;
	run_first_rows_call(&fr);
	ws->rows = fr.rows;
	MemoryContextSwitchTo(old);
}

/* The call, with its output into the store. */
static void
run_window_scan(WindowScanState *ws)
{
	CustomScanState *node = &ws->css;
	EState	   *estate = node->ss.ps.state;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	WindowScanPlan *p = &ws->plan;
	FuncExpr   *call = p->call;
	int			nargs = list_length(call->args);
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	FmgrInfo   *flinfo = palloc0(sizeof(FmgrInfo));
	FunctionCallInfo fcinfo = palloc0(SizeForFunctionCallInfo(nargs));
	PtfPlannedWindow pw;
	TupleDesc	scandesc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	ListCell   *lc;
	int			ncols = scandesc->natts;
	int			i;

	fmgr_info(call->funcid, flinfo);
	fmgr_info_set_expr((Node *) call, flinfo);
	InitFunctionCallInfoData(*fcinfo, flinfo, nargs, call->inputcollid, NULL, NULL);
	i = 0;
	foreach(lc, ws->argstates)
	{
		fcinfo->args[i].value = ExecEvalExpr((ExprState *) lfirst(lc), econtext,
											 &fcinfo->args[i].isnull);
		i++;
	}

	memset(&pw, 0, sizeof(pw));
	pw.kind = p->kind;
	pw.filter = (List *) bind_params_mutator((Node *) p->filter, estate->es_param_list_info);
	pw.describe = p->describe;
	/* the scan's layout, without typmods: the operator's values are the expressions' */
	pw.outdesc = CreateTupleDescCopy(scandesc);
	for (i = 0; i < ncols; i++)
		TupleDescAttr(pw.outdesc, i)->atttypmod = -1;
	ws->store = tuplestore_begin_heap(true, false, work_mem);
	pw.store = ws->store;
	pw.nkeys = list_length(p->key_attnos);
	pw.key_attnos = palloc(sizeof(AttrNumber) * Max(pw.nkeys, 1));
	foreach(lc, p->key_attnos)
		pw.key_attnos[foreach_current_index(lc)] = (AttrNumber) lfirst_int(lc);

	if (p->kind == PTF_PLANNED_AGGREGATE)
	{
		pw.aggs = (List *) bind_params_mutator((Node *) p->aggs, estate->es_param_list_info);
		pw.out_window = palloc0(sizeof(WindowColumn) * Max(ncols, 1));
		pw.out_agg = palloc(sizeof(int) * Max(ncols, 1));
		pw.out_key = palloc(sizeof(int) * Max(ncols, 1));
		for (i = 0; i < ncols; i++)
		{
			WindowScanColumn what = list_nth_int(p->out_what, i);
			int			index = list_nth_int(p->out_index, i);

			pw.out_agg[i] = what == WSCOL_AGG ? index : -1;
			pw.out_key[i] = what == WSCOL_KEY ? index : -1;
			pw.out_window[i] = what == WSCOL_START ? WCOL_START :
				what == WSCOL_END ? WCOL_END : what == WSCOL_TIME ? WCOL_TIME : WCOL_NONE;
		}
	}
	else
	{
		WindowRankOptions *r = &pw.rank;

		r->limit = p->limit;
		r->nsort = list_length(p->sort_attnos);
		r->sort_attnos = palloc(sizeof(AttrNumber) * Max(r->nsort, 1));
		r->sort_ops = palloc(sizeof(Oid) * Max(r->nsort, 1));
		r->sort_colls = palloc(sizeof(Oid) * Max(r->nsort, 1));
		r->sort_nulls_first = palloc(sizeof(bool) * Max(r->nsort, 1));
		for (i = 0; i < r->nsort; i++)
		{
			r->sort_attnos[i] = (AttrNumber) list_nth_int(p->sort_attnos, i);
			r->sort_ops[i] = list_nth_oid(p->sort_ops, i);
			r->sort_colls[i] = list_nth_oid(p->sort_colls, i);
			r->sort_nulls_first[i] = list_nth_int(p->sort_nulls_first, i) != 0;
		}
		r->out_cols = palloc(sizeof(RankColumn) * Max(ncols, 1));
		for (i = 0; i < ncols; i++)
		{
			WindowScanColumn what = list_nth_int(p->out_what, i);

			r->out_cols[i] = what == WSCOL_DATA ? RCOL_DATA :
				what == WSCOL_START ? RCOL_START : what == WSCOL_END ? RCOL_END :
				what == WSCOL_TIME ? RCOL_TIME : what == WSCOL_ROWNUM ? RCOL_ROWNUM : RCOL_NULL;
		}
	}

	pw.track_range = (ws->fallback != NULL);
	run_window(fcinfo, p->window, &pw);
	ws->rows = pw.rows;
	ws->done = true;
	if (ws->fallback != NULL && pw.time_type == TIMESTAMPOID &&
		gap_possible(&pw.spec, pw.time_range))
	{
		tuplestore_clear(ws->store);
		ws->use_fallback = true;
	}
	MemoryContextSwitchTo(old);
}

static TupleTableSlot *
fetch_row(ScanState *ss)
{
	WindowScanState *ws = (WindowScanState *) ss;

	Assert(ws->done);
	if (!tuplestore_gettupleslot(ws->store, true, false, ws->fetch))
		return NULL;
	return ws->fetch;
}

static bool
recheck_row(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
exec_window_scan(CustomScanState *node)
{
	WindowScanState *ws = (WindowScanState *) node;
	TupleTableSlot *slot;

	if (!ws->done)
	{
		if (ws->plan.kind == PTF_PLANNED_FIRST_ROWS)
			run_first_rows(ws);
		else
			run_window_scan(ws);
	}
	if (!ws->use_fallback)
		return ExecScan(&node->ss, fetch_row, recheck_row);
	/* the stage as PostgreSQL planned it: its rows are this node's */
	slot = ExecProcNode(ws->fallback);
	if (TupIsNull(slot))
		return ExecClearTuple(node->ss.ps.ps_ResultTupleSlot);
	return ExecCopySlot(node->ss.ps.ps_ResultTupleSlot, slot);
}

static void
end_window_scan(CustomScanState *node)
{
	WindowScanState *ws = (WindowScanState *) node;

	if (ws->store != NULL)
		tuplestore_end(ws->store);
	ws->store = NULL;
	if (ws->fallback != NULL)
		ExecEndNode(ws->fallback);
}

static void
rescan_window_scan(CustomScanState *node)
{
	WindowScanState *ws = (WindowScanState *) node;

	/* no parameters change the call (the rules take none): the same rows */
	if (ws->store != NULL)
		tuplestore_rescan(ws->store);
	if (ws->use_fallback)
		ExecReScan(ws->fallback);
	ExecScanReScan(&node->ss);
}

/* ---- EXPLAIN ---- */

/* an argument of the call as EXPLAIN shows it: a constant's value, else "(computed)" */
static char *
arg_text(FuncExpr *call, int i)
{
	Node	   *n = (Node *) list_nth(call->args, i);
	Const	   *c;
	Oid			out;
	bool		varlena;

	if (!IsA(n, Const))
		return "(computed)";
	c = (Const *) n;
	if (c->constisnull)
		return "NULL";
	getTypeOutputInfo(c->consttype, &out, &varlena);
	return OidOutputFunctionCall(out, c->constvalue);
}

static void
explain_window_scan(CustomScanState *node, List *ancestors, ExplainState *es)
{
	WindowScanState *ws = (WindowScanState *) node;
	WindowScanPlan *p = &ws->plan;
	FuncExpr   *call = p->call;
	int			before_uid = p->window == WINDOW_TUMBLE ? 4 : 5;
	StringInfoData buf;
	char	   *uid;
	char	   *changes;
	char	   *query;
	PtfTvf		tvf;

	if (p->kind == PTF_PLANNED_FIRST_ROWS)
	{
		Oid			relid = typeidTypeRelid(p->rowtype);

		memset(&tvf, 0, sizeof(tvf));
		tvf.rowtype = p->rowtype;
		tvf.relid = relid;
		tvf.rowdesc = lookup_rowtype_tupdesc_copy(p->rowtype, -1);
		ExplainPropertyText(p->keep_first ? "Keep First" : "First Rows per Key",
							p->sort_attnos == NIL ? "(no order)" :
							window_scan_order_text(relid, p->sort_attnos, p->sort_ops,
												   p->sort_colls, p->sort_nulls_first), es);
		ExplainPropertyText("Input", p->input_name, es);
		if (p->key_attnos != NIL)
			ExplainPropertyText("Partition Key",
								window_scan_deparse(&tvf, ptf_tvf_input_columns(&tvf, p->key_attnos), ", "),
								es);
		if (!p->keep_first)
			ExplainPropertyInteger("Rows per Key", NULL, p->limit, es);
		if (p->filter != NIL)
			ExplainPropertyText("Input Filter", window_scan_deparse(&tvf, p->filter, " AND "), es);
		if (ws->fallback != NULL && es->verbose)
			ExplainPropertyText("Fallback", "PostgreSQL's plan, for a role that may read only some columns", es);
		if (es->analyze && ws->done)
		{
			ExplainPropertyUInteger("Operator Rows", NULL, ws->rows, es);
			if (ws->use_fallback)
				ExplainPropertyBool("Fallback Used", true, es);
		}
		return;
	}
	initStringInfo(&buf);
	if (p->window == WINDOW_TUMBLE)
		appendStringInfo(&buf, "tumble(size %s, offset %s)", arg_text(call, 2), arg_text(call, 3));
	else
		appendStringInfo(&buf, "%s(%s %s, size %s, offset %s)",
						 p->window == WINDOW_HOP ? "hop" : "cumulate",
						 p->window == WINDOW_HOP ? "slide" : "step",
						 arg_text(call, 2), arg_text(call, 3), arg_text(call, 4));
	appendStringInfo(&buf, " on %s", arg_text(call, 1));
	ExplainPropertyText(p->kind == PTF_PLANNED_AGGREGATE ? "Window Aggregate" : "Window Top-N",
						buf.data, es);

	resetStringInfo(&buf);
	uid = arg_text(call, before_uid);
	query = arg_text(call, before_uid + 1);
	changes = arg_text(call, before_uid + 2);
	if (strcmp(changes, "t") == 0)
		appendStringInfo(&buf, "changes of %s, uid %s", p->input_name, uid);
	else if (strcmp(changes, "(computed)") == 0)
		appendStringInfo(&buf, "changes of %s or its rows (computed), uid %s",
						 p->input_name, uid);
	else if (strcmp(query, "NULL") != 0)
		appendStringInfo(&buf, "query%s%s", strcmp(uid, "NULL") != 0 ? ", uid " : "",
						 strcmp(uid, "NULL") != 0 ? uid : "");
	else
		appendStringInfo(&buf, "%s%s%s", p->input_name, strcmp(uid, "NULL") != 0 ? ", uid " : "",
						 strcmp(uid, "NULL") != 0 ? uid : "");
	ExplainPropertyText("Input", buf.data, es);

	/* the columns and expressions, over the input row */
	memset(&tvf, 0, sizeof(tvf));
	tvf.rowtype = exprType(linitial(call->args));
	tvf.relid = typeidTypeRelid(tvf.rowtype);
	if (p->key_attnos != NIL)
	{
		List	   *cols = NIL;
		ListCell   *lc;

		foreach(lc, p->key_attnos)
			cols = lappend(cols, makeVar(1, lfirst_int(lc), get_atttype(tvf.relid, lfirst_int(lc)),
										 -1, InvalidOid, 0));
		ExplainPropertyText(p->kind == PTF_PLANNED_AGGREGATE ? "Group Key" : "Partition Key",
							window_scan_deparse(&tvf, cols, ", "), es);
	}
	if (p->kind == PTF_PLANNED_AGGREGATE)
	{
		if (p->aggs != NIL)
			ExplainPropertyText("Aggregates", window_scan_deparse(&tvf, p->aggs, ", "), es);
	}
	else
	{
		ExplainPropertyText("Order", p->sort_attnos == NIL ? "(none)" :
							window_scan_order_text(tvf.relid, p->sort_attnos, p->sort_ops,
												   p->sort_colls, p->sort_nulls_first), es);
		ExplainPropertyInteger("Rows per Window", NULL, p->limit, es);
	}
	if (p->filter != NIL)
		ExplainPropertyText("Input Filter", window_scan_deparse(&tvf, p->filter, " AND "), es);
	if (ws->fallback != NULL && es->verbose)
		ExplainPropertyText("Fallback", "PostgreSQL's plan, if a window bound falls in a daylight saving gap", es);
	if (es->analyze && ws->done)
	{
		ExplainPropertyUInteger("Operator Rows", NULL, ws->rows, es);
		if (ws->use_fallback)
			ExplainPropertyBool("Fallback Used", true, es);
	}
}

void
window_scan_register(PtfWindowRunner window_runner, PtfFirstRowsRunner first_rows_runner)
{
	run_window = window_runner;
	run_first_rows_call = first_rows_runner;
	RegisterCustomScanMethods(&window_scan_methods);
}

Path *
window_scan_cheapest(List *paths)
{
	Path	   *cheapest = NULL;
	ListCell   *lc;

	foreach(lc, paths)
	{
		Path	   *p = (Path *) lfirst(lc);

		if (cheapest == NULL || p->total_cost < cheapest->total_cost)
			cheapest = p;
	}
	return cheapest;
}

/* plan, or a plan under it, is a window scan */
static bool
plan_has_window_scan(Plan *plan)
{
	List	   *children = NIL;
	ListCell   *lc;

	if (plan == NULL)
		return false;
	if (IsA(plan, CustomScan) && ((CustomScan *) plan)->methods == &window_scan_methods)
		return true;
	if (plan_has_window_scan(plan->lefttree) || plan_has_window_scan(plan->righttree))
		return true;
	switch (nodeTag(plan))
	{
		case T_Append:
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_BitmapAnd:
			children = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) plan)->bitmapplans;
			break;
		case T_SubqueryScan:
			children = list_make1(((SubqueryScan *) plan)->subplan);
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
	{
		if (plan_has_window_scan((Plan *) lfirst(lc)))
			return true;
	}
	return false;
}

/*
 * A statement whose plan holds a window scan runs without parallel mode.
 * The scan's call reads its input through SPI, which advances the command
 * counter: refused in parallel mode once the statement has written (CREATE
 * TABLE AS, a data-modifying CTE) -- and a Gather anywhere in the plan,
 * the fallback's too, puts the whole statement in parallel mode.  Without
 * it, a Gather runs its plan in the backend alone, as under a cursor; the
 * call itself may still start its own workers (engine/parallel.c).
 */
void
window_scan_plan_done(PlannedStmt *stmt)
{
	bool		found;
	ListCell   *lc;

	if (!stmt->parallelModeNeeded)
		return;
	found = plan_has_window_scan(stmt->planTree);
	foreach(lc, stmt->subplans)
		found = found || plan_has_window_scan((Plan *) lfirst(lc));
	if (found)
		stmt->parallelModeNeeded = false;
}

Path *
window_scan_fallback(const PtfTvf *tvf, List *paths)
{
	Node	   *uid = ptf_tvf_arg(tvf, "uid");
	Node	   *on_time = ptf_tvf_arg(tvf, "on_time");
	Path	   *cheapest = NULL;
	ListCell   *lc;

	if (uid == NULL || !IsA(uid, Const) || !((Const *) uid)->constisnull)
		return NULL;
	if (on_time != NULL && IsA(on_time, Const) && !((Const *) on_time)->constisnull)
	{
		char	   *col = TextDatumGetCString(((Const *) on_time)->constvalue);
		int			i;

		for (i = 0; i < tvf->rowdesc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(tvf->rowdesc, i);

			if (!att->attisdropped && strcmp(NameStr(att->attname), col) == 0 &&
				att->atttypid != TIMESTAMPOID)
				return NULL;
		}
	}
	foreach(lc, paths)
	{
		Path	   *p = (Path *) lfirst(lc);

		if (cheapest == NULL || p->total_cost < cheapest->total_cost)
			cheapest = p;
	}
	return cheapest;
}
