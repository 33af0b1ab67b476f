/*-------------------------------------------------------------------------
 *
 * pipelines.c
 *	  SQL entry points of pipelines: ptf.create_pipeline, drop_pipeline,
 *	  pause_pipeline, resume_pipeline, and ptf._pipeline_status() behind
 *	  the ptf.pipeline_status view.  The pipelines themselves run in the
 *	  database's pipeline workers (worker/pipeline.c).
 *
 * A pipeline's query is checked when it is made: one SELECT from one of
 * our functions reading a change stream under a uid (it may pick columns
 * and filter rows), whose rows fit the sink.  Making it starts the stream
 * (the uid's first call), so what is written afterwards is the pipeline's.
 * Pipelines belong to the role that made them; other roles cannot see,
 * pause or drop them.
 *
 * The query is bound when the pipeline is made, as a view's is: it is
 * stored as PostgreSQL prints its analysis -- every name qualified but
 * pg_catalog's -- and runs, with all it calls, under the search_path
 * "pg_catalog, pg_temp" (as PostgreSQL 17 runs maintenance commands).  No
 * schema a role could create objects in is searched, so nothing created
 * later -- a function of the same signature, an exact-type overload of a
 * polymorphic built-in, an operator -- can change what the query calls or
 * run as the pipeline's owner.  Code that needs another path says so
 * itself (SET search_path on the function).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "nodes/extensible.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "engine/step.h"
#include "functions/pipelines.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "state/durable.h"
#include "worker/shmem.h"
#include "worker/worker.h"

/* set by another room (src/citus/), see pipelines.h */
PtfPipelineHooks ptf_pipeline_hooks;

PG_FUNCTION_INFO_V1(ptf_create_pipeline);
PG_FUNCTION_INFO_V1(ptf_drop_pipeline);
PG_FUNCTION_INFO_V1(ptf_pause_pipeline);
PG_FUNCTION_INFO_V1(ptf_resume_pipeline);
PG_FUNCTION_INFO_V1(ptf_pipeline_status_rows);
PG_FUNCTION_INFO_V1(ptf_wake_pipeline_worker);
PG_FUNCTION_INFO_V1(ptf_pipeline_restored);

/*
 * ---- rows of the registry that no create_pipeline put there ----
 *
 * pg_restore (or a plain dump run by psql) loads ptf.pipeline_registry
 * before the uids' registry and state, and before the tables' rows: a
 * worker woken by the first would start the pipelines as new streams and
 * read the restore's rows as changes (a keep-first sink got every key
 * twice, the uids' state restored after was refused as duplicate).  As
 * pg_dump restores subscriptions disabled, such rows come paused, until
 * ptf.resume_pipeline once the restore is complete.  The flag below says
 * that the insert is one of ours (create_pipeline, a Citus shard's): set
 * only around it, by ptf_register_pipeline.
 */
static bool registering_pipeline = false;

void
ptf_register_pipeline(const char *sql, int nargs, Oid *argtypes, Datum *values)
{
	Assert(!registering_pipeline);
	registering_pipeline = true;
	PG_TRY();
	{
		ptf_spi_exec_as_owner(sql, nargs, argtypes, values, NULL, SPI_OK_INSERT);
	}
	PG_FINALLY();
	{
		registering_pipeline = false;
	}
	PG_END_TRY();
}

/* Row trigger BEFORE INSERT on ptf.pipeline_registry: a row not ours comes paused. */
Datum
ptf_pipeline_restored(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	row;
	TupleDesc	desc;
	int			cols[1];
	Datum		values[1] = {BoolGetDatum(true)};
	bool		nulls[1] = {false};
	bool		isnull;
	char	   *name;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) || !TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ptf._pipeline_restored() is called by a row trigger before INSERT only")));
	row = trigdata->tg_trigtuple;
	if (registering_pipeline)
		return PointerGetDatum(row);
	/* the table's own columns, by name: the registry's Anum_ are of a select list */
	desc = RelationGetDescr(trigdata->tg_relation);
	cols[0] = SPI_fnumber(desc, "paused");
	name = SPI_getvalue(row, desc, SPI_fnumber(desc, "name"));
	if (cols[0] <= 0)
		elog(ERROR, "ptf.pipeline_registry has no column paused");
	if (!DatumGetBool(heap_getattr(row, cols[0], desc, &isnull)) || isnull)
		ereport(NOTICE,
				(errmsg("pipeline \"%s\" is paused until ptf.resume_pipeline('%s')", name, name),
				 errdetail("It was put in ptf.pipeline_registry otherwise than by ptf.create_pipeline, as a restore does: it runs once what it reads is complete.")));
	return PointerGetDatum(heap_modify_tuple_by_cols(row, desc, 1, cols, values, nulls));
}


