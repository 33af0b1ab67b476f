/*-------------------------------------------------------------------------
 *
 * temporal_join.c
 *	  SQL entry point of ptf.temporal_join(): checks the arguments, compiles
 *	  the residual condition, then wires build and probe -> frame ->
 *	  temporal join operator -> output, over memory state or, with a uid,
 *	  durable state.
 *
 * Every argument is checked before a single row is read (doc/design.md §2):
 * join types (Flink refuses RIGHT and FULL against a versioned table),
 * the equi key (Flink refuses a temporal join without one), key columns
 * of both sides and their types, the time columns, the condition (parsed
 * and analyzed by PostgreSQL over the aliases probe and build, boolean,
 * not volatile), and a probe query returning a changelog.  The condition
 * is planned here once and instantiated with the executor's expression
 * machinery for each operator: an operator a pipeline worker keeps
 * between steps outlives this call.
 *
 * The per-row logic is in operators/temporal_join.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/heap.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_relation.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "catalog.h"
#include "engine/call.h"
#include "engine/parallel.h"
#include "functions/common.h"
#include "operators/temporal_join.h"

PG_FUNCTION_INFO_V1(ptf_temporal_join);

/* argument positions, as declared in the install script */
enum
{
	ARG_PROBE,
	ARG_BUILD,
	ARG_PROBE_TIME,
	ARG_BUILD_TIME,
	ARG_PROBE_KEY,
	ARG_BUILD_KEY,
	ARG_JOIN_TYPE,
	ARG_CONDITION,
	ARG_STATE_TTL,
	ARG_UID,
	ARG_PROBE_QUERY,
	ARG_BUILD_QUERY,
	ARG_CHANGES,
	ARG_WATERMARK_DELAY,
	ARG_PROC_TIME,
	ARG_SNAPSHOT
};

typedef struct TjCall
{
	PtfCall		call;
	TemporalJoinOptions opts;	/* what every operator of the call shares */
	Node	   *condition;		/* planned; probe's Vars OUTER_VAR, build's INNER_VAR */
	int64		delay;			/* given, or -1 */
	const char *time_names[2];	/* build_time, probe_time */
	uint64		skipped;		/* probe updates and deletes passed over */
	PtfOutput	out;

	/*
	 * A build stream's -U, until its +U says whether the update moved the
	 * row to another key (build_adapter)
	 */
	KeySpec    *move_keys;		/* the build key, probed apart from the operator */
	TupleTableSlot *before;		/* the -U, or empty */
	PtfRowMeta	before_meta;
	StringInfoData before_key;	/* its key, packed */
	bool		before_key_nulls;
} TjCall;

/* One operator's instance of the condition. */
typedef struct TjCondition
{
	ExprState  *qual;
	ExprContext *econtext;
} TjCondition;

/* ---- the residual condition ---- */

static bool
eval_condition(void *arg, TupleTableSlot *probe, TupleTableSlot *build)
{
	TjCondition *c = (TjCondition *) arg;
	bool		match;

	c->econtext->ecxt_outertuple = probe;
	c->econtext->ecxt_innertuple = build;
	match = ExecQual(c->qual, c->econtext);
	ResetExprContext(c->econtext);
	return match;
}

/* The side's columns under alias, as a FROM item would name them. */
static void
add_side(ParseState *pstate, Oid rowtype, const char *alias)
{
	Relation	rel = relation_open(typeidTypeRelid(rowtype), AccessShareLock);
	ParseNamespaceItem *nsitem;

	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock,
										   makeAlias(alias, NIL), false, false);
	addNSItemToQuery(pstate, nsitem, false, true, true);
	relation_close(rel, NoLock);
}

/* Point the sides' Vars at the expression context's outer and inner slots. */
static bool
vars_to_slots(Node *node, void *arg)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		Assert(var->varlevelsup == 0 && (var->varno == 1 || var->varno == 2));
		var->varno = (var->varno == 1) ? OUTER_VAR : INNER_VAR;
		return false;
	}
	return expression_tree_walker(node, vars_to_slots, arg);
}

