/*-------------------------------------------------------------------------
 *
 * frame.c
 *	  Runs one operator over a stream of input rows from one or more
 *	  inputs: time, watermarks, timers, batching and spilling.
 *
 * State.  Per input: its spec (row type, key columns, time columns,
 * delay), the greatest event time it has seen and its watermark.  For the
 * frame: the operator running (the main one, or a spilled partition's),
 * the operator's watermark, the last processing time, counters, the batch
 * of rows waiting for their state to be prefetched, and the spill files.
 *
 * Time.  Watermarks follow Flink's bounded out-of-orderness strategy: after
 * every row, an input's watermark is max(event time seen) - delay; the
 * operator's is the least of its timed inputs' (Flink's two-input
 * operators), so a side that has seen nothing holds it back.  Without a
 * delay an input has no watermark until the end of a bounded call, where
 * every watermark jumps to +infinity.  When the operator's watermark moves
 * the operator is told (on_watermark), then its event-time timers up to it
 * fire in (time, registration) order.  Processing time is the row's
 * proc_time column or the clock (ptf_now(): ptf.debug_clock in tests),
 * read only when the frame needs it (a TTL, processing-time timers, the
 * idle rule); processing-time timers due by a row's processing time fire
 * before the row, and at the end of the call.
 *
 * The idle rule (an input's idle_us): a quiet source must not hold its
 * last windows open forever.  When an input has had no row for longer
 * than idle_us of processing time, its watermark moves on with processing
 * time: at processing time P, with P_last the processing time of its last
 * row, it is at least max(event time) - delay + (P - P_last - idle_us).
 * It is applied at the end of each call of a uid, so windows close in the
 * call (or pipeline step) that finds the source idle long enough.
 *
 * Phases.  Rows are processed as they come (the main pass).  At the end of
 * a bounded call the watermark jumps to +infinity, the main operator's
 * state is freed, and the spilled partitions are replayed one after the
 * other through fresh operators, each ending the same way.  A uid's call
 * has no end of stream: its state carries over, and it never spills (its
 * state is unbounded).
 *
 * Loading.  A uid whose state is read a key at a time (engine/call.c
 * decides) sets a loader: rows then wait in a buffer of FRAME_LOAD_BATCH
 * before the batching above, and the loader reads the keys of the whole
 * buffer at once -- one index scan instead of one per row -- together with
 * the keys whose timers the buffer's rows can make due.  The watermark
 * they can reach is known before they are processed: it only moves with
 * event times, and each input's is max(event time) - delay.
 *
 * Batching.  An operator that can prefetch its state (methods.prefetch)
 * gets rows FRAME_BATCH at a time: each row's state is prefetched, in
 * stages, before the first of them is processed, so that the cache misses
 * of a large state overlap.  A state that fits in the CPU's caches has no
 * misses to hide, and batching then only costs (a copy of each row, the
 * stages): rows are batched only while the operator's keyed state is
 * larger than FRAME_PREFETCH_MIN_BYTES, looked at every FRAME_BATCH_CHECK
 * rows.  Of a frame of several inputs only one input's rows are batched
 * (methods.prefetch_input: the temporal join's probes, which read the
 * versions); a row of another input first drains the batch.
 *
 * Spilling follows hash aggregation (nodeAgg.c): once the state's memory
 * budget is spent, a row whose key is not in memory is written, with its
 * input, kind, processing time and the watermark it arrived under, to one
 * of SPILL_FANOUT partitions chosen by key hash.  The decision is the
 * operator's (its state answers KS_FULL for a key it does not hold) and is
 * made per key, so every row of such a key -- of every input: key columns
 * have the same types and so the same hashes on every input -- lands in
 * the same partition in arrival order, and all of a key's namespaces stay
 * with it.  Replaying a partition through a fresh operator therefore makes
 * exactly the decisions the operator would have made with unbounded
 * memory; only the order of the output differs.  A partition that does
 * not fit is split again by the next bits of the hash, down to
 * SPILL_MAX_DEPTH, where the budget is lifted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlogdefs.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "base/ptf_time.h"
#include "frame.h"
#include "state/keyed_state.h"

/* batching pays once the keyed state outgrows the caches (see the header) */
#define FRAME_PREFETCH_MIN_BYTES (2 * 1024 * 1024)
#define FRAME_BATCH_CHECK 4096

#define SPILL_FANOUT_BITS	4
#define SPILL_FANOUT		(1 << SPILL_FANOUT_BITS)
#define SPILL_MAX_DEPTH		(32 / SPILL_FANOUT_BITS)

/*
 * Columns a spilled row carries before its own, when it needs any:
 * input and kind, processing time, the watermark it arrived under, and the
 * processing time that watermark moved at.  The first column is read
 * before the row's input (and so its layout) is known.
 */
#define SPILL_EXTRA			4
#define SPILL_TAG(input, kind)	((int64) (input) << 8 | (int64) (kind))
#define SPILL_TAG_INPUT(tag)	((int) ((tag) >> 8))
#define SPILL_TAG_KIND(tag)		((RowKind) ((tag) & 0xFF))

typedef struct SpillFile
{
	Tuplestorestate *ts;
	int			depth;
} SpillFile;

/*
 * Rows wait in a small batch before the operator sees them, so that the
 * state each one needs can be prefetched while the batch fills: the
 * lookups of a batch then overlap their cache misses instead of paying
 * them one after the other.  Order and semantics are unchanged.  A
 * prefetch in stages follows a chain of pointers, a miss per stage: the
 * longer the batch, the more of the previous stage's lines have arrived
 * when the next one reads them (measured: Window Top-N 30% faster at 32
 * rows than at 16); a single stage gains nothing from more than 16.  What
 * the last stage found goes on to the row's processing
 * (PtfRowContext.prefetched), which need not search for it again.
 */
