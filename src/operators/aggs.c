/*-------------------------------------------------------------------------
 *
 * aggs.c
 *	  PostgreSQL aggregates run outside nodeAgg, for window operators.
 *
 * What nodeAgg does for a group, done for a slice, a window or a session:
 * the transition state starts as a copy of the aggregate's initial value;
 * a strict transition function skips NULL inputs, and with no initial
 * value the first input becomes the state; a by-reference result that is
 * not the state itself is copied into the state's memory and the old
 * state freed (nodeAgg's ExecAggTransReparent); combine functions are
 * called like transition functions with the other state as input; final
 * functions get the state read-only, and by-reference results are copied
 * out.  The support functions see an AggState as their context, with
 * curaggcontext the state's memory and curpertrans pointing at the real
 * Aggref, which is all nodeAgg's API (AggCheckCallContext, AggGetAggref,
 * AggGetTempMemoryContext, AggStateIsShared) reads.
 *
 * Inputs of all aggregates, FILTER results included, are computed by one
 * projection per row into a virtual slot (the "inputs row"); REPLAY and
 * MOVING aggregates keep copies of it.  Output columns are the select
 * list's expressions with each Aggref and each key column turned into an
 * OUTER_VAR Var over a slot of (key values, aggregate results).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/executor.h"
#include "executor/nodeAgg.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_agg.h"
#include "parser/parse_coerce.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/expandeddatum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/tuplesort.h"

#include "operators/aggs.h"
#include "operators/aggs_internal.h"
#include "state/layout.h"

/* ---- compiling ---- */

static AggFastFn
fast_fn(Oid oid)
{
	switch (oid)
	{
		case F_INT8INC:
		case F_INT8INC_ANY:
			return AGG_FAST_INT8INC;
		case F_INT8PL:
			return AGG_FAST_INT8PL;
		case F_INT4_SUM:
			return AGG_FAST_INT4_SUM;
		case F_INT2_SUM:
			return AGG_FAST_INT2_SUM;
		case F_INT4LARGER:
			return AGG_FAST_INT4_LARGER;
		case F_INT4SMALLER:
			return AGG_FAST_INT4_SMALLER;
		case F_INT8LARGER:
			return AGG_FAST_INT8_LARGER;
		case F_INT8SMALLER:
			return AGG_FAST_INT8_SMALLER;
		default:
			return AGG_FAST_NONE;
	}
}

static void
fn_init(AggFn *fn, Oid oid, Expr *expr, int nargs, Oid collation, AggSet *set)
{
	fn->oid = oid;
	fn->nargs = nargs;
	if (!OidIsValid(oid))
		return;
	fmgr_info_cxt(oid, &fn->flinfo, set->cxt);
	fn->fast = fast_fn(oid);
	if (expr)
		fmgr_info_set_expr((Node *) expr, &fn->flinfo);
	fn->fcinfo = MemoryContextAllocZero(set->cxt, SizeForFunctionCallInfo(nargs + 1));
	InitFunctionCallInfoData(*fn->fcinfo, &fn->flinfo, nargs + 1, collation,
							 (Node *) set->aggstate, NULL);
}

/* The support functions run with the aggregate owner's rights, as nodeAgg checks. */
static void
check_fn_privilege(Oid fnoid, Oid owner)
{
	AclResult	aclresult;

	if (!OidIsValid(fnoid))
		return;
	aclresult = pg_proc_aclcheck(fnoid, owner, ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(fnoid));
}

static Oid
func_owner(Oid fnoid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fnoid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fnoid);
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	return owner;
}

static Datum
init_value(Oid type, Datum textval, bool isnull)
{
	Oid			typinput;
	Oid			typioparam;
	char	   *s;

	if (isnull)
		return (Datum) 0;
	getTypeInputInfo(type, &typinput, &typioparam);
	s = TextDatumGetCString(textval);
	return OidInputFunctionCall(typinput, s, typioparam, -1);
}

static void
refuse(Aggref *aggref, const char *what, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("aggregate %s %s", format_procedure(aggref->aggfnoid), what),
			 hint ? errhint("%s", hint) : 0));
}

/* Sort and equality of an ordered aggregate's inputs, from its SortGroupClauses. */
static void
compile_ordering(AggSet *set, AggDef *d, List *clauses)
{
	ListCell   *lc;
	int			i = 0;

	d->nsort = list_length(clauses);
	d->sort_cols = palloc(sizeof(AttrNumber) * d->nsort);
	d->sort_ops = palloc(sizeof(Oid) * d->nsort);
	d->sort_colls = palloc(sizeof(Oid) * d->nsort);
	d->sort_nulls_first = palloc(sizeof(bool) * d->nsort);
	d->eq_ops = palloc(sizeof(Oid) * d->nsort);
	foreach(lc, clauses)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, d->aggref->args);

		if (!OidIsValid(sgc->sortop))
			refuse(d->aggref, "has inputs that cannot be sorted", NULL);
		d->sort_cols[i] = tle->resno;
		d->sort_ops[i] = sgc->sortop;
		d->sort_colls[i] = exprCollation((Node *) tle->expr);
		d->sort_nulls_first[i] = sgc->nulls_first;
		d->eq_ops[i] = sgc->eqop;
		i++;
	}
	if (d->distinct)
		d->eq_state = execTuplesMatchPrepare(d->sortdesc, d->nsort, d->sort_cols,
											 d->eq_ops, d->sort_colls, NULL);
}

/*
 * Resolve an aggregate as nodeAgg's build_pertrans_for_aggref does, and
 * choose its mode.
 */
