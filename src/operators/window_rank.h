/*-------------------------------------------------------------------------
 *
 * window_rank.h
 *	  Window Top-N: the first N rows of every window (and key) in an
 *	  order, emitted once, when the window fires (window_rank.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_WINDOW_RANK_H
#define PTF_WINDOW_RANK_H

#include "operators/operator.h"
#include "operators/window.h"

/* What a column of an output row holds. */
typedef enum RankColumn
{
	RCOL_NULL = 0,				/* nothing: NULL */
	RCOL_DATA,					/* the input row, as a value of its row type */
	RCOL_START,
	RCOL_END,
	RCOL_TIME,					/* end - 1 ms */
	RCOL_ROWNUM,				/* 1 .. N within the window and key (bigint) */
	RCOL_COLUMN					/* a column of the input row (out_attnos) */
} RankColumn;

typedef struct WindowRankOptions
{
	WindowSpec	spec;
	bool		global;			/* no windows: one per key, closed at the end
								 * of a bounded input (row_number() per key) */
	Oid			time_type;		/* of on_time */
	TupleDesc	rowdesc;		/* the input's row type */
	KeySpec    *keys;			/* partition columns besides the window */
	int64		limit;			/* N: rows 1 .. N of each window and key */

	/* the order: columns of the input row, each with its sort operator */
	int			nsort;
	AttrNumber *sort_attnos;
	Oid		   *sort_ops;		/* "<" or ">" of a btree opfamily */
	Oid		   *sort_colls;
	bool	   *sort_nulls_first;

	TupleDesc	outdesc;
	RankColumn *out_cols;		/* per column of outdesc */
	AttrNumber *out_attnos;		/* RCOL_COLUMN: which column of the input */
} WindowRankOptions;

/* what durable state holds: per key and window, its first N rows */
extern const StateLayout window_rank_layout;
#define WINDOW_RANK_NSPACES 1

extern PtfOperator *window_rank_create(const WindowRankOptions *opts, const PtfOperatorEnv *env);

/* rows of a change stream passed over: updates and deletes, no usable time */
extern uint64 window_rank_skipped(PtfOperator *op);

#endif							/* PTF_WINDOW_RANK_H */
