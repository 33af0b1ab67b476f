/*-------------------------------------------------------------------------
 *
 * state_load.c
 *	  How much of a uid's durable state a call reads: all of it by one
 *	  sequential scan before the first row, or only what its rows touch,
 *	  through indexes, a buffer of rows at a time -- Flink reads RocksDB
 *	  per key; a call over a large state should cost what its rows cost,
 *	  not what the state costs.
 *
 * The rule (ptf.state_load = auto):
 *	  - a function whose operator cannot be read a key at a time (processing-
 *		time timers, or event-time timers its layout cannot find by time),
 *		a key without a btree operator class, or a state table of at most
 *		PROBE_MIN_BYTES: loaded whole, as a scan costs little;
 *	  - otherwise keys are probed: before each buffer of FRAME_LOAD_BATCH
 *		rows is processed, its keys that memory does not hold are read in
 *		one index scan, and the keys whose timers the buffer can make due;
 *	  - once a call has asked for more than 1/PROBE_SHARE of the stored
 *		keys, and the table fits in ptf.state_memory_limit, the rest is
 *		loaded by a scan (probing further would cost more than reading
 *		everything); and as soon as the keys its buffers read so far,
 *		projected over the rows the planner expects it to read, would pass
 *		that share;
 *	  - a call the planner expects to read at least as many rows as the
 *		state has keys, whose table fits the limit, reads it all by a scan
 *		from the start: that costs about what reading its rows does, where
 *		probing makes the key index and searches it per key (measured: a
 *		5M-row call into a state of 500k keys 2.5x slower than a scan).
 * ptf.state_load = full or probe forces one way (tests, and users who know
 * better).  ptf.last_call_stats() says which way a call went.
 *
 * Memory.  Keys read this way are evicted by a clock once memory passes
 * ptf.state_memory_limit (maybe_evict, and ptf_state_load_bound after a
 * pipeline's step): what was not used since the last pass goes, after
 * what changed was written back, and is read again when rows need it,
 * or when its timer comes due (a buffer evicts before it searches for
 * timers: every timer memory still holds is past the watermark then).
 * Operators say what a key's value holds and which keys must stay.
 *
 * Timers.  A key is read before its timer can come due: the frame tells
 * load_buffer the watermark a buffer's rows can raise the operator's to
 * (frame_finish the idle rule's), and the keys whose timer field lies
 * below it are read first.  Timers that depend on several of a key's rows
 * (a window aggregate's next window) are registered once the key is all
 * read (StateCodec.loaded).  The idle rule also wakes a pipeline for the
 * timers of keys not read (ptf_state_load_next_timer).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "engine/state_load.h"
#include "state/keyed_state_durable.h"

#define PROBE_MIN_BYTES (1024 * 1024)
#define PROBE_SHARE 8

typedef enum
{
	STATE_LOAD_AUTO,
	STATE_LOAD_FULL,
	STATE_LOAD_PROBE
} StateLoadMode;

static const struct config_enum_entry state_load_options[] = {
	{"auto", STATE_LOAD_AUTO, false},
	{"full", STATE_LOAD_FULL, false},
	{"probe", STATE_LOAD_PROBE, false},
	{NULL, 0, false}
};

static int	state_load_mode = STATE_LOAD_AUTO;
static int	state_memory_limit_kb = 256 * 1024;

struct PtfStateLoad
{
	DurableState *ds;
	PtfOperator *op;
	KeySpec    *keys[FRAME_MAX_INPUTS];
	int			nkeys;
	bool		complete;		/* memory holds every key */
	bool		may_switch;		/* auto: the rest may be loaded by a scan */
	bool		switched;
	PtfSqlInput *rows_from;		/* the input the planner estimates, or NULL */
	double		expected_rows;	/* its estimate, once asked; 0: unknown */
	uint64		rows_seen;		/* rows of the buffers loaded so far */
	bool		kept;
	PtfTime		timers_upto;	/* keys with timers up to here are in memory */
	PtfFrame   *frame;
	Datum	   *values;			/* a buffer's keys */
	bool	   *nulls;
	uint64		evict_above;	/* keys in memory that start an eviction pass; 0: none yet */
	uint64		evicted;
};