/*
 * The condition is evaluated against the probe row and the version kept
 * in state: rows with no place in a table, whose system columns (ctid,
 * tableoid, xmin, ...) would read as zeros.  Refused as a column the row
 * type lacks, as window_aggregate's aggregates refuse them.
 */
static bool
refuse_system_columns(Node *node, ParseState *pstate)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var) && ((Var *) node)->varattno < 0)
	{
		Var		   *var = (Var *) node;
		const FormData_pg_attribute *att = SystemAttributeDefinition(var->varattno);

		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %s.%s does not exist in a temporal join's condition",
						var->varno == 1 ? "probe" : "build", NameStr(att->attname)),
				 errdetail("The condition is evaluated against the probe row and the version kept in state, which are rows of no table: they have no system columns."),
				 errhint("Name columns of the row types."),
				 parser_errposition(pstate, var->location)));
	}
	return expression_tree_walker(node, refuse_system_columns, pstate);
}

static void
bad_condition(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("condition must be one SQL expression over probe and build"),
			 errdetail("%s", why),
			 errhint("For example: condition => 'probe.amount < build.rate'.")));
}

/*
 * Parse and analyze the condition over probe.* and build.*, and plan it:
 * PostgreSQL resolves names, types, operators and functions exactly as in
 * a join's ON clause.
 */
static Node *
compile_condition(const char *text, Oid probe_type, Oid build_type)
{
	PtfParsedText pt;
	List	   *raw;
	SelectStmt *sel;
	ResTarget  *rt;
	ParseState *pstate;
	Node	   *expr;

	ptf_parsed_text_push(&pt, text);
	raw = raw_parser(text, RAW_PARSE_PLPGSQL_EXPR);
	if (list_length(raw) != 1)
		bad_condition("It is not a single expression.");
	sel = (SelectStmt *) linitial_node(RawStmt, raw)->stmt;
	if (!IsA(sel, SelectStmt) || list_length(sel->targetList) != 1 ||
		sel->fromClause != NIL || sel->whereClause != NULL || sel->groupClause != NIL ||
		sel->havingClause != NULL || sel->windowClause != NIL || sel->sortClause != NIL ||
		sel->limitCount != NULL || sel->limitOffset != NULL || sel->lockingClause != NIL ||
		sel->distinctClause != NIL || sel->intoClause != NULL)
		bad_condition("It has more than an expression.");
	rt = linitial_node(ResTarget, sel->targetList);
	if (rt->name != NULL)
		bad_condition("An expression has no alias.");

	pstate = make_parsestate(NULL);
	pstate->p_sourcetext = text;
	add_side(pstate, probe_type, "probe");
	add_side(pstate, build_type, "build");
	expr = transformExpr(pstate, rt->val, EXPR_KIND_JOIN_ON);
	refuse_system_columns(expr, pstate);
	if (exprType(expr) != BOOLOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("condition must be of type boolean, not type %s",
						format_type_be(exprType(expr)))));
	assign_expr_collations(pstate, expr);
	if (pstate->p_hasSubLinks)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("condition cannot contain subqueries"),
				 errdetail("It is evaluated against one probe row and one version, outside any plan.")));
	if (contain_volatile_functions(expr))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("condition must not call volatile functions"),
				 errdetail("A probe row is joined when the watermark passes it, which may be in a later call: a volatile condition would give answers that depend on when that happens.")));
	free_parsestate(pstate);
	ptf_parsed_text_pop(&pt);

	expr = (Node *) expression_planner((Expr *) expr);
	vars_to_slots(expr, NULL);
	return expr;
}

/* ---- the call ---- */

