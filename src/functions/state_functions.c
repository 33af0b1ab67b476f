/*-------------------------------------------------------------------------
 *
 * state_functions.c
 *	  SQL entry points about state: ptf.drop_state() forgets a uid's durable
 *	  state, ptf.last_call_stats() tells what the last call did in memory,
 *	  ptf._interval_us() checks a declared watermark delay as calls will.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/typcache.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "engine/output.h"
#include "functions/common.h"
#include "input/change_stream.h"
#include "state/durable.h"

PG_FUNCTION_INFO_V1(ptf_drop_state);
PG_FUNCTION_INFO_V1(ptf_resync);
PG_FUNCTION_INFO_V1(ptf_skip_transaction);
PG_FUNCTION_INFO_V1(ptf_state_expired);
PG_FUNCTION_INFO_V1(ptf_last_call_stats);
PG_FUNCTION_INFO_V1(ptf_state_row);
PG_FUNCTION_INFO_V1(ptf_interval_us);
PG_FUNCTION_INFO_V1(ptf_forget_dropped_tables);

/*
 * ptf.state_row(image, NULL::t): a row image of a state table (a bytea
 * field) as a row of t, for looking into state with SQL.
 */
Datum
ptf_state_row(PG_FUNCTION_ARGS)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 1);
	TupleDesc	desc;
	Datum		d;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (!OidIsValid(type) || !type_is_rowtype(type) || type == RECORDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("row_type must be a row type, such as NULL::tablename")));
	desc = lookup_rowtype_tupdesc_copy(type, -1);
	d = durable_image_datum(PG_GETARG_BYTEA_PP(0), desc);
	PG_RETURN_DATUM(d);
}

/*
 * ptf._state_expired(state_table, bytes): for ptf.state, the stored keys
 * whose TTL passed and that no call removed yet, or their rows' bytes;
 * NULL for a table that is not the state of a uid the caller may use.
 */
Datum
ptf_state_expired(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	bool		want_bytes = PG_GETARG_BOOL(1);
	int64		keys;
	int64		bytes;
	bool		mine;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	mine = durable_count_expired(relid, ptf_now(), &keys, &bytes);
	SPI_finish();
	if (!mine)
		PG_RETURN_NULL();
	PG_RETURN_INT64(want_bytes ? bytes : keys);
}

