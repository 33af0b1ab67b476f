/*-------------------------------------------------------------------------
 *
 * create.c
 *	  ptf.create_pipeline over a distributed table, on the coordinator;
 *	  drop_pipeline, pause_pipeline and resume_pipeline of such pipelines.
 *
 * A pipeline is distributed when it reads a Citus table.  What it may be:
 *
 *	- its source (input, or a temporal join's probe) hash-distributed;
 *	- the keys by which its function keeps state containing the source's
 *	  distribution column (partition_by of keep-first and window_aggregate,
 *	  of to_changelog and from_changelog when given; both sides' equi-keys
 *	  of a temporal join over two co-located tables, at the same place), so
 *	  that all rows of a key are in one shard group -- Flink's key groups;
 *	- a temporal join's build side co-located with the probe, or a
 *	  reference table (every node has all of it);
 *	- its sink hash-distributed and co-located with the source, so that a
 *	  shard group's output goes to the sink shard on the same node.
 *
 * Anything else would give a silently wrong answer -- one answer per shard
 * for a key spread over shards, rows lost between nodes -- and is refused
 * (0A000) naming the distribution column and the way out.
 *
 * Making one: every shard group's node starts the group's stream (its
 * slot) in a transaction of its own, the pipeline waiting there until the
 * row that names it in ptf_citus.pipelines -- a reference table, written
 * with two-phase commit -- is visible: if this transaction rolls back the
 * nodes drop what they made (fence.c).  The shard group's lock that moves
 * take is held meanwhile, so no move runs between a group's stream
 * starting and the pipeline being known.
 *
 * Dropping, pausing, resuming change the row only; each node's pipeline
 * worker sees the change when it commits and acts on it (fence.c): a
 * dropped pipeline leaves no slot, origin or state on any node, once each
 * node has seen it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/meta.h"
#include "citus/shard.h"

/* Citus's advisory lock class a move takes of its colocation group */
#define CITUS_LOCKTAG_PLACEMENT_COLOCATION 13

/*
 * The lock moves of a colocation group take, RowExclusiveLock, to their
 * transaction's end: ExclusiveLock held, none starts (and one under way is
 * waited for); RowExclusiveLock, what a move of ours takes before Citus
 * does, waits for those that hold ExclusiveLock.
 */
void
citus_lock_colocation(int colocation_id, LOCKMODE mode)
{
	LOCKTAG		tag;

	/* Citus's SET_LOCKTAG_REBALANCE_PLACEMENT_COLOCATION */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, 0, (uint32) colocation_id,
						 CITUS_LOCKTAG_PLACEMENT_COLOCATION);
	(void) LockAcquire(&tag, mode, false, false);
}

static char *
relname(Oid relid)
{
	return ptf_relation_sql_name(relid);
}