#define FRAME_BATCH		32
#define FRAME_BATCH_ONE_STAGE	16	/* for a prefetch of one stage */

typedef struct BatchEntry
{
	RowKind		kind;
	PtfTime		event_time;		/* for the prefetch: PTF_TIME_MIN if unknown */
	uint64		scratch[PTF_PREFETCH_WORDS];	/* the operator's prefetch stages' */
	PtfRowMeta	meta;
	TupleTableSlot *slot;		/* a heap-tuple slot over buf */
	HeapTupleData tuple;
	char	   *buf;
	Size		cap;
} BatchEntry;

struct PtfFrameInput
{
	PtfFrame   *frame;
	int			index;
	PtfFrameInputSpec spec;
	PtfTime		max_event_time;
	PtfTime		watermark;
	PtfTime		last_row_proc_time; /* PTF_TIME_MIN: none yet */
	uint64		rows;			/* this call's */

	/* spilling; set up on first use */
	TupleDesc	spilldesc;
	TupleTableSlot *spillslot;	/* a spilled row, as read back */
	TupleTableSlot *replayslot; /* its own columns */
};

struct PtfFrame
{
	MemoryContext cxt;			/* lives as long as the frame; rows come in
								 * short-lived contexts */
	PtfOperator *op;			/* the one running: main, or a replay */
	PtfOperator *main_op;
	int			ninputs;
	PtfFrameInput *inputs[FRAME_MAX_INPUTS];
	bool		need_proc_time;
	PtfOperatorFactory factory;
	void	   *factory_arg;

	PtfTime		watermark;		/* the operator's */
	PtfTime		last_proc_time;
	PtfTime		watermark_proc_time;	/* when the watermark last moved */
	uint64		main_keys;		/* main state, counted before it is freed */
	Size		main_bytes;

	uint64		rows_in;
	uint64		rows_late;
	uint64		rows_spilled;
	int			spill_partitions;
	uint64		replayed_keys;	/* keys of replayed partitions */
	Size		replay_bytes_peak;	/* largest replayed partition's state */

	/* the row being processed, and what it knows of its origin */
	TupleTableSlot *current_row;
	const PtfRowMeta *current_meta;

	/* batching, when the operator can prefetch and its state is large */
	bool		can_batch;
	int			batch_input;	/* the input whose rows are batched */
	bool		batching;
	uint32		batch_check;	/* rows until batching is looked at again */
	BatchEntry	batch[FRAME_BATCH];
	int			nbatch;
	int			batch_size;		/* rows a batch takes: up to FRAME_BATCH */
	PtfRowContext batch_ctx;	/* for the first prefetch stage, set per batch */
	AttrNumber	batch_deform;	/* a batched row's columns read by its processing */

	/* loading state a buffer at a time */
	PtfFrameLoader loader;
	void	   *loader_arg;
	MemoryContext load_cxt;		/* the buffered rows */
	TupleTableSlot **load_slots[FRAME_MAX_INPUTS];
	TupleTableSlot *load_rows[FRAME_LOAD_BATCH];
	int			load_inputs[FRAME_LOAD_BATCH];
	RowKind		load_kinds[FRAME_LOAD_BATCH];
	PtfRowMeta	load_meta[FRAME_LOAD_BATCH];
	int			nload;

	/* spilling */
	bool		spill_extras;	/* spilled rows carry input, kind, times */
	TupleDesc	tagdesc;		/* the first column alone */
	TupleTableSlot *tagslot;	/* a spilled row read with it */
	Datum	   *values;
	bool	   *nulls;
	Tuplestorestate *parts[SPILL_FANOUT];	/* being written */
	int			depth;			/* of the rows being processed */
	List	   *pending;		/* SpillFile *, to replay */
};

PtfFrame *
frame_create(bool need_proc_time, PtfOperatorFactory factory, void *factory_arg)
{
	PtfFrame   *frame = palloc0(sizeof(PtfFrame));

	frame->cxt = CurrentMemoryContext;
	frame->need_proc_time = need_proc_time;
	frame->factory = factory;
	frame->factory_arg = factory_arg;
	frame->watermark = PTF_TIME_MIN;
	frame->last_proc_time = PTF_TIME_MIN;
	return frame;
}

PtfFrameInput *
frame_add_input(PtfFrame *frame, const PtfFrameInputSpec *spec)
{
	PtfFrameInput *input = palloc0(sizeof(PtfFrameInput));

	Assert(frame->op == NULL);
	if (frame->ninputs == FRAME_MAX_INPUTS)
		elog(ERROR, "a frame has at most %d inputs", FRAME_MAX_INPUTS);
	Assert(frame->ninputs == 0 ||
		   spec->keys->ncols == frame->inputs[0]->spec.keys->ncols);
	input->frame = frame;
	input->index = frame->ninputs;
	input->spec = *spec;
	input->max_event_time = PTF_TIME_MIN;
	input->watermark = PTF_TIME_MIN;
	input->last_row_proc_time = PTF_TIME_MIN;
	frame->inputs[frame->ninputs++] = input;
	return input;
}

/* The operator's watermark: the least of the timed inputs'. */
static PtfTime
combined_watermark(PtfFrame *frame)
{
	PtfTime		wm = PTF_TIME_MAX;
	bool		any = false;
	int			i;

	for (i = 0; i < frame->ninputs; i++)
	{
		if (frame->inputs[i]->spec.on_time_attno == InvalidAttrNumber)
			continue;
		any = true;
		wm = Min(wm, frame->inputs[i]->watermark);
	}
	return any ? wm : PTF_TIME_MIN;
}