static void
compile_agg(AggSet *set, AggDef *d, const AggSetSpec *spec)
{
	Aggref	   *aggref = d->aggref;
	HeapTuple	tup;
	Form_pg_aggregate form;
	Oid			inputTypes[FUNC_MAX_ARGS];
	int			nargs;
	Oid			owner;
	bool		isnull;
	Datum		textinit;
	Expr	   *transexpr = NULL;
	Expr	   *invexpr = NULL;
	Expr	   *finalexpr = NULL;
	Oid			transfn;
	Oid			invtransfn = InvalidOid;
	Oid			finalfn;
	bool		finalextra;

	if (aggref->aggkind != AGGKIND_NORMAL)
		refuse(aggref, "is an ordered-set or hypothetical-set aggregate",
			   "Window aggregates take plain aggregates.");
	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggref->aggfnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggref->aggfnoid);
	form = (Form_pg_aggregate) GETSTRUCT(tup);

	/* the caller may run it; its owner its support functions */
	if (pg_proc_aclcheck(aggref->aggfnoid, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_AGGREGATE, get_func_name(aggref->aggfnoid));
	owner = func_owner(aggref->aggfnoid);

	d->collation = aggref->inputcollid;
	nargs = get_aggregate_argtypes(aggref, inputTypes);
	d->ntransinputs = nargs;
	d->ninputs = list_length(aggref->args);
	d->distinct = (aggref->aggdistinct != NIL);
	d->ordered = d->distinct || aggref->aggorder != NIL;
	d->resulttype = aggref->aggtype;
	get_typlenbyval(d->resulttype, &d->resultlen, &d->resultbyval);

	if (spec->changelog)
	{
		if (contain_volatile_functions((Node *) aggref->args) ||
			contain_volatile_functions((Node *) aggref->aggfilter))
			refuse(aggref, "has volatile inputs, which a retraction would not find again", NULL);
	}
	if (spec->changelog && OidIsValid(form->aggminvtransfn) && !d->ordered && !spec->keep_rows)
	{
		/* retractions: the moving-aggregate functions */
		d->mode = AGG_MOVING;
		transfn = form->aggmtransfn;
		invtransfn = form->aggminvtransfn;
		finalfn = form->aggmfinalfn;
		finalextra = form->aggmfinalextra;
		d->transtype = resolve_aggregate_transtype(aggref->aggfnoid, form->aggmtranstype,
												   inputTypes, nargs);
		textinit = SysCacheGetAttr(AGGFNOID, tup, Anum_pg_aggregate_aggminitval, &isnull);
	}
	else
	{
		transfn = form->aggtransfn;
		finalfn = form->aggfinalfn;
		finalextra = form->aggfinalextra;
		d->final_read_only = (form->aggfinalmodify == AGGMODIFY_READ_ONLY);
		d->transtype = resolve_aggregate_transtype(aggref->aggfnoid, form->aggtranstype,
												   inputTypes, nargs);
		textinit = SysCacheGetAttr(AGGFNOID, tup, Anum_pg_aggregate_agginitval, &isnull);
		/*
		 * States kept per slice, unless a window cannot be made of them, or
		 * a retraction could not take a row out of them (no inverse: the
		 * rows are kept, a retraction takes one out, and the window is
		 * computed from them when it fires).
		 */
		d->mode = AGG_SLICED;
		if (d->ordered || spec->changelog || spec->keep_rows)
			d->mode = AGG_REPLAY;
		else if (spec->combine && !OidIsValid(form->aggcombinefn))
			d->mode = AGG_REPLAY;
		else if (spec->durable && d->transtype == INTERNALOID &&
				 (!OidIsValid(form->aggserialfn) || !OidIsValid(form->aggdeserialfn)))
			d->mode = AGG_REPLAY;	/* its rows are stored instead */
	}
	get_typlenbyval(d->transtype, &d->translen, &d->transbyval);
	d->initnull = isnull;
	d->initval = init_value(d->transtype, textinit, isnull);

	check_fn_privilege(transfn, owner);
	check_fn_privilege(invtransfn, owner);
	check_fn_privilege(finalfn, owner);
	build_aggregate_transfn_expr(inputTypes, nargs, 0, aggref->aggvariadic, d->transtype,
								 d->collation, transfn, invtransfn, &transexpr,
								 OidIsValid(invtransfn) ? &invexpr : NULL);
	fn_init(&d->transfn, transfn, transexpr, d->ntransinputs, d->collation, set);
	fn_init(&d->invtransfn, invtransfn, invexpr, d->ntransinputs, d->collation, set);

	/* as ExecInitAgg: a strict function starting from NULL takes the input as state */
	if (d->transfn.flinfo.fn_strict && d->initnull &&
		(nargs < 1 || !IsBinaryCoercible(inputTypes[0], d->transtype)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("aggregate %u needs to have compatible input type and transition type",
						aggref->aggfnoid)));
	if (d->mode == AGG_MOVING && d->invtransfn.flinfo.fn_strict != d->transfn.flinfo.fn_strict)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("strictness of aggregate's forward and inverse transition functions must match")));

	d->nfinalargs = finalextra ? nargs + 1 : 1;
	if (OidIsValid(finalfn))
	{
		build_aggregate_finalfn_expr(inputTypes, d->nfinalargs, d->transtype, d->resulttype,
									 d->collation, finalfn, &finalexpr);
		fn_init(&d->finalfn, finalfn, finalexpr, d->nfinalargs - 1, d->collation, set);
	}

	if (d->mode == AGG_SLICED && OidIsValid(form->aggcombinefn))
	{
		Expr	   *combexpr;

		check_fn_privilege(form->aggcombinefn, owner);
		build_aggregate_transfn_expr(&d->transtype, 1, 0, false, d->transtype, d->collation,
									 form->aggcombinefn, InvalidOid, &combexpr, NULL);
		fn_init(&d->combinefn, form->aggcombinefn, combexpr, 1, d->collation, set);
	}
	if (d->mode == AGG_SLICED && d->transtype == INTERNALOID && OidIsValid(form->aggserialfn))
	{
		Expr	   *serexpr;
		Expr	   *deserexpr;

		check_fn_privilege(form->aggserialfn, owner);
		check_fn_privilege(form->aggdeserialfn, owner);
		build_aggregate_serialfn_expr(form->aggserialfn, &serexpr);
		build_aggregate_deserialfn_expr(form->aggdeserialfn, &deserexpr);
		fn_init(&d->serialfn, form->aggserialfn, serexpr, 0, InvalidOid, set);
		fn_init(&d->deserialfn, form->aggdeserialfn, deserexpr, 1, InvalidOid, set);
	}
	ReleaseSysCache(tup);

	d->pertrans.aggref = aggref;
	d->pertrans.aggshared = true;	/* finalfns: do not scribble on the state */
	d->pertrans.numInputs = d->ninputs;
	d->pertrans.numTransInputs = d->ntransinputs;
	d->pertrans.transfn_oid = transfn;
}

/* Aggrefs of an expression tree, in order, without repeats. */
static bool
collect_aggrefs(Node *node, List **aggrefs)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		*aggrefs = lappend(*aggrefs, node);
		return false;			/* no aggregates within aggregates */
	}
	if (IsA(node, GroupingFunc) || IsA(node, WindowFunc) || IsA(node, SubLink))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("aggregates may hold aggregate calls and expressions, not %s",
						IsA(node, GroupingFunc) ? "GROUPING()" :
						IsA(node, WindowFunc) ? "window functions" : "subqueries")));
	return expression_tree_walker(node, collect_aggrefs, (void *) aggrefs);
}

static int
aggref_position(List *aggrefs, void *p)
{
	ListCell   *lc;

	foreach(lc, aggrefs)
		if (lfirst(lc) == p)
			return foreach_current_index(lc);
	elog(ERROR, "aggregate call not found");
	return -1;
}

typedef struct OutputMutatorContext
{
	AggSet	   *set;
	List	   *aggrefs;
} OutputMutatorContext;

/* Aggrefs and key columns become columns of the (keys, results) slot. */
static Node *
output_mutator(Node *node, OutputMutatorContext *c)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Aggref))
	{
		int			i = aggref_position(c->aggrefs, node);
		Aggref	   *a = (Aggref *) node;

		return (Node *) makeVar(OUTER_VAR, c->set->nkeys + i + 1, a->aggtype, -1,
								a->aggcollid, 0);
	}
	if (IsA(node, Var) && ((Var *) node)->varlevelsup == 0)
	{
		Var		   *v = (Var *) node;
		int			k;

		for (k = 0; k < c->set->nkeys; k++)
			if (c->set->key_attnos[k] == v->varattno)
				return (Node *) makeVar(OUTER_VAR, k + 1, v->vartype, v->vartypmod,
										v->varcollid, 0);
		/* the GROUP BY check of parse analysis lets no other column through */
		elog(ERROR, "column %d is neither a key nor in an aggregate", v->varattno);
	}
	return expression_tree_mutator(node, output_mutator, (void *) c);
}

