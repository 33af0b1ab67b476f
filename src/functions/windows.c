/*-------------------------------------------------------------------------
 *
 * windows.c
 *	  SQL entry points of the window functions: the TVFs ptf.tumble(),
 *	  ptf.hop(), ptf.cumulate(), and ptf.window_aggregate() (doc/design.md §2.5).
 *
 * The per-row logic is in operators/window_*.c and operators/aggs.c; here
 * the arguments are checked, the aggregates parsed and analyzed by
 * PostgreSQL, and the target row type matched by name, all before any
 * input row is read.
 *
 * The aggregates text is parsed on its own as "SELECT <aggregates>" and
 * must be a bare select list (no FROM, WHERE, ...: nothing but
 * expressions can be smuggled in); its target list is then analyzed as
 * that of
 *
 *	  SELECT <aggregates> FROM pg_catalog.unnest(NULL::<row type>[]) AS t
 *	  GROUP BY <partition_by columns>
 *
 * so column references resolve against the input row type (Vars of the
 * one range table entry, attribute numbers those of the row type), and
 * parse analysis itself refuses columns that are neither keys nor in an
 * aggregate.
 *
 * A query the planner takes (planner/, functions/windows.h) comes here
 * too: the TVF's arguments are checked by run_tvf as for the TVF itself,
 * and the call then runs the planned operator -- the window aggregate or
 * Window Top-N -- over the TVF's input, through the one call path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_class.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "common/md5.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "engine/call.h"
#include "engine/parallel.h"
#include "functions/common.h"
#include "functions/row_filter.h"
#include "functions/windows.h"
#include "input/input.h"
#include "operators/window.h"
#include "operators/window_rank.h"

PG_FUNCTION_INFO_V1(ptf_tumble);
PG_FUNCTION_INFO_V1(ptf_hop);
PG_FUNCTION_INFO_V1(ptf_cumulate);
PG_FUNCTION_INFO_V1(ptf_window_aggregate);
PG_FUNCTION_INFO_V1(ptf_window_top_n);

/* ---- arguments shared by all ---- */

/* an interval argument in microseconds, negative allowed (offsets) */
static int64
signed_interval_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Interval   *iv;
	int64		us;

	if (PG_ARGISNULL(argno))
		return 0;
	iv = PG_GETARG_INTERVAL_P(argno);
	if (iv->month != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not have months or years", name),
				 errdetail("Months are of different lengths; windows are of one length."),
				 errhint("Use days: interval '30 days'.")));
	if (pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &us) ||
		pg_add_s64_overflow(us, iv->time, &us))
		ereport(ERROR,
				(errcode(ERRCODE_INTERVAL_FIELD_OVERFLOW),
				 errmsg("%s is out of range", name)));
	return us;
}

/* a window length: given, positive, without months */
static int64
length_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int64		us;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
	us = signed_interval_arg(fcinfo, argno, name);
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", name)));
	return us;
}

/* on_time: required, a time column */
static AttrNumber
on_time_arg(FunctionCallInfo fcinfo, int argno, TupleDesc rowdesc, Oid *type)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("on_time must not be NULL"),
				 errdetail("Windows are in event time: on_time names the time column.")));
	return ptf_time_column_arg(fcinfo, argno, rowdesc, "on_time", type);
}

/* ---- the TVFs ---- */

enum
{
	TVF_INPUT,
	TVF_ON_TIME,
	TVF_LEN1,					/* tumble: size; hop: slide; cumulate: step */
	TVF_LEN2,					/* tumble: offset; hop and cumulate: size */
	TVF_OFFSET,					/* hop and cumulate */
};

typedef struct TvfCall
{
	PtfCall		call;
	WindowTvfOptions opts;
	PtfOutput	out;
} TvfCall;

/* A TVF call whose rows a planned query aggregates or ranks. */
typedef struct PlannedCall
{
	PtfCall		call;
	WindowSpec	spec;
	PtfPlannedWindow *pw;
	int64		delay;			/* given, or -1 */
	PtfOutput	out;
} PlannedCall;

static PtfOperator *
build_tvf(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	TvfCall    *tc = (TvfCall *) call;
	WindowTvfOptions opts = tc->opts;
	PtfOperator *op;
	KeyedStateSpec spec;

	opts.rowdesc = b->rowdescs[0];
	op = window_tvf_create(&opts, env);
	/* no keys, no values: a uid's state is its stream's position alone */
	memset(&spec, 0, sizeof(spec));
	spec.keys = b->keys[0];
	spec.flags = env->durable ? KEYED_STATE_DURABLE : 0;
	op->state = keyed_state_create(&spec, op->cxt);
	op->codec.layout = &window_agg_layout;
	return op;
}

static uint64
tvf_skipped(PtfCall *call, PtfOperator *op)
{
	return window_tvf_skipped(op);
}

static void
tvf_prepared(PtfCall *call)
{
	bool		top_n = strcmp(call->function, "window_top_n") == 0;

	if (call->inputs[0].sql.changelog)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s reads insert-only input",
						top_n ? "Window Top-N" : "a window table function"),
				 errdetail("The query returns (kind, data) rows, a changelog."),
				 top_n ? errhint("Rank a table's rows, or a query's that are not (kind, data) rows.") :
				 errhint("ptf.window_aggregate takes updating input.")));
	/* a stream's updates are passed over: none can stop it (a planned aggregate's retract) */
	call->inputs[0].inserts_only = true;
}

static void choose_old_rows(PtfCall *call, PtfCallInput *in);
static void run_planned(PlannedCall *pc, PtfCallInput *in);

