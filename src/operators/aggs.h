/*-------------------------------------------------------------------------
 *
 * aggs.h
 *	  PostgreSQL aggregates run by an operator, outside nodeAgg: any
 *	  aggregate, built-in or user-defined, with DISTINCT, ORDER BY and
 *	  FILTER, its states kept per slice or window and combined, retracted,
 *	  serialized and finalized as nodeAgg would.
 *
 * An AggSet is compiled from an analyzed select list (functions/ parses
 * and analyzes it as "SELECT list FROM <input row type> GROUP BY keys").
 * Each aggregate gets a mode:
 *
 *	  SLICED	a transition state per slice, windows made by combining
 *				slices with the aggregate's combine function (nodeAgg's
 *				partial aggregation); a window of one slice (TUMBLE) needs no
 *				combine function.
 *	  REPLAY	the slice keeps the aggregate's evaluated inputs, and the
 *				window's rows are fed to a fresh state when it fires: for
 *				aggregates without a combine function, DISTINCT and ORDER BY
 *				inputs (sorted and de-duplicated then), internal states
 *				a uid cannot serialize, and, with updating input, those
 *				without an inverse (a retraction takes its row out of the
 *				kept inputs) -- every aggregate of a session over updating
 *				input (keep_rows: its rows, with their times, regroup it).
 *	  MOVING	updating input: a moving-aggregate state per window
 *				(aggmtransfn / aggminvtransfn / aggmfinalfn), retractions
 *				applied with the inverse; the slice keeps the net inputs too,
 *				so that a window whose inverse fails (returns NULL) is
 *				computed again from them.
 *
 * Support functions are called with an AggState as their context (the
 * fields nodeAgg's API reads: curaggcontext, tmpcontext, curpertrans), so
 * AggCheckCallContext(), AggGetAggref() and friends work, and with their
 * fn_expr set for polymorphic ones.  Every state lives in the memory
 * context of its lifetime unit (an AggMemory: a slice end shared by all
 * keys, a window, a session), which is deleted when the unit ends:
 * internal states cannot be freed otherwise.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_AGGS_H
#define PTF_AGGS_H

#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "nodes/pg_list.h"

/* One aggregate's state. */
typedef struct AggAcc
{
	Datum		value;
	bool		isnull;
	bool		notrans;		/* no input yet, and no initial value */
	int32		ninputs;		/* MOVING: inputs in it (nodeWindowAgg's transValueCount) */
} AggAcc;

/* Evaluated inputs of the REPLAY (and MOVING) aggregates, one row per input row. */
typedef struct AggRows
{
	int32		n;
	int32		cap;
	MinimalTuple *rows;
} AggRows;

/* Where states of one lifetime unit live; ExprContext for AggCheckCallContext. */
typedef struct AggMemory
{
	MemoryContext cxt;
	ExprContext econtext;		/* ecxt_per_tuple_memory = cxt */
} AggMemory;

typedef struct AggSetSpec
{
	List	   *targetlist;		/* analyzed and planned select list */
	TupleDesc	rowdesc;		/* input rows: Vars of varno 1 */
	int			nkeys;			/* grouping columns of the input */
	AttrNumber *key_attnos;
	bool		combine;		/* windows are made of several slices */
	bool		one_slice;		/* every window is one slice (TUMBLE) */
	bool		changelog;		/* rows may be retractions */
	bool		durable;		/* states are stored (a uid) */
	bool		keep_rows;		/* every aggregate REPLAY: windows that may
								 * split (sessions over retractions) */
	AttrNumber	time_attno;		/* keep_rows: the event time column, kept
								 * as the inputs row's last column */
} AggSetSpec;

typedef struct AggSet AggSet;

/*
 * Compile the select list: resolve every aggregate, check what the modes
 * need (errors before any row is read), build the input projection and
 * the output expressions.  Everything lives in cxt.
 */
extern AggSet *aggs_create(const AggSetSpec *spec, MemoryContext cxt);

/* sizes and shapes */
extern int	aggs_nsliced(AggSet *set);	/* AggAcc per slice */
extern bool aggs_sliced_byref(AggSet *set);
extern void aggs_prefetch_sliced(AggSet *set, const AggAcc *accs);
extern int	aggs_nmoving(AggSet *set);	/* AggAcc per window (MOVING) */

/* keep_rows: the event time column of a kept row */
extern Datum aggs_kept_row_time(AggSet *set, MinimalTuple row);
extern bool aggs_keeps_rows(AggSet *set);	/* slices keep AggRows */
/* every aggregate SLICED: a slice is its states alone (parallel calls combine them) */
extern bool aggs_all_sliced(AggSet *set);
extern int	aggs_noutputs(AggSet *set);
extern const char *aggs_output_name(AggSet *set, int i);
extern Oid	aggs_output_type(AggSet *set, int i);
extern int32 aggs_output_typmod(AggSet *set, int i);