void
ptf_state_load_init(void)
{
	DefineCustomEnumVariable("ptf.state_load",
							 "How a call reads a uid's durable state.",
							 "auto: whole when small, else the keys its rows touch; "
							 "full: always whole; probe: always key by key.",
							 &state_load_mode,
							 STATE_LOAD_AUTO, state_load_options,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.state_memory_limit",
							"Memory for durable state read key by key, in a call and between a pipeline's steps.",
							"Past it, keys not used lately are evicted (written back, read "
							"again when needed); a call never loads a larger state whole.",
							&state_memory_limit_kb,
							256 * 1024, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB,
							NULL, NULL, NULL);
}

Size
ptf_state_memory_limit(void)
{
	return (Size) state_memory_limit_kb * 1024;
}

/* Could max_new_keys more keys grow op's state past the limit? */
static bool
outgrows_limit(PtfOperator *op, uint64 max_new_keys)
{
	Size		growth;

	if (op->methods->evict == NULL || !keyed_state_tracks_use(op->state))
		return false;
	growth = keyed_state_growth_bytes(op->state, max_new_keys);
	return growth > 0 && ptf_operator_memory(op) + growth > ptf_state_memory_limit();
}

static bool
choose_probe(PtfStateLoad *sl, DurableState *ds, bool probe_ok)
{
	DurableStats st;

	if (!probe_ok || state_load_mode == STATE_LOAD_FULL || !durable_can_probe(ds))
		return false;
	if (state_load_mode == STATE_LOAD_PROBE)
		return true;
	durable_stats(ds, &st);
	if (st.table_bytes <= PROBE_MIN_BYTES)
		return false;
	/* planned again for its estimate only here, where it can matter */
	if (sl->rows_from != NULL)
		sl->expected_rows = sql_input_estimate_rows(sl->rows_from);

	/*
	 * A call expected to read at least as many rows as the state has keys
	 * reads the state by a scan when it fits the limit: that costs about
	 * what reading the rows does, where probing would make the key index
	 * (once) and search it for every key the rows bring.
	 */
	return !(sl->expected_rows >= (double) st.stored_keys &&
			 st.table_bytes <= ptf_state_memory_limit());
}

PtfStateLoad *
ptf_state_load_begin(DurableState *ds, PtfOperator *op, bool kept, bool complete,
					 bool probe_ok, KeySpec **input_keys, int ninputs, uint64 max_new_keys,
					 PtfSqlInput *rows_from)
{
	PtfStateLoad *sl = palloc0(sizeof(PtfStateLoad));
	int			i;

	sl->ds = ds;
	sl->op = op;
	sl->kept = kept;
	for (i = 0; i < ninputs; i++)
		sl->keys[i] = input_keys[i];
	sl->nkeys = input_keys[0]->ncols;
	sl->rows_from = rows_from;
	durable_attach(ds, op->state, &op->codec);
	if (complete && kept && probe_ok && outgrows_limit(op, max_new_keys) &&
		durable_can_probe(ds) && state_load_mode != STATE_LOAD_FULL)
	{
		/*
		 * A pipeline's kept state holding every key, whose table this step
		 * could double past the limit: the keys the last steps did not use
		 * go now, before the step's rows come (nothing of the kept state
		 * waits to be written back), and the step reads what it needs.
		 */
		uint64		n = ptf_operator_evict(op);

		durable_note_evicted(ds, n);
		sl->evicted += n;
		complete = (n == 0);
	}
	if (complete)
		sl->complete = true;
	else if (!choose_probe(sl, ds, probe_ok))
	{
		durable_read_all(ds);
		sl->complete = true;
	}
	else
	{
		durable_start_probing(ds);
		sl->may_switch = (state_load_mode == STATE_LOAD_AUTO);
	}
	return sl;
}

