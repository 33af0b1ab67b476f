/*-------------------------------------------------------------------------
 *
 * planner.c
 *	  The planner hooks of the library: window TVFs inlined as scans
 *	  (tvf_inline.c) and the window rules (rules.h) -- Flink's SQL as
 *	  written, planned as our operators (doc/design.md §8).
 *
 * Where the rules work.  Recognizing a TVF + GROUP BY, or a row_number()
 * over a TVF's windows, needs the query PostgreSQL planned: quals pushed
 * down from outer queries, HAVING quals without aggregates moved to
 * WHERE, an outer "rownum <= N" made the window clause's run condition.
 * So the rules add their paths at the upper stage they replace (grouping,
 * window functions) through create_upper_paths_hook, where the stage's
 * input is the TVF's function scan and its target, quals and run
 * condition are final; their custom scan (window_scan.c) then computes
 * the stage's rows, and everything above stays PostgreSQL's.
 *
 * The planner hook runs first, on the query as analyzed: it inlines TVF
 * calls over tables as scans (ptf.inline_window_tvfs), except the calls a
 * rule will take -- asked of the rule on the same query -- which must
 * stay function scans for the rule to find them.  A call a rule then
 * declines after all (a qual pushed from outside that reads too much)
 * runs as the TVF: slower than the scan, never another answer.
 *
 * The prepass also warns of a LIMIT over a call with a uid, which cannot
 * stop it early (warn_limited_uid_calls).
 *
 * ptf.plan_window_sql = off turns the rules off (the query is PostgreSQL's
 * plain evaluation of the TVF's rows).  A pipeline's step (engine/step.h:
 * in a worker, or create_pipeline starting the stream) plans with them
 * whatever the setting: its queries were accepted as planned (a window
 * must come out once, whole), and run only so.  Like enable_* settings,
 * changing it does not invalidate plans already cached.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "optimizer/paths.h"
#include "parser/parse_func.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/base.h"
#include "engine/step.h"
#include "planner/planner.h"
#include "planner/rules.h"
#include "planner/tvf_inline.h"
#include "planner/window_scan.h"

bool		ptf_plan_window_sql = true;

static planner_hook_type prev_planner_hook = NULL;
static create_upper_paths_hook_type prev_upper_paths_hook = NULL;

bool
ptf_window_rules_enabled(void)
{
	/* a pipeline's step, or create_pipeline starting its stream */
	return ptf_plan_window_sql || ptf_step_current() != NULL;
}

bool
ptf_window_rules_take(Query *q, Index rti)
{
	PtfTvf		tvf;

	if (!ptf_window_rules_enabled() || window_rule_tvf_entry(q, &tvf) != rti ||
		!ptf_tvf_args_fixed(&tvf))
		return false;
	return window_agg_rule_query(q, rti, &tvf) || window_rank_rule_query(q, rti, &tvf);
}

/*
 * The uid argument of a call of ours in funcexpr, or NULL: none, or NULL
 * for sure (a constant).
 */
static Node *
uid_argument(Node *funcexpr)
{
	FuncExpr   *fe;
	HeapTuple	tup;
	Form_pg_proc proc;
	Oid		   *types;
	char	  **names;
	char	   *modes;
	int			nargs;
	int			uid_at = -1;
	int			i;
	List	   *args;
	Node	   *arg;

	if (!IsA(funcexpr, FuncExpr) || !((FuncExpr *) funcexpr)->funcretset)
		return NULL;
	fe = (FuncExpr *) funcexpr;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fe->funcid));
	if (!HeapTupleIsValid(tup))
		return NULL;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->prolang == ClanguageId && proc->pronamespace == get_namespace_oid("ptf", true))
	{
		nargs = get_func_arg_info(tup, &types, &names, &modes);
		for (i = 0; names != NULL && i < nargs; i++)
			if (names[i] != NULL && strcmp(names[i], "uid") == 0)
				uid_at = i;
	}
	if (uid_at < 0)
	{
		ReleaseSysCache(tup);
		return NULL;
	}
	args = expand_function_arguments(fe->args, false, fe->funcresulttype, tup);
	ReleaseSysCache(tup);
	if (uid_at >= list_length(args))
		return NULL;
	arg = (Node *) list_nth(args, uid_at);
	if (IsA(arg, Const) && ((Const *) arg)->constisnull)
		return NULL;
	return arg;
}

