/*-------------------------------------------------------------------------
 *
 * frame.h
 *	  The frame that runs one operator over one or more inputs: time,
 *	  watermarks, timers, batching and spilling.
 *
 * A function makes a frame, adds its inputs (each with its row type, key
 * columns, time columns, watermark delay and whether it carries changes
 * other than inserts), starts it with the operator, and the input
 * adapters push rows into the inputs' handles.  The frame turns each row
 * into (kind, row, context), keeps a watermark per input and gives the
 * operator their minimum, fires the operator's timers when the watermark
 * or processing time passes them, and spills the rows of keys that do
 * not fit in memory, replaying them partition by partition at the end in
 * fresh operators.  See frame.c for the state it keeps and its phases.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FRAME_H
#define PTF_FRAME_H

#include "access/tupdesc.h"
#include "executor/tuptable.h"

#include "base/base.h"
#include "operators/operator.h"

#define FRAME_MAX_INPUTS 4

/*
 * Builds a fresh operator over fresh memory state, for a spilled
 * partition; unbounded_memory: the partition cannot be split further.
 */
typedef PtfOperator *(*PtfOperatorFactory) (void *arg, bool unbounded_memory);

typedef struct PtfFrameInputSpec
{
	const char *name;			/* "input", "probe", "build": for messages */
	TupleDesc	rowdesc;
	KeySpec    *keys;			/* key columns in rowdesc; same types on every input */
	AttrNumber	on_time_attno;	/* 0: no event time */
	Oid			on_time_type;
	AttrNumber	proc_time_attno;	/* 0: the clock */
	Oid			proc_time_type;
	bool		has_delay;		/* a watermark is declared or given */
	int64		delay_us;
	int64		idle_us;		/* idle rule: 0 none (see frame.c) */
	bool		changelog;		/* rows may be other kinds than +I */

	/*
	 * Partial rows (an upsert stream's key-only deletes) have no event time
	 * of their own: the operator finds it in its state (ctx->meta->partial,
	 * ctx->event_time 0), and they move no watermark.
	 */
	bool		partial_untimed;
} PtfFrameInputSpec;

typedef struct PtfFrame PtfFrame;
typedef struct PtfFrameInput PtfFrameInput;

/*
 * need_proc_time: rows need a processing time (a TTL, processing-time
 * timers); factory makes the operators of spilled partitions.
 */
extern PtfFrame *frame_create(bool need_proc_time, PtfOperatorFactory factory,
							  void *factory_arg);
extern PtfFrameInput *frame_add_input(PtfFrame *frame, const PtfFrameInputSpec *spec);

/* The progress of an input carried over from the previous call of a uid. */
extern void frame_restore_input(PtfFrameInput *input, PtfTime max_event_time,
								PtfTime watermark, PtfTime last_row_proc_time);

/* Run op from now on; inputs are all added (and restored). */
extern void frame_start(PtfFrame *frame, PtfOperator *op);

/*
 * State read a key at a time (durable state too large to load whole): rows
 * wait in a buffer of up to FRAME_LOAD_BATCH rows, and before any of them
 * is processed the loader gets them -- row i of input inputs[i] -- and the
 * watermark they may raise the operator's to (upto), so that it can read
 * the keys they touch and the keys whose timers come due.  At the end of
 * a call it is called with no rows when the idle rule moves the watermark.
 * A loader that has read all of the state calls frame_stop_loading.
 */
#define FRAME_LOAD_BATCH 1024

typedef void (*PtfFrameLoader) (void *arg, TupleTableSlot **rows, const int *inputs,
								int n, PtfTime upto);	/* n -1: every key (a truncation) */

extern void frame_set_loader(PtfFrame *frame, PtfFrameLoader loader, void *arg);
extern void frame_stop_loading(PtfFrame *frame);

/* every row pushed so far through to the operator (buffered, batched) */
extern void frame_flush(PtfFrame *frame);

/* one input row; the PtfRowSink of every input adapter (arg: the input) */
extern void frame_push(void *input, RowKind kind, TupleTableSlot *row,
					   const PtfRowMeta *meta);

/* while a row is processed: the row the operator was given, and its origin */
extern TupleTableSlot *frame_current_row(PtfFrame *frame);
extern const PtfRowMeta *frame_current_meta(PtfFrame *frame);

/*
 * End of this call's input.  A bounded input (no uid) ends the stream: the
 * watermark jumps to +infinity, every timer fires, and spilled partitions
 * are replayed.  Otherwise processing-time timers due by now fire.
 */
extern void frame_finish(PtfFrame *frame, bool end_of_stream);

typedef struct PtfFrameStats
{
	uint64		rows_in;
	uint64		rows_late;
	uint64		rows_spilled;
	int			spill_partitions;
	uint64		keys;			/* in state at the end, spilled ones included */
	Size		state_bytes;	/* peak memory of state at any one time */
	PtfTime		watermark;		/* the operator's */
} PtfFrameStats;

extern void frame_stats(PtfFrame *frame, PtfFrameStats *stats);
extern void frame_stats_add_state(PtfFrameStats *stats, const PtfFrameStats *other);
extern void frame_input_progress(PtfFrameInput *input, PtfTime *max_event_time,
								 PtfTime *watermark, PtfTime *last_row_proc_time);
extern PtfTime frame_processing_time(PtfFrame *frame);

/*
 * The processing time at which, with no new input, the idle rule would
 * move the watermark up to the operator's next timer, or to stored_timer
 * if earlier (the timers of state not in memory: PTF_TIME_MAX for none):
 * when a pipeline's step is due again although nothing was written.
 * 0: never.
 */
extern PtfTime frame_next_wake(PtfFrame *frame, PtfTime stored_timer);

#endif							/* PTF_FRAME_H */
