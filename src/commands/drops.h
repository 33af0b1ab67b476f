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

/* from _PG_init: the ProcessUtility hook for DROP ROLE and DROP DATABASE */
extern void ptf_drops_init(void);

#endif							/* PTF_FUNCTIONS_DROPS_H */