/* The arguments of a TVF call: all of them checked before anything is read. */
static Datum
run_tvf(FunctionCallInfo fcinfo, WindowKind kind, const char *name, PtfPlannedWindow *planned)
{
	TvfCall		tc;
	PlannedCall pc;
	PtfCall    *call = planned ? &pc.call : &tc.call;
	PtfCallInput *in;
	PtfInputArg input;
	char	   *query;
	int			nargs_before_uid = kind == WINDOW_TUMBLE ? 4 : 5;
	WindowSpec	spec;
	int64		size;
	int64		step = 0;
	int64		offset;
	int64		delay = -1;

	memset(&tc, 0, sizeof(tc));
	memset(&pc, 0, sizeof(pc));
	ptf_call_init(call, planned ? (planned->kind == PTF_PLANNED_AGGREGATE ?
								   "window_aggregate" : "window_top_n") : name);

	ptf_input_arg(fcinfo, TVF_INPUT, "input", &input);
	if (kind == WINDOW_TUMBLE)
	{
		size = length_arg(fcinfo, TVF_LEN1, "size");
		offset = signed_interval_arg(fcinfo, TVF_LEN2, "offset");
	}
	else
	{
		step = length_arg(fcinfo, TVF_LEN1, kind == WINDOW_HOP ? "slide" : "step");
		size = length_arg(fcinfo, TVF_LEN2, "size");
		offset = signed_interval_arg(fcinfo, TVF_OFFSET, "offset");
	}
	window_spec_init(&spec, kind, size, step, offset);
	call->uid = ptf_uid_arg(fcinfo, nargs_before_uid);
	query = ptf_text_arg(fcinfo, nargs_before_uid + 1);
	call->changes = ptf_bool_arg(fcinfo, nargs_before_uid + 2, "changes");
	ptf_check_input_choice(&input, query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, nargs_before_uid + 3, call->changes, call->uid);
	/* 1.2: the watermark of a planned query over the stream (the TVF has none) */
	if (PG_NARGS() > nargs_before_uid + 4)
		delay = ptf_interval_arg(fcinfo, nargs_before_uid + 4, "watermark_delay");

	in = ptf_call_add_input(call, "input", &input, query);
	in->frame.on_time_attno = on_time_arg(fcinfo, TVF_ON_TIME, input.rowdesc,
										  &in->frame.on_time_type);
	call->on_time = ptf_text_arg(fcinfo, TVF_ON_TIME);
	call->time_type = in->frame.on_time_type;

	if (planned != NULL)
	{
		pc.spec = spec;
		pc.pw = planned;
		pc.delay = delay;
		run_planned(&pc, in);
		return (Datum) 0;
	}

	tc.opts.spec = spec;
	in->frame.keys = key_spec_from_attnos(input.rowdesc, 0, NULL);
	tc.opts.time_type = in->frame.on_time_type;
	call->layout = &window_agg_layout;
	call->nspaces = WINDOW_AGG_NSPACES;
	call->options = psprintf("%s windows", name);
	call->prepared = tvf_prepared;
	call->build = build_tvf;
	call->skipped = tvf_skipped;

	ptf_call_output(call, fcinfo, &tc.out, NULL, NULL);
	tc.opts.outdesc = tc.out.desc;
	return ptf_call_return(call);
}

/* ---- planned queries over a TVF's rows (functions/windows.h) ---- */

static const char *
window_kind_name(WindowKind kind)
{
	switch (kind)
	{
		case WINDOW_TUMBLE:
			return "tumble";
		case WINDOW_HOP:
			return "hop";
		case WINDOW_CUMULATE:
			return "cumulate";
		case WINDOW_SESSION:
			return "session";
	}
	return "?";
}

/*
 * An expression tree as a short digest of nodeToString's text without
 * the parse locations (which the query's text decides): equal trees --
 * columns by number, functions and operators by OID -- equal digests.
 */
static char *
node_identity(Node *node)
{
	char		hex[33];
	const char *err = NULL;
	char	   *s = nodeToString(node);
	char	   *in = s;
	char	   *out = s;
	static const char loc[] = " :location ";

	while (*in != '\0')
	{
		if (strncmp(in, loc, sizeof(loc) - 1) == 0)
		{
			in += sizeof(loc) - 1;
			if (*in == '-')
				in++;
			while (*in >= '0' && *in <= '9')
				in++;
			continue;
		}
		*out++ = *in++;
	}
	*out = '\0';
	if (!pg_md5_hash(s, strlen(s), hex, &err))
		elog(ERROR, "could not compute a digest: %s", err ? err : "out of memory");
	hex[12] = '\0';
	return psprintf("#%s", hex);
}

/*
 * What a planned query's uid state depends on besides its inputs and keys,
 * by column numbers and object OIDs, not by names: a pipeline's query is
 * printed again when what it names is renamed (commands/renames.c), and
 * its uid must go on.  (pw->describe, by names, is for people.)
 */
static char *
planned_identity(const PtfPlannedWindow *pw)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "keys");
	for (i = 0; i < pw->nkeys; i++)
		appendStringInfo(&buf, " %d", pw->key_attnos[i]);
	if (pw->kind == PTF_PLANNED_AGGREGATE)
		appendStringInfo(&buf, ", aggregates %s", node_identity((Node *) pw->aggs));
	else
	{
		appendStringInfo(&buf, ", top %lld by", (long long) pw->rank.limit);
		for (i = 0; i < pw->rank.nsort; i++)
			appendStringInfo(&buf, " %d %u %u %d", pw->rank.sort_attnos[i], pw->rank.sort_ops[i],
							 pw->rank.sort_colls[i], (int) pw->rank.sort_nulls_first[i]);
	}
	if (pw->filter != NIL)
		appendStringInfo(&buf, ", where %s", node_identity((Node *) pw->filter));
	return buf.data;
}

/*
 * The input is planned.  As the TVF: a (kind, data) query is refused.  A
 * window aggregate over a change stream retracts updated and deleted rows
 * as window_aggregate does (whole old rows, or the last row of each key
 * kept for an upsert source: choose_old_rows); Top-N
 * ranks inserts, as Flink's, and passes the rest over as the TVF does.
 * The watermark: given (watermark_delay), declared, or 0 for a stream.
 */
static void
planned_prepared(PtfCall *call)
{
	PlannedCall *pc = (PlannedCall *) call;
	PtfCallInput *in = &call->inputs[0];

	tvf_prepared(call);
	if (pc->pw->kind == PTF_PLANNED_AGGREGATE)
	{
		in->inserts_only = false;
		if (call->changes)
			choose_old_rows(call, in);
		if (in->frame.changelog)
			call->options = psprintf("%s, updating input", call->options);
	}
	ptf_input_watermark(&in->frame, in->arg.relid, call->on_time, pc->delay, call->uid != NULL);
}

