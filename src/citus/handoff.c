/*-------------------------------------------------------------------------
 *
 * handoff.c
 *	  A shard group's pipeline state carried to the node a move takes the
 *	  group to, and the pipeline there started where the old one stopped.
 *
 * During the move (move.c runs these on the nodes, in this order, while
 * Citus still blocks the group's writes and before the move commits):
 *
 *	1. old node, ptf._citus_handoff_export: the pipeline catches up once
 *	   more (drain.c; it already did when Citus blocked the writes, before
 *	   the sink was copied) and must find nothing to write -- anything it
 *	   would write now would miss the sink's copy, so the move fails
 *	   instead.  Its registry row is exported, by names (OIDs differ from
 *	   node to node), with the layout of its state table and of the
 *	   group's tables;
 *	2. new node, ptf._citus_handoff_receive: the group's tables here must
 *	   be laid out as there (a column dropped at another place would make
 *	   the stored row images unreadable: the move fails); the pipeline's
 *	   placeholder (shard.c) gets its query and sink, an empty state table,
 *	   and the uid's registry row;
 *	3. old node, ptf._citus_handoff_send: the state table's rows go to the
 *	   new node's (Citus's worker_copy_table_to_node);
 *	4. the coordinator reads the new node's WAL position and writes it,
 *	   with the move's token, in ptf_citus.handoffs -- a reference table,
 *	   so that it commits with the move, or not at all.
 *
 * After the move commits, the new node's pipeline worker finds the row
 * (handoff_activate, from the fence): the stream goes on from that
 * position -- every change of the group written after the move, none of
 * the move's own copying -- and the old node's pipeline, finding its group
 * gone, is dropped.  If the move fails, the new node's placeholder is
 * dropped and the old pipeline goes on where it was.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/drain.h"
#include "citus/handoff.h"
#include "citus/meta.h"
#include "citus/shard.h"

PG_FUNCTION_INFO_V1(ptf_citus_handoff_export);
PG_FUNCTION_INFO_V1(ptf_citus_handoff_receive);
PG_FUNCTION_INFO_V1(ptf_citus_handoff_send);


/*
 * What the stored row images' bytes depend on, as durable.c records it:
 * each column's type by name and its physical layout, dropped ones by
 * their layout alone.
 */
static char *
layout_of(Oid relid)
{
	TupleDesc	desc = lookup_rowtype_tupdesc(get_rel_type_id(relid), -1);
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		appendStringInfo(&buf, "%s%s %d%c", i > 0 ? ", " : "",
						 att->attisdropped ? "dropped" :
						 format_type_extended(att->atttypid, -1, FORMAT_TYPE_FORCE_QUALIFY),
						 att->attlen, att->attalign);
	}
	ReleaseTupleDesc(desc);
	return buf.data;
}

static void
check_mover(const ShardPipeline *sp)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(sp->pipeline)};
	Oid			owner;

	ptf_spi_exec_as_owner("SELECT owner FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	owner = DatumGetObjectId(ptf_spi_datum(1));
	if (!has_privs_of_role(GetUserId(), owner) &&
		!pg_class_ownercheck(citus_shard_owner_table(sp->shard), GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to move the shard group of pipeline \"%s\"", sp->dist_name)));
}

static ShardPipeline *
the_shard_pipeline(const char *dist_name, int64 shard, const char *token, const char *status)
{
	ShardPipeline *sp = palloc(sizeof(ShardPipeline));

	if (!shard_pipeline_by_name(dist_name, shard, sp) || strcmp(sp->status, status) != 0 ||
		(token != NULL && strcmp(sp->token, token) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard group %lld of pipeline \"%s\" has no %s pipeline on this node",
						(long long) shard, dist_name, status)));
	check_mover(sp);
	return sp;
}

static int64
rows_out_of(const char *uid)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(uid)};

	ptf_spi_exec_as_owner("SELECT rows_out, stream_snapshot FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "uid \"%s\" has no state here", uid);
	if (!ptf_spi_isnull(2))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the pipeline of uid \"%s\" has not yet read its initial snapshot", uid),
				 errhint("Move the shard group once its pipeline has stepped (snapshot => true is read by the first step).")));
	return ptf_spi_int64(1, 0);
}