/* ---- waking the worker once the change is committed ---- */

static bool wake_at_commit = false;
static bool xact_callback_registered = false;

static void
pipelines_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && wake_at_commit)
		ptf_request_worker(MyDatabaseId);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		wake_at_commit = false;
}

static void
wake_worker_at_commit(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(pipelines_xact_callback, NULL);
		xact_callback_registered = true;
	}
	wake_at_commit = true;
}

/*
 * Statement trigger on ptf.pipeline_registry.  Whatever writes it, the
 * workers of the database load their pipelines again after the commit
 * (the registry's relcache entry is invalidated then, which their relcache
 * callback sees, as pg_cron's job cache).  Rows put in by anything but
 * create_pipeline -- pg_restore, a plain dump run by psql -- also ask for
 * the database's worker, as create_pipeline does, or the pipelines would
 * wait for something else to wake the launcher.
 */
Datum
ptf_wake_pipeline_worker(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ptf._wake_pipeline_worker() is called by a trigger only")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		wake_worker_at_commit();
	return PointerGetDatum(NULL);
}

/* ---- arguments ---- */

static char *
required_text(FunctionCallInfo fcinfo, int argno, const char *name)
{
	char	   *s;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (s[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", name)));
	return s;
}

static void
bad_query(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("a pipeline's query must read a change stream with one of the ptf functions"),
			 errdetail("%s", detail),
			 errhint("For example: SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}', changes => true, uid => 'first-events')")));
}

