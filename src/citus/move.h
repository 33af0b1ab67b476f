/*-------------------------------------------------------------------------
 *
 * move.h
 *	  Inside the Citus room: the planner hook that puts our functions in
 *	  place of Citus's shard operations (move.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CITUS_MOVE_H
#define PTF_CITUS_MOVE_H

extern void citus_move_init(void);

#endif							/* PTF_CITUS_MOVE_H */