static PtfOperator *
build_temporal_join(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	TjCall	   *tc = (TjCall *) call;
	TemporalJoinOptions opts = tc->opts;

	opts.build_desc = b->rowdescs[TJ_INPUT_BUILD];
	opts.probe_desc = b->rowdescs[TJ_INPUT_PROBE];
	opts.keys = b->keys[TJ_INPUT_BUILD];
	if (tc->condition != NULL)
	{
		/* in the operator's memory: it may outlive the call */
		MemoryContext old = MemoryContextSwitchTo(env->cxt);
		TjCondition *c = palloc(sizeof(TjCondition));

		c->qual = ExecInitQual(list_make1(copyObject(tc->condition)), NULL);
		c->econtext = CreateStandaloneExprContext();
		MemoryContextSwitchTo(old);
		opts.condition = eval_condition;
		opts.condition_arg = c;
	}
	return temporal_join_create(&opts, env);
}

/* Probe rows are the enriched events: their updates and deletes are passed over. */
static void
probe_adapter(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	TjCall	   *tc = (TjCall *) arg;

	if (kind != ROWKIND_INSERT)
	{
		/* an UPDATE counts once: its -U half with its +U */
		if (kind != ROWKIND_UPDATE_BEFORE)
			tc->skipped++;
		return;
	}
	frame_push(tc->call.inputs[TJ_INPUT_PROBE].handle, kind, row, meta);
}

/*
 * Does the +U row move the row of the -U held in tc to another build key?
 * Keys compare as the keyed state compares them (packed).
 */
static bool
update_moves_key(TjCall *tc, TupleTableSlot *after)
{
	KeySpec    *keys = tc->move_keys;

	key_probe_fill(keys, after);
	return !key_packed_equals_probe(keys, tc->before_key.data, tc->before_key_nulls);
}

/*
 * Build rows of a change stream, into the frame.  A version is kept and
 * emitted later: it must hold every value.
 *
 * An UPDATE that changes the build key (PostgreSQL logs the old key then,
 * under any replica identity) is, for the old key, a deletion at the old
 * row's build_time, as a CDC source that Flink reads (Debezium) turns a
 * key change into a delete and an insert: else the old key's last version
 * would stay valid for ever.  Within one key, the -U goes to the operator,
 * which passes it over (its +U follows).  A -U and its +U come one after
 * the other, from one change: the -U is held for that moment only.
 */
static void
build_adapter(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	TjCall	   *tc = (TjCall *) arg;
	PtfFrameInput *input = tc->call.inputs[TJ_INPUT_BUILD].handle;

	if (meta != NULL && ROWKIND_IS_ADDITION(kind))
		ptf_check_meta_complete(meta);
	if (kind == ROWKIND_UPDATE_AFTER && !TupIsNull(tc->before) && update_moves_key(tc, row))
		frame_push(input, ROWKIND_DELETE, tc->before, &tc->before_meta);
	ExecClearTuple(tc->before);
	if (kind == ROWKIND_UPDATE_BEFORE)
	{
		KeySpec    *keys = tc->move_keys;
		Size		size;

		ExecCopySlot(tc->before, row);
		tc->before_meta = meta != NULL ? *meta : ptf_no_meta;
		key_probe_fill(keys, tc->before);
		size = key_packed_size(keys);
		resetStringInfo(&tc->before_key);
		enlargeStringInfo(&tc->before_key, size);
		memset(tc->before_key.data, 0, size);
		key_pack(keys, tc->before_key.data);
		tc->before_key_nulls = keys->probe_has_nulls;
	}
	frame_push(input, kind, row, meta);
}

static uint64
temporal_join_skipped(PtfCall *call, PtfOperator *op)
{
	return ((TjCall *) call)->skipped + temporal_join_unknown_deletes(op);
}

/*
 * A deletion of the build side is a version at the deleted row's time:
 * its old image must carry its key and build_time, which REPLICA IDENTITY
 * FULL, or an identity that includes those columns, logs.  Under an
 * identity that is the build key itself (a primary key, as Flink asks of a
 * versioned table) the deleted row is the key's last row written, whose
 * time the join keeps: true then, the build side is read as an upsert
 * source.
 */
