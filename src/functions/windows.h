/*-------------------------------------------------------------------------
 *
 * windows.h
 *	  Window TVF calls that the planner (planner/) runs with an operator
 *	  of ours instead of PostgreSQL's grouping or ranking of their rows.
 *
 * The planner recognizes a query over ptf.tumble/hop/cumulate that our
 * operators answer (TVF + GROUP BY, Window Top-N) and describes what the
 * query does with the TVF's rows: a PtfPlannedWindow (planner/planned.h).  At execution the
 * TVF's own arguments are checked by the TVF's own code -- the same
 * errors, the same input (relation, query, change stream, uid) -- and the
 * call then runs the planned operator instead of emitting the TVF's rows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_WINDOWS_H
#define PTF_FUNCTIONS_WINDOWS_H

#include "planner/planned.h"

/*
 * Run the window TVF call of fcinfo (its arguments, evaluated, and
 * flinfo->fn_expr set for their types) as the planned query pw: the
 * TVF's argument checks, then pw's operator over the TVF's input.
 */
extern void ptf_window_run_planned(FunctionCallInfo fcinfo, WindowKind kind,
								   PtfPlannedWindow *pw);

#endif							/* PTF_FUNCTIONS_WINDOWS_H */
