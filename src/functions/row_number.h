/*-------------------------------------------------------------------------
 *
 * row_number.h
 *	  row_number() per key over a table, filtered to the first N, as the
 *	  planner plans it (planner/first_rows_rule.c): keep-first by event
 *	  time, or the first N rows per key in an order (row_number.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_ROW_NUMBER_H
#define PTF_FUNCTIONS_ROW_NUMBER_H

#include "nodes/pg_list.h"
#include "utils/tuplestore.h"

#include "operators/window_rank.h"

typedef struct PtfPlannedFirstRows
{
	Oid			rowtype;		/* the table's row type: rows are read from it */
	int			nkeys;			/* PARTITION BY: columns of the table */
	AttrNumber *key_attnos;
	List	   *filter;			/* the WHERE, over the row (Vars of varno 1) */

	/*
	 * keep_first: the first row per key by time_attno, ascending, as
	 * ptf.deduplicate_keep_first(on_time) keeps it (N = 1, a time column
	 * that cannot be NULL); else the first rank.limit rows per key in the
	 * order of rank.sort_*.
	 */
	bool		keep_first;
	AttrNumber	time_attno;
	WindowRankOptions rank;

	/* output: per column of outdesc, the table's column (attno), or 0: row_number */
	TupleDesc	outdesc;
	AttrNumber *out_attnos;
	Tuplestorestate *store;
	uint64		rows;
	const char *describe;		/* for last_call_stats */
} PtfPlannedFirstRows;

extern void ptf_first_rows_run_planned(PtfPlannedFirstRows *p);

#endif							/* PTF_FUNCTIONS_ROW_NUMBER_H */
