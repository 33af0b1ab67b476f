/*-------------------------------------------------------------------------
 *
 * tvf_inline.h
 *	  Window TVF calls over a table planned as scans of it (tvf_inline.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_TVF_INLINE_H
#define PTF_TVF_INLINE_H

#include "nodes/parsenodes.h"

/* ptf.inline_window_tvfs */
extern bool ptf_inline_window_tvfs;
extern void ptf_tvf_inline_define_gucs(void);

/*
 * Replace rte, a call of a window TVF, by its subquery if it can be;
 * *depends_on_role when the subquery is under row level security.
 */
extern void ptf_tvf_inline_rte(RangeTblEntry *rte, bool *depends_on_role);

#endif							/* PTF_TVF_INLINE_H */