/*
 * A LIMIT or OFFSET over a call with a uid does not stop the call early:
 * it reads its input to the end, and the uid's state (a stream's
 * position) moves past every row it read, returned or not -- as
 * pg_logical_slot_get_changes under a LIMIT.  Said where it can be seen,
 * when the query is planned; a cursor closed early cannot be seen.
 */
/* LIMIT ALL and OFFSET 0 (an optimization fence) limit nothing */
static bool
limits_nothing(Node *limit, bool offset)
{
	Const	   *c;

	if (limit == NULL)
		return true;
	/* "OFFSET 0" is a cast of an int4 constant until folded */
	limit = eval_const_expressions(NULL, copyObject(limit));
	if (!IsA(limit, Const))
		return false;
	c = (Const *) limit;
	if (c->constisnull)
		return true;
	return offset && c->consttype == INT8OID && DatumGetInt64(c->constvalue) == 0;
}

static void
warn_limited_uid_calls(Query *q)
{
	ListCell   *lc;

	if (limits_nothing(q->limitCount, false) && limits_nothing(q->limitOffset, true))
		return;
	foreach(lc, q->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		ListCell   *fc;

		if (rte->rtekind != RTE_FUNCTION)
			continue;
		foreach(fc, rte->functions)
		{
			RangeTblFunction *rtfunc = lfirst_node(RangeTblFunction, fc);

			if (uid_argument(rtfunc->funcexpr) != NULL)
				ereport(WARNING,
						(errcode(ERRCODE_WARNING),
						 errmsg("a LIMIT or OFFSET does not stop ptf.%s early: its uid's state moves past every row it reads",
								get_func_name(((FuncExpr *) rtfunc->funcexpr)->funcid)),
						 errdetail("The call reads its input to the end; rows not returned are consumed all the same."),
						 errhint("Limit the call's input instead (query => '... LIMIT n'), or read all the call returns.")));
		}
	}
}

typedef struct PrepassContext
{
	bool		depends_on_role;	/* an inlined scan is under row level security */
} PrepassContext;

/* Does a window TVF's call read its change stream? */
typedef enum StreamCall
{
	STREAM_NO,					/* not a TVF, or changes => false */
	STREAM_YES,					/* changes => true */
	STREAM_MAYBE				/* changes => a parameter: as executed */
} StreamCall;

static StreamCall
stream_tvf(RangeTblEntry *rte)
{
	PtfTvf		tvf;
	Node	   *changes;

	if (!ptf_tvf_of_rte(rte, &tvf))
		return STREAM_NO;
	changes = ptf_tvf_arg(&tvf, "changes");
	if (changes == NULL)
		return STREAM_NO;
	if (!IsA(changes, Const))
		return STREAM_MAYBE;
	return !((Const *) changes)->constisnull && DatumGetBool(((Const *) changes)->constvalue) ?
		STREAM_YES : STREAM_NO;
}

static void
refuse_stream_grouping(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("a grouping or ranking of a window table function's change stream must be planned as the window aggregate or Window Top-N"),
			 errdetail("PostgreSQL would group each call's rows apart: a window would come out in parts, once per call, before the watermark passes it."),
			 errhint("Group by window_start, window_end and columns of data, with aggregates of data (no ordered-set aggregates), or rank with row_number() over each window filtered by rownum <= N: EXPLAIN of the query over the table's rows (without changes => true) shows a PtfWindowScan when the rules plan it. Or aggregate with ptf.window_aggregate(..., changes => true).")));
}

/*
 * ptf._refuse_grouped_stream(changes): what a plan grouping a window TVF's
 * rows passes as its changes argument when that is a parameter -- the
 * argument, or, when true, the error planning gives a constant true.
 */