void
frame_start(PtfFrame *frame, PtfOperator *op)
{
	int			i;

	Assert(frame->ninputs > 0 && frame->op == NULL);
	frame->op = frame->main_op = op;
	frame->watermark = combined_watermark(frame);
	frame->batch_input = op->methods->prefetch_input;
	Assert(frame->batch_input >= 0 && frame->batch_input < frame->ninputs);
	frame->can_batch = (op->methods->prefetch != NULL);
	frame->batching = false;
	frame->batch_check = 0;
	if (frame->can_batch)
	{
		PtfFrameInput *input = frame->inputs[frame->batch_input];
		KeySpec    *keys = input->spec.keys;
		int			k;

		frame->batch_size = op->methods->prefetch_stages > 1 ? FRAME_BATCH :
			FRAME_BATCH_ONE_STAGE;
		frame->batch_deform = Max(op->row_attnos_upto, input->spec.on_time_attno);
		for (k = 0; keys != NULL && k < keys->ncols; k++)
			frame->batch_deform = Max(frame->batch_deform, keys->cols[k].attno);
		for (i = 0; i < frame->batch_size; i++)
		{
			frame->batch[i].slot =
				MakeSingleTupleTableSlot(frame->inputs[frame->batch_input]->spec.rowdesc,
										 &TTSOpsHeapTuple);
			frame->batch[i].cap = 256;
			frame->batch[i].buf = palloc(frame->batch[i].cap);
		}
	}
	frame->spill_extras = (frame->ninputs > 1 || frame->need_proc_time);
	for (i = 0; i < frame->ninputs; i++)
		if (frame->inputs[i]->spec.changelog || frame->inputs[i]->spec.has_delay)
			frame->spill_extras = true;
	if (op->methods->on_start)
		op->methods->on_start(op, frame->watermark);
}

void
frame_restore_input(PtfFrameInput *input, PtfTime max_event_time, PtfTime watermark,
					PtfTime last_row_proc_time)
{
	Assert(input->frame->op == NULL);	/* before frame_start */
	input->max_event_time = max_event_time;
	input->watermark = watermark;
	input->last_row_proc_time = last_row_proc_time;
}

/* names come from the row type: a query's result columns may be named otherwise */
static PtfTime
row_time(PtfFrameInput *input, TupleTableSlot *row, AttrNumber attno, Oid typid,
		 const char *what)
{
	bool		isnull;
	Datum		d = slot_getattr(row, attno, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s column \"%s\" is NULL in %s row", what,
						NameStr(TupleDescAttr(input->spec.rowdesc, attno - 1)->attname),
						input->frame->ninputs > 1 ? psprintf("a %s", input->spec.name) :
						"an input")));
	return ptf_time_from_datum(d, typid);
}

/* ---- timers ---- */

/*
 * Fire the operator's timers of domain that are due at `upto' (the
 * watermark for event time, the processing time for processing time), in
 * time order; each fires with both times as they are now.
 */
static void
fire_timers(PtfOperator *op, PtfTimeDomain domain, PtfTime upto, PtfTime watermark,
			PtfTime proc_time)
{
	PtfTimer	t;

	while (timer_pop_due(op->timers, domain, upto, &t))
	{
		CHECK_FOR_INTERRUPTS();
		op->methods->on_timer(op, &t, watermark, proc_time);
	}
}

/* The operator's watermark moves to wm: tell it, then fire what is due. */
static void
advance_watermark(PtfFrame *frame, PtfOperator *op, PtfTime wm, PtfTime proc_time)
{
	if (op->methods->on_watermark)
		op->methods->on_watermark(op, wm, proc_time);
	fire_timers(op, PTF_EVENT_TIME, wm, wm, proc_time);
	/* keys the timers removed leave memory new keys can reuse */
	ptf_operator_reclaim(op, 1024);
}

/* ---- spilling ---- */

/*
 * A spilled row carries what replaying it needs besides itself: its input
 * and kind, processing time (TTL) and the watermark it arrived under (a
 * delay).  When nothing is needed (one insert-only input, no time), the
 * row is spilled as it is.
 */
static void
spill_setup(PtfFrameInput *input)
{
	PtfFrame   *frame = input->frame;
	TupleDesc	rowdesc = input->spec.rowdesc;
	int			natts = rowdesc->natts;
	int			i;
	MemoryContext old = MemoryContextSwitchTo(frame->cxt);

	if (frame->spill_extras)
	{
		input->spilldesc = CreateTemplateTupleDesc(natts + SPILL_EXTRA);
		for (i = 1; i <= SPILL_EXTRA; i++)
			TupleDescInitEntry(input->spilldesc, i, NULL, INT8OID, -1, 0);
		for (i = 1; i <= natts; i++)
			TupleDescCopyEntry(input->spilldesc, SPILL_EXTRA + i, rowdesc, i);
		if (frame->tagdesc == NULL)
		{
			int			maxatts = natts;
			int			j;

			for (j = 0; j < frame->ninputs; j++)
				maxatts = Max(maxatts, frame->inputs[j]->spec.rowdesc->natts);
			frame->tagdesc = CreateTemplateTupleDesc(1);
			TupleDescInitEntry(frame->tagdesc, 1, NULL, INT8OID, -1, 0);
			frame->tagslot = MakeSingleTupleTableSlot(frame->tagdesc, &TTSOpsMinimalTuple);
			frame->values = palloc(sizeof(Datum) * (maxatts + SPILL_EXTRA));
			frame->nulls = palloc(sizeof(bool) * (maxatts + SPILL_EXTRA));
		}
	}
	else
		input->spilldesc = rowdesc;
	input->spillslot = MakeSingleTupleTableSlot(input->spilldesc, &TTSOpsMinimalTuple);
	input->replayslot = MakeSingleTupleTableSlot(rowdesc, &TTSOpsVirtual);
	MemoryContextSwitchTo(old);
}