/* The functions that read a change stream under a uid. */
static bool
pipeline_function(const char *name)
{
	static const char *const names[] = {
		"deduplicate_keep_first", "to_changelog", "from_changelog",
		"tumble", "hop", "cumulate", "window_aggregate", "temporal_join"
	};

	for (size_t i = 0; i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* what pipelines made by this version run under; see the header */
#define PIPELINE_SEARCH_PATH "pg_catalog, pg_temp"

/* PIPELINE_SEARCH_PATH until AtEOXact_GUC(true, nest) or the transaction's end */
static int
enter_pipeline_search_path(void)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("search_path", PIPELINE_SEARCH_PATH,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

/*
 * The analyzed query as text that names what it named now under
 * PIPELINE_SEARCH_PATH: printed under it, all else comes out qualified.
 */
static char *
bind_query(Query *q)
{
	int			nest = enter_pipeline_search_path();
	char	   *bound = pg_get_querydef(q, false);

	AtEOXact_GUC(true, nest);
	return bound;
}

/* The stream arguments of a call: changes => true and uid => '...', as literals. */
static void
stream_arguments(FuncExpr *fe, char **uid)
{
	ListCell   *lc;
	bool		changes = false;

	*uid = NULL;
	foreach(lc, fe->args)
	{
		NamedArgExpr *na = (NamedArgExpr *) lfirst(lc);
		Const	   *c;

		if (!IsA(na, NamedArgExpr))
			continue;
		c = (Const *) na->arg;
		if (strcmp(na->name, "changes") == 0)
			changes = IsA(c, Const) && !c->constisnull && DatumGetBool(c->constvalue);
		else if (strcmp(na->name, "uid") == 0)
		{
			if (!IsA(c, Const) || c->constisnull || c->consttype != TEXTOID)
				bad_query("Its uid must be a text literal: uid => '...'.");
			*uid = TextDatumGetCString(c->constvalue);
		}
	}
	if (!changes)
		bad_query("It must read the table's changes: changes => true.");
	if (*uid == NULL || (*uid)[0] == '\0')
		bad_query("It must name its state: uid => '...'.");
}

/* q's one function call of schema ptf, or NULL */
static FuncExpr *
single_ptf_call(Query *q)
{
	RangeTblEntry *rte;
	RangeTblFunction *rtfunc;
	FuncExpr   *fe;

	if (list_length(q->rtable) != 1 || q->jointree == NULL ||
		list_length(q->jointree->fromlist) != 1)
		return NULL;
	rte = linitial_node(RangeTblEntry, q->rtable);
	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1 || rte->funcordinality)
		return NULL;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return NULL;
	fe = (FuncExpr *) rtfunc->funcexpr;
	if (get_func_namespace(fe->funcid) != get_namespace_oid("ptf", false))
		return NULL;
	return fe;
}

/*
 * The window columns (1 << attno of the TVF's window_start, window_end,
 * window_time) an expression of a level over the TVF is: a Var of the
 * TVF's entry, or of a subquery's column that is one.
 */
static int
window_column_bit(Node *expr, Query *level, Query *grouping)
{
	Var		   *v;

	if (!IsA(expr, Var) || ((Var *) expr)->varlevelsup != 0)
		return 0;
	v = (Var *) expr;
	if (level != grouping)
	{
		TargetEntry *tle;

		/* a column of the grouping subquery */
		if (v->varattno < 1 || v->varattno > list_length(grouping->targetList))
			return 0;
		tle = list_nth_node(TargetEntry, grouping->targetList, v->varattno - 1);
		return window_column_bit((Node *) tle->expr, grouping, grouping);
	}
	return v->varattno >= 2 && v->varattno <= 4 ? 1 << v->varattno : 0;
}

/*
 * Is every window clause of level partitioned by columns naming one window
 * each (window_end or window_time; window_start but for CUMULATE)?  A
 * window function over such partitions sees each window's rows whole:
 * the window rules emit a window once, all of it, when it fires.
 */
static bool
partitioned_by_windows(Query *level, Query *grouping, bool cumulate)
{
	ListCell   *lc;

	foreach(lc, level->windowClause)
	{
		WindowClause *wc = lfirst_node(WindowClause, lc);
		ListCell   *lc2;
		int			bits = 0;

		foreach(lc2, wc->partitionClause)
			bits |= window_column_bit(get_sortgroupclause_expr(lfirst_node(SortGroupClause, lc2),
															   level->targetList),
									  level, grouping);
		if ((bits & ((1 << 3) | (1 << 4))) == 0 && (cumulate || (bits & (1 << 2)) == 0))
			return false;
	}
	return true;
}

/* What the window rules' plans hold: their scans, and function scans. */
typedef struct PlanCount
{
	int			window_scans;
	int			function_scans;
} PlanCount;

static void
count_plan(Plan *plan, PlanCount *c)
{
	ListCell   *lc;

	if (plan == NULL)
		return;
	if (IsA(plan, CustomScan) &&
		strcmp(((CustomScan *) plan)->methods->CustomName, "PtfWindowScan") == 0)
		c->window_scans++;
	if (IsA(plan, FunctionScan))
		c->function_scans++;
	count_plan(plan->lefttree, c);
	count_plan(plan->righttree, c);
	if (IsA(plan, SubqueryScan))
		count_plan(((SubqueryScan *) plan)->subplan, c);
	if (IsA(plan, Append))
		foreach(lc, ((Append *) plan)->appendplans)
			count_plan((Plan *) lfirst(lc), c);
	if (IsA(plan, CustomScan))
		foreach(lc, ((CustomScan *) plan)->custom_plans)
			count_plan((Plan *) lfirst(lc), c);
}

/*
 * A query the window rules plan (planner/): a window TVF over a change
 * stream grouped (GROUP BY window_start, window_end, keys), or ranked per
 * window (row_number() over its windows, filtered to the first N), or its
 * grouping ranked per window -- and queries that choose columns and
 * filter rows of these.  It must run as the rules plan it, each window
 * once, whole, when it fires -- not as PostgreSQL would, grouping each
 * step's rows apart: it is planned here, with the rules on, and accepted
 * only when the plan runs the TVF's call in their scan, and nowhere else.
 * Returns the function name for the registry.
 */
static char *
check_planned_pipeline_query(Query *q, const char *query, char **uid)
{
	Query	   *level = q;
	Query	   *grouping;
	FuncExpr   *fe;
	char	   *name;
	int			nest;
	PlannedStmt *stmt;
	PlanCount	count = {0, 0};
	ListCell   *lc;
	int			depth;

	/* down through levels that choose columns and filter rows */
	for (depth = 0; level->groupClause == NIL && !level->hasWindowFuncs && !level->hasAggs;
		 depth++)
	{
		RangeTblEntry *rte;

		if (level->jointree == NULL || list_length(level->jointree->fromlist) != 1 ||
			list_length(level->rtable) != 1 || depth > 3)
			bad_query("It reads from one function call, or one query over it, and nothing else.");
		rte = linitial_node(RangeTblEntry, level->rtable);
		if (rte->rtekind != RTE_SUBQUERY)
			bad_query("It groups or ranks a window table function's rows, or reads one function call.");
		level = rte->subquery;
		if (level->sortClause != NIL || level->limitCount != NULL || level->limitOffset != NULL ||
			level->distinctClause != NIL || level->setOperations != NULL || level->cteList != NIL ||
			level->hasTargetSRFs || level->hasSubLinks || level->rowMarks != NIL)
			bad_query("It may choose columns and filter rows of a grouped or ranked query, nothing more: no ordering, limits, DISTINCT or subqueries.");
	}

	/* the level that reads the TVF: this one, or the grouping it ranks */
	grouping = level;
	if (level->hasWindowFuncs && level->groupClause == NIL && !level->hasAggs &&
		single_ptf_call(level) == NULL)
	{
		RangeTblEntry *rte = list_length(level->rtable) == 1 ?
		linitial_node(RangeTblEntry, level->rtable) : NULL;

		if (rte == NULL || rte->rtekind != RTE_SUBQUERY || rte->subquery->groupClause == NIL)
			bad_query("It ranks the rows of a window table function, or of its grouping.");
		grouping = rte->subquery;
		if (grouping->sortClause != NIL || grouping->limitCount != NULL ||
			grouping->limitOffset != NULL || grouping->hasWindowFuncs)
			bad_query("The grouping it ranks may not order, limit or rank itself.");
	}
	if (grouping->groupingSets != NIL)
		bad_query("Grouping sets are not planned as the window aggregate.");
	fe = single_ptf_call(grouping);
	name = fe ? get_func_name(fe->funcid) : NULL;
	if (name == NULL || (strcmp(name, "tumble") != 0 && strcmp(name, "hop") != 0 &&
						 strcmp(name, "cumulate") != 0))
		bad_query("It may choose columns and filter rows, nothing more: no joins, grouping, ordering, limits or subqueries, but the grouping or ranking of the rows of ptf.tumble, ptf.hop or ptf.cumulate.");
	stream_arguments(fe, uid);
	if (grouping->groupClause != NIL && level->hasWindowFuncs &&
		!partitioned_by_windows(level, grouping, strcmp(name, "cumulate") == 0))
		bad_query("A ranking of groups is partitioned by their windows: PARTITION BY window_start, window_end.");

	/* planned as the rules plan it, whatever this session's setting */
	nest = NewGUCNestLevel();
	(void) set_config_option("ptf.plan_window_sql", "on", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	stmt = pg_plan_query(copyObject(q), query, 0, NULL);
	AtEOXact_GUC(true, nest);
	count_plan(stmt->planTree, &count);
	foreach(lc, stmt->subplans)
		count_plan((Plan *) lfirst(lc), &count);
	if (count.window_scans != 1 || count.function_scans != 0)
		bad_query("It groups or ranks a window table function's rows in a way that is not planned as the window aggregate or Window Top-N (see EXPLAIN): grouping columns are window columns and columns of data, aggregates read data alone, and a ranking over a TVF's rows is row_number() over each window, filtered by rownum <= N around it.");
	return grouping->groupClause != NIL ? "window_aggregate" : "window_top_n";
}

/*
 * SELECT [columns] FROM ptf.f(..., changes => true, uid => '...') [WHERE ...]
 * with f one of ours, or a grouping or ranking of a window TVF's rows that
 * the window rules plan; returns the function's name, the uid and the
 * query bound.
 */
static void
check_pipeline_query(const char *query, char **function, char **uid, char **bound)
{
	List	   *raw = pg_parse_query(query);
	Query	   *q;
	FuncExpr   *fe;
	char	   *name;

	if (list_length(raw) != 1)
		bad_query("The query must be a single statement.");
	q = parse_analyze_fixedparams(linitial_node(RawStmt, raw), query, NULL, 0, NULL);
	if (q->commandType != CMD_SELECT || q->utilityStmt != NULL || q->setOperations != NULL ||
		q->sortClause != NIL || q->limitCount != NULL || q->limitOffset != NULL ||
		q->distinctClause != NIL || q->cteList != NIL || q->hasSubLinks || q->hasTargetSRFs ||
		q->rowMarks != NIL)
		bad_query("It may choose columns and filter rows, nothing more: no joins, grouping, ordering, limits or subqueries, but the grouping or ranking of a window table function's rows.");
	if (q->hasAggs || q->groupClause != NIL || q->hasWindowFuncs || q->havingQual != NULL ||
		single_ptf_call(q) == NULL)
	{
		*function = check_planned_pipeline_query(q, query, uid);
		*bound = bind_query(q);
		return;
	}
	fe = single_ptf_call(q);
	name = get_func_name(fe->funcid);
	if (!pipeline_function(name))
		bad_query(psprintf("%s is not one of ptf.deduplicate_keep_first, ptf.to_changelog, "
						   "ptf.from_changelog, ptf.tumble, ptf.hop, ptf.cumulate, ptf.window_aggregate, "
						   "ptf.temporal_join.",
						   format_procedure(fe->funcid)));
	stream_arguments(fe, uid);
	*function = name;
	*bound = bind_query(q);
}

/* The pipeline's row, as the caller may see it; false when there is none. */
static bool
find_pipeline(const char *name, int32 *id, Oid *owner, char **uid)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};
	bool		isnull;

	ptf_spi_exec_as_owner("SELECT id, owner, uid FROM ptf.pipeline_registry "
						  "WHERE name OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;
	*id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (uid)
		*uid = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	return true;
}

static void
check_pipeline_owner(const char *name, Oid owner)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of pipeline \"%s\"", name),
				 errdetail("Pipelines are named per database, and another role made this one.")));
}

