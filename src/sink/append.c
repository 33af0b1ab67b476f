/*-------------------------------------------------------------------------
 *
 * append.c
 *	  An append pipeline's rows multi-inserted into its sink.
 *
 * The step's query runs through SPI into a receiver of ours instead of an
 * INSERT; each row is copied into a slot of the sink's row type (dropped
 * columns NULL) and handed to sink/direct_insert.c, which checks the
 * sink's constraints and inserts a chunk at a time with its index
 * entries.  The sink is opened when the executor starts the query, so
 * the rows take the query's command id and the query does not see them,
 * as with INSERT ... SELECT.  Everything happens in the step's
 * transaction: exactly-once and kill-safety are the step's as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/tupdesc.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "sink/append.h"
#include "sink/direct_insert.h"

typedef struct AppendDest
{
	DestReceiver pub;
	Oid			relid;
	TupleDesc	sinkdesc;
	AttrNumber *map;			/* sink column -> query column, 0: NULL */
	TupleTableSlot *row;		/* the sink's row type */
	DirectInsert *di;
	MemoryContext cxt;			/* the caller's: outlives the executor's */
	MemoryContext rowcxt;
} AppendDest;

/*
 * Would INSERT INTO sink SELECT * FROM (query) take the query's columns
 * as they are?  Every sink column (dropped ones aside) gets the query's
 * column of its position, of the same type and a typmod INSERT would not
 * enforce; no default, identity or generated value is involved.
 */
static AttrNumber *
columns_as_they_are(TupleDesc sink, TupleDesc result)
{
	AttrNumber *map = palloc0(sizeof(AttrNumber) * Max(sink->natts, 1));
	int			next = 0;
	int			i;

	for (i = 0; i < sink->natts; i++)
	{
		Form_pg_attribute s = TupleDescAttr(sink, i);
		Form_pg_attribute r;

		if (s->attisdropped)
			continue;
		if (next >= result->natts || s->attidentity || s->attgenerated)
			return NULL;
		r = TupleDescAttr(result, next);
		if (r->atttypid != s->atttypid ||
			(s->atttypmod != -1 && r->atttypmod != s->atttypmod))
			return NULL;
		map[i] = ++next;
	}
	return next == result->natts ? map : NULL;
}

static void
append_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	AppendDest *d = (AppendDest *) self;
	MemoryContext old = MemoryContextSwitchTo(d->cxt);

	/* now: the rows take the query's command id */
	d->di = direct_insert_open(d->relid, InvalidOid, NULL);
	if (d->di == NULL)
		elog(ERROR, "sink %u changed while locked", d->relid);
	d->row = MakeSingleTupleTableSlot(d->sinkdesc, &TTSOpsVirtual);
	MemoryContextSwitchTo(old);
}

static bool
append_receive(TupleTableSlot *slot, DestReceiver *self)
{
	AppendDest *d = (AppendDest *) self;
	TupleTableSlot *row = d->row;
	MemoryContext old;
	int			i;

	MemoryContextReset(d->rowcxt);
	old = MemoryContextSwitchTo(d->rowcxt);
	slot_getallattrs(slot);
	ExecClearTuple(row);
	for (i = 0; i < d->sinkdesc->natts; i++)
	{
		AttrNumber	a = d->map[i];

		row->tts_values[i] = a ? slot->tts_values[a - 1] : (Datum) 0;
		row->tts_isnull[i] = a ? slot->tts_isnull[a - 1] : true;
	}
	ExecStoreVirtualTuple(row);
	direct_insert_add_slot(d->di, row);
	MemoryContextSwitchTo(old);
	return true;
}

static void
append_shutdown(DestReceiver *self)
{
}

static void
append_destroy(DestReceiver *self)
{
}

bool
append_rows_direct(Oid relid, const char *query)
{
	SPIPlanPtr	plan;
	CachedPlanSource *source;
	AppendDest	d;
	SPIExecuteOptions options;
	Relation	rel;
	int			rc;

	/* the statement's own privilege check; it says no better */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_INSERT, ACLMASK_ALL) != ACLCHECK_OK)
		return false;
	if (!direct_insert_possible(relid))
		return false;

	plan = SPI_prepare(psprintf("SELECT * FROM (%s) AS q", query), 0, NULL);
	if (plan == NULL)
		elog(ERROR, "could not prepare the pipeline's query: %s",
			 SPI_result_code_string(SPI_result));
	if (list_length(SPI_plan_get_plan_sources(plan)) != 1)
		return false;
	source = linitial(SPI_plan_get_plan_sources(plan));
	if (source->resultDesc == NULL)
		return false;

	memset(&d, 0, sizeof(d));
	rel = relation_open(relid, NoLock);
	d.sinkdesc = CreateTupleDescCopy(RelationGetDescr(rel));
	relation_close(rel, NoLock);
	d.map = columns_as_they_are(d.sinkdesc, source->resultDesc);
	if (d.map == NULL)
	{
		SPI_freeplan(plan);
		return false;
	}
	d.pub.receiveSlot = append_receive;
	d.pub.rStartup = append_startup;
	d.pub.rShutdown = append_shutdown;
	d.pub.rDestroy = append_destroy;
	d.pub.mydest = DestNone;
	d.relid = relid;
	d.cxt = CurrentMemoryContext;
	d.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf append row",
									 ALLOCSET_DEFAULT_SIZES);

	memset(&options, 0, sizeof(options));
	options.dest = &d.pub;
	rc = SPI_execute_plan_extended(plan, &options);
	if (rc < 0)
		elog(ERROR, "pipeline step failed: %s", SPI_result_code_string(rc));
	if (d.di != NULL)
		direct_insert_close(d.di);
	if (d.row != NULL)
		ExecDropSingleTupleTableSlot(d.row);
	MemoryContextDelete(d.rowcxt);
	SPI_freeplan(plan);
	return true;
}
