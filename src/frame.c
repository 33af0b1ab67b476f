/*-------------------------------------------------------------------------
 *
 * frame.c
 *	  Runs one operator over a stream of input rows: time, watermarks and
 *	  spilling.
 *
 * Watermarks follow Flink's bounded out-of-orderness strategy: after every
 * row the watermark is max(event time seen) - delay, and the operator is
 * told when it advances.  Without a delay a bounded input has no watermark
 * until its end, where it jumps to +infinity.
 *
 * Spilling follows hash aggregation (nodeAgg.c): once the state's memory
 * budget is spent, a row whose key is not in memory is written, with its
 * processing time and the watermark it arrived under, to one of
 * SPILL_FANOUT partitions chosen by key hash.  Every row of such a key
 * lands in the same partition in arrival order, so replaying a partition
 * through a fresh operator makes exactly the decisions the operator would
 * have made with unbounded memory; only the order of the output differs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "frame.h"

#define SPILL_FANOUT_BITS	4
#define SPILL_FANOUT		(1 << SPILL_FANOUT_BITS)
#define SPILL_MAX_DEPTH		(32 / SPILL_FANOUT_BITS)

/* extra columns of a spilled row, after the row's own */
/* kind, processing time, watermark, processing time the watermark moved at */
#define SPILL_EXTRA			4

typedef struct SpillFile
{
	Tuplestorestate *ts;
	int			depth;
} SpillFile;

/*
 * Rows wait in a small batch before the operator sees them, so that the
 * state each one needs can be prefetched while the batch fills: the
 * lookups of a batch then overlap their cache misses instead of paying
 * them one after the other.  Order and semantics are unchanged.
 */
#define FRAME_BATCH		16

typedef struct BatchEntry
{
	RowKind		kind;
	PtfRowMeta	meta;
	TupleTableSlot *slot;		/* a heap-tuple slot over buf */
	HeapTupleData tuple;
	char	   *buf;
	Size		cap;
} BatchEntry;

struct PtfFrame
{
	MemoryContext cxt;			/* lives as long as the frame; rows come in
								 * short-lived contexts */
	PtfOperator *op;			/* the one running: main, or a replay */
	PtfOperator *main_op;
	TupleDesc	rowdesc;
	PtfFrameTimeSpec time;
	PtfOperatorFactory factory;
	void	   *factory_arg;

	PtfTime		max_event_time;
	PtfTime		watermark;
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

	/* batching, when the operator can prefetch */
	bool		batching;
	BatchEntry	batch[FRAME_BATCH];
	int			nbatch;

	/* spilling; set up on first use */
	TupleDesc	spilldesc;
	bool		changelog_input;	/* rows may be other kinds than +I */
	bool		spill_extras;	/* spilled rows carry kind, times */
	TupleTableSlot *spillslot;
	TupleTableSlot *replayslot;
	Datum	   *values;
	bool	   *nulls;
	Tuplestorestate *parts[SPILL_FANOUT];	/* being written */
	int			depth;			/* of the rows being processed */
	List	   *pending;		/* SpillFile *, to replay */
};

PtfFrame *
frame_create(PtfOperator *op, TupleDesc rowdesc, const PtfFrameTimeSpec *time,
			 bool changelog_input, PtfOperatorFactory factory, void *factory_arg)
{
	PtfFrame   *frame = palloc0(sizeof(PtfFrame));

	frame->changelog_input = changelog_input;
	frame->main_op = op;
	frame->cxt = CurrentMemoryContext;
	frame->op = op;
	frame->rowdesc = rowdesc;
	frame->time = *time;
	frame->factory = factory;
	frame->factory_arg = factory_arg;
	frame->max_event_time = PTF_TIME_MIN;
	frame->watermark = PTF_TIME_MIN;
	frame->last_proc_time = PTF_TIME_MIN;
	frame->batching = (op->prefetch != NULL);
	if (frame->batching)
	{
		int			i;

		for (i = 0; i < FRAME_BATCH; i++)
		{
			frame->batch[i].slot = MakeSingleTupleTableSlot(rowdesc, &TTSOpsHeapTuple);
			frame->batch[i].cap = 256;
			frame->batch[i].buf = palloc(frame->batch[i].cap);
		}
	}
	return frame;
}

void
frame_restore_watermark(PtfFrame *frame, PtfTime max_event_time,
						PtfTime watermark)
{
	frame->max_event_time = max_event_time;
	frame->watermark = watermark;
}

