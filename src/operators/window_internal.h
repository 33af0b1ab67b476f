/*-------------------------------------------------------------------------
 *
 * window_internal.h
 *	  What the window operators share: window arithmetic (window_math.c)
 *	  and the window aggregate's state, used by window_agg.c and
 *	  window_session.c.  Only those files include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_WINDOW_INTERNAL_H
#define PTF_WINDOW_INTERNAL_H

#include "operators/window.h"

#include "base/ptf_time.h"
#include "operators/window.h"

#define MS	1000				/* window_time = end - 1 ms */

/* the epoch windows align to: 1970-01-01, in PtfTime */
#define UNIX_EPOCH_PTF \
	((int64) (UNIX_EPOCH_JDATE - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY)

enum
{
	SPACE_SLICES = 0,
	SPACE_WINDOWS = 1,			/* updating input: MOVING states per window */
	SPACE_SESSIONS = 2
};

#define TIMER_WINDOW	1
#define TIMER_SESSION	2

/* per key */
typedef struct KeyHot
{
	PtfTime		next_fire;		/* PTF_TIME_MIN: none */
} KeyHot;

typedef struct KeyCold
{
	PtfTime		prev_end;		/* emit_only_on_update: the last window emitted */
	bytea	   *prev_values;	/* its output values */
} KeyCold;

typedef struct SliceValue
{
	int64		nrows;			/* rows in it, retractions taken out */
	AggMemory  *mem;			/* its slice end's */
	AggRows		rows;			/* inputs of REPLAY and MOVING aggregates */
	AggAcc		accs[FLEXIBLE_ARRAY_MEMBER];	/* SLICED states */
} SliceValue;

typedef struct WindowValue
{
	int64		nrows;
	AggMemory  *mem;			/* its window end's */
	bool		failed;			/* an inverse failed: recompute from the slices */
	AggAcc		accs[FLEXIBLE_ARRAY_MEMBER];	/* MOVING states */
} WindowValue;

typedef struct SessionValue
{
	PtfTime		end;
	PtfTime		timer_end;		/* the end its timer was registered for */
	int64		nrows;
	AggMemory  *mem;			/* its own */
	AggRows		rows;
	AggAcc		accs[FLEXIBLE_ARRAY_MEMBER];
} SessionValue;

/* Memory shared by every key's states of one slice end (or window end). */
typedef struct SharedMemory
{
	int			space;
	int64		ns;
	int64		refs;
	AggMemory  *mem;
} SharedMemory;

typedef struct WinAggOp
{
	PtfOperator base;
	WindowSpec	spec;
	Oid			time_type;
	bool		gap_warned;		/* a bound in a daylight-saving gap was warned of */
	bool		changelog;
	bool		emit_only_on_update;
	bool		cumulate_merge; /* CUMULATE: slices merge into the first one */
	AggSet	   *aggs;
	bool		needs_memory;	/* states or rows take memory of their own */
	KeySpec    *keys;

	/* shared memories, sorted by (space, ns) */
	SharedMemory *shared;
	int			nshared;
	int			maxshared;

	/* output */
	TupleDesc	outdesc;
	TupleTableSlot *out;
	WindowColumn *out_window;
	int		   *out_agg;
	int		   *out_key;
	Oid		   *out_types;
	int32	   *out_typmods;	/* the target's, or -1 */
	FmgrInfo   *out_coerce;		/* to the typmod, as an INSERT would (fn_oid 0: none) */
	Datum	   *values;			/* the aggregates' outputs */
	bool	   *nulls;
	Datum	   *keyvals;
	bool	   *keynulls;
	AggMemory  *firemem;		/* one window's results; reset after each */
	TupleDesc	values_desc;	/* the outputs as a row (emit_only_on_update) */
	bool		armed;			/* loaded keys have their timers */
	bool		live;			/* in a call: between on_start and on_finish */
	PtfTime		watermark;		/* the call's, while live */

	/*
	 * HOP at the end of a bounded input, where a key's windows fire one
	 * after the other: each window made from the one before by the slices
	 * that enter and leave (aggs.h), when the aggregates allow it.  The
	 * slide holds the key's slices in (slide_start, slide_end].
	 */
	AggSlide   *slide;			/* NULL: combined slice by slice */
	bool		slide_valid;
	PtfTime		slide_start;
	PtfTime		slide_end;
	int64		slide_nrows;

	uint64		skipped;

	/* a parallel call's (window_partial.c) */
	bool		partial;		/* a worker's: partial rows at the end, no firing */
	int			partial_input;	/* the leader's: input of partial rows, or -1 */
	TupleTableSlot *partial_slot;
	AggAcc	   *scratch_accs;	/* a partial row's states, before they are combined */
	AggMemory  *scratch_mem;
} WinAggOp;

/* window_agg.c, for window_partial.c */
extern SliceValue *winagg_slice_get(WinAggOp *wa, StateRecord *rec, PtfTime end);
extern void winagg_schedule_slice(WinAggOp *wa, StateRecord *rec, KeyHot *hot, PtfTime s,
								  PtfTime watermark);

/* window_partial.c */
extern void winagg_emit_partials(WinAggOp *wa);
extern PtfRowResult winagg_merge_partial(WinAggOp *wa, TupleTableSlot *row,
										 const PtfRowContext *ctx);


/* window_math.c: the windows and slices of a time (see there) */
extern bool window_aligned_start(PtfTime t, int64 period, int64 offset, PtfTime *start);
extern bool window_slice_end(const WindowSpec *w, PtfTime t, PtfTime *end);
extern PtfTime window_first_end(const WindowSpec *w, PtfTime slice_end);
extern PtfTime window_last_end(const WindowSpec *w, PtfTime slice_end);
extern PtfTime window_start_of(const WindowSpec *w, PtfTime end);
extern PtfTime window_next_end(const WindowSpec *w, PtfTime e);

/* Would a window ending at end have fired under watermark? */
static inline bool
window_fired(PtfTime end, PtfTime watermark)
{
	return end - MS <= watermark;
}

/* window_agg.c: what sessions share with the aligned windows */
extern void winagg_key_values(WinAggOp *wa, StateRecord *rec);
extern void winagg_emit_window(WinAggOp *wa, StateRecord *rec, PtfTime start, PtfTime end);
extern void winagg_key_remove(WinAggOp *wa, StateRecord *rec);

/* window_session.c */
extern PtfRowResult winagg_session_on_row(WinAggOp *wa, RowKind kind, TupleTableSlot *row,
								  const PtfRowContext *ctx);
extern void winagg_fire_session(WinAggOp *wa, StateRecord *rec, const PtfTimer *t);

#endif							/* PTF_WINDOW_INTERNAL_H */
