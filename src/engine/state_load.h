/*-------------------------------------------------------------------------
 *
 * state_load.h
 *	  How much of a uid's durable state a call reads, and when: all of it
 *	  up front, or only the keys its rows touch (see state_load.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_STATE_LOAD_H
#define PTF_STATE_LOAD_H

#include "frame.h"
#include "input/input.h"
#include "operators/operator.h"
#include "state/durable.h"

typedef struct PtfStateLoad PtfStateLoad;

/* what ptf.last_call_stats() shows of it */
typedef struct PtfStateLoadStats
{
	const char *how;			/* "full", "probe", "probe, then full", "kept" */
	uint64		keys_probed;
	uint64		keys_loaded;
	uint64		keys_evicted;
} PtfStateLoadStats;

extern void ptf_state_load_init(void);	/* GUCs, from _PG_init */

/*
 * Read op's state for this call: op is fresh (empty) or kept from a
 * pipeline's last step (complete: it holds every key).  Either loads the
 * state whole now, or returns a load that ptf_state_load_start attaches to
 * the frame, to read keys as rows come.  probe_ok: the function's operator
 * may be read a key at a time (no processing-time timers; event-time
 * timers only through the layout's timer_field).  max_new_keys: the most
 * keys the call can add (its stream's row limit; 0: not known) -- a kept
 * state the call could grow past ptf.state_memory_limit evicts first.
 * rows_from: the call's one input, whose rows the planner's estimate may
 * make reading the state whole the cheaper way (NULL: not known).
 */
extern PtfStateLoad *ptf_state_load_begin(DurableState *ds, PtfOperator *op,
										  bool kept, bool complete, bool probe_ok,
										  KeySpec **input_keys, int ninputs,
										  uint64 max_new_keys, PtfSqlInput *rows_from);
extern void ptf_state_load_start(PtfStateLoad *sl, PtfFrame *frame);

/* After the state was stored: evict past the limit; false: still past it */
extern bool ptf_state_load_bound(PtfStateLoad *sl);

/* Read every key not in memory yet; the frame stops loading */
extern void ptf_state_load_all(PtfStateLoad *sl);

/* The earliest stored timer of keys memory may not hold (PTF_TIME_MAX: none) */
extern PtfTime ptf_state_load_next_timer(PtfStateLoad *sl);

/* Does memory hold every key of the uid now? */
extern bool ptf_state_load_complete(PtfStateLoad *sl);
extern void ptf_state_load_stats(PtfStateLoad *sl, PtfStateLoadStats *stats);

/* ptf.state_memory_limit in bytes: what a pipeline keeps between steps */
extern Size ptf_state_memory_limit(void);

#endif							/* PTF_STATE_LOAD_H */
