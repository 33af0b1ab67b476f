/*-------------------------------------------------------------------------
 *
 * operator.c
 *	  What every operator shares: its making, and its memory, keys and
 *	  end -- by default those of an operator whose memory is its own context
 *	  and whose keys are one KeyedState.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "operators/operator.h"

PtfOperator *
ptf_operator_alloc(Size size, const PtfOperatorMethods *methods,
				   const PtfOperatorEnv *env)
{
	MemoryContext cxt = AllocSetContextCreate(env->cxt, "ptf operator",
											  ALLOCSET_DEFAULT_SIZES);
	PtfOperator *op;

	Assert(size >= sizeof(PtfOperator));
	MemoryContextSetIdentifier(cxt, methods->name);
	op = MemoryContextAllocZero(cxt, size);
	op->methods = methods;
	op->cxt = cxt;
	op->emit = env->emit;
	op->emit_arg = env->emit_arg;
	op->timers = timer_service_create(cxt);
	return op;
}

Size
ptf_operator_memory(PtfOperator *op)
{
	if (op->methods->memory != NULL)
		return op->methods->memory(op);
	return MemoryContextMemAllocated(op->cxt, true);
}

uint64
ptf_operator_keys(PtfOperator *op)
{
	if (op->methods->keys != NULL)
		return op->methods->keys(op);
	return op->state ? keyed_state_count(op->state) : 0;
}

void
ptf_operator_reclaim(PtfOperator *op, int min_removed)
{
	uint64		removed;

	if (op->state == NULL)
		return;
	removed = keyed_state_removed_count(op->state);
	/* forgetting timers walks them all: only for a good share of them */
	if (removed < (uint64) Max(min_removed, 1) ||
		removed * 4 < timer_count(op->timers, PTF_EVENT_TIME) +
		timer_count(op->timers, PTF_PROCESSING_TIME) ||
		!keyed_state_can_reclaim(op->state))
		return;
	timer_forget_removed(op->timers);
	keyed_state_reclaim(op->state);
}

static bool
release_key(StateRef *ref, void *arg)
{
	PtfOperator *op = (PtfOperator *) arg;

	return op->methods->evict(op, ref);
}

uint64
ptf_operator_evict(PtfOperator *op)
{
	uint64		n;

	if (op->state == NULL || op->methods->evict == NULL)
		return 0;
	n = keyed_state_evict(op->state, release_key, op);
	if (n > 0)
	{
		timer_forget_removed(op->timers);
		keyed_state_reclaim(op->state);
	}
	return n;
}

void
ptf_operator_destroy(PtfOperator *op)
{
	if (op->methods->destroy != NULL)
		op->methods->destroy(op);
	else
		MemoryContextDelete(op->cxt);
}
