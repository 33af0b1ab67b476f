/*-------------------------------------------------------------------------
 *
 * first_rows_rule.c
 *	  row_number() OVER (PARTITION BY k ORDER BY ...) filtered to its first
 *	  rows, over a table, planned as keep-first by event time or as Top-N
 *	  per key (Flink's deduplication rule; doc/design.md §8, doc/flink-semantics.md §5).
 *
 * The shape:
 *
 *	  SELECT ... FROM (
 *		SELECT ..., row_number() OVER (PARTITION BY t.k ... ORDER BY t.ts) AS rn
 *		  FROM t [WHERE ...]) s
 *	   WHERE rn = 1				-- or rn <= 1, rn < 2; or <= N
 *
 * PostgreSQL 15 makes the outer filter the window clause's run condition
 * (as for Window Top-N, window_rank_rule.c): the WindowAgg returns, per
 * partition, its first rows.  Ordered by one time column ascending
 * (timestamp or timestamptz, a column that cannot be NULL), N = 1, that is
 * keep-first by event time: the earliest row per key, ties to either row
 * as PostgreSQL's sort may pick either -- the DEDUPLICATE_KEEP_FIRST
 * seed's pattern, run by its operator.  Any other order (a bigint too:
 * an id's order as often as a time's), DESC (the last row per key), or
 * N > 1, is the Top-N operator with one window per key.  Only the
 * table's columns are read above the stage or in its WHERE (not its whole
 * row, nor a system column: the scan's rows carry neither).  The input is
 * bounded: the table read through SPI when the plan runs, with no
 * watermark (one declared on the table is not the query's).
 *
 * Only in a database that has the extension (the library may be loaded
 * into every backend of the server).  The table is read whole ("SELECT *
 * FROM t"): a role allowed to read only some of its columns runs
 * PostgreSQL's own plan of the stage, kept as the scan's fallback.  Over a
 * change stream the pattern has no table to read:
 * ptf.deduplicate_keep_first with a uid is its stream form (by event time
 * ascending only, as Flink's: a DESC keep-last would retract).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "utils/rel.h"

#include "planner/rules.h"
#include "planner/window_scan.h"

/* expr is a column of the table of entry rti: its attribute number, else 0 */
static AttrNumber
table_column(Node *expr, Index rti)
{
	Var		   *v;

	if (expr == NULL || !IsA(expr, Var))
		return 0;
	v = (Var *) expr;
	if ((Index) v->varno != rti || v->varlevelsup != 0 || v->varattno <= 0)
		return 0;
	return v->varattno;
}

/* the table's Vars as the input row's (varno 1); its columns only, checked before */
static Node *
to_row_mutator(Node *node, Index *rti)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) copyObject(node);

		Assert((Index) v->varno == *rti && v->varlevelsup == 0 && v->varattno > 0);
		v->varno = 1;
		v->varnosyn = 0;
		v->varattnosyn = 0;
		return (Node *) v;
	}
	return expression_tree_mutator(node, to_row_mutator, (void *) rti);
}

/* a qual the filter can run per input row: no executor parameters, subqueries, volatility */
static bool
qual_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind != PARAM_EXTERN)
		return true;
	if (IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, AlternativeSubPlan) ||
		IsA(node, PlaceHolderVar) || IsA(node, Aggref) || IsA(node, WindowFunc) ||
		IsA(node, CurrentOfExpr) || IsA(node, NextValueExpr))
		return true;
	return expression_tree_walker(node, qual_walker, context);
}

static bool
qual_usable(Node *qual)
{
	return !contain_volatile_functions(qual) && !qual_walker(qual, NULL);
}

