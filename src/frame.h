/*-------------------------------------------------------------------------
 *
 * frame.h
 *	  The frame that runs one operator: it turns input rows into
 *	  (kind, row, event time, processing time), keeps the watermark, fires
 *	  the operator's watermark callback, and spills rows whose keys do not
 *	  fit in memory, replaying them partition by partition at the end.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FRAME_H
#define PTF_FRAME_H

#include "access/tupdesc.h"
#include "executor/tuptable.h"

#include "operators/operator.h"
#include "ptf.h"

/* Builds a fresh operator over a fresh state, for a spilled partition. */
typedef PtfOperator *(*PtfOperatorFactory) (void *arg, bool unbounded_memory);

typedef struct PtfFrameTimeSpec
{
	AttrNumber	on_time_attno;	/* 0: no event time */
	Oid			on_time_type;
	AttrNumber	proc_time_attno;	/* 0: the clock */
	Oid			proc_time_type;
	bool		need_proc_time; /* a TTL applies */
	bool		has_delay;		/* a watermark is declared or given */
	int64		delay_us;
} PtfFrameTimeSpec;

typedef struct PtfFrame PtfFrame;

/* changelog_input: rows may have other kinds than +I */
extern PtfFrame *frame_create(PtfOperator *op, TupleDesc rowdesc,
							  const PtfFrameTimeSpec *time, bool changelog_input,
							  PtfOperatorFactory factory, void *factory_arg);

/* the watermark carried over from the previous call of a uid */
extern void frame_restore_watermark(PtfFrame *frame, PtfTime max_event_time,
									PtfTime watermark);

/* one input row; the callback of every input adapter */
extern void frame_push(void *frame, RowKind kind, TupleTableSlot *row);
extern void frame_push_meta(void *frame, RowKind kind, TupleTableSlot *row,
							const PtfRowMeta *meta);

/* while a row is processed: the row the operator was given, and its origin */
extern TupleTableSlot *frame_current_row(PtfFrame *frame);
extern const PtfRowMeta *frame_current_meta(PtfFrame *frame);

/*
 * End of this call's input.  A bounded input (no uid) ends the stream: the
 * watermark jumps to +infinity and spilled partitions are replayed.
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
	PtfTime		max_event_time;
	PtfTime		watermark;
} PtfFrameStats;

extern void frame_stats(PtfFrame *frame, PtfFrameStats *stats);
extern PtfTime frame_processing_time(PtfFrame *frame);

/* time values of columns: timestamp, timestamptz, or bigint epoch ms */
extern bool ptf_is_time_type(Oid typid);
extern PtfTime ptf_time_from_datum(Datum d, Oid typid);
extern Datum ptf_time_to_datum(PtfTime t, Oid typid);
extern int64 ptf_interval_to_us(Datum interval, const char *argname);

#endif							/* PTF_FRAME_H */
