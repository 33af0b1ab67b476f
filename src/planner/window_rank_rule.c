/*-------------------------------------------------------------------------
 *
 * window_rank_rule.c
 *	  row_number() over a window TVF's windows, filtered to its first N,
 *	  planned as Window Top-N (Flink's window rank and window
 *	  deduplication; doc/design.md §8).
 *
 * The shape (Flink's, over a TVF's rows):
 *
 *	  SELECT ... FROM (
 *		SELECT ..., row_number() OVER (PARTITION BY window_start, window_end
 *									   [, (data).k ...]
 *									   ORDER BY (data).c [DESC] ...) AS rownum
 *		  FROM ptf.tumble|hop|cumulate(NULL::t, ...) [WHERE ...]) s
 *	   WHERE rownum <= N			-- or rownum < N, rownum = 1
 *
 * PostgreSQL 15 turns the outer filter into the window clause's run
 * condition (allpaths.c: find_window_run_conditions): the WindowAgg then
 * returns, per partition, the rows whose row number satisfies it -- its
 * first N.  Here, at the window stage of the subquery, a run condition
 * "row_number() <= N" (or "< N") over a partition that names one window
 * each (as the grouping rule's: window_end or window_time, or
 * window_start for TUMBLE and HOP) and columns of the input, ordered by
 * columns of the input, is the Window Top-N operator's answer: per
 * window and key, the first N rows in that order, with their numbers.
 * Rows equal in the order may come in another order than PostgreSQL's
 * sort would give them (PostgreSQL promises none): the operator keeps
 * arrival order, as Flink.  Window deduplication is N = 1 ordered by the
 * time column, ascending (the first row) or descending (the last).
 *
 * Top-N of a TVF + GROUP BY's rows needs nothing of its own: the grouping
 * rule plans the aggregate, and PostgreSQL's WindowAgg ranks its rows --
 * each window's rows come out of one call whole, even over a stream, so a
 * window's ranking is complete when it is ranked.
 *
 * Anything else -- another window function, a frame clause, ordering by
 * an expression, no run condition, an outer reference -- is left to
 * PostgreSQL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/tlist.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "planner/rules.h"
#include "planner/window_scan.h"

static bool collect_wfuncs_walker(Node *node, List **wfuncs);

typedef struct RankShape
{
	WindowClause *wc;
	WindowFunc *wfunc;			/* the one row_number() */
	int			window_cols;
	List	   *key_attnos;
	List	   *sort_attnos;
	List	   *sort_ops;
	List	   *sort_colls;
	List	   *sort_nulls_first;
	List	   *filter;
	List	   *post;
} RankShape;

/*
 * The one row_number() of wc in q's select list (written any number of
 * times), or NULL when it has another window function or none.
 */
WindowFunc *
window_rule_row_number(Query *q, WindowClause *wc)
{
	List	   *wfuncs = NIL;
	ListCell   *lc;

	(void) collect_wfuncs_walker((Node *) q->targetList, &wfuncs);
	foreach(lc, wfuncs)
	{
		WindowFunc *wf = lfirst_node(WindowFunc, lc);

		if (wf->winfnoid != F_ROW_NUMBER || wf->args != NIL || wf->aggfilter != NULL ||
			wf->winref != wc->winref || !equal(wf, linitial(wfuncs)))
			return NULL;
	}
	return wfuncs != NIL ? linitial_node(WindowFunc, wfuncs) : NULL;
}

static bool
collect_wfuncs_walker(Node *node, List **wfuncs)
{
	if (node == NULL)
		return false;
	if (IsA(node, WindowFunc))
	{
		*wfuncs = lappend(*wfuncs, node);
		return false;
	}
	return expression_tree_walker(node, collect_wfuncs_walker, (void *) wfuncs);
}

