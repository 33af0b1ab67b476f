/*-------------------------------------------------------------------------
 *
 * tvf_inline.c
 *	  Window TVF calls over a table planned as scans of that table.
 *
 * A TVF gives each row its windows, computed from the row alone: nothing
 * is kept between rows, so the function needs no operator.  Run as a
 * set-returning function, though, every row would be read through a
 * cursor, copied into a tuplestore (spilled past work_mem) and read back
 * before the query sees it -- several times the cost of the GROUP BY
 * date_bin() it replaces.  So, as PostgreSQL inlines SQL functions, the
 * planner hook (planner.c) replaces a call
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
 * parallel, and GROUP BY window_start is a plain hash aggregate.  A HOP or
 * CUMULATE row has several windows, so its call becomes
 *
 *	  FROM (SELECT s.data, (s.w).window_start, (s.w).window_end, (s.w).window_time
 *			  FROM (SELECT ROW(t.a, ...)::t AS data,
 *						   ptf._tvf_windows(t.ts, kind, size_us, step_us, offset_us, 'ts') AS w
 *					  FROM t) s)
 *
 * with the set-returning function in a select list (ProjectSet streams
 * its rows; a function in FROM would fill a tuplestore per row); quals on
 * data still reach the scan of t.  The answer is the function's: the
 * bounds come from the same code (window_tumble_start, window_assign), a
 * NULL time raises the same error when its row is read, and rows of
 * infinite time are left out as the function skips them.  The subquery
 * goes through the rewriter, so row level security applies as it does to
 * the function's own "SELECT * FROM t", and the plan checks the caller's
 * SELECT privilege on t.
 *
 * Only a call that cannot do anything else is replaced: a relation input,
 * constant arguments the function would accept, no uid, no query, no
 * change stream -- and no window rule taking it (rules.h).  Anything else
 * -- including every argument the function would refuse -- is left to the
 * function, which raises its errors.  The hook works at plan time, after
 * views are expanded, so a view's stored definition keeps the call.
 * ptf.inline_window_tvfs = off turns it off (last_call_stats() then counts
 * the call).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
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
#include "executor/executor.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "planner/tvf_inline.h"
#include "operators/window.h"
#include "planner/tvf_call.h"

PG_FUNCTION_INFO_V1(ptf_tumble_bound);
PG_FUNCTION_INFO_V1(ptf_tvf_windows);

bool		ptf_inline_window_tvfs = true;

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
typedef struct BoundCache
{
	Oid			type;
	WindowSpec	w;
	int32		which;
	char	   *column;
	PtfTimeCache converted;		/* the last bounds as timestamptz */
	bool		gap_warned;		/* a bound in a daylight-saving gap was warned of */
} BoundCache;

static BoundCache *
bound_cache(FunctionCallInfo fcinfo)
{
	BoundCache *c = (BoundCache *) fcinfo->flinfo->fn_extra;

	if (c != NULL)
		return c;
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_GETARG_INT64(1) <= 0 ||
		PG_GETARG_INT32(3) < BOUND_START || PG_GETARG_INT32(3) > BOUND_TIME ||
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
	PG_RETURN_DATUM(ptf_time_to_datum_cached(&c->converted, c->w.size, start, c->type,
											 TIMESTAMPTZOID, &c->gap_warned));
}

/* ---- the windows of a HOP or CUMULATE row, for the subquery ---- */

/*
 * What a call site of _tvf_windows keeps (fn_extra): its arguments but the
 * time, and the windows of the row being returned.  The value-per-call
 * protocol is followed by hand rather than with funcapi.h's macros, which
 * take fn_extra for themselves and would make it all again for every row.
 */
typedef struct WindowsCall
{
	Oid			type;
	WindowSpec	w;
	char	   *column;
	TupleDesc	desc;
	PtfTime    *ends;
	int			max;
	int			n;				/* the row's windows, ends[0 .. n) */
	int			next;			/* the next to return */
	bool		active;			/* a row is being returned */
	bool		gap_warned;		/* a bound in a daylight-saving gap was warned of */
	PtfTimeCache bounds[3];		/* of window_start, window_end, window_time */
	ExprContext *econtext;		/* where the reset callback is registered */
} WindowsCall;

