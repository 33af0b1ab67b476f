/*-------------------------------------------------------------------------
 *
 * planner.h
 *	  The planner hooks of the library (planner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_PLANNER_PLANNER_H
#define PTF_PLANNER_PLANNER_H

#include "nodes/parsenodes.h"

#include "planner/planned.h"

/* ptf.plan_window_sql */
extern bool ptf_plan_window_sql;

/* the rules are on: the setting, or a pipeline worker's steps */
extern bool ptf_window_rules_enabled(void);

/* does a window rule take q's TVF entry rti (before planning)? */
extern bool ptf_window_rules_take(Query *q, Index rti);

/* from _PG_init: settings, the plan node and what runs its calls, the hooks */
extern void ptf_planner_init(PtfWindowRunner window_runner,
							 PtfFirstRowsRunner first_rows_runner);

#endif							/* PTF_PLANNER_PLANNER_H */
