/*-------------------------------------------------------------------------
 *
 * common.c
 *	  Argument handling shared by the SQL-callable table functions.
 *
 * Each helper checks one argument and fails with the SQLSTATE doc/design.md §2
 * asks for; all of them run before a single input row is read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "optimizer/cost.h"
#include "parser/parse_type.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "functions/common.h"
#include "engine/parallel.h"
#include "engine/state_load.h"

int64		ptf_state_ttl_us = 0;
static char *ptf_state_ttl_string = NULL;

/*
 * ptf.state_ttl is an interval ('0', '5 minutes', '1 day'), like Flink's
 * table.exec.state.ttl, parsed without raising (ptf_parse_interval_us).
 */
static bool
check_state_ttl(char **newval, void **extra, GucSource source)
{
	int64		us;
	int64	   *parsed;

	if (!ptf_parse_interval_us(*newval, &us))
	{
		GUC_check_errmsg("invalid value for ptf.state_ttl: \"%s\"", *newval);
		GUC_check_errhint("An interval, such as '0', '90 minutes' or '1 day'.");
		return false;
	}
	if (us < 0)
	{
		GUC_check_errmsg("invalid value for ptf.state_ttl: \"%s\"", *newval);
		GUC_check_errdetail("ptf.state_ttl must not be negative.");
		return false;
	}
	/* GUC extra data is malloc'd: guc.c frees it with free() */
	parsed = malloc(sizeof(int64));
	if (parsed == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		return false;
	}
	*parsed = us;
	*extra = parsed;
	return true;
}

static void
assign_state_ttl(const char *newval, void *extra)
{
	ptf_state_ttl_us = extra ? *(int64 *) extra : 0;
}

void
ptf_common_define_gucs(void)
{
	DefineCustomStringVariable("ptf.state_ttl",
							   "Default processing-time retention of per-key state.",
							   "Used when a call passes no state_ttl. '0' keeps state forever, "
							   "as Flink's table.exec.state.ttl does by default.",
							   &ptf_state_ttl_string,
							   "0",
							   PGC_USERSET,
							   0,
							   check_state_ttl, assign_state_ttl, NULL);
}

/* the call's uid argument (by name: every function has its own place for it), or NULL */
static char *
uid_argument(FunctionCallInfo fcinfo)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	char	   *uid = NULL;
	Datum		names;
	Datum		modes;
	bool		isnull;
	bool		no_modes;
	char	  **argnames;
	int			n;
	int			i;

	if (!HeapTupleIsValid(tup))
		return NULL;
	names = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargnames, &isnull);
	modes = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargmodes, &no_modes);
	if (!isnull)
	{
		n = get_func_input_arg_names(names, no_modes ? (Datum) 0 : modes, &argnames);
		for (i = 0; i < n && i < PG_NARGS(); i++)
			if (argnames[i] != NULL && strcmp(argnames[i], "uid") == 0 && !PG_ARGISNULL(i))
				uid = TextDatumGetCString(PG_GETARG_DATUM(i));
	}
	ReleaseSysCache(tup);
	return uid;
}

/*
 * A type that no longer exists comes from a plan made before its table
 * was dropped: prepared statements and functions (PL/pgSQL) keep plans,
 * which depend on the tables they read but not on a row type written as
 * NULL::t.
 */
void
ptf_check_row_type_exists(FunctionCallInfo fcinfo, Oid type)
{
	char	   *uid;

	if (!OidIsValid(type) || SearchSysCacheExists1(TYPEOID, ObjectIdGetDatum(type)))
		return;
	uid = uid_argument(fcinfo);
	if (uid != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table whose row type the call of uid \"%s\" names was dropped", uid),
				 errdetail("The call was planned before the table was dropped (a cursor, or a plan a prepared statement or a function kept)."),
				 errhint("The uid cannot go on without its table: forget it (and its slot) with SELECT ptf.drop_state('%s');",
						 uid)));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("the table whose row type the call names was dropped"),
			 errdetail("The call was planned before the table was dropped (a cursor, or a plan a prepared statement or a function kept).")));
}

/*
 * Rows come from the table or the query, never from the argument: a row
 * value given there would be ignored, which the caller cannot have meant.
 */
void
ptf_type_only_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, argno);

	if (!PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be NULL of a row type, not a row value", name),
				 errdetail("Only the type of %s is used; its value would be ignored.", name),
				 OidIsValid(type) ?
				 errhint("Write NULL::%s, and give the rows in the table or in a query.",
						 format_type_be(type)) : 0));
}