/*
 * Inputs that are columns of the row as they are (sum(v), not sum(v + 1)),
 * and constants, are copied from the row instead of projected: no
 * expression to run, no per-row memory to reset.  The constants are set
 * in the inputs slot once.
 */
static void
compile_input_copy(AggSet *set, List *tlist)
{
	ListCell   *lc;
	int			i = 0;

	if (tlist == NIL)
		return;
	foreach(lc, tlist)
	{
		Expr	   *e = lfirst_node(TargetEntry, lc)->expr;

		if (!(IsA(e, Const) || (IsA(e, Var) && ((Var *) e)->varno == 1 &&
								((Var *) e)->varattno > 0)))
			return;
	}
	set->input_attnos = palloc0(sizeof(AttrNumber) * list_length(tlist));
	set->input_maxattno = 0;
	foreach(lc, tlist)
	{
		Expr	   *e = lfirst_node(TargetEntry, lc)->expr;

		if (IsA(e, Var))
		{
			set->input_attnos[i] = ((Var *) e)->varattno;
			set->input_maxattno = Max(set->input_maxattno, ((Var *) e)->varattno);
		}
		else
		{
			set->inputs_slot->tts_values[i] = ((Const *) e)->constvalue;
			set->inputs_slot->tts_isnull[i] = ((Const *) e)->constisnull;
		}
		i++;
	}
}

/* the input projection: every aggregate's arguments, then its FILTER */
static void
compile_inputs(AggSet *set, const AggSetSpec *spec)
{
	List	   *tlist = NIL;
	int			i;
	AttrNumber	resno = 1;

	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		ListCell   *lc;

		d->first_input = resno - 1;
		foreach(lc, d->aggref->args)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);

			tlist = lappend(tlist, makeTargetEntry(tle->expr, resno++, NULL, false));
		}
		d->filter_col = -1;
		if (d->aggref->aggfilter)
		{
			d->filter_col = resno - 1;
			tlist = lappend(tlist, makeTargetEntry(d->aggref->aggfilter, resno++, NULL, false));
		}
		if (d->ordered)
		{
			d->sortdesc = CreateTemplateTupleDesc(Max(d->ninputs, 1));
			foreach(lc, d->aggref->args)
			{
				TargetEntry *tle = lfirst_node(TargetEntry, lc);

				TupleDescInitEntry(d->sortdesc, tle->resno, NULL, exprType((Node *) tle->expr),
								   exprTypmod((Node *) tle->expr), 0);
				TupleDescInitEntryCollation(d->sortdesc, tle->resno,
											exprCollation((Node *) tle->expr));
			}
			compile_ordering(set, d, d->distinct ? d->aggref->aggdistinct : d->aggref->aggorder);
		}
	}
	/*
	 * Kept rows that retractions take out are found by the whole input row
	 * (a hash of its values): a row that was never added must not take out
	 * another that has the same aggregate inputs (count(*) has none).
	 */
	set->identity_col = -1;
	if (spec->changelog && set->keeps_rows)
	{
		set->identity_col = resno - 1;
		tlist = lappend(tlist, makeTargetEntry((Expr *) makeConst(INT8OID, -1, InvalidOid, 8,
																   Int64GetDatum(0), false,
																   FLOAT8PASSBYVAL),
												resno++, NULL, false));
	}
	set->time_col = -1;
	if (spec->keep_rows && spec->time_attno != InvalidAttrNumber)
	{
		Form_pg_attribute att = TupleDescAttr(spec->rowdesc, spec->time_attno - 1);

		set->time_col = resno - 1;
		tlist = lappend(tlist, makeTargetEntry((Expr *) makeVar(1, spec->time_attno, att->atttypid,
																 att->atttypmod, att->attcollation, 0),
												resno++, NULL, false));
	}
	set->inputs_desc = ExecTypeFromTL(tlist);
	set->inputs_slot = MakeSingleTupleTableSlot(set->inputs_desc, &TTSOpsVirtual);
	set->replay_slot = MakeSingleTupleTableSlot(set->inputs_desc, &TTSOpsMinimalTuple);
	if (tlist != NIL)
		set->inputs_proj = ExecBuildProjectionInfo(tlist, set->rowcxt, set->inputs_slot,
												   NULL, spec->rowdesc);
	compile_input_copy(set, tlist);
}

/*
 * When every SLICED aggregate's transition is one call_fast makes and none
 * has a FILTER, a row advances them in a loop of their own.
 */
static void
compile_sliced_fast(AggSet *set)
{
	int			i;
	int			k = 0;

	for (i = 0; i < set->naggs; i++)
		if (set->aggs[i].mode == AGG_SLICED &&
			(set->aggs[i].transfn.fast == AGG_FAST_NONE || set->aggs[i].filter_col >= 0))
			return;
	if (set->nsliced == 0)
		return;
	set->sliced_fast = palloc(sizeof(AggDef *) * set->nsliced);
	for (i = 0; i < set->naggs; i++)
		if (set->aggs[i].mode == AGG_SLICED)
			set->sliced_fast[k++] = &set->aggs[i];
	Assert(k == set->nsliced);
}

/*
 * The SLICED states that live apart from their slice (numeric's sum and
 * avg, array_agg's: an "internal" struct; a by-reference value): reaching
 * one is a cache miss of its own after the slice's, which
 * aggs_prefetch_sliced() lets a batch of rows ask for ahead.
 *
 * numeric's sum, avg and variance keep their digits in two arrays the
 * first transition allocates right after the state, in the same memory
 * block (aset.c rounds the 144-byte state up to 256 bytes, then a chunk
 * header): a third miss, the line NUMERIC_DIGITS_FOLLOW bytes on.  A guess
 * that no longer holds (the arrays grown elsewhere) costs a useless
 * prefetch, never a wrong answer.  Measured on TUMBLE, sum(numeric) over
 * 240k groups: 20-25% less time than without the state's prefetches.
 */
#define NUMERIC_DIGITS_FOLLOW	(256 + 16)

static void
compile_sliced_byref(AggSet *set)
{
	int			i;

	set->sliced_byref = palloc(sizeof(AggStateLines) * Max(set->nsliced, 1));
	set->nsliced_byref = 0;
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		AggStateLines *l;

		if (d->mode != AGG_SLICED || (d->transbyval && d->transtype != INTERNALOID))
			continue;
		l = &set->sliced_byref[set->nsliced_byref++];
		l->slot = d->slot;
		l->follow = (d->pertrans.transfn_oid == F_NUMERIC_AVG_ACCUM ||
					 d->pertrans.transfn_oid == F_NUMERIC_ACCUM) ? NUMERIC_DIGITS_FOLLOW : 0;
	}
}