static WindowsCall *
windows_call(FunctionCallInfo fcinfo)
{
	WindowsCall *c = (WindowsCall *) fcinfo->flinfo->fn_extra;
	MemoryContext old;
	TupleDesc	desc;
	int32		kind;

	if (c != NULL)
		return c;
	kind = PG_ARGISNULL(1) ? -1 : PG_GETARG_INT32(1);
	if ((kind != WINDOW_HOP && kind != WINDOW_CUMULATE) || PG_ARGISNULL(2) || PG_ARGISNULL(3) ||
		PG_ARGISNULL(4) || PG_GETARG_INT64(2) <= 0 || PG_GETARG_INT64(3) <= 0 ||
		!ptf_is_time_type(get_fn_expr_argtype(fcinfo->flinfo, 0)) ||
		get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ptf._tvf_windows is called by inlined ptf.hop and ptf.cumulate calls only"),
				 errhint("Call ptf.hop or ptf.cumulate.")));
	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	c = palloc0(sizeof(WindowsCall));
	c->type = get_fn_expr_argtype(fcinfo->flinfo, 0);
	window_spec_init(&c->w, (WindowKind) kind, PG_GETARG_INT64(2), PG_GETARG_INT64(3),
					 PG_GETARG_INT64(4));
	c->column = PG_ARGISNULL(5) ? "?" : text_to_cstring(PG_GETARG_TEXT_PP(5));
	c->desc = BlessTupleDesc(CreateTupleDescCopy(desc));
	c->max = 16;
	c->ends = palloc(sizeof(PtfTime) * c->max);
	MemoryContextSwitchTo(old);
	fcinfo->flinfo->fn_extra = c;
	return c;
}

/* the executor gave up on a row's windows (a rescan, the end of the query) */
static void
windows_reset(Datum arg)
{
	WindowsCall *c = (WindowsCall *) DatumGetPointer(arg);

	c->active = false;
	c->econtext = NULL;
}

/*
 * ptf._tvf_windows(time, kind, size_us, step_us, offset_us, column): the
 * windows of a HOP or CUMULATE row, as ptf.hop and ptf.cumulate give them
 * (window_assign); none where they skip the row; an error on a NULL time.
 */
Datum
ptf_tvf_windows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WindowsCall *c;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_ValuePerCall) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ptf._tvf_windows is called by inlined ptf.hop and ptf.cumulate calls only"),
				 errhint("Call ptf.hop or ptf.cumulate.")));
	c = windows_call(fcinfo);
	rsinfo->returnMode = SFRM_ValuePerCall;
	if (!c->active)
	{
		PtfTime		ts;

		if (PG_ARGISNULL(0))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("on_time column \"%s\" is NULL in an input row", c->column)));
		ts = ptf_time_from_datum(PG_GETARG_DATUM(0), c->type);
		c->n = window_assign(&c->w, ts, c->ends, c->max);
		if (c->n > c->max)
		{
			c->ends = repalloc(c->ends, sizeof(PtfTime) * c->n);
			c->max = c->n;
			(void) window_assign(&c->w, ts, c->ends, c->max);
		}
		c->next = 0;
		c->active = true;
		c->econtext = rsinfo->econtext;
		RegisterExprContextCallback(c->econtext, windows_reset, PointerGetDatum(c));
	}
	if (c->next < c->n)
	{
		PtfTime		end = c->ends[c->next++];
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = ptf_time_to_datum_cached(&c->bounds[0], c->w.slice, window_start_of(&c->w, end),
											 c->type, TIMESTAMPTZOID, &c->gap_warned);
		values[1] = ptf_time_to_datum_cached(&c->bounds[1], c->w.slice, end,
											 c->type, TIMESTAMPTZOID, &c->gap_warned);
		values[2] = ptf_time_to_datum_cached(&c->bounds[2], c->w.slice,
											 end - window_time_before_end(),
											 c->type, TIMESTAMPTZOID, &c->gap_warned);
		rsinfo->isDone = ExprMultipleResult;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(c->desc, values, nulls)));
	}
	UnregisterExprContextCallback(c->econtext, windows_reset, PointerGetDatum(c));
	c->active = false;
	c->econtext = NULL;
	rsinfo->isDone = ExprEndResult;
	PG_RETURN_NULL();
}

/* ---- inlining a call ---- */

/* Does this database's extension have function name of these arguments? */
static bool
have_function(const char *name, int nargs, Oid *argtypes)
{
	return OidIsValid(LookupFuncName(list_make2(makeString("ptf"), makeString((char *) name)),
									 nargs, argtypes, true));
}