/* the uid's tables, by name, and their layouts */
static void
input_layouts(const char *uid, Datum *names, Datum *layouts)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(uid)};
	List	   *relids = NIL;
	List	   *n = NIL;
	List	   *l = NIL;
	ListCell   *lc;
	uint64		i;

	ptf_spi_exec_as_owner("SELECT t FROM ptf.uid_registry u, pg_catalog.unnest(u.input_tables) "
						  "WITH ORDINALITY AS x(t, n) WHERE u.uid OPERATOR(pg_catalog.=) $1 ORDER BY n",
						  1, types, values, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		relids = lappend_oid(relids, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																	SPI_tuptable->tupdesc, 1,
																	&isnull)));
	}
	foreach(lc, relids)
	{
		n = lappend(n, ptf_relation_sql_name(lfirst_oid(lc)));
		l = lappend(l, layout_of(lfirst_oid(lc)));
	}
	*names = citus_text_array(n);
	*layouts = citus_text_array(l);
}

/*
 * A uid reading an upsert source keeps the last row of each key in a
 * second state table (state/images_table.c), which the hand-off does not
 * carry: moved without it, updates of keys written before the move would
 * come as inserts and their deletes be passed over.  Refused, before
 * anything is copied.
 */
static void
refuse_kept_rows(const ShardPipeline *sp)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(sp->uid)};

	ptf_spi_exec_as_owner("SELECT 1 FROM ptf.uid_registry u "
						  "JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) u.state_table "
						  "JOIN pg_catalog.pg_class i ON i.relnamespace OPERATOR(pg_catalog.=) t.relnamespace "
						  " AND i.relname OPERATOR(pg_catalog.=) (t.relname OPERATOR(pg_catalog.||) '_images')::pg_catalog.name "
						  "WHERE u.uid OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot move shard %lld while pipeline \"%s\" keeps the last row of each key of it",
						(long long) sp->shard, sp->dist_name),
				 errdetail("The pipeline reads a table under REPLICA IDENTITY DEFAULT as an upsert source; the rows it keeps per key do not move with the shard group yet."),
				 errhint("ALTER TABLE ... REPLICA IDENTITY FULL on the source, then drop the pipeline and make it again (snapshot => true), before moving the group.")));
}

Datum
ptf_citus_handoff_export(PG_FUNCTION_ARGS)
{
	char	   *dist_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		shard = PG_GETARG_INT64(1);
	ShardPipeline *sp;
	int64		before;
	Oid			types[3] = {TEXTOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[3];
	char	   *result;
	int			nest;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sp = the_shard_pipeline(dist_name, shard, NULL, "active");
	refuse_kept_rows(sp);

	/*
	 * Whatever it would write now misses the sink's copy: it must have
	 * nothing to write (changes of the group routed through another node
	 * when the move blocked writes, a reference table written since).
	 */
	before = rows_out_of(sp->uid);
	citus_drain(sp);
	if (rows_out_of(sp->uid) != before)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("pipeline \"%s\" wrote rows of shard %lld after the move had copied its sink",
						sp->name, (long long) shard),
				 errdetail("Changes reached the shard group after the move blocked its writes, routed through another node, or in a reference table it reads; those rows are kept here, where the group stays."),
				 errhint("Move the shard group again.")));

	/* names, not OIDs; qualified whatever the caller's search_path */
	nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	values[0] = CStringGetTextDatum(sp->uid);
	input_layouts(sp->uid, &values[1], &values[2]);
	ptf_spi_exec_as_owner("SELECT pg_catalog.jsonb_build_object("
						  " 'function', function, 'row_type', row_type::text, 'key_columns', key_columns,"
						  " 'on_time', on_time, 'time_type', time_type::text,"
						  " 'max_event_time', max_event_time, 'watermark', watermark, 'options', options,"
						  " 'keys', keys, 'rows_in', rows_in, 'rows_out', rows_out, 'rows_late', rows_late,"
						  " 'rows_skipped', rows_skipped, 'created_at', created_at, 'layout', layout,"
						  " 'row_types', row_types, 'input_times', input_times,"
						  " 'inputs', $2, 'layouts', $3,"
						  " 'columns', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object("
						  "     'name', a.attname, 'type', pg_catalog.format_type(a.atttypid, a.atttypmod),"
						  "     'collation', (SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
						  "                          OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.collname)"
						  "                   FROM pg_catalog.pg_collation c JOIN pg_catalog.pg_namespace n"
						  "                     ON n.oid OPERATOR(pg_catalog.=) c.collnamespace"
						  "                  WHERE c.oid OPERATOR(pg_catalog.=) a.attcollation"
						  "                    AND a.attcollation OPERATOR(pg_catalog.<>) t.typcollation))"
						  "     ORDER BY a.attnum)"
						  "   FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid"
						  "  WHERE a.attrelid OPERATOR(pg_catalog.=) u.state_table AND a.attnum OPERATOR(pg_catalog.>) 0"
						  "    AND NOT a.attisdropped))::text "
						  "FROM ptf.uid_registry u WHERE uid OPERATOR(pg_catalog.=) $1",
						  3, types, values, NULL, SPI_OK_SELECT);
	result = citus_keep(ptf_spi_text(1));
	AtEOXact_GUC(true, nest);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(result));
}