static bool
shape_rank(Query *q, Index rti, const PtfTvf *tvf, RankShape *s)
{
	ListCell   *lc;

	if (q->groupClause != NIL || q->groupingSets != NIL || q->hasAggs || !q->hasWindowFuncs ||
		list_length(q->windowClause) != 1 || q->havingQual != NULL)
		return false;
	s->wc = linitial_node(WindowClause, q->windowClause);
	if (s->wc->frameOptions != FRAMEOPTION_DEFAULTS)
		return false;

	/* one row_number(), however often written */
	if ((s->wfunc = window_rule_row_number(q, s->wc)) == NULL)
		return false;

	if (!ptf_tvf_group_columns(q, s->wc->partitionClause, rti, tvf, &s->window_cols,
							   &s->key_attnos, NULL) ||
		!ptf_tvf_window_determined(tvf, s->window_cols))
		return false;

	foreach(lc, s->wc->orderClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		Node	   *expr = get_sortgroupclause_expr(sgc, q->targetList);
		AttrNumber	attno;

		if (ptf_tvf_window_column(expr, rti) != 0)
			continue;			/* one value per partition: orders nothing */
		if ((attno = ptf_tvf_data_column(expr, rti, tvf)) == 0 || !OidIsValid(sgc->sortop))
			return false;
		s->sort_attnos = lappend_int(s->sort_attnos, attno);
		s->sort_ops = lappend_oid(s->sort_ops, sgc->sortop);
		s->sort_colls = lappend_oid(s->sort_colls, exprCollation(expr));
		s->sort_nulls_first = lappend_int(s->sort_nulls_first, sgc->nulls_first);
	}
	return true;
}

/* ---- before planning ---- */

bool
window_rank_rule_query(Query *q, Index rti, const PtfTvf *tvf)
{
	RankShape	s;

	memset(&s, 0, sizeof(s));
	if (!shape_rank(q, rti, tvf, &s))
		return false;
	return window_rule_split_quals(make_ands_implicit((Expr *) q->jointree->quals), rti, tvf,
								   &s.filter, &s.post);
}

/* ---- at the window stage ---- */

/* An integer constant's value; false for anything else. */
static bool
int_const(Node *n, int64 *value)
{
	Const	   *c;

	if (!IsA(n, Const))
		return false;
	c = (Const *) n;
	if (c->constisnull)
		return false;
	switch (c->consttype)
	{
		case INT8OID:
			*value = DatumGetInt64(c->constvalue);
			return true;
		case INT4OID:
			*value = DatumGetInt32(c->constvalue);
			return true;
		case INT2OID:
			*value = DatumGetInt16(c->constvalue);
			return true;
		default:
			return false;
	}
}

/*
 * N of the run conditions "row_number() <= N", "< N" (or the same turned
 * around): the rows the WindowAgg returns per partition; false when one is
 * of another form.
 */
bool
window_rule_run_limit(List *conds, WindowFunc *wfunc, int64 *limit)
{
	ListCell   *lc;

	*limit = PG_INT64_MAX;
	foreach(lc, conds)
	{
		OpExpr	   *op = (OpExpr *) lfirst(lc);
		List	   *opinfos;
		bool		wf_left;
		int64		value;
		int			strategy = 0;
		ListCell   *lc2;

		if (!IsA(op, OpExpr) || list_length(op->args) != 2)
			return false;
		if (equal(linitial(op->args), wfunc) && int_const(lsecond(op->args), &value))
			wf_left = true;
		else if (equal(lsecond(op->args), wfunc) && int_const(linitial(op->args), &value))
			wf_left = false;
		else
			return false;
		opinfos = get_op_btree_interpretation(op->opno);
		foreach(lc2, opinfos)
		{
			OpBtreeInterpretation *oi = (OpBtreeInterpretation *) lfirst(lc2);

			if (strategy == 0)
				strategy = oi->strategy;
			else if (strategy != oi->strategy)
				return false;
		}
		if (!wf_left)
			strategy = strategy == BTGreaterStrategyNumber ? BTLessStrategyNumber :
				strategy == BTGreaterEqualStrategyNumber ? BTLessEqualStrategyNumber : 0;
		if (strategy == BTLessStrategyNumber)
			value = value == PG_INT64_MIN ? value : value - 1;
		else if (strategy != BTLessEqualStrategyNumber)
			return false;
		*limit = Min(*limit, value);
	}
	return conds != NIL;
}

bool
window_rule_reads_columns(Node *expr, Index rti, AttrNumber last)
{
	ListCell   *lc;

	/* anything standing for a Var (a placeholder) is not one of them */
	foreach(lc, pull_var_clause(expr, PVC_INCLUDE_AGGREGATES | PVC_INCLUDE_WINDOWFUNCS |
								PVC_INCLUDE_PLACEHOLDERS))
	{
		Var		   *v = (Var *) lfirst(lc);

		if (!IsA(v, Var) || (Index) v->varno != rti || v->varlevelsup != 0 ||
			v->varattno < 1 || v->varattno > last)
			return false;
	}
	return true;
}