/* names come from the row type: a query's result columns may be named otherwise */
static PtfTime
row_time(PtfFrame *frame, TupleTableSlot *row, AttrNumber attno, Oid typid,
		 const char *what)
{
	bool		isnull;
	Datum		d = slot_getattr(row, attno, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s column \"%s\" is NULL in an input row", what,
						NameStr(TupleDescAttr(frame->rowdesc, attno - 1)->attname))));
	return ptf_time_from_datum(d, typid);
}

/*
 * A spilled row carries what replaying it needs besides itself: its kind
 * (changelog inputs), processing time (TTL) and the watermark it arrived
 * under (a delay).  When nothing is needed the row is spilled as it is.
 */
static void
spill_setup(PtfFrame *frame)
{
	int			natts = frame->rowdesc->natts;
	int			i;
	MemoryContext old = MemoryContextSwitchTo(frame->cxt);

	frame->spill_extras = (frame->changelog_input || frame->time.need_proc_time ||
						   frame->time.has_delay);
	if (frame->spill_extras)
	{
		frame->spilldesc = CreateTemplateTupleDesc(natts + SPILL_EXTRA);
		for (i = 1; i <= natts; i++)
			TupleDescCopyEntry(frame->spilldesc, i, frame->rowdesc, i);
		for (i = 1; i <= SPILL_EXTRA; i++)
			TupleDescInitEntry(frame->spilldesc, natts + i, NULL, INT8OID, -1, 0);
		frame->values = palloc(sizeof(Datum) * (natts + SPILL_EXTRA));
		frame->nulls = palloc(sizeof(bool) * (natts + SPILL_EXTRA));
	}
	else
		frame->spilldesc = frame->rowdesc;
	frame->spillslot = MakeSingleTupleTableSlot(frame->spilldesc,
												&TTSOpsMinimalTuple);
	frame->replayslot = MakeSingleTupleTableSlot(frame->rowdesc,
												 &TTSOpsVirtual);
	MemoryContextSwitchTo(old);
}

static void
spill_row(PtfFrame *frame, RowKind kind, TupleTableSlot *row,
		  PtfTime proc_time, PtfTime watermark, PtfTime watermark_proc_time)
{
	KeySpec    *keys = keyed_state_keys(frame->op->state);
	int			natts = frame->rowdesc->natts;
	uint32		hash;
	int			part;

	if (frame->spilldesc == NULL)
		spill_setup(frame);

	hash = key_probe(keys, row);
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
		memcpy(frame->values, row->tts_values, sizeof(Datum) * natts);
		memcpy(frame->nulls, row->tts_isnull, sizeof(bool) * natts);
		frame->values[natts] = Int64GetDatum((int64) kind);
		frame->values[natts + 1] = Int64GetDatum(proc_time);
		frame->values[natts + 2] = Int64GetDatum(watermark);
		frame->values[natts + 3] = Int64GetDatum(watermark_proc_time);
		memset(frame->nulls + natts, false, sizeof(bool) * SPILL_EXTRA);
		tuplestore_putvalues(frame->parts[part], frame->spilldesc,
							 frame->values, frame->nulls);
	}
	frame->rows_spilled++;
}

static void
process_row(PtfFrame *frame, RowKind kind, TupleTableSlot *row,
			PtfTime event_time, PtfTime proc_time, PtfTime watermark,
			PtfTime watermark_proc_time)
{
	PtfOperator *op = frame->op;

	switch (op->methods->on_row(op, kind, row, frame->current_meta, event_time,
								proc_time, watermark))
	{
		case PTF_ROW_DONE:
			break;
		case PTF_ROW_LATE:
			frame->rows_late++;
			break;
		case PTF_ROW_SPILL:
			spill_row(frame, kind, row, proc_time, watermark, watermark_proc_time);
			break;
	}
}

static const PtfRowMeta no_meta = {InvalidXLogRecPtr, 0, InvalidTransactionId, false, false};

static void
frame_process(PtfFrame *frame, RowKind kind, TupleTableSlot *row,
			  const PtfRowMeta *meta)
{
	PtfTime		event_time = 0;
	PtfTime		proc_time = 0;

	frame->current_row = row;
	frame->current_meta = meta;

	if (frame->time.on_time_attno != InvalidAttrNumber)
		event_time = row_time(frame, row, frame->time.on_time_attno,
							  frame->time.on_time_type, "on_time");
	if (frame->time.need_proc_time)
	{
		if (frame->time.proc_time_attno != InvalidAttrNumber)
			proc_time = row_time(frame, row, frame->time.proc_time_attno,
								 frame->time.proc_time_type, "proc_time");
		else
			proc_time = GetCurrentTimestamp();
		frame->last_proc_time = proc_time;
	}

	process_row(frame, kind, row, event_time, proc_time, frame->watermark,
				frame->watermark_proc_time);

	/* an infinite event time is kept like any other but moves no watermark */
	if (frame->time.on_time_attno != InvalidAttrNumber &&
		event_time > frame->max_event_time && event_time != PTF_TIME_MAX)
	{
		frame->max_event_time = event_time;
		if (frame->time.has_delay)
		{
			PtfTime		wm = ptf_time_sub(event_time, frame->time.delay_us);

			if (wm > frame->watermark)
			{
				frame->watermark = wm;
				frame->watermark_proc_time = proc_time;
				frame->op->methods->on_watermark(frame->op, wm, proc_time);
			}
		}
	}
}