static void
compile_outputs(AggSet *set, const AggSetSpec *spec, List *aggrefs)
{
	ListCell   *lc;
	OutputMutatorContext c;
	int			i;

	set->outer_desc = CreateTemplateTupleDesc(Max(set->nkeys + set->naggs, 1));
	for (i = 0; i < set->nkeys; i++)
		TupleDescCopyEntry(set->outer_desc, i + 1, spec->rowdesc, set->key_attnos[i]);
	for (i = 0; i < set->naggs; i++)
		TupleDescInitEntry(set->outer_desc, set->nkeys + i + 1, NULL,
						   set->aggs[i].resulttype, -1, 0);
	set->outer_slot = MakeSingleTupleTableSlot(set->outer_desc, &TTSOpsVirtual);
	set->outcxt = CreateExprContext(set->estate);
	set->outcxt->ecxt_outertuple = set->outer_slot;

	c.set = set;
	c.aggrefs = aggrefs;
	set->output_names = palloc(sizeof(char *) * Max(list_length(spec->targetlist), 1));
	set->output_types = palloc(sizeof(Oid) * Max(list_length(spec->targetlist), 1));
	set->output_typmods = palloc(sizeof(int32) * Max(list_length(spec->targetlist), 1));
	set->output_exprs = palloc(sizeof(ExprState *) * Max(list_length(spec->targetlist), 1));
	set->output_outer = palloc(sizeof(AttrNumber) * Max(list_length(spec->targetlist), 1));
	foreach(lc, spec->targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Expr	   *e;

		if (tle->resjunk)
			continue;
		e = (Expr *) output_mutator((Node *) tle->expr, &c);
		set->output_names[set->noutputs] = pstrdup(tle->resname ? tle->resname : "?column?");
		set->output_types[set->noutputs] = exprType((Node *) tle->expr);
		set->output_typmods[set->noutputs] = exprTypmod((Node *) tle->expr);
		set->output_exprs[set->noutputs] = ExecInitExpr(e, NULL);
		/* a key or an aggregate as it is: copied, not evaluated */
		set->output_outer[set->noutputs] = (IsA(e, Var) && ((Var *) e)->varno == OUTER_VAR) ?
			((Var *) e)->varattno : 0;
		set->noutputs++;
	}
}

AggSet *
aggs_create(const AggSetSpec *spec, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	AggSet	   *set = palloc0(sizeof(AggSet));
	List	   *aggrefs = NIL;
	List	   *targetlist = copyObject(spec->targetlist);
	AggSetSpec	s = *spec;
	ListCell   *lc;
	int			i;

	s.targetlist = targetlist;
	set->cxt = cxt;
	set->changelog = spec->changelog;
	set->one_slice = spec->one_slice;
	set->nkeys = spec->nkeys;
	set->key_attnos = palloc(sizeof(AttrNumber) * Max(spec->nkeys, 1));
	memcpy(set->key_attnos, spec->key_attnos, sizeof(AttrNumber) * spec->nkeys);
	set->estate = CreateExecutorState();
	set->aggstate = makeNode(AggState);
	set->aggstate->ss.ps.state = set->estate;
	set->aggstate->tmpcontext = CreateExprContext(set->estate);
	set->rowcxt = CreateExprContext(set->estate);

	foreach(lc, targetlist)
		(void) collect_aggrefs((Node *) lfirst_node(TargetEntry, lc)->expr, &aggrefs);
	set->naggs = list_length(aggrefs);
	set->aggs = palloc0(sizeof(AggDef) * Max(set->naggs, 1));
	i = 0;
	foreach(lc, aggrefs)
	{
		AggDef	   *d = &set->aggs[i++];

		d->aggref = lfirst_node(Aggref, lc);
		compile_agg(set, d, spec);
		if (d->mode == AGG_SLICED)
			d->slot = set->nsliced++;
		else if (d->mode == AGG_MOVING)
			d->slot = set->nmoving++;
		if (d->mode != AGG_SLICED)
			set->keeps_rows = true;
	}
	compile_inputs(set, &s);
	compile_outputs(set, &s, aggrefs);
	compile_sliced_fast(set);
	compile_sliced_byref(set);
	set->win_accs = palloc0(sizeof(AggAcc) * Max(set->naggs, 1));
	set->win_started = palloc0(sizeof(bool) * Max(set->naggs, 1));
	MemoryContextSwitchTo(old);
	return set;
}

Datum
aggs_kept_row_time(AggSet *set, MinimalTuple row)
{
	bool		isnull;
	Datum		d;

	Assert(set->time_col >= 0);
	ExecStoreMinimalTuple(row, set->replay_slot, false);
	d = slot_getattr(set->replay_slot, set->time_col + 1, &isnull);
	Assert(!isnull);
	ExecClearTuple(set->replay_slot);
	return d;
}

int
aggs_nsliced(AggSet *set)
{
	return set->nsliced;
}

bool
aggs_sliced_byref(AggSet *set)
{
	return set->nsliced_byref > 0;
}

/*
 * Ask for a slice's by-reference states, which the slice holds only
 * pointers to: the three lines that hold a state of up to 144 bytes
 * (numeric's) wherever it starts, and the line that follows it, if any.
 * Nothing is read but the pointers.
 */
void
aggs_prefetch_sliced(AggSet *set, const AggAcc *accs)
{
	int			k;

	for (k = 0; k < set->nsliced_byref; k++)
	{
		const AggStateLines *l = &set->sliced_byref[k];
		const AggAcc *acc = &accs[l->slot];
		const char *p;

		if (acc->isnull || acc->notrans)
			continue;
		p = DatumGetPointer(acc->value);
		__builtin_prefetch(p);
		__builtin_prefetch(p + 64);
		__builtin_prefetch(p + 128);
		if (l->follow > 0)
			__builtin_prefetch(p + l->follow);
	}
}

int
aggs_nmoving(AggSet *set)
{
	return set->nmoving;
}

bool
aggs_keeps_rows(AggSet *set)
{
	return set->keeps_rows;
}

bool
aggs_all_sliced(AggSet *set)
{
	int			i;

	for (i = 0; i < set->naggs; i++)
		if (set->aggs[i].mode != AGG_SLICED)
			return false;
	return !set->keeps_rows;
}

int
aggs_noutputs(AggSet *set)
{
	return set->noutputs;
}

const char *
aggs_output_name(AggSet *set, int i)
{
	return set->output_names[i];
}

Oid
aggs_output_type(AggSet *set, int i)
{
	return set->output_types[i];
}

int32
aggs_output_typmod(AggSet *set, int i)
{
	return set->output_typmods[i];
}

/* ---- memory of lifetime units ---- */

AggMemory *
aggs_memory_create(MemoryContext parent)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "ptf aggregate states",
											  ALLOCSET_SMALL_SIZES);
	/* not in cxt: resetting the states keeps the unit */
	AggMemory  *mem = MemoryContextAllocZero(parent, sizeof(AggMemory));

	mem->cxt = cxt;
	NodeSetTag(&mem->econtext, T_ExprContext);
	mem->econtext.ecxt_per_tuple_memory = cxt;
	mem->econtext.ecxt_per_query_memory = cxt;
	return mem;
}

void
aggs_memory_delete(AggMemory *mem)
{
	/* AggRegisterCallback is for ordered-set aggregates, which are refused */
	Assert(mem->econtext.ecxt_callbacks == NULL);
	MemoryContextDelete(mem->cxt);
	pfree(mem);
}

/* ---- transitions ---- */

static void
acc_init(AggDef *d, AggAcc *acc, AggMemory *mem)
{
	acc->isnull = d->initnull;
	acc->notrans = d->initnull;
	acc->ninputs = 0;
	acc->value = (Datum) 0;
	if (!d->initnull && d->transbyval)
		acc->value = d->initval;	/* no memory: mem may be NULL */
	else if (!d->initnull)
	{
		MemoryContext old = MemoryContextSwitchTo(mem->cxt);

		acc->value = datumCopy(d->initval, d->transbyval, d->translen);
		MemoryContextSwitchTo(old);
	}
}

