/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  The pipeline of a shard group, on the node that holds it: its query,
 *	  and its making (ptf._citus_shard_prepare) and unmaking
 *	  (ptf._citus_shard_forget), which the coordinator asks of the node.
 *
 * A shard pipeline is an ordinary pipeline of the node, named
 * "<pipeline>/<shard>" with uid "<uid>/<shard>", whose query is the
 * distributed pipeline's with every table of the shard group in place of
 * its distributed table -- NULL::events becomes NULL::events_102008, the
 * co-located sink events_first becomes events_first_102040, a reference
 * table its shard here -- and one more condition: each row it writes must
 * hash into the sink shard's range (ptf._citus_row_in_shard), so that a
 * query whose output rows do not keep their input's distribution value
 * (a from_changelog whose envelope holds another key, a select list in
 * another order than the sink's columns) fails instead of writing rows
 * into a shard they do not belong to.
 *
 * Two ways of making one:
 *
 *	- pending (create_pipeline): the stream starts here and now, through
 *	  ptf.create_pipeline on the shard tables; the pipeline waits until the
 *	  coordinator's transaction commits (fence.c);
 *	- incoming (a move to this node): only the stream's slot is made,
 *	  before the move copies anything here, with the pipeline's row as a
 *	  placeholder -- the shard's tables do not exist here yet.  The state
 *	  comes with the move (handoff.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/meta.h"
#include "citus/shard.h"
#include "functions/pipelines.h"

PG_FUNCTION_INFO_V1(ptf_citus_shard_prepare);
PG_FUNCTION_INFO_V1(ptf_citus_shard_forget);
PG_FUNCTION_INFO_V1(ptf_citus_row_in_shard);

/* ---- ptf.citus_shard_pipelines ---- */

#define SP_COLUMNS \
	"c.pipeline, p.name, p.uid, c.dist_name, c.token, c.shard, c.shards, c.colocation_id, " \
	"c.shard_index, c.status, c.handoff_table, " \
	"EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) c.created_at)::float8, " \
	"COALESCE((SELECT u.slot_name FROM ptf.uid_registry u WHERE u.uid OPERATOR(pg_catalog.=) p.uid), c.slot) "
#define SP_FROM \
	"FROM ptf.citus_shard_pipelines c JOIN ptf.pipeline_registry p ON p.id OPERATOR(pg_catalog.=) c.pipeline "

static void
sp_from_row(uint64 row, ShardPipeline *sp)
{
	HeapTuple	tup = SPI_tuptable->vals[row];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;
	Datum	   *elems;
	bool	   *nulls;
	int			i;
	Datum		d;

	sp->pipeline = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
	sp->name = SPI_getvalue(tup, desc, 2);
	sp->uid = SPI_getvalue(tup, desc, 3);
	sp->dist_name = SPI_getvalue(tup, desc, 4);
	sp->token = SPI_getvalue(tup, desc, 5);
	sp->shard = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
	d = SPI_getbinval(tup, desc, 7, &isnull);
	deconstruct_array(DatumGetArrayTypeP(d), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &sp->nshards);
	sp->shards = palloc(sizeof(int64) * Max(sp->nshards, 1));
	for (i = 0; i < sp->nshards; i++)
		sp->shards[i] = DatumGetInt64(elems[i]);
	sp->colocation_id = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
	sp->shard_index = DatumGetInt32(SPI_getbinval(tup, desc, 9, &isnull));
	sp->status = SPI_getvalue(tup, desc, 10);
	d = SPI_getbinval(tup, desc, 11, &isnull);
	sp->handoff_table = isnull ? InvalidOid : DatumGetObjectId(d);
	sp->age_seconds = DatumGetFloat8(SPI_getbinval(tup, desc, 12, &isnull));
	sp->slot_name = SPI_getvalue(tup, desc, 13);
}

bool
shard_pipeline_by_id(int32 pipeline, ShardPipeline *sp)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(pipeline)};

	ptf_spi_exec_as_owner("SELECT " SP_COLUMNS SP_FROM "WHERE c.pipeline OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	sp_from_row(0, sp);
	return true;
}

bool
shard_pipeline_by_name(const char *dist_name, int64 shard, ShardPipeline *sp)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2] = {CStringGetTextDatum(dist_name), Int64GetDatum(shard)};

	ptf_spi_exec_as_owner("SELECT " SP_COLUMNS SP_FROM
						  "WHERE c.dist_name OPERATOR(pg_catalog.=) $1 AND c.shard OPERATOR(pg_catalog.=) $2",
						  2, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	sp_from_row(0, sp);
	return true;
}

