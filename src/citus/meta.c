/*-------------------------------------------------------------------------
 *
 * meta.c
 *	  Citus's metadata, commands on other nodes, the group lock, a
 *	  pipeline query's call, and the catalog of distributed pipelines
 *	  (see meta.h).
 *
 * The catalog of distributed pipelines is two Citus reference tables,
 * ptf_citus.pipelines and ptf_citus.handoffs, made by the first
 * distributed create_pipeline.  A reference table has a copy on every
 * node and Citus writes it with two-phase commit: every node sees a
 * pipeline made, paused or dropped -- and a shard group's state handed to
 * its new node -- exactly when the coordinator's transaction commits, and
 * each node's pipeline workers act on what they see.  They are not
 * members of the extension (CREATE EXTENSION runs on every node, a
 * reference table is made once, on the coordinator): DROP EXTENSION on the
 * coordinator drops their schema.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parse_type.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/meta.h"

/* Citus's advisory lock class of a co-located shard group's metadata */
#define CITUS_LOCKTAG_COLOCATED_SHARDS_METADATA 8

bool
ptf_citus_present(void)
{
	return OidIsValid(get_extension_oid("citus", true));
}

/* ---- SPI, as the current user ---- */

static void
run_query(const char *sql, int nargs, Oid *types, Datum *values, bool read_only)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, NULL, read_only, 0);

	if (rc < 0)
		elog(ERROR, "internal statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

static bool
value_isnull(uint64 row, int col)
{
	bool		isnull;

	(void) SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
	return isnull;
}

static Datum
value_at(uint64 row, int col)
{
	bool		isnull;

	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
}

static char *
text_at(uint64 row, int col)
{
	return value_isnull(row, col) ? NULL :
		SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

/* ---- tables and shards ---- */

void
citus_table(Oid relid, CitusTable *out)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	memset(out, 0, sizeof(*out));
	out->relid = relid;
	out->kind = CITUS_NOT;
	if (!OidIsValid(relid) || !ptf_citus_present())
		return;
	run_query("SELECT p.partmethod::text, p.repmodel::text, p.colocationid, "
			  "  CASE WHEN p.partmethod OPERATOR(pg_catalog.=) 'h' "
			  "       THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END "
			  "FROM pg_catalog.pg_dist_partition p "
			  "WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
			  1, types, values, true);
	if (SPI_processed == 0)
		return;
	if (strcmp(text_at(0, 1), "h") == 0)
	{
		out->kind = CITUS_HASH;
		out->dist_column = text_at(0, 4);
	}
	else if (strcmp(text_at(0, 1), "n") == 0 && strcmp(text_at(0, 2), "t") == 0)
		out->kind = CITUS_REFERENCE;
	else
		out->kind = CITUS_OTHER;
	out->colocation_id = DatumGetInt32(value_at(0, 3));
}

List *
citus_shards(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	List	   *shards = NIL;
	uint64		i;

	/* Citus orders a table's shards by their range: the index is that order */
	run_query("SELECT shardid, "
			  "  COALESCE(shardminvalue, '0')::pg_catalog.int4, "
			  "  COALESCE(shardmaxvalue, '0')::pg_catalog.int4 "
			  "FROM pg_catalog.pg_dist_shard "
			  "WHERE logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
			  "ORDER BY COALESCE(shardminvalue, '0')::pg_catalog.int4",
			  1, types, values, true);
	for (i = 0; i < SPI_processed; i++)
	{
		CitusShard *s = palloc(sizeof(CitusShard));

		s->shardid = DatumGetInt64(value_at(i, 1));
		s->lo = DatumGetInt32(value_at(i, 2));
		s->hi = DatumGetInt32(value_at(i, 3));
		s->index = (int) i;
		shards = lappend(shards, s);
	}
	return shards;
}

bool
citus_shard_of(Oid relid, int64 shardid, CitusShard *out)
{
	ListCell   *lc;

	foreach(lc, citus_shards(relid))
	{
		CitusShard *s = lfirst(lc);

		if (s->shardid == shardid)
		{
			*out = *s;
			return true;
		}
	}
	return false;
}

bool
citus_shard_at(Oid relid, int index, CitusShard *out)
{
	List	   *shards = citus_shards(relid);

	if (index < 0 || index >= list_length(shards))
		return false;
	*out = *(CitusShard *) list_nth(shards, index);
	return true;
}

Oid
citus_shard_table(int64 shardid)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(shardid)};

	/* shard_name() names it as Citus does, long names shortened */
	run_query("SELECT pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid, false)) "
			  "FROM pg_catalog.pg_dist_shard s WHERE s.shardid OPERATOR(pg_catalog.=) $1",
			  1, types, values, true);
	if (SPI_processed == 0 || value_isnull(0, 1))
		return InvalidOid;
	return DatumGetObjectId(value_at(0, 1));
}