static void
frame_drain(PtfFrame *frame)
{
	int			i;

	for (i = 0; i < frame->nbatch; i++)
	{
		BatchEntry *e = &frame->batch[i];

		frame_process(frame, e->kind, e->slot, &e->meta);
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
	bool		should_free;
	HeapTuple	src = ExecFetchSlotHeapTuple(row, false, &should_free);

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
	e->kind = kind;
	e->meta = *meta;
	ExecStoreHeapTuple(&e->tuple, e->slot, false);
	frame->op->prefetch(frame->op, e->slot);
}

void
frame_push_meta(void *arg, RowKind kind, TupleTableSlot *row,
				const PtfRowMeta *meta)
{
	PtfFrame   *frame = (PtfFrame *) arg;

	frame->rows_in++;
	if (!frame->batching)
	{
		frame_process(frame, kind, row, meta);
		return;
	}
	batch_add(frame, kind, row, meta);
	if (frame->nbatch == FRAME_BATCH)
		frame_drain(frame);
}

void
frame_push(void *arg, RowKind kind, TupleTableSlot *row)
{
	frame_push_meta(arg, kind, row, &no_meta);
}

TupleTableSlot *
frame_current_row(PtfFrame *frame)
{
	return frame->current_row;
}

const PtfRowMeta *
frame_current_meta(PtfFrame *frame)
{
	return frame->current_meta ? frame->current_meta : &no_meta;
}

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

/*
 * Replay a spilled partition through a fresh operator: each row with the
 * watermark it arrived under, the watermark moving at the processing time
 * it moved at in the main pass, so TTLs start where they would have.
 */
static void
replay(PtfFrame *frame, SpillFile *f)
{
	int			natts = frame->rowdesc->natts;
	PtfTime		wm = PTF_TIME_MIN;
	PtfTime		wm_proc_time = 0;
	PtfOperator *op;
	MemoryContext rowcxt;
	MemoryContext old;

	op = frame->factory(frame->factory_arg, f->depth >= SPILL_MAX_DEPTH);
	frame->op = op;
	frame->depth = f->depth;
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf replay row",
								   ALLOCSET_DEFAULT_SIZES);

	while (tuplestore_gettupleslot(f->ts, true, false, frame->spillslot))
	{
		RowKind		kind = ROWKIND_INSERT;
		PtfTime		event_time = 0;
		PtfTime		proc_time = 0;
		PtfTime		row_wm = PTF_TIME_MIN;
		PtfTime		row_wm_proc_time = 0;
		TupleTableSlot *row = frame->spillslot;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(rowcxt);
		old = MemoryContextSwitchTo(rowcxt);
		if (frame->spill_extras)
		{
			slot_getallattrs(frame->spillslot);
			ExecClearTuple(frame->replayslot);
			memcpy(frame->replayslot->tts_values, frame->spillslot->tts_values,
				   sizeof(Datum) * natts);
			memcpy(frame->replayslot->tts_isnull, frame->spillslot->tts_isnull,
				   sizeof(bool) * natts);
			ExecStoreVirtualTuple(frame->replayslot);
			row = frame->replayslot;

			kind = (RowKind) DatumGetInt64(frame->spillslot->tts_values[natts]);
			proc_time = DatumGetInt64(frame->spillslot->tts_values[natts + 1]);
			row_wm = DatumGetInt64(frame->spillslot->tts_values[natts + 2]);
			row_wm_proc_time = DatumGetInt64(frame->spillslot->tts_values[natts + 3]);
		}
		if (frame->time.on_time_attno != InvalidAttrNumber)
			event_time = row_time(frame, row, frame->time.on_time_attno,
								  frame->time.on_time_type, "on_time");
		frame->current_row = row;
		frame->current_meta = &no_meta;
		if (row_wm > wm)
		{
			wm = row_wm;
			wm_proc_time = row_wm_proc_time;
			op->methods->on_watermark(op, wm, wm_proc_time);
		}
		process_row(frame, kind, row, event_time, proc_time, wm, wm_proc_time);
		MemoryContextSwitchTo(old);
	}
	tuplestore_end(f->ts);
	MemoryContextDelete(rowcxt);

	/* the input's end, as in the main pass */
	op->methods->on_watermark(op, PTF_TIME_MAX, frame->last_proc_time);
	spill_close_level(frame);
	frame->replayed_keys += keyed_state_count(op->state);
	frame->replay_bytes_peak = Max(frame->replay_bytes_peak,
								   keyed_state_memory(op->state));
	keyed_state_destroy(op->state);
}