static void
refuse(const char *message, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s", message),
			 detail ? errdetail("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0));
}

static bool
list_has(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (lfirst(lc) != NULL && strcmp(lfirst(lc), name) == 0)
			return true;
	return false;
}

static int
position_of(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (lfirst(lc) != NULL && strcmp(lfirst(lc), name) == 0)
			return foreach_current_index(lc);
	return -1;
}

static char *
keys_text(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, names)
		appendStringInfo(&buf, "%s%s", foreach_current_index(lc) > 0 ? "," : "",
						 lfirst(lc) ? quote_identifier(lfirst(lc)) : "NULL");
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* The function's keys must hold the distribution column (see the header). */
static void
check_keys(PipelineCall *pc, const CitusTable *source)
{
	const char *f = pc->function;
	List	   *keys = pipeline_call_text_array(pc, "partition_by");
	bool		required = (strcmp(f, "deduplicate_keep_first") == 0 ||
							strcmp(f, "window_aggregate") == 0);
	bool		given = (pipeline_call_arg(pc, "partition_by") != NULL && keys != NIL);

	if (strcmp(f, "temporal_join") == 0 || strcmp(f, "tumble") == 0 ||
		strcmp(f, "hop") == 0 || strcmp(f, "cumulate") == 0)
		return;					/* the join's keys: check_join; the TVFs keep no state */
	if (!required && !given)
		return;					/* no keyed state (to_changelog: by replica identity, which Citus keys by it) */
	if (!list_has(keys, source->dist_column))
		refuse(psprintf("the keys of a distributed pipeline must contain the distribution column \"%s\" of %s",
						source->dist_column, relname(source->relid)),
			   psprintf("%s keeps state per key of partition_by %s; a key without \"%s\" spreads over shard groups, and each group would give its own answer.",
						f, given ? keys_text(keys) : "(none given: one key for all rows)",
						source->dist_column),
			   psprintf("Add \"%s\" to partition_by, or distribute %s by a column of the keys (alter_distributed_table).",
						source->dist_column, relname(source->relid)));
}

/* A temporal join's build side: co-located on the same keys, or a reference table. */
static void
check_join(PipelineCall *pc, const CitusTable *probe)
{
	Oid			build_relid = pipeline_call_relid(pc, "build");
	CitusTable	build;
	List	   *pkeys = pipeline_call_text_array(pc, "probe_key");
	List	   *bkeys = pipeline_call_text_array(pc, "build_key");
	int			at;

	if (strcmp(pc->function, "temporal_join") != 0)
		return;
	if (!OidIsValid(build_relid))
		refuse("the build side of a distributed temporal join must be a table",
			   NULL, "Give build => NULL::a_table, a reference table or one co-located with the probe.");
	citus_table(build_relid, &build);
	if (build.kind == CITUS_REFERENCE)
		return;
	if (build.kind == CITUS_NOT)
		refuse(psprintf("the build side %s of a distributed temporal join is a local table",
						relname(build_relid)),
			   psprintf("The probe %s is distributed by \"%s\": its shard groups run on the worker nodes, which do not have %s.",
						relname(probe->relid), probe->dist_column, relname(build_relid)),
			   psprintf("Make %s a reference table (SELECT create_reference_table('%s')), or distribute it co-located with %s.",
						relname(build_relid), relname(build_relid), relname(probe->relid)));
	if (build.kind != CITUS_HASH || build.colocation_id != probe->colocation_id)
		refuse(psprintf("the build side %s of a distributed temporal join is not co-located with the probe %s",
						relname(build_relid), relname(probe->relid)),
			   NULL,
			   psprintf("Distribute %s by its join key with colocate_with => '%s', or make it a reference table.",
						relname(build_relid), relname(probe->relid)));
	if (bkeys == NIL)
		bkeys = pkeys;
	at = position_of(pkeys, probe->dist_column);
	if (at < 0 || at >= list_length(bkeys) || list_nth(bkeys, at) == NULL ||
		strcmp(list_nth(bkeys, at), build.dist_column) != 0)
		refuse(psprintf("the equi-keys of a distributed temporal join must pair the distribution columns \"%s\" of %s and \"%s\" of %s",
						probe->dist_column, relname(probe->relid), build.dist_column,
						relname(build_relid)),
			   psprintf("probe_key is %s, build_key %s: a probe row meets only the versions of its own shard group.",
						keys_text(pkeys), keys_text(bkeys)),
			   psprintf("Put \"%s\" in probe_key and \"%s\" at the same place in build_key.",
						probe->dist_column, build.dist_column));
}

/* Every other table the call names must go with the source. */
static void
check_other_tables(PipelineCall *pc, const CitusTable *source, Oid sink)
{
	int			i;

	for (i = 0; i < pc->nargs; i++)
	{
		Oid			relid;
		CitusTable	t;

		if (strcmp(pc->argnames[i], "build") == 0)
			continue;
		relid = pipeline_call_relid(pc, pc->argnames[i]);
		if (!OidIsValid(relid) || relid == source->relid || relid == sink)
			continue;
		citus_table(relid, &t);
		if (t.kind == CITUS_HASH && t.colocation_id != source->colocation_id)
			refuse(psprintf("%s, named by %s, is distributed but not co-located with %s",
							relname(relid), pc->argnames[i], relname(source->relid)),
				   NULL, "Name a type of its own (CREATE TYPE), or the sink's row type.");
	}
}

static void
check_sink(Oid sink, const CitusTable *source)
{
	CitusTable	s;

	citus_table(sink, &s);
	if (s.kind == CITUS_HASH && s.colocation_id == source->colocation_id)
		return;
	refuse(psprintf("the sink %s of a distributed pipeline must be distributed and co-located with its source %s",
					relname(sink), relname(source->relid)),
		   s.kind == CITUS_NOT ?
		   psprintf("%s is a local table of the coordinator; the shard groups of %s run on the worker nodes and write the sink's shards there.",
					relname(sink), relname(source->relid)) :
		   s.kind == CITUS_REFERENCE ?
		   psprintf("%s is a reference table: each shard group would have to write every node.", relname(sink)) :
		   psprintf("%s is not in the colocation group of %s: a shard group's rows would go to another node.",
					relname(sink), relname(source->relid)),
		   psprintf("SELECT create_distributed_table('%s', '%s', colocate_with => '%s');",
					relname(sink), source->dist_column, relname(source->relid)));
}

/* ptf_citus_create_pipeline's checks; the source table, when distributed */
static bool
check_distributed(PipelineCall *pc, Oid sink, CitusTable *source)
{
	bool		join = strcmp(pc->function, "temporal_join") == 0;
	Oid			src = pipeline_call_relid(pc, join ? "probe" : "input");
	Oid			build = join ? pipeline_call_relid(pc, "build") : InvalidOid;
	CitusTable	b;

	citus_table(src, source);
	citus_table(build, &b);
	if (source->kind == CITUS_NOT && b.kind == CITUS_NOT)
		return false;			/* a local pipeline (its sink may be distributed) */

	if (citus_local_group() != 0)
		refuse("a pipeline over a distributed table is made on the Citus coordinator",
			   "This is a worker node: its pipelines read its own tables, such as shards.",
			   "Call ptf.create_pipeline on the coordinator.");
	if (source->kind == CITUS_NOT)
		refuse(psprintf("the probe %s of a temporal join is a local table, and its build side %s a Citus table",
						relname(src), relname(build)),
			   NULL, psprintf("Distribute %s, or run the join over local tables.", relname(src)));
	if (source->kind == CITUS_REFERENCE)
		refuse(psprintf("%s is a reference table: a pipeline over it would run on every node",
						relname(src)),
			   "Distributed pipelines read a hash-distributed table, one shard group per node.",
			   psprintf("Distribute %s (create_distributed_table), or read a local table.", relname(src)));
	if (source->kind != CITUS_HASH)
		refuse(psprintf("%s is a Citus table that is not hash-distributed", relname(src)),
			   "Distributed pipelines read hash-distributed tables, whose shard groups are key groups.",
			   psprintf("Distribute %s by a column (create_distributed_table).", relname(src)));
	check_keys(pc, source);
	check_join(pc, source);
	check_other_tables(pc, source, sink);
	check_sink(sink, source);
	return true;
}

static void
check_name_free(const char *name, const char *uid)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	ptf_spi_exec_as_owner("SELECT 1 FROM ptf.pipeline_registry WHERE name OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0 || dist_pipeline(name, &(DistPipeline) {0}))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("pipeline \"%s\" already exists", name)));
	values[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT name FROM ptf_citus.pipelines WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("uid \"%s\" is already the state of pipeline \"%s\"", uid,
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1))));
}

