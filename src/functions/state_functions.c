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

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "functions/common.h"
#include "input/change_stream.h"
#include "state/durable.h"

PG_FUNCTION_INFO_V1(ptf_drop_state);
PG_FUNCTION_INFO_V1(ptf_last_call_stats);
PG_FUNCTION_INFO_V1(ptf_state_row);
PG_FUNCTION_INFO_V1(ptf_interval_us);

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

Datum
ptf_drop_state(PG_FUNCTION_ARGS)
{
	char	   *uid = ptf_uid_arg(fcinfo, 0);
	bool		dropped;
	char	   *slot_name;

	if (uid == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("uid must not be NULL")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	dropped = durable_drop(uid, false, &slot_name);

	/*
	 * The slot of a change stream goes at once (slots are not
	 * transactional): if the dropping transaction rolls back, the uid keeps
	 * its state but has lost its stream, and its next call says so.
	 */
	if (slot_name != NULL)
		change_stream_drop_slot(slot_name);
	SPI_finish();
	PG_RETURN_BOOL(dropped);
}

Datum
ptf_last_call_stats(PG_FUNCTION_ARGS)
{
	const PtfCallStats *st = ptf_get_last_call_stats();
	TupleDesc	desc;
	Datum		values[8];
	bool		nulls[8] = {0};

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