void
window_rank_rule_paths(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *window_rel)
{
	Query	   *q = root->parse;
	Index		rti;
	PtfTvf		tvf;
	RankShape	s;
	List	   *quals = NIL;
	ListCell   *lc;
	WindowScanPlan plan;
	List	   *tlist = NIL;
	int64		limit;
	Path	   *path;
	double		rows;
	int			i;

	if (input_rel->reloptkind != RELOPT_BASEREL || input_rel->rtekind != RTE_FUNCTION ||
		IS_DUMMY_REL(input_rel) || !bms_is_empty(input_rel->lateral_relids) ||
		input_rel->joininfo != NIL)
		return;
	rti = input_rel->relid;
	if (window_rel->pathlist == NIL || !ptf_tvf_of_rte(root->simple_rte_array[rti], &tvf) ||
		!ptf_tvf_args_fixed(&tvf) ||
		!window_rule_reads_columns((Node *) input_rel->reltarget->exprs, rti, TVF_COL_TIME))
		return;
	memset(&s, 0, sizeof(s));
	if (!shape_rank(q, rti, &tvf, &s))
		return;
	if (!window_rule_run_limit(s.wc->runCondition, s.wfunc, &limit) || limit < 1 ||
		limit > PG_INT32_MAX)
		return;
	foreach(lc, input_rel->baserestrictinfo)
		quals = lappend(quals, lfirst_node(RestrictInfo, lc)->clause);
	if (!window_rule_split_quals(quals, rti, &tvf, &s.filter, &s.post))
		return;

	memset(&plan, 0, sizeof(plan));
	plan.kind = PTF_PLANNED_TOP_N;
	plan.window = tvf.kind;
	plan.call = tvf.fe;
	plan.input_name = get_rel_name(tvf.relid) ? get_rel_name(tvf.relid) : "?";
	plan.filter = s.filter;
	plan.key_attnos = s.key_attnos;
	plan.limit = (int) limit;
	plan.sort_attnos = s.sort_attnos;
	plan.sort_ops = s.sort_ops;
	plan.sort_colls = s.sort_colls;
	plan.sort_nulls_first = s.sort_nulls_first;
	for (i = 0; i < 5; i++)
	{
		static const WindowScanColumn what[] = {WSCOL_DATA, WSCOL_START, WSCOL_END, WSCOL_TIME,
		WSCOL_ROWNUM};
		static const char *const names[] = {"data", "window_start", "window_end",
		"window_time", "rownum"};
		Expr	   *e = i == 0 ? (Expr *) makeVar(rti, TVF_COL_DATA, tvf.rowtype, -1, InvalidOid, 0) :
		i < 4 ? (Expr *) makeVar(rti, TVF_COL_START + i - 1, TIMESTAMPTZOID, -1, InvalidOid, 0) :
		(Expr *) copyObject(s.wfunc);

		tlist = lappend(tlist, makeTargetEntry(e, i + 1, pstrdup(names[i]), false));
		plan.out_what = lappend_int(plan.out_what, what[i]);
		plan.out_index = lappend_int(plan.out_index, 0);
	}
	plan.describe = psprintf("top %d by (%s) per (%s)%s%s", plan.limit,
							 window_scan_order_text(tvf.relid, s.sort_attnos, s.sort_ops,
													s.sort_colls, s.sort_nulls_first),
							 window_scan_deparse(&tvf, ptf_tvf_input_columns(&tvf, s.key_attnos), ", "),
							 s.filter ? ", where " : "",
							 s.filter ? window_scan_deparse(&tvf, s.filter, " AND ") : "");

	/* the window stage's target is its paths' (window_rel has none of its own) */
	rows = ((Path *) linitial(window_rel->pathlist))->rows;
	path = window_scan_path(root, window_rel, ((Path *) linitial(window_rel->pathlist))->pathtarget,
							rti, &plan, tlist, s.post, rows,
							input_rel->cheapest_total_path ?
							input_rel->cheapest_total_path->total_cost : 1000,
							window_scan_fallback(&tvf, window_rel->pathlist));
	window_rel->pathlist = NIL;
	window_rel->partial_pathlist = NIL;
	add_path(window_rel, path);
}
