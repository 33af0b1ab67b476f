/*-------------------------------------------------------------------------
 *
 * sql_input.c
 *	  Relation and query inputs, run by the executor through SPI.
 *
 * A relation input is "SELECT * FROM rel", so arrival order is the order
 * of a plain scan.  A query input is the user's query, planned first so
 * its result shape is checked before it runs.  Rows reach the frame
 * through a DestReceiver (SPI_execute_plan_extended with options.dest):
 * no tuplestore between the executor and the operator.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "parser/parsetree.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "input/input.h"

typedef struct SqlInputDest
{
	DestReceiver pub;
	PtfSqlInput *in;
	PtfRowSink	sink;
	void	   *sink_arg;
	TupleTableSlot *conv_slot;	/* row type layout, when converting */
	TupleTableSlot *data_slot;	/* the data column of (kind, data) rows */
	AttrNumber	kind_attno;
	AttrNumber	data_attno;
	HeapTupleData data_tuple;	/* the data column's row, in data_slot */
	MemoryContext rowcxt;		/* reset for every row */
} SqlInputDest;

void
ptf_slot_store_composite(TupleTableSlot *slot, Datum composite, HeapTupleData *buf)
{
	HeapTupleHeader th = DatumGetHeapTupleHeader(composite);

	buf->t_len = HeapTupleHeaderGetDatumLength(th);
	ItemPointerSetInvalid(&buf->t_self);
	buf->t_tableOid = InvalidOid;
	buf->t_data = th;
	ExecStoreHeapTuple(buf, slot, false);
}

/* Non-dropped columns of a descriptor, for shape checks. */
static int
visible_columns(TupleDesc desc, AttrNumber *attnos, int max)
{
	int			n = 0;
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		if (n < max)
			attnos[n] = i + 1;
		n++;
	}
	return n;
}

/* Is the result (kind text, data <rowtype>)? */
static bool
is_changelog_shape(TupleDesc result, TupleDesc rowdesc)
{
	AttrNumber	cols[2];

	if (visible_columns(result, cols, 2) != 2)
		return false;
	return TupleDescAttr(result, cols[0] - 1)->atttypid == TEXTOID &&
		TupleDescAttr(result, cols[1] - 1)->atttypid == rowdesc->tdtypeid;
}

/*
 * A result (kind text, data <another row type>) is a changelog of the
 * wrong type, unless the row type's own columns are (text, that type):
 * said so, rather than as a mismatch of its first column by position.
 */
static void
check_changelog_type(TupleDesc result, TupleDesc rowdesc)
{
	AttrNumber	cols[2];
	AttrNumber	rowcols[2];
	Oid			data;

	if (visible_columns(result, cols, 2) != 2 ||
		TupleDescAttr(result, cols[0] - 1)->atttypid != TEXTOID)
		return;
	data = TupleDescAttr(result, cols[1] - 1)->atttypid;
	if (!type_is_rowtype(data))
		return;
	if (visible_columns(rowdesc, rowcols, 2) == 2 &&
		TupleDescAttr(rowdesc, rowcols[0] - 1)->atttypid == TEXTOID &&
		TupleDescAttr(rowdesc, rowcols[1] - 1)->atttypid == data)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("the query returns (text, %s) rows, and a changelog's data must be of type %s",
					format_type_be(data), format_type_be(rowdesc->tdtypeid)),
			 errhint("Make it one: ROW((data).*)::%s.", format_type_be(rowdesc->tdtypeid))));
}

void
sql_input_prepare(PtfSqlInput *in)
{
	const char *sql;
	List	   *sources;
	CachedPlanSource *src;
	TupleDesc	result;

	if (in->query != NULL)
		sql = in->query;
	else
		sql = psprintf("SELECT * FROM %s", ptf_relation_sql_name(in->relid));

	in->plan = SPI_prepare(sql, in->nparams, in->paramtypes);
	if (in->plan == NULL)
		elog(ERROR, "SPI_prepare failed for input: %s",
			 SPI_result_code_string(SPI_result));

	sources = SPI_plan_get_plan_sources(in->plan);
	if (list_length(sources) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query must be a single statement")));
	src = (CachedPlanSource *) linitial(sources);
	result = src->resultDesc;
	if (result == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query must return rows"),
				 errdetail("The input query is: %s", sql)));

	in->changelog = (in->query != NULL && is_changelog_shape(result, in->rowdesc));
	if (!in->changelog)
	{
		if (in->query != NULL)
			check_changelog_type(result, in->rowdesc);
		/* errors (42804) naming the first column that does not match */
		in->map = convert_tuples_by_position(result, in->rowdesc,
											 in->query != NULL ?
											 "query result does not match the input row type" :
											 "relation columns do not match the input row type");
	}
}

