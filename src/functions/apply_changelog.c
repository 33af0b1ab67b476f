/*-------------------------------------------------------------------------
 *
 * apply_changelog.c
 *	  SQL entry point of ptf.apply_changelog(target, query): the (kind,
 *	  data) rows of a query applied to a table (sink/apply.c), with counts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "input/input.h"
#include "sink/apply.h"

PG_FUNCTION_INFO_V1(ptf_apply_changelog);

static void
put(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	apply_sink_put((ApplySink *) arg, kind, row);
}

Datum
ptf_apply_changelog(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *query;
	TupleDesc	resdesc;
	ApplySink  *sink;
	PtfSqlInput in;
	ApplyCounts c;
	Datum		values[9];
	bool		nulls[9] = {false};

	/* a row of NULL counts would read as "nothing to apply": refuse instead */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of apply_changelog must not be NULL",
						PG_ARGISNULL(0) ? "target" : "query")));
	relid = PG_GETARG_OID(0);
	query = text_to_cstring(PG_GETARG_TEXT_PP(1));

	if (get_call_result_type(fcinfo, NULL, &resdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sink = apply_sink_create(relid);

	/* the changes: (kind, data) rows of the table's type, or its rows (inserts) */
	memset(&in, 0, sizeof(in));
	in.query = query;
	in.rowdesc = apply_sink_rowdesc(sink);
	sql_input_prepare(&in);
	sql_input_run(&in, put, sink);
	apply_sink_finish(sink, &c);
	SPI_finish();

	values[0] = Int64GetDatum(c.received[ROWKIND_INSERT]);
	values[1] = Int64GetDatum(c.received[ROWKIND_UPDATE_BEFORE]);
	values[2] = Int64GetDatum(c.received[ROWKIND_UPDATE_AFTER]);
	values[3] = Int64GetDatum(c.received[ROWKIND_DELETE]);
	values[4] = Int64GetDatum(c.inserted);
	values[5] = Int64GetDatum(c.updated);
	values[6] = Int64GetDatum(c.deleted);
	values[7] = Int64GetDatum(c.missing);
	values[8] = Int64GetDatum(c.superseded);
	resdesc = BlessTupleDesc(resdesc);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(resdesc, values, nulls)));
}