static PtfOperator *
build_planned(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	PlannedCall *pc = (PlannedCall *) call;
	PtfPlannedWindow *pw = pc->pw;
	PtfCallInput *in = &call->inputs[0];

	if (pw->kind == PTF_PLANNED_AGGREGATE)
	{
		WindowAggOptions o;

		memset(&o, 0, sizeof(o));
		o.spec = pc->spec;
		o.time_type = in->frame.on_time_type;
		o.time_attno = in->frame.on_time_attno;
		o.rowdesc = b->rowdescs[0];
		o.keys = b->keys[0];
		o.targetlist = pw->aggs;
		o.changelog = in->frame.changelog;
		o.outdesc = pw->outdesc;
		o.out_window = pw->out_window;
		o.out_agg = pw->out_agg;
		o.out_key = pw->out_key;
		return window_agg_create(&o, env);
	}
	else
	{
		WindowRankOptions o = pw->rank;

		o.spec = pc->spec;
		o.time_type = in->frame.on_time_type;
		o.rowdesc = b->rowdescs[0];
		o.keys = b->keys[0];
		o.outdesc = pw->outdesc;
		return window_rank_create(&o, env);
	}
}

static uint64
planned_skipped(PtfCall *call, PtfOperator *op)
{
	return ((PlannedCall *) call)->pw->kind == PTF_PLANNED_AGGREGATE ?
		window_agg_skipped(op) : window_rank_skipped(op);
}

/*
 * The planned operator's columns are columns of the input row type: the
 * plan was made against this row type, and a cached plan outliving a
 * change of it would read other columns.
 */
static void
check_planned_columns(TupleDesc rowdesc, int n, const AttrNumber *attnos)
{
	int			i;

	for (i = 0; i < n; i++)
		if (attnos[i] < 1 || attnos[i] > rowdesc->natts ||
			TupleDescAttr(rowdesc, attnos[i] - 1)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the row type of the window query's input changed since it was planned"),
					 errhint("Plan the query again (DISCARD PLANS, or prepare it again).")));
}

static void
run_planned(PlannedCall *pc, PtfCallInput *in)
{
	PtfCall    *call = &pc->call;
	PtfPlannedWindow *pw = pc->pw;
	const WindowSpec *w = &pc->spec;

	if (pw->kind == PTF_PLANNED_AGGREGATE)
	{
		check_planned_columns(in->arg.rowdesc, pw->nkeys, pw->key_attnos);
		in->frame.keys = key_spec_from_attnos(in->arg.rowdesc, pw->nkeys, pw->key_attnos);
		call->layout = &window_agg_layout;
		call->nspaces = WINDOW_AGG_NSPACES;
		call->probe_ok = true;
		/* states of the input's column types (window_aggregate's, below) */
		call->keeps_images = true;
	}
	else
	{
		check_planned_columns(in->arg.rowdesc, pw->rank.nsort, pw->rank.sort_attnos);
		in->frame.keys = key_spec_from_attnos(in->arg.rowdesc, pw->nkeys, pw->key_attnos);
		call->layout = &window_rank_layout;
		call->nspaces = WINDOW_RANK_NSPACES;
		call->keeps_images = true;
	}
	/*
	 * What the state depends on besides the inputs: the keys by column
	 * number among the rest, as the query's own references to the columns
	 * follow a rename (a pipeline's stored query too).
	 */
	call->keys_by_number = true;
	call->options = psprintf("planned %s windows of %lld/%lld us offset %lld: %s",
							 window_kind_name(w->kind), (long long) w->size,
							 (long long) w->step, (long long) w->offset, planned_identity(pw));
	call->prepared = planned_prepared;
	call->build = build_planned;
	call->skipped = planned_skipped;
	pw->spec = pc->spec;
	pw->time_type = in->frame.on_time_type;
	if (pw->filter != NIL || pw->track_range)
		ptf_row_filter_attach(in, pw->filter, pw->track_range ? pw->time_range : NULL,
							  call->cxt);

	pc->out.store = pw->store;
	pc->out.desc = pw->outdesc;
	call->out = &pc->out;
	call->emit = ptf_output_emit_row;
	call->emit_arg = &pc->out;

	ptf_call_run(call);
	pw->rows += pc->out.rows;
	MemoryContextDelete(call->cxt);
}

void
ptf_window_run_planned(FunctionCallInfo fcinfo, WindowKind kind, PtfPlannedWindow *pw)
{
	Assert(kind != WINDOW_SESSION);
	(void) run_tvf(fcinfo, kind, window_kind_name(kind), pw);
}

Datum
ptf_tumble(PG_FUNCTION_ARGS)
{
	return run_tvf(fcinfo, WINDOW_TUMBLE, "tumble", NULL);
}

Datum
ptf_hop(PG_FUNCTION_ARGS)
{
	return run_tvf(fcinfo, WINDOW_HOP, "hop", NULL);
}

Datum
ptf_cumulate(PG_FUNCTION_ARGS)
{
	return run_tvf(fcinfo, WINDOW_CUMULATE, "cumulate", NULL);
}

/* ---- window_aggregate ---- */

enum
{
	WA_INPUT,
	WA_TARGET,
	WA_WINDOW,
	WA_ON_TIME,
	WA_SIZE,
	WA_STEP,
	WA_OFFSET,
	WA_PARTITION_BY,
	WA_AGGREGATES,
	WA_EMIT_ONLY_ON_UPDATE,
	WA_UID,
	WA_QUERY,
	WA_CHANGES,
	WA_WATERMARK_DELAY,
	WA_IDLE_TIMEOUT,
	WA_PROC_TIME,
	WA_SNAPSHOT
};

typedef struct WaCall
{
	PtfCall		call;
	WindowAggOptions opts;
	int64		delay;			/* given, or -1 */
	PtfOutput	out;
} WaCall;

