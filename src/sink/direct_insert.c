/*-------------------------------------------------------------------------
 *
 * direct_insert.c
 *	  Inserting a batch's new keys without a statement, as COPY FROM does.
 *
 * The rows are the batch's own composite datums (the table's row type,
 * its dropped columns included), so they are the table's tuples already:
 * they are checked (NOT NULL, CHECK), inserted by table_multi_insert a
 * chunk at a time, then entered into every index of the table with the
 * executor's own ExecInsertIndexTuples, which checks unique and
 * exclusion constraints as an INSERT would.  A table qualifies only when
 * nothing else would see its inserts: see direct_insert_open.
 *
 * Whether a key is present is asked of the key index with a dirty
 * snapshot, so a row another transaction is writing counts as present;
 * such keys go to INSERT ... ON CONFLICT, which waits for the writer.  A
 * key first written by another session between the probe and the insert
 * fails with the key's unique violation (as MERGE would); applying a
 * changelog to a table that others write under the same keys has no
 * meaningful order anyway.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/sortsupport.h"

#include "sink/direct_insert.h"

/* rows per table_multi_insert call, as COPY's buffers */
#define DIRECT_CHUNK_ROWS 1000

struct DirectInsert
{
	Relation	rel;
	Relation	index;			/* the key index, for probes and order */
	TupleDesc	rowdesc;
	int			nkeys;
	AttrNumber *key_attnos;		/* table columns of the index's keys */
	ScanKeyData *skeys;
	SortSupportData *ssup;
	SnapshotData dirty;
	IndexScanDesc scan;
	TupleTableSlot *probe_slot;
	bool		has_last;		/* the index's last key when the batch began */
	Datum	   *last_values;
	bool	   *last_nulls;

	EState	   *estate;
	ResultRelInfo *rri;
	BulkInsertState bistate;
	CommandId	cid;
	TupleTableSlot *slots[DIRECT_CHUNK_ROWS];
	int			nslots;
	MemoryContext cxt;			/* where it lives: its slots too */
	MemoryContext chunk_cxt;	/* what inserting a chunk leaks */
	uint64		inserted;
};

/*
 * Would anything but the rows themselves see an INSERT into rel?  Triggers
 * of any insert kind (foreign keys and deferred unique checks are
 * triggers), row-level security, stored generated columns, partitions and
 * partition routing all want the executor's INSERT; and so does a
 * read-only transaction, whose refusal (25006) is the executor's.
 */
static bool
inserts_are_plain(Relation rel, Relation index)
{
	TriggerDesc *t = rel->trigdesc;

	if (XactReadOnly && rel->rd_rel->relpersistence != RELPERSISTENCE_TEMP)
		return false;
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relispartition)
		return false;
	if (t != NULL &&
		(t->trig_insert_before_row || t->trig_insert_after_row ||
		 t->trig_insert_instead_row || t->trig_insert_before_statement ||
		 t->trig_insert_after_statement || t->trig_insert_new_table))
		return false;
	if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
		return false;
	if (rel->rd_att->constr != NULL && rel->rd_att->constr->has_generated_stored)
		return false;
	if (index == NULL)
		return true;
	/* the probe trusts the key index: a btree, complete, checked at once */
	return index->rd_rel->relam == BTREE_AM_OID &&
		index->rd_index->indisvalid && index->rd_index->indisready &&
		index->rd_index->indimmediate &&
		RelationGetForm(index)->relkind == RELKIND_INDEX;
}

static void
prepare_probe(DirectInsert *di)
{
	Relation	index = di->index;
	int			i;

	di->nkeys = index->rd_index->indnkeyatts;
	di->key_attnos = palloc(sizeof(AttrNumber) * di->nkeys);
	di->skeys = palloc0(sizeof(ScanKeyData) * di->nkeys);
	di->ssup = palloc0(sizeof(SortSupportData) * di->nkeys);
	for (i = 0; i < di->nkeys; i++)
	{
		Oid			family = index->rd_opfamily[i];
		Oid			type = index->rd_opcintype[i];
		Oid			eq = get_opfamily_member(family, type, type, BTEqualStrategyNumber);

		if (!OidIsValid(eq))
			elog(ERROR, "missing equality operator for type %u in family %u", type, family);
		di->key_attnos[i] = index->rd_index->indkey.values[i];
		Assert(di->key_attnos[i] > 0);	/* keys are columns, not expressions */
		ScanKeyEntryInitialize(&di->skeys[i], 0, i + 1, BTEqualStrategyNumber,
							   InvalidOid, index->rd_indcollation[i], get_opcode(eq),
							   (Datum) 0);

		di->ssup[i].ssup_cxt = CurrentMemoryContext;
		di->ssup[i].ssup_collation = index->rd_indcollation[i];
		di->ssup[i].ssup_nulls_first =
			(index->rd_indoption[i] & INDOPTION_NULLS_FIRST) != 0;
		di->ssup[i].ssup_attno = i + 1;
		PrepareSortSupportFromIndexRel(index, BTLessStrategyNumber, &di->ssup[i]);
		/* descending index columns: the index's order, whatever it is */
		if (index->rd_indoption[i] & INDOPTION_DESC)
			di->ssup[i].ssup_reverse = true;
	}
	InitDirtySnapshot(di->dirty);
	di->scan = index_beginscan(di->rel, index, &di->dirty, di->nkeys, 0);
	di->probe_slot = table_slot_create(di->rel, NULL);
}