static void
dest_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	SqlInputDest *d = (SqlInputDest *) self;

	/* once: a relation read by ranges starts its receiver for every range */
	if (d->in->changelog && d->data_slot == NULL)
	{
		AttrNumber	cols[2];

		visible_columns(typeinfo, cols, 2);
		d->kind_attno = cols[0];
		d->data_attno = cols[1];
		d->data_slot = MakeSingleTupleTableSlot(d->in->rowdesc,
												&TTSOpsHeapTuple);
	}
	else if (!d->in->changelog && d->in->map != NULL && d->conv_slot == NULL)
		d->conv_slot = MakeSingleTupleTableSlot(d->in->rowdesc, &TTSOpsVirtual);
}

/* A kind for a message: a long one cut, as a row is (cdc_rows.c) */
static const char *
kind_text(const char *s)
{
	int			len = strlen(s);

	if (len <= 64)
		return s;
	return psprintf("%s...", pnstrdup(s, pg_mbcliplen(s, len, 64)));
}

static RowKind
changelog_kind(TupleTableSlot *slot, AttrNumber attno, bool truncations)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, attno, &isnull);
	char	   *s;
	RowKind		kind;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("input changelog row has a NULL kind")));
	s = TextDatumGetCString(d);
	if (truncations && strcmp(s, "TRUNCATE") == 0)
		return ROWKIND_TRUNCATE;
	if (!rowkind_parse(s, &kind))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("input changelog row has unknown kind \"%s\"", kind_text(s)),
				 strcmp(s, "TRUNCATE") == 0 ?
				 errhint("Kinds are +I, -U, +U, -D (or INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE). A truncation (to_changelog's TRUNCATE row) is one for apply_changelog only: leave it out here (WHERE op <> 'TRUNCATE').") :
				 errhint("Kinds are +I, -U, +U, -D (or INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE).")));
	return kind;
}

static bool
dest_receive(TupleTableSlot *slot, DestReceiver *self)
{
	SqlInputDest *d = (SqlInputDest *) self;
	MemoryContext old;

	/* what the last row left behind, if anything (most rows leave nothing) */
	if (!d->rowcxt->isReset)
		MemoryContextReset(d->rowcxt);
	old = MemoryContextSwitchTo(d->rowcxt);

	if (d->in->changelog)
	{
		RowKind		kind = changelog_kind(slot, d->kind_attno, d->in->truncations);
		bool		isnull;
		Datum		data = slot_getattr(slot, d->data_attno, &isnull);

		if (kind == ROWKIND_TRUNCATE)
		{
			/* the table's every row goes: no row of its own */
			ExecClearTuple(d->data_slot);
			d->sink(d->sink_arg, kind, d->data_slot, NULL);
		}
		else
		{
			if (isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("input changelog row has a NULL data row")));
			ptf_slot_store_composite(d->data_slot, data, &d->data_tuple);
			d->sink(d->sink_arg, kind, d->data_slot, NULL);
			ExecClearTuple(d->data_slot);
		}
	}
	else if (d->conv_slot != NULL)
	{
		execute_attr_map_slot(d->in->map->attrMap, slot, d->conv_slot);
		d->sink(d->sink_arg, ROWKIND_INSERT, d->conv_slot, NULL);
	}
	else
		d->sink(d->sink_arg, ROWKIND_INSERT, slot, NULL);

	MemoryContextSwitchTo(old);
	return true;
}

static void
dest_shutdown(DestReceiver *self)
{
}

static void
dest_destroy(DestReceiver *self)
{
}

static void run_input(PtfSqlInput *in, PtfRowSink sink, void *arg, bool read_only);

void
sql_input_run(PtfSqlInput *in, PtfRowSink sink, void *arg)
{
	run_input(in, sink, arg, false);
}

void
sql_input_run_in_active_snapshot(PtfSqlInput *in, PtfRowSink sink, void *arg)
{
	run_input(in, sink, arg, true);
}

static void
dest_init(SqlInputDest *dest, PtfSqlInput *in)
{
	memset(dest, 0, sizeof(*dest));
	dest->pub.receiveSlot = dest_receive;
	dest->pub.rStartup = dest_startup;
	dest->pub.rShutdown = dest_shutdown;
	dest->pub.rDestroy = dest_destroy;
	dest->pub.mydest = DestNone;
	dest->in = in;
	dest->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf input row",
										 ALLOCSET_DEFAULT_SIZES);
}

/*
 * The slots stay, in the caller's memory: a sink may still hold the last
 * row it was handed (apply_changelog's batch does).
 */
