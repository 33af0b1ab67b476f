/*-------------------------------------------------------------------------
 *
 * operator.h
 *	  The contract between the frame and an operator.
 *
 * An operator is pure per-row logic.  It is fed (kind, row, event time,
 * processing time), what the row knows of its origin, and the current
 * watermark; it is told when the watermark
 * advances, keeps whatever it needs in a KeyedState, and emits rows
 * through a callback.  It knows nothing of SPI, tables, slots' origins or
 * where its output goes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_OPERATOR_H
#define PTF_OPERATOR_H

#include "access/htup.h"
#include "executor/tuptable.h"

#include "ptf.h"
#include "state/keyed_state.h"

/* Where an operator's output goes. */
typedef void (*PtfEmitFn) (void *arg, RowKind kind, TupleTableSlot *row);

typedef enum PtfRowResult
{
	PTF_ROW_DONE,				/* consumed (emitted, kept or dropped) */
	PTF_ROW_LATE,				/* dropped: event time below the watermark */
	PTF_ROW_SPILL				/* state is full: the frame must spill it */
} PtfRowResult;

/*
 * A record's value as durable state stores it: an optional row image and
 * its event time and arrival sequence.  The image is the row type itself.
 */
typedef struct PtfStoredValue
{
	bool		has_image;
	MinimalTuple image;
	bool		has_time;
	PtfTime		event_time;
	int64		seq;
} PtfStoredValue;

typedef struct PtfOperator PtfOperator;

typedef struct PtfOperatorMethods
{
	const char *name;
	PtfRowResult (*on_row) (PtfOperator *op, RowKind kind, TupleTableSlot *row,
							const PtfRowMeta *meta, PtfTime event_time,
							PtfTime proc_time, PtfTime watermark);
	void		(*on_watermark) (PtfOperator *op, PtfTime watermark,
								 PtfTime proc_time);
	void		(*save_value) (PtfOperator *op, StateRecord *rec,
							   PtfStoredValue *out);
	void		(*restore_value) (PtfOperator *op, StateRecord *rec,
								  const PtfStoredValue *in);
} PtfOperatorMethods;

struct PtfOperator
{
	const PtfOperatorMethods *methods;
	KeyedState *state;
	PtfEmitFn	emit;
	void	   *emit_arg;
	/* start fetching the state a row will need; NULL when it would not help */
	void		(*prefetch) (PtfOperator *op, TupleTableSlot *row);
};

static inline void
ptf_operator_emit(PtfOperator *op, RowKind kind, TupleTableSlot *row)
{
	op->emit(op->emit_arg, kind, row);
}

/* dedup.c: DEDUPLICATE_KEEP_FIRST */
typedef struct DedupOptions
{
	TupleDesc	rowdesc;
	bool		event_time;		/* on_time given */
	bool		live_timers;	/* the watermark may move before the end */
	bool		reset_ttl_on_duplicate;
} DedupOptions;

extern void dedup_value_sizes(const DedupOptions *opts, Size *hot, Size *cold);
extern PtfOperator *dedup_create(const DedupOptions *opts, KeyedState *state,
								 PtfEmitFn emit, void *emit_arg);

/* normalize.c: what the last image kept per key makes of a changelog */
typedef enum NormalizeMode
{
	NORMALIZE_PASSTHROUGH,		/* nothing kept: rows go on as they came */
	NORMALIZE_UPSERT,			/* upsert -> retract (Flink's ChangelogNormalize) */
	NORMALIZE_RETRACTIONS		/* -U/-D take the kept image (partial deletes) */
} NormalizeMode;

extern Size normalize_value_size(void);
extern PtfOperator *normalize_create(TupleDesc rowdesc, NormalizeMode mode,
									 KeyedState *state, PtfEmitFn emit,
									 void *emit_arg);
extern uint64 normalize_dropped(PtfOperator *op);
extern uint64 normalize_unchanged(PtfOperator *op);

#endif							/* PTF_OPERATOR_H */