static WindowKind
window_kind_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *s;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("window must not be NULL")));
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (pg_strcasecmp(s, "tumble") == 0)
		return WINDOW_TUMBLE;
	if (pg_strcasecmp(s, "hop") == 0)
		return WINDOW_HOP;
	if (pg_strcasecmp(s, "cumulate") == 0)
		return WINDOW_CUMULATE;
	if (pg_strcasecmp(s, "session") == 0)
		return WINDOW_SESSION;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown window kind \"%s\"", s),
			 errhint("The window kinds are 'tumble', 'hop', 'cumulate' and 'session'.")));
	return WINDOW_TUMBLE;		/* keep compiler quiet */
}

static void
bad_aggregates(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("aggregates must be a select list of aggregate calls"),
			 errdetail("%s", detail),
			 errhint("For example: aggregates => 'count(*) AS n, sum(price) AS total'.")));
}

/*
 * Parse and analyze the aggregates as the select list of a query over the
 * input row type grouped by the keys; return its planned target list.
 */
static List *
analyze_aggregates(const char *text, TupleDesc rowdesc, KeySpec *keys)
{
	List	   *raw;
	SelectStmt *sel;
	RawStmt    *frame_stmt;
	SelectStmt *frame_sel;
	StringInfoData sql;
	Query	   *q;
	ListCell   *lc;
	int			i;
	PtfParsedText pt;
	char	   *select = psprintf("SELECT %s", text);

	ptf_parsed_text_push(&pt, select);
	raw = raw_parser(select, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1)
		bad_aggregates("It is one select list: no semicolons.");
	sel = (SelectStmt *) linitial_node(RawStmt, raw)->stmt;
	if (!IsA(sel, SelectStmt) || sel->op != SETOP_NONE || sel->fromClause != NIL ||
		sel->whereClause != NULL || sel->groupClause != NIL || sel->havingClause != NULL ||
		sel->windowClause != NIL || sel->sortClause != NIL || sel->limitCount != NULL ||
		sel->limitOffset != NULL || sel->distinctClause != NIL || sel->intoClause != NULL ||
		sel->withClause != NULL || sel->valuesLists != NIL || sel->lockingClause != NIL ||
		sel->targetList == NIL)
		bad_aggregates("It is a select list alone: no FROM, WHERE, GROUP BY or other clauses.");

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT 1 FROM pg_catalog.unnest(NULL::%s[]) AS t",
					 format_type_extended(rowdesc->tdtypeid, -1, FORMAT_TYPE_FORCE_QUALIFY));
	for (i = 0; i < keys->ncols; i++)
		appendStringInfo(&sql, "%s t.%s", i == 0 ? " GROUP BY" : ",",
						 quote_identifier(NameStr(TupleDescAttr(rowdesc,
																keys->cols[i].attno - 1)->attname)));
	raw = raw_parser(sql.data, RAW_PARSE_DEFAULT);
	frame_stmt = linitial_node(RawStmt, raw);
	frame_sel = (SelectStmt *) frame_stmt->stmt;
	frame_sel->targetList = sel->targetList;
	q = parse_analyze_fixedparams(frame_stmt, select, NULL, 0, NULL);

	if (!q->hasAggs)
		bad_aggregates("It calls no aggregate.");
	if (q->hasSubLinks || q->hasWindowFuncs || q->hasTargetSRFs || q->groupingSets != NIL)
		bad_aggregates("It may not use subqueries, window functions, set-returning functions or grouping sets.");
	ptf_parsed_text_pop(&pt);
	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (!tle->resjunk)
			tle->expr = expression_planner(tle->expr);
	}
	return q->targetList;
}

static bool
is_window_name(const char *name, WindowColumn *col)
{
	if (strcmp(name, "window_start") == 0)
		*col = WCOL_START;
	else if (strcmp(name, "window_end") == 0)
		*col = WCOL_END;
	else if (strcmp(name, "window_time") == 0)
		*col = WCOL_TIME;
	else
		return false;
	return true;
}

static void
target_type_mismatch(const char *column, Oid want, Oid have)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("target column \"%s\" has type %s, but what fills it has type %s",
					column, format_type_be(want), format_type_be(have)),
			 errhint("Declare the target column with the type shown, or cast in aggregates: sum(x)::numeric AS total.")));
}

/*
 * Match the target row type's columns by name: window bounds, keys, the
 * aggregates' outputs.  Everything either way must match.
 */
