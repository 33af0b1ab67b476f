/*-------------------------------------------------------------------------
 *
 * tvf_inline.c
 *	  ptf.tumble() over a table, planned as a scan of that table.
 *
 * TUMBLE gives each row exactly one window, computed from the row alone:
 * nothing is kept between rows, so the function needs no operator.  Run
 * as a set-returning function, though, every row would be read through a
 * cursor, copied into a tuplestore (spilled past work_mem) and read back
 * before the query sees it -- several times the cost of the GROUP BY
 * date_bin() it replaces.  So, as PostgreSQL inlines SQL functions, a
 * planner hook replaces a call
 *
 *	  FROM ptf.tumble(NULL::t, 'ts', size [, offset])
 *
 * by the subquery
 *
 *	  FROM (SELECT ROW(t.a, t.b, ...)::t AS data,
 *				   ptf._tumble_bound(t.ts, size_us, offset_us, 0, 'ts') AS window_start,
 *				   ... 1 ... AS window_end, ... 2 ... AS window_time
 *			  FROM t
 *			 WHERE ptf._tumble_bound(t.ts, ..., 0, 'ts') IS NOT NULL)
 *
 * which the planner flattens: (data).b becomes t.b, the scan may run in
 * parallel, and GROUP BY window_start is a plain hash aggregate.  The
 * answer is the function's: the bounds come from the same code
 * (window_tumble_start), a NULL time raises the same error when its row is
 * read, and rows of infinite time are left out as the function skips them.
 * The subquery goes through the rewriter, so row level security applies as
 * it does to the function's own "SELECT * FROM t", and the plan checks the
 * caller's SELECT privilege on t.
 *
 * Only a call that cannot do anything else is replaced: a relation input,
 * constant arguments the function would accept, no uid, no query, no
 * change stream.  Anything else -- including every argument the function
 * would refuse -- is left to the function, which raises its errors.  The
 * hook works at plan time, after views are expanded, so a view's stored
 * definition keeps the call.  ptf.inline_window_tvfs = off turns it off
 * (last_call_stats() then counts the call).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "functions/tvf_inline.h"
#include "operators/window.h"

PG_FUNCTION_INFO_V1(ptf_tumble_bound);

static bool ptf_inline_window_tvfs = true;
static planner_hook_type prev_planner_hook = NULL;

/* ptf.tumble's arguments, by position */
enum
{
	TUMBLE_INPUT,
	TUMBLE_ON_TIME,
	TUMBLE_SIZE,
	TUMBLE_OFFSET,
	TUMBLE_UID,
	TUMBLE_QUERY,
	TUMBLE_CHANGES,
	TUMBLE_SNAPSHOT,
	TUMBLE_NARGS
};

/* which bound _tumble_bound gives */
enum
{
	BOUND_START,
	BOUND_END,
	BOUND_TIME
};

/* ---- the bounds, for the subquery ---- */

/*
 * What a call site of _tumble_bound keeps between rows (fn_extra): its
 * arguments but the time, and, for timestamp times, the last conversions
 * of window bounds to timestamptz -- a time zone lookup each, and the rows
 * of a scan share few windows.
 */
#define BOUND_CACHE 64

typedef struct BoundCache
{
	Oid			type;
	WindowSpec	w;
	int32		which;
	char	   *column;
	PtfTime		bound[BOUND_CACHE];
	Datum		converted[BOUND_CACHE];
	bool		valid[BOUND_CACHE];
} BoundCache;

static BoundCache *
bound_cache(FunctionCallInfo fcinfo)
{
	BoundCache *c = (BoundCache *) fcinfo->flinfo->fn_extra;

	if (c != NULL)
		return c;
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_GETARG_INT64(1) <= 0 ||
		!ptf_is_time_type(get_fn_expr_argtype(fcinfo->flinfo, 0)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ptf._tumble_bound is called by inlined ptf.tumble calls only")));
	c = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(BoundCache));
	c->type = get_fn_expr_argtype(fcinfo->flinfo, 0);
	window_spec_init(&c->w, WINDOW_TUMBLE, PG_GETARG_INT64(1), 0, PG_GETARG_INT64(2));
	c->which = PG_GETARG_INT32(3);
	c->column = MemoryContextStrdup(fcinfo->flinfo->fn_mcxt,
									PG_ARGISNULL(4) ? "?" : text_to_cstring(PG_GETARG_TEXT_PP(4)));
	fcinfo->flinfo->fn_extra = c;
	return c;
}

/*
 * ptf._tumble_bound(time, size_us, offset_us, which, column): the start,
 * end or time of the tumbling window holding time, as ptf.tumble gives
 * them; NULL where the function skips the row; an error on a NULL time.
 */