static void
check_sink_privileges(Oid sink, bool changelog)
{
	AclMode		need = changelog ? (ACL_INSERT | ACL_UPDATE | ACL_DELETE) : ACL_INSERT;

	if (pg_class_aclmask(sink, GetUserId(), need, ACLMASK_ALL) != need)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(sink)),
				 errdetail(changelog ? "A changelog sink needs INSERT, UPDATE and DELETE." :
						   "An append sink needs INSERT.")));
}

/* the statement of an append step */
static char *
append_sql(Oid sink, const char *query)
{
	return psprintf("INSERT INTO %s SELECT * FROM (%s) AS q", ptf_relation_sql_name(sink), query);
}

/* The uid's first call: its slot is made, nothing is read. */
static void
start_stream(const char *query)
{
	PtfStep		step;
	PtfStep    *previous;

	memset(&step, 0, sizeof(step));
	step.start_only = true;
	previous = ptf_step_begin(&step);
	PG_TRY();
	{
		/*
		 * The query as it is, not wrapped (SELECT count(*) FROM (...)): what
		 * a planned grouping computes is part of its uid's state, and an
		 * outer query using no column would leave its aggregates out.  A
		 * first call reads nothing: there are no rows to discard.
		 */
		if (SPI_execute(query, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not start the pipeline's stream");
	}
	PG_FINALLY();
	{
		ptf_step_end(previous);
	}
	PG_END_TRY();
}

/*
 * A pipeline is not dropped from within its own step (a sink's trigger):
 * the drop would wait for the step to let go of the pipeline's origin,
 * which the step holds until it ends -- the worker waited on itself, and
 * every pipeline it runs with it.
 */
static void
refuse_own_step(int32 id)
{
	if (replorigin_session_origin == InvalidRepOriginId ||
		replorigin_session_origin != replorigin_by_name(ptf_pipeline_origin_name(MyDatabaseId, id), true))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("a pipeline cannot be dropped from within its own step"),
			 errdetail("A trigger of its sink, or a function its query calls, asked for the drop while the step runs."),
			 errhint("Drop the pipeline from another session; ptf.pause_pipeline may be called from within the step.")));
}