static void
map_target(WindowAggOptions *o, TupleDesc target, List *targetlist)
{
	int			natts = target->natts;
	List	   *names = NIL;
	Oid		   *types;
	int			n = 0;
	bool	   *used;
	ListCell   *lc;
	int			i;

	foreach(lc, targetlist)
		if (!lfirst_node(TargetEntry, lc)->resjunk)
			n++;
	types = palloc(sizeof(Oid) * Max(n, 1));
	used = palloc0(sizeof(bool) * Max(n, 1));
	i = 0;
	foreach(lc, targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		char	   *name;
		WindowColumn wc;
		ListCell   *lc2;

		if (tle->resjunk)
			continue;
		name = tle->resname ? tle->resname : "?column?";
		if (is_window_name(name, &wc))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("aggregate output \"%s\" is named like a window column", name),
					 errhint("Name it otherwise with AS.")));
		foreach(lc2, names)
			if (strcmp((char *) lfirst(lc2), name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("two aggregate outputs are named \"%s\"", name),
						 errhint("Name them apart with AS.")));
		names = lappend(names, name);
		types[i++] = exprType((Node *) tle->expr);
	}

	o->out_window = palloc0(sizeof(WindowColumn) * Max(natts, 1));
	o->out_agg = palloc(sizeof(int) * Max(natts, 1));
	o->out_key = palloc(sizeof(int) * Max(natts, 1));
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(target, i);
		const char *name = NameStr(att->attname);
		WindowColumn wc;
		int			k;

		o->out_agg[i] = -1;
		o->out_key[i] = -1;
		if (att->attisdropped)
			continue;
		if (is_window_name(name, &wc))
		{
			if (!ptf_is_time_type(att->atttypid))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("target column \"%s\" has type %s, not a time type",
								name, format_type_be(att->atttypid)),
						 errhint("Window bounds are timestamp, timestamptz, or bigint milliseconds since 1970.")));
			o->out_window[i] = wc;
			continue;
		}
		k = 0;
		foreach(lc, names)
		{
			if (strcmp((char *) lfirst(lc), name) == 0)
				break;
			k++;
		}
		if (k < list_length(names))
		{
			if (types[k] != att->atttypid)
				target_type_mismatch(name, att->atttypid, types[k]);
			o->out_agg[i] = k;
			used[k] = true;
			continue;
		}
		for (k = 0; k < o->keys->ncols; k++)
		{
			Form_pg_attribute katt = TupleDescAttr(o->rowdesc, o->keys->cols[k].attno - 1);

			if (strcmp(NameStr(katt->attname), name) == 0)
			{
				if (katt->atttypid != att->atttypid)
					target_type_mismatch(name, att->atttypid, katt->atttypid);
				o->out_key[i] = k;
				break;
			}
		}
		if (o->out_key[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("target column \"%s\" is filled by nothing", name),
					 errdetail("Target columns are window_start, window_end, window_time, partition_by columns and aggregate outputs, by name."),
					 errhint("Add an aggregate named \"%s\", or drop the column from the target type.", name)));
	}
	for (i = 0; i < n; i++)
		if (!used[i])
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("aggregate output \"%s\" has no column in the target row type %s",
							(char *) list_nth(names, i), format_type_be(target->tdtypeid)),
					 errhint("Add the column to the target type, or name the output like one with AS.")));
	for (i = 0; i < o->keys->ncols; i++)
	{
		const char *kname = NameStr(TupleDescAttr(o->rowdesc, o->keys->cols[i].attno - 1)->attname);
		bool		found = false;
		int			j;

		for (j = 0; j < natts; j++)
			if (o->out_key[j] == i)
				found = true;
		if (!found)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("partition_by column \"%s\" has no column in the target row type %s",
							kname, format_type_be(target->tdtypeid)),
					 errhint("Window rows are per key: add the key column to the target type.")));
	}
}

static PtfOperator *
build_window_agg(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	WaCall	   *wc = (WaCall *) call;
	WindowAggOptions opts = wc->opts;

	opts.rowdesc = b->rowdescs[0];
	opts.keys = b->keys[0];
	opts.changelog = call->inputs[0].frame.changelog;
	/*
	 * a parallel call by partial states (engine/parallel.c): workers' partial
	 * rows come as input ninputs; split by key, every participant runs the
	 * serial operator
	 */
	opts.parallel = (call->parallel == PTF_PARALLEL_PARTIAL &&
					 call->parallel_role != PTF_ROLE_SERIAL);
	opts.partial = (opts.parallel && call->parallel_role == PTF_ROLE_WORKER);
	opts.partial_input = (opts.parallel && call->parallel_role == PTF_ROLE_LEADER) ?
		call->ninputs : -1;
	opts.partial_desc = call->partial_desc;
	return window_agg_create(&opts, env);
}

static uint64
window_agg_call_skipped(PtfCall *call, PtfOperator *op)
{
	return window_agg_skipped(op);
}

/*
 * An update or delete in a change stream takes its old row out of its
 * windows, found by its values.  Under REPLICA IDENTITY FULL the WAL
 * carries whole old rows.  Under DEFAULT (or USING INDEX) it carries only
 * the key of an old row -- an upsert source: the last row of each key is
 * then kept, and retractions are made whole from it, as Flink's
 * ChangelogNormalize does ahead of its window aggregate (engine/upsert.c).
 * A table that logs no key at all is refused before the stream is read,
 * rather than failing -- for good -- at its first update.
 */
static void
choose_old_rows(PtfCall *call, PtfCallInput *in)
{
	char		ident;
	KeySpec    *keys = ptf_replica_identity_keys(in->arg.relid, in->arg.rowdesc, &ident);

	if (ident == REPLICA_IDENTITY_FULL)
	{
		/* updates and deletes retract their whole old rows */
		in->old_rows = OLD_ROWS_FULL;
		return;
	}
	if (keys == NULL || keys->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("window_aggregate over the changes of %s needs a primary key or REPLICA IDENTITY FULL",
						ptf_relation_sql_name(in->arg.relid)),
				 errdetail("An update or delete takes its old row out of its windows, and the table logs neither whole old rows nor a key to find them by (its replica identity is %s).",
						   ident == REPLICA_IDENTITY_NOTHING ? "NOTHING" : "DEFAULT without a primary key"),
				 errhint("ALTER TABLE %s ADD PRIMARY KEY (...), or ALTER TABLE %s REPLICA IDENTITY FULL; (for a table only inserted into, FULL costs nothing)",
						 ptf_relation_sql_name(in->arg.relid), ptf_relation_sql_name(in->arg.relid))));
	in->upsert_keys = keys;
	in->old_rows = OLD_ROWS_KEY;
	/* a truncation forgets the kept rows; the windows keep theirs, as under FULL */
	in->on_truncate = TRUNCATE_PASS;
	call->keeps_images = true;
	/* a uid reads its source one way: the kept rows are part of its state */
	call->options = psprintf("%s, upsert input (the last row kept per key)", call->options);
}

/* The first and last value of a column's histogram (ANALYZE's), as times; false: none. */
static bool
time_range(Oid relid, AttrNumber attno, Oid type, PtfTime *lo, PtfTime *hi)
{
	HeapTuple	tup = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid),
									  Int16GetDatum(attno), BoolGetDatum(false));
	AttStatsSlot sslot;
	bool		found = false;

	if (!HeapTupleIsValid(tup))
		return false;
	if (get_attstatsslot(&sslot, tup, STATISTIC_KIND_HISTOGRAM, InvalidOid,
						 ATTSTATSSLOT_VALUES))
	{
		if (sslot.nvalues >= 2)
		{
			*lo = ptf_time_from_datum(sslot.values[0], type);
			*hi = ptf_time_from_datum(sslot.values[sslot.nvalues - 1], type);
			found = (*lo > PTF_TIME_MIN && *hi < PTF_TIME_MAX && *lo <= *hi);
		}
		free_attstatsslot(&sslot);
	}
	ReleaseSysCache(tup);
	return found;
}