Datum
ptf_tumble_bound(PG_FUNCTION_ARGS)
{
	BoundCache *c = bound_cache(fcinfo);
	PtfTime		start;
	int			slot;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("on_time column \"%s\" is NULL in an input row", c->column)));
	if (!window_tumble_start(&c->w, ptf_time_from_datum(PG_GETARG_DATUM(0), c->type), &start))
		PG_RETURN_NULL();
	if (c->which == BOUND_END)
		start += c->w.size;
	else if (c->which == BOUND_TIME)
		start += c->w.size - window_time_before_end();
	if (c->type != TIMESTAMPOID)
		PG_RETURN_DATUM(ptf_time_to_datum_as(start, c->type, TIMESTAMPTZOID));
	slot = (int) ((uint64) (start / c->w.size) % BOUND_CACHE);
	if (!c->valid[slot] || c->bound[slot] != start)
	{
		c->bound[slot] = start;
		c->converted[slot] = ptf_time_to_datum_as(start, c->type, TIMESTAMPTZOID);
		c->valid[slot] = true;
	}
	PG_RETURN_DATUM(c->converted[slot]);
}

/* ---- recognizing a call ---- */

/* Is funcid ptf.tumble, the C function of this library? */
static bool
is_ptf_tumble(Oid funcid)
{
	HeapTuple	tup;
	bool		result = false;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return false;
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
		bool		isnull;
		Datum		src;

		if (strcmp(NameStr(proc->proname), "tumble") == 0 &&
			proc->prolang == ClanguageId &&
			proc->pronargs == TUMBLE_NARGS)
		{
			char	   *nsp = get_namespace_name(proc->pronamespace);

			src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
			result = (nsp != NULL && strcmp(nsp, "ptf") == 0 && !isnull &&
					  strcmp(TextDatumGetCString(src), "ptf_tumble") == 0);
		}
	}
	ReleaseSysCache(tup);
	return result;
}

/* Does this database's extension have ptf._tumble_bound (1.1 and later)? */
static bool
have_bound_function(void)
{
	Oid			argtypes[5] = {ANYELEMENTOID, INT8OID, INT8OID, INT4OID, TEXTOID};

	return OidIsValid(LookupFuncName(list_make2(makeString("ptf"), makeString("_tumble_bound")),
									 5, argtypes, true));
}

/* A constant argument, or NULL if it is not one. */
static Const *
const_arg(List *args, int i)
{
	Node	   *n = list_nth(args, i);

	return IsA(n, Const) ? (Const *) n : NULL;
}

/* an interval constant in microseconds; false when the function would refuse it */
static bool
interval_us(Const *c, bool positive, int64 *us)
{
	Interval   *iv;

	if (c == NULL || c->consttype != INTERVALOID)
		return false;
	if (c->constisnull)
	{
		*us = 0;
		return !positive;
	}
	iv = DatumGetIntervalP(c->constvalue);
	if (iv->month != 0 ||
		pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, us) ||
		pg_add_s64_overflow(*us, iv->time, us))
		return false;
	return !positive || *us > 0;
}

/*
 * The subquery text for a call with these (expanded, constant) arguments,
 * or NULL when the function must run.
 */
static char *
inline_sql(List *args)
{
	Const	   *input = const_arg(args, TUMBLE_INPUT);
	Const	   *on_time = const_arg(args, TUMBLE_ON_TIME);
	Const	   *uid = const_arg(args, TUMBLE_UID);
	Const	   *query = const_arg(args, TUMBLE_QUERY);
	Const	   *changes = const_arg(args, TUMBLE_CHANGES);
	Const	   *snapshot = const_arg(args, TUMBLE_SNAPSHOT);
	Oid			relid;
	char		relkind;
	char	   *col;
	int64		size;
	int64		offset;
	Relation	rel;
	TupleDesc	desc;
	AttrNumber	time_attno = InvalidAttrNumber;
	StringInfoData row;
	StringInfoData sql;
	const char *bound_fn;
	int			i;

	/* a row value is refused by the function: let it run and say so */
	if (input == NULL || !input->constisnull || on_time == NULL || on_time->constisnull ||
		uid == NULL || !uid->constisnull || query == NULL || !query->constisnull ||
		changes == NULL || changes->constisnull || DatumGetBool(changes->constvalue) ||
		snapshot == NULL || snapshot->constisnull || DatumGetBool(snapshot->constvalue) ||
		!interval_us(const_arg(args, TUMBLE_SIZE), true, &size) ||
		!interval_us(const_arg(args, TUMBLE_OFFSET), false, &offset))
		return NULL;
	relid = typeidTypeRelid(input->consttype);
	if (!OidIsValid(relid))
		return NULL;
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE &&
		relkind != RELKIND_VIEW && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_FOREIGN_TABLE)
		return NULL;
	col = TextDatumGetCString(on_time->constvalue);

	rel = relation_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	initStringInfo(&row);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		appendStringInfo(&row, "%st.%s", row.len > 0 ? ", " : "",
						 quote_identifier(NameStr(att->attname)));
		if (strcmp(NameStr(att->attname), col) == 0 && ptf_is_time_type(att->atttypid))
			time_attno = att->attnum;
	}
	relation_close(rel, AccessShareLock);
	if (time_attno == InvalidAttrNumber)
		return NULL;

	bound_fn = psprintf("ptf._tumble_bound(t.%s, %lld::pg_catalog.int8, %lld::pg_catalog.int8, %%d, %s)",
						quote_identifier(col), (long long) size, (long long) offset,
						quote_literal_cstr(col));
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT ROW(%s)::%s AS data, ", row.data,
					 format_type_be_qualified(input->consttype));
	appendStringInfo(&sql, bound_fn, BOUND_START);
	appendStringInfoString(&sql, " AS window_start, ");
	appendStringInfo(&sql, bound_fn, BOUND_END);
	appendStringInfoString(&sql, " AS window_end, ");
	appendStringInfo(&sql, bound_fn, BOUND_TIME);
	appendStringInfo(&sql, " AS window_time FROM %s AS t WHERE ",
					 ptf_relation_sql_name(relid));
	appendStringInfo(&sql, bound_fn, BOUND_START);
	appendStringInfoString(&sql, " IS NOT NULL");
	return sql.data;
}

