/*-------------------------------------------------------------------------
 *
 * row_number.h
 *	  row_number() per key over a table, filtered to the first N, as the
 *	  planner plans it (planner/first_rows_rule.c): keep-first by event
 *	  time, or the first N rows per key in an order (row_number.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_ROW_NUMBER_H
#define PTF_FUNCTIONS_ROW_NUMBER_H

#include "planner/planned.h"

extern void ptf_first_rows_run_planned(PtfPlannedFirstRows *p);

#endif							/* PTF_FUNCTIONS_ROW_NUMBER_H */