void
first_rows_rule_paths(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *window_rel)
{
	Query	   *q = root->parse;
	Index		rti;
	RangeTblEntry *rte;
	WindowClause *wc;
	WindowFunc *wfunc;
	WindowScanPlan plan;
	List	   *tlist = NIL;
	List	   *filter = NIL;
	ListCell   *lc;
	int64		limit;
	TupleDesc	rowdesc;
	Oid			rowtype;
	Path	   *path;
	int			i;

	if (input_rel->reloptkind != RELOPT_BASEREL || input_rel->rtekind != RTE_RELATION ||
		IS_DUMMY_REL(input_rel) || !bms_is_empty(input_rel->lateral_relids) ||
		input_rel->joininfo != NIL || window_rel->pathlist == NIL)
		return;
	rti = input_rel->relid;
	rte = root->simple_rte_array[rti];
	if (rte->tablesample != NULL || q->rowMarks != NIL ||
		(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_PARTITIONED_TABLE &&
		 rte->relkind != RELKIND_MATVIEW) ||
		(!rte->inh && has_subclass(rte->relid)))
		return;
	if (q->groupClause != NIL || q->groupingSets != NIL || q->hasAggs ||
		list_length(q->windowClause) != 1 || q->havingQual != NULL)
		return;
	wc = linitial_node(WindowClause, q->windowClause);
	if (wc->frameOptions != FRAMEOPTION_DEFAULTS)
		return;
	wfunc = window_rule_row_number(q, wc);
	if (wfunc == NULL || !window_rule_run_limit(wc->runCondition, wfunc, &limit) ||
		limit < 1 || limit > PG_INT32_MAX)
		return;

	/* in a database that has the extension: a query elsewhere stays PostgreSQL's */
	rowtype = get_rel_type_id(rte->relid);
	if (!OidIsValid(rowtype) || !OidIsValid(get_extension_oid("deduplicate_keep_first", true)))
		return;
	rowdesc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	if (!window_rule_reads_columns((Node *) input_rel->reltarget->exprs, rti, rowdesc->natts))
		return;

	memset(&plan, 0, sizeof(plan));
	plan.kind = PTF_PLANNED_FIRST_ROWS;
	plan.rowtype = rowtype;
	plan.input_name = get_rel_name(rte->relid);
	plan.limit = (int) limit;
	foreach(lc, wc->partitionClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		Node	   *expr = get_sortgroupclause_expr(sgc, q->targetList);
		AttrNumber	attno = table_column(expr, rti);

		if (attno == 0 || !ptf_tvf_key_equality_ok(exprType(expr), sgc->eqop) ||
			exprCollation(expr) != TupleDescAttr(rowdesc, attno - 1)->attcollation)
			return;
		if (!list_member_int(plan.key_attnos, attno))
			plan.key_attnos = lappend_int(plan.key_attnos, attno);
	}
	foreach(lc, wc->orderClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		Node	   *expr = get_sortgroupclause_expr(sgc, q->targetList);
		AttrNumber	attno = table_column(expr, rti);

		if (attno == 0 || !OidIsValid(sgc->sortop))
			return;
		plan.sort_attnos = lappend_int(plan.sort_attnos, attno);
		plan.sort_ops = lappend_oid(plan.sort_ops, sgc->sortop);
		plan.sort_colls = lappend_oid(plan.sort_colls, exprCollation(expr));
		plan.sort_nulls_first = lappend_int(plan.sort_nulls_first, sgc->nulls_first);
	}
	foreach(lc, input_rel->baserestrictinfo)
	{
		Node	   *qual = (Node *) lfirst_node(RestrictInfo, lc)->clause;

		if (!qual_usable(qual) || !window_rule_reads_columns(qual, rti, rowdesc->natts))
			return;
		filter = lappend(filter, to_row_mutator(qual, &rti));
	}
	plan.filter = filter;

	/* keep-first: ascending by one time column that is never NULL, the first row */
	if (limit == 1 && list_length(plan.sort_attnos) == 1)
	{
		Form_pg_attribute att = TupleDescAttr(rowdesc, linitial_int(plan.sort_attnos) - 1);
		Oid			opfamily;
		Oid			opcintype;
		int16		strategy;

		/*
		 * Not bigint: its order is an id's as often as a time's, and
		 * keep-first reads it as milliseconds, in a narrower range.
		 */
		if ((att->atttypid == TIMESTAMPOID || att->atttypid == TIMESTAMPTZOID) &&
			att->attnotnull &&
			get_ordering_op_properties(linitial_oid(plan.sort_ops), &opfamily, &opcintype,
									   &strategy) &&
			strategy == BTLessStrategyNumber && opcintype == att->atttypid &&
			linitial_int(plan.sort_nulls_first) == 0)
		{
			plan.keep_first = true;
			plan.time_attno = att->attnum;
		}
	}

	/* the scan's rows: the table's columns, and the row number */
	for (i = 0; i < rowdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(rowdesc, i);

		if (att->attisdropped)
			continue;
		tlist = lappend(tlist, makeTargetEntry((Expr *) makeVar(rti, att->attnum, att->atttypid,
																 att->atttypmod, att->attcollation, 0),
												list_length(tlist) + 1,
												pstrdup(NameStr(att->attname)), false));
		plan.out_what = lappend_int(plan.out_what, WSCOL_COLUMN);
		plan.out_index = lappend_int(plan.out_index, att->attnum);
	}
	tlist = lappend(tlist, makeTargetEntry((Expr *) copyObject(wfunc), list_length(tlist) + 1,
										   pstrdup("row_number"), false));
	plan.out_what = lappend_int(plan.out_what, WSCOL_ROWNUM);
	plan.out_index = lappend_int(plan.out_index, 0);

	plan.describe = psprintf("first %d by (%s) per (%s)%s%s", plan.limit,
							 plan.sort_attnos ?
							 window_scan_order_text(rte->relid, plan.sort_attnos, plan.sort_ops,
													plan.sort_colls, plan.sort_nulls_first) : "",
							 nodeToString(plan.key_attnos),
							 filter ? ", where " : "",
							 filter ? nodeToString(filter) : "");

	path = window_scan_path(root, window_rel, ((Path *) linitial(window_rel->pathlist))->pathtarget,
							rti, &plan, tlist, NIL,
							((Path *) linitial(window_rel->pathlist))->rows,
							input_rel->cheapest_total_path ?
							input_rel->cheapest_total_path->total_cost : 1000,
							window_scan_cheapest(window_rel->pathlist));
	window_rel->pathlist = NIL;
	window_rel->partial_pathlist = NIL;
	add_path(window_rel, path);
}
