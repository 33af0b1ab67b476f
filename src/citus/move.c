/*-------------------------------------------------------------------------
 *
 * move.c
 *	  Citus's shard operations, while distributed pipelines run: moves
 *	  carry each shard group's pipeline to the group's new node, exactly
 *	  once; splits, copies and redistributions are refused.
 *
 * Citus has no hook for its operations, but it runs them all through SQL
 * functions -- citus_move_shard_placement, called by a user, by the
 * rebalancer's background tasks and by rebalance_table_shards alike, and
 * on the nodes lock_shard_metadata, by which a move blocks the group's
 * writes -- so a planner hook puts functions of ours, of the same
 * arguments, in their place in any query planned (ptf._citus_move and
 * the others of the 1.2 script).  Each does its part and calls Citus's
 * function, unchanged.
 *
 * A move of a group with pipelines, from node A to node B, both modes
 * (block_writes copies under blocked writes; force_logical replicates and
 * blocks writes at the end):
 *
 *	before Citus: B makes the pipeline's slot (shard.c, incoming) -- now,
 *	  as nothing of the move runs on B yet (a logical slot waits for every
 *	  transaction that has written);
 *	Citus: blocks the group's writes by taking the group's metadata lock on
 *	  the coordinator and then, through lock_shard_metadata, on the nodes;
 *	  on A, once it holds it, the pipeline catches up with all that was
 *	  committed (drain.c) -- so its sink rows are in what Citus copies
 *	  next, by COPY (block_writes) or by the final catch-up of its
 *	  replication (logical); the pipeline's steps are fenced off from then
 *	  on (fence.c); the placements change;
 *	after Citus, writes still blocked, before the move commits: the state
 *	  goes to B and the position B's stream starts from is written with the
 *	  move (handoff.c).  Its commit hands the group to B -- or, failing,
 *	  leaves it, pipeline and all, on A.
 *
 * Citus's reference tables are not blocked by a move.  A pipeline that
 * reads one (a temporal join's build side) reads it on both nodes: its
 * changes must cut the same on A and B, so the reference tables are
 * locked (LOCK ... IN SHARE MODE, which Citus takes on every node) while
 * the state is handed over, and a change that reached A after Citus's
 * block and would write rows makes the move fail, to be tried again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/parse_func.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/meta.h"
#include "citus/move.h"
#include "citus/shard.h"

PG_FUNCTION_INFO_V1(ptf_citus_intercept);

typedef enum Intercepted
{
	INTERCEPT_MOVE,
	INTERCEPT_MOVE_NODEID,
	INTERCEPT_COPY,
	INTERCEPT_SPLIT,
	INTERCEPT_ISOLATE,
	INTERCEPT_ALTER,
	INTERCEPT_UNDISTRIBUTE,
	INTERCEPT_LOCK
} Intercepted;

/* Citus's function (pg_catalog, by name and number of arguments) and ours */
typedef struct Redirect
{
	const char *citus;
	int			nargs;
	const char *ours;
	Intercepted what;
	Oid			citus_oid;		/* resolved */
	Oid			our_oid;
} Redirect;

static Redirect redirects[] = {
	{"citus_move_shard_placement", 6, "_citus_move", INTERCEPT_MOVE},
	{"master_move_shard_placement", 6, "_citus_move", INTERCEPT_MOVE},
	{"citus_move_shard_placement", 4, "_citus_move", INTERCEPT_MOVE_NODEID},
	{"citus_copy_shard_placement", 6, "_citus_refuse_copy", INTERCEPT_COPY},
	{"citus_copy_shard_placement", 4, "_citus_refuse_copy", INTERCEPT_COPY},
	{"citus_split_shard_by_split_points", 4, "_citus_refuse_split", INTERCEPT_SPLIT},
	{"isolate_tenant_to_new_shard", 4, "_citus_refuse_isolate", INTERCEPT_ISOLATE},
	{"alter_distributed_table", 5, "_citus_refuse_alter", INTERCEPT_ALTER},
	{"undistribute_table", 2, "_citus_refuse_undistribute", INTERCEPT_UNDISTRIBUTE},
	{"lock_shard_metadata", 2, "_citus_lock_shard_metadata", INTERCEPT_LOCK},
};

static bool redirects_valid = false;
static bool any_redirect = false;
static planner_hook_type prev_planner_hook = NULL;

static void
invalidate_redirects(Datum arg, int cacheid, uint32 hashvalue)
{
	redirects_valid = false;
}

