/*-------------------------------------------------------------------------
 *
 * handoff.h
 *	  Inside the Citus room: a moved shard group's pipeline taking up its
 *	  state on the new node (handoff.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CITUS_HANDOFF_H
#define PTF_CITUS_HANDOFF_H

#include "citus/citus.h"
#include "citus/meta.h"
#include "citus/shard.h"

/* the fence of an incoming pipeline: wait, start from the move's end, or go */
extern PtfStepFence handoff_activate(const ShardPipeline *sp, const DistPipeline *d);

#endif							/* PTF_CITUS_HANDOFF_H */