static bool
build_is_upsert_source(Oid relid, AttrNumber time_attno, KeySpec *build_key,
					   const char *build_time)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	char		ident = rel->rd_rel->relreplident;
	Bitmapset  *idattrs = NULL;
	Bitmapset  *keyattrs = NULL;
	int			i;

	if (ident != REPLICA_IDENTITY_FULL && ident != REPLICA_IDENTITY_NOTHING)
		idattrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);
	relation_close(rel, NoLock);
	if (ident == REPLICA_IDENTITY_FULL)
		return false;
	for (i = 0; i < build_key->ncols; i++)
		keyattrs = bms_add_member(keyattrs,
								  build_key->cols[i].attno - FirstLowInvalidHeapAttributeNumber);
	/* the old image names the deleted version itself: its key and its time */
	if (bms_is_member(time_attno - FirstLowInvalidHeapAttributeNumber, idattrs) &&
		bms_is_subset(keyattrs, idattrs))
		return false;
	if (idattrs != NULL && bms_equal(idattrs, keyattrs))
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the build side's change stream must log build_time \"%s\" of deleted rows",
					build_time),
			 errdetail("A deletion is a version at the deleted row's build_time, and table %s logs only its replica identity of a deleted row, which is neither build_key nor includes both build_key and build_time.",
					   ptf_relation_sql_name(relid)),
			 errhint("ALTER TABLE %s REPLICA IDENTITY FULL; or give the table the build key as its primary key.",
					 ptf_relation_sql_name(relid))));
	return false;				/* keep the compiler quiet */
}

/* The inputs are planned: their shapes are known, and the watermarks are decided. */
static void
temporal_join_prepared(PtfCall *call)
{
	TjCall	   *tc = (TjCall *) call;
	int			i;

	if (call->inputs[TJ_INPUT_PROBE].sql.changelog)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the probe side of a temporal join cannot be a changelog"),
				 errdetail("probe_query returns (kind, data) rows; a temporal join enriches insert-only events."),
				 errhint("Only the build side may be a changelog: pass it as build_query.")));

	for (i = 0; i < call->ninputs; i++)
	{
		PtfCallInput *in = &call->inputs[i];

		/* given for both sides, else declared on each table */
		ptf_input_watermark(&in->frame, in->arg.relid, tc->time_names[i], tc->delay,
							call->uid != NULL);
		if (in->frame.has_delay)
			tc->opts.live = true;
	}
	/* bounded, without watermarks: a probe row's answer is its own (engine/parallel.c) */
	if (!tc->opts.live && (tc->condition == NULL || ptf_parallel_expr_safe(tc->condition)))
	{
		call->parallel = PTF_PARALLEL_SPLIT;
		call->parallel_input = TJ_INPUT_PROBE;
	}
}

/* 'inner' or 'left' (Flink's only temporal joins); true for LEFT. */
static bool
join_type_arg(FunctionCallInfo fcinfo)
{
	char	   *s = ptf_text_arg(fcinfo, ARG_JOIN_TYPE);
	char	   *t;

	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("join_type must not be NULL")));
	t = asc_tolower(s, strlen(s));
	if (strcmp(t, "inner") == 0)
		return false;
	if (strcmp(t, "left") == 0 || strcmp(t, "left outer") == 0)
		return true;
	if (strcmp(t, "right") == 0 || strcmp(t, "right outer") == 0 ||
		strcmp(t, "full") == 0 || strcmp(t, "full outer") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a temporal join is INNER or LEFT, not %s", s),
				 errdetail("Flink refuses RIGHT and FULL joins against a versioned table: a version has no event time of its own to be emitted at.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown join_type \"%s\"", s),
			 errhint("join_type is 'inner' or 'left'.")));
	return false;				/* keep the compiler quiet */
}