/* first, on every node, a leftover of an earlier pipeline of this name goes */
static void
start_shard_streams(const char *name, const char *bound, Oid sink, const char *mode,
					const char *token, const CitusTable *source)
{
	List	   *forgets = NIL;
	List	   *prepares = NIL;
	ListCell   *lc;
	const char *failed = NULL;

	foreach(lc, citus_shards(source->relid))
	{
		CitusShard *s = lfirst(lc);
		CitusCommand *f = palloc0(sizeof(CitusCommand));
		CitusCommand *p = palloc0(sizeof(CitusCommand));

		if (!citus_placement(s->shardid, &p->node))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard %lld of %s has no active placement",
							(long long) s->shardid, relname(source->relid))));
		f->node = p->node;
		f->sql = psprintf("SELECT ptf._citus_shard_forget(%s, %lld, '')",
						  quote_literal_cstr(name), (long long) s->shardid);
		p->sql = psprintf("SELECT ptf._citus_shard_prepare(%s, %s, %s, %s, %s, %lld, false)",
						  quote_literal_cstr(name), quote_literal_cstr(bound),
						  quote_literal_cstr(relname(sink)), quote_literal_cstr(mode),
						  quote_literal_cstr(token), (long long) s->shardid);
		forgets = lappend(forgets, f);
		prepares = lappend(prepares, p);
	}
	citus_run(forgets, true);
	foreach(lc, forgets)
		if (!((CitusCommand *) lfirst(lc))->ok && failed == NULL)
			failed = psprintf("%s:%d: %s", ((CitusCommand *) lfirst(lc))->node.host,
							  ((CitusCommand *) lfirst(lc))->node.port,
							  ((CitusCommand *) lfirst(lc))->result);
	if (failed == NULL)
	{
		citus_run(prepares, true);
		foreach(lc, prepares)
			if (!((CitusCommand *) lfirst(lc))->ok && failed == NULL)
				failed = psprintf("%s:%d: %s", ((CitusCommand *) lfirst(lc))->node.host,
								  ((CitusCommand *) lfirst(lc))->node.port,
								  ((CitusCommand *) lfirst(lc))->result);
	}
	if (failed == NULL)
		return;

	/* what the others made goes at once (or, failing that, when they see no pipeline) */
	foreach(lc, prepares)
	{
		CitusCommand *p = lfirst(lc);

		p->sql = psprintf("SELECT ptf._citus_shard_forget(%s, %lld, %s)", quote_literal_cstr(name),
						  (long long) 0, quote_literal_cstr(token));
	}
	citus_run(prepares, true);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not start pipeline \"%s\" on every shard group's node", name),
			 errdetail("On %s", failed),
			 errhint("The node's own error is in DETAIL (its SQLSTATE does not come back through Citus). If it is about the setup: every node needs deduplicate_keep_first in shared_preload_libraries, of this version, wal_level = logical and free replication slots; and a distributed create_pipeline must come before anything in its transaction writes to distributed tables.")));
}

