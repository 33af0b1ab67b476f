/*-------------------------------------------------------------------------
 *
 * deduplicate_keep_first.c
 *	  SQL entry point of ptf.deduplicate_keep_first(): checks the
 *	  arguments, then wires input -> frame -> dedup operator -> output,
 *	  over memory state or, with a uid, durable state.
 *
 * The per-row logic is in operators/dedup.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "catalog.h"
#include "frame.h"
#include "functions/call.h"
#include "functions/common.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "operators/operator.h"
#include "state/durable.h"

PG_FUNCTION_INFO_V1(ptf_deduplicate_keep_first);

/* argument positions, as declared in the install script */
enum
{
	ARG_INPUT,
	ARG_PARTITION_BY,
	ARG_ON_TIME,
	ARG_STATE_TTL,
	ARG_RESET_TTL,
	ARG_UID,
	ARG_QUERY,
	ARG_CHANGES,
	ARG_WATERMARK_DELAY,
	ARG_PROC_TIME
};

typedef struct DedupCall
{
	PtfInputArg input;
	KeySpec    *keys;
	DedupOptions opts;
	int64		ttl_us;
	char	   *uid;
	char	   *on_time;
	PtfFrameTimeSpec time;
	PtfOutput	out;
	MemoryContext cxt;
} DedupCall;

/* A fresh operator over fresh memory state: spilled partitions start here. */
static PtfOperator *
make_operator(void *arg, bool unbounded)
{
	DedupCall  *call = (DedupCall *) arg;
	KeyedState *ks;
	Size		hot;
	Size		cold;

	dedup_value_sizes(&call->opts, &hot, &cold);
	ks = keyed_state_create(call->keys, hot, cold, call->ttl_us,
							unbounded ? 0 : get_hash_memory_limit(),
							call->opts.live_timers ? KEYED_STATE_STABLE : 0,
							call->cxt);
	return dedup_create(&call->opts, ks, ptf_output_emit_row, &call->out);
}

/* The operator of a uid, over its durable state. */
static PtfOperator *
build_dedup(void *arg, KeyedState *ks, TupleDesc rowdesc)
{
	DedupCall  *call = (DedupCall *) arg;
	DedupOptions opts = call->opts;

	opts.rowdesc = rowdesc;
	return dedup_create(&opts, ks, ptf_output_emit_row, &call->out);
}

Datum
ptf_deduplicate_keep_first(PG_FUNCTION_ARGS)
{
	DedupCall	call;
	char	   *query;
	bool		changes;
	int64		delay;
	PtfSqlInput in;
	PtfChangeStream *cs = NULL;
	char	   *slot_name = NULL;
	PtfOperator *op;
	PtfFrame   *frame;
	DurableState *ds = NULL;
	DurableProgress progress;

	memset(&call, 0, sizeof(call));

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_INPUT, &call.input);
	call.keys = ptf_keys_arg(fcinfo, ARG_PARTITION_BY, call.input.rowdesc,
							 "partition_by");
	call.time.on_time_attno = ptf_time_column_arg(fcinfo, ARG_ON_TIME,
												  call.input.rowdesc, "on_time",
												  &call.time.on_time_type);
	call.on_time = ptf_text_arg(fcinfo, ARG_ON_TIME);
	call.ttl_us = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	call.opts.reset_ttl_on_duplicate = ptf_bool_arg(fcinfo, ARG_RESET_TTL,
													"reset_ttl_on_duplicate");
	call.uid = ptf_uid_arg(fcinfo, ARG_UID);
	query = ptf_text_arg(fcinfo, ARG_QUERY);
	changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&call.input, query, changes, call.uid);
	delay = ptf_interval_arg(fcinfo, ARG_WATERMARK_DELAY, "watermark_delay");
	if (delay >= 0 && call.on_time == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("watermark_delay needs on_time")));
	call.time.proc_time_attno = ptf_time_column_arg(fcinfo, ARG_PROC_TIME,
													call.input.rowdesc, "proc_time",
													&call.time.proc_time_type);
	call.time.need_proc_time = call.ttl_us > 0;

	call.opts.rowdesc = call.input.rowdesc;
	call.opts.event_time = (call.on_time != NULL);

	ptf_output_init(fcinfo, &call.out);
	call.cxt = AllocSetContextCreate(CurrentMemoryContext,
									 "ptf deduplicate_keep_first",
									 ALLOCSET_DEFAULT_SIZES);

	slot_name = ptf_call_prepare(&in, call.input.relid, call.input.rowdesc, query,
								 changes, call.uid);
	if (in.changelog && call.opts.event_time)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("on_time cannot be used with an updating input"),
				 errdetail("The query returns (kind, data) rows, a changelog."),
				 errhint("A watermark finalizes event times that an update could change afterwards; drop on_time to keep the first arrival instead.")));

	/* the watermark: given, else declared on the table, else none */
	if (call.opts.event_time)
	{
		if (delay < 0)
			delay = ptf_declared_watermark_delay(call.input.relid, call.on_time);
		/* a stream (uid) needs a watermark; without a delay it is max(event time) */
		if (delay < 0 && call.uid != NULL)
			delay = 0;
		call.time.has_delay = (delay >= 0);
		call.time.delay_us = Max(delay, 0);
		call.opts.live_timers = call.time.has_delay;
	}

	/* ---- state and operator ---- */
	if (call.uid != NULL)
	{
		DurableIdentity id;
		PtfStateSpec spec;

		memset(&id, 0, sizeof(id));
		id.uid = call.uid;
		id.function = "deduplicate_keep_first";
		id.rowdesc = call.input.rowdesc;
		id.keys = call.keys;
		id.on_time = call.on_time;
		id.time_type = call.time.on_time_type;
		id.keeps_images = call.opts.event_time;
		id.slot_name = slot_name;
		ds = durable_open(&id, &progress);

		dedup_value_sizes(&call.opts, &spec.hot, &spec.cold);
		spec.keys = call.keys;
		spec.rowdesc = call.opts.rowdesc;
		spec.ttl_us = call.ttl_us;
		spec.flags = call.opts.live_timers ? KEYED_STATE_STABLE : 0;
		op = ptf_call_durable_operator(ds, &spec, call.cxt, build_dedup, &call, &call.out);
	}
	else
		op = make_operator(&call, false);

	frame = frame_create(op, call.input.rowdesc, &call.time,
						 in.changelog || changes, make_operator, &call);
	call.out.frame = frame;
	if (ds != NULL)
		frame_restore_watermark(frame, progress.max_event_time, progress.watermark);

	/* ---- run ---- */
	/* deletions never change keep-first's output: a truncation neither */
	cs = ptf_call_run(&in, call.input.relid, call.input.rowdesc, slot_name, TRUNCATE_SKIP,
					  &progress, NULL, frame, call.uid == NULL);
	if (ds != NULL)
		ptf_call_store(ds, op, frame, cs, &progress, call.out.rows, 0, call.ttl_us);
	ptf_record_call_stats("deduplicate_keep_first", frame, call.out.rows);

	SPI_finish();
	MemoryContextDelete(call.cxt);
	return (Datum) 0;
}
