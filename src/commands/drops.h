/*-------------------------------------------------------------------------
 *
 * drops.h
 *	  Slots and origins go with the role, extension or database they
 *	  belong to (drops.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_DROPS_H
#define PTF_FUNCTIONS_DROPS_H

#include "nodes/nodes.h"

/* from _PG_init: the ProcessUtility hook for DROP ROLE and DROP DATABASE */
extern void ptf_drops_init(void);

/*
 * Another room may refuse a utility statement before it runs (src/citus/:
 * distributed pipelines name their owner and tables by name).
 */
typedef void (*ptf_utility_check_hook_type) (Node *stmt);
extern ptf_utility_check_hook_type ptf_utility_check_hook;

#endif							/* PTF_FUNCTIONS_DROPS_H */