/* Back to the initial state, the current one freed. */
static void
acc_reset(AggDef *d, AggAcc *acc, AggMemory *mem)
{
	if (!d->transbyval && !acc->isnull && DatumGetPointer(acc->value) != NULL)
	{
		if (DatumIsReadWriteExpandedObject(acc->value, false, d->translen))
			DeleteExpandedObject(acc->value);
		else
			pfree(DatumGetPointer(acc->value));
	}
	acc_init(d, acc, mem);
}

static inline bool
any_null(const Datum *values, const bool *nulls, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (nulls[i])
			return true;
	return false;
}

/*
 * A new state value from a transition: kept where it is when it is the
 * state, or a read-write expanded object of the state's memory; else
 * copied there, the old one freed (nodeAgg's ExecAggTransReparent).
 */
static void
adopt(AggDef *d, AggAcc *acc, AggMemory *mem, Datum newval, bool newnull)
{
	if (!d->transbyval && DatumGetPointer(newval) != DatumGetPointer(acc->value))
	{
		if (!newnull)
		{
			if (DatumIsReadWriteExpandedObject(newval, false, d->translen) &&
				MemoryContextGetParent(DatumGetEOHP(newval)->eoh_context) == mem->cxt)
				 /* already ours */ ;
			else
			{
				MemoryContext old = MemoryContextSwitchTo(mem->cxt);

				newval = datumCopy(newval, d->transbyval, d->translen);
				MemoryContextSwitchTo(old);
			}
		}
		if (!acc->isnull)
		{
			if (DatumIsReadWriteExpandedObject(acc->value, false, d->translen))
				DeleteExpandedObject(acc->value);
			else
				pfree(DatumGetPointer(acc->value));
		}
	}
	acc->value = newnull ? (Datum) 0 : newval;
	acc->isnull = newnull;
	acc->notrans = false;
}

static pg_noinline void
bigint_out_of_range(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("bigint out of range")));
}

/*
 * fn's fast form on a by-value state: what int8inc, int8pl, int4_sum ...
 * return, strict ones' NULLs already handled by the caller.
 */
static inline void
call_fast(AggFn *fn, AggAcc *acc, const Datum *args, const bool *argnulls)
{
	int64		state = DatumGetInt64(acc->value);
	int64		r;
	Datum		result = (Datum) 0;

	switch (fn->fast)
	{
		case AGG_FAST_NONE:
			Assert(false);
			return;
		case AGG_FAST_INT8INC:
			if (unlikely(pg_add_s64_overflow(state, 1, &r)))
				bigint_out_of_range();
			result = Int64GetDatum(r);
			break;
		case AGG_FAST_INT8PL:
			if (unlikely(pg_add_s64_overflow(state, DatumGetInt64(args[0]), &r)))
				bigint_out_of_range();
			result = Int64GetDatum(r);
			break;
		case AGG_FAST_INT4_SUM:
		case AGG_FAST_INT2_SUM:
			/* int4_sum: a NULL input leaves the state; the first other starts it */
			if (argnulls[0])
			{
				acc->notrans = false;
				return;
			}
			r = fn->fast == AGG_FAST_INT4_SUM ? (int64) DatumGetInt32(args[0]) :
				(int64) DatumGetInt16(args[0]);
			result = Int64GetDatum(acc->isnull ? r : state + r);
			break;
		case AGG_FAST_INT4_LARGER:
			result = Int32GetDatum(Max(DatumGetInt32(acc->value), DatumGetInt32(args[0])));
			break;
		case AGG_FAST_INT4_SMALLER:
			result = Int32GetDatum(Min(DatumGetInt32(acc->value), DatumGetInt32(args[0])));
			break;
		case AGG_FAST_INT8_LARGER:
			result = Int64GetDatum(Max(state, DatumGetInt64(args[0])));
			break;
		case AGG_FAST_INT8_SMALLER:
			result = Int64GetDatum(Min(state, DatumGetInt64(args[0])));
			break;
	}
	acc->value = result;
	acc->isnull = false;
	acc->notrans = false;
}

/*
 * What a strict fn does without being called: true when it is not called,
 * with *result call_transition's answer.
 */
static inline bool
strict_done(AggDef *d, AggFn *fn, AggAcc *acc, AggMemory *mem, const Datum *args,
			const bool *argnulls, bool inverse, bool *result)
{
	int			i;

	*result = true;
	for (i = 0; i < fn->nargs; i++)
		if (argnulls[i])
			return true;		/* a strict function skips NULL inputs */
	if (acc->notrans)
	{
		/* the first input becomes the state (nodeAgg's ExecAggInitGroup) */
		Assert(!inverse);
		if (d->transbyval)
			acc->value = args[0];	/* no memory: mem may be NULL */
		else
		{
			MemoryContext old = MemoryContextSwitchTo(mem->cxt);

			acc->value = datumCopy(args[0], d->transbyval, d->translen);
			MemoryContextSwitchTo(old);
		}
		acc->isnull = false;
		acc->notrans = false;
		return true;
	}
	if (acc->isnull)
	{
		*result = !inverse;		/* a NULL state stays NULL */
		return true;
	}
	return false;
}

/* Call fn (transition, inverse or combine) with the state and nargs inputs. */
static bool
call_transition(AggSet *set, AggDef *d, AggFn *fn, AggAcc *acc, AggMemory *mem,
				const Datum *args, const bool *argnulls, bool inverse)
{
	FunctionCallInfo fc = fn->fcinfo;
	MemoryContext old;
	Datum		newval;
	bool		result;
	int			i;

	if (fn->flinfo.fn_strict && strict_done(d, fn, acc, mem, args, argnulls, inverse, &result))
		return result;
	if (fn->fast != AGG_FAST_NONE)
	{
		Assert(!inverse && d->transbyval);
		call_fast(fn, acc, args, argnulls);
		return true;
	}
	Assert(mem != NULL);
	set->aggstate->curaggcontext = &mem->econtext;
	set->aggstate->curpertrans = &d->pertrans;
	set->aggstate->curperagg = NULL;
	old = MemoryContextSwitchTo(set->aggstate->tmpcontext->ecxt_per_tuple_memory);
	fc->args[0].value = acc->value;
	fc->args[0].isnull = acc->isnull;
	for (i = 0; i < fn->nargs; i++)
	{
		fc->args[i + 1].value = args[i];
		fc->args[i + 1].isnull = argnulls[i];
	}
	fc->isnull = false;
	newval = FunctionCallInvoke(fc);
	MemoryContextSwitchTo(old);
	set->aggstate->curpertrans = NULL;
	ResetExprContext(set->aggstate->tmpcontext);

	/* an inverse that cannot take the row back answers NULL: state lost */
	if (inverse && fc->isnull)
		return false;
	adopt(d, acc, mem, newval, fc->isnull);
	return true;
}

static inline bool
filter_passes(AggDef *d, TupleTableSlot *inputs)
{
	return d->filter_col < 0 ||
		(!inputs->tts_isnull[d->filter_col] && DatumGetBool(inputs->tts_values[d->filter_col]));
}