static void
dest_free(SqlInputDest *dest)
{
	MemoryContextDelete(dest->rowcxt);
}

/* read_only: in the active snapshot, as SPI runs read-only statements */
static void
run_input(PtfSqlInput *in, PtfRowSink sink, void *arg, bool read_only)
{
	SqlInputDest dest;
	SPIExecuteOptions options;
	int			rc;

	dest_init(&dest, in);
	dest.sink = sink;
	dest.sink_arg = arg;

	memset(&options, 0, sizeof(options));
	options.read_only = read_only;
	options.dest = &dest.pub;
	options.params = in->params;

	rc = SPI_execute_plan_extended(in->plan, &options);
	if (rc < 0)
		elog(ERROR, "input query failed: %s", SPI_result_code_string(rc));

	dest_free(&dest);
}

/*
 * Block ranges.  A parallel call's participants read its input in chunks
 * of consecutive blocks.  A TID range scan ("WHERE ctid >= $1 AND ctid <
 * $2") would read them without the ring of buffers PostgreSQL gives a
 * sequential scan of a table larger than a quarter of shared_buffers
 * (BAS_BULKREAD): every block not in shared buffers would take a buffer
 * of the pool, evicting other tables' pages, and a parallel worker -- a
 * fresh process -- faults in each 4 kB page of every buffer it fills
 * (10M rows, 575 MB: 105k faults a worker, half its CPU).  So the
 * relation's own "SELECT * FROM rel", when it is planned as a sequential
 * scan, is started once by each participant, and its heap scan is given
 * each range as limits (heap_setscanlimits, as a block range index build
 * does): the executor checks privileges and applies row-level security as
 * for the serial call's statement, and the scan has the serial call's
 * ring, never a synchronized start.
 */
typedef struct PtfSqlRanges
{
	CachedPlan *cplan;
	QueryDesc  *qd;
	SeqScanState *scan;
	SqlInputDest dest;
} PtfSqlRanges;

/* The prepared relation input's one plan, if a sequential scan of the relation; else NULL. */
static CachedPlan *
seqscan_plan(PtfSqlInput *in, PlannedStmt **stmt)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(in->plan);
	PlannedStmt *ps;

	if (cplan == NULL)
		return NULL;
	ps = list_length(cplan->stmt_list) == 1 ?
		linitial_node(PlannedStmt, cplan->stmt_list) : NULL;
	if (ps == NULL || ps->commandType != CMD_SELECT || ps->hasModifyingCTE ||
		!IsA(ps->planTree, SeqScan) ||
		rt_fetch(((Scan *) ps->planTree)->scanrelid, ps->rtable)->relid != in->relid)
	{
		ReleaseCachedPlan(cplan, NULL);
		return NULL;
	}
	*stmt = ps;
	return cplan;
}

bool
sql_input_reads_by_ranges(PtfSqlInput *in)
{
	PlannedStmt *stmt;
	CachedPlan *cplan;

	if (in->query != NULL || in->nparams != 0 || in->changelog)
		return false;
	cplan = seqscan_plan(in, &stmt);
	if (cplan == NULL)
		return false;
	ReleaseCachedPlan(cplan, NULL);
	return true;
}

void
sql_input_ranges_begin(PtfSqlInput *in)
{
	PtfSqlRanges *r;
	PlannedStmt *stmt;
	CachedPlanSource *src = linitial(SPI_plan_get_plan_sources(in->plan));
	Relation	rel;

	Assert(in->ranges == NULL && in->query == NULL && in->nparams == 0);
	r = palloc0(sizeof(PtfSqlRanges));
	r->cplan = seqscan_plan(in, &stmt);
	if (r->cplan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the input of a parallel call is no longer planned as a sequential scan"),
				 errdetail("The table's plan changed while the call started (an index made, statistics gathered)."),
				 errhint("Run the call again; SET max_parallel_workers_per_gather = 0 runs it in one process.")));
	dest_init(&r->dest, in);
	r->qd = CreateQueryDesc(stmt, src->query_string, GetActiveSnapshot(), InvalidSnapshot,
							&r->dest.pub, NULL, NULL, 0);
	ExecutorStart(r->qd, 0);
	r->scan = castNode(SeqScanState, r->qd->planstate);
	rel = r->scan->ss.ss_currentRelation;
	if (rel->rd_tableam != GetHeapamTableAmRoutine())
		elog(ERROR, "the input of a parallel call is not a heap table");
	in->ranges = r;
}