/* the last column of the input row the inputs read; 0 if not known */
extern AttrNumber aggs_inputs_upto(AggSet *set);

/* states need an AggMemory (else every mem argument may be NULL; not for uids) */
extern bool aggs_need_memory(AggSet *set);

/* lifetime units */
extern AggMemory *aggs_memory_create(MemoryContext parent);
extern void aggs_memory_delete(AggMemory *mem);

/* ---- per input row ---- */

/* Evaluate the aggregates' inputs of row (valid until the next call). */
extern void aggs_eval(AggSet *set, TupleTableSlot *row);

/* A fresh slice's SLICED states (accs[aggs_nsliced]) and a window's MOVING ones. */
extern void aggs_init_sliced(AggSet *set, AggAcc *accs, AggMemory *mem);
extern void aggs_init_moving(AggSet *set, AggAcc *accs, AggMemory *mem);

/* The evaluated row into SLICED states. */
extern void aggs_advance_sliced(AggSet *set, AggAcc *accs, AggMemory *mem);

/* The evaluated row into MOVING states: added (+1) or retracted (-1); false if an inverse failed. */
extern bool aggs_advance_moving(AggSet *set, AggAcc *accs, AggMemory *mem, int weight);

/*
 * The evaluated row kept (weight +1) or taken out of rows (-1, the last
 * equal row); false when a retracted row was not there.
 */
extern bool aggs_rows_apply(AggSet *set, AggRows *rows, AggMemory *mem, int weight);
/* a copy of a kept row (of the inputs row's layout) into rows of mem */
extern void aggs_rows_add(AggSet *set, AggRows *rows, AggMemory *mem, MinimalTuple row);

/* Merge (sessions): other's SLICED states combined into accs, its rows added to rows. */
extern void aggs_merge_into(AggSet *set, AggAcc *accs, AggRows *rows, AggMemory *mem,
							const AggAcc *other_accs, const AggRows *other_rows);

/* ---- firing a window ---- */

/* Start a window's result in mem (a scratch unit, reset by the caller). */
extern void aggs_window_begin(AggSet *set, AggMemory *mem);

/* Add a slice: SLICED states combined (or taken as they are, the only slice), rows kept. */
extern void aggs_window_add_slice(AggSet *set, const AggAcc *accs, const AggRows *rows);

/*
 * A sliding sum of slices.  When every aggregate is SLICED with int8pl as
 * its combine function (count, and sum of int2 and int4), a window's
 * states are the sums of its slices' states, and the next HOP window is
 * made from this one by adding the slices that enter and taking away those
 * that leave: a couple of slices per window instead of size / slide.  The
 * slide holds, per aggregate, the sum of the states of the slices in it and
 * how many of those have a state.
 */
typedef struct AggSlide
{
	int64	   *sums;
	int32	   *nstates;
} AggSlide;

extern bool aggs_can_slide(AggSet *set);
extern AggSlide *aggs_slide_create(AggSet *set, MemoryContext cxt);
extern void aggs_slide_clear(AggSet *set, AggSlide *slide);

/* A slice's states added to the slide (or taken away); false on overflow. */
extern bool aggs_slide_add(AggSet *set, AggSlide *slide, const AggAcc *accs, bool take_away);

/* The slide as the window's states, in place of aggs_window_add_slice; false on overflow. */
extern bool aggs_window_from_slide(AggSet *set, const AggSlide *slide);

#ifdef USE_ASSERT_CHECKING
/* Does the window combined slice by slice equal what the slide would give? */
extern bool aggs_window_equals_slide(AggSet *set, const AggSlide *slide);
#endif

/* MOVING states of the window, or recomputed from the rows added when NULL */
extern void aggs_window_set_moving(AggSet *set, const AggAcc *maccs);

/*
 * Final values of the window's aggregates, then its output columns
 * (keys are the key columns' values); values live in the window's memory.
 */
extern void aggs_window_finish(AggSet *set, Datum *keys, bool *keynulls,
							   Datum *values, bool *nulls);

/* ---- durable states ---- */

/* SLICED states as bytes, and back into mem */
extern bytea *aggs_serialize_sliced(AggSet *set, const AggAcc *accs);
extern void aggs_deserialize_sliced(AggSet *set, bytea *b, AggAcc *accs, AggMemory *mem);

/* rows as bytes, and back into mem */
extern bytea *aggs_serialize_rows(AggSet *set, const AggRows *rows);
extern void aggs_deserialize_rows(AggSet *set, bytea *b, AggRows *rows, AggMemory *mem);

/* rows fed to MOVING states (a window's states recomputed, or loaded) */
extern void aggs_moving_add_rows(AggSet *set, AggAcc *maccs, AggMemory *mem,
								 const AggRows *rows);

#endif							/* PTF_AGGS_H */