/*
 * A pipeline goes with its state, slot and origin.  The slot goes once the
 * transaction commits (slots are not transactional): a drop rolled back
 * leaves the pipeline with its stream.
 */
static void
drop_pipeline_by_id(int32 id, const char *uid)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(id)};
	char	   *slot_name;

	refuse_own_step(id);
	/* a step in progress finishes first */
	(void) ptf_lock(PTF_LOCK_PIPELINE, (uint32) id, ExclusiveLock, false, true);
	ptf_spi_exec_as_owner("DELETE FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_DELETE);
	if (durable_drop(uid, true, &slot_name) && slot_name != NULL)
		change_stream_drop_slot_at_commit(slot_name);
	/* waits for a worker that has just committed a step to let it go */
	replorigin_drop_by_name(ptf_pipeline_origin_name(MyDatabaseId, id), true, false);
	wake_worker_at_commit();
}

/* ids and uids of the pipelines of owner (all of them: InvalidOid) */
static void
list_pipelines(Oid owner, List **ids, List **uids)
{
	Oid			argtypes[1] = {REGROLEOID};
	Datum		args[1] = {ObjectIdGetDatum(owner)};
	uint64		i;

	ptf_spi_exec_as_owner(OidIsValid(owner) ?
						  "SELECT id, uid FROM ptf.pipeline_registry "
						  "WHERE owner OPERATOR(pg_catalog.=) $1 ORDER BY id" :
						  "SELECT id, uid FROM ptf.pipeline_registry ORDER BY id",
						  OidIsValid(owner) ? 1 : 0, argtypes, args, NULL, SPI_OK_SELECT);
	*ids = NIL;
	*uids = NIL;
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		*ids = lappend_int(*ids, DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 1, &isnull)));
		*uids = lappend(*uids, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
	}
}

void
ptf_drop_pipelines_of(Oid owner)
{
	List	   *ids;
	List	   *uids;
	ListCell   *lc1,
			   *lc2;

	list_pipelines(owner, &ids, &uids);
	forboth(lc1, ids, lc2, uids)
		drop_pipeline_by_id(lfirst_int(lc1), lfirst(lc2));
}