/*
 * The table the state comes in: named after the move, the pipeline and its
 * shard, the same on both nodes (two pipelines over one source carry the
 * same shard in one move).
 */
static char *
handoff_table_name(const char *dist_name, const char *token, int64 shard)
{
	uint64		name_hash = hash_bytes_extended((const unsigned char *) dist_name,
												strlen(dist_name), 0);

	return psprintf("ptf.handoff_%s_%lld_%016llx", token, (long long) shard,
					(unsigned long long) name_hash);
}

Datum
ptf_citus_handoff_receive(PG_FUNCTION_ARGS)
{
	char	   *dist_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		shard = PG_GETARG_INT64(1);
	char	   *token = citus_token_arg(fcinfo, 2, false);
	text	   *export = PG_GETARG_TEXT_PP(3);
	ShardPipeline *sp;
	DistPipeline d;
	char	   *query;
	Oid			sink_shard;
	int64	   *shards;
	int			nshards;
	char	   *table = handoff_table_name(dist_name, token, shard);
	StringInfoData sql;
	uint64		i;
	int			nest;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sp = the_shard_pipeline(dist_name, shard, token, "incoming");
	if (!dist_pipeline(dist_name, &d))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("pipeline \"%s\" does not exist", dist_name)));

	/* the group's tables here are laid out as there, or the state cannot come */
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {PointerGetDatum(export)};

		ptf_spi_exec_as_owner("SELECT n, l FROM pg_catalog.jsonb_array_elements_text(($1::pg_catalog.jsonb) -> 'inputs') "
							  "WITH ORDINALITY AS a(n, o) JOIN "
							  "pg_catalog.jsonb_array_elements_text(($1::pg_catalog.jsonb) -> 'layouts') "
							  "WITH ORDINALITY AS b(l, p) ON o OPERATOR(pg_catalog.=) p",
							  1, types, values, NULL, SPI_OK_SELECT);
		for (i = 0; i < SPI_processed; i++)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
			char	   *there = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
			Oid			relid = DatumGetObjectId(DirectFunctionCall1(to_regclass,
																	 CStringGetTextDatum(name)));

			if (!OidIsValid(relid))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("table %s of shard group %lld is not on this node", name,
								(long long) shard)));
			if (strcmp(layout_of(relid), there) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("the pipeline state of shard group %lld cannot move: table %s is laid out otherwise on this node",
								(long long) shard, name),
						 errdetail("There: (%s); here: (%s).  Citus made the table here from its definition now, without the columns dropped since it was made there; the state's row images are in the old layout.",
								   there, layout_of(relid)),
						 errhint("Drop pipeline \"%s\", move the shard group, and make the pipeline again (snapshot => true reads the tables as they are).",
								 dist_name)));
		}
	}

	/* the group's tables exist here now: the pipeline's query and sink */
	query = shard_query(d.query, d.sink, d.sink_mode, shard, &sink_shard, &shards, &nshards);

	nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {PointerGetDatum(export)};

		/* the state table, as empty as its copy there is full */
		ptf_spi_exec_as_owner("SELECT c ->> 'name', c ->> 'type', c ->> 'collation' "
							  "FROM pg_catalog.jsonb_array_elements(($1::pg_catalog.jsonb) -> 'columns') c",
							  1, types, values, NULL, SPI_OK_SELECT);
		initStringInfo(&sql);
		appendStringInfo(&sql, "CREATE TABLE %s (", table);
		for (i = 0; i < SPI_processed; i++)
		{
			char	   *collation = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);

			appendStringInfo(&sql, "%s%s %s%s%s", i > 0 ? ", " : "",
							 quote_identifier(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)),
							 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2),
							 collation ? " COLLATE " : "", collation ? collation : "");
		}
		appendStringInfoString(&sql, ") USING heap TABLESPACE pg_default");
	}
	ptf_spi_exec_as_owner(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner(psprintf("COMMENT ON TABLE %s IS %s", table,
								   quote_literal_cstr(psprintf("keyed state of uid %s (%s), moved here",
															   sp->uid, d.function))),
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);

	/* the placeholder becomes the pipeline: query, sink, and the uid's state */
	{
		Oid			types[7] = {INT4OID, TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID, INT8ARRAYOID};
		Datum		values[7];
		Datum	   *elems = palloc(sizeof(Datum) * Max(nshards, 1));
		int			k;

		for (k = 0; k < nshards; k++)
			elems[k] = Int64GetDatum(shards[k]);
		values[0] = Int32GetDatum(sp->pipeline);
		values[1] = CStringGetTextDatum(query);
		values[2] = ObjectIdGetDatum(sink_shard);
		values[3] = PointerGetDatum(export);
		values[4] = CStringGetTextDatum(table);
		values[5] = CStringGetTextDatum(sp->slot_name);
		values[6] = PointerGetDatum(construct_array(elems, nshards, INT8OID, 8, FLOAT8PASSBYVAL,
													TYPALIGN_DOUBLE));
		ptf_spi_exec_as_owner("UPDATE ptf.pipeline_registry SET query = $2, sink = $3::pg_catalog.regclass "
							  "WHERE id OPERATOR(pg_catalog.=) $1",
							  7, types, values, NULL, SPI_OK_UPDATE);
		ptf_spi_exec_as_owner("UPDATE ptf.citus_shard_pipelines SET shards = $7, "
							  "  handoff_table = $5::pg_catalog.regclass "
							  "WHERE pipeline OPERATOR(pg_catalog.=) $1",
							  7, types, values, NULL, SPI_OK_UPDATE);
		ptf_spi_exec_as_owner("INSERT INTO ptf.uid_registry (uid, function, owner, row_type, key_columns, "
							  "  on_time, time_type, state_table, max_event_time, watermark, slot_name, "
							  "  options, last_lsn, version, keys, rows_in, rows_out, rows_late, "
							  "  rows_skipped, created_at, updated_at, layout, row_types, input_times, "
							  "  stream_snapshot, input_tables) "
							  "SELECT p.uid, e ->> 'function', p.owner, (e ->> 'row_type')::pg_catalog.regtype, "
							  "  ARRAY(SELECT pg_catalog.jsonb_array_elements_text(e -> 'key_columns')), "
							  "  e ->> 'on_time', (e ->> 'time_type')::pg_catalog.regtype, $5::pg_catalog.regclass, "
							  "  (e ->> 'max_event_time')::pg_catalog.int8, (e ->> 'watermark')::pg_catalog.int8, $6, "
							  "  e ->> 'options', NULL, pg_catalog.nextval('ptf.state_version_seq'), "
							  "  (e ->> 'keys')::pg_catalog.int8, (e ->> 'rows_in')::pg_catalog.int8, "
							  "  (e ->> 'rows_out')::pg_catalog.int8, (e ->> 'rows_late')::pg_catalog.int8, "
							  "  (e ->> 'rows_skipped')::pg_catalog.int8, (e ->> 'created_at')::pg_catalog.timestamptz, "
							  "  pg_catalog.clock_timestamp(), (e ->> 'layout')::pg_catalog.int4, e ->> 'row_types', "
							  "  CASE WHEN pg_catalog.jsonb_typeof(e -> 'input_times') OPERATOR(pg_catalog.=) 'array' "
							  "       THEN ARRAY(SELECT x::pg_catalog.int8 FROM pg_catalog.jsonb_array_elements_text(e -> 'input_times') x) END, "
							  "  NULL, "
							  "  ARRAY(SELECT pg_catalog.to_regclass(x)::pg_catalog.oid "
							  "          FROM pg_catalog.jsonb_array_elements_text(e -> 'inputs') WITH ORDINALITY AS i(x, o) ORDER BY o) "
							  "FROM ptf.pipeline_registry p, (SELECT $4::pg_catalog.jsonb AS e) AS x "
							  "WHERE p.id OPERATOR(pg_catalog.=) $1",
							  7, types, values, NULL, SPI_OK_INSERT);
	}
	AtEOXact_GUC(true, nest);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(table));
}