void
ptf_input_arg(FunctionCallInfo fcinfo, int argno, const char *name, PtfInputArg *in)
{
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, argno);

	if (!OidIsValid(rowtype))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not determine the input row type")));
	ptf_check_row_type_exists(fcinfo, rowtype);
	if (get_typtype(rowtype) != TYPTYPE_COMPOSITE || rowtype == RECORDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("input must be a table's row type, such as NULL::tablename, not %s",
						format_type_be(rowtype))));
	ptf_type_only_arg(fcinfo, argno, name);
	ptf_input_of_type(rowtype, in);
}

void
ptf_input_of_type(Oid rowtype, PtfInputArg *in)
{
	char		relkind;

	in->rowtype = rowtype;
	in->relid = typeidTypeRelid(rowtype);

	/*
	 * The row type as its table has it now, the table locked first: the
	 * lock takes in what DDL committed before it, and no DDL commits after
	 * it until this transaction ends -- so none between this read and the
	 * end of the WAL a change stream then reads to, whose changes would
	 * otherwise come with columns this descriptor lacks (a pipeline's step
	 * failed so when a column was dropped and added again meanwhile).
	 */
	if (OidIsValid(in->relid))
		LockRelationOid(in->relid, AccessShareLock);
	in->rowdesc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	relkind = OidIsValid(in->relid) ? get_rel_relkind(in->relid) : '\0';
	in->readable = (relkind == RELKIND_RELATION ||
					relkind == RELKIND_PARTITIONED_TABLE ||
					relkind == RELKIND_VIEW ||
					relkind == RELKIND_MATVIEW ||
					relkind == RELKIND_FOREIGN_TABLE);
}

bool
ptf_bool_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
	return PG_GETARG_BOOL(argno);
}

bool
ptf_snapshot_arg(FunctionCallInfo fcinfo, int argno, bool changes, const char *uid)
{
	bool		snapshot = ptf_bool_arg(fcinfo, argno, "snapshot");

	if (snapshot && (!changes || uid == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snapshot => true is for a change stream: it needs changes => true and a uid"),
				 errhint("A stream's first call then starts with the rows the tables have.")));
	return snapshot;
}

char *
ptf_text_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return NULL;
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

KeySpec *
ptf_keys_arg(FunctionCallInfo fcinfo, int argno, TupleDesc rowdesc,
			 const char *name)
{
	if (PG_ARGISNULL(argno))
		return key_spec_from_attnos(rowdesc, 0, NULL);
	return key_spec_build(rowdesc, PG_GETARG_DATUM(argno), name);
}

AttrNumber
ptf_time_column_arg(FunctionCallInfo fcinfo, int argno, TupleDesc rowdesc,
					const char *name, Oid *typid)
{
	char	   *col = ptf_text_arg(fcinfo, argno);
	AttrNumber	attno;

	*typid = InvalidOid;
	if (col == NULL)
		return InvalidAttrNumber;
	attno = ptf_column_attno(rowdesc, col, name);
	*typid = TupleDescAttr(rowdesc, attno - 1)->atttypid;
	if (!ptf_is_time_type(*typid))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" has type %s, not a time type",
						name, col, format_type_be(*typid)),
				 errhint("Time columns are timestamp, timestamptz, or bigint milliseconds since 1970.")));
	return attno;
}

int64
ptf_interval_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		return -1;
	return ptf_interval_to_us(PG_GETARG_DATUM(argno), name);
}

int64
ptf_state_ttl_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		ttl = ptf_interval_arg(fcinfo, argno, "state_ttl");

	return ttl >= 0 ? ttl : ptf_state_ttl_us;
}

char *
ptf_uid_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *uid = ptf_text_arg(fcinfo, argno);

	if (uid != NULL && uid[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("uid must not be empty")));
	return uid;
}

/* set by another room (src/citus/), see common.h */
ptf_stream_table_hook_type ptf_stream_table_hook = NULL;

void
ptf_check_input_choice(const PtfInputArg *in, const char *query, bool changes,
					   const char *uid)
{
	if (changes)
	{
		if (uid == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changes => true needs a uid"),
					 errdetail("A change stream is read a step at a time; the uid keeps where it is.")));
		if (query != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changes => true reads the table's changes, query cannot be given too")));
		if (!OidIsValid(in->relid) || !in->readable)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changes => true needs a table, and type %s is not a table's",
							format_type_be(in->rowtype))));
		/* another room's refusal (Citus: the changes are on the shards, src/citus/) */
		if (ptf_stream_table_hook)
			ptf_stream_table_hook(in->relid);
	}
	else if (query == NULL && !in->readable)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("type %s is not the row type of a table or view",
						format_type_be(in->rowtype)),
				 errhint("Give query => '...' returning rows of this type.")));
}

static void
parsed_text_error_callback(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
}

void
ptf_parsed_text_push(PtfParsedText *pt, const char *text)
{
	ptf_error_context_push(&pt->callback, parsed_text_error_callback, (void *) text);
}

