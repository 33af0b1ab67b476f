/*-------------------------------------------------------------------------
 *
 * output.h
 *	  Where a call's rows go when it is a set-returning function: a
 *	  materialized result, with the check that no row leaves with values
 *	  the WAL did not carry; and what the last call did, for
 *	  ptf.last_call_stats().
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_ENGINE_OUTPUT_H
#define PTF_ENGINE_OUTPUT_H

#include "fmgr.h"
#include "utils/tuplestore.h"

#include "frame.h"

/* materialized SRF output and the emit callback that fills it */
typedef struct PtfOutput
{
	Tuplestorestate *store;
	TupleDesc	desc;
	uint64		rows;
	PtfFrame   *frame;			/* set once running: refuses incomplete rows */
	/* ptf_output_put_values: a row formed here, then copied into the store */
	MinimalTuple buf;
	Size		bufsize;
	TupleTableSlot *slot;
	/* is desc a change stream's row (see put_change_row), and its varlenas' layout */
	enum
	{
		OUT_SHAPE_UNKNOWN,
		OUT_SHAPE_CHANGE,
		OUT_SHAPE_OTHER
	}			shape;
	bool		change_pack[2];
	char		change_align[2];	/* attalign */
	/* rows of byval_desc, every column by value: where each goes (-1: not so) */
	TupleDesc	byval_desc;
	int			byval_len;		/* the data's length, or -1 */
	int16	   *byval_off;
} PtfOutput;

extern void ptf_output_init(FunctionCallInfo fcinfo, PtfOutput *out);
extern void ptf_check_row_complete(PtfFrame *frame, TupleTableSlot *row);
extern void ptf_check_meta_complete(const PtfRowMeta *meta);
extern void ptf_output_emit_row(void *arg, RowKind kind, TupleTableSlot *row);
extern void ptf_output_put_values(PtfOutput *out, Datum *values, bool *nulls);
extern void ptf_output_end(PtfOutput *out);

/* what the last call of this backend did: ptf.last_call_stats() */
typedef struct PtfCallStats
{
	const char *function;
	PtfFrameStats frame;
	uint64		rows_out;
	const char *state_load;		/* NULL: no uid */
	uint64		keys_probed;
	uint64		keys_loaded;
	uint64		keys_evicted;
	int			workers_planned;	/* parallel workers (engine/parallel.c) */
	int			workers_launched;
	Oid			user;			/* the role it ran as: shown to it alone */
} PtfCallStats;

extern void ptf_record_call_stats(const char *function, PtfFrame *frame,
								  uint64 rows_out);
extern void ptf_record_more_state(Size bytes);
extern const PtfCallStats *ptf_get_last_call_stats(void);

/*
 * A parallel call (after ptf_record_call_stats): its workers, and its rows
 * read counted as the serial call counts them -- the workers' rows of the
 * split input added, the rows they passed to the leader's frame taken off.
 */
extern void ptf_record_parallel_stats(int planned, int launched, uint64 worker_rows,
									  uint64 rows_from_workers);
extern void ptf_record_workers_state(const PtfFrameStats *workers);

/* how the last call read its uid's state (after ptf_record_call_stats) */
struct PtfStateLoad;
extern void ptf_record_state_load_stats(struct PtfStateLoad *load);

#endif							/* PTF_ENGINE_OUTPUT_H */
