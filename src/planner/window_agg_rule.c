/*-------------------------------------------------------------------------
 *
 * window_agg_rule.c
 *	  A window TVF + GROUP BY planned as the sliced window aggregate
 *	  (Flink's StreamPhysicalWindowAggregateRule and
 *	  PullUpWindowTableFunctionIntoWindowAggregateRule; doc/design.md §8).
 *
 * The shape:
 *
 *	  SELECT ... FROM ptf.tumble|hop|cumulate(NULL::t, ...)
 *	   [WHERE <quals on data> AND <quals on the window columns>]
 *	   GROUP BY <window columns>, (data).k1, ... [HAVING ...]
 *
 * where the grouping columns name one window each (window_end or
 * window_time, or window_start for TUMBLE and HOP), every other grouping
 * column is a column of the input, (data).k, of a type whose hash
 * equality is its grouping equality, and every aggregate is a plain one
 * over the data column alone (DISTINCT, ORDER BY and FILTER allowed),
 * with no volatile function anywhere it runs per row.  PostgreSQL's answer
 * for it is, per window and key that has rows, each aggregate over those
 * rows: exactly the window aggregate's, whose rows reach every window
 * they fall in through its slices instead of one copy per window.  The
 * select list, HAVING, ORDER BY, LIMIT and whatever the query does above
 * stay PostgreSQL's, over the scan's rows (window_scan.c).
 *
 * A WHERE qual over data alone is evaluated once per input row before the
 * operator (the TVF's copies of a row share its data); one over the
 * window columns alone is evaluated on the result rows, whose windows are
 * those of their groups.  A qual over both, or over anything else, and
 * grouping sets, a grouping expression that is not a column, an ordered-
 * set aggregate, a subquery, or an outer reference leave the query to
 * PostgreSQL.  Floating-point sums may differ in their last digits from
 * PostgreSQL's by the order of additions, as parallel aggregation's do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "planner/rules.h"
#include "planner/window_scan.h"

/* What the rule found in a query. */
typedef struct AggShape
{
	int			window_cols;	/* 1 << TVF_COL_* of the grouping columns */
	List	   *key_exprs;		/* (data).k of each key column, in order */
	List	   *key_attnos;		/* IntList */
	List	   *aggrefs;		/* the query's Aggrefs, each once */
	List	   *aggs;			/* TargetEntry of each, over the input row */
	List	   *filter;
	List	   *post;
} AggShape;

/* ---- the shape, shared by both halves ---- */

Index
window_rule_tvf_entry(Query *q, PtfTvf *tvf)
{
	RangeTblRef *rtr;

	if (q->jointree == NULL || list_length(q->jointree->fromlist) != 1 ||
		!IsA(linitial(q->jointree->fromlist), RangeTblRef))
		return 0;
	rtr = linitial_node(RangeTblRef, q->jointree->fromlist);
	if (!ptf_tvf_of_rte(rt_fetch(rtr->rtindex, q->rtable), tvf))
		return 0;
	return rtr->rtindex;
}

bool
window_rule_split_quals(List *quals, Index rti, const PtfTvf *tvf, List **filter, List **post)
{
	ListCell   *lc;

	foreach(lc, quals)
	{
		Node	   *qual = (Node *) lfirst(lc);
		int			reads = ptf_tvf_expr_reads(qual, rti);

		if ((reads & TVF_READS_OTHER) ||
			(reads & (TVF_READS_DATA | TVF_READS_WINDOW)) == (TVF_READS_DATA | TVF_READS_WINDOW))
			return false;
		if (reads & TVF_READS_WINDOW)
			*post = lappend(*post, qual);
		else
		{
			Node	   *f = ptf_tvf_expr_to_input(qual, rti, tvf);

			if (f == NULL)
				return false;
			*filter = lappend(*filter, f);
		}
	}
	return true;
}