/*
 * Keep memory near ptf.state_memory_limit while reading key by key: once
 * it is past the limit, the number of keys it held then is the mark; a
 * pass evicts the keys not used since the pass before whenever memory
 * holds an eighth more (a pass walks every key: not for every buffer).
 * A working set larger than the limit raises the mark rather than evict
 * what the next rows need.
 */
static void
evict_now(PtfStateLoad *sl)
{
	KeyedState *ks = sl->op->state;
	uint64		keys;
	uint64		n;

	durable_flush(sl->ds);
	n = ptf_operator_evict(sl->op);
	durable_note_evicted(sl->ds, n);
	sl->evicted += n;
	keys = keyed_state_count(ks);
	sl->evict_above = Max(sl->evict_above, keys + Max(keys / 8, FRAME_LOAD_BATCH));
}

static void
maybe_evict(PtfStateLoad *sl, int nnew)
{
	KeyedState *ks = sl->op->state;
	uint64		keys = keyed_state_count(ks);
	Size		growth;

	if (sl->op->methods->evict == NULL)
		return;

	/*
	 * A hash table grows by doubling, and holds both tables while it
	 * rehashes: with nnew keys more it would go past the limit by the new
	 * table's size.  Room is made first, so that memory stays within the
	 * limit and that one table (the state's memory once keys are evicted
	 * is what they leave).
	 */
	growth = keyed_state_growth_bytes(ks, nnew);
	if (growth > 0 && keyed_state_tracks_use(ks) &&
		ptf_operator_memory(sl->op) + growth > ptf_state_memory_limit())
	{
		evict_now(sl);
		return;
	}
	if (sl->evict_above == 0)
	{
		if (ptf_operator_memory(sl->op) <= ptf_state_memory_limit())
			return;
		sl->evict_above = keys + Max(keys / 8, FRAME_LOAD_BATCH);
		return;
	}
	if (keys <= sl->evict_above)
		return;
	evict_now(sl);
}

/* The rest by a scan, once probing would cost more than reading all of it. */
static void
maybe_switch(PtfStateLoad *sl)
{
	DurableStats st;

	if (!sl->may_switch)
		return;
	durable_stats(sl->ds, &st);
	if (st.table_bytes > ptf_state_memory_limit())
		return;
	/* keys read so far (stored ones, each once), projected over the rows to come */
	if ((int64) st.probes * PROBE_SHARE <= st.stored_keys &&
		!(sl->rows_seen > 0 && sl->expected_rows > sl->rows_seen &&
		  (double) st.loaded_keys / sl->rows_seen * sl->expected_rows * PROBE_SHARE >
		  (double) st.stored_keys))
		return;
	durable_read_all(sl->ds);
	sl->complete = true;
	sl->switched = true;
	frame_stop_loading(sl->frame);
}

/* The keys of a buffer of rows, and the timers they make due. */
static void
load_keys(PtfStateLoad *sl, TupleTableSlot **rows, const int *inputs, int n, PtfTime upto)
{
	int			nk = sl->nkeys;
	int			missing = 0;
	int			i;
	int			j;

	if (n < 0)
	{
		/* every key, for a truncation: the rest by a scan */
		durable_read_all(sl->ds);
		sl->complete = true;
		sl->switched = true;
		frame_stop_loading(sl->frame);
		return;
	}
	/*
	 * What these rows need stays through an eviction (marked), and only the
	 * keys memory does not hold are asked of the table (kept, in order).
	 */
	for (i = 0; i < n; i++)
	{
		KeySpec    *keys = sl->keys[inputs[i]];

		for (j = 0; j < nk; j++)
			sl->values[missing * nk + j] = slot_getattr(rows[i], keys->cols[j].attno,
														&sl->nulls[missing * nk + j]);
		if (!keyed_state_mark_used(sl->op->state, sl->values + missing * nk,
								   sl->nulls + missing * nk))
			missing++;
	}

	/*
	 * Evict before the timers are read: every timer memory holds is past
	 * the watermark (timers_upto), so an evicted key's is found again by
	 * the search below when due -- after it, a key evicted with a timer
	 * the search had already passed would never fire.
	 */
	sl->rows_seen += n;
	maybe_evict(sl, missing);
	if (upto > sl->timers_upto)
	{
		durable_read_timers(sl->ds, sl->timers_upto, upto);
		sl->timers_upto = upto;
	}
	durable_read_keys(sl->ds, sl->values, sl->nulls, missing);
	maybe_switch(sl);
}