/*
 * Partial aggregation pays when each participant's rows fold into far
 * fewer (key, slice) groups than rows (ptf_partials_pay): the statistics
 * say over what time, hence how many slices a key has.  Far fewer: each
 * participant holds about every group, as large a state as the serial
 * call's, and the leader merges them all before it fires -- at 5 rows a
 * group a participant, the call took the serial call's time (HOP 1 h / 15
 * min, 10k keys, 10M rows, one worker: 7.7 s against 7.8), at 20 about
 * half of it (TUMBLE 1 h, the same rows: 0.56x).  Otherwise the call is
 * split by key, when it can be.
 */
#define WINDOW_PARTIALS_MIN_FOLD 10

static bool
partials_pay(PtfCallInput *in, const WindowSpec *spec)
{
	PtfTime		lo;
	PtfTime		hi;

	if (!time_range(in->arg.relid, in->frame.on_time_attno, in->frame.on_time_type, &lo, &hi))
		return true;
	return ptf_partials_pay(in->arg.relid, in->frame.keys, ((double) hi - (double) lo) / spec->slice + 1,
							WINDOW_PARTIALS_MIN_FOLD);
}

/* The input is planned: its shape is known, and the watermark is decided. */
static void
window_agg_prepared(PtfCall *call)
{
	WaCall	   *wc = (WaCall *) call;
	PtfCallInput *in = &call->inputs[0];

	if (call->changes)
		choose_old_rows(call, in);
	/* states of updating input are of other modes: part of what a uid's state is */
	if (in->frame.changelog)
		call->options = psprintf("%s, updating input", call->options);
	ptf_input_watermark(&in->frame, in->arg.relid, call->on_time, wc->delay, call->uid != NULL);

	/*
	 * Bounded, without a watermark before the end, over insert-only rows,
	 * with aggregates that may run in a worker: parallel (engine/parallel.c).
	 * Workers aggregate shares of the slices and the leader combines them
	 * (operators/window_partial.c), when every aggregate can be combined and
	 * the slices are far fewer than the rows; else (sessions too) each
	 * worker computes the windows of a share of the keys.
	 */
	if (call->uid == NULL && !in->frame.has_delay && !call->need_proc_time &&
		!in->frame.changelog && in->query == NULL && OidIsValid(in->arg.relid) &&
		ptf_parallel_expr_safe((Node *) wc->opts.targetlist))
	{
		WindowAggOptions opts = wc->opts;

		opts.changelog = false;
		/* without keys (or with a few), one share would hold every row */
		if (in->frame.keys->ncols > 0 && ptf_keys_fill_shares(in->arg.relid, in->frame.keys))
			call->parallel = PTF_PARALLEL_BY_KEY;
		call->parallel_input = 0;
		if (wc->opts.spec.kind != WINDOW_SESSION && partials_pay(in, &wc->opts.spec) &&
			window_agg_parallel_ok(&opts))
		{
			int			nkeys = in->frame.keys->ncols;
			AttrNumber *attnos = palloc(sizeof(AttrNumber) * Max(nkeys, 1));
			int			i;

			for (i = 0; i < nkeys; i++)
				attnos[i] = i + 1;
			call->partial_desc = window_agg_partial_desc(in->arg.rowdesc, in->frame.keys);
			call->partial_keys = key_spec_from_attnos(call->partial_desc, nkeys, attnos);
			call->parallel = PTF_PARALLEL_PARTIAL;
		}
	}
}

