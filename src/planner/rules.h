/*-------------------------------------------------------------------------
 *
 * rules.h
 *	  The window rules of the planner (Flink's SQL as written, doc/design.md §8):
 *	  a window TVF + GROUP BY planned as the sliced window aggregate
 *	  (window_agg_rule.c), row_number() over a TVF's windows <= N as
 *	  Window Top-N (window_rank_rule.c).
 *
 * Each rule has two halves.  Before planning (planner.c's planner hook,
 * on the query as analyzed) it says whether a query level over a TVF's
 * entry has its shape: such a TVF is not inlined as a scan, so that the
 * rule finds its call when PostgreSQL plans the level.  Then, at the
 * upper stage of that level (create_upper_paths_hook), it checks the
 * shape again on the planned query -- with what the planner derived:
 * quals pushed down from outer queries, HAVING quals moved to WHERE, a
 * row_number() filter made a run condition -- and, if it fits exactly,
 * replaces the stage's paths by a scan of ours (window_scan.c).  What
 * does not fit runs as PostgreSQL plans it: never another answer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_PLANNER_RULES_H
#define PTF_PLANNER_RULES_H

#include "nodes/pathnodes.h"

#include "planner/tvf_call.h"

/* does the TVF + GROUP BY rule take q's entry rti (a call of tvf)? */
extern bool window_agg_rule_query(Query *q, Index rti, const PtfTvf *tvf);
/* UPPERREL_GROUP_AGG of a query grouping a TVF's rows */
extern void window_agg_rule_paths(PlannerInfo *root, RelOptInfo *input_rel,
								  RelOptInfo *grouped_rel, GroupPathExtraData *extra);

/* does the Window Top-N rule take q's entry rti? */
extern bool window_rank_rule_query(Query *q, Index rti, const PtfTvf *tvf);
/* UPPERREL_WINDOW of a query ranking a TVF's rows */
extern void window_rank_rule_paths(PlannerInfo *root, RelOptInfo *input_rel,
								   RelOptInfo *window_rel);

/* UPPERREL_WINDOW of a query ranking a table's rows per key */
extern void first_rows_rule_paths(PlannerInfo *root, RelOptInfo *input_rel,
								  RelOptInfo *window_rel);

/* the one row_number() of wc in q's select list, or NULL (window_rank_rule.c) */
extern WindowFunc *window_rule_row_number(Query *q, WindowClause *wc);

/*
 * N of a window clause's run conditions, "row_number() <= N" or "< N+1"
 * (either way round): the rows per partition it lets through; false when
 * there is none or one of another form.
 */
extern bool window_rule_run_limit(List *conds, WindowFunc *wfunc, int64 *limit);

/*
 * Shared by the rules: the quals of a query over the TVF's entry rti,
 * split into those over the data column alone (filter: over the input
 * row) and those over the window columns alone (post: as they are, over
 * the scan's rows); false when one reads anything else, or both.
 */
extern bool window_rule_split_quals(List *quals, Index rti, const PtfTvf *tvf,
									List **filter, List **post);

/*
 * What expr reads of entry rti (the stage's target above it, a qual) are
 * its columns 1 .. last alone: not its whole row, nor a system column,
 * which the scan's rows do not carry.
 */
extern bool window_rule_reads_columns(Node *expr, Index rti, AttrNumber last);

/* The single TVF entry a query level reads, or 0. */
extern Index window_rule_tvf_entry(Query *q, PtfTvf *tvf);

#endif							/* PTF_PLANNER_RULES_H */