bool
ptf_citus_create_pipeline(const char *name, const char *bound, Oid sink, const char *mode)
{
	PipelineCall pc;
	CitusTable	source;
	char	   *token;
	char	   *uid;
	Node	   *uidarg;
	Oid			types[10] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTOID, INT4OID, TEXTOID};
	Datum		values[10];

	if (!ptf_citus_present())
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	pipeline_call(bound, &pc);
	if (!check_distributed(&pc, sink, &source))
	{
		SPI_finish();
		return false;
	}
	uidarg = pipeline_call_arg(&pc, "uid");
	Assert(uidarg != NULL && IsA(uidarg, Const));
	uid = TextDatumGetCString(((Const *) uidarg)->constvalue);
	if (strchr(uid, '/') != NULL || strchr(name, '/') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the name and uid of a distributed pipeline cannot contain \"/\""),
				 errdetail("Its shard groups' pipelines are named name/shard and uid/shard.")));

	/* no move of the group until the pipeline is known (see the header) */
	citus_lock_colocation(source.colocation_id, ExclusiveLock);

	/*
	 * A move of the group that held the lock may have committed while this
	 * waited: the placements are read as of now, not as of the statement's
	 * start (else the group's stream starts on the node it left, where its
	 * pipeline finds the group gone, and the group's rows are lost).
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	if (dist_catalog_exists())
		check_name_free(name, uid);

	/*
	 * The streams start before this transaction writes on any node: a
	 * node's slot waits for the transactions there that have written.
	 */
	token = citus_new_token();
	start_shard_streams(name, bound, sink, mode, token, &source);
	dist_catalog_ensure();
	/* a move that ran into the drop of an earlier pipeline of this name */
	values[0] = CStringGetTextDatum(name);
	ptf_spi_exec_as_owner("DELETE FROM ptf_citus.handoffs WHERE name OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_DELETE);

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));
	values[2] = CStringGetTextDatum(bound);
	values[3] = CStringGetTextDatum(relname(sink));
	values[4] = CStringGetTextDatum(mode);
	values[5] = CStringGetTextDatum(pc.function);
	values[6] = CStringGetTextDatum(uid);
	values[7] = CStringGetTextDatum(relname(source.relid));
	values[8] = Int32GetDatum(source.colocation_id);
	values[9] = CStringGetTextDatum(token);
	ptf_spi_exec_as_owner("INSERT INTO ptf_citus.pipelines "
						  "(name, owner, query, sink, sink_mode, function, uid, source, colocation_id, token) "
						  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
						  10, types, values, NULL, SPI_OK_INSERT);
	PopActiveSnapshot();
	SPI_finish();
	return true;
}