/* The uid argument (refused NULL), with SPI connected for the registry. */
static char *
uid_arg_connected(FunctionCallInfo fcinfo)
{
	char	   *uid = ptf_uid_arg(fcinfo, 0);

	if (uid == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("uid must not be NULL")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	return uid;
}

/*
 * ptf.resync(uid): the uid's next call reads its tables as they are then,
 * says the net effect on the state kept, and goes on with the changes after
 * (state/registry.c says which functions can).
 */
Datum
ptf_resync(PG_FUNCTION_ARGS)
{
	char	   *uid = uid_arg_connected(fcinfo);

	durable_resync(uid);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * ptf.skip_transaction(uid, lsn): the way on for a stream stopped for good
 * at a change it cannot read, short of ptf.drop_state: the transaction the
 * error's context names is passed over, unread, as ALTER SUBSCRIPTION ...
 * SKIP passes over a transaction a subscription cannot apply.
 */
Datum
ptf_skip_transaction(PG_FUNCTION_ARGS)
{
	char	   *uid;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lsn must not be NULL")));
	uid = uid_arg_connected(fcinfo);
	durable_skip_transaction(uid, PG_GETARG_LSN(1));
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
ptf_drop_state(PG_FUNCTION_ARGS)
{
	char	   *uid = uid_arg_connected(fcinfo);
	bool		dropped;
	char	   *slot_name;

	dropped = durable_drop(uid, false, &slot_name);

	/*
	 * The slot of a change stream goes when the transaction commits (slots
	 * are not transactional): one that rolls back, or whose backend dies,
	 * leaves the uid with its state and its stream.  Dropped at once, the
	 * uid kept its state without a stream: a window uid failed at every call
	 * and a normalizing one made a new slot and read the table again, its
	 * rows delivered twice.
	 */
	if (slot_name != NULL)
		change_stream_drop_slot_at_commit(slot_name);
	SPI_finish();
	PG_RETURN_BOOL(dropped);
}

Datum
ptf_last_call_stats(PG_FUNCTION_ARGS)
{
	const PtfCallStats *st = ptf_get_last_call_stats();
	TupleDesc	desc;
	Datum		values[14];
	bool		nulls[14] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (st == NULL)
		PG_RETURN_NULL();
	values[0] = CStringGetTextDatum(st->function);
	values[1] = Int64GetDatum((int64) st->frame.rows_in);
	values[2] = Int64GetDatum((int64) st->rows_out);
	values[3] = Int64GetDatum((int64) st->frame.rows_late);
	values[4] = Int64GetDatum((int64) st->frame.keys);
	values[5] = Int64GetDatum((int64) st->frame.state_bytes);
	values[6] = Int64GetDatum((int64) st->frame.rows_spilled);
	values[7] = Int32GetDatum(st->frame.spill_partitions);
	/* how a uid's state was read (1.0's declaration stops before) */
	values[8] = st->state_load ? CStringGetTextDatum(st->state_load) : (Datum) 0;
	nulls[8] = (st->state_load == NULL);
	values[9] = Int64GetDatum((int64) st->keys_probed);
	values[10] = Int64GetDatum((int64) st->keys_loaded);
	values[11] = Int64GetDatum((int64) st->keys_evicted);
	nulls[9] = nulls[10] = nulls[11] = (st->state_load == NULL);
	/* parallel workers (1.2) */
	values[12] = Int32GetDatum(st->workers_planned);
	values[13] = Int32GetDatum(st->workers_launched);
	Assert(desc->natts <= (int) lengthof(values));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/*
 * ptf._interval_us(delay, what): an interval in microseconds, as every
 * call converts it.  ptf.set_watermark checks a delay with it, so that a
 * declaration no call could use is refused when it is made.
 */
Datum
ptf_interval_us(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(ptf_interval_to_us(PG_GETARG_DATUM(0),
									   text_to_cstring(PG_GETARG_TEXT_PP(1))));
}

/* the tables (and their row types) a statement dropped */
#define DROPPED_TABLES \
	"(SELECT d.classid, d.objid, d.object_identity " \
	"   FROM pg_catalog.pg_event_trigger_dropped_objects() d " \
	"  WHERE d.objsubid OPERATOR(pg_catalog.=) 0 AND d.classid OPERATOR(pg_catalog.=) ANY " \
	"        ('{pg_catalog.pg_class,pg_catalog.pg_type}'::pg_catalog.regclass[]))"

/* the extension's catalogs, unless this drop takes them (DROP EXTENSION) */
static bool
catalogs_exist(void)
{
	Oid			nsp = get_namespace_oid("ptf", true);

	return OidIsValid(nsp) &&
		OidIsValid(get_relname_relid("uid_registry", nsp)) &&
		OidIsValid(get_relname_relid("pipeline_registry", nsp)) &&
		OidIsValid(get_relname_relid("watermarks", nsp));
}

/*
 * Event trigger on sql_drop.  A dropped table takes its watermark
 * declaration along.  A change stream that read it fails from now on and
 * its slot keeps WAL until the uid is dropped: a WARNING names the uid
 * (or its pipeline) and the way out.  A pipeline's dropped sink is
 * remembered by name: the pipeline fails until a table of that name is
 * made again, then goes on into it (worker/pipeline.c).  Runs as the role
 * dropping, which is told only of its own uids and pipelines by name.
 */
Datum
ptf_forget_dropped_tables(PG_FUNCTION_ARGS)
{
	uint64		i;
	int			others = 0;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ptf._forget_dropped_tables() is an event trigger")));
	if (!catalogs_exist())
		PG_RETURN_NULL();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	ptf_spi_exec_as_owner("DELETE FROM ptf.watermarks w USING " DROPPED_TABLES " d "
						  "WHERE d.objid OPERATOR(pg_catalog.=) w.relid::pg_catalog.oid "
						  "AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass",
						  0, NULL, NULL, NULL, SPI_OK_DELETE);

	ptf_spi_exec_as_owner("UPDATE ptf.pipeline_registry p SET sink_name = d.object_identity "
						  "FROM " DROPPED_TABLES " d "
						  "WHERE d.objid OPERATOR(pg_catalog.=) p.sink::pg_catalog.oid "
						  "AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
						  "AND p.sink_name IS NULL "
						  "RETURNING p.name, p.owner::pg_catalog.oid, p.sink_name",
						  0, NULL, NULL, NULL, SPI_OK_UPDATE_RETURNING);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *name = SPI_getvalue(tup, desc, 1);
		char	   *table = SPI_getvalue(tup, desc, 3);

		if (!has_privs_of_role(GetUserId(),
							   DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull))))
		{
			others++;
			continue;
		}
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("table %s is the sink of pipeline \"%s\"", table, name),
				 errdetail("The pipeline fails until a table %s is made again, then goes on into it from where it stopped.",
						   table),
				 errhint("Make the table again, or drop the pipeline: SELECT ptf.drop_pipeline('%s');",
						 name)));
	}

	/*
	 * A uid reads its input tables, and its state is made of rows of its
	 * row type (from_changelog's target); a uid of 1.0 knows no
	 * input_tables until its next commit.
	 */
	ptf_spi_exec_as_owner("SELECT DISTINCT ON (u.uid) u.uid, u.owner::pg_catalog.oid, p.name, d.object_identity "
						  "FROM ptf.uid_registry u "
						  "JOIN " DROPPED_TABLES " d ON "
						  "  (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
						  "   AND d.objid OPERATOR(pg_catalog.=) ANY (u.input_tables)) "
						  "  OR (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass "
						  "   AND d.objid OPERATOR(pg_catalog.=) u.row_type::pg_catalog.oid) "
						  "LEFT JOIN ptf.pipeline_registry p ON p.uid OPERATOR(pg_catalog.=) u.uid "
						  "WHERE u.slot_name IS NOT NULL ORDER BY u.uid, d.classid",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *uid = SPI_getvalue(tup, desc, 1);
		char	   *pipeline = SPI_getvalue(tup, desc, 3);
		char	   *table = SPI_getvalue(tup, desc, 4);

		if (!has_privs_of_role(GetUserId(),
							   DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull))))
			others++;
		else if (pipeline != NULL)
			ereport(WARNING,
					(errcode(ERRCODE_WARNING),
					 errmsg("table %s is read by pipeline \"%s\"", table, pipeline),
					 errdetail("Its stream reads no more of the table's changes (a call over a table made again by that name is refused, or starts on it), and its replication slot keeps WAL until the pipeline is dropped."),
					 errhint("SELECT ptf.drop_pipeline('%s');", pipeline)));
		else
			ereport(WARNING,
					(errcode(ERRCODE_WARNING),
					 errmsg("table %s is read by the change stream of uid \"%s\"", table, uid),
					 errdetail("Its stream reads no more of the table's changes (a call over a table made again by that name is refused, or starts on it), and its replication slot keeps WAL until the uid is dropped."),
					 errhint("SELECT ptf.drop_state('%s');", uid)));
	}
	if (others > 0)
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("a dropped table was read or written by %d change streams or pipelines of other roles",
						others),
				 errdetail("They fail from now on; their owners see them in ptf.state and ptf.pipeline_status.")));
	SPI_finish();
	PG_RETURN_NULL();
}
