/*-------------------------------------------------------------------------
 *
 * tvf_inline.h
 *	  ptf.tumble() over a table planned as a scan of it (a planner hook).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_TVF_INLINE_H
#define PTF_TVF_INLINE_H

/* from _PG_init: the setting ptf.inline_window_tvfs and the hook */
extern void ptf_tvf_inline_init(void);

#endif							/* PTF_TVF_INLINE_H */