/* Citus's function of that name and number of arguments in pg_catalog */
static Oid
citus_function(const char *name, int nargs, Oid *argtypes)
{
	CatCList   *list = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum(name));
	Oid			found = InvalidOid;
	int			i;

	for (i = 0; i < list->n_members; i++)
	{
		HeapTuple	tup = &list->members[i]->tuple;
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);

		if (proc->pronamespace == PG_CATALOG_NAMESPACE && proc->pronargs == nargs)
		{
			found = proc->oid;
			memcpy(argtypes, proc->proargtypes.values, sizeof(Oid) * nargs);
			break;
		}
	}
	ReleaseSysCacheList(list);
	return found;
}

static void
resolve_redirects(void)
{
	size_t		i;
	Oid			ptf = get_namespace_oid("ptf", true);

	any_redirect = false;
	for (i = 0; i < lengthof(redirects); i++)
	{
		Redirect   *r = &redirects[i];
		Oid			argtypes[FUNC_MAX_ARGS];
		int			k;

		r->citus_oid = r->our_oid = InvalidOid;
		if (!OidIsValid(ptf))
			continue;
		r->citus_oid = citus_function(r->citus, r->nargs, argtypes);
		if (!OidIsValid(r->citus_oid))
			continue;
		/* Citus's enums are anyenum in ours */
		for (k = 0; k < r->nargs; k++)
			if (type_is_enum(argtypes[k]))
				argtypes[k] = ANYENUMOID;
		r->our_oid = LookupFuncName(list_make2(makeString("ptf"), makeString((char *) r->ours)),
									r->nargs, argtypes, true);
		any_redirect |= OidIsValid(r->our_oid);
	}
	redirects_valid = true;
}

static bool
redirect_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr))
	{
		FuncExpr   *fe = (FuncExpr *) node;
		size_t		i;

		for (i = 0; i < lengthof(redirects); i++)
			if (redirects[i].citus_oid == fe->funcid && OidIsValid(redirects[i].our_oid))
			{
				HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fe->funcid));

				if (!HeapTupleIsValid(tup))
					break;
				/* named arguments placed and defaults filled by Citus's declaration */
				fe->args = expand_function_arguments(fe->args, false, fe->funcresulttype, tup);
				ReleaseSysCache(tup);
				fe->funcid = redirects[i].our_oid;
				break;
			}
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, redirect_walker, context, 0);
	return expression_tree_walker(node, redirect_walker, context);
}

static PlannedStmt *
citus_planner(Query *parse, const char *query_string, int cursorOptions,
			  ParamListInfo boundParams)
{
	if (!redirects_valid && IsTransactionState())
	{
		if (ptf_citus_present())
			resolve_redirects();
		else
		{
			any_redirect = false;
			redirects_valid = true;
		}
	}
	if (any_redirect && parse->commandType != CMD_UTILITY)
		(void) redirect_walker((Node *) parse, NULL);
	if (prev_planner_hook)
		return prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

void
citus_move_init(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = citus_planner;
	CacheRegisterSyscacheCallback(PROCOID, invalidate_redirects, (Datum) 0);
}

/* ---- calling Citus's function ---- */

static Redirect *
redirect_of(Oid our_oid, int nargs)
{
	size_t		i;

	if (!redirects_valid)
		resolve_redirects();
	for (i = 0; i < lengthof(redirects); i++)
		if (redirects[i].our_oid == our_oid && redirects[i].nargs == nargs &&
			OidIsValid(redirects[i].citus_oid))
			return &redirects[i];
	elog(ERROR, "function %u stands for no Citus function", our_oid);
	return NULL;
}

static Datum
call_citus(FunctionCallInfo fcinfo, Oid citus_oid)
{
	FmgrInfo	target;
	FmgrInfo   *ours = fcinfo->flinfo;
	Datum		result;
	int			i;

	fmgr_info(citus_oid, &target);
	target.fn_expr = ours->fn_expr;
	if (target.fn_strict)
		for (i = 0; i < fcinfo->nargs; i++)
			if (fcinfo->args[i].isnull)
			{
				fcinfo->isnull = true;
				return (Datum) 0;
			}
	fcinfo->flinfo = &target;
	PG_TRY();
	{
		result = FunctionCallInvoke(fcinfo);
	}
	PG_FINALLY();
	{
		fcinfo->flinfo = ours;
	}
	PG_END_TRY();
	return result;
}

/* ---- refusals ---- */

static void
refuse_for(const DistPipeline *d, const char *operation, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot %s while pipeline \"%s\" runs over it", operation, d->name),
			 errdetail("Pipelines run per shard group and follow moves of whole groups; %s would change the groups under them.",
					   operation),
			 errhint("%s", hint)));
}

