/*-------------------------------------------------------------------------
 *
 * renames.h
 *	  Pipelines' queries follow renames (renames.c), from the utility hook
 *	  (commands/drops.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_RENAMES_H
#define PTF_RENAMES_H

#include "nodes/nodes.h"

/*
 * Before a statement runs: for one that renames or moves objects, the
 * pipelines' queries analyzed (NULL when there is nothing to follow);
 * after it ran: each printed again, and stored when its text changed.
 */
extern void *ptf_renames_before(Node *stmt);
extern void ptf_renames_after(void *state);

#endif							/* PTF_RENAMES_H */