List *
shard_pipelines_of_shards(const int64 *shards, int nshards)
{
	Oid			types[1] = {INT8ARRAYOID};
	Datum	   *elems = palloc(sizeof(Datum) * Max(nshards, 1));
	Datum		values[1];
	List	   *out = NIL;
	uint64		i;
	int			k;

	for (k = 0; k < nshards; k++)
		elems[k] = Int64GetDatum(shards[k]);
	values[0] = PointerGetDatum(construct_array(elems, nshards, INT8OID, 8, FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	ptf_spi_exec_as_owner("SELECT " SP_COLUMNS SP_FROM
						  "WHERE c.shards OPERATOR(pg_catalog.&&) $1 "
						  "AND c.status OPERATOR(pg_catalog.=) 'active' ORDER BY c.pipeline",
						  1, types, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		ShardPipeline *sp = palloc(sizeof(ShardPipeline));

		sp_from_row(i, sp);
		out = lappend(out, sp);
	}
	return out;
}

void
shard_pipeline_set_status(int32 pipeline, const char *status)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2] = {Int32GetDatum(pipeline), CStringGetTextDatum(status)};

	ptf_spi_exec_as_owner("UPDATE ptf.citus_shard_pipelines SET status = $2 "
						  "WHERE pipeline OPERATOR(pg_catalog.=) $1",
						  2, types, values, NULL, SPI_OK_UPDATE);
}

/*
 * The pipeline with its state, slot and origin (ptf.drop_pipeline, as a
 * superuser or its owner), and what a move brought for it.
 */
void
shard_pipeline_drop(const ShardPipeline *sp)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(sp->name)};

	if (OidIsValid(sp->handoff_table) && get_rel_name(sp->handoff_table) != NULL)
		ptf_spi_exec_as_owner(psprintf("DROP TABLE IF EXISTS %s",
									   ptf_relation_sql_name(sp->handoff_table)),
							  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("SELECT ptf.drop_pipeline($1)", 1, types, values, NULL, SPI_OK_SELECT);
	/* an incoming one's slot is not yet its uid's */
	if (sp->slot_name != NULL)
	{
		values[0] = CStringGetTextDatum(sp->slot_name);
		ptf_spi_exec_as_owner("SELECT pg_catalog.pg_drop_replication_slot(slot_name) "
							  "FROM pg_catalog.pg_replication_slots "
							  "WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name "
							  "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database()",
							  1, types, values, NULL, SPI_OK_SELECT);
	}
	ereport(LOG,
			(errmsg("shard pipeline \"%s\" of distributed pipeline \"%s\" dropped on this node",
					sp->name, sp->dist_name)));
}

/* ---- the query ---- */

static Const *
null_of(Oid relid)
{
	return makeNullConst(get_rel_type_id(relid), -1, InvalidOid);
}

/* the shard here of table relid in the group of source shard s */
static Oid
group_table(Oid relid, const CitusTable *t, const CitusTable *source, const CitusShard *s,
			int64 *shardid)
{
	CitusShard	other;
	Oid			table;

	if (t->kind == CITUS_REFERENCE)
	{
		if (!citus_shard_at(relid, 0, &other))
			elog(ERROR, "reference table %s has no shard", get_rel_name(relid));
	}
	else if (t->kind == CITUS_HASH && t->colocation_id == source->colocation_id)
	{
		if (!citus_shard_at(relid, s->index, &other))
			elog(ERROR, "table %s has no shard %d", get_rel_name(relid), s->index);
	}
	else
		return InvalidOid;
	table = citus_shard_table(other.shardid);
	if (!OidIsValid(table))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard %lld of %s is not on this node", (long long) other.shardid,
						ptf_relation_sql_name(relid))));
	*shardid = other.shardid;
	return table;
}