static DistPipeline *
pipeline_over(Oid relid)
{
	CitusTable	t;
	List	   *pipes;
	ListCell   *lc;
	char	   *name;

	if (!dist_catalog_exists())
		return NULL;
	citus_table(relid, &t);
	if (t.kind == CITUS_HASH)
	{
		pipes = dist_pipelines_of_colocation(t.colocation_id);
		return pipes != NIL ? linitial(pipes) : NULL;
	}
	/* a reference table a pipeline reads, or its source or sink by name */
	name = ptf_relation_sql_name(relid);
	ptf_spi_exec_as_owner("SELECT name FROM ptf_citus.pipelines ORDER BY name", 0, NULL, NULL,
						  NULL, SPI_OK_SELECT);
	pipes = NIL;
	{
		uint64		i;

		for (i = 0; i < SPI_processed; i++)
			pipes = lappend(pipes, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	}
	foreach(lc, pipes)
	{
		DistPipeline *d = palloc(sizeof(DistPipeline));

		if (dist_pipeline(lfirst(lc), d) &&
			(strcmp(d->source, name) == 0 || strcmp(d->sink, name) == 0 ||
			 strstr(d->query, name) != NULL))
			return d;
	}
	return NULL;
}

static void
check_refused(Intercepted what, FunctionCallInfo fcinfo)
{
	DistPipeline *d = NULL;
	Oid			relid = InvalidOid;

	if (PG_ARGISNULL(0))
		return;
	if (what == INTERCEPT_COPY || what == INTERCEPT_SPLIT)
	{
		CitusTable	t;

		relid = citus_shard_owner_table(PG_GETARG_INT64(0));
		if (!OidIsValid(relid))
			return;

		/*
		 * Copies of a reference table's placement (replicate_reference_tables
		 * and the rebalancer, for a node added) change no shard group, and
		 * must not read ptf_citus.pipelines: a reference table read here,
		 * locally, makes Citus refuse the copy that follows in the
		 * transaction -- a node added could never get its reference tables.
		 */
		citus_table(relid, &t);
		if (t.kind != CITUS_HASH)
			return;
	}
	else
		relid = PG_GETARG_OID(0);
	if (OidIsValid(relid))
		d = pipeline_over(relid);
	if (d == NULL)
		return;
	switch (what)
	{
		case INTERCEPT_COPY:
			refuse_for(d, "copy a shard placement",
					   psprintf("A shard group runs one pipeline, on its one placement.  Drop pipeline \"%s\" first.",
								d->name));
			break;
		case INTERCEPT_SPLIT:
		case INTERCEPT_ISOLATE:
			refuse_for(d, "split a shard",
					   psprintf("A split is not followed exactly once (its new groups would need their parent's state split by hash).  Move shard groups instead (citus_move_shard_placement, citus_rebalance_start); or drop pipeline \"%s\", split, and create it again with snapshot => true.",
								d->name));
			break;
		case INTERCEPT_ALTER:
		case INTERCEPT_UNDISTRIBUTE:
			refuse_for(d, "redistribute a table",
					   psprintf("The table is made anew, its shards and their changes with it.  Drop pipeline \"%s\" first, and create it again after.",
								d->name));
			break;
		default:
			break;
	}
}

/* ---- lock_shard_metadata, on the nodes ---- */

static void
drain_locked_groups(FunctionCallInfo fcinfo)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int64	   *shards;
	int			i;
	ListCell   *lc;

	/* writes are blocked by ExclusiveLock or stronger: what Citus's moves take */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_GETARG_INT32(0) < ExclusiveLock)
		return;
	arr = PG_GETARG_ARRAYTYPE_P(1);
	deconstruct_array(arr, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
	shards = palloc(sizeof(int64) * Max(n, 1));
	for (i = 0; i < n; i++)
		shards[i] = nulls[i] ? 0 : DatumGetInt64(elems[i]);
	foreach(lc, shard_pipelines_of_shards(shards, n))
		citus_drain(lfirst(lc));
}

/* ---- a move ---- */

static char *
q(const char *s)
{
	return quote_literal_cstr(s);
}