Oid
citus_shard_owner_table(int64 shardid)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(shardid)};

	run_query("SELECT logicalrelid::pg_catalog.oid FROM pg_catalog.pg_dist_shard "
			  "WHERE shardid OPERATOR(pg_catalog.=) $1",
			  1, types, values, true);
	if (SPI_processed == 0)
		return InvalidOid;
	return DatumGetObjectId(value_at(0, 1));
}

/* ---- nodes ---- */

#define NODE_COLUMNS "n.nodename::pg_catalog.text, n.nodeport, n.nodeid, n.groupid"

static void
node_from_row(uint64 row, CitusNode *node)
{
	node->host = text_at(row, 1);
	node->port = DatumGetInt32(value_at(row, 2));
	node->nodeid = DatumGetInt32(value_at(row, 3));
	node->groupid = DatumGetInt32(value_at(row, 4));
}

bool
citus_placement(int64 shardid, CitusNode *node)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(shardid)};

	run_query("SELECT " NODE_COLUMNS " FROM pg_catalog.pg_dist_placement p "
			  "JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid "
			  "WHERE p.shardid OPERATOR(pg_catalog.=) $1 "
			  "AND n.noderole OPERATOR(pg_catalog.=) 'primary' ORDER BY n.nodeid LIMIT 1",
			  1, types, values, true);
	if (SPI_processed == 0)
		return false;
	node_from_row(0, node);
	return true;
}

bool
citus_node_by_id(int nodeid, CitusNode *node)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(nodeid)};

	run_query("SELECT " NODE_COLUMNS " FROM pg_catalog.pg_dist_node n "
			  "WHERE n.nodeid OPERATOR(pg_catalog.=) $1",
			  1, types, values, true);
	if (SPI_processed == 0)
		return false;
	node_from_row(0, node);
	return true;
}

bool
citus_node_by_name(const char *host, int port, CitusNode *node)
{
	Oid			types[2] = {TEXTOID, INT4OID};
	Datum		values[2] = {CStringGetTextDatum(host), Int32GetDatum(port)};

	run_query("SELECT " NODE_COLUMNS " FROM pg_catalog.pg_dist_node n "
			  "WHERE n.nodename OPERATOR(pg_catalog.=) $1 AND n.nodeport OPERATOR(pg_catalog.=) $2 "
			  "AND n.noderole OPERATOR(pg_catalog.=) 'primary'",
			  2, types, values, true);
	if (SPI_processed == 0)
		return false;
	node_from_row(0, node);
	return true;
}

int
citus_local_group(void)
{
	run_query("SELECT groupid FROM pg_catalog.pg_dist_local_group", 0, NULL, NULL, true);
	if (SPI_processed == 0)
		return -1;
	return DatumGetInt32(value_at(0, 1));
}