void
ptf_parsed_text_pop(PtfParsedText *pt)
{
	ptf_error_context_pop(&pt->callback);
}

/*
 * The key of a table's rows: its replica identity index, or under
 * REPLICA IDENTITY FULL its primary key; NULL when it logs none.
 */
KeySpec *
ptf_replica_identity_keys(Oid relid, TupleDesc rowdesc, char *replident)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	Oid			indexoid = RelationGetReplicaIndex(rel);
	KeySpec    *keys = NULL;

	/*
	 * Only FULL logs whole rows whatever the key; under NOTHING, or an
	 * identity index that is gone, no key is logged at all.
	 */
	*replident = rel->rd_rel->relreplident;
	if (!OidIsValid(indexoid) && *replident == REPLICA_IDENTITY_FULL)
		indexoid = RelationGetPrimaryKeyIndex(rel);

	if (OidIsValid(indexoid))
	{
		Relation	idx = index_open(indexoid, AccessShareLock);
		int			n = idx->rd_index->indnkeyatts;
		AttrNumber *attnos = palloc(sizeof(AttrNumber) * Max(n, 1));
		int			i;

		for (i = 0; i < n; i++)
			attnos[i] = idx->rd_index->indkey.values[i];
		keys = key_spec_from_attnos(rowdesc, n, attnos);
		index_close(idx, AccessShareLock);
	}
	relation_close(rel, AccessShareLock);
	return keys;
}

void
ptf_input_watermark(PtfFrameInputSpec *frame, Oid relid, const char *on_time, int64 delay,
					bool stream)
{
	if (delay < 0)
		delay = ptf_declared_watermark_delay(relid, on_time);
	if (delay < 0 && stream)
		delay = 0;
	frame->has_delay = (delay >= 0);
	frame->delay_us = Max(delay, 0);
}

/* keys a share of a call split by key should hold at least, by the statistics */
#define BY_KEY_MIN_KEYS_PER_SHARE 16

/*
 * The rows of relid and its groups of keys (at most as many), by the
 * planner's statistics; false when they do not say (not analyzed).
 */
static bool
estimate_groups(Oid relid, KeySpec *keys, double *rows, double *groups)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	int			i;

	if (!HeapTupleIsValid(tup))
		return false;
	*rows = ((Form_pg_class) GETSTRUCT(tup))->reltuples;
	ReleaseSysCache(tup);
	if (*rows <= 0)
		return false;
	*groups = 1;
	for (i = 0; i < keys->ncols; i++)
	{
		uint64		n = sql_input_estimate_distinct(relid, keys->cols[i].attno);

		if (n == 0)
			return false;
		*groups = Min(*groups * n, *rows);
	}
	return true;
}

/*
 * Whether a parallel call's partial results pay (engine/parallel.c): each
 * participant passes on a row per group it met -- a key's first rows, a
 * key's slices (per_key of them) -- which the leader then takes in once
 * more.  The planner's statistics say how many keys (a table not analyzed
 * is tried); as PostgreSQL's planner weighs partial aggregation, a call
 * whose groups, times the participants, come near 1/min_fold of its rows
 * -- each participant's rows folding into fewer than min_fold times as
 * few groups -- does not pass partial results on.
 */
bool
ptf_partials_pay(Oid relid, KeySpec *keys, double per_key, double min_fold)
{
	double		rows;
	double		groups;

	/*
	 * A worker decides as its leader did: an ANALYZE that committed since
	 * would have it split the call otherwise, an error.
	 */
	if (ptf_parallel_in_worker())
	{
		PtfParallelMode mode = ptf_parallel_leader_mode();

		return mode == PTF_PARALLEL_PARTIAL || mode == PTF_PARALLEL_FIRST_ARRIVAL ||
			mode == PTF_PARALLEL_FIRST_EVENT;
	}
	if (!estimate_groups(relid, keys, &rows, &groups))
		return true;
	groups = Min(groups * per_key, rows);
	Assert(min_fold >= 1);
	return groups * (max_parallel_workers_per_gather + 1) * min_fold <= rows;
}

/*
 * Whether a call split by key (engine/parallel.c, BY_KEY) has keys enough
 * for its shares: by their hash, a few keys would leave a worker with the
 * serial call's work and the others with a read of the table for nothing.
 * A table not analyzed is tried; a worker takes its leader's answer.
 */
bool
ptf_keys_fill_shares(Oid relid, KeySpec *keys)
{
	double		rows;
	double		groups;

	if (ptf_parallel_in_worker())
		return ptf_parallel_leader_mode() == PTF_PARALLEL_BY_KEY;
	if (!estimate_groups(relid, keys, &rows, &groups))
		return true;
	return groups >= (double) BY_KEY_MIN_KEYS_PER_SHARE * Max(max_parallel_workers_per_gather, 1);
}
