/*-------------------------------------------------------------------------
 *
 * row_number.c
 *	  row_number() OVER (PARTITION BY k ORDER BY ...) <= N over a table, as
 *	  the planner plans it (planner/first_rows_rule.c; row_number.h): the
 *	  pattern DEDUPLICATE_KEEP_FIRST replaces, run with our operators
 *	  through the one call path.
 *
 * ORDER BY a time column, ascending, N = 1, is keep-first by event time
 * (operators/dedup.c), the earliest row per key: the pattern of the
 * keep-first seed.  Every other order, DESC (the last row per key), and
 * N > 1 are the Window Top-N operator with one window per key
 * (operators/window_rank.c): per key the first N rows, compared with the
 * ORDER BY's operators.  The input is bounded -- the table through SPI,
 * as the query would read it -- and no watermark holds anything back:
 * whatever ptf.set_watermark declared on the table, every row counts, as
 * in the query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "engine/call.h"
#include "functions/common.h"
#include "functions/row_filter.h"
#include "functions/row_number.h"
#include "operators/dedup.h"

typedef struct FirstRowsCall
{
	PtfCall		call;
	PtfPlannedFirstRows *p;
	PtfOutput	out;
	TupleTableSlot *slot;		/* keep-first's rows, with their row number */
} FirstRowsCall;

static PtfOperator *
build_first_rows(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	FirstRowsCall *fc = (FirstRowsCall *) call;
	PtfPlannedFirstRows *p = fc->p;

	if (p->keep_first)
	{
		DedupOptions o;

		memset(&o, 0, sizeof(o));
		o.rowdesc = b->rowdescs[0];
		o.keys = b->keys[0];
		o.event_time = true;
		o.live_timers = false;	/* a bounded input without a watermark */
		o.reset_ttl_on_duplicate = true;
		return dedup_create(&o, env);
	}
	else
	{
		WindowRankOptions o = p->rank;

		o.global = true;
		o.rowdesc = b->rowdescs[0];
		o.keys = b->keys[0];
		o.outdesc = p->outdesc;
		return window_rank_create(&o, env);
	}
}

/* keep-first emits the table's row: its columns, and row number 1 */
static void
emit_first_row(void *arg, RowKind kind, TupleTableSlot *row)
{
	FirstRowsCall *fc = (FirstRowsCall *) arg;
	TupleTableSlot *out = fc->slot;
	int			natts = out->tts_tupleDescriptor->natts;
	int			i;

	slot_getallattrs(row);
	ExecClearTuple(out);
	for (i = 0; i < natts; i++)
	{
		AttrNumber	a = fc->p->out_attnos[i];

		out->tts_values[i] = a > 0 ? row->tts_values[a - 1] : Int64GetDatum(1);
		out->tts_isnull[i] = a > 0 ? row->tts_isnull[a - 1] : false;
	}
	ExecStoreVirtualTuple(out);
	ptf_output_emit_row(&fc->out, kind, out);
}

void
ptf_first_rows_run_planned(PtfPlannedFirstRows *p)
{
	FirstRowsCall fc;
	PtfCall    *call = &fc.call;
	PtfCallInput *in;
	PtfInputArg input;
	int			i;

	memset(&fc, 0, sizeof(fc));
	fc.p = p;
	ptf_call_init(call, p->keep_first ? "deduplicate_keep_first" : "window_top_n");
	ptf_input_of_type(p->rowtype, &input);
	in = ptf_call_add_input(call, "input", &input, NULL);
	for (i = 0; i < p->nkeys; i++)
		if (p->key_attnos[i] < 1 || p->key_attnos[i] > input.rowdesc->natts ||
			TupleDescAttr(input.rowdesc, p->key_attnos[i] - 1)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the row type of the query's table changed since it was planned"),
					 errhint("Plan the query again (DISCARD PLANS, or prepare it again).")));
	in->frame.keys = key_spec_from_attnos(input.rowdesc, p->nkeys, p->key_attnos);
	if (p->keep_first)
	{
		/* the event time, and no watermark: every row counts */
		in->frame.on_time_attno = p->time_attno;
		in->frame.on_time_type = TupleDescAttr(input.rowdesc, p->time_attno - 1)->atttypid;
		in->frame.has_delay = false;
		call->layout = &dedup_layout;
		fc.slot = MakeSingleTupleTableSlot(p->outdesc, &TTSOpsVirtual);
		call->emit = emit_first_row;
		call->emit_arg = &fc;
	}
	else
	{
		call->layout = &window_rank_layout;
		call->nspaces = WINDOW_RANK_NSPACES;
		call->emit = ptf_output_emit_row;
		call->emit_arg = &fc.out;
	}
	call->options = p->describe;
	call->build = build_first_rows;
	if (p->filter != NIL)
		ptf_row_filter_attach(in, p->filter, NULL, call->cxt);

	fc.out.store = p->store;
	fc.out.desc = p->outdesc;
	call->out = &fc.out;

	ptf_call_run(call);
	p->rows += fc.out.rows;
	MemoryContextDelete(call->cxt);
}