/* position (from 0) of column attnum among the non-dropped ones of relid */
static int
column_position(Oid relid, AttrNumber attnum)
{
	TupleDesc	desc = lookup_rowtype_tupdesc(get_rel_type_id(relid), -1);
	int			pos = 0;
	int			i;

	for (i = 0; i < attnum - 1; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			pos++;
	ReleaseTupleDesc(desc);
	return pos;
}

/* the value a row of the query gives the sink's distribution column */
static Expr *
sink_dist_value(Query *q, Oid sink, const char *dist_column, bool changelog)
{
	AttrNumber	attnum = get_attnum(sink, dist_column);
	List	   *tles = NIL;
	ListCell   *lc;

	foreach(lc, q->targetList)
		if (!((TargetEntry *) lfirst(lc))->resjunk)
			tles = lappend(tles, lfirst(lc));
	if (changelog)
	{
		/* (kind, data): data is a row of the sink's type */
		Expr	   *data;
		FieldSelect *fs = makeNode(FieldSelect);

		if (list_length(tles) != 2)
			elog(ERROR, "a changelog pipeline's query returns (kind, data)");
		data = ((TargetEntry *) lsecond(tles))->expr;
		fs->arg = copyObject(data);
		fs->fieldnum = attnum;
		fs->resulttype = get_atttype(sink, attnum);
		fs->resulttypmod = -1;
		fs->resultcollid = get_typcollation(fs->resulttype);
		return (Expr *) fs;
	}
	else
	{
		int			pos = column_position(sink, attnum);

		if (pos >= list_length(tles))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the query of a distributed pipeline gives no value for the sink's distribution column \"%s\"",
							dist_column),
					 errhint("Rows are appended to the sink by position: select a value for every column up to \"%s\".",
							 dist_column)));
		return copyObject(((TargetEntry *) list_nth(tles, pos))->expr);
	}
}

static Oid
row_in_shard_function(void)
{
	Oid			args[4] = {ANYELEMENTOID, INT8OID, INT4OID, INT4OID};

	return LookupFuncName(list_make2(makeString("ptf"), makeString("_citus_row_in_shard")),
						  4, args, false);
}