/* Replace rte, a call of ptf.tumble, by its subquery if it can be. */
static void
inline_tumble(RangeTblEntry *rte, bool *depends_on_role)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *fe;
	HeapTuple	proctup;
	List	   *args;
	char	   *sql;
	List	   *raw;
	Query	   *sub;
	List	   *rewritten;

	if (list_length(rte->functions) != 1 || rte->funcordinality)
		return;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return;
	fe = (FuncExpr *) rtfunc->funcexpr;
	if (!fe->funcretset || !is_ptf_tumble(fe->funcid) || !have_bound_function())
		return;

	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fe->funcid));
	if (!HeapTupleIsValid(proctup))
		return;
	args = expand_function_arguments(fe->args, false, fe->funcresulttype, proctup);
	ReleaseSysCache(proctup);
	/* '1 hour'::interval and the like are constants by now */
	args = (List *) eval_const_expressions(NULL, (Node *) args);
	if (list_length(args) != TUMBLE_NARGS || (sql = inline_sql(args)) == NULL)
		return;

	raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	sub = parse_analyze_fixedparams(linitial_node(RawStmt, raw), sql, NULL, 0, NULL);
	rewritten = QueryRewrite(sub);
	if (list_length(rewritten) != 1)
		return;
	sub = linitial_node(Query, rewritten);

	rte->rtekind = RTE_SUBQUERY;
	rte->subquery = sub;
	rte->security_barrier = false;
	rte->functions = NIL;
	rte->funcordinality = false;
	/* row level security in the subquery: the plan holds for this role only */
	if (sub->hasRowSecurity)
		*depends_on_role = true;
}

typedef struct InlineContext
{
	bool		depends_on_role;	/* an inlined scan is under row level security */
} InlineContext;

static bool
inline_walker(Node *node, InlineContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, inline_walker, (void *) cxt,
								 QTW_EXAMINE_RTES_BEFORE);
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_FUNCTION)
			inline_tumble(rte, &cxt->depends_on_role);
		return false;
	}
	return expression_tree_walker(node, inline_walker, (void *) cxt);
}

static PlannedStmt *
ptf_planner(Query *parse, const char *query_string, int cursorOptions,
			ParamListInfo boundParams)
{
	InlineContext cxt;
	PlannedStmt *stmt;

	cxt.depends_on_role = false;
	if (ptf_inline_window_tvfs && parse->commandType != CMD_UTILITY)
		(void) inline_walker((Node *) parse, &cxt);
	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);

	/*
	 * The policies of the role planning it are in the plan: a cached plan
	 * must not serve another role (the rewriter marks its own queries so,
	 * the subquery came after it).
	 */
	if (cxt.depends_on_role)
		stmt->dependsOnRole = true;
	return stmt;
}

void
ptf_tvf_inline_init(void)
{
	DefineCustomBoolVariable("ptf.inline_window_tvfs",
							 "Plans ptf.tumble() over a table as a scan of the table.",
							 "Off: the function runs (and last_call_stats() counts it).",
							 &ptf_inline_window_tvfs,
							 true, PGC_USERSET, 0,
							 NULL, NULL, NULL);
	prev_planner_hook = planner_hook;
	planner_hook = ptf_planner;
}
