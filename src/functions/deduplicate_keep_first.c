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
#include "engine/call.h"
#include "functions/common.h"
#include "operators/dedup.h"

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
	ARG_PROC_TIME,
	ARG_SNAPSHOT
};

typedef struct DedupCall
{
	PtfCall		call;
	DedupOptions opts;
	int64		delay;			/* given, or -1 */
	PtfOutput	out;
} DedupCall;

static PtfOperator *
build_dedup(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	DedupCall  *dc = (DedupCall *) call;
	DedupOptions opts = dc->opts;

	opts.rowdesc = b->rowdescs[0];
	opts.keys = b->keys[0];
	return dedup_create(&opts, env);
}

/*
 * A worker passes on the first rows of every key it meets, and the leader
 * runs the operator over them once more: with about as many keys as rows
 * per participant, workers only add work (5M rows of 500k keys: 1.1-1.6x
 * the serial call).  A table read whole (not a query) goes parallel only
 * when its statistics say that first rows are few (ptf_partials_pay): by
 * arrival, four rows or more a key a participant, a quarter passed on at
 * most.  By event time a worker passes on every row that lowers its key's
 * least time so far, of r rows in no order about ln r + 0.58: about a
 * quarter at twelve rows a key (10M rows over 1M keys, three
 * participants, 3.3 rows a key each: 1.03x the serial call when ANALYZE's
 * estimate of the keys came out low enough for four).
 */
#define KEEP_FIRST_PARTIALS_MIN_FOLD 4
#define KEEP_FIRST_EVENT_PARTIALS_MIN_FOLD 12

static bool
first_rows_pay(PtfCallInput *in, double min_fold)
{
	return !OidIsValid(in->arg.relid) ||
		ptf_partials_pay(in->arg.relid, in->frame.keys, 1, min_fold);
}

/* The input is planned: its shape is known, and the watermark is decided. */
static void
dedup_prepared(PtfCall *call)
{
	DedupCall  *dc = (DedupCall *) call;
	PtfCallInput *in = &call->inputs[0];

	if (!dc->opts.event_time)
	{
		/*
		 * by arrival: workers may pass on first rows (engine/parallel.c),
		 * when they pass on far fewer than they read
		 */
		if (dc->opts.ttl_us == 0 && first_rows_pay(in, KEEP_FIRST_PARTIALS_MIN_FOLD))
			call->parallel = PTF_PARALLEL_FIRST_ARRIVAL;
		return;
	}
	if (in->sql.changelog)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("on_time cannot be used with an updating input"),
				 errdetail("The query returns (kind, data) rows, a changelog."),
				 errhint("A watermark finalizes event times that an update could change afterwards; drop on_time to keep the first arrival instead.")));

	ptf_input_watermark(&in->frame, in->arg.relid, call->on_time, dc->delay, call->uid != NULL);
	dc->opts.live_timers = in->frame.has_delay;
	/* without a watermark before the end no row is late: arrival order matters only in ties */
	if (!in->frame.has_delay && dc->opts.ttl_us == 0 &&
		first_rows_pay(in, KEEP_FIRST_EVENT_PARTIALS_MIN_FOLD))
		call->parallel = PTF_PARALLEL_FIRST_EVENT;
}

Datum
ptf_deduplicate_keep_first(PG_FUNCTION_ARGS)
{
	DedupCall	dc;
	PtfCall    *call = &dc.call;
	PtfInputArg input;
	PtfCallInput *in;
	char	   *query;

	memset(&dc, 0, sizeof(dc));
	ptf_call_init(call, "deduplicate_keep_first");

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_INPUT, "input", &input);
	query = ptf_text_arg(fcinfo, ARG_QUERY);
	in = ptf_call_add_input(call, "input", &input, query);
	in->frame.keys = ptf_keys_arg(fcinfo, ARG_PARTITION_BY, input.rowdesc, "partition_by");
	in->frame.on_time_attno = ptf_time_column_arg(fcinfo, ARG_ON_TIME, input.rowdesc,
												  "on_time", &in->frame.on_time_type);
	call->on_time = ptf_text_arg(fcinfo, ARG_ON_TIME);
	call->time_type = in->frame.on_time_type;
	dc.opts.ttl_us = call->ttl_us = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	dc.opts.reset_ttl_on_duplicate = ptf_bool_arg(fcinfo, ARG_RESET_TTL,
												  "reset_ttl_on_duplicate");
	call->uid = ptf_uid_arg(fcinfo, ARG_UID);
	call->changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&input, query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, ARG_SNAPSHOT, call->changes, call->uid);
	dc.delay = ptf_interval_arg(fcinfo, ARG_WATERMARK_DELAY, "watermark_delay");
	if (dc.delay >= 0 && call->on_time == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("watermark_delay needs on_time")));
	in->frame.proc_time_attno = ptf_time_column_arg(fcinfo, ARG_PROC_TIME, input.rowdesc,
													"proc_time", &in->frame.proc_time_type);
	call->need_proc_time = dc.opts.ttl_us > 0;
	/* no processing-time timers; event-time ones are found by time */
	call->probe_ok = true;
	dc.opts.event_time = (call->on_time != NULL);
	call->keeps_images = dc.opts.event_time;	/* pending candidates */
	/* deletions never change keep-first's output: a truncation neither */
	in->on_truncate = TRUNCATE_SKIP;

	call->layout = &dedup_layout;
	call->prepared = dedup_prepared;
	call->build = build_dedup;
	ptf_call_output(call, fcinfo, &dc.out, NULL, NULL);
	return ptf_call_return(call);
}
