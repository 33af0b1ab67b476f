/*-------------------------------------------------------------------------
 *
 * row_filter.h
 *	  A planned query's WHERE on its input's rows, evaluated before the
 *	  rows reach the frame (row_filter.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_ROW_FILTER_H
#define PTF_ROW_FILTER_H

#include "engine/call.h"

/*
 * Rows of in pass into the frame only where every qual (Vars of varno 1
 * over the input row type; NIL: all) is true, evaluated first: a row left
 * out is not checked further (a NULL event time included).  With range,
 * the least and greatest finite event time of the rows that pass are kept
 * in range[0] and range[1] (PTF_TIME_MAX, PTF_TIME_MIN when none does).
 */
extern void ptf_row_filter_attach(PtfCallInput *in, List *quals, PtfTime *range,
								  MemoryContext cxt);

#endif							/* PTF_ROW_FILTER_H */