/* A hash of every value of an input row, to know it again when it is retracted. */
static int64
row_identity(TupleTableSlot *row)
{
	TupleDesc	desc = row->tts_tupleDescriptor;
	uint64		h = 0;
	int			i;

	slot_getallattrs(row);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		uint32		v = row->tts_isnull[i] ? 0x5bd1e995 :
			datum_image_hash(row->tts_values[i], att->attbyval, att->attlen);

		h = hash_combine64(h, (uint64) v * 0x9E3779B97F4A7C15 + i);
	}
	return (int64) h;
}

AttrNumber
aggs_inputs_upto(AggSet *set)
{
	return set->input_attnos != NULL ? set->input_maxattno : 0;
}

void
aggs_eval(AggSet *set, TupleTableSlot *row)
{
	if (set->inputs_proj == NULL)
	{
		/* no inputs at all (count(*)): an empty row, still a row */
		ExecClearTuple(set->inputs_slot);
		ExecStoreVirtualTuple(set->inputs_slot);
		return;
	}
	if (set->input_attnos != NULL)
	{
		TupleTableSlot *in = set->inputs_slot;
		int			i;

		slot_getsomeattrs(row, set->input_maxattno);
		ExecClearTuple(in);
		for (i = 0; i < in->tts_tupleDescriptor->natts; i++)
		{
			AttrNumber	a = set->input_attnos[i];

			if (a > 0)
			{
				in->tts_values[i] = row->tts_values[a - 1];
				in->tts_isnull[i] = row->tts_isnull[a - 1];
			}
		}
		ExecStoreVirtualTuple(in);
	}
	else
	{
		ResetExprContext(set->rowcxt);
		set->rowcxt->ecxt_scantuple = row;
		(void) ExecProject(set->inputs_proj);
		slot_getallattrs(set->inputs_slot);
	}
	if (set->identity_col >= 0)
		set->inputs_slot->tts_values[set->identity_col] = Int64GetDatum(row_identity(row));
}

void
aggs_init_sliced(AggSet *set, AggAcc *accs, AggMemory *mem)
{
	int			i;

	for (i = 0; i < set->naggs; i++)
		if (set->aggs[i].mode == AGG_SLICED)
			acc_init(&set->aggs[i], &accs[set->aggs[i].slot], mem);
}

void
aggs_init_moving(AggSet *set, AggAcc *accs, AggMemory *mem)
{
	int			i;

	for (i = 0; i < set->naggs; i++)
		if (set->aggs[i].mode == AGG_MOVING)
			acc_init(&set->aggs[i], &accs[set->aggs[i].slot], mem);
}

/* The evaluated inputs of d, from a slot of the inputs row's layout. */
static void
inputs_of(AggDef *d, TupleTableSlot *inputs, Datum **values, bool **nulls)
{
	*values = inputs->tts_values + d->first_input;
	*nulls = inputs->tts_isnull + d->first_input;
}

/*
 * One inputs row into the states of the aggregates of one mode: added
 * (weight +1) or taken back with the inverse (-1); false if an inverse
 * could not take it back.
 */
static bool
advance_mode(AggSet *set, AggMode mode, TupleTableSlot *inputs, AggAcc *accs, AggMemory *mem,
			 int weight)
{
	bool		ok = true;
	int			i;

	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		Datum	   *v;
		bool	   *n;

		if (d->mode != mode || !filter_passes(d, inputs))
			continue;
		inputs_of(d, inputs, &v, &n);
		if (mode == AGG_MOVING && d->transfn.flinfo.fn_strict && any_null(v, n, d->ntransinputs))
			continue;			/* a strict aggregate passes NULL inputs over both ways */
		if (weight > 0)
		{
			(void) call_transition(set, d, &d->transfn, &accs[d->slot], mem, v, n, false);
			accs[d->slot].ninputs++;
		}
		else if (accs[d->slot].ninputs <= 1)
		{
			/*
			 * Its last input goes: the initial state again, not the inverse
			 * (which would leave sum() at 0 where no input means NULL), as
			 * nodeWindowAgg does.
			 */
			acc_reset(d, &accs[d->slot], mem);
		}
		else
		{
			accs[d->slot].ninputs--;
			if (!call_transition(set, d, &d->invtransfn, &accs[d->slot], mem, v, n, true))
				ok = false;
		}
	}
	return ok;
}

void
aggs_advance_sliced(AggSet *set, AggAcc *accs, AggMemory *mem)
{
	TupleTableSlot *in = set->inputs_slot;
	int			k;
	bool		unused;

	if (set->sliced_fast == NULL)
	{
		(void) advance_mode(set, AGG_SLICED, in, accs, mem, 1);
		return;
	}
	/* advance_mode's work for transitions done inline (call_fast) */
	for (k = 0; k < set->nsliced; k++)
	{
		AggDef	   *d = set->sliced_fast[k];
		AggAcc	   *acc = &accs[d->slot];
		const Datum *v = in->tts_values + d->first_input;
		const bool *n = in->tts_isnull + d->first_input;

		Assert(d->mode == AGG_SLICED && d->filter_col < 0);
		if (!d->transfn.flinfo.fn_strict ||
			!strict_done(d, &d->transfn, acc, mem, v, n, false, &unused))
			call_fast(&d->transfn, acc, v, n);
		acc->ninputs++;
	}
}

bool
aggs_advance_moving(AggSet *set, AggAcc *accs, AggMemory *mem, int weight)
{
	return advance_mode(set, AGG_MOVING, set->inputs_slot, accs, mem, weight);
}

/* Are two rows of the inputs row's layout the same values, bit for bit? */
static bool
rows_image_equal(AggSet *set, TupleTableSlot *a, TupleTableSlot *b)
{
	int			i;

	slot_getallattrs(a);
	slot_getallattrs(b);
	for (i = 0; i < set->inputs_desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(set->inputs_desc, i);

		if (a->tts_isnull[i] != b->tts_isnull[i])
			return false;
		if (!a->tts_isnull[i] &&
			!datum_image_eq(a->tts_values[i], b->tts_values[i], att->attbyval, att->attlen))
			return false;
	}
	return true;
}

/* Append a row (allocated in mem) to a kept-rows array of mem. */
static void
rows_push(AggRows *rows, AggMemory *mem, MinimalTuple row)
{
	if (rows->n == rows->cap)
	{
		int			cap = Max(8, rows->cap * 2);
		MinimalTuple *r = MemoryContextAlloc(mem->cxt, sizeof(MinimalTuple) * cap);

		if (rows->n > 0)
			memcpy(r, rows->rows, sizeof(MinimalTuple) * rows->n);
		if (rows->rows)
			pfree(rows->rows);
		rows->rows = r;
		rows->cap = cap;
	}
	rows->rows[rows->n++] = row;
}

void
aggs_rows_add(AggSet *set, AggRows *rows, AggMemory *mem, MinimalTuple row)
{
	MemoryContext old = MemoryContextSwitchTo(mem->cxt);

	rows_push(rows, mem, heap_copy_minimal_tuple(row));
	MemoryContextSwitchTo(old);
}