/* The equi key of both sides: as many columns, of the same types. */
static void
keys_args(FunctionCallInfo fcinfo, PtfCallInput *probe, PtfCallInput *build)
{
	KeySpec    *pk;
	KeySpec    *bk;
	int			i;

	if (PG_ARGISNULL(ARG_PROBE_KEY))
		pk = NULL;
	else
		pk = key_spec_build(probe->frame.rowdesc, PG_GETARG_DATUM(ARG_PROBE_KEY), "probe_key");
	if (pk == NULL || pk->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a temporal join needs an equi key: probe_key names no column"),
				 errdetail("Flink refuses a temporal join without an equality on the versioned table's key.")));
	/* NULL: the probe's key names */
	bk = key_spec_build(build->frame.rowdesc,
						PG_GETARG_DATUM(PG_ARGISNULL(ARG_BUILD_KEY) ? ARG_PROBE_KEY : ARG_BUILD_KEY),
						"build_key");
	if (bk->ncols != pk->ncols)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("probe_key names %d columns, build_key %d", pk->ncols, bk->ncols)));
	for (i = 0; i < pk->ncols; i++)
	{
		Form_pg_attribute pa = TupleDescAttr(probe->frame.rowdesc, pk->cols[i].attno - 1);
		Form_pg_attribute ba = TupleDescAttr(build->frame.rowdesc, bk->cols[i].attno - 1);

		if (pk->cols[i].typid != bk->cols[i].typid)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key column \"%s\" of the probe side has type %s, but \"%s\" of the build side has type %s",
							NameStr(pa->attname), format_type_be(pa->atttypid),
							NameStr(ba->attname), format_type_be(ba->atttypid)),
					 errhint("Cast one side in probe_query or build_query.")));
	}
	probe->frame.keys = pk;
	build->frame.keys = bk;
}

/* A time column of one side: it must be given. */
static void
time_arg(FunctionCallInfo fcinfo, int argno, const char *name, PtfCallInput *in)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name),
				 errdetail("An event-time temporal join needs the event time of both sides.")));
	in->frame.on_time_attno = ptf_time_column_arg(fcinfo, argno, in->frame.rowdesc, name,
												  &in->frame.on_time_type);
}