void
ptf_drop_pipeline_origins(void)
{
	List	   *ids;
	List	   *uids;
	ListCell   *lc;

	/* another room's pipelines go too (Citus: the distributed catalog) */
	if (ptf_pipeline_hooks.drop_extension)
		ptf_pipeline_hooks.drop_extension();
	list_pipelines(InvalidOid, &ids, &uids);
	foreach(lc, ids)
	{
		int32		id = lfirst_int(lc);

		refuse_own_step(id);
		(void) ptf_lock(PTF_LOCK_PIPELINE, (uint32) id, ExclusiveLock, false, true);
		replorigin_drop_by_name(ptf_pipeline_origin_name(MyDatabaseId, id), true, false);
	}
	if (ids != NIL)
		wake_worker_at_commit();
}

/* ---- the functions ---- */

Datum
ptf_create_pipeline(PG_FUNCTION_ARGS)
{
	char	   *name = required_text(fcinfo, 0, "name");
	char	   *query = required_text(fcinfo, 1, "query");
	Oid			sink;
	char	   *mode;
	bool		changelog;
	char	   *function;
	char	   *uid;
	char		relkind;
	Oid			argtypes[1] = {TEXTOID};
	Oid			iargtypes[9] = {INT4OID, TEXTOID, OIDOID, TEXTOID, OIDOID, TEXTOID, TEXTOID,
	TEXTOID, TEXTOID};
	Datum		args[9];
	int32		id;
	Oid			owner;
	bool		isnull;
	char	   *origin_name;
	RepOriginId origin;
	char	   *bound;
	int			nest;

	if (!ptf_shmem_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pipelines need deduplicate_keep_first in shared_preload_libraries"),
				 errhint("Add it to shared_preload_libraries in postgresql.conf and restart the server.")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sink must not be NULL")));
	sink = PG_GETARG_OID(2);
	mode = required_text(fcinfo, 3, "sink_mode");
	if (strcmp(mode, "append") != 0 && strcmp(mode, "changelog") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sink_mode must be 'append' or 'changelog', not '%s'", mode)));
	changelog = (strcmp(mode, "changelog") == 0);
	relkind = get_rel_relkind(sink);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the sink of a pipeline must be a table")));
	check_sink_privileges(sink, changelog);
	check_pipeline_query(query, &function, &uid, &bound);

	/* another room's pipeline (Citus: a pipeline per shard group, src/citus/create.c) */
	if (ptf_pipeline_hooks.create && ptf_pipeline_hooks.create(name, bound, sink, mode))
		PG_RETURN_VOID();

	/* from here on the query is the bound one, under the path the worker will use */
	query = bound;
	nest = enter_pipeline_search_path();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (find_pipeline(name, &id, &owner, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("pipeline \"%s\" already exists", name),
				 has_privs_of_role(GetUserId(), owner) ? 0 :
				 errdetail("Pipelines are named per database, and another role made this one.")));
	args[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT name, owner FROM ptf.pipeline_registry WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		Oid			other = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 2, &isnull));

		/* another role's pipeline is not named: names say what roles do */
		if (!has_privs_of_role(GetUserId(), other))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("uid \"%s\" is already in use", uid),
					 errdetail("Uids are named per database, and another role made this one."),
					 errhint("Choose another uid.")));
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("uid \"%s\" is already the state of pipeline \"%s\"", uid,
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1))));
	}

	/* the rows must fit the sink */
	if (changelog)
	{
		PtfSqlInput in;

		memset(&in, 0, sizeof(in));
		in.query = query;
		in.rowdesc = lookup_rowtype_tupdesc_copy(get_rel_type_id(sink), -1);
		sql_input_prepare(&in);
		if (!in.changelog)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("sink_mode 'changelog' needs a query returning (kind, data) rows of the sink's type"),
					 errhint("ptf.from_changelog returns such rows.")));
	}
	else if (SPI_prepare(append_sql(sink, query), 0, NULL) == NULL)
		elog(ERROR, "could not plan the pipeline's statement: %s",
			 SPI_result_code_string(SPI_result));

	/*
	 * The stream starts now: the uid's first call makes its slot, and reads
	 * nothing -- the worker's first step reads all from there, under the
	 * pipeline's origin.  It comes before this transaction writes anything
	 * (a slot cannot be made after).  A uid that has state already goes on
	 * from it, if it is the caller's.
	 */
	args[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT owner FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		durable_check_owner(uid, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
																SPI_tuptable->tupdesc, 1, &isnull)));
	}
	else
	{
		start_stream(query);
	}

	/* the pipeline's number, and the replication origin its writes carry */
	ptf_spi_exec_as_owner("SELECT pg_catalog.nextval('ptf.pipeline_registry_id_seq')",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	origin_name = ptf_pipeline_origin_name(MyDatabaseId, id);
	origin = replorigin_by_name(origin_name, true);
	if (origin == InvalidRepOriginId)
		origin = replorigin_create(origin_name);
	CommandCounterIncrement();

	args[0] = Int32GetDatum(id);
	args[1] = CStringGetTextDatum(name);
	args[2] = ObjectIdGetDatum(GetUserId());
	args[3] = CStringGetTextDatum(query);
	args[4] = ObjectIdGetDatum(sink);
	args[5] = CStringGetTextDatum(mode);
	args[6] = CStringGetTextDatum(function);
	args[7] = CStringGetTextDatum(uid);
	args[8] = CStringGetTextDatum(PIPELINE_SEARCH_PATH);
	ptf_register_pipeline("INSERT INTO ptf.pipeline_registry "
						  "(id, name, owner, query, sink, sink_mode, function, uid, search_path) "
						  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
						  9, iargtypes, args);
	SPI_finish();
	AtEOXact_GUC(true, nest);
	wake_worker_at_commit();
	PG_RETURN_VOID();
}