/* a prepared (two-phase) transaction still holding a lock on the table there */
static void
check_no_prepared_writers(const CitusNode *node, const char *shard_table)
{
	char	   *n = citus_run_one(node, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks "
												 "WHERE relation OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s) AND pid IS NULL",
												 q(shard_table)));

	if (strcmp(n, "0") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("a transaction prepared by Citus still writes %s on node %s:%d",
						shard_table, node->host, node->port),
				 errdetail("It would commit there after the pipeline's state is cut: its change could be read twice or not at all."),
				 errhint("Move the shard group again once Citus has committed it (citus.recover_2pc_interval).")));
}

/*
 * The reference tables the pipelines read: Citus writes them with two
 * phases, in its own order on each node; locked in SHARE mode here (on
 * every node), none is in its commit phase while the cut is made.
 */
static void
lock_reference_tables(List *pipes, const CitusNode *from, const CitusNode *to)
{
	ListCell   *lc;

	foreach(lc, pipes)
	{
		DistPipeline *d = lfirst(lc);
		PipelineCall pc;
		int			i;

		pipeline_call(d->query, &pc);
		for (i = 0; i < pc.nargs; i++)
		{
			Oid			relid = pipeline_call_relid(&pc, pc.argnames[i]);
			CitusTable	t;
			CitusShard	s;
			char	   *shard_table;

			if (!OidIsValid(relid))
				continue;
			citus_table(relid, &t);
			if (t.kind != CITUS_REFERENCE || !citus_shard_at(relid, 0, &s))
				continue;
			ptf_spi_exec_as_owner(psprintf("LOCK TABLE %s IN SHARE MODE", ptf_relation_sql_name(relid)),
								  0, NULL, NULL, NULL, SPI_OK_UTILITY);
			ptf_spi_exec_as_owner(psprintf("SELECT pg_catalog.shard_name(%u, %lld, false)", relid,
										   (long long) s.shardid),
								  0, NULL, NULL, NULL, SPI_OK_SELECT);
			shard_table = ptf_spi_text(1);
			check_no_prepared_writers(from, shard_table);
			check_no_prepared_writers(to, shard_table);
		}
	}
}

typedef struct Carried
{
	DistPipeline *d;
	int64		shard;			/* of its source table, in the moved group */
} Carried;