/* GROUP BY: window columns naming one window, and columns of the input. */
static bool
shape_groups(Query *q, Index rti, const PtfTvf *tvf, AggShape *s)
{
	if (q->groupClause == NIL || q->groupingSets != NIL)
		return false;
	return ptf_tvf_group_columns(q, q->groupClause, rti, tvf, &s->window_cols,
								 &s->key_attnos, &s->key_exprs) &&
		ptf_tvf_window_determined(tvf, s->window_cols);
}

static bool
collect_aggrefs_walker(Node *node, List **aggrefs)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		if (!list_member(*aggrefs, node))
			*aggrefs = lappend(*aggrefs, node);
		return false;
	}
	return expression_tree_walker(node, collect_aggrefs_walker, (void *) aggrefs);
}

/* Every aggregate a plain one over the data column alone. */
static bool
shape_aggrefs(List *exprs, Index rti, const PtfTvf *tvf, AggShape *s)
{
	ListCell   *lc;

	(void) collect_aggrefs_walker((Node *) exprs, &s->aggrefs);
	foreach(lc, s->aggrefs)
	{
		Aggref	   *a = lfirst_node(Aggref, lc);
		Node	   *in;

		if (a->aggkind != AGGKIND_NORMAL || a->agglevelsup != 0 || a->aggsplit != AGGSPLIT_SIMPLE)
			return false;
		in = ptf_tvf_expr_to_input((Node *) a, rti, tvf);
		if (in == NULL)
			return false;
		s->aggs = lappend(s->aggs, makeTargetEntry((Expr *) in, list_length(s->aggs) + 1,
												   psprintf("agg%d", list_length(s->aggs) + 1),
												   false));
	}
	return true;
}

/* HAVING's quals without aggregates (PostgreSQL moves them to WHERE), and the others. */
static void
split_having(List *having, List **where, List **post)
{
	ListCell   *lc;

	foreach(lc, having)
	{
		Node	   *qual = (Node *) lfirst(lc);
		List	   *aggrefs = NIL;

		(void) collect_aggrefs_walker(qual, &aggrefs);
		if (aggrefs == NIL && !contain_volatile_functions(qual) && !contain_subplans(qual))
			*where = lappend(*where, qual);
		else
			*post = lappend(*post, qual);
	}
}

/* ---- before planning ---- */

bool
window_agg_rule_query(Query *q, Index rti, const PtfTvf *tvf)
{
	AggShape	s;
	List	   *where;
	List	   *having = NIL;
	List	   *post = NIL;

	memset(&s, 0, sizeof(s));
	if (!shape_groups(q, rti, tvf, &s))
		return false;
	where = make_ands_implicit((Expr *) q->jointree->quals);
	split_having(make_ands_implicit((Expr *) q->havingQual), &where, &having);
	if (contain_subplans((Node *) having))
		return false;
	if (!shape_aggrefs(list_make2(q->targetList, having), rti, tvf, &s))
		return false;
	return window_rule_split_quals(where, rti, tvf, &s.filter, &post);
}

/* ---- at the grouping stage ---- */

static TargetEntry *
scan_column(List **tlist, Expr *expr, const char *name, WindowScanColumn what, int index,
			List **out_what, List **out_index)
{
	TargetEntry *tle = makeTargetEntry(expr, list_length(*tlist) + 1, pstrdup(name), false);

	*tlist = lappend(*tlist, tle);
	*out_what = lappend_int(*out_what, what);
	*out_index = lappend_int(*out_index, index);
	return tle;
}

