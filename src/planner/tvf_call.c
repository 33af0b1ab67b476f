/*-------------------------------------------------------------------------
 *
 * tvf_call.c
 *	  Calls of the window TVFs in a query, and what the query's
 *	  expressions read of them (tvf_call.h).
 *
 * A TVF is recognized by its C symbol (pg_proc.prosrc "ptf_tumble", ...)
 * in schema ptf, not by its name alone: a function of the same name made
 * by a user is not ours.  The rules of this room work on expressions of
 * a query whose FROM is one TVF call, entry rti: the data column
 * (attribute 1) is the input row, window_start, window_end and
 * window_time (2, 3, 4) are the window.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "planner/tvf_call.h"

/* the TVFs' arguments, by position */
static const char *const tumble_args[] = {
	"input", "on_time", "size", "offset", "uid", "query", "changes", "snapshot",
	"watermark_delay"
};
static const char *const hop_args[] = {
	"input", "on_time", "slide", "size", "offset", "uid", "query", "changes", "snapshot",
	"watermark_delay"
};
static const char *const cumulate_args[] = {
	"input", "on_time", "step", "size", "offset", "uid", "query", "changes", "snapshot",
	"watermark_delay"
};

/* Which TVF funcid is, by its C symbol; false if none of ours. */
static bool
tvf_kind(Oid funcid, WindowKind *kind, HeapTuple *tuple)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		isnull;
	Datum		src;
	char	   *sym;
	bool		ours = true;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->prolang != ClanguageId || !proc->proretset ||
		proc->pronamespace != get_namespace_oid("ptf", true))
		ours = false;
	else
	{
		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
		sym = isnull ? "" : TextDatumGetCString(src);
		if (strcmp(sym, "ptf_tumble") == 0)
			*kind = WINDOW_TUMBLE;
		else if (strcmp(sym, "ptf_hop") == 0)
			*kind = WINDOW_HOP;
		else if (strcmp(sym, "ptf_cumulate") == 0)
			*kind = WINDOW_CUMULATE;
		else
			ours = false;
	}
	if (!ours)
	{
		ReleaseSysCache(tup);
		return false;
	}
	*tuple = tup;
	return true;
}

bool
ptf_tvf_of_rte(RangeTblEntry *rte, PtfTvf *tvf)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *fe;
	HeapTuple	proctup;
	List	   *args;
	Oid			rowtype;

	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1 ||
		rte->funcordinality)
		return false;
	rtfunc = linitial_node(RangeTblFunction, rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr))
		return false;
	fe = (FuncExpr *) rtfunc->funcexpr;
	if (!fe->funcretset || !tvf_kind(fe->funcid, &tvf->kind, &proctup))
		return false;
	args = expand_function_arguments(fe->args, false, fe->funcresulttype, proctup);
	ReleaseSysCache(proctup);
	if (list_length(args) < 8)
		return false;
	rowtype = exprType(linitial(args));
	if (!OidIsValid(rowtype) || rowtype == RECORDOID ||
		get_typtype(rowtype) != TYPTYPE_COMPOSITE)
		return false;
	tvf->fe = (FuncExpr *) copyObject(fe);
	tvf->fe->args = args;
	tvf->rowtype = rowtype;
	tvf->relid = typeidTypeRelid(rowtype);
	tvf->rowdesc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	return true;
}