char *
shard_query(const char *dist_query, const char *sink_name, const char *sink_mode, int64 shard,
			Oid *sink_shard, int64 **shards, int *nshards)
{
	PipelineCall pc;
	Oid			source_relid = citus_shard_owner_table(shard);
	Oid			sink = DatumGetObjectId(DirectFunctionCall1(regclassin,
															CStringGetDatum(sink_name)));
	CitusTable	source;
	CitusTable	sinkt;
	CitusShard	s;
	ListCell   *lc;
	List	   *ids = NIL;
	int64		sink_shardid = 0;
	FuncExpr   *guard;
	CitusShard	sink_range;
	int			nest;
	char	   *printed;

	if (!OidIsValid(source_relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shard %lld is not a shard of a Citus table", (long long) shard)));
	citus_table(source_relid, &source);
	if (!citus_shard_of(source_relid, shard, &s))
		elog(ERROR, "shard %lld not found", (long long) shard);
	pipeline_call(dist_query, &pc);

	/* NULL::t of a table of the group becomes NULL::t_<its shard> */
	foreach(lc, pc.call->args)
	{
		Node	   *arg = lfirst(lc);
		Node	  **at = IsA(arg, NamedArgExpr) ? (Node **) &((NamedArgExpr *) arg)->arg :
			(Node **) &lfirst(lc);
		Const	   *c = (Const *) *at;
		Oid			relid;
		CitusTable	t;
		Oid			table;
		int64		id;

		if (!IsA(c, Const))
			continue;
		if (IsA(arg, NamedArgExpr) && strcmp(((NamedArgExpr *) arg)->name, "uid") == 0)
		{
			*at = (Node *) makeConst(TEXTOID, -1, DEFAULT_COLLATION_OID, -1,
									 CStringGetTextDatum(psprintf("%s/%lld",
																  TextDatumGetCString(c->constvalue),
																  (long long) shard)),
									 false, false);
			continue;
		}
		if (get_typtype(c->consttype) != TYPTYPE_COMPOSITE ||
			!OidIsValid(relid = typeidTypeRelid(c->consttype)))
			continue;
		citus_table(relid, &t);
		table = group_table(relid, &t, &source, &s, &id);
		if (!OidIsValid(table))
			continue;
		*at = (Node *) null_of(table);
		/* the group's own shards: those a move of the group locks */
		if (t.kind == CITUS_HASH)
			ids = lappend(ids, psprintf("%lld", (long long) id));
	}

	/* the sink's shard, and the condition on each row written */
	citus_table(sink, &sinkt);
	if (!citus_shard_at(sink, s.index, &sink_range))
		elog(ERROR, "sink %s has no shard %d", get_rel_name(sink), s.index);
	*sink_shard = group_table(sink, &sinkt, &source, &s, &sink_shardid);
	ids = lappend(ids, psprintf("%lld", (long long) sink_shardid));
	guard = makeFuncExpr(row_in_shard_function(), BOOLOID,
						 list_make4(sink_dist_value(pc.query, sink, sinkt.dist_column,
													strcmp(sink_mode, "changelog") == 0),
									makeConst(INT8OID, -1, InvalidOid, 8,
											  Int64GetDatum(sink_shardid), false, FLOAT8PASSBYVAL),
									makeConst(INT4OID, -1, InvalidOid, 4,
											  Int32GetDatum(sink_range.lo), false, true),
									makeConst(INT4OID, -1, InvalidOid, 4,
											  Int32GetDatum(sink_range.hi), false, true)),
						 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	if (pc.query->jointree->quals == NULL)
		pc.query->jointree->quals = (Node *) guard;
	else
		pc.query->jointree->quals = (Node *) makeBoolExpr(AND_EXPR,
														  list_make2(pc.query->jointree->quals, guard),
														  -1);

	/* printed as create_pipeline binds: every name qualified */
	nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	printed = pg_get_querydef(pc.query, false);
	AtEOXact_GUC(true, nest);

	*nshards = list_length(ids);
	*shards = palloc(sizeof(int64) * Max(*nshards, 1));
	foreach(lc, ids)
		(*shards)[foreach_current_index(lc)] = strtoi64(lfirst(lc), NULL, 10);
	return printed;
}

/* ---- making and unmaking ---- */

static Datum
int64_array(const int64 *v, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(elems, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

static void
record_shard_pipeline(const char *local_name, const char *dist_name, const char *token,
					  int64 shard, const int64 *shards, int nshards, const char *status)
{
	Oid			source_relid = citus_shard_owner_table(shard);
	CitusTable	source;
	CitusShard	s;
	Oid			types[8] = {TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8ARRAYOID, INT4OID, INT4OID,
	TEXTOID};
	Datum		values[8];

	citus_table(source_relid, &source);
	(void) citus_shard_of(source_relid, shard, &s);
	values[0] = CStringGetTextDatum(local_name);
	values[1] = CStringGetTextDatum(dist_name);
	values[2] = CStringGetTextDatum(token);
	values[3] = Int64GetDatum(shard);
	values[4] = int64_array(shards, nshards);
	values[5] = Int32GetDatum(source.colocation_id);
	values[6] = Int32GetDatum(s.index);
	values[7] = CStringGetTextDatum(status);
	ptf_spi_exec_as_owner("INSERT INTO ptf.citus_shard_pipelines "
						  "(pipeline, dist_name, token, shard, shards, colocation_id, shard_index, status) "
						  "SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM ptf.pipeline_registry "
						  "WHERE name OPERATOR(pg_catalog.=) $1",
						  8, types, values, NULL, SPI_OK_INSERT);
	if (SPI_processed != 1)
		elog(ERROR, "pipeline \"%s\" was not made", local_name);
}

/*
 * pending: the stream starts through ptf.create_pipeline, as the caller
 * (its owner to be), over the group's tables here.
 */
static char *
prepare_pending(const char *dist_name, const char *query, const char *sink,
				const char *sink_mode, const char *token, int64 shard)
{
	char	   *local_name = psprintf("%s/%lld", dist_name, (long long) shard);
	Oid			sink_shard;
	int64	   *shards;
	int			nshards;
	char	   *q = shard_query(query, sink, sink_mode, shard, &sink_shard, &shards, &nshards);
	Oid			types[4] = {TEXTOID, TEXTOID, REGCLASSOID, TEXTOID};
	Datum		values[4];
	int			rc;

	values[0] = CStringGetTextDatum(local_name);
	values[1] = CStringGetTextDatum(q);
	values[2] = ObjectIdGetDatum(sink_shard);
	values[3] = CStringGetTextDatum(sink_mode);
	rc = SPI_execute_with_args("SELECT ptf.create_pipeline($1, $2, $3, $4)",
							   4, types, values, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not make pipeline \"%s\"", local_name);
	record_shard_pipeline(local_name, dist_name, token, shard, shards, nshards, "pending");
	return local_name;
}

/*
 * incoming: a move will bring the group here.  Its slot is made now,
 * before the move writes anything here, so that it sees every change
 * after the move; the pipeline's row is a placeholder (the distributed
 * query, the distributed sink) until the move has made the group's tables
 * here (handoff.c).
 */
static char *
prepare_incoming(const char *dist_name, int64 shard, const char *token)
{
	DistPipeline d;
	char	   *local_name = psprintf("%s/%lld", dist_name, (long long) shard);
	char	   *uid;
	char	   *slot;
	char		hex[33];
	const char *err;
	Oid			owner;
	Oid			source_relid = citus_shard_owner_table(shard);
	Oid			types[7] = {TEXTOID, OIDOID, TEXTOID, REGCLASSOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[7];
	int64		shards[1] = {shard};

	if (!dist_pipeline(dist_name, &d))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline \"%s\" does not exist", dist_name)));
	owner = get_role_oid(d.owner, false);
	/* the mover owns the moved tables (Citus checks), or is the pipeline's owner */
	if (!OidIsValid(source_relid) ||
		(!pg_class_ownercheck(source_relid, GetUserId()) && !has_privs_of_role(GetUserId(), owner)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to move the shard group of pipeline \"%s\"", dist_name)));
	uid = psprintf("%s/%lld", d.uid, (long long) shard);
	if (!pg_md5_hash(psprintf("%s %s", uid, token), strlen(uid) + 1 + strlen(token), hex, &err))
		elog(ERROR, "could not compute a slot name: %s", err);
	hex[19] = '\0';
	slot = psprintf("ptf_%u_m%s", MyDatabaseId, hex);

	/* first, in a transaction that has written nothing (it waits for those that have) */
	ptf_create_logical_slot(slot);
	PG_TRY();
	{
		values[0] = CStringGetTextDatum(local_name);
		values[1] = ObjectIdGetDatum(owner);
		values[2] = CStringGetTextDatum(d.query);
		values[3] = DirectFunctionCall1(regclassin, CStringGetDatum(d.sink));
		values[4] = CStringGetTextDatum(d.sink_mode);
		values[5] = CStringGetTextDatum(d.function);
		values[6] = CStringGetTextDatum(uid);
		ptf_register_pipeline("INSERT INTO ptf.pipeline_registry "
							  "(name, owner, query, sink, sink_mode, function, uid, search_path) "
							  "VALUES ($1, $2::pg_catalog.regrole, $3, $4, $5, $6, $7, 'pg_catalog, pg_temp')",
							  7, types, values);
		record_shard_pipeline(local_name, dist_name, token, shard, shards, 1, "incoming");
		/* the uid's slot, once its state comes (handoff.c) */
		values[0] = CStringGetTextDatum(local_name);
		values[1] = CStringGetTextDatum(slot);
		ptf_spi_exec_as_owner("UPDATE ptf.citus_shard_pipelines c SET slot = $2 FROM ptf.pipeline_registry p "
							  "WHERE p.id OPERATOR(pg_catalog.=) c.pipeline AND p.name OPERATOR(pg_catalog.=) $1",
							  2, (Oid[]) {TEXTOID, TEXTOID}, values, NULL, SPI_OK_UPDATE);
	}
	PG_CATCH();
	{
		/* not transactional: it goes with the error */
		ptf_spi_exec_as_owner(psprintf("SELECT pg_catalog.pg_drop_replication_slot(%s)",
									   quote_literal_cstr(slot)),
							  0, NULL, NULL, NULL, SPI_OK_SELECT);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return slot;
}

Datum
ptf_citus_shard_prepare(PG_FUNCTION_ARGS)
{
	char	   *dist_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *query = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *sink = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *sink_mode = text_to_cstring(PG_GETARG_TEXT_PP(3));
	char	   *token = citus_token_arg(fcinfo, 4, false);
	int64		shard = PG_GETARG_INT64(5);
	bool		incoming = PG_GETARG_BOOL(6);
	char	   *result;

	if (!ptf_citus_present())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Citus is not installed in this database")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ptf_check_sql_version();

	/*
	 * A logical slot waits for every transaction here that has written;
	 * one of them may be the caller's own, on the coordinator, waiting for
	 * this: give up rather than wait for ever.
	 */
	(void) set_config_option("lock_timeout", "10s", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	if (incoming)
		result = prepare_incoming(dist_name, shard, token);
	else
		result = prepare_pending(dist_name, query, sink, sink_mode, token, shard);
	result = citus_keep(result);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(result));
}

/*
 * token '': the shard pipeline of (dist_name, shard) if it is a leftover
 * -- its distributed pipeline gone or made again, or its group elsewhere
 * -- before a new one is made.  A token: those that a create_pipeline or
 * move of that token made (shard 0: of every shard), which failed.
 */
Datum
ptf_citus_shard_forget(PG_FUNCTION_ARGS)
{
	char	   *dist_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		shard = PG_GETARG_INT64(1);
	char	   *token = citus_token_arg(fcinfo, 2, true);
	List	   *victims = NIL;
	ListCell   *lc;
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(dist_name), CStringGetTextDatum(token)};
	uint64		i;

	if (!ptf_citus_present())
		PG_RETURN_BOOL(false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (token[0] != '\0')
	{
		ptf_spi_exec_as_owner("SELECT " SP_COLUMNS SP_FROM
							  "WHERE c.dist_name OPERATOR(pg_catalog.=) $1 AND c.token OPERATOR(pg_catalog.=) $2",
							  2, types, values, NULL, SPI_OK_SELECT);
		for (i = 0; i < SPI_processed; i++)
		{
			ShardPipeline *sp = palloc(sizeof(ShardPipeline));

			sp_from_row(i, sp);
			if (shard == 0 || sp->shard == shard)
				victims = lappend(victims, sp);
		}
	}
	else
	{
		ShardPipeline *sp = palloc(sizeof(ShardPipeline));
		DistPipeline d;
		CitusNode	where;

		if (shard_pipeline_by_name(dist_name, shard, sp))
		{
			bool		known = dist_pipeline(dist_name, &d);
			bool		here = citus_placement(shard, &where) &&
				where.groupid == citus_local_group();

			if (!known ||
				strcmp(sp->status, "incoming") == 0 ||
				(strcmp(sp->status, "pending") == 0 && strcmp(sp->token, d.token) != 0) ||
				(strcmp(sp->status, "active") == 0 && !here))
				victims = lappend(victims, sp);
			else
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_OBJECT),
						 errmsg("shard group %lld of pipeline \"%s\" already runs on this node",
								(long long) shard, dist_name)));
		}
	}
	foreach(lc, victims)
	{
		ShardPipeline *sp = lfirst(lc);
		Oid			owner;

		/* its owner, or who could move its tables (gone meanwhile: nothing to do) */
		ptf_spi_exec_as_owner("SELECT owner FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
							  1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(sp->pipeline)},
							  NULL, SPI_OK_SELECT);
		if (SPI_processed == 0)
			continue;
		owner = DatumGetObjectId(ptf_spi_datum(1));
		if (!has_privs_of_role(GetUserId(), owner) &&
			!pg_class_ownercheck(citus_shard_owner_table(sp->shard), GetUserId()))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of pipeline \"%s\"", sp->name)));
		shard_pipeline_drop(sp);
	}
	SPI_finish();
	PG_RETURN_BOOL(victims != NIL);
}