Datum
ptf_temporal_join(PG_FUNCTION_ARGS)
{
	TjCall		tc;
	PtfCall    *call = &tc.call;
	PtfInputArg probe_arg;
	PtfInputArg build_arg;
	PtfCallInput *build;
	PtfCallInput *probe;
	char	   *probe_query;
	char	   *build_query;
	char	   *condition;
	int64		ttl;
	MemoryContext old;

	memset(&tc, 0, sizeof(tc));
	ptf_call_init(call, "temporal_join");

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_PROBE, "probe", &probe_arg);
	ptf_input_arg(fcinfo, ARG_BUILD, "build", &build_arg);
	probe_query = ptf_text_arg(fcinfo, ARG_PROBE_QUERY);
	build_query = ptf_text_arg(fcinfo, ARG_BUILD_QUERY);
	/* bounded inputs are read in this order: every version before the first probe */
	build = ptf_call_add_input(call, "build", &build_arg, build_query);
	probe = ptf_call_add_input(call, "probe", &probe_arg, probe_query);
	Assert(build == &call->inputs[TJ_INPUT_BUILD] && probe == &call->inputs[TJ_INPUT_PROBE]);

	tc.opts.left = join_type_arg(fcinfo);
	keys_args(fcinfo, probe, build);
	time_arg(fcinfo, ARG_PROBE_TIME, "probe_time", probe);
	time_arg(fcinfo, ARG_BUILD_TIME, "build_time", build);
	if (probe->frame.on_time_type != build->frame.on_time_type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("probe_time has type %s, but build_time has type %s",
						format_type_be(probe->frame.on_time_type),
						format_type_be(build->frame.on_time_type)),
				 errhint("Both sides' event times must be of one type.")));
	tc.time_names[TJ_INPUT_BUILD] = ptf_text_arg(fcinfo, ARG_BUILD_TIME);
	tc.time_names[TJ_INPUT_PROBE] = ptf_text_arg(fcinfo, ARG_PROBE_TIME);

	ttl = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	call->uid = ptf_uid_arg(fcinfo, ARG_UID);
	call->changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&probe_arg, probe_query, call->changes, call->uid);
	ptf_check_input_choice(&build_arg, build_query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, ARG_SNAPSHOT, call->changes, call->uid);
	tc.delay = ptf_interval_arg(fcinfo, ARG_WATERMARK_DELAY, "watermark_delay");
	/* processing time: a column of both sides, or the clock */
	probe->frame.proc_time_attno = ptf_time_column_arg(fcinfo, ARG_PROC_TIME, probe->frame.rowdesc,
													   "proc_time", &probe->frame.proc_time_type);
	build->frame.proc_time_attno = ptf_time_column_arg(fcinfo, ARG_PROC_TIME, build->frame.rowdesc,
													   "proc_time", &build->frame.proc_time_type);

	condition = ptf_text_arg(fcinfo, ARG_CONDITION);
	if (condition != NULL)
	{
		old = MemoryContextSwitchTo(call->cxt);
		tc.condition = compile_condition(condition, probe_arg.rowtype, build_arg.rowtype);
		MemoryContextSwitchTo(old);
	}
	if (call->changes)
	{
		tc.opts.upsert_build = build_is_upsert_source(build_arg.relid, build->frame.on_time_attno,
													  build->frame.keys,
													  tc.time_names[TJ_INPUT_BUILD]);
		/* its deletes have only the key: their time is the key's last row's */
		build->frame.partial_untimed = tc.opts.upsert_build;
		build->adapter = build_adapter;
		build->adapter_arg = &tc;
		old = MemoryContextSwitchTo(call->cxt);
		tc.move_keys = key_spec_copy(build->frame.keys, build->frame.rowdesc);
		tc.before = MakeSingleTupleTableSlot(build->frame.rowdesc, &TTSOpsMinimalTuple);
		initStringInfo(&tc.before_key);
		MemoryContextSwitchTo(old);
		probe->adapter = probe_adapter;
		probe->adapter_arg = &tc;
		/* its updates are passed over: an incomplete image of one stops nothing */
		probe->inserts_only = true;
		/* a version keeps the row, but an update's new image must be whole */
		build->rows_not_kept = true;
		/* a truncation removes neither versions nor events already seen */
		build->on_truncate = probe->on_truncate = TRUNCATE_SKIP;
	}

	/* Flink's TTL scheme: a retention above 1 ms, on processing-time timers */
	tc.opts.retention_us = ttl;
	call->need_proc_time = ttl > 1000;
	/* the TTL is the operator's own scheme, not the keyed state's */
	call->ttl_us = 0;
	tc.opts.live = call->uid != NULL || call->need_proc_time;
	if (!call->need_proc_time)
		tc.opts.retention_us = 0;
	/* without the TTL's processing-time timers, state may be read key by key */
	call->probe_ok = !call->need_proc_time;

	call->on_time = tc.time_names[TJ_INPUT_PROBE];
	call->time_type = probe->frame.on_time_type;
	call->options = psprintf("%s temporal join of probe key at %s, build key at %s%s%s",
							 tc.opts.left ? "LEFT" : "INNER",
							 quote_identifier(tc.time_names[TJ_INPUT_PROBE]),
							 quote_identifier(tc.time_names[TJ_INPUT_BUILD]),
							 condition ? " on " : "", condition ? condition : "");
	/* the time of each key's last row is kept: a uid reads its build side one way */
	if (tc.opts.upsert_build)
		call->options = psprintf("%s, build side by its primary key", call->options);
	call->layout = tc.opts.upsert_build ? &temporal_join_upsert_layout : &temporal_join_layout;
	call->nspaces = TJ_NSPACES;
	call->keeps_images = true;
	call->prepared = temporal_join_prepared;
	call->build = build_temporal_join;
	call->skipped = temporal_join_skipped;
	ptf_call_output(call, fcinfo, &tc.out, NULL, NULL);
	tc.opts.out_desc = tc.out.desc;
	return ptf_call_return(call);
}
