/*-------------------------------------------------------------------------
 *
 * aggs_internal.h
 *	  The compiled aggregates of a window operator (aggs.c), shared with
 *	  the file that writes and reads their states in durable state
 *	  (aggs_stored.c).  Nobody else includes it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_AGGS_INTERNAL_H
#define PTF_AGGS_INTERNAL_H

#include "executor/nodeAgg.h"
#include "nodes/execnodes.h"

#include "operators/aggs.h"

typedef enum AggMode
{
	AGG_SLICED,
	AGG_REPLAY,
	AGG_MOVING
} AggMode;

/* One support function, called as nodeAgg calls it. */
/*
 * Support functions of the commonest aggregates (count, sum and min/max of
 * integers), run inline: a window combines each of its slices' states, a
 * dozen calls per HOP window and aggregate, where the call through fmgr
 * costs more than the addition.  Same results and errors as the C
 * functions they stand for.
 */
typedef enum AggFastFn
{
	AGG_FAST_NONE,
	AGG_FAST_INT8INC,			/* count(*), count(x): state + 1 */
	AGG_FAST_INT8PL,			/* combine of count and sum(int2/int4) */
	AGG_FAST_INT4_SUM,			/* sum(int4): int8 state, not strict */
	AGG_FAST_INT2_SUM,
	AGG_FAST_INT4_LARGER,
	AGG_FAST_INT4_SMALLER,
	AGG_FAST_INT8_LARGER,
	AGG_FAST_INT8_SMALLER
} AggFastFn;

typedef struct AggFn
{
	Oid			oid;
	FmgrInfo	flinfo;
	FunctionCallInfo fcinfo;	/* nargs + state */
	int			nargs;			/* without the state */
	AggFastFn	fast;
} AggFn;

typedef struct AggDef
{
	Aggref	   *aggref;
	AggMode		mode;
	Oid			collation;
	AggStatePerTransData pertrans;	/* what AggGetAggref and friends read */

	/* the state the mode uses: plain, or moving */
	Oid			transtype;
	int16		translen;
	bool		transbyval;
	bool		final_read_only;	/* the final function leaves the state be */
	Datum		initval;
	bool		initnull;
	AggFn		transfn;
	AggFn		invtransfn;		/* MOVING */
	AggFn		combinefn;		/* SLICED, when windows have several slices */
	AggFn		finalfn;		/* oid InvalidOid: the state is the result */
	int			nfinalargs;
	AggFn		serialfn;		/* internal states of uids */
	AggFn		deserialfn;

	/* inputs: columns of the inputs row */
	int			ntransinputs;	/* passed to the transition function */
	int			ninputs;		/* with ORDER BY-only columns */
	int			first_input;	/* 0-based column of its first input */
	int			filter_col;		/* -1: no FILTER */
	bool		ordered;		/* DISTINCT or ORDER BY: sorted at firing */
	bool		distinct;
	int			nsort;
	AttrNumber *sort_cols;		/* within its inputs */
	Oid		   *sort_ops;
	Oid		   *sort_colls;
	bool	   *sort_nulls_first;
	Oid		   *eq_ops;
	TupleDesc	sortdesc;		/* its inputs alone */
	ExprState  *eq_state;		/* DISTINCT: are two sorted rows equal */

	int			slot;			/* its index among SLICED or MOVING states */
	Oid			resulttype;
	int16		resultlen;
	bool		resultbyval;
} AggDef;

/* Where a state kept by reference lies, for aggs_prefetch_sliced() */
typedef struct AggStateLines
{
	int			slot;			/* its AggAcc in a slice's accs */
	int			follow;			/* > 0: the line this far on holds more of it */
} AggStateLines;

struct AggSet
{
	MemoryContext cxt;
	int			time_col;		/* keep_rows: the inputs row's time column, or -1 */
	int			identity_col;	/* retractions: the input row's hash column, or -1 */
	EState	   *estate;
	AggState   *aggstate;		/* the context support functions see */
	ExprContext *rowcxt;		/* inputs of a row; reset per row */

	int			naggs;
	AggDef	   *aggs;
	AggDef	  **sliced_fast;	/* the SLICED ones, when all are call_fast's */
	int			nsliced;
	AggStateLines *sliced_byref;	/* SLICED states kept by reference */
	int			nsliced_byref;
	int			nmoving;
	bool		one_slice;		/* AggSetSpec's */
	bool		keeps_rows;
	bool		changelog;

	/* inputs */
	ProjectionInfo *inputs_proj;	/* NULL: no inputs at all (count(*)) */
	/* every input a column of the row (or a constant): copied, not projected */
	AttrNumber *input_attnos;	/* per inputs column; 0: its constant */
	int			input_maxattno; /* the last column read */
	TupleDesc	inputs_desc;
	TupleTableSlot *inputs_slot;
	TupleTableSlot *replay_slot;	/* a kept inputs row */

	/* outputs */
	int			nkeys;
	AttrNumber *key_attnos;
	int			noutputs;
	char	  **output_names;
	Oid		   *output_types;
	int32	   *output_typmods;
	ExprState **output_exprs;
	AttrNumber *output_outer;	/* per output, the outer column it is; 0: an expression */
	TupleDesc	outer_desc;		/* keys, then aggregate results */
	TupleTableSlot *outer_slot;
	ExprContext *outcxt;

	/* the window being fired */
	AggMemory  *win_mem;
	AggAcc	   *win_accs;		/* one per aggregate */
	bool	   *win_started;	/* its state holds a slice, or its initial value */
	bool		win_moving_given;
	List	   *win_rows;		/* AggRows * of its slices */
};

#endif							/* PTF_AGGS_INTERNAL_H */