static void
spill_row(PtfFrameInput *input, RowKind kind, TupleTableSlot *row,
		  PtfTime proc_time, PtfTime watermark, PtfTime watermark_proc_time)
{
	PtfFrame   *frame = input->frame;
	int			natts = input->spec.rowdesc->natts;
	uint32		hash;
	int			part;

	if (input->spilldesc == NULL)
		spill_setup(input);

	hash = key_probe(input->spec.keys, row);
	part = (hash >> (frame->depth * SPILL_FANOUT_BITS)) & (SPILL_FANOUT - 1);
	if (frame->parts[part] == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(frame->cxt);

		/* each partition may keep a share of work_mem before using disk */
		frame->parts[part] = tuplestore_begin_heap(false, false,
												   Max(64, work_mem / SPILL_FANOUT));
		frame->spill_partitions++;
		MemoryContextSwitchTo(old);
	}

	if (!frame->spill_extras)
		tuplestore_puttupleslot(frame->parts[part], row);
	else
	{
		slot_getallattrs(row);
		frame->values[0] = Int64GetDatum(SPILL_TAG(input->index, kind));
		frame->values[1] = Int64GetDatum(proc_time);
		frame->values[2] = Int64GetDatum(watermark);
		frame->values[3] = Int64GetDatum(watermark_proc_time);
		memset(frame->nulls, false, sizeof(bool) * SPILL_EXTRA);
		memcpy(frame->values + SPILL_EXTRA, row->tts_values, sizeof(Datum) * natts);
		memcpy(frame->nulls + SPILL_EXTRA, row->tts_isnull, sizeof(bool) * natts);
		tuplestore_putvalues(frame->parts[part], input->spilldesc,
							 frame->values, frame->nulls);
	}
	frame->rows_spilled++;
}

/* ---- processing a row ---- */

static void
process_row(PtfFrameInput *input, RowKind kind, TupleTableSlot *row,
			PtfRowContext *ctx, PtfTime watermark_proc_time)
{
	PtfFrame   *frame = input->frame;
	PtfOperator *op = frame->op;

	switch (op->methods->on_row(op, kind, row, ctx))
	{
		case PTF_ROW_DONE:
			break;
		case PTF_ROW_LATE:
		case PTF_ROW_LATE_KEPT:
			frame->rows_late++;
			break;
		case PTF_ROW_SPILL:
			/* the budget is lifted at the last depth: nothing spills there */
			Assert(frame->depth < SPILL_MAX_DEPTH);
			/* a spilled row keeps no origin: only a uid's streams have partial rows */
			Assert(!ctx->meta->partial);
			spill_row(input, kind, row, ctx->proc_time, ctx->watermark,
					  watermark_proc_time);
			break;
	}
}

static pg_attribute_always_inline void
frame_process_row(PtfFrameInput *input, RowKind kind, TupleTableSlot *row,
				  const PtfRowMeta *meta, const uint64 *prefetched)
{
	PtfFrame   *frame = input->frame;
	PtfRowContext ctx;
	bool		timed = input->spec.on_time_attno != InvalidAttrNumber &&
		!(meta->partial && input->spec.partial_untimed);

	frame->current_row = row;
	frame->current_meta = meta;

	ctx.input = input->index;
	ctx.keys = input->spec.keys;
	ctx.meta = meta;
	ctx.prefetched = prefetched;
	ctx.event_time = 0;
	ctx.proc_time = 0;
	if (timed)
		ctx.event_time = row_time(input, row, input->spec.on_time_attno,
								  input->spec.on_time_type, "on_time");
	if (frame->need_proc_time)
	{
		if (input->spec.proc_time_attno != InvalidAttrNumber)
			ctx.proc_time = row_time(input, row, input->spec.proc_time_attno,
									 input->spec.proc_time_type, "proc_time");
		else
			ctx.proc_time = ptf_now();
		frame->last_proc_time = ctx.proc_time;
		input->last_row_proc_time = ctx.proc_time;
		fire_timers(frame->op, PTF_PROCESSING_TIME, ctx.proc_time, frame->watermark, ctx.proc_time);
	}
	ctx.watermark = frame->watermark;

	/* a row the query's WHERE left out only moves the watermark */
	if (likely(!meta->time_only))
		process_row(input, kind, row, &ctx, frame->watermark_proc_time);

	/* an infinite event time is kept like any other but moves no watermark */
	if (timed && ctx.event_time > input->max_event_time && ctx.event_time != PTF_TIME_MAX)
	{
		input->max_event_time = ctx.event_time;
		if (input->spec.has_delay)
		{
			PtfTime		wm = ptf_time_sub(ctx.event_time, input->spec.delay_us);

			if (wm > input->watermark)
			{
				input->watermark = wm;
				wm = combined_watermark(frame);
				if (wm > frame->watermark)
				{
					frame->watermark = wm;
					frame->watermark_proc_time = ctx.proc_time;
					advance_watermark(frame, frame->op, wm, ctx.proc_time);
				}
			}
		}
	}
}

/*
 * A row through the operator, and the watermark it moves.  A change of a
 * stream (its meta knows its transaction) is processed under an error
 * context that names the transaction, whose LSN ptf.skip_transaction
 * takes; other rows pay one test.
 */
static void
frame_process(PtfFrameInput *input, RowKind kind, TupleTableSlot *row,
			  const PtfRowMeta *meta, const uint64 *prefetched)
{
	PtfChangeContext cc;

	if (likely(XLogRecPtrIsInvalid(meta->final_lsn)))
	{
		frame_process_row(input, kind, row, meta, prefetched);
		return;
	}
	ptf_change_context_push(&cc, meta);
	frame_process_row(input, kind, row, meta, prefetched);
	ptf_change_context_pop(&cc);
}