/* The caller's distributed pipeline of that name, or false. */
static bool
own_dist_pipeline(const char *name, DistPipeline *d)
{
	Oid			owner;

	if (!ptf_citus_present() || !dist_pipeline(name, d))
		return false;
	owner = get_role_oid(d->owner, true);
	if (!OidIsValid(owner) || !has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of pipeline \"%s\"", name),
				 errdetail("Pipelines are named per database, and another role made this one.")));
	return true;
}

bool
ptf_citus_drop_pipeline(const char *name, bool *dropped)
{
	DistPipeline d;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!own_dist_pipeline(name, &d))
	{
		SPI_finish();
		return false;
	}
	ptf_spi_exec_as_owner("DELETE FROM ptf_citus.handoffs WHERE name OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_DELETE);
	ptf_spi_exec_as_owner("DELETE FROM ptf_citus.pipelines WHERE name OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_DELETE);
	SPI_finish();
	*dropped = true;
	return true;
}

bool
ptf_citus_set_paused(const char *name, bool paused)
{
	DistPipeline d;
	Oid			types[2] = {TEXTOID, BOOLOID};
	Datum		values[2] = {CStringGetTextDatum(name), BoolGetDatum(paused)};

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!own_dist_pipeline(name, &d))
	{
		SPI_finish();
		return false;
	}
	/* a move of the group under way finishes first: it needs the pipeline running */
	if (paused)
		citus_lock_colocation(d.colocation_id, ExclusiveLock);
	ptf_spi_exec_as_owner("UPDATE ptf_citus.pipelines SET paused = $2 WHERE name OPERATOR(pg_catalog.=) $1",
						  2, types, values, NULL, SPI_OK_UPDATE);
	SPI_finish();
	return true;
}

void
ptf_citus_drop_extension(void)
{
	/* on the coordinator only: Citus drops the schema on the other nodes */
	if (!ptf_citus_present() || !dist_catalog_exists() || citus_local_group() != 0)
		return;

	/*
	 * Citus passes the drop on to every node in a two-phase transaction,
	 * and a prepared transaction cannot drop the shard pipelines' slots:
	 * the drop failed on a node (0A000, or a deadlock between the nodes).
	 * Refused here, before anything is passed on.
	 */
	ptf_spi_exec_as_owner("SELECT pg_catalog.string_agg(pg_catalog.quote_ident(name), ', ' ORDER BY name) "
						  "FROM ptf_citus.pipelines", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1 && !ptf_spi_isnull(1))
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop extension deduplicate_keep_first while distributed pipelines exist: %s",
						ptf_spi_text(1)),
				 errdetail("Citus drops the extension on every node in one two-phase transaction, which cannot drop the shard groups' replication slots."),
				 errhint("Drop them first: SELECT ptf.drop_pipeline(pipeline) FROM ptf.distributed_pipeline_status;")));
	ptf_spi_exec_as_owner("DROP SCHEMA ptf_citus CASCADE", 0, NULL, NULL, NULL, SPI_OK_UTILITY);
}

void
ptf_citus_check_stream_table(Oid relid)
{
	CitusTable	t;

	if (!OidIsValid(relid) || !ptf_citus_present())
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	citus_table(relid, &t);
	SPI_finish();
	if (t.kind == CITUS_NOT)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("changes => true cannot read the changes of %s, a Citus table, here",
					relname(relid)),
			 t.kind == CITUS_HASH ?
			 errdetail("%s is distributed by \"%s\": its rows, and their changes, are in its shards on the worker nodes; this node's WAL has none of them.",
					   relname(relid), t.dist_column) :
			 errdetail("%s is a Citus table: its changes are those of its shards, on the nodes that hold them.",
					   relname(relid)),
			 errhint("Make a pipeline over it on the coordinator with ptf.create_pipeline (it runs one per shard group, on the group's node); or read one shard's changes on its node (NULL::%s_<shard id>).",
					 get_rel_name(relid))));
}
