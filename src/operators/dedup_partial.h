/*-------------------------------------------------------------------------
 *
 * dedup_partial.h
 *	  The workers' half of a parallel keep-first call (dedup_partial.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DEDUP_PARTIAL_H
#define PTF_DEDUP_PARTIAL_H

#include "operators/operator.h"

/*
 * event_time: pass on the rows that lower their key's least event time;
 * else each key's first row.  Bounded by env->mem_limit: once it is
 * spent, rows of keys not held are passed on, and never spill.
 */
extern PtfOperator *dedup_partial_create(KeySpec *keys, bool event_time,
										 const PtfOperatorEnv *env);

/* rows passed on because the budget was spent */
extern uint64 dedup_partial_overflow(PtfOperator *op);

#endif							/* PTF_DEDUP_PARTIAL_H */