Datum
ptf_window_aggregate(PG_FUNCTION_ARGS)
{
	WaCall		wc;
	PtfCall    *call = &wc.call;
	PtfCallInput *in;
	PtfInputArg input;
	Oid			target_type;
	TupleDesc	target;
	WindowKind	kind;
	char	   *query;
	char	   *aggregates;
	int64		size;
	int64		step = 0;
	int64		offset;

	memset(&wc, 0, sizeof(wc));
	ptf_call_init(call, "window_aggregate");

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, WA_INPUT, "input", &input);
	target_type = get_fn_expr_argtype(fcinfo->flinfo, WA_TARGET);
	ptf_check_row_type_exists(fcinfo, target_type);
	if (!OidIsValid(target_type) || !type_is_rowtype(target_type) || target_type == RECORDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target must be a row type, such as NULL::tablename, not %s",
						OidIsValid(target_type) ? format_type_be(target_type) : "unknown")));
	ptf_type_only_arg(fcinfo, WA_TARGET, "target");
	target = lookup_rowtype_tupdesc_copy(target_type, -1);
	kind = window_kind_arg(fcinfo, WA_WINDOW);
	size = length_arg(fcinfo, WA_SIZE, kind == WINDOW_SESSION ? "size (the session gap)" : "size");
	if (kind == WINDOW_HOP || kind == WINDOW_CUMULATE)
	{
		if (PG_ARGISNULL(WA_STEP))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s windows need step (the %s)", kind == WINDOW_HOP ? "HOP" : "CUMULATE",
							kind == WINDOW_HOP ? "slide" : "step")));
		step = length_arg(fcinfo, WA_STEP, "step");
	}
	else if (!PG_ARGISNULL(WA_STEP))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("step is for HOP and CUMULATE windows")));
	offset = signed_interval_arg(fcinfo, WA_OFFSET, "offset");
	if (kind == WINDOW_SESSION && offset != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("session windows have no offset")));
	window_spec_init(&wc.opts.spec, kind, size, step, offset);
	wc.opts.emit_only_on_update = ptf_bool_arg(fcinfo, WA_EMIT_ONLY_ON_UPDATE,
											   "emit_only_on_update");
	if (wc.opts.emit_only_on_update && kind != WINDOW_CUMULATE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("emit_only_on_update is for CUMULATE windows")));
	call->uid = ptf_uid_arg(fcinfo, WA_UID);
	query = ptf_text_arg(fcinfo, WA_QUERY);
	call->changes = ptf_bool_arg(fcinfo, WA_CHANGES, "changes");
	ptf_check_input_choice(&input, query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, WA_SNAPSHOT, call->changes, call->uid);
	wc.delay = ptf_interval_arg(fcinfo, WA_WATERMARK_DELAY, "watermark_delay");

	in = ptf_call_add_input(call, "input", &input, query);
	in->frame.keys = ptf_keys_arg(fcinfo, WA_PARTITION_BY, input.rowdesc, "partition_by");
	in->frame.on_time_attno = on_time_arg(fcinfo, WA_ON_TIME, input.rowdesc,
										  &in->frame.on_time_type);
	in->frame.proc_time_attno = ptf_time_column_arg(fcinfo, WA_PROC_TIME, input.rowdesc,
													"proc_time", &in->frame.proc_time_type);
	if (!PG_ARGISNULL(WA_IDLE_TIMEOUT))
	{
		in->frame.idle_us = length_arg(fcinfo, WA_IDLE_TIMEOUT, "idle_timeout");
		call->need_proc_time = true;
	}
	call->on_time = ptf_text_arg(fcinfo, WA_ON_TIME);
	call->time_type = in->frame.on_time_type;

	aggregates = ptf_text_arg(fcinfo, WA_AGGREGATES);
	if (aggregates == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("aggregates must not be NULL")));
	wc.opts.spec.kind = kind;
	wc.opts.time_type = in->frame.on_time_type;
	wc.opts.time_attno = in->frame.on_time_attno;
	wc.opts.rowdesc = input.rowdesc;
	wc.opts.keys = in->frame.keys;
	wc.opts.targetlist = analyze_aggregates(aggregates, input.rowdesc, in->frame.keys);
	wc.opts.outdesc = target;
	map_target(&wc.opts, target, wc.opts.targetlist);

	/* what the state depends on besides the inputs and keys */
	call->options = psprintf("%s windows of %lld/%lld us offset %lld, aggregates %s, target %s%s",
							 kind == WINDOW_TUMBLE ? "tumble" : kind == WINDOW_HOP ? "hop" :
							 kind == WINDOW_CUMULATE ? "cumulate" : "session",
							 (long long) wc.opts.spec.size, (long long) wc.opts.spec.step,
							 (long long) wc.opts.spec.offset, aggregates,
							 format_type_extended(target_type, -1, FORMAT_TYPE_FORCE_QUALIFY),
							 wc.opts.emit_only_on_update ? ", emit only on update" : "");
	call->layout = &window_agg_layout;
	call->nspaces = WINDOW_AGG_NSPACES;

	/*
	 * The aggregates' states, and the rows kept for those without an
	 * inverse, are of the input's column types: a uid whose source column
	 * changed type would read them as the new one (a sum(int4)'s int8 as a
	 * float8), so that is refused as for kept images.
	 */
	call->keeps_images = true;
	/*
	 * Its timers are event-time ones, found by fires_at; the idle rule moves
	 * the watermark with processing time, but through the frame, which
	 * first reads the keys whose timers that watermark makes due.
	 */
	call->probe_ok = true;
	call->prepared = window_agg_prepared;
	call->build = build_window_agg;
	call->skipped = window_agg_call_skipped;

	ptf_call_output(call, fcinfo, &wc.out, NULL, NULL);
	return ptf_call_return(call);
}

/* ---- window_top_n ---- */

enum
{
	WT_INPUT,
	WT_WINDOW,
	WT_ON_TIME,
	WT_SIZE,
	WT_STEP,
	WT_OFFSET,
	WT_PARTITION_BY,
	WT_ORDER_BY,
	WT_TOP_N,
	WT_UID,
	WT_QUERY,
	WT_CHANGES,
	WT_WATERMARK_DELAY,
	WT_SNAPSHOT
};

static void
bad_order_by(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("order_by must be an ORDER BY list of the input's columns"),
			 errdetail("%s", detail),
			 errhint("For example: order_by => 'price DESC, item'.")));
}

/*
 * order_by, parsed and analyzed by PostgreSQL as the ORDER BY of a query
 * over the input row type (as aggregates are: nothing but the list can be
 * smuggled in), each item a column, with its sort operator, NULLS FIRST
 * or LAST and collation.
 */
static void
analyze_order_by(const char *text, TupleDesc rowdesc, WindowRankOptions *r)
{
	List	   *raw;
	SelectStmt *sel;
	RawStmt    *frame_stmt;
	SelectStmt *frame_sel;
	Query	   *q;
	ListCell   *lc;
	int			i = 0;
	PtfParsedText pt;
	char	   *select = psprintf("SELECT 1 ORDER BY %s", text);

	ptf_parsed_text_push(&pt, select);
	raw = raw_parser(select, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1)
		bad_order_by("It is one list: no semicolons.");
	sel = (SelectStmt *) linitial_node(RawStmt, raw)->stmt;
	if (!IsA(sel, SelectStmt) || sel->op != SETOP_NONE || sel->fromClause != NIL ||
		sel->whereClause != NULL || sel->groupClause != NIL || sel->havingClause != NULL ||
		sel->windowClause != NIL || sel->sortClause == NIL || sel->limitCount != NULL ||
		sel->limitOffset != NULL || sel->distinctClause != NIL || sel->intoClause != NULL ||
		sel->withClause != NULL || sel->valuesLists != NIL || sel->lockingClause != NIL ||
		list_length(sel->targetList) != 1)
		bad_order_by("It is an ORDER BY list alone: no other clauses.");

	raw = raw_parser(psprintf("SELECT 1 FROM pg_catalog.unnest(NULL::%s[]) AS t",
							  format_type_extended(rowdesc->tdtypeid, -1, FORMAT_TYPE_FORCE_QUALIFY)),
					 RAW_PARSE_DEFAULT);
	frame_stmt = linitial_node(RawStmt, raw);
	frame_sel = (SelectStmt *) frame_stmt->stmt;
	frame_sel->sortClause = sel->sortClause;
	q = parse_analyze_fixedparams(frame_stmt, select, NULL, 0, NULL);
	ptf_parsed_text_pop(&pt);

	r->nsort = list_length(q->sortClause);
	r->sort_attnos = palloc(sizeof(AttrNumber) * r->nsort);
	r->sort_ops = palloc(sizeof(Oid) * r->nsort);
	r->sort_colls = palloc(sizeof(Oid) * r->nsort);
	r->sort_nulls_first = palloc(sizeof(bool) * r->nsort);
	foreach(lc, q->sortClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		Node	   *expr = get_sortgroupclause_expr(sgc, q->targetList);
		Oid			coll = exprCollation(expr);

		if (IsA(expr, CollateExpr))
			expr = (Node *) ((CollateExpr *) expr)->arg;
		if (!IsA(expr, Var) || ((Var *) expr)->varattno <= 0 || ((Var *) expr)->varlevelsup != 0)
			bad_order_by("Each item is a column of the input, with ASC or DESC, NULLS FIRST or LAST, COLLATE.");
		if (!OidIsValid(sgc->sortop))
			bad_order_by("A column has a type without an ordering.");
		r->sort_attnos[i] = ((Var *) expr)->varattno;
		r->sort_ops[i] = sgc->sortop;
		r->sort_colls[i] = coll;
		r->sort_nulls_first[i] = sgc->nulls_first;
		i++;
	}
}