PG_FUNCTION_INFO_V1(ptf_refuse_grouped_stream);

Datum
ptf_refuse_grouped_stream(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (PG_GETARG_BOOL(0))
		refuse_stream_grouping();
	PG_RETURN_BOOL(false);
}

/*
 * A parameter as the changes argument of a call whose rows the plan groups
 * (a generic plan: its value comes at execution) goes through
 * ptf._refuse_grouped_stream.  Without that function (the library is
 * newer than the extension's objects, before ALTER EXTENSION UPDATE) the
 * plan is refused as for true.
 */
static void
guard_changes_argument(PlannedStmt *stmt, FunctionScan *scan, RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc = linitial_node(RangeTblFunction, scan->functions);
	FuncExpr   *fe = castNode(FuncExpr, rtfunc->funcexpr);
	PtfTvf		tvf;
	Oid			argtypes[1] = {BOOLOID};
	Oid			guard;
	int			i;
	ListCell   *arg;
	PlanInvalItem *inval;

	if (!ptf_tvf_of_rte(rte, &tvf))
		return;
	guard = LookupFuncName(list_make2(makeString("ptf"), makeString("_refuse_grouped_stream")),
						   1, argtypes, true);
	/* the plan's arguments are positional, defaults included, as the planner expanded them */
	i = ptf_tvf_arg_index(&tvf, "changes");
	if (!OidIsValid(guard) || i < 0 || i >= list_length(fe->args) ||
		exprType(list_nth(fe->args, i)) != BOOLOID)
		refuse_stream_grouping();
	arg = list_nth_cell(fe->args, i);
	/* a CTE scanned twice: its call is guarded once */
	if (IsA(lfirst(arg), FuncExpr) && ((FuncExpr *) lfirst(arg))->funcid == guard)
		return;
	lfirst(arg) = makeFuncExpr(guard, BOOLOID, list_make1(lfirst(arg)), InvalidOid, InvalidOid,
							   COERCE_EXPLICIT_CALL);
	/* the plan depends on the function, as on any it calls */
	inval = makeNode(PlanInvalItem);
	inval->cacheId = PROCOID;
	inval->hashValue = GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(guard));
	stmt->invalItems = lappend(stmt->invalItems, inval);
}

/*
 * Refuse a plan that groups or ranks a window TVF's change stream itself
 * (an Agg, Group or WindowAgg over its function scan): the window rules
 * did not plan it (percentile_cont, grouping by an expression of data,
 * rank()...), and PostgreSQL would group each call's rows apart -- a
 * window emitted in parts, once per call, before the watermark passed it.
 * Over a stream a grouping by windows is the window aggregate or nothing,
 * as a pipeline's query is (functions/pipelines.c).
 */
static void
refuse_unplanned_stream_grouping(PlannedStmt *stmt, Plan *plan, bool grouped)
{
	ListCell   *lc;

	if (plan == NULL)
		return;
	check_stack_depth();
	/* a plain aggregate (count(*) of a call's rows) groups nothing by windows */
	if ((IsA(plan, Agg) && ((Agg *) plan)->numCols > 0) || IsA(plan, Group) ||
		IsA(plan, WindowAgg))
		grouped = true;
	if (IsA(plan, FunctionScan) && grouped)
	{
		RangeTblEntry rte;

		memset(&rte, 0, sizeof(rte));
		rte.type = T_RangeTblEntry;
		rte.rtekind = RTE_FUNCTION;
		rte.functions = ((FunctionScan *) plan)->functions;
		rte.funcordinality = ((FunctionScan *) plan)->funcordinality;
		switch (stream_tvf(&rte))
		{
			case STREAM_NO:
				break;
			case STREAM_YES:
				refuse_stream_grouping();
				break;
			case STREAM_MAYBE:
				guard_changes_argument(stmt, (FunctionScan *) plan, &rte);
				break;
		}
	}
	refuse_unplanned_stream_grouping(stmt, plan->lefttree, grouped);
	refuse_unplanned_stream_grouping(stmt, plan->righttree, grouped);
	if (IsA(plan, SubqueryScan))
		refuse_unplanned_stream_grouping(stmt, ((SubqueryScan *) plan)->subplan, grouped);
	/* a CTE's rows are grouped where its scan is */
	if (IsA(plan, CteScan) && grouped)
		refuse_unplanned_stream_grouping(stmt, (Plan *) list_nth(stmt->subplans,
																 ((CteScan *) plan)->ctePlanId - 1),
										 grouped);
	if (IsA(plan, Append))
		foreach(lc, ((Append *) plan)->appendplans)
			refuse_unplanned_stream_grouping(stmt, (Plan *) lfirst(lc), grouped);
	if (IsA(plan, MergeAppend))
		foreach(lc, ((MergeAppend *) plan)->mergeplans)
			refuse_unplanned_stream_grouping(stmt, (Plan *) lfirst(lc), grouped);
}