bool
aggs_rows_apply(AggSet *set, AggRows *rows, AggMemory *mem, int weight)
{
	int			i;

	if (weight > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(mem->cxt);

		rows_push(rows, mem, ExecCopySlotMinimalTuple(set->inputs_slot));
		MemoryContextSwitchTo(old);
		return true;
	}

	/* a retraction takes out the last equal row: usually a recent one */
	for (i = rows->n - 1; i >= 0; i--)
	{
		ExecStoreMinimalTuple(rows->rows[i], set->replay_slot, false);
		if (rows_image_equal(set, set->replay_slot, set->inputs_slot))
		{
			ExecClearTuple(set->replay_slot);
			pfree(rows->rows[i]);
			memmove(&rows->rows[i], &rows->rows[i + 1], sizeof(MinimalTuple) * (rows->n - i - 1));
			rows->n--;
			return true;
		}
	}
	ExecClearTuple(set->replay_slot);
	return false;
}

void
aggs_moving_add_rows(AggSet *set, AggAcc *maccs, AggMemory *mem, const AggRows *rows)
{
	int			r;

	for (r = 0; r < rows->n; r++)
	{
		ExecStoreMinimalTuple(rows->rows[r], set->replay_slot, false);
		slot_getallattrs(set->replay_slot);
		(void) advance_mode(set, AGG_MOVING, set->replay_slot, maccs, mem, 1);
	}
	ExecClearTuple(set->replay_slot);
}

void
aggs_merge_into(AggSet *set, AggAcc *accs, AggRows *rows, AggMemory *mem,
				const AggAcc *other_accs, const AggRows *other_rows)
{
	int			i;

	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		const AggAcc *o;

		if (d->mode != AGG_SLICED)
			continue;
		o = &other_accs[d->slot];
		Assert(OidIsValid(d->combinefn.oid));
		if (o->notrans)
			continue;

		/*
		 * A NULL state left by a non-strict transition function is, as a
		 * partial state, no input at all (nodeAgg's combine phase skips it):
		 * the other state is taken as it is, not lost to a strict combine.
		 */
		if (accs[d->slot].isnull)
			accs[d->slot].notrans = true;
		(void) call_transition(set, d, &d->combinefn, &accs[d->slot], mem, &o->value,
							   &o->isnull, false);
	}
	for (i = 0; i < other_rows->n; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(mem->cxt);

		rows_push(rows, mem, heap_copy_minimal_tuple(other_rows->rows[i]));
		MemoryContextSwitchTo(old);
	}
}

/* ---- firing ---- */

void
aggs_window_begin(AggSet *set, AggMemory *mem)
{
	set->win_mem = mem;
	set->win_rows = NIL;
	set->win_moving_given = false;
	memset(set->win_accs, 0, sizeof(AggAcc) * set->naggs);
	memset(set->win_started, 0, sizeof(bool) * set->naggs);
}

void
aggs_window_add_slice(AggSet *set, const AggAcc *accs, const AggRows *rows)
{
	int			i;

	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		AggAcc	   *w = &set->win_accs[i];
		const AggAcc *s;

		if (d->mode != AGG_SLICED)
			continue;
		s = &accs[d->slot];
		/*
		 * A window of one slice (TUMBLE) takes the slice's state as its own
		 * instead of a combined copy when the final function only reads it
		 * (the slice stays as it was); without a combine function there is
		 * no other way.
		 */
		if (!OidIsValid(d->combinefn.oid) || (set->one_slice && d->final_read_only))
		{
			Assert(!set->win_started[i]);
			*w = *s;
			set->win_started[i] = true;
			continue;
		}
		if (!set->win_started[i])
		{
			acc_init(d, w, set->win_mem);
			set->win_started[i] = true;
		}
		/* a slice without input for it holds its initial state: nothing to add */
		if (s->notrans)
			continue;
		(void) call_transition(set, d, &d->combinefn, w, set->win_mem, &s->value,
							   &s->isnull, false);
	}
	if (rows != NULL && rows->n > 0)
		set->win_rows = lappend(set->win_rows, (void *) rows);
}

/*
 * Do states need memory of their own?  Not when every aggregate is SLICED
 * with a by-value state that its transition and combine functions, run
 * inline, make without allocating (count, sums and min/max of integers):
 * a slice is then its states alone, and its AggMemory may be NULL.
 */
bool
aggs_need_memory(AggSet *set)
{
	int			i;

	if (set->keeps_rows)
		return true;
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];

		if (d->mode != AGG_SLICED || !d->transbyval || d->transfn.fast == AGG_FAST_NONE ||
			(OidIsValid(d->combinefn.oid) && d->combinefn.fast == AGG_FAST_NONE))
			return true;
	}
	return false;
}

/* ---- sliding windows ---- */

bool
aggs_can_slide(AggSet *set)
{
	int			i;

	if (set->keeps_rows || set->naggs == 0)
		return false;
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];

		if (d->mode != AGG_SLICED || d->combinefn.fast != AGG_FAST_INT8PL ||
			d->transtype != INT8OID || !d->transbyval)
			return false;
	}
	return true;
}

AggSlide *
aggs_slide_create(AggSet *set, MemoryContext cxt)
{
	AggSlide   *slide = MemoryContextAlloc(cxt, sizeof(AggSlide));

	Assert(aggs_can_slide(set));
	slide->sums = MemoryContextAllocZero(cxt, sizeof(int64) * set->nsliced);
	slide->nstates = MemoryContextAllocZero(cxt, sizeof(int32) * set->nsliced);
	return slide;
}

void
aggs_slide_clear(AggSet *set, AggSlide *slide)
{
	memset(slide->sums, 0, sizeof(int64) * set->nsliced);
	memset(slide->nstates, 0, sizeof(int32) * set->nsliced);
}

/*
 * A slice's state is skipped by the strict combine when it has no input
 * (notrans) or is NULL (sum over NULLs alone): it adds nothing and does
 * not count.  Sums are checked as int8pl checks them; on overflow the
 * caller combines the window slice by slice instead, with int8pl's errors.
 */
bool
aggs_slide_add(AggSet *set, AggSlide *slide, const AggAcc *accs, bool take_away)
{
	int			j;

	for (j = 0; j < set->nsliced; j++)
	{
		const AggAcc *s = &accs[j];
		int64		v;

		if (s->notrans || s->isnull)
			continue;
		v = DatumGetInt64(s->value);
		if (take_away)
		{
			if (unlikely(pg_sub_s64_overflow(slide->sums[j], v, &slide->sums[j])))
				return false;
			slide->nstates[j]--;
			Assert(slide->nstates[j] >= 0);
		}
		else
		{
			if (unlikely(pg_add_s64_overflow(slide->sums[j], v, &slide->sums[j])))
				return false;
			slide->nstates[j]++;
		}
	}
	return true;
}

/*
 * What combining the slices would give: the initial state when no slice
 * has a state; else the sum, after the initial value when there is one
 * (int8pl is strict: with no initial value the first state becomes the
 * window's).  The sum is exact; combined slice by slice, a sum whose
 * running total leaves int8's range and comes back (2^32 rows of int4s of
 * mixed signs in one window) would fail instead.
 */
bool
aggs_window_from_slide(AggSet *set, const AggSlide *slide)
{
	int			i;

	Assert(aggs_can_slide(set));
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		AggAcc	   *w = &set->win_accs[i];
		int64		sum = slide->sums[d->slot];

		acc_init(d, w, set->win_mem);
		set->win_started[i] = true;
		if (slide->nstates[d->slot] == 0)
			continue;
		if (!w->isnull &&
			unlikely(pg_add_s64_overflow(DatumGetInt64(w->value), sum, &sum)))
			return false;
		w->value = Int64GetDatum(sum);
		w->isnull = false;
		w->notrans = false;
	}
	return true;
}