List *
citus_nodes(void)
{
	List	   *nodes = NIL;
	uint64		i;

	run_query("SELECT " NODE_COLUMNS " FROM pg_catalog.pg_dist_node n "
			  "WHERE n.noderole OPERATOR(pg_catalog.=) 'primary' AND n.isactive ORDER BY n.nodeid",
			  0, NULL, NULL, true);
	for (i = 0; i < SPI_processed; i++)
	{
		CitusNode  *n = palloc(sizeof(CitusNode));

		node_from_row(i, n);
		nodes = lappend(nodes, n);
	}
	return nodes;
}

/* ---- commands on nodes ---- */

Datum
citus_text_array(List *items)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(items), 1));
	ListCell   *lc;

	foreach(lc, items)
		elems[foreach_current_index(lc)] = CStringGetTextDatum((char *) lfirst(lc));
	return PointerGetDatum(construct_array(elems, list_length(items), TEXTOID, -1, false,
										   TYPALIGN_INT));
}

/*
 * master_run_on_worker runs each command on its node over a connection of
 * Citus's (its authentication, as the current user), in a transaction of
 * its own, and gives each one's first value or its error; its rows come
 * in the order of the commands.
 */
void
citus_run(List *commands, bool parallel)
{
	List	   *hosts = NIL;
	List	   *sqls = NIL;
	Datum	   *ports;
	Oid			types[4] = {TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID, BOOLOID};
	Datum		values[4];
	ListCell   *lc;
	uint64		i;

	if (commands == NIL)
		return;
	ports = palloc(sizeof(Datum) * list_length(commands));
	foreach(lc, commands)
	{
		CitusCommand *c = lfirst(lc);

		hosts = lappend(hosts, c->node.host);
		sqls = lappend(sqls, c->sql);
		ports[foreach_current_index(lc)] = Int32GetDatum(c->node.port);
	}
	values[0] = citus_text_array(hosts);
	values[1] = PointerGetDatum(construct_array(ports, list_length(commands), INT4OID,
												sizeof(int32), true, TYPALIGN_INT));
	values[2] = citus_text_array(sqls);
	values[3] = BoolGetDatum(parallel);
	run_query("SELECT success, result FROM pg_catalog.master_run_on_worker($1, $2, $3, $4)",
			  4, types, values, false);
	if (SPI_processed != (uint64) list_length(commands))
		elog(ERROR, "master_run_on_worker gave %lu results for %d commands",
			 (unsigned long) SPI_processed, list_length(commands));
	for (i = 0; i < SPI_processed; i++)
	{
		CitusCommand *c = list_nth(commands, (int) i);

		c->ok = !value_isnull(i, 1) && DatumGetBool(value_at(i, 1));
		c->result = text_at(i, 2);
	}
}

char *
citus_run_one(const CitusNode *node, const char *sql)
{
	CitusCommand c;

	c.node = *node;
	c.sql = (char *) sql;
	citus_run(list_make1(&c), false);
	if (!c.ok)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("on node %s:%d: %s", node->host, node->port,
						c.result ? c.result : "the command failed"),
				 errhint("The node must be reachable and have deduplicate_keep_first of this version.")));
	return c.result;
}

void
citus_group_lock_tag(LOCKTAG *tag, int colocation_id, int shard_index)
{
	/* Citus's SET_LOCKTAG_COLOCATED_SHARDS_METADATA_RESOURCE */
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) shard_index, (uint32) colocation_id,
						 CITUS_LOCKTAG_COLOCATED_SHARDS_METADATA);
}

/* ---- a pipeline's query ---- */