/*
 * The key of the index's last entry (in index order) that is live or being
 * written, if any: keys after it are absent without a probe -- a backlog's
 * new keys mostly are, and an empty table has none.  A later key written
 * by another session meanwhile fails our insert with the unique violation.
 */
static void
read_last_key(DirectInsert *di)
{
	IndexScanDesc scan = index_beginscan(di->rel, di->index, &di->dirty, 0, 0);
	HeapTuple	tuple;
	bool		shouldfree;
	int			i;

	index_rescan(scan, NULL, 0, NULL, 0);
	di->last_values = palloc(sizeof(Datum) * di->nkeys);
	di->last_nulls = palloc(sizeof(bool) * di->nkeys);
	di->has_last = index_getnext_slot(scan, BackwardScanDirection, di->probe_slot);
	if (di->has_last)
	{
		tuple = ExecFetchSlotHeapTuple(di->probe_slot, true, &shouldfree);
		for (i = 0; i < di->nkeys; i++)
		{
			Form_pg_attribute att = TupleDescAttr(di->rowdesc, di->key_attnos[i] - 1);

			di->last_values[i] = heap_getattr(tuple, di->key_attnos[i], di->rowdesc,
											  &di->last_nulls[i]);
			if (!di->last_nulls[i])
				di->last_values[i] = datumCopy(di->last_values[i], att->attbyval, att->attlen);
		}
		if (shouldfree)
			heap_freetuple(tuple);
	}
	ExecClearTuple(di->probe_slot);
	index_endscan(scan);
}

static void
prepare_insert(DirectInsert *di)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	di->estate = CreateExecutorState();
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(di->rel);
	rte->relkind = di->rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	ExecInitRangeTable(di->estate, list_make1(rte));
	di->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(di->rri, di->rel, 1, NULL, 0);
	CheckValidResultRel(di->rri, CMD_INSERT);
	ExecOpenIndices(di->rri, false);
	di->cid = GetCurrentCommandId(true);
	di->estate->es_output_cid = di->cid;
	di->bistate = GetBulkInsertState();
	di->chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf direct insert",
										  ALLOCSET_DEFAULT_SIZES);
}

bool
direct_insert_possible(Oid relid)
{
	Relation	rel = table_open(relid, RowExclusiveLock);
	bool		plain = inserts_are_plain(rel, NULL);

	/* the lock stays: what is checked holds until the transaction ends */
	table_close(rel, NoLock);
	return plain;
}

DirectInsert *
direct_insert_open(Oid relid, Oid key_index, TupleDesc rowdesc)
{
	Relation	rel = table_open(relid, RowExclusiveLock);
	Relation	index = OidIsValid(key_index) ? index_open(key_index, AccessShareLock) : NULL;
	DirectInsert *di;

	if (!inserts_are_plain(rel, index))
	{
		if (index != NULL)
			index_close(index, AccessShareLock);
		table_close(rel, NoLock);
		return NULL;
	}
	di = palloc0(sizeof(DirectInsert));
	di->cxt = CurrentMemoryContext;
	di->rel = rel;
	di->index = index;
	di->rowdesc = rowdesc != NULL ? rowdesc : RelationGetDescr(rel);
	Assert(di->rowdesc->natts == RelationGetDescr(rel)->natts);
	if (index != NULL)
	{
		prepare_probe(di);
		read_last_key(di);
	}
	prepare_insert(di);
	return di;
}

/* a row's key columns, in the index's column order */
static void
row_keys(DirectInsert *di, Datum row, Datum *values, bool *nulls)
{
	HeapTupleHeader hdr = DatumGetHeapTupleHeader(row);
	HeapTupleData tuple;
	int			i;

	tuple.t_len = HeapTupleHeaderGetDatumLength(hdr);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = hdr;
	for (i = 0; i < di->nkeys; i++)
		values[i] = heap_getattr(&tuple, di->key_attnos[i], di->rowdesc, &nulls[i]);
}

typedef struct SortItem
{
	Datum		row;
	Datum	   *values;
	bool	   *nulls;
} SortItem;

/* two keys in the key index's order */
static int
compare_keys(DirectInsert *di, const Datum *xv, const bool *xn,
			 const Datum *yv, const bool *yn)
{
	int			i;

	for (i = 0; i < di->nkeys; i++)
	{
		int			c = ApplySortComparator(xv[i], xn[i], yv[i], yn[i], &di->ssup[i]);

		if (c != 0)
			return c;
	}
	return 0;
}

static int
compare_items(const void *a, const void *b, void *arg)
{
	const SortItem *x = (const SortItem *) a;
	const SortItem *y = (const SortItem *) b;

	return compare_keys((DirectInsert *) arg, x->values, x->nulls, y->values, y->nulls);
}