Datum
ptf_window_top_n(PG_FUNCTION_ARGS)
{
	PlannedCall pc;
	PtfCall    *call = &pc.call;
	PtfPlannedWindow pw;
	PtfCallInput *in;
	PtfInputArg input;
	PtfOutput	out;
	WindowKind	kind;
	KeySpec    *keys;
	char	   *query;
	char	   *order_by;
	int64		size;
	int64		step = 0;
	int64		offset;
	int			i;

	memset(&pc, 0, sizeof(pc));
	memset(&pw, 0, sizeof(pw));
	ptf_call_init(call, "window_top_n");

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, WT_INPUT, "input", &input);
	kind = window_kind_arg(fcinfo, WT_WINDOW);
	if (kind == WINDOW_SESSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Window Top-N is over TUMBLE, HOP and CUMULATE windows"),
				 errhint("Rank the rows of ptf.window_aggregate's sessions with row_number() instead.")));
	size = length_arg(fcinfo, WT_SIZE, "size");
	if (kind == WINDOW_HOP || kind == WINDOW_CUMULATE)
	{
		if (PG_ARGISNULL(WT_STEP))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s windows need step (the %s)", kind == WINDOW_HOP ? "HOP" : "CUMULATE",
							kind == WINDOW_HOP ? "slide" : "step"),
					 errhint("For example: step => '5 minutes'.")));
		step = length_arg(fcinfo, WT_STEP, "step");
	}
	else if (!PG_ARGISNULL(WT_STEP))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("step is for HOP and CUMULATE windows"),
				 errhint("Leave step out for TUMBLE windows.")));
	offset = signed_interval_arg(fcinfo, WT_OFFSET, "offset");
	window_spec_init(&pc.spec, kind, size, step, offset);
	if (PG_ARGISNULL(WT_TOP_N))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("top_n must not be NULL"),
				 errhint("top_n => 1 keeps the first row of every window.")));
	pw.rank.limit = PG_GETARG_INT32(WT_TOP_N);
	if (pw.rank.limit < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("top_n must be at least 1"),
				 errhint("top_n => 1 keeps the first row of every window (window deduplication).")));
	call->uid = ptf_uid_arg(fcinfo, WT_UID);
	query = ptf_text_arg(fcinfo, WT_QUERY);
	call->changes = ptf_bool_arg(fcinfo, WT_CHANGES, "changes");
	ptf_check_input_choice(&input, query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, WT_SNAPSHOT, call->changes, call->uid);
	pc.delay = ptf_interval_arg(fcinfo, WT_WATERMARK_DELAY, "watermark_delay");

	in = ptf_call_add_input(call, "input", &input, query);
	in->frame.on_time_attno = on_time_arg(fcinfo, WT_ON_TIME, input.rowdesc,
										  &in->frame.on_time_type);
	call->on_time = ptf_text_arg(fcinfo, WT_ON_TIME);
	call->time_type = in->frame.on_time_type;
	keys = ptf_keys_arg(fcinfo, WT_PARTITION_BY, input.rowdesc, "partition_by");
	pw.nkeys = keys->ncols;
	pw.key_attnos = palloc(sizeof(AttrNumber) * Max(keys->ncols, 1));
	for (i = 0; i < keys->ncols; i++)
		pw.key_attnos[i] = keys->cols[i].attno;

	/* the order: order_by, or the time (window deduplication keeps the first row) */
	order_by = ptf_text_arg(fcinfo, WT_ORDER_BY);
	if (order_by == NULL)
		order_by = pstrdup(quote_identifier(call->on_time));
	analyze_order_by(order_by, input.rowdesc, &pw.rank);

	ptf_output_init(fcinfo, &out);
	Assert(out.desc->natts == 5);
	pw.kind = PTF_PLANNED_TOP_N;
	pw.store = out.store;
	pw.outdesc = out.desc;
	pw.rank.out_cols = palloc(sizeof(RankColumn) * 5);
	pw.rank.out_cols[0] = RCOL_DATA;
	pw.rank.out_cols[1] = RCOL_START;
	pw.rank.out_cols[2] = RCOL_END;
	pw.rank.out_cols[3] = RCOL_TIME;
	pw.rank.out_cols[4] = RCOL_ROWNUM;
	{
		StringInfoData k;

		initStringInfo(&k);
		for (i = 0; i < keys->ncols; i++)
			appendStringInfo(&k, "%s%s", i > 0 ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(input.rowdesc,
																	keys->cols[i].attno - 1)->attname)));
		pw.describe = psprintf("top %d by (%s) per (%s)", (int) pw.rank.limit, order_by, k.data);
	}
	pc.pw = &pw;
	run_planned(&pc, in);
	return (Datum) 0;
}