/* ---- the condition on each row a shard pipeline writes ---- */

static Oid	worker_hash_oid = InvalidOid;

static int32
citus_hash(Datum value, Oid type)
{
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 1);
	Datum		result;

	if (!OidIsValid(worker_hash_oid))
	{
		Oid			args[1] = {ANYOID};

		worker_hash_oid = LookupFuncName(list_make2(makeString("pg_catalog"),
													makeString("worker_hash")),
										 1, args, false);
	}
	fmgr_info(worker_hash_oid, &flinfo);
	/* worker_hash takes "any": it learns the type from its call expression */
	flinfo.fn_expr = (Node *) makeFuncExpr(worker_hash_oid, INT4OID,
										   list_make1(makeNullConst(type, -1, InvalidOid)),
										   InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = value;
	fcinfo->args[0].isnull = false;
	result = FunctionCallInvoke(fcinfo);
	if (fcinfo->isnull)
		elog(ERROR, "worker_hash returned NULL");
	return DatumGetInt32(result);
}

Datum
ptf_citus_row_in_shard(PG_FUNCTION_ARGS)
{
	int64		shard = PG_GETARG_INT64(1);
	int32		lo = PG_GETARG_INT32(2);
	int32		hi = PG_GETARG_INT32(3);
	int32		h;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row for sink shard %lld has no distribution value", (long long) shard),
				 errhint("The rows of a distributed pipeline must keep the distribution column of its source.")));
	h = citus_hash(PG_GETARG_DATUM(0), get_fn_expr_argtype(fcinfo->flinfo, 0));
	if (h < lo || h > hi)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("a row of a distributed pipeline belongs to another shard group than the one it was computed in"),
				 errdetail("Its distribution value hashes to %d, outside sink shard %lld (%d .. %d): it would be stored where Citus does not look for it.",
						   h, (long long) shard, lo, hi),
				 errhint("If the pipeline's query moves the distribution value, select it at the sink column's place. If a row was written straight into a shard table it does not belong to, delete it there and pass its transaction over with ptf.skip_transaction on this node.")));
	PG_RETURN_BOOL(true);
}