void
direct_insert_sort(DirectInsert *di, Datum *rows, int n)
{
	SortItem   *items;
	Datum	   *values;
	bool	   *nulls;
	int			i;

	if (n < 2)
		return;
	items = palloc(sizeof(SortItem) * n);
	values = palloc(sizeof(Datum) * n * di->nkeys);
	nulls = palloc(sizeof(bool) * n * di->nkeys);
	for (i = 0; i < n; i++)
	{
		items[i].row = rows[i];
		items[i].values = values + i * di->nkeys;
		items[i].nulls = nulls + i * di->nkeys;
		row_keys(di, rows[i], items[i].values, items[i].nulls);
	}
	qsort_arg(items, n, sizeof(SortItem), compare_items, di);
	for (i = 0; i < n; i++)
		rows[i] = items[i].row;
	pfree(items);
	pfree(values);
	pfree(nulls);
}

bool
direct_insert_key_exists(DirectInsert *di, Datum row)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];
	bool		found;
	int			i;

	row_keys(di, row, values, nulls);
	for (i = 0; i < di->nkeys; i++)
	{
		/* a NULL key matches nothing; the insert's NOT NULL check says why */
		if (nulls[i])
			return false;
		di->skeys[i].sk_argument = values[i];
	}
	if (!di->has_last ||
		compare_keys(di, values, nulls, di->last_values, di->last_nulls) > 0)
		return false;
	index_rescan(di->scan, di->skeys, di->nkeys, NULL, 0);
	found = index_getnext_slot(di->scan, ForwardScanDirection, di->probe_slot);
	ExecClearTuple(di->probe_slot);
	return found;
}

/* Insert the buffered rows, then their index entries. */
static void
flush_chunk(DirectInsert *di)
{
	MemoryContext old;
	int			i;

	if (di->nslots == 0)
		return;
	old = MemoryContextSwitchTo(di->chunk_cxt);
	table_multi_insert(di->rel, di->slots, di->nslots, di->cid, 0, di->bistate);
	for (i = 0; i < di->nslots; i++)
	{
		if (di->rri->ri_NumIndices > 0)
		{
			/* deferred checks need triggers, which rule this path out */
			List	   *recheck = ExecInsertIndexTuples(di->rri, di->slots[i], di->estate,
														false, false, NULL, NIL);

			Assert(recheck == NIL);
			list_free(recheck);
		}
		ResetPerTupleExprContext(di->estate);
		ExecClearTuple(di->slots[i]);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(di->chunk_cxt);
	di->inserted += di->nslots;
	di->nslots = 0;
}

/* the slot the next row goes into */
static TupleTableSlot *
next_slot(DirectInsert *di)
{
	CHECK_FOR_INTERRUPTS();
	if (di->slots[di->nslots] == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(di->cxt);

		di->slots[di->nslots] = table_slot_create(di->rel, NULL);
		MemoryContextSwitchTo(old);
	}
	return di->slots[di->nslots];
}

/* Check the row in the next slot and count it in; a full chunk goes in. */
static void
add_next_slot(DirectInsert *di, TupleTableSlot *slot)
{
	if (di->rel->rd_att->constr != NULL)
		ExecConstraints(di->rri, slot, di->estate);
	ResetPerTupleExprContext(di->estate);
	if (++di->nslots == DIRECT_CHUNK_ROWS)
		flush_chunk(di);
}

void
direct_insert_add_slot(DirectInsert *di, TupleTableSlot *row)
{
	TupleTableSlot *slot = next_slot(di);

	ExecCopySlot(slot, row);
	add_next_slot(di, slot);
}

void
direct_insert_add(DirectInsert *di, Datum row)
{
	HeapTupleHeader hdr = DatumGetHeapTupleHeader(row);
	HeapTupleData tuple;
	TupleTableSlot *slot = next_slot(di);

	tuple.t_len = HeapTupleHeaderGetDatumLength(hdr);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = RelationGetRelid(di->rel);
	tuple.t_data = hdr;
	ExecForceStoreHeapTuple(&tuple, slot, false);
	add_next_slot(di, slot);
}

uint64
direct_insert_close(DirectInsert *di)
{
	uint64		inserted;
	int			i;

	flush_chunk(di);
	inserted = di->inserted;
	for (i = 0; i < DIRECT_CHUNK_ROWS && di->slots[i] != NULL; i++)
		ExecDropSingleTupleTableSlot(di->slots[i]);
	if (di->index != NULL)
	{
		ExecDropSingleTupleTableSlot(di->probe_slot);
		index_endscan(di->scan);
		index_close(di->index, AccessShareLock);
	}
	FreeBulkInsertState(di->bistate);
	table_finish_bulk_insert(di->rel, 0);
	ExecCloseIndices(di->rri);
	ExecResetTupleTable(di->estate->es_tupleTable, false);
	FreeExecutorState(di->estate);
	table_close(di->rel, NoLock);
	/* what follows (the upserts, the next batch) sees these rows */
	CommandCounterIncrement();
	return inserted;
}