/* The position of the argument called name among a TVF's, or -1. */
int
ptf_tvf_arg_index(const PtfTvf *tvf, const char *name)
{
	const char *const *names = tvf->kind == WINDOW_TUMBLE ? tumble_args :
		tvf->kind == WINDOW_HOP ? hop_args : cumulate_args;
	int			n = tvf->kind == WINDOW_TUMBLE ? lengthof(tumble_args) : lengthof(hop_args);
	int			i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

Node *
ptf_tvf_arg(const PtfTvf *tvf, const char *name)
{
	int			i = ptf_tvf_arg_index(tvf, name);

	return i >= 0 && i < list_length(tvf->fe->args) ? (Node *) list_nth(tvf->fe->args, i) : NULL;
}

/* ---- what expressions read ---- */

typedef struct ReadsContext
{
	Index		rti;
	int			reads;
	int			sublevels;		/* inside a subquery: its own Vars are its own */
} ReadsContext;

static bool
reads_walker(Node *node, ReadsContext *c)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if (v->varlevelsup != 0 || (Index) v->varno != c->rti)
			c->reads |= TVF_READS_OTHER;
		else if (v->varattno == TVF_COL_DATA)
			c->reads |= TVF_READS_DATA;
		else if (v->varattno >= TVF_COL_START && v->varattno <= TVF_COL_TIME)
			c->reads |= TVF_READS_WINDOW;
		else
			c->reads |= TVF_READS_OTHER;	/* the whole row of the TVF */
		return false;
	}
	if (IsA(node, Param))
	{
		if (((Param *) node)->paramkind != PARAM_EXTERN)
			c->reads |= TVF_READS_OTHER;
		return false;
	}
	if (IsA(node, Aggref) || IsA(node, WindowFunc) || IsA(node, GroupingFunc) ||
		IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, AlternativeSubPlan) ||
		IsA(node, PlaceHolderVar) || IsA(node, Query) || IsA(node, CurrentOfExpr) ||
		IsA(node, NextValueExpr))
	{
		c->reads |= TVF_READS_OTHER;
		return false;
	}
	return expression_tree_walker(node, reads_walker, (void *) c);
}

int
ptf_tvf_expr_reads(Node *expr, Index rti)
{
	ReadsContext c;

	c.rti = rti;
	c.reads = 0;
	c.sublevels = 0;
	(void) reads_walker(expr, &c);
	if (contain_volatile_functions(expr))
		c.reads |= TVF_READS_OTHER;
	return c.reads;
}

AttrNumber
ptf_tvf_data_column(Node *expr, Index rti, const PtfTvf *tvf)
{
	FieldSelect *fs;
	Var		   *v;
	Form_pg_attribute att;

	if (expr == NULL || !IsA(expr, FieldSelect))
		return 0;
	fs = (FieldSelect *) expr;
	if (!IsA(fs->arg, Var))
		return 0;
	v = (Var *) fs->arg;
	if ((Index) v->varno != rti || v->varlevelsup != 0 || v->varattno != TVF_COL_DATA ||
		v->vartype != tvf->rowtype)
		return 0;
	if (fs->fieldnum < 1 || fs->fieldnum > tvf->rowdesc->natts)
		return 0;
	att = TupleDescAttr(tvf->rowdesc, fs->fieldnum - 1);
	if (att->attisdropped || att->atttypid != fs->resulttype ||
		att->atttypmod != fs->resulttypmod)
		return 0;
	return fs->fieldnum;
}

int
ptf_tvf_window_column(Node *expr, Index rti)
{
	Var		   *v;

	if (expr == NULL || !IsA(expr, Var))
		return 0;
	v = (Var *) expr;
	if ((Index) v->varno != rti || v->varlevelsup != 0 ||
		v->varattno < TVF_COL_START || v->varattno > TVF_COL_TIME)
		return 0;
	return v->varattno;
}

bool
ptf_tvf_window_determined(const PtfTvf *tvf, int window_cols)
{
	if (window_cols & ((1 << TVF_COL_END) | (1 << TVF_COL_TIME)))
		return true;
	return (window_cols & (1 << TVF_COL_START)) != 0 && tvf->kind != WINDOW_CUMULATE;
}

bool
ptf_tvf_key_equality_ok(Oid type, Oid eqop)
{
	TypeCacheEntry *tce = lookup_type_cache(type, TYPECACHE_HASH_PROC | TYPECACHE_EQ_OPR);

	return OidIsValid(tce->hash_proc) && OidIsValid(tce->eq_opr) && tce->eq_opr == eqop;
}