#ifdef USE_ASSERT_CHECKING
bool
aggs_window_equals_slide(AggSet *set, const AggSlide *slide)
{
	AggAcc	   *combined = palloc(sizeof(AggAcc) * set->naggs);
	bool		same;
	int			i;

	/* what aggs_window_finish would take: a state never started is the initial one */
	for (i = 0; i < set->naggs; i++)
	{
		combined[i] = set->win_accs[i];
		if (!set->win_started[i])
			acc_init(&set->aggs[i], &combined[i], set->win_mem);
	}
	if (!aggs_window_from_slide(set, slide))
	{
		pfree(combined);
		return true;			/* overflow: the caller combines the slices */
	}
	same = true;
	for (i = 0; same && i < set->naggs; i++)
	{
		AggAcc	   *a = &combined[i];
		AggAcc	   *b = &set->win_accs[i];

		same = a->isnull == b->isnull &&
			(a->isnull || DatumGetInt64(a->value) == DatumGetInt64(b->value));
	}
	pfree(combined);
	return same;
}
#endif

void
aggs_window_set_moving(AggSet *set, const AggAcc *maccs)
{
	int			i;

	set->win_moving_given = (maccs != NULL);
	if (maccs == NULL)
		return;
	for (i = 0; i < set->naggs; i++)
		if (set->aggs[i].mode == AGG_MOVING)
		{
			set->win_accs[i] = maccs[set->aggs[i].slot];
			set->win_started[i] = true;
		}
}

/* Feed the window's kept rows, sorted and de-duplicated if need be, to d. */
static void
replay_rows(AggSet *set, AggDef *d, AggAcc *acc)
{
	ListCell   *lc;
	Tuplesortstate *sort = NULL;
	TupleTableSlot *sorted = NULL;
	TupleTableSlot *prev = NULL;
	bool		have_prev = false;

	if (d->ordered)
	{
		sort = tuplesort_begin_heap(d->sortdesc, d->nsort, d->sort_cols, d->sort_ops,
									d->sort_colls, d->sort_nulls_first, work_mem,
									NULL, TUPLESORT_NONE);
		sorted = MakeSingleTupleTableSlot(d->sortdesc, &TTSOpsMinimalTuple);
		prev = MakeSingleTupleTableSlot(d->sortdesc, &TTSOpsVirtual);
	}
	foreach(lc, set->win_rows)
	{
		AggRows    *rows = (AggRows *) lfirst(lc);
		int			r;

		for (r = 0; r < rows->n; r++)
		{
			Datum	   *v;
			bool	   *n;

			ExecStoreMinimalTuple(rows->rows[r], set->replay_slot, false);
			slot_getallattrs(set->replay_slot);
			if (!filter_passes(d, set->replay_slot))
				continue;
			inputs_of(d, set->replay_slot, &v, &n);
			if (sort)
			{
				ExecClearTuple(prev);
				memcpy(prev->tts_values, v, sizeof(Datum) * d->ninputs);
				memcpy(prev->tts_isnull, n, sizeof(bool) * d->ninputs);
				ExecStoreVirtualTuple(prev);
				tuplesort_puttupleslot(sort, prev);
			}
			else
				(void) call_transition(set, d, &d->transfn, acc, set->win_mem, v, n, false);
		}
	}
	ExecClearTuple(set->replay_slot);
	if (sort == NULL)
		return;

	tuplesort_performsort(sort);
	ExecClearTuple(prev);
	while (tuplesort_gettupleslot(sort, true, true, sorted, NULL))
	{
		slot_getallattrs(sorted);
		if (d->distinct && have_prev)
		{
			ExprContext *ec = set->aggstate->tmpcontext;

			ec->ecxt_outertuple = sorted;
			ec->ecxt_innertuple = prev;
			if (ExecQualAndReset(d->eq_state, ec))
				continue;
		}
		(void) call_transition(set, d, &d->transfn, acc, set->win_mem,
							   sorted->tts_values, sorted->tts_isnull, false);
		if (d->distinct)
		{
			ExecClearTuple(prev);
			ExecCopySlot(prev, sorted);
			have_prev = true;
		}
	}
	tuplesort_end(sort);
	ExecDropSingleTupleTableSlot(sorted);
	ExecDropSingleTupleTableSlot(prev);
}

static void
finalize(AggSet *set, AggDef *d, AggAcc *acc, Datum *result, bool *isnull)
{
	MemoryContext old = MemoryContextSwitchTo(set->win_mem->cxt);

	if (OidIsValid(d->finalfn.oid))
	{
		FunctionCallInfo fc = d->finalfn.fcinfo;
		int			i;
		bool		anynull = acc->isnull;

		set->aggstate->curaggcontext = &set->win_mem->econtext;
		set->aggstate->curpertrans = &d->pertrans;
		fc->args[0].value = acc->isnull ? (Datum) 0 :
			MakeExpandedObjectReadOnly(acc->value, acc->isnull, d->translen);
		fc->args[0].isnull = acc->isnull;
		for (i = 1; i < d->nfinalargs; i++)
		{
			fc->args[i].value = (Datum) 0;
			fc->args[i].isnull = true;
			anynull = true;
		}
		fc->isnull = false;
		if (d->finalfn.flinfo.fn_strict && anynull)
		{
			*result = (Datum) 0;
			*isnull = true;
		}
		else
		{
			*result = FunctionCallInvoke(fc);
			*isnull = fc->isnull;
		}
		set->aggstate->curpertrans = NULL;
	}
	else
	{
		*result = acc->value;
		*isnull = acc->isnull;
	}
	/* the result outlives the state: a copy in the window's memory */
	if (!*isnull && !d->resultbyval)
		*result = datumCopy(*result, d->resultbyval, d->resultlen);
	MemoryContextSwitchTo(old);
}

void
aggs_window_finish(AggSet *set, Datum *keys, bool *keynulls, Datum *values, bool *nulls)
{
	TupleTableSlot *outer = set->outer_slot;
	int			i;

	ExecClearTuple(outer);
	for (i = 0; i < set->nkeys; i++)
	{
		outer->tts_values[i] = keys[i];
		outer->tts_isnull[i] = keynulls[i];
	}
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		AggAcc	   *acc = &set->win_accs[i];

		if (d->mode == AGG_REPLAY || (d->mode == AGG_MOVING && !set->win_moving_given))
		{
			acc_init(d, acc, set->win_mem);
			replay_rows(set, d, acc);
		}
		else if (!set->win_started[i])
			acc_init(d, acc, set->win_mem); /* no slice: the initial state */
		finalize(set, d, acc, &outer->tts_values[set->nkeys + i],
				 &outer->tts_isnull[set->nkeys + i]);
	}
	ExecStoreVirtualTuple(outer);
	for (i = 0; i < set->noutputs; i++)
	{
		AttrNumber	a = set->output_outer[i];
		MemoryContext old;

		if (a > 0)
		{
			values[i] = outer->tts_values[a - 1];
			nulls[i] = outer->tts_isnull[a - 1];
			continue;
		}
		old = MemoryContextSwitchTo(set->win_mem->cxt);
		values[i] = ExecEvalExpr(set->output_exprs[i], set->outcxt, &nulls[i]);
		MemoryContextSwitchTo(old);
	}
}
