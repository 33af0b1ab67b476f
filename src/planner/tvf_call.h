/*-------------------------------------------------------------------------
 *
 * tvf_call.h
 *	  Recognizing calls of the window TVFs (ptf.tumble, hop, cumulate) in
 *	  a query's range table, and the parts of a query that read them
 *	  (tvf_call.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_PLANNER_TVF_CALL_H
#define PTF_PLANNER_TVF_CALL_H

#include "access/tupdesc.h"
#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"

#include "operators/window.h"

/* the TVF's output columns, as attribute numbers of its range table entry */
#define TVF_COL_DATA	1
#define TVF_COL_START	2
#define TVF_COL_END		3
#define TVF_COL_TIME	4

/* A call of one of the window TVFs of this library. */
typedef struct PtfTvf
{
	WindowKind	kind;
	FuncExpr   *fe;				/* the call, its arguments positional and complete */
	Oid			rowtype;		/* of its input (NULL::t) */
	Oid			relid;			/* the row type's relation */
	TupleDesc	rowdesc;
} PtfTvf;

/*
 * Is rte a call of ptf.tumble, ptf.hop or ptf.cumulate (the C functions of
 * this library) over a table's row type, alone in its entry?  Fills tvf.
 */
extern bool ptf_tvf_of_rte(RangeTblEntry *rte, PtfTvf *tvf);

/*
 * Are the call's arguments the same however often the scan is run again
 * -- no outer references (LATERAL, correlated subqueries), no executor
 * parameters, nothing volatile?  Parameters of a prepared statement are.
 */
extern bool ptf_tvf_args_fixed(const PtfTvf *tvf);

/* The argument of the call by name ("uid", "changes", ...), or NULL. */
extern Node *ptf_tvf_arg(const PtfTvf *tvf, const char *name);
extern int	ptf_tvf_arg_index(const PtfTvf *tvf, const char *name);

/*
 * What an expression of a query over the TVF's entry rti reads: a set of
 * these flags.
 */
#define TVF_READS_DATA		0x01	/* the data column */
#define TVF_READS_WINDOW	0x02	/* window_start, window_end or window_time */
#define TVF_READS_OTHER		0x04	/* anything else: other relations, outer
									 * queries, the whole TVF row, subqueries,
									 * aggregates or window functions, volatile
									 * functions, executor parameters */
extern int	ptf_tvf_expr_reads(Node *expr, Index rti);

/*
 * The data column's fields as columns of the input row: (data).col
 * becomes a Var of varno 1 and col's attribute number, data itself a
 * whole-row Var; NULL when expr reads anything but data (and constants).
 */
extern Node *ptf_tvf_expr_to_input(Node *expr, Index rti, const PtfTvf *tvf);

/* Vars over the input row of these columns (an IntList of attribute numbers) */
extern List *ptf_tvf_input_columns(const PtfTvf *tvf, List *attnos);

/* expr is (data).col, a column of the input: its attribute number, else 0 */
extern AttrNumber ptf_tvf_data_column(Node *expr, Index rti, const PtfTvf *tvf);

/* expr is window_start, window_end or window_time: TVF_COL_*, else 0 */
extern int	ptf_tvf_window_column(Node *expr, Index rti);

/*
 * Do grouping (or partitioning) columns with these window columns
 * (TVF_COL_* bits: 1 << col) name one window each?  window_end or
 * window_time does; window_start does for TUMBLE and HOP, whose windows of
 * one start are one window, not for CUMULATE.
 */
extern bool ptf_tvf_window_determined(const PtfTvf *tvf, int window_cols);

/*
 * Can the keyed state hold a key column of this type with this grouping
 * equality (a SortGroupClause's eqop) -- the type's default hash equality?
 */
extern bool ptf_tvf_key_equality_ok(Oid type, Oid eqop);

/*
 * Grouping or partitioning clauses (SortGroupClauses of q) over the TVF's
 * rows, as window columns (TVF_COL_* bits or'ed into *window_cols) and key
 * columns of the input (attnos appended to *key_attnos, each once, with
 * the expressions naming them to *key_exprs unless it is NULL); false if a
 * clause is neither, or a key's equality is not the keyed state's.
 */
extern bool ptf_tvf_group_columns(Query *q, List *clauses, Index rti, const PtfTvf *tvf,
								  int *window_cols, List **key_attnos, List **key_exprs);

#endif							/* PTF_PLANNER_TVF_CALL_H */
