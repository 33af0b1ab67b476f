/*-------------------------------------------------------------------------
 *
 * output.c
 *	  A call's output as a materialized set-returning function result, and
 *	  what the last call of this backend did (ptf.last_call_stats()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/tuplestore.h"

#include "engine/output.h"
#include "engine/state_load.h"

void
ptf_output_init(FunctionCallInfo fcinfo, PtfOutput *out)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	out->store = rsinfo->setResult;
	out->desc = rsinfo->setDesc;
	out->rows = 0;
	out->frame = NULL;
}

/*
 * A change stream's row may lack unchanged TOASTed values the WAL did not
 * carry; an operator that emits it as it came would print placeholders.
 */
void
ptf_check_row_complete(PtfFrame *frame, TupleTableSlot *row)
{
	if (frame == NULL || row != frame_current_row(frame))
		return;
	ptf_check_meta_complete(frame_current_meta(frame));
}

/* An incomplete row (see ptf_check_row_complete) cannot be kept or emitted. */
void
ptf_check_meta_complete(const PtfRowMeta *meta)
{
	if (meta->incomplete)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the new image of an update lacks values the WAL does not carry"),
				 errdetail("The update at %X/%X left a TOASTed column unchanged, which logs no value for it, and no earlier image of the row is kept.",
						   LSN_FORMAT_ARGS(meta->lsn)),
				 errhint("ptf.resync(uid) brings the stream in line with the table as it is now, keeping its state; ALTER TABLE ... REPLICA IDENTITY FULL logs whole old images, from which such values are taken.")));
}

void
ptf_output_emit_row(void *arg, RowKind kind, TupleTableSlot *row)
{
	PtfOutput  *out = (PtfOutput *) arg;

	ptf_check_row_complete(out->frame, row);
	tuplestore_puttupleslot(out->store, row);
	out->rows++;
}

static PtfCallStats last_call;
static bool have_last_call = false;

void
ptf_record_call_stats(const char *function, PtfFrame *frame, uint64 rows_out)
{
	last_call.function = function;
	frame_stats(frame, &last_call.frame);
	last_call.rows_out = rows_out;
	last_call.state_load = NULL;
	last_call.keys_probed = last_call.keys_loaded = last_call.keys_evicted = 0;
	last_call.workers_planned = last_call.workers_launched = 0;
	have_last_call = true;
}

/* State the call kept besides its operator's (an upsert source's rows). */
void
ptf_record_more_state(Size bytes)
{
	last_call.frame.state_bytes += bytes;
}

void
ptf_record_parallel_stats(int planned, int launched, uint64 worker_rows,
						  uint64 rows_from_workers)
{
	Assert(last_call.frame.rows_in >= rows_from_workers);
	last_call.workers_planned = planned;
	last_call.workers_launched = launched;
	last_call.frame.rows_in += worker_rows - rows_from_workers;
}

void
ptf_record_state_load_stats(struct PtfStateLoad *load)
{
	PtfStateLoadStats st;

	ptf_state_load_stats(load, &st);
	last_call.state_load = st.how;
	last_call.keys_probed = st.keys_probed;
	last_call.keys_loaded = st.keys_loaded;
	last_call.keys_evicted = st.keys_evicted;
}

const PtfCallStats *
ptf_get_last_call_stats(void)
{
	return have_last_call ? &last_call : NULL;
}
