/*-------------------------------------------------------------------------
 *
 * call.c
 *	  The run of a table-function call, the same for every function: input
 *	  through the frame, then what the call did stored with the uid.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"

#include "functions/call.h"

/* WAL an idle stream may read past before its position is stored anyway */
#define IDLE_STORE_DISTANCE (16 * 1024 * 1024)

char *
ptf_call_prepare(PtfSqlInput *sql_in, Oid relid, TupleDesc rowdesc, const char *query,
				 bool changes, const char *uid)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	memset(sql_in, 0, sizeof(PtfSqlInput));
	if (changes)
		return change_stream_prepare(uid, relid);
	sql_in->relid = relid;
	sql_in->query = query;
	sql_in->rowdesc = rowdesc;
	sql_input_prepare(sql_in);
	return NULL;
}

PtfChangeStream *
ptf_call_run(PtfSqlInput *sql_in, Oid relid, TupleDesc rowdesc, const char *slot_name,
			 ChangeStreamTruncate on_truncate, const DurableProgress *progress,
			 const PtfCallSinks *sinks, PtfFrame *frame, bool end_of_stream)
{
	PtfChangeStream *cs = NULL;

	if (slot_name != NULL)
	{
		cs = change_stream_create(relid, rowdesc, slot_name, on_truncate);
		change_stream_run(cs, progress->last_lsn, progress->last_lsn_committed,
						  sinks ? sinks->changes : frame_push_meta,
						  sinks ? sinks->arg : (void *) frame);
	}
	else
		sql_input_run(sql_in, sinks ? sinks->rows : frame_push,
					  sinks ? sinks->arg : (void *) frame);
	frame_finish(frame, end_of_stream);
	return cs;
}

void
ptf_call_store(DurableState *ds, PtfOperator *op, PtfFrame *frame, PtfChangeStream *cs,
			   DurableProgress *progress, uint64 rows_out, uint64 rows_skipped,
			   int64 ttl_us)
{
	PtfFrameStats stats;

	frame_stats(frame, &stats);

	/*
	 * A call that read nothing writes nothing -- an idle pipeline leaves no
	 * WAL behind -- unless its stream moved on far enough that the slot
	 * should let go of the WAL in between.
	 */
	if (stats.rows_in == 0 && rows_skipped == 0 &&
		(cs == NULL || (change_stream_skipped(cs) == 0 &&
						change_stream_position(cs) - progress->last_lsn < IDLE_STORE_DISTANCE)))
	{
		durable_close(ds);
		return;
	}

	progress->max_event_time = stats.max_event_time;
	progress->watermark = stats.watermark;
	progress->rows_in += stats.rows_in;
	progress->rows_out += rows_out;
	progress->rows_late += stats.rows_late;
	progress->rows_skipped += rows_skipped;
	if (cs != NULL)
	{
		progress->last_lsn = change_stream_position(cs);
		progress->rows_skipped += change_stream_skipped(cs);
	}
	/* expiry is measured in the stream's processing time: no rows, no sweep */
	if (ttl_us > 0 && stats.rows_in > 0)
		keyed_state_sweep(op->state, frame_processing_time(frame));
	durable_commit(ds, op->state, op, progress);
}