/* What the prefetch stages of a batch's rows are told but their event time. */
static void
batch_prefetch_context(PtfFrame *frame, PtfRowContext *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->input = frame->batch_input;
	ctx->keys = frame->inputs[frame->batch_input]->spec.keys;
	ctx->watermark = frame->watermark;
}

static void
frame_drain(PtfFrame *frame)
{
	const PtfOperatorMethods *m = frame->op->methods;
	PtfRowContext ctx;
	int			i;
	int			stage;

	/* the later prefetch stages, each over the whole batch */
	if (m->prefetch_batch != NULL)
	{
		uint64	   *scratch[FRAME_BATCH];

		for (i = 0; i < frame->nbatch; i++)
			scratch[i] = frame->batch[i].scratch;
		for (stage = 1; stage < m->prefetch_stages; stage++)
			m->prefetch_batch(frame->op, stage, scratch, frame->nbatch);
	}
	else
	{
		batch_prefetch_context(frame, &ctx);
		for (stage = 1; stage < m->prefetch_stages; stage++)
			for (i = 0; i < frame->nbatch; i++)
			{
				BatchEntry *e = &frame->batch[i];

				ctx.event_time = e->event_time;
				m->prefetch(frame->op, e->slot, &ctx, stage, e->scratch);
			}
	}
	for (i = 0; i < frame->nbatch; i++)
	{
		BatchEntry *e = &frame->batch[i];

		frame_process(frame->inputs[frame->batch_input], e->kind, e->slot, &e->meta, e->scratch);
		ExecClearTuple(e->slot);
	}
	frame->nbatch = 0;
}

/* Copy the row into the batch, whatever slot it came in. */
static void
batch_add(PtfFrame *frame, RowKind kind, TupleTableSlot *row,
		  const PtfRowMeta *meta)
{
	BatchEntry *e = &frame->batch[frame->nbatch++];
	PtfFrameInput *input = frame->inputs[frame->batch_input];
	bool		should_free;
	HeapTuple	src = ExecFetchSlotHeapTuple(row, false, &should_free);

	/*
	 * A copy, not a pin of the scan's buffer: pinning costs more than
	 * copying a row into a buffer that stays in cache (measured).
	 */
	if (src->t_len > e->cap)
	{
		e->cap = Max(e->cap * 2, src->t_len);
		e->buf = MemoryContextAlloc(frame->cxt, e->cap);
	}
	memcpy(e->buf, src->t_data, src->t_len);
	e->tuple.t_len = src->t_len;
	e->tuple.t_self = src->t_self;
	e->tuple.t_tableOid = src->t_tableOid;
	e->tuple.t_data = (HeapTupleHeader) e->buf;
	if (should_free)
		heap_freetuple(src);
	ExecStoreHeapTuple(&e->tuple, e->slot, false);
	e->kind = kind;
	e->meta = *meta;

	/* for later stages, the event time, without the checks processing makes */
	e->event_time = PTF_TIME_MIN;
	slot_getsomeattrs(e->slot, frame->batch_deform);
	if (frame->op->methods->prefetch_stages > 1 &&
		input->spec.on_time_attno != InvalidAttrNumber &&
		!e->slot->tts_isnull[input->spec.on_time_attno - 1])
		e->event_time = ptf_time_from_datum(e->slot->tts_values[input->spec.on_time_attno - 1],
											input->spec.on_time_type);
	/* the first stage now, while the batch fills */
	if (frame->nbatch == 1)
		batch_prefetch_context(frame, &frame->batch_ctx);
	frame->batch_ctx.event_time = e->event_time;
	frame->op->methods->prefetch(frame->op, e->slot, &frame->batch_ctx, 0, e->scratch);
}

/* A row on its way to the operator: batched for prefetching, or processed. */
static void
pass_row(PtfFrameInput *input, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	PtfFrame   *frame = input->frame;

	if (input->index != frame->batch_input)
	{
		/* another input's row: the batched rows came first */
		if (frame->nbatch > 0)
			frame_drain(frame);
		frame_process(input, kind, row, meta, NULL);
		return;
	}
	if (frame->can_batch && frame->batch_check-- == 0)
	{
		bool		large = (frame->op->state != NULL &&
							 keyed_state_table_bytes(frame->op->state) +
							 frame->op->prefetch_bytes >= FRAME_PREFETCH_MIN_BYTES);

		frame->batch_check = FRAME_BATCH_CHECK;
		/* rows already batched go first: order is kept */
		if (frame->batching && !large)
			frame_drain(frame);
		frame->batching = large;
	}
	if (!frame->batching)
	{
		frame_process(input, kind, row, meta, NULL);
		return;
	}
	batch_add(frame, kind, row, meta);
	if (frame->nbatch == frame->batch_size)
		frame_drain(frame);
}

static void load_flush(PtfFrame *frame);

void
frame_flush(PtfFrame *frame)
{
	load_flush(frame);
	frame_drain(frame);
}

void
frame_set_loader(PtfFrame *frame, PtfFrameLoader loader, void *arg)
{
	Assert(frame->op != NULL && frame->nload == 0);
	frame->loader = loader;
	frame->loader_arg = arg;
	if (frame->load_cxt == NULL)
		frame->load_cxt = AllocSetContextCreate(frame->cxt, "ptf frame load buffer",
												ALLOCSET_DEFAULT_SIZES);
}

void
frame_stop_loading(PtfFrame *frame)
{
	frame->loader = NULL;
}