static bool
prepass_walker(Node *node, PrepassContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *q = (Query *) node;
		ListCell   *lc;

		warn_limited_uid_calls(q);
		foreach(lc, q->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_FUNCTION && ptf_inline_window_tvfs &&
				!ptf_window_rules_take(q, foreach_current_index(lc) + 1))
				ptf_tvf_inline_rte(rte, &cxt->depends_on_role);

		}
		return query_tree_walker(q, prepass_walker, (void *) cxt, 0);
	}
	return expression_tree_walker(node, prepass_walker, (void *) cxt);
}

static PlannedStmt *
ptf_planner(Query *parse, const char *query_string, int cursorOptions,
			ParamListInfo boundParams)
{
	PrepassContext cxt;
	PlannedStmt *stmt;

	cxt.depends_on_role = false;
	if (parse->commandType != CMD_UTILITY)
		(void) prepass_walker((Node *) parse, &cxt);
	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);

	/*
	 * The policies of the role planning it are in the plan: a cached plan
	 * must not serve another role (the rewriter marks its own queries so,
	 * the inlined subquery came after it).
	 */
	if (cxt.depends_on_role)
		stmt->dependsOnRole = true;
	/*
	 * Every plan: a stream's call may come from a CTE or an inlined SQL
	 * function, which the query as analyzed does not show.
	 */
	if (ptf_window_rules_enabled())
	{
		ListCell   *lc;

		refuse_unplanned_stream_grouping(stmt, stmt->planTree, false);
		foreach(lc, stmt->subplans)
			refuse_unplanned_stream_grouping(stmt, (Plan *) lfirst(lc), false);
	}
	window_scan_plan_done(stmt);
	return stmt;
}

static void
ptf_upper_paths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
				RelOptInfo *output_rel, void *extra)
{
	if (prev_upper_paths_hook)
		prev_upper_paths_hook(root, stage, input_rel, output_rel, extra);
	if (!ptf_window_rules_enabled())
		return;
	if (stage == UPPERREL_GROUP_AGG)
		window_agg_rule_paths(root, input_rel, output_rel, (GroupPathExtraData *) extra);
	else if (stage == UPPERREL_WINDOW)
	{
		window_rank_rule_paths(root, input_rel, output_rel);
		first_rows_rule_paths(root, input_rel, output_rel);
	}
}

void
ptf_planner_init(PtfWindowRunner window_runner, PtfFirstRowsRunner first_rows_runner)
{
	ptf_tvf_inline_define_gucs();
	DefineCustomBoolVariable("ptf.plan_window_sql",
							 "Plans a window TVF + GROUP BY as the sliced window aggregate, and row_number() over its windows as Window Top-N.",
							 "Off: PostgreSQL groups and ranks the TVF's rows itself.",
							 &ptf_plan_window_sql,
							 true, PGC_USERSET, 0,
							 NULL, NULL, NULL);
	window_scan_register(window_runner, first_rows_runner);
	prev_planner_hook = planner_hook;
	planner_hook = ptf_planner;
	prev_upper_paths_hook = create_upper_paths_hook;
	create_upper_paths_hook = ptf_upper_paths;
}
