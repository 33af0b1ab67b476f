/*-------------------------------------------------------------------------
 *
 * status.c
 *	  The status of distributed pipelines: each node tells of its shard
 *	  pipelines (ptf._citus_shard_status), the coordinator gathers what
 *	  every node tells and sets it beside the shard groups Citus's metadata
 *	  places there (ptf._distributed_shard_status, behind the views
 *	  ptf.distributed_pipeline_shards and ptf.distributed_pipeline_status).
 *
 * A shard group no node tells of is "missing"; one whose node did not
 * answer is "unreachable" -- its pipeline may well run, but nobody can
 * say.  Each node answers for the roles the asking role belongs to, as
 * ptf.pipeline_status does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/meta.h"

PG_FUNCTION_INFO_V1(ptf_citus_shard_status);
PG_FUNCTION_INFO_V1(ptf_citus_distributed_status);

#define SHARD_STATUS_COLUMNS 15

Datum
ptf_citus_shard_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			types[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(GetUserId())};
	uint64		i;

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ptf_spi_exec_as_owner("SELECT c.dist_name, c.shard, p.name, c.status, "
						  "  CASE c.status WHEN 'active' THEN COALESCE(s.state, 'waiting') "
						  "                ELSE c.status END, "
						  "  s.rows_in, s.rows_out, s.rows_late, s.rows_skipped, s.lag_bytes, s.lag_seconds, "
						  "  st.watermark, u.watermark, s.failures, s.last_error "
						  "FROM ptf.citus_shard_pipelines c "
						  "JOIN ptf.pipeline_registry p ON p.id OPERATOR(pg_catalog.=) c.pipeline "
						  "LEFT JOIN ptf._pipeline_status() s ON s.name OPERATOR(pg_catalog.=) p.name "
						  "LEFT JOIN ptf.uid_registry u ON u.uid OPERATOR(pg_catalog.=) p.uid "
						  "LEFT JOIN ptf.state st ON st.uid OPERATOR(pg_catalog.=) p.uid "
						  "WHERE pg_catalog.pg_has_role($1, p.owner, 'USAGE') "
						  "ORDER BY c.dist_name, c.shard",
						  1, types, args, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		Datum		values[SHARD_STATUS_COLUMNS];
		bool		nulls[SHARD_STATUS_COLUMNS];
		int			k;

		for (k = 0; k < SHARD_STATUS_COLUMNS; k++)
			values[k] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, k + 1, &nulls[k]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

/* ---- on the coordinator ---- */

typedef struct Expected
{
	char	   *pipeline;
	int64		shard;
	CitusNode	node;
	bool		placed;
} Expected;

#define DIST_STATUS_COLUMNS 15