/* The operator's watermark once the buffered rows are processed. */
static PtfTime
watermark_after_buffer(PtfFrame *frame)
{
	PtfTime		wm[FRAME_MAX_INPUTS];
	PtfTime		combined = PTF_TIME_MAX;
	bool		any = false;
	int			i;

	for (i = 0; i < frame->ninputs; i++)
		wm[i] = frame->inputs[i]->watermark;
	for (i = 0; i < frame->nload; i++)
	{
		PtfFrameInput *input = frame->inputs[frame->load_inputs[i]];
		bool		isnull;
		Datum		d;
		PtfTime		t;

		if (input->spec.on_time_attno == InvalidAttrNumber || !input->spec.has_delay)
			continue;
		d = slot_getattr(frame->load_rows[i], input->spec.on_time_attno, &isnull);
		if (isnull)
			continue;			/* processing it raises the error */
		t = ptf_time_from_datum(d, input->spec.on_time_type);
		if (t != PTF_TIME_MAX)
			wm[input->index] = Max(wm[input->index], ptf_time_sub(t, input->spec.delay_us));
	}
	for (i = 0; i < frame->ninputs; i++)
	{
		if (frame->inputs[i]->spec.on_time_attno == InvalidAttrNumber)
			continue;
		any = true;
		combined = Min(combined, wm[i]);
	}
	return any ? Max(combined, frame->watermark) : frame->watermark;
}

/* The buffered rows: their state read, then on to the operator. */
static void
load_flush(PtfFrame *frame)
{
	int			n = frame->nload;
	int			i;

	if (n == 0)
		return;
	/* no row may wait unprocessed while keys are read, or evicted */
	frame_drain(frame);
	/* a truncation touches every key: all of them, first */
	for (i = 0; i < n && frame->loader != NULL; i++)
		if (frame->load_kinds[i] == ROWKIND_TRUNCATE)
			frame->loader(frame->loader_arg, NULL, NULL, -1, frame->watermark);
	if (frame->loader != NULL)
	{
		TupleTableSlot **rows = frame->load_rows;
		int		   *inputs = frame->load_inputs;
		int			nrows = n;

		/* rows that only move the watermark need no key */
		for (i = 0; i < n && !frame->load_meta[i].time_only; i++)
			;
		if (i < n)
		{
			rows = MemoryContextAlloc(frame->load_cxt, sizeof(TupleTableSlot *) * n);
			inputs = MemoryContextAlloc(frame->load_cxt, sizeof(int) * n);
			nrows = 0;
			for (i = 0; i < n; i++)
			{
				if (frame->load_meta[i].time_only)
					continue;
				rows[nrows] = frame->load_rows[i];
				inputs[nrows++] = frame->load_inputs[i];
			}
		}
		frame->loader(frame->loader_arg, rows, inputs, nrows, watermark_after_buffer(frame));
	}
	frame->nload = 0;
	for (i = 0; i < n; i++)
	{
		pass_row(frame->inputs[frame->load_inputs[i]], frame->load_kinds[i],
				 frame->load_rows[i], &frame->load_meta[i]);
		ExecClearTuple(frame->load_rows[i]);
	}
	MemoryContextReset(frame->load_cxt);
}

static void
load_buffer_add(PtfFrameInput *input, RowKind kind, TupleTableSlot *row,
				const PtfRowMeta *meta)
{
	PtfFrame   *frame = input->frame;
	int			i = frame->nload;
	TupleTableSlot *slot;
	MemoryContext old;

	if (frame->load_slots[input->index] == NULL)
	{
		int			j;

		frame->load_slots[input->index] =
			MemoryContextAlloc(frame->cxt, sizeof(TupleTableSlot *) * FRAME_LOAD_BATCH);
		old = MemoryContextSwitchTo(frame->cxt);
		for (j = 0; j < FRAME_LOAD_BATCH; j++)
			frame->load_slots[input->index][j] =
				MakeSingleTupleTableSlot(input->spec.rowdesc, &TTSOpsMinimalTuple);
		MemoryContextSwitchTo(old);
	}
	slot = frame->load_slots[input->index][i];
	old = MemoryContextSwitchTo(frame->load_cxt);
	ExecStoreMinimalTuple(ExecCopySlotMinimalTuple(row), slot, false);
	MemoryContextSwitchTo(old);
	frame->load_rows[i] = slot;
	frame->load_inputs[i] = input->index;
	frame->load_kinds[i] = kind;
	frame->load_meta[i] = *meta;
	frame->nload++;
	if (frame->nload == FRAME_LOAD_BATCH)
		load_flush(frame);
}

void
frame_push(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	PtfFrameInput *input = (PtfFrameInput *) arg;
	PtfFrame   *frame = input->frame;

	Assert(frame->op != NULL);
	if (meta == NULL)
		meta = &ptf_no_meta;
	Assert(!meta->time_only || input->spec.on_time_attno != InvalidAttrNumber);
	if (likely(!meta->time_only))
	{
		frame->rows_in++;
		input->rows++;
	}
	if (frame->loader != NULL)
		load_buffer_add(input, kind, row, meta);
	else
		pass_row(input, kind, row, meta);
}

TupleTableSlot *
frame_current_row(PtfFrame *frame)
{
	return frame->current_row;
}

const PtfRowMeta *
frame_current_meta(PtfFrame *frame)
{
	return frame->current_meta ? frame->current_meta : &ptf_no_meta;
}

/* ---- the end of the input, and replays ---- */

static void apply_idle_rule(PtfFrame *frame, PtfOperator *op, PtfTime now);

/* Move the partitions just written to the replay queue. */
static void
spill_close_level(PtfFrame *frame)
{
	int			i;

	for (i = 0; i < SPILL_FANOUT; i++)
	{
		if (frame->parts[i] != NULL)
		{
			SpillFile  *f = palloc(sizeof(SpillFile));

			f->ts = frame->parts[i];
			f->depth = frame->depth + 1;
			frame->pending = lappend(frame->pending, f);
			frame->parts[i] = NULL;
		}
	}
}