Datum
ptf_drop_pipeline(PG_FUNCTION_ARGS)
{
	char	   *name = required_text(fcinfo, 0, "name");
	int32		id;
	Oid			owner;
	char	   *uid;
	bool		dropped = false;

	/* another room's pipeline (Citus: gone from every node, src/citus/create.c) */
	if (ptf_pipeline_hooks.drop && ptf_pipeline_hooks.drop(name, &dropped))
		PG_RETURN_BOOL(dropped);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!find_pipeline(name, &id, &owner, &uid))
	{
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	check_pipeline_owner(name, owner);
	drop_pipeline_by_id(id, uid);
	SPI_finish();
	PG_RETURN_BOOL(true);
}

static void
set_paused(FunctionCallInfo fcinfo, bool paused)
{
	char	   *name = required_text(fcinfo, 0, "name");
	int32		id;
	Oid			owner;
	Oid			argtypes[2] = {INT4OID, BOOLOID};
	Datum		args[2];

	/* another room's pipeline (Citus: paused on every node, src/citus/create.c) */
	if (ptf_pipeline_hooks.set_paused && ptf_pipeline_hooks.set_paused(name, paused))
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!find_pipeline(name, &id, &owner, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline \"%s\" does not exist", name)));
	check_pipeline_owner(name, owner);
	args[0] = Int32GetDatum(id);
	args[1] = BoolGetDatum(paused);
	/* a step in progress finishes first; later ones see the change */
	(void) ptf_lock(PTF_LOCK_PIPELINE, (uint32) id, ExclusiveLock, false, true);
	ptf_spi_exec_as_owner("UPDATE ptf.pipeline_registry SET paused = $2 "
						  "WHERE id OPERATOR(pg_catalog.=) $1",
						  2, argtypes, args, NULL, SPI_OK_UPDATE);
	SPI_finish();
	wake_worker_at_commit();
}

