/*-------------------------------------------------------------------------
 *
 * input.h
 *	  Input adapters: where an operator's rows come from.
 *
 * Every adapter hands rows to a PtfRowSink (base/base.h) as (kind, slot,
 * origin), the slot in the layout of the input row type.  Relation and query inputs run through
 * the executor (SPI with a DestReceiver of ours), so privileges and
 * row-level security hold exactly as for the same SELECT, and rows stream
 * into the operator without being materialized.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_INPUT_H
#define PTF_INPUT_H

#include "access/tupconvert.h"
#include "executor/spi.h"
#include "executor/tuptable.h"

#include "base/base.h"

/* an input argument (NULL::tbl): its row type, and its relation if it has one */
typedef struct PtfInputArg
{
	Oid			rowtype;
	TupleDesc	rowdesc;
	Oid			relid;			/* the relation of the row type, if any */
	bool		readable;		/* relid is a relation one can SELECT from */
} PtfInputArg;

typedef struct PtfSqlInput
{
	/* what to read: a relation, or a query returning its row type */
	Oid			relid;
	const char *query;
	TupleDesc	rowdesc;
	/* the query's parameters: their types, and values for each run */
	int			nparams;
	Oid		   *paramtypes;
	ParamListInfo params;

	/*
	 * A changelog's TRUNCATE rows (to_changelog's row for a truncation of
	 * its table, data NULL) are handed on as ROWKIND_TRUNCATE, with an
	 * empty row; else such a row is an error, as any unknown kind.
	 */
	bool		truncations;

	/* filled by sql_input_prepare() */
	SPIPlanPtr	plan;
	bool		changelog;		/* the query returns (kind, data) */
	TupleConversionMap *map;	/* result columns -> row type, if needed */

	/* a relation read by block ranges: its started scan (sql_input_ranges_*) */
	struct PtfSqlRanges *ranges;
} PtfSqlInput;

/*
 * Plan the input and check its shape, before any row is read.  SPI must be
 * connected.  Errors: a query whose result is neither the row type nor
 * (kind text, data rowtype).
 */
extern void sql_input_prepare(PtfSqlInput *in);

/*
 * How many distinct values the planner's statistics expect in a column of
 * a relation (pg_statistic's stadistinct and pg_class's reltuples), 0 when
 * they do not say: a size for state, never a promise.
 */
extern uint64 sql_input_estimate_distinct(Oid relid, AttrNumber attno);

/*
 * The least and greatest value the statistics saw in an integer column
 * (int2, int4, int8), false when they do not say; values outside may exist.
 */
extern bool sql_input_estimate_range(Oid relid, AttrNumber attno, int64 *lo, int64 *hi);

/* The rows the planner expects a prepared input to return; 0 when unknown. */
extern double sql_input_estimate_rows(PtfSqlInput *in);

/* Run it, handing every row to sink. */
extern void sql_input_run(PtfSqlInput *in, PtfRowSink sink, void *arg);

/* The same, reading in the active snapshot (a stream's initial snapshot) */
extern void sql_input_run_in_active_snapshot(PtfSqlInput *in, PtfRowSink sink, void *arg);

/*
 * A relation input read by ranges of blocks (a parallel call's chunks), as
 * a sequential scan reads them.  sql_input_reads_by_ranges: is the prepared
 * relation input (no query, no parameters) planned as a sequential scan of
 * its relation, row-level security quals included?  If so, begin starts it
 * once in the active snapshot (the executor checks privileges as for any
 * SELECT), each run reads blocks [start, start + nblocks) of it in block
 * order (nblocks past the end: to the end), and end finishes it.  A
 * participant begins after the snapshot it reads in is active, and ends
 * before that snapshot goes.
 */
extern bool sql_input_reads_by_ranges(PtfSqlInput *in);
extern void sql_input_ranges_begin(PtfSqlInput *in);
extern void sql_input_ranges_run(PtfSqlInput *in, BlockNumber start, BlockNumber nblocks,
								 PtfRowSink sink, void *arg);
extern void sql_input_ranges_end(PtfSqlInput *in);

/*
 * A composite datum (a row of the slot's type) stored in a heap-tuple slot
 * without copying; buf holds the tuple header and must live as long as
 * the slot refers to it.
 */
extern void ptf_slot_store_composite(TupleTableSlot *slot, Datum composite,
									 HeapTupleData *buf);

#endif							/* PTF_INPUT_H */