/* The stream is over for op: the watermark goes to +infinity, every timer fires. */
static void
end_of_stream(PtfFrame *frame, PtfOperator *op)
{
	if (frame->need_proc_time && frame->last_proc_time != PTF_TIME_MIN)
		fire_timers(op, PTF_PROCESSING_TIME, frame->last_proc_time, frame->watermark,
					frame->last_proc_time);
	advance_watermark(frame, op, PTF_TIME_MAX, frame->last_proc_time);
	if (op->methods->on_finish)
		op->methods->on_finish(op, true);
}

/* The watermark an idle input has at processing time now (see the header). */
static PtfTime
idle_watermark(PtfFrameInput *input, PtfTime now)
{
	int64		idle;

	if (input->spec.idle_us <= 0 || input->last_row_proc_time == PTF_TIME_MIN ||
		input->max_event_time == PTF_TIME_MIN)
		return input->watermark;
	idle = now - input->last_row_proc_time - input->spec.idle_us;
	if (idle <= 0)
		return input->watermark;
	return Max(input->watermark,
			   ptf_time_add(ptf_time_sub(input->max_event_time, input->spec.delay_us), idle));
}

/* The operator's watermark the idle rule would give at now. */
static PtfTime
idle_watermark_at(PtfFrame *frame, PtfTime now)
{
	PtfTime		wm = PTF_TIME_MAX;
	bool		any = false;
	int			i;

	for (i = 0; i < frame->ninputs; i++)
	{
		if (frame->inputs[i]->spec.on_time_attno == InvalidAttrNumber)
			continue;
		any = true;
		wm = Min(wm, idle_watermark(frame->inputs[i], now));
	}
	return any ? Max(wm, frame->watermark) : frame->watermark;
}

static void
apply_idle_rule(PtfFrame *frame, PtfOperator *op, PtfTime now)
{
	PtfTime		wm;
	int			i;

	for (i = 0; i < frame->ninputs; i++)
		frame->inputs[i]->watermark = idle_watermark(frame->inputs[i], now);
	wm = combined_watermark(frame);
	if (wm > frame->watermark)
	{
		frame->watermark = wm;
		frame->watermark_proc_time = now;
		advance_watermark(frame, op, wm, now);
	}
}

PtfTime
frame_next_wake(PtfFrame *frame, PtfTime stored_timer)
{
	PtfTime		next_timer;
	PtfTime		wake = 0;
	int			i;

	if (frame->main_op == NULL)
		return 0;
	next_timer = Min(timer_next_time(frame->main_op->timers, PTF_EVENT_TIME), stored_timer);
	if (next_timer == PTF_TIME_MAX)
		return 0;
	for (i = 0; i < frame->ninputs; i++)
	{
		PtfFrameInput *input = frame->inputs[i];
		PtfTime		base;
		PtfTime		at;

		if (input->spec.idle_us <= 0 || input->last_row_proc_time == PTF_TIME_MIN ||
			input->max_event_time == PTF_TIME_MIN)
			continue;
		/* the processing time its idle watermark reaches the timer */
		base = ptf_time_sub(input->max_event_time, input->spec.delay_us);
		at = ptf_time_add(ptf_time_add(input->last_row_proc_time, input->spec.idle_us),
						  Max(next_timer - base, 1));
		if (wake == 0 || at > wake)
			wake = at;			/* the operator's watermark waits for the last */
	}
	return wake;
}

/* Read the next spilled row of f: its input, and the row in that input's layout. */
static PtfFrameInput *
read_spilled(PtfFrame *frame, SpillFile *f, TupleTableSlot **row)
{
	PtfFrameInput *input;
	MinimalTuple mt;
	bool		should_free;

	if (!frame->spill_extras)
	{
		input = frame->inputs[0];
		if (!tuplestore_gettupleslot(f->ts, true, false, input->spillslot))
			return NULL;
		*row = input->spillslot;
		return input;
	}
	if (!tuplestore_gettupleslot(f->ts, true, false, frame->tagslot))
		return NULL;
	input = frame->inputs[SPILL_TAG_INPUT(DatumGetInt64(slot_getattr(frame->tagslot, 1,
																	 &should_free)))];
	mt = ExecFetchSlotMinimalTuple(frame->tagslot, &should_free);
	Assert(!should_free);
	ExecStoreMinimalTuple(mt, input->spillslot, false);
	*row = input->spillslot;
	return input;
}

/*
 * Replay a spilled partition through a fresh operator: each row with the
 * watermark it arrived under, the watermark moving at the processing time
 * it moved at in the main pass, so TTLs start where they would have.
 */