Datum
ptf_pause_pipeline(PG_FUNCTION_ARGS)
{
	set_paused(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
ptf_resume_pipeline(PG_FUNCTION_ARGS)
{
	set_paused(fcinfo, false);
	PG_RETURN_VOID();
}

static const char *
state_name(PipelineState s)
{
	switch (s)
	{
		case PIPELINE_RUNNING:
			return "running";
		case PIPELINE_PAUSED:
			return "paused";
		case PIPELINE_FAILING:
			return "failing";
		default:
			return "waiting";
	}
}

/* Where this database's slot of that name is confirmed to; invalid if none. */
static XLogRecPtr
slot_confirmed(const char *slot_name)
{
	ReplicationSlot *slot;
	XLogRecPtr	confirmed = InvalidXLogRecPtr;

	if (slot_name == NULL)
		return InvalidXLogRecPtr;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(slot_name, false);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		if (slot->data.database == MyDatabaseId)
			confirmed = slot->data.confirmed_flush;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return confirmed;
}

/* ptf._pipeline_status()'s columns (1.0 declared the first 13) */
#define STATUS_COLUMNS 14

/* The live status of the caller's pipelines, from the worker's shared memory. */
Datum
ptf_pipeline_status_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(GetUserId())};
	TimestampTz now = GetCurrentTimestamp();
	bool		in_recovery = RecoveryInProgress();
	XLogRecPtr	flush = in_recovery ? InvalidXLogRecPtr : GetFlushRecPtr(NULL);
	XLogRecPtr	insert = in_recovery ? InvalidXLogRecPtr : GetXLogInsertRecPtr();
	uint64		i;

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ptf_spi_exec_as_owner("SELECT p.id, p.name, p.paused, u.slot_name "
						  "FROM ptf.pipeline_registry p LEFT JOIN ptf.uid_registry u "
						  "  ON u.uid OPERATOR(pg_catalog.=) p.uid "
						  "WHERE pg_catalog.pg_has_role($1, p.owner, 'USAGE') ORDER BY p.name",
						  1, argtypes, args, NULL, SPI_OK_SELECT);

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		bool		paused = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		PipelineStatus st;
		bool		have = false;
		bool		worker_alive = false;
		int32		stepping = 0;
		XLogRecPtr	read_upto = InvalidXLogRecPtr;
		bool		pending;
		Datum		values[STATUS_COLUMNS];
		bool		nulls[STATUS_COLUMNS];

		memset(nulls, 0, sizeof(nulls));
		if (ptf_shmem_available())
		{
			PipelineStatus *s;

			ptf_shmem_lock(false);
			s = ptf_pipeline_status(MyDatabaseId, id, false);
			if (s != NULL)
			{
				/* the worker it is assigned to, running now */
				DatabaseWorker *w = ptf_database_worker_of_pid(MyDatabaseId, s->pid);

				st = *s;
				have = true;
				worker_alive = (w != NULL);
				if (worker_alive)
					stepping = w->stepping;
			}
			ptf_shmem_unlock();
		}

		/*
		 * WAL written after what it read last (or, never stepped, after its
		 * slot) may hold changes for it: it is not caught up, whatever its
		 * last step found.
		 */
		if (have && !XLogRecPtrIsInvalid(st.read_upto))
			read_upto = st.read_upto;
		else
			read_upto = slot_confirmed(SPI_getvalue(tup, desc, 4));
		pending = !XLogRecPtrIsInvalid(read_upto) && insert > read_upto;
		values[13] = Int64GetDatum(pending ? (int64) (insert - read_upto) : 0);
		nulls[13] = XLogRecPtrIsInvalid(read_upto) || XLogRecPtrIsInvalid(insert);

		values[0] = CStringGetTextDatum(SPI_getvalue(tup, desc, 2));
		if (paused)
			values[1] = CStringGetTextDatum("paused");
		else if (!have || !worker_alive)
			values[1] = CStringGetTextDatum("waiting");
		else if (st.state == PIPELINE_RUNNING && pending && stepping != 0 && stepping != id)
			values[1] = CStringGetTextDatum("waiting");	/* behind another's step on its worker */
		else
			values[1] = CStringGetTextDatum(state_name(st.state));
		if (!have)
		{
			int			k;

			for (k = 2; k < 13; k++)
				nulls[k] = true;
		}
		else
		{
			values[2] = Int32GetDatum(st.pid);
			nulls[2] = !worker_alive;
			values[3] = Int64GetDatum((int64) st.rows_in);
			values[4] = Int64GetDatum((int64) st.rows_out);
			values[5] = Int64GetDatum((int64) st.rows_late);
			values[6] = Int64GetDatum((int64) st.rows_skipped);
			values[7] = LSNGetDatum(st.position);
			nulls[7] = XLogRecPtrIsInvalid(st.position);
			values[8] = Int64GetDatum(flush > st.position ? (int64) (flush - st.position) : 0);
			nulls[8] = nulls[7] || XLogRecPtrIsInvalid(flush);
			/*
			 * How old the newest change it has written is, unless it is
			 * caught up.  When its last step read all there was, what was
			 * written since is younger than that step: its age is at most
			 * the time since the step began.
			 */
			if (st.state == PIPELINE_RUNNING && st.caught_up && !pending)
				values[9] = Float8GetDatum(0.0);
			else if (st.state == PIPELINE_RUNNING && st.caught_up && st.read_at != 0)
				values[9] = Float8GetDatum((double) Max(now - st.read_at, 0) / 1000000.0);
			else if (st.last_change_at != 0)
				values[9] = Float8GetDatum((double) (now - st.last_change_at) / 1000000.0);
			else
				nulls[9] = true;
			values[10] = TimestampTzGetDatum(st.last_step_at);
			nulls[10] = (st.last_step_at == 0);
			values[11] = Int32GetDatum(st.failures);
			values[12] = CStringGetTextDatum(st.last_error);
			nulls[12] = (st.last_error[0] == '\0');
		}
		/* under 1.0's declaration, until ALTER EXTENSION ... UPDATE, its first 13 */
		Assert(rsinfo->setDesc->natts <= STATUS_COLUMNS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