static Datum
intercept_move(FunctionCallInfo fcinfo, Redirect *r)
{
	int64		shard = PG_GETARG_INT64(0);
	CitusNode	from;
	CitusNode	to;
	Oid			table;
	CitusTable	t;
	CitusShard	s;
	List	   *pipes;
	List	   *carried = NIL;
	ListCell   *lc;
	char	   *token;
	char	   *start;
	Datum		result;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	table = citus_shard_owner_table(shard);
	citus_table(table, &t);

	/*
	 * Citus takes this lock too, later: taken first, a create_pipeline of
	 * the group under way commits before the group's pipelines are read --
	 * as of now -- so that the move carries it too.
	 */
	if (t.kind == CITUS_HASH)
		citus_lock_colocation(t.colocation_id, RowExclusiveLock);
	PushActiveSnapshot(GetLatestSnapshot());
	pipes = (dist_catalog_exists() && t.kind == CITUS_HASH) ?
		dist_pipelines_of_colocation(t.colocation_id) : NIL;
	PopActiveSnapshot();
	if (pipes == NIL)
	{
		SPI_finish();
		return call_citus(fcinfo, r->citus_oid);
	}
	if (r->what == INTERCEPT_MOVE_NODEID ?
		(!citus_node_by_id(PG_GETARG_INT32(1), &from) || !citus_node_by_id(PG_GETARG_INT32(2), &to)) :
		(!citus_node_by_name(text_to_cstring(PG_GETARG_TEXT_PP(1)), PG_GETARG_INT32(2), &from) ||
		 !citus_node_by_name(text_to_cstring(PG_GETARG_TEXT_PP(3)), PG_GETARG_INT32(4), &to)))
	{
		/* not nodes of the cluster: Citus says so */
		SPI_finish();
		return call_citus(fcinfo, r->citus_oid);
	}
	(void) citus_shard_of(table, shard, &s);
	if (from.groupid == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot move shard %lld off the coordinator while pipeline \"%s\" runs over it",
						(long long) shard, ((DistPipeline *) linitial(pipes))->name),
				 errdetail("Citus blocks a group's writes on the coordinator without telling the group's node, so its pipeline cannot catch up at the right moment."),
				 errhint("Keep pipelines' shard groups on worker nodes (citus_set_node_property('...', ..., 'shouldhaveshards', false) before distributing), or drop the pipeline for the move.")));

	foreach(lc, pipes)
	{
		DistPipeline *d = lfirst(lc);
		Carried    *c = palloc(sizeof(Carried));
		CitusShard	own;

		if (d->paused)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot move shard %lld while pipeline \"%s\" over it is paused",
							(long long) shard, d->name),
					 errdetail("A move needs the group's pipeline to catch up with all that was written before the group moves."),
					 errhint("SELECT ptf.resume_pipeline('%s'), then move; or drop it.", d->name)));
		if (!citus_shard_at(DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(d->source))),
							s.index, &own))
			elog(ERROR, "source of pipeline \"%s\" has no shard %d", d->name, s.index);
		c->d = d;
		c->shard = own.shardid;
		carried = lappend(carried, c);
	}

	/* before Citus: the new node's slots */
	token = citus_new_token();
	foreach(lc, carried)
	{
		Carried    *c = lfirst(lc);

		(void) citus_run_one(&to, psprintf("SELECT ptf._citus_shard_forget(%s, %lld, '')",
										   q(c->d->name), (long long) c->shard));
		(void) citus_run_one(&to, psprintf("SELECT ptf._citus_shard_prepare(%s, '', '', '', %s, %lld, true)",
										   q(c->d->name), q(token), (long long) c->shard));
	}

	/*
	 * Citus: the group's pipelines on the old node catch up when it blocks
	 * writes.  (Still connected to SPI, whose memory holds what comes next;
	 * Citus's own SPI calls nest.)
	 */
	result = call_citus(fcinfo, r->citus_oid);

	/* after: the state goes, before the move commits (see the header) */
	lock_reference_tables(pipes, &from, &to);
	foreach(lc, carried)
	{
		Carried    *c = lfirst(lc);
		char	   *export;
		char	   *state_table;

		export = citus_run_one(&from, psprintf("SELECT ptf._citus_handoff_export(%s, %lld, %s)",
											   q(c->d->name), (long long) c->shard, q(token)));
		state_table = citus_run_one(&to, psprintf("SELECT ptf._citus_handoff_receive(%s, %lld, %s, %s)",
												  q(c->d->name), (long long) c->shard, q(token),
												  q(export)));
		(void) citus_run_one(&from, psprintf("SELECT ptf._citus_handoff_send(%s, %lld, %s, %s, %d)",
											 q(c->d->name), (long long) c->shard, q(token),
											 q(state_table), to.nodeid));
	}
	start = citus_run_one(&to, "SELECT pg_catalog.pg_current_wal_insert_lsn()");
	foreach(lc, carried)
	{
		Carried    *c = lfirst(lc);
		Oid			types[5] = {TEXTOID, INT8OID, TEXTOID, INT4OID, TEXTOID};
		Datum		values[5];

		values[0] = CStringGetTextDatum(c->d->name);
		values[1] = Int64GetDatum(c->shard);
		values[2] = CStringGetTextDatum(token);
		values[3] = Int32GetDatum(to.groupid);
		values[4] = CStringGetTextDatum(start);
		ptf_spi_exec_as_owner("DELETE FROM ptf_citus.handoffs WHERE name OPERATOR(pg_catalog.=) $1 "
							  "AND shard OPERATOR(pg_catalog.=) $2",
							  2, types, values, NULL, SPI_OK_DELETE);
		ptf_spi_exec_as_owner("INSERT INTO ptf_citus.handoffs (name, shard, token, target_group, start_lsn, state) "
							  "VALUES ($1, $2, $3, $4, $5::pg_catalog.pg_lsn, '')",
							  5, types, values, NULL, SPI_OK_INSERT);
		ereport(LOG,
				(errmsg("pipeline \"%s\": shard group %lld goes from node %s:%d to %s:%d, its stream there from %s",
						c->d->name, (long long) c->shard, from.host, from.port, to.host, to.port, start)));
	}
	SPI_finish();
	return result;
}

Datum
ptf_citus_intercept(PG_FUNCTION_ARGS)
{
	Redirect   *r = redirect_of(fcinfo->flinfo->fn_oid, PG_NARGS());
	Datum		result;

	switch (r->what)
	{
		case INTERCEPT_MOVE:
		case INTERCEPT_MOVE_NODEID:
			return intercept_move(fcinfo, r);
		case INTERCEPT_LOCK:
			result = call_citus(fcinfo, r->citus_oid);
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			drain_locked_groups(fcinfo);
			SPI_finish();
			return result;
		default:
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			check_refused(r->what, fcinfo);
			SPI_finish();
			return call_citus(fcinfo, r->citus_oid);
	}
}