static void
replay(PtfFrame *frame, SpillFile *f)
{
	PtfTime		wm = PTF_TIME_MIN;
	PtfTime		wm_proc_time = 0;
	PtfOperator *op;
	MemoryContext rowcxt;
	MemoryContext old;
	PtfFrameInput *input;
	TupleTableSlot *spilled;

	op = frame->factory(frame->factory_arg, f->depth >= SPILL_MAX_DEPTH);
	frame->op = op;
	frame->depth = f->depth;
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf replay row",
								   ALLOCSET_DEFAULT_SIZES);

	while ((input = read_spilled(frame, f, &spilled)) != NULL)
	{
		PtfRowContext ctx;
		RowKind		kind = ROWKIND_INSERT;
		PtfTime		row_wm = PTF_TIME_MIN;
		PtfTime		row_wm_proc_time = 0;
		TupleTableSlot *row = spilled;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(rowcxt);
		old = MemoryContextSwitchTo(rowcxt);
		memset(&ctx, 0, sizeof(ctx));
		if (frame->spill_extras)
		{
			int			natts = input->spec.rowdesc->natts;

			slot_getallattrs(spilled);
			ExecClearTuple(input->replayslot);
			memcpy(input->replayslot->tts_values, spilled->tts_values + SPILL_EXTRA,
				   sizeof(Datum) * natts);
			memcpy(input->replayslot->tts_isnull, spilled->tts_isnull + SPILL_EXTRA,
				   sizeof(bool) * natts);
			ExecStoreVirtualTuple(input->replayslot);
			row = input->replayslot;

			kind = SPILL_TAG_KIND(DatumGetInt64(spilled->tts_values[0]));
			ctx.proc_time = DatumGetInt64(spilled->tts_values[1]);
			row_wm = DatumGetInt64(spilled->tts_values[2]);
			row_wm_proc_time = DatumGetInt64(spilled->tts_values[3]);
		}
		if (row_wm > wm)
		{
			wm = row_wm;
			wm_proc_time = row_wm_proc_time;
			advance_watermark(frame, op, wm, wm_proc_time);
		}
		if (frame->need_proc_time)
			fire_timers(op, PTF_PROCESSING_TIME, ctx.proc_time, wm, ctx.proc_time);
		if (input->spec.on_time_attno != InvalidAttrNumber)
			ctx.event_time = row_time(input, row, input->spec.on_time_attno,
									  input->spec.on_time_type, "on_time");
		ctx.input = input->index;
		ctx.keys = input->spec.keys;
		ctx.meta = &ptf_no_meta;
		ctx.watermark = wm;
		frame->current_row = row;
		frame->current_meta = &ptf_no_meta;
		process_row(input, kind, row, &ctx, wm_proc_time);
		MemoryContextSwitchTo(old);
	}
	tuplestore_end(f->ts);
	MemoryContextDelete(rowcxt);

	/* the input's end, as in the main pass */
	end_of_stream(frame, op);
	spill_close_level(frame);
	frame->replayed_keys += ptf_operator_keys(op);
	frame->replay_bytes_peak = Max(frame->replay_bytes_peak, ptf_operator_memory(op));
	ptf_operator_destroy(op);
	frame->op = NULL;
}

void
frame_finish(PtfFrame *frame, bool end_of_input)
{
	PtfOperator *op = frame->main_op;

	load_flush(frame);
	frame_drain(frame);
	if (!end_of_input)
	{
		/* a uid's state is unbounded: it never spills */
		Assert(frame->spill_partitions == 0);
		if (frame->need_proc_time)
		{
			PtfTime		now = frame_processing_time(frame);

			if (now != PTF_TIME_MIN)
			{
				if (frame->loader != NULL)
					frame->loader(frame->loader_arg, NULL, NULL, 0, idle_watermark_at(frame, now));
				fire_timers(op, PTF_PROCESSING_TIME, now, frame->watermark, now);
				apply_idle_rule(frame, op, now);
			}
		}
		if (op->methods->on_finish)
			op->methods->on_finish(op, false);
		return;
	}

	frame->watermark = PTF_TIME_MAX;
	end_of_stream(frame, op);

	/* the stream is over: free the main state before replaying, as nodeAgg */
	frame->main_keys = ptf_operator_keys(op);
	frame->main_bytes = ptf_operator_memory(op);
	ptf_operator_destroy(op);
	frame->main_op = NULL;
	frame->op = NULL;

	spill_close_level(frame);
	while (frame->pending != NIL)
	{
		SpillFile  *f = linitial(frame->pending);

		frame->pending = list_delete_first(frame->pending);
		replay(frame, f);
	}
}

/*
 * Processing time now: the last row's when rows carry it in a column --
 * of this call, else of an earlier one (restored with the inputs), else
 * PTF_TIME_MIN (none yet: nothing is due) -- or else the clock.  A call
 * that read no row of its inputs must not take the clock for a column's
 * time: every TTL deadline, in the column's units, would be due.
 */
PtfTime
frame_processing_time(PtfFrame *frame)
{
	PtfTime		now = frame->last_proc_time;
	bool		column = false;
	int			i;

	for (i = 0; i < frame->ninputs; i++)
		if (frame->inputs[i]->spec.proc_time_attno != InvalidAttrNumber)
		{
			column = true;
			now = Max(now, frame->inputs[i]->last_row_proc_time);
		}
	return column ? now : ptf_now();
}

void
frame_stats(PtfFrame *frame, PtfFrameStats *stats)
{
	stats->rows_in = frame->rows_in;
	stats->rows_late = frame->rows_late;
	stats->rows_spilled = frame->rows_spilled;
	stats->spill_partitions = frame->spill_partitions;
	if (frame->main_op != NULL)
	{
		frame->main_keys = ptf_operator_keys(frame->main_op);
		frame->main_bytes = ptf_operator_memory(frame->main_op);
	}
	stats->keys = frame->main_keys + frame->replayed_keys;
	stats->state_bytes = Max(frame->main_bytes, frame->replay_bytes_peak);
	stats->watermark = frame->watermark;
}

/*
 * Another frame's state added to stats: keys, state bytes (their peaks
 * summed: frames holding parts of one state at once), rows spilled and
 * spill partitions.
 */
void
frame_stats_add_state(PtfFrameStats *stats, const PtfFrameStats *other)
{
	stats->keys += other->keys;
	stats->state_bytes += other->state_bytes;
	stats->rows_spilled += other->rows_spilled;
	stats->spill_partitions += other->spill_partitions;
}

void
frame_input_progress(PtfFrameInput *input, PtfTime *max_event_time, PtfTime *watermark,
					 PtfTime *last_row_proc_time)
{
	*max_event_time = input->max_event_time;
	*watermark = input->watermark;
	*last_row_proc_time = input->last_row_proc_time;
}