void
pipeline_call(const char *query, PipelineCall *pc)
{
	List	   *raw = pg_parse_query(query);
	RangeTblEntry *rte;
	RangeTblFunction *rtfunc;
	Oid		   *argtypes;
	char	  **names;
	char	   *modes;
	int			nnames;
	ListCell   *lc;

	memset(pc, 0, sizeof(*pc));
	if (list_length(raw) != 1)
		elog(ERROR, "a pipeline's query is one statement");
	pc->query = parse_analyze_fixedparams(linitial_node(RawStmt, raw), query, NULL, 0, NULL);
	if (list_length(pc->query->rtable) != 1)
		elog(ERROR, "a pipeline's query reads one function");
	rte = linitial_node(RangeTblEntry, pc->query->rtable);
	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1)
		elog(ERROR, "a pipeline's query reads one function");
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		elog(ERROR, "a pipeline's query reads one function");
	pc->call = (FuncExpr *) rtfunc->funcexpr;
	pc->function = get_func_name(pc->call->funcid);

	/* positional arguments are named by the function's declaration */
	{
		HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(pc->call->funcid));

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for function %u", pc->call->funcid);
		nnames = get_func_arg_info(tup, &argtypes, &names, &modes);
		ReleaseSysCache(tup);
	}
	pc->nargs = list_length(pc->call->args);
	pc->argnames = palloc0(sizeof(char *) * Max(pc->nargs, 1));
	pc->args = palloc0(sizeof(Node *) * Max(pc->nargs, 1));
	foreach(lc, pc->call->args)
	{
		int			i = foreach_current_index(lc);
		Node	   *arg = lfirst(lc);

		if (IsA(arg, NamedArgExpr))
		{
			pc->argnames[i] = ((NamedArgExpr *) arg)->name;
			pc->args[i] = (Node *) ((NamedArgExpr *) arg)->arg;
		}
		else
		{
			pc->argnames[i] = (names != NULL && i < nnames) ? names[i] : "";
			pc->args[i] = arg;
		}
	}
}

Node *
pipeline_call_arg(PipelineCall *pc, const char *name)
{
	int			i;

	for (i = 0; i < pc->nargs; i++)
		if (strcmp(pc->argnames[i], name) == 0)
			return pc->args[i];
	return NULL;
}

Oid
pipeline_call_relid(PipelineCall *pc, const char *name)
{
	Node	   *arg = pipeline_call_arg(pc, name);
	Oid			type;

	if (arg == NULL)
		return InvalidOid;
	type = exprType(arg);
	if (get_typtype(type) != TYPTYPE_COMPOSITE)
		return InvalidOid;
	return typeidTypeRelid(type);
}