void
frame_finish(PtfFrame *frame, bool end_of_stream)
{
	frame_drain(frame);
	if (!end_of_stream)
	{
		Assert(frame->spill_partitions == 0);
		return;
	}

	frame->op->methods->on_watermark(frame->op, PTF_TIME_MAX,
									 frame->last_proc_time);
	frame->watermark = PTF_TIME_MAX;

	/* the stream is over: free the main state before replaying, as nodeAgg */
	frame->main_keys = keyed_state_count(frame->main_op->state);
	frame->main_bytes = keyed_state_memory(frame->main_op->state);
	keyed_state_destroy(frame->main_op->state);
	frame->main_op->state = NULL;

	spill_close_level(frame);
	while (frame->pending != NIL)
	{
		SpillFile  *f = linitial(frame->pending);

		frame->pending = list_delete_first(frame->pending);
		replay(frame, f);
	}
}

/* processing time of the last row, or the clock when there was none */
PtfTime
frame_processing_time(PtfFrame *frame)
{
	if (frame->last_proc_time != PTF_TIME_MIN)
		return frame->last_proc_time;
	return GetCurrentTimestamp();
}

void
frame_stats(PtfFrame *frame, PtfFrameStats *stats)
{
	stats->rows_in = frame->rows_in;
	stats->rows_late = frame->rows_late;
	stats->rows_spilled = frame->rows_spilled;
	stats->spill_partitions = frame->spill_partitions;
	if (frame->main_op->state != NULL)
	{
		frame->main_keys = keyed_state_count(frame->main_op->state);
		frame->main_bytes = keyed_state_memory(frame->main_op->state);
	}
	stats->keys = frame->main_keys + frame->replayed_keys;
	stats->state_bytes = Max(frame->main_bytes, frame->replay_bytes_peak);
	stats->max_event_time = frame->max_event_time;
	stats->watermark = frame->watermark;
}

/* ---- time values ---- */

#define UNIX_EPOCH_US_FROM_PG_EPOCH \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

bool
ptf_is_time_type(Oid typid)
{
	return typid == TIMESTAMPOID || typid == TIMESTAMPTZOID || typid == INT8OID;
}

PtfTime
ptf_time_from_datum(Datum d, Oid typid)
{
	int64		ms;
	int64		us;

	if (typid != INT8OID)
		return DatumGetInt64(d);

	/* bigint: milliseconds since 1970-01-01 */
	ms = DatumGetInt64(d);
	if (pg_mul_s64_overflow(ms, 1000, &us) ||
		pg_sub_s64_overflow(us, UNIX_EPOCH_US_FROM_PG_EPOCH, &us))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("epoch milliseconds value %lld is out of range",
						(long long) ms)));
	return us;
}

Datum
ptf_time_to_datum(PtfTime t, Oid typid)
{
	if (typid != INT8OID)
		return Int64GetDatum(t);
	if (t == PTF_TIME_MIN || t == PTF_TIME_MAX)
		return Int64GetDatum(t);
	return Int64GetDatum((t + UNIX_EPOCH_US_FROM_PG_EPOCH) / 1000);
}

int64
ptf_interval_to_us(Datum d, const char *argname)
{
	Interval   *iv = DatumGetIntervalP(d);
	int64		us;
	int64		days_us;

	if (pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH + iv->day,
							USECS_PER_DAY, &days_us) ||
		pg_add_s64_overflow(iv->time, days_us, &us))
		ereport(ERROR,
				(errcode(ERRCODE_INTERVAL_FIELD_OVERFLOW),
				 errmsg("%s is out of range", argname)));
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", argname)));
	return us;
}

PtfTime
ptf_time_sub(PtfTime t, int64 delta)
{
	PtfTime		r;

	if (t == PTF_TIME_MIN || t == PTF_TIME_MAX)
		return t;
	if (pg_sub_s64_overflow(t, delta, &r))
		return PTF_TIME_MIN;
	return r;
}

PtfTime
ptf_time_add(PtfTime t, int64 delta)
{
	PtfTime		r;

	if (t == PTF_TIME_MIN || t == PTF_TIME_MAX)
		return t;
	if (pg_add_s64_overflow(t, delta, &r))
		return PTF_TIME_MAX;
	return r;
}