bool
ptf_tvf_group_columns(Query *q, List *clauses, Index rti, const PtfTvf *tvf,
					  int *window_cols, List **key_attnos, List **key_exprs)
{
	ListCell   *lc;

	foreach(lc, clauses)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		Node	   *expr = get_sortgroupclause_expr(sgc, q->targetList);
		int			wcol;
		AttrNumber	attno;

		if ((wcol = ptf_tvf_window_column(expr, rti)) != 0)
			*window_cols |= 1 << wcol;
		else if ((attno = ptf_tvf_data_column(expr, rti, tvf)) != 0)
		{
			if (!ptf_tvf_key_equality_ok(exprType(expr), sgc->eqop))
				return false;
			if (!list_member_int(*key_attnos, attno))
			{
				*key_attnos = lappend_int(*key_attnos, attno);
				if (key_exprs != NULL)
					*key_exprs = lappend(*key_exprs, copyObject(expr));
			}
		}
		else
			return false;
	}
	return true;
}

/* ---- expressions over the input row ---- */

typedef struct ToInputContext
{
	Index		rti;
	const PtfTvf *tvf;
	bool		failed;
} ToInputContext;

static Node *
to_input_mutator(Node *node, ToInputContext *c)
{
	AttrNumber	attno;

	if (node == NULL || c->failed)
		return node;
	if ((attno = ptf_tvf_data_column(node, c->rti, c->tvf)) != 0)
	{
		Form_pg_attribute att = TupleDescAttr(c->tvf->rowdesc, attno - 1);

		return (Node *) makeVar(1, attno, att->atttypid, att->atttypmod,
								att->attcollation, 0);
	}
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if ((Index) v->varno == c->rti && v->varlevelsup == 0 && v->varattno == TVF_COL_DATA)
			return (Node *) makeVar(1, InvalidAttrNumber, c->tvf->rowtype, -1, InvalidOid, 0);
		c->failed = true;
		return node;
	}
	if (IsA(node, Param) && ((Param *) node)->paramkind != PARAM_EXTERN)
	{
		c->failed = true;
		return node;
	}
	if (IsA(node, WindowFunc) || IsA(node, GroupingFunc) || IsA(node, SubLink) ||
		IsA(node, SubPlan) || IsA(node, AlternativeSubPlan) || IsA(node, PlaceHolderVar) ||
		IsA(node, Query) || IsA(node, CurrentOfExpr) || IsA(node, NextValueExpr))
	{
		c->failed = true;
		return node;
	}
	if (IsA(node, Aggref) && ((Aggref *) node)->agglevelsup != 0)
	{
		c->failed = true;
		return node;
	}
	return expression_tree_mutator(node, to_input_mutator, (void *) c);
}

Node *
ptf_tvf_expr_to_input(Node *expr, Index rti, const PtfTvf *tvf)
{
	ToInputContext c;
	Node	   *result;

	c.rti = rti;
	c.tvf = tvf;
	c.failed = false;
	result = to_input_mutator(expr, &c);
	if (c.failed || contain_volatile_functions(result))
		return NULL;
	return result;
}

List *
ptf_tvf_input_columns(const PtfTvf *tvf, List *attnos)
{
	List	   *vars = NIL;
	ListCell   *lc;

	foreach(lc, attnos)
	{
		Form_pg_attribute att = TupleDescAttr(tvf->rowdesc, lfirst_int(lc) - 1);

		vars = lappend(vars, makeVar(1, lfirst_int(lc), att->atttypid, att->atttypmod,
									 att->attcollation, 0));
	}
	return vars;
}

bool
ptf_tvf_args_fixed(const PtfTvf *tvf)
{
	/* no entry is numbered 0: any Var reads "something else" */
	return (ptf_tvf_expr_reads((Node *) tvf->fe->args, 0) & TVF_READS_OTHER) == 0;
}
