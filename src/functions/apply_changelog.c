/*-------------------------------------------------------------------------
 *
 * apply_changelog.c
 *	  SQL entry point of ptf.apply_changelog(target, query): the (kind,
 *	  data) rows of a query applied to a table (sink/apply.c), with counts.
 *
 * The query is run as it is, with one exception: a bare call of
 * from_changelog (no WHERE, order, join or limit around it, its arguments
 * constants), the way CDC records are applied, gives its changes straight
 * to the sink.  Run as a query, the function would first materialize every
 * change -- a backlog's spill to a temporary file -- to be read back row
 * by row.  The changes and their order are the same either way but for
 * one thing: on a keyed table the sink deletes by the key, so a
 * retraction's jsonb image is read for its key columns alone (half the
 * images of a Debezium backlog are before images), its other columns NULL
 * and their values unchecked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/objectaccess.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"

#include "functions/from_changelog.h"
#include "input/input.h"
#include "sink/apply.h"

PG_FUNCTION_INFO_V1(ptf_apply_changelog);

static void
put(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	apply_sink_put((ApplySink *) arg, kind, row);
}

/* a column of the function's result as it is: Var attno of the scan */
static bool
plain_column(TargetEntry *te, AttrNumber attno)
{
	Var		   *var = (Var *) te->expr;

	return !te->resjunk && te->resno == attno && IsA(var, Var) &&
		var->varattno == attno;
}

/*
 * The call of from_changelog a planned query is, and nothing else: NULL
 * unless the plan is a lone function scan of it returning its (kind, data)
 * with every argument a constant.  A copy, in the caller's memory.
 */
static FuncExpr *
bare_from_changelog(SPIPlanPtr plan)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);
	FuncExpr   *result = NULL;
	PlannedStmt *stmt;
	FunctionScan *scan;
	RangeTblFunction *rtfunc;
	FuncExpr   *fexpr;
	ListCell   *lc;

	if (cplan == NULL || list_length(cplan->stmt_list) != 1)
		goto done;
	stmt = linitial_node(PlannedStmt, cplan->stmt_list);
	scan = (FunctionScan *) stmt->planTree;
	if (stmt->commandType != CMD_SELECT || stmt->hasModifyingCTE ||
		stmt->subplans != NIL || !IsA(scan, FunctionScan) ||
		scan->scan.plan.qual != NIL || scan->scan.plan.initPlan != NIL ||
		scan->funcordinality || list_length(scan->functions) != 1 ||
		list_length(scan->scan.plan.targetlist) != 2 ||
		!plain_column(linitial(scan->scan.plan.targetlist), 1) ||
		!plain_column(lsecond(scan->scan.plan.targetlist), 2))
		goto done;
	rtfunc = linitial_node(RangeTblFunction, scan->functions);
	fexpr = (FuncExpr *) rtfunc->funcexpr;
	if (!IsA(fexpr, FuncExpr) || fexpr->funcretset == false)
		goto done;
	foreach(lc, fexpr->args)
		if (!IsA(lfirst(lc), Const))
			goto done;
	{
		FmgrInfo	flinfo;

		fmgr_info(fexpr->funcid, &flinfo);
		if (flinfo.fn_addr != ptf_from_changelog)
			goto done;
	}
	result = copyObject(fexpr);
done:
	if (cplan != NULL)
		ReleaseCachedPlan(cplan, NULL);
	return result;
}

/* The call's changes to the sink, as the executor would call it. */
static void
run_from_changelog(FuncExpr *fexpr, ApplySink *sink)
{
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);
	AclResult	aclresult;
	ListCell   *lc;
	int			i = 0;

	aclresult = pg_proc_aclcheck(fexpr->funcid, GetUserId(), ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(fexpr->funcid));
	InvokeFunctionExecuteHook(fexpr->funcid);
	ereport(DEBUG1,
			(errmsg_internal("apply_changelog takes the changes of from_changelog as they come")));

	fmgr_info(fexpr->funcid, &flinfo);
	fmgr_info_set_expr((Node *) fexpr, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, list_length(fexpr->args),
							 fexpr->inputcollid, NULL, NULL);
	foreach(lc, fexpr->args)
	{
		Const	   *c = lfirst_node(Const, lc);

		fcinfo->args[i].value = c->constvalue;
		fcinfo->args[i].isnull = c->constisnull;
		i++;
	}
	/* a retraction is applied by its key: the rest of its image is not read */
	from_changelog_run_into(fcinfo, put, sink, apply_sink_key_columns(sink),
							apply_sink_rowdesc(sink)->tdtypeid);
}

Datum
ptf_apply_changelog(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *query;
	TupleDesc	resdesc;
	ApplySink  *sink;
	PtfSqlInput in;
	FuncExpr   *fexpr;
	ApplyCounts c;
	Datum		values[9];
	bool		nulls[9] = {false};

	/* a row of NULL counts would read as "nothing to apply": refuse instead */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of apply_changelog must not be NULL",
						PG_ARGISNULL(0) ? "target" : "query")));
	relid = PG_GETARG_OID(0);
	query = text_to_cstring(PG_GETARG_TEXT_PP(1));

	if (get_call_result_type(fcinfo, NULL, &resdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sink = apply_sink_create(relid);

	/* the changes: (kind, data) rows of the table's type, or its rows (inserts) */
	memset(&in, 0, sizeof(in));
	in.query = query;
	in.rowdesc = apply_sink_rowdesc(sink);
	in.truncations = true;
	sql_input_prepare(&in);
	fexpr = in.changelog ? bare_from_changelog(in.plan) : NULL;
	if (fexpr != NULL)
		run_from_changelog(fexpr, sink);
	else
		sql_input_run(&in, put, sink);
	apply_sink_finish(sink, &c);
	SPI_finish();

	values[0] = Int64GetDatum(c.received[ROWKIND_INSERT]);
	values[1] = Int64GetDatum(c.received[ROWKIND_UPDATE_BEFORE]);
	values[2] = Int64GetDatum(c.received[ROWKIND_UPDATE_AFTER]);
	values[3] = Int64GetDatum(c.received[ROWKIND_DELETE]);
	values[4] = Int64GetDatum(c.inserted);
	values[5] = Int64GetDatum(c.updated);
	values[6] = Int64GetDatum(c.deleted);
	values[7] = Int64GetDatum(c.missing);
	values[8] = Int64GetDatum(c.superseded);
	resdesc = BlessTupleDesc(resdesc);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(resdesc, values, nulls)));
}
