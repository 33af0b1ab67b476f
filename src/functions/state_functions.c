/*-------------------------------------------------------------------------
 *
 * state_functions.c
 *	  SQL entry points about state: ptf.drop_state() forgets a uid's durable
 *	  state, ptf.last_call_stats() tells what the last call did in memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "catalog.h"
#include "functions/common.h"
#include "state/durable.h"

PG_FUNCTION_INFO_V1(ptf_drop_state);
PG_FUNCTION_INFO_V1(ptf_last_call_stats);

Datum
ptf_drop_state(PG_FUNCTION_ARGS)
{
	char	   *uid = ptf_uid_arg(fcinfo, 0);
	bool		dropped;

	if (uid == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("uid must not be NULL")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	dropped = durable_drop(uid, false);
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