/* a constant argument, or NULL if it is not one */
static Const *
const_arg(const PtfTvf *tvf, const char *name)
{
	Node	   *n = ptf_tvf_arg(tvf, name);

	return n != NULL && IsA(n, Const) ? (Const *) n : NULL;
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
inline_sql(const PtfTvf *tvf)
{
	Const	   *input = (Const *) linitial(tvf->fe->args);
	Const	   *on_time = const_arg(tvf, "on_time");
	Const	   *uid = const_arg(tvf, "uid");
	Const	   *query = const_arg(tvf, "query");
	Const	   *changes = const_arg(tvf, "changes");
	Const	   *snapshot = const_arg(tvf, "snapshot");
	Node	   *delay = ptf_tvf_arg(tvf, "watermark_delay");
	Oid			relid = tvf->relid;
	char		relkind;
	char	   *col;
	int64		size;
	int64		step = 0;
	int64		offset;
	int64		delay_us;
	TupleDesc	desc = tvf->rowdesc;
	AttrNumber	time_attno = InvalidAttrNumber;
	StringInfoData row;
	StringInfoData sql;
	int			i;

	/* a row value is refused by the function: let it run and say so */
	if (!IsA(input, Const) || !input->constisnull || on_time == NULL || on_time->constisnull ||
		uid == NULL || !uid->constisnull || query == NULL || !query->constisnull ||
		changes == NULL || changes->constisnull || DatumGetBool(changes->constvalue) ||
		snapshot == NULL || snapshot->constisnull || DatumGetBool(snapshot->constvalue) ||
		(delay != NULL && (!IsA(delay, Const) || !interval_us((Const *) delay, false, &delay_us))) ||
		!interval_us(const_arg(tvf, "offset"), false, &offset))
		return NULL;
	if (tvf->kind == WINDOW_TUMBLE)
	{
		if (!interval_us(const_arg(tvf, "size"), true, &size))
			return NULL;
	}
	else if (!interval_us(const_arg(tvf, tvf->kind == WINDOW_HOP ? "slide" : "step"), true, &step) ||
			 !interval_us(const_arg(tvf, "size"), true, &size) ||
			 (tvf->kind == WINDOW_CUMULATE && size % step != 0))
		return NULL;
	if (!OidIsValid(relid))
		return NULL;
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE &&
		relkind != RELKIND_VIEW && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_FOREIGN_TABLE)
		return NULL;
	col = TextDatumGetCString(on_time->constvalue);

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
	if (time_attno == InvalidAttrNumber)
		return NULL;

	initStringInfo(&sql);
	if (tvf->kind == WINDOW_TUMBLE)
	{
		Oid			argtypes[5] = {ANYELEMENTOID, INT8OID, INT8OID, INT4OID, TEXTOID};
		const char *bound_fn;

		if (!have_function("_tumble_bound", 5, argtypes))
			return NULL;
		bound_fn = psprintf("ptf._tumble_bound(t.%s, %lld::pg_catalog.int8, %lld::pg_catalog.int8, %%d, %s)",
							quote_identifier(col), (long long) size, (long long) offset,
							quote_literal_cstr(col));
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
	}
	else
	{
		Oid			argtypes[6] = {ANYELEMENTOID, INT4OID, INT8OID, INT8OID, INT8OID, TEXTOID};

		if (!have_function("_tvf_windows", 6, argtypes))
			return NULL;
		appendStringInfo(&sql,
						 "SELECT s.data, (s.w).window_start, (s.w).window_end, (s.w).window_time "
						 "FROM (SELECT ROW(%s)::%s AS data, "
						 "ptf._tvf_windows(t.%s, %d, %lld::pg_catalog.int8, %lld::pg_catalog.int8, "
						 "%lld::pg_catalog.int8, %s) AS w FROM %s AS t) AS s",
						 row.data, format_type_be_qualified(input->consttype),
						 quote_identifier(col), (int) tvf->kind, (long long) size,
						 (long long) step, (long long) offset, quote_literal_cstr(col),
						 ptf_relation_sql_name(relid));
	}
	return sql.data;
}

void
ptf_tvf_inline_rte(RangeTblEntry *rte, bool *depends_on_role)
{
	PtfTvf		tvf;
	char	   *sql;
	List	   *raw;
	Query	   *sub;
	List	   *rewritten;

	if (!ptf_tvf_of_rte(rte, &tvf))
		return;
	/* '1 hour'::interval and the like are constants by now */
	tvf.fe->args = (List *) eval_const_expressions(NULL, (Node *) tvf.fe->args);
	if ((sql = inline_sql(&tvf)) == NULL)
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

void
ptf_tvf_inline_define_gucs(void)
{
	DefineCustomBoolVariable("ptf.inline_window_tvfs",
							 "Plans ptf.tumble(), ptf.hop() and ptf.cumulate() over a table as a scan of the table.",
							 "Off: the function runs (and last_call_stats() counts it).",
							 &ptf_inline_window_tvfs,
							 true, PGC_USERSET, 0,
							 NULL, NULL, NULL);
}