Datum
ptf_citus_distributed_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *expected = NIL;
	List	   *nodes;
	List	   *commands = NIL;
	List	   *names = NIL;
	ListCell   *lc;
	uint64		i;
	Datum		results;
	Datum		hosts;
	Datum		ports;

	InitMaterializedSRF(fcinfo, 0);
	if (!ptf_citus_present())
		return (Datum) 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!dist_catalog_exists())
	{
		SPI_finish();
		return (Datum) 0;
	}

	/* the caller's pipelines, and where Citus places their shard groups */
	ptf_spi_exec_as_owner("SELECT name FROM ptf_citus.pipelines ORDER BY name", 0, NULL, NULL,
						  NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	foreach(lc, names)
	{
		DistPipeline d;
		Oid			owner;
		Oid			source;
		ListCell   *sc;

		if (!dist_pipeline(lfirst(lc), &d))
			continue;
		owner = get_role_oid(d.owner, true);
		if (!OidIsValid(owner) || !has_privs_of_role(GetUserId(), owner))
			continue;
		source = DatumGetObjectId(DirectFunctionCall1(to_regclass, CStringGetTextDatum(d.source)));
		if (!OidIsValid(source))
			continue;
		foreach(sc, citus_shards(source))
		{
			Expected   *e = palloc0(sizeof(Expected));

			e->pipeline = d.name;
			e->shard = ((CitusShard *) lfirst(sc))->shardid;
			e->placed = citus_placement(e->shard, &e->node);
			expected = lappend(expected, e);
		}
	}
	if (expected == NIL)
	{
		SPI_finish();
		return (Datum) 0;
	}

	/* what each node says */
	nodes = citus_nodes();
	foreach(lc, nodes)
	{
		CitusCommand *c = palloc0(sizeof(CitusCommand));

		c->node = *(CitusNode *) lfirst(lc);
		c->sql = "SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(s)), '[]')::text "
			"FROM ptf._citus_shard_status() s";
		commands = lappend(commands, c);
	}
	citus_run(commands, true);
	{
		List	   *r = NIL;
		List	   *h = NIL;
		Datum	   *p = palloc(sizeof(Datum) * list_length(commands));

		foreach(lc, commands)
		{
			CitusCommand *c = lfirst(lc);

			r = lappend(r, c->ok ? c->result : "[]");
			h = lappend(h, c->node.host);
			p[foreach_current_index(lc)] = Int32GetDatum(c->node.port);
		}
		results = citus_text_array(r);
		hosts = citus_text_array(h);
		ports = PointerGetDatum(construct_array(p, list_length(commands), INT4OID, 4, true,
												TYPALIGN_INT));
	}

	foreach(lc, expected)
	{
		Expected   *e = lfirst(lc);
		Oid			types[7] = {TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID, TEXTOID, INT8OID, TEXTOID,
		INT4OID};
		Datum		args[7];
		Datum		values[DIST_STATUS_COLUMNS];
		bool		nulls[DIST_STATUS_COLUMNS];
		CitusCommand *answer = NULL;
		ListCell   *nc;
		int			k;

		memset(nulls, true, sizeof(nulls));
		values[0] = CStringGetTextDatum(e->pipeline);
		nulls[0] = false;
		values[1] = Int64GetDatum(e->shard);
		nulls[1] = false;
		if (e->placed)
		{
			values[2] = CStringGetTextDatum(e->node.host);
			values[3] = Int32GetDatum(e->node.port);
			nulls[2] = nulls[3] = false;
		}
		foreach(nc, commands)
		{
			CitusCommand *c = lfirst(nc);

			if (e->placed && c->node.nodeid == e->node.nodeid)
				answer = c;
		}
		if (answer != NULL && !answer->ok)
		{
			values[4] = CStringGetTextDatum("unreachable");
			values[13] = CStringGetTextDatum(answer->result ? answer->result : "no answer");
			nulls[4] = nulls[13] = false;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}
		args[0] = results;
		args[1] = hosts;
		args[2] = ports;
		args[3] = CStringGetTextDatum(e->pipeline);
		args[4] = Int64GetDatum(e->shard);
		args[5] = CStringGetTextDatum(e->placed ? e->node.host : "");
		args[6] = Int32GetDatum(e->placed ? e->node.port : 0);
		ptf_spi_exec_as_owner("SELECT s.state, s.rows_in, s.rows_out, s.rows_late, s.rows_skipped, "
							  "  s.lag_bytes, s.lag_seconds, s.watermark, s.watermark_us, s.failures, s.last_error "
							  "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)) AS n(result, host, port), "
							  "  pg_catalog.jsonb_to_recordset(n.result::pg_catalog.jsonb) AS s("
							  "    pipeline text, shard bigint, status text, state text, rows_in bigint, "
							  "    rows_out bigint, rows_late bigint, rows_skipped bigint, lag_bytes bigint, "
							  "    lag_seconds float8, watermark text, watermark_us bigint, failures int, "
							  "    last_error text) "
							  "WHERE s.pipeline OPERATOR(pg_catalog.=) $4 AND s.shard OPERATOR(pg_catalog.=) $5 "
							  "  AND n.host OPERATOR(pg_catalog.=) $6 AND n.port OPERATOR(pg_catalog.=) $7",
							  7, types, args, NULL, SPI_OK_SELECT);
		if (SPI_processed == 0)
		{
			values[4] = CStringGetTextDatum("missing");
			nulls[4] = false;
		}
		else
			for (k = 0; k < 11; k++)
				values[4 + k] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, k + 1,
											  &nulls[4 + k]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