void
sql_input_ranges_run(PtfSqlInput *in, BlockNumber start, BlockNumber nblocks,
					 PtfRowSink sink, void *arg)
{
	PtfSqlRanges *r = in->ranges;
	TableScanDesc scan = r->scan->ss.ss_currentScanDesc;
	BlockNumber size;

	r->dest.sink = sink;
	r->dest.sink_arg = arg;
	if (scan == NULL)
	{
		/* what SeqNext would begin, with its ring but never a synchronized start */
		MemoryContext old = MemoryContextSwitchTo(r->qd->estate->es_query_cxt);

		scan = table_beginscan_strat(r->scan->ss.ss_currentRelation,
									 r->qd->estate->es_snapshot, 0, NULL, true, false);
		MemoryContextSwitchTo(old);
		r->scan->ss.ss_currentScanDesc = scan;
	}
	else
		ExecutorRewind(r->qd);	/* the table's size again; the ring kept */
	Assert(!(scan->rs_flags & SO_ALLOW_SYNC));
	size = ((HeapScanDesc) scan)->rs_nblocks;
	if (start >= size)
		return;
	heap_setscanlimits(scan, start, Min(nblocks, size - start));
	ExecutorRun(r->qd, ForwardScanDirection, 0, false);
}

void
sql_input_ranges_end(PtfSqlInput *in)
{
	PtfSqlRanges *r = in->ranges;

	if (r == NULL)
		return;
	ExecutorFinish(r->qd);
	ExecutorEnd(r->qd);
	FreeQueryDesc(r->qd);
	ReleaseCachedPlan(r->cplan, NULL);
	dest_free(&r->dest);
	pfree(r);
	in->ranges = NULL;
}

uint64
sql_input_estimate_distinct(Oid relid, AttrNumber attno)
{
	HeapTuple	tup;
	double		ndistinct;
	double		reltuples;

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return 0;
	reltuples = ((Form_pg_class) GETSTRUCT(tup))->reltuples;
	ReleaseSysCache(tup);
	tup = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid), Int16GetDatum(attno),
						  BoolGetDatum(false));
	if (!HeapTupleIsValid(tup))
		return 0;
	ndistinct = ((Form_pg_statistic) GETSTRUCT(tup))->stadistinct;
	ReleaseSysCache(tup);
	if (reltuples <= 0)
		return 0;
	/* negative: a share of the rows, as ANALYZE writes it for large ones */
	if (ndistinct < 0)
		ndistinct = -ndistinct * reltuples;
	ndistinct = Min(ndistinct, reltuples);
	return ndistinct >= 1 ? (uint64) ndistinct : 0;
}

/*
 * The least and greatest value of an integer column (int2, int4, int8) that
 * the planner's statistics saw, in its most common values and its
 * histogram's bounds; false when they do not say.  A sample, perhaps
 * stale: the table may hold values outside.
 */
bool
sql_input_estimate_range(Oid relid, AttrNumber attno, int64 *lo, int64 *hi)
{
	static const int kinds[] = {STATISTIC_KIND_MCV, STATISTIC_KIND_HISTOGRAM};
	Oid			typid = get_atttype(relid, attno);
	HeapTuple	tup;
	bool		found = false;
	int			k;

	if (typid != INT2OID && typid != INT4OID && typid != INT8OID)
		return false;
	tup = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid), Int16GetDatum(attno),
						  BoolGetDatum(false));
	if (!HeapTupleIsValid(tup))
		return false;
	for (k = 0; k < (int) lengthof(kinds); k++)
	{
		AttStatsSlot sslot;
		int			i;

		if (!get_attstatsslot(&sslot, tup, kinds[k], InvalidOid, ATTSTATSSLOT_VALUES))
			continue;
		for (i = 0; i < sslot.nvalues; i++)
		{
			int64		v = typid == INT2OID ? DatumGetInt16(sslot.values[i]) :
				typid == INT4OID ? DatumGetInt32(sslot.values[i]) :
				DatumGetInt64(sslot.values[i]);

			if (!found || v < *lo)
				*lo = v;
			if (!found || v > *hi)
				*hi = v;
			found = true;
		}
		free_attstatsslot(&sslot);
	}
	ReleaseSysCache(tup);
	return found;
}

double
sql_input_estimate_rows(PtfSqlInput *in)
{
	CachedPlan *cp;
	double		rows = 0;

	if (in->plan == NULL)
		return 0;
	cp = SPI_plan_get_cached_plan(in->plan);
	if (cp == NULL)
		return 0;
	if (list_length(cp->stmt_list) == 1)
	{
		PlannedStmt *ps = linitial_node(PlannedStmt, cp->stmt_list);

		if (ps->planTree != NULL)
			rows = ps->planTree->plan_rows;
	}
	ReleaseCachedPlan(cp, NULL);
	return rows;
}