void
window_agg_rule_paths(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *grouped_rel,
					  GroupPathExtraData *extra)
{
	Query	   *q = root->parse;
	Index		rti;
	PtfTvf		tvf;
	AggShape	s;
	List	   *quals = NIL;
	List	   *having = extra->havingQual ? (List *) extra->havingQual : NIL;
	ListCell   *lc;
	WindowScanPlan plan;
	List	   *tlist = NIL;
	double		rows = 100;
	Path	   *path;
	int			i;

	if (input_rel->reloptkind != RELOPT_BASEREL || input_rel->rtekind != RTE_FUNCTION ||
		IS_DUMMY_REL(input_rel) || !bms_is_empty(input_rel->lateral_relids) ||
		input_rel->joininfo != NIL)
		return;
	rti = input_rel->relid;
	if (!ptf_tvf_of_rte(root->simple_rte_array[rti], &tvf) || !ptf_tvf_args_fixed(&tvf))
		return;

	memset(&s, 0, sizeof(s));
	if (!shape_groups(q, rti, &tvf, &s))
		return;
	if (contain_subplans((Node *) having))
		return;
	if (!shape_aggrefs(list_make2(extra->targetList, having), rti, &tvf, &s))
		return;
	foreach(lc, input_rel->baserestrictinfo)
		quals = lappend(quals, lfirst_node(RestrictInfo, lc)->clause);
	if (!window_rule_split_quals(quals, rti, &tvf, &s.filter, &s.post))
		return;

	/* the scan's rows: the window, the keys, the aggregates */
	memset(&plan, 0, sizeof(plan));
	plan.kind = PTF_PLANNED_AGGREGATE;
	plan.window = tvf.kind;
	plan.call = tvf.fe;
	plan.input_name = get_rel_name(tvf.relid) ? get_rel_name(tvf.relid) : "?";
	plan.filter = s.filter;
	plan.aggs = s.aggs;
	plan.key_attnos = s.key_attnos;
	scan_column(&tlist, (Expr *) makeVar(rti, TVF_COL_START, TIMESTAMPTZOID, -1, InvalidOid, 0),
				"window_start", WSCOL_START, 0, &plan.out_what, &plan.out_index);
	scan_column(&tlist, (Expr *) makeVar(rti, TVF_COL_END, TIMESTAMPTZOID, -1, InvalidOid, 0),
				"window_end", WSCOL_END, 0, &plan.out_what, &plan.out_index);
	scan_column(&tlist, (Expr *) makeVar(rti, TVF_COL_TIME, TIMESTAMPTZOID, -1, InvalidOid, 0),
				"window_time", WSCOL_TIME, 0, &plan.out_what, &plan.out_index);
	i = 0;
	foreach(lc, s.key_exprs)
	{
		scan_column(&tlist, (Expr *) lfirst(lc),
					get_attname(tvf.relid, list_nth_int(s.key_attnos, i), false),
					WSCOL_KEY, i, &plan.out_what, &plan.out_index);
		i++;
	}
	i = 0;
	foreach(lc, s.aggrefs)
	{
		scan_column(&tlist, (Expr *) copyObject(lfirst(lc)), psprintf("agg%d", i + 1),
					WSCOL_AGG, i, &plan.out_what, &plan.out_index);
		i++;
	}
	plan.describe = psprintf("group by (%s), aggregates (%s)%s%s",
							 window_scan_deparse(&tvf, ptf_tvf_input_columns(&tvf, s.key_attnos), ", "),
							 window_scan_deparse(&tvf, s.aggs, ", "),
							 s.filter ? ", where " : "",
							 s.filter ? window_scan_deparse(&tvf, s.filter, " AND ") : "");

	/* PostgreSQL's estimate of the groups, and its cheapest way's cost */
	if (grouped_rel->pathlist != NIL)
		rows = ((Path *) linitial(grouped_rel->pathlist))->rows;
	path = window_scan_path(root, grouped_rel, grouped_rel->reltarget, rti, &plan, tlist,
							list_concat(s.post, having), rows,
							input_rel->cheapest_total_path ?
							input_rel->cheapest_total_path->total_cost : 1000,
							window_scan_fallback(&tvf, grouped_rel->pathlist));

	/* the rule decides: the grouping is ours */
	grouped_rel->pathlist = NIL;
	grouped_rel->partial_pathlist = NIL;
	add_path(grouped_rel, path);
}