Datum
ptf_citus_handoff_send(PG_FUNCTION_ARGS)
{
	char	   *dist_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		shard = PG_GETARG_INT64(1);
	char	   *token = citus_token_arg(fcinfo, 2, false);
	int32		target_node = PG_GETARG_INT32(4);
	ShardPipeline *sp;
	char	   *table = handoff_table_name(dist_name, token, shard);
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	char	   *state_table;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sp = the_shard_pipeline(dist_name, shard, NULL, "active");
	values[0] = CStringGetTextDatum(sp->uid);
	ptf_spi_exec_as_owner("SELECT state_table::pg_catalog.text FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1 || ptf_spi_isnull(1))
		elog(ERROR, "uid \"%s\" has no state table", sp->uid);
	state_table = ptf_spi_text(1);

	/* Citus copies a table to the table of the same name there */
	ptf_spi_exec_as_owner(psprintf("CREATE TABLE %s AS SELECT * FROM %s", table, state_table),
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner(psprintf("SELECT pg_catalog.worker_copy_table_to_node(%s::pg_catalog.regclass, %d)",
								   quote_literal_cstr(table), target_node),
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	ptf_spi_exec_as_owner(psprintf("DROP TABLE %s", table), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	SPI_finish();
	PG_RETURN_VOID();
}

/* ---- after the move, on the new node ---- */

PtfStepFence
handoff_activate(const ShardPipeline *sp, const DistPipeline *d)
{
	Oid			types[3] = {TEXTOID, INT8OID, TEXTOID};
	Datum		values[3];
	char	   *start;
	LOCKTAG		tag;
	CitusNode	where;
	bool		here;

	values[0] = CStringGetTextDatum(sp->dist_name);
	values[1] = Int64GetDatum(sp->shard);
	values[2] = CStringGetTextDatum(sp->token);
	ptf_spi_exec_as_owner("SELECT start_lsn::pg_catalog.text FROM ptf_citus.handoffs "
						  "WHERE name OPERATOR(pg_catalog.=) $1 AND shard OPERATOR(pg_catalog.=) $2 "
						  "AND token OPERATOR(pg_catalog.=) $3",
						  3, types, values, NULL, SPI_OK_SELECT);
	start = SPI_processed > 0 ? ptf_spi_text(1) : NULL;
	here = citus_placement(sp->shard, &where) && where.groupid == citus_local_group();
	if (start == NULL)
	{
		/* no move brought it: gone once the move failed and Citus cleaned up */
		if (!here && sp->age_seconds * 1000 > ptf_citus_pending_timeout_ms &&
			!OidIsValid(citus_shard_table(sp->shard)))
		{
			shard_pipeline_drop(sp);
			return PTF_STEP_GONE;
		}
		return PTF_STEP_WAIT;
	}
	if (!here)
		return PTF_STEP_WAIT;
	citus_group_lock_tag(&tag, sp->colocation_id, sp->shard_index);
	if (LockAcquire(&tag, ShareLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return PTF_STEP_WAIT;
	if (d->paused)
		return PTF_STEP_PAUSED;

	/* the stream goes on from the new node's WAL position when the move ended */
	values[0] = CStringGetTextDatum(sp->uid);
	values[1] = CStringGetTextDatum(start);
	values[2] = CStringGetTextDatum(sp->slot_name);
	ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET last_lsn = $2::pg_catalog.pg_lsn, "
						  "  version = pg_catalog.nextval('ptf.state_version_seq') "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  3, (Oid[]) {TEXTOID, TEXTOID, TEXTOID}, values, NULL, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		elog(ERROR, "the state of uid \"%s\" did not arrive", sp->uid);
	ptf_spi_exec_as_owner("SELECT pg_catalog.pg_replication_slot_advance($3::pg_catalog.name, $2::pg_catalog.pg_lsn)",
						  3, (Oid[]) {TEXTOID, TEXTOID, TEXTOID}, values, NULL, SPI_OK_SELECT);
	shard_pipeline_set_status(sp->pipeline, "active");
	ereport(LOG,
			(errmsg("shard pipeline \"%s\" of distributed pipeline \"%s\" goes on here from %s, where the move of its shard group ended",
					sp->name, sp->dist_name, start)));
	return PTF_STEP_GO;
}