List *
pipeline_call_text_array(PipelineCall *pc, const char *name)
{
	Node	   *arg = pipeline_call_arg(pc, name);
	Const	   *c;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	List	   *out = NIL;

	if (arg == NULL || !IsA(arg, Const) || ((Const *) arg)->constisnull)
		return NIL;
	c = (Const *) arg;
	if (c->consttype != TEXTARRAYOID)
		return NIL;
	deconstruct_array(DatumGetArrayTypeP(c->constvalue), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	for (i = 0; i < n; i++)
		out = lappend(out, nulls[i] ? NULL : TextDatumGetCString(elems[i]));
	return out;
}

/* ---- the distributed catalog ---- */

bool
dist_catalog_exists(void)
{
	Oid			nsp = get_namespace_oid("ptf_citus", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("pipelines", nsp));
}

void
dist_catalog_ensure(void)
{
	if (dist_catalog_exists())
		return;
	/* as the extension's owner; only our functions read or write it */
	ptf_spi_exec_as_owner("CREATE SCHEMA IF NOT EXISTS ptf_citus", 0, NULL, NULL, NULL,
						  SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("REVOKE ALL ON SCHEMA ptf_citus FROM PUBLIC", 0, NULL, NULL, NULL,
						  SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("CREATE TABLE ptf_citus.pipelines ("
						  " name text PRIMARY KEY,"
						  " owner text NOT NULL,"
						  " query text NOT NULL,"
						  " sink text NOT NULL,"
						  " sink_mode text NOT NULL,"
						  " function text NOT NULL,"
						  " uid text NOT NULL,"
						  " source text NOT NULL,"
						  " colocation_id int NOT NULL,"
						  " paused boolean NOT NULL DEFAULT false,"
						  " token text NOT NULL,"
						  " created_at timestamptz NOT NULL DEFAULT pg_catalog.now())",
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("CREATE TABLE ptf_citus.handoffs ("
						  " name text NOT NULL,"
						  " shard bigint NOT NULL,"
						  " token text NOT NULL,"
						  " target_group int NOT NULL,"
						  " start_lsn pg_lsn NOT NULL,"
						  " state text NOT NULL,"
						  " created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),"
						  " PRIMARY KEY (name, shard))",
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("REVOKE ALL ON ptf_citus.pipelines, ptf_citus.handoffs FROM PUBLIC",
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("COMMENT ON TABLE ptf_citus.pipelines IS "
						  "'Distributed pipelines of deduplicate_keep_first (a reference table: every node sees them)'",
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("COMMENT ON TABLE ptf_citus.handoffs IS "
						  "'Shard groups of distributed pipelines handed to a new node by a move, with their state'",
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("SELECT pg_catalog.create_reference_table('ptf_citus.pipelines')",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	ptf_spi_exec_as_owner("SELECT pg_catalog.create_reference_table('ptf_citus.handoffs')",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
}

#define DIST_COLUMNS "name, owner, query, sink, sink_mode, function, uid, source, colocation_id, paused, token"

static void
dist_from_row(uint64 row, DistPipeline *d)
{
	d->name = text_at(row, 1);
	d->owner = text_at(row, 2);
	d->query = text_at(row, 3);
	d->sink = text_at(row, 4);
	d->sink_mode = text_at(row, 5);
	d->function = text_at(row, 6);
	d->uid = text_at(row, 7);
	d->source = text_at(row, 8);
	d->colocation_id = DatumGetInt32(value_at(row, 9));
	d->paused = DatumGetBool(value_at(row, 10));
	d->token = text_at(row, 11);
}

bool
dist_pipeline(const char *name, DistPipeline *out)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	if (!dist_catalog_exists())
		return false;
	ptf_spi_exec_as_owner("SELECT " DIST_COLUMNS " FROM ptf_citus.pipelines "
						  "WHERE name OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	dist_from_row(0, out);
	return true;
}

List *
dist_pipelines_of_colocation(int colocation_id)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(colocation_id)};
	List	   *out = NIL;
	uint64		i;

	if (!dist_catalog_exists())
		return NIL;
	ptf_spi_exec_as_owner("SELECT " DIST_COLUMNS " FROM ptf_citus.pipelines "
						  "WHERE colocation_id OPERATOR(pg_catalog.=) $1 ORDER BY name",
						  1, types, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		DistPipeline *d = palloc(sizeof(DistPipeline));

		dist_from_row(i, d);
		out = lappend(out, d);
	}
	return out;
}

char *
citus_keep(const char *s)
{
	return strcpy(SPI_palloc(strlen(s) + 1), s);
}

char *
citus_token_arg(FunctionCallInfo fcinfo, int argno, bool empty_ok)
{
	char	   *token = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	size_t		len = strlen(token);
	bool		ok = (len == 16 || (len == 0 && empty_ok));
	size_t		i;

	for (i = 0; ok && i < len; i++)
		ok = (token[i] >= '0' && token[i] <= '9') || (token[i] >= 'a' && token[i] <= 'f');
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid token \"%s\"", token),
				 errdetail("Tokens are made by ptf.create_pipeline and shard moves: 16 hexadecimal digits.")));
	return token;
}

char *
citus_new_token(void)
{
	uint8		bytes[8];
	char	   *hex = palloc(17);
	int			i;

	if (!pg_strong_random(bytes, sizeof(bytes)))
		elog(ERROR, "could not generate a random token");
	for (i = 0; i < 8; i++)
		sprintf(hex + 2 * i, "%02x", bytes[i]);
	return hex;
}