/*
 * PtfFrameLoader: before the frame runs a buffer of rows, the keys they
 * need.  Rows of a change stream come after decoding is done, so the state
 * table is read under the transaction's own catalog and snapshot.
 */
static void
load_buffer(void *arg, TupleTableSlot **rows, const int *inputs, int n, PtfTime upto)
{
	PtfStateLoad *sl = (PtfStateLoad *) arg;

	if (sl->complete)
		return;
	load_keys(sl, rows, inputs, n, upto);
}

void
ptf_state_load_start(PtfStateLoad *sl, PtfFrame *frame)
{
	if (sl->complete)
		return;
	sl->frame = frame;
	/*
	 * Timers fire when the watermark next moves: a stored one at or below
	 * the stored watermark may still be pending -- a candidate at the
	 * watermark itself, a temporal join's key whose version a later change
	 * deleted at a time the watermark had passed -- so the first read asks
	 * for every timer up to the new watermark (the index holds the pending
	 * ones only: a fired timer leaves its key's row).
	 */
	sl->timers_upto = PTF_TIME_MIN;
	keyed_state_track_use(sl->op->state);
	sl->values = palloc(sizeof(Datum) * FRAME_LOAD_BATCH * Max(sl->nkeys, 1));
	sl->nulls = palloc(sizeof(bool) * FRAME_LOAD_BATCH * Max(sl->nkeys, 1));
	frame_set_loader(frame, load_buffer, sl);
}

/*
 * After the call's state was stored: a pipeline's kept state past the
 * limit evicts what the step did not use; false if that left it past the
 * limit (the caller drops it all).
 */
bool
ptf_state_load_bound(PtfStateLoad *sl)
{
	uint64		n;

	if (ptf_operator_memory(sl->op) <= ptf_state_memory_limit())
		return true;
	/* a state that did not track use yet starts now, and evicts next time */
	if (!keyed_state_tracks_use(sl->op->state))
	{
		keyed_state_track_use(sl->op->state);
		return true;
	}
	n = ptf_operator_evict(sl->op);
	sl->evicted += n;
	if (n > 0)
		sl->complete = false;
	return n > 0;
}

/* Every key in memory from now on (a resync reads all of the tables). */
void
ptf_state_load_all(PtfStateLoad *sl)
{
	if (sl->complete)
		return;
	durable_read_all(sl->ds);
	sl->complete = true;
	sl->switched = true;
	if (sl->frame != NULL)
		frame_stop_loading(sl->frame);
}

/*
 * The earliest event-time timer of the keys memory may not hold, as far as
 * the state table tells (PTF_TIME_MAX: none, or memory holds every key):
 * what the idle rule must wake the uid for besides memory's own timers.
 */
PtfTime
ptf_state_load_next_timer(PtfStateLoad *sl)
{
	if (sl->complete)
		return PTF_TIME_MAX;
	return durable_next_timer(sl->ds, sl->timers_upto);
}

bool
ptf_state_load_complete(PtfStateLoad *sl)
{
	return sl->complete;
}

void
ptf_state_load_stats(PtfStateLoad *sl, PtfStateLoadStats *stats)
{
	DurableStats st;

	durable_stats(sl->ds, &st);
	stats->how = sl->switched ? "probe, then full" :
		sl->complete ? (sl->kept && st.loaded_keys == 0 ? "kept" : "full") :
		"probe";
	stats->keys_probed = st.probes;
	stats->keys_loaded = st.loaded_keys;
	stats->keys_evicted = sl->evicted;
}
