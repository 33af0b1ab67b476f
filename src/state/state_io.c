/*-------------------------------------------------------------------------
 *
 * state_io.c
 *	  Reading a uid's state table into keyed state, and writing back what
 *	  a call changed.
 *
 * The rows are read and written with the heap AM directly: writing back
 * is a multi-insert of new rows plus updates and deletes by TID of changed
 * and removed ones (each record and namespace remembers the TID it was
 * read from); the uid's lock keeps everybody else's hands off the table
 * while TIDs are in use (a pipeline worker keeps them between its steps).
 * Once the table has indexes every write keeps them.
 *
 * Reading.  A call either reads the whole table by one sequential scan,
 * or only the keys its rows touch (an index on the key columns, or on a
 * hash of them for keys that can be long, one scan per batch of keys,
 * sorted and deduplicated by the btree's array keys)
 * and the keys whose timers come due as the watermark moves (an index on
 * the layout's timer field), and may read the rest by a scan later.  The
 * engine decides which (engine/state_load.c); here a key already in
 * memory is never read again -- memory is newer than the table until
 * written back -- nor is a row whose key was removed since (its TID is
 * dead).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "state/durable_internal.h"
#include "state/keyed_state_durable.h"
#include "state/row_images.h"

#define INSERT_BATCH 1000

/* ---- reading the whole table ---- */

static void
decode_fields(DurableState *ds, TupleTableSlot *slot, Datum *values, bool *nulls)
{
	int			i;

	for (i = 0; i < ds->layout->nfields; i++)
	{
		const StateField *f = &ds->layout->fields[i];
		AttrNumber	a = ds->att_fields + i;

		nulls[i] = slot->tts_isnull[a - 1];
		if (nulls[i])
			continue;
		values[i] = slot->tts_values[a - 1];
		switch (f->type)
		{
			case SF_TIME:
				values[i] = Int64GetDatum(ptf_time_from_datum(values[i], ds->time_type));
				break;
			case SF_BYTEA:
				values[i] = PointerGetDatum(PG_DETOAST_DATUM(values[i]));
				break;
			case SF_IMAGE:
				{
					bytea	   *b = DatumGetByteaPP(values[i]);

					values[i] = PointerGetDatum(row_image_from_bytes(VARDATA_ANY(b),
																 VARSIZE_ANY_EXHDR(b),
																 ds->rowdescs[f->input]));
				}
				break;
			case SF_IMAGES:
				values[i] = PointerGetDatum(state_images_from_bytea(DatumGetByteaPP(values[i]),
															  ds->rowdescs[f->input]));
				break;
			default:
				break;
		}
	}
}

/*
 * Reading state-table rows into memory: the scan's, a probe's, a timer
 * search's.  A partial load (state in use) skips keys memory holds and
 * rows of keys removed since they were read (dead TIDs, sorted).
 */
typedef struct RowLoader
{
	DurableState *ds;
	KeyedState *ks;
	const StateCodec *codec;
	bool		partial;
	bool		keep_expiry;
	Datum	   *fvalues;
	bool	   *fnulls;
	HTAB	   *dead;			/* NULL: none */
	MemoryContext rowcxt;
	ErrorContextCallback errcb;	/* names the uid in errors */
} RowLoader;

/*
 * The dead TIDs as a set, brought up to date: memory's list only grows
 * until it is written back (forget_dead_set), so only its new end is added.
 */
static void
loader_error_context(void *arg)
{
	errcontext("reading the durable state of uid \"%s\"", (const char *) arg);
}

static HTAB *
dead_set(DurableState *ds, KeyedState *ks)
{
	int			n;
	ItemPointer dead = keyed_state_dead_tids(ks, &n);
	int			i;

	if (n == 0)
		return NULL;
	if (ds->dead_set == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(ItemPointerData);
		ctl.entrysize = sizeof(ItemPointerData);
		ctl.hcxt = ds->cxt;
		ds->dead_set = hash_create("ptf dead tids", Max(n, 256), &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		ds->dead_in_set = 0;
	}
	Assert(n >= ds->dead_in_set);
	for (i = ds->dead_in_set; i < n; i++)
		(void) hash_search(ds->dead_set, &dead[i], HASH_ENTER, NULL);
	ds->dead_in_set = n;
	return ds->dead_set;
}

static void
forget_dead_set(DurableState *ds)
{
	if (ds->dead_set != NULL)
		hash_destroy(ds->dead_set);
	ds->dead_set = NULL;
	ds->dead_in_set = 0;
}

static void
loader_begin(RowLoader *l, DurableState *ds, KeyedState *ks, const StateCodec *codec,
			 bool partial)
{
	Assert(codec->layout == ds->layout);
	memset(l, 0, sizeof(RowLoader));
	l->ds = ds;
	l->ks = ks;
	l->codec = codec;
	l->partial = partial;
	l->keep_expiry = keyed_state_ttl(ks) > 0;
	l->fvalues = palloc(sizeof(Datum) * Max(ds->layout->nfields, 1));
	l->fnulls = palloc(sizeof(bool) * Max(ds->layout->nfields, 1));
	l->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf state load",
									  ALLOCSET_DEFAULT_SIZES);
	/* a damaged row names its uid, so that its owner knows what to drop */
	l->errcb.callback = loader_error_context;
	l->errcb.arg = ds->uid;
	l->errcb.previous = error_context_stack;
	error_context_stack = &l->errcb;
	if (partial)
	{
		l->dead = dead_set(ds, ks);
		keyed_state_begin_load(ks);
	}
}

static void
loader_row(RowLoader *l, TupleTableSlot *slot)
{
	DurableState *ds = l->ds;
	KeyedState *ks = l->ks;
	MemoryContext old = MemoryContextSwitchTo(l->rowcxt);
	StateRecord *rec;
	StateRef	ref;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	if (l->partial)
	{
		bool		held;

		if (l->dead != NULL &&
			hash_search(l->dead, &slot->tts_tid, HASH_FIND, NULL) != NULL)
			goto done;			/* removed since it was read */
		rec = keyed_state_load_key(ks, slot->tts_values, slot->tts_isnull, &held);
		if (held)
			goto done;			/* memory is newer */
	}
	else
		rec = keyed_state_restore_key(ks, slot->tts_values, slot->tts_isnull);
	if (ds->att_ns_space == 0 || slot->tts_isnull[ds->att_ns - 1])
		ds->loaded_keys++;
	if (rec == NULL)
		goto done;				/* inline layout: a key and nothing else */
	keyed_state_record_ref(ks, rec, &ref);
	decode_fields(ds, slot, l->fvalues, l->fnulls);

	if (ds->att_ns_space == 0 || slot->tts_isnull[ds->att_ns - 1])
	{
		/* without a TTL now, state is kept forever, whatever it was kept for */
		PtfTime		expires = (slot->tts_isnull[ds->att_expires - 1] || !l->keep_expiry) ?
			PTF_TIME_MAX : DatumGetInt64(slot->tts_values[ds->att_expires - 1]);

		keyed_state_restore_record(ks, rec, expires, &slot->tts_tid);
		l->codec->restore(l->codec->arg, &ref, STATE_KEY_SPACE, 0, NULL, l->fvalues, l->fnulls);
	}
	else
	{
		int			space = DatumGetInt16(slot->tts_values[ds->att_ns_space - 1]);
		int64		ns = DatumGetInt64(slot->tts_values[ds->att_ns - 1]);
		void	   *v = keyed_state_restore_ns(ks, rec, space, ns, &slot->tts_tid);

		l->codec->restore(l->codec->arg, &ref, space, ns, v, l->fvalues, l->fnulls);
	}
done:
	MemoryContextSwitchTo(old);
	MemoryContextReset(l->rowcxt);
}

static void
loader_end(RowLoader *l)
{
	if (l->partial)
	{
		/* the keys brought in, each whole now: for the timers of several rows */
		if (l->codec->loaded != NULL)
		{
			int			n;
			StateRecord **recs = keyed_state_loading(l->ks, &n);
			int			i;

			for (i = 0; i < n; i++)
			{
				StateRef	ref;

				keyed_state_record_ref(l->ks, recs[i], &ref);
				l->codec->loaded(l->codec->arg, &ref);
			}
		}
		keyed_state_end_load(l->ks);
	}
	MemoryContextDelete(l->rowcxt);
	error_context_stack = l->errcb.previous;
}

static void
scan_into(DurableState *ds, KeyedState *ks, const StateCodec *codec, bool partial)
{
	Relation	rel = table_open(ds->state_relid, RowExclusiveLock);
	Snapshot	snapshot = RegisterSnapshot(ds->snapshot ? ds->snapshot : GetTransactionSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	RowLoader	l;

	loader_begin(&l, ds, ks, codec, partial);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		loader_row(&l, slot);
	loader_end(&l);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
}

void
durable_read_all(DurableState *ds)
{
	KeyedState *ks = ds->ks;

	Assert(ks != NULL);
	if (ds->memory_keys == 0 && ds->loaded_keys == 0 && keyed_state_count(ks) == 0)
	{
		/* memory is empty: every row is new, none needs looking up */
		scan_into(ds, ks, ds->codec, false);
		keyed_state_clear_changes(ks);
		/* what the table holds, counted: a stored count that drifted heals */
		ds->stored_keys = ds->loaded_keys;
	}
	else
		scan_into(ds, ks, ds->codec, true);
}

void
durable_attach(DurableState *ds, KeyedState *ks, const StateCodec *codec)
{
	Assert(codec->layout == ds->layout);
	ds->ks = ks;
	ds->codec = codec;
	ds->memory_keys = keyed_state_count(ks);
	if (ds->snapshot == NULL)
		ds->snapshot = RegisterSnapshot(GetTransactionSnapshot());
}

void
durable_release_snapshot(DurableState *ds)
{
	if (ds->snapshot != NULL)
		UnregisterSnapshot(ds->snapshot);
	ds->snapshot = NULL;
}


/* ---- reading key by key ---- */

bool
durable_can_probe(DurableState *ds)
{
	Relation	rel;
	bool		ok;

	if (ds->nkeys == 0)
		return false;
	rel = table_open(ds->state_relid, AccessShareLock);
	ok = durable_keys_indexable(ds, rel);
	table_close(rel, AccessShareLock);
	return ok;
}

static Size
table_bytes(DurableState *ds)
{
	Relation	rel = table_open(ds->state_relid, AccessShareLock);
	Size		bytes = (Size) RelationGetNumberOfBlocks(rel) * BLCKSZ;

	table_close(rel, AccessShareLock);
	return bytes;
}

/*
 * An index scan of the state table under the call's snapshot (durable_attach):
 * what every partial read -- keys, timers, expired keys -- opens and closes.
 * The table stays locked to the end of the transaction, as writes lock it.
 */
typedef struct StateScan
{
	Relation	rel;
	Relation	index;
	Snapshot	snapshot;
	IndexScanDesc scan;
	TupleTableSlot *slot;
} StateScan;

static void
state_scan_begin(StateScan *s, DurableState *ds, Oid indexoid)
{
	Assert(OidIsValid(indexoid));	/* durable_start_probing */
	Assert(ds->snapshot != NULL);	/* durable_attach */
	s->rel = table_open(ds->state_relid, RowExclusiveLock);
	s->index = index_open(indexoid, AccessShareLock);
	s->snapshot = RegisterSnapshot(ds->snapshot);
	s->slot = table_slot_create(s->rel, NULL);
	s->scan = NULL;
}

/*
 * Scan for keys (the index's own scan keys, made once the index is open);
 * again with other keys, as many of them (the btree copies as many as the
 * scan began with).
 */
static void
state_scan_keys(StateScan *s, ScanKey keys, int nkeys)
{
	if (s->scan == NULL)
		s->scan = index_beginscan(s->rel, s->index, s->snapshot, nkeys, 0);
	Assert(s->scan->numberOfKeys == nkeys);
	index_rescan(s->scan, keys, nkeys, NULL, 0);
}

static void
state_scan_end(StateScan *s)
{
	if (s->scan != NULL)
		index_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->slot);
	UnregisterSnapshot(s->snapshot);
	index_close(s->index, AccessShareLock);
	table_close(s->rel, NoLock);
}

/*
 * The btree equality procedure and collation of the index's column i: of
 * its operator class's input type (a domain's base type, anyenum, anyarray).
 */
static void
index_column_eq(Relation index, int i, RegProcedure *proc, Oid *collation)
{
	Oid			typid = index->rd_opcintype[i];
	Oid			opno = get_opfamily_member(index->rd_opfamily[i], typid, typid,
										   BTEqualStrategyNumber);

	if (!OidIsValid(opno))
		elog(ERROR, "no equality operator for type %u in the state index", typid);
	*proc = get_opcode(opno);
	*collation = index->rd_indcollation[i];
}

static void
index_scan_into(RowLoader *l, StateScan *s, ScanKey keys, int nkeys)
{
	state_scan_keys(s, keys, nkeys);
	while (index_getnext_slot(s->scan, ForwardScanDirection, s->slot))
		loader_row(l, s->slot);
}

static int
hash_cmp(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

/*
 * The key index's expression over a key, made ready once for the
 * DurableState (in its memory): an expression made per read was a tenth
 * of a 100-row call's time over a large state.
 */
typedef struct KeyHasher
{
	Oid			index;
	IndexInfo  *ii;
	EState	   *estate;
	TupleTableSlot *slot;		/* a row of the state table: the key, NULLs */
} KeyHasher;

static KeyHasher *
key_hasher(DurableState *ds, Relation rel, Relation index)
{
	KeyHasher  *h = ds->key_hasher;
	MemoryContext old;

	if (h != NULL && h->index == RelationGetRelid(index))
		return h;
	old = MemoryContextSwitchTo(ds->cxt);
	h = palloc0(sizeof(KeyHasher));
	h->index = RelationGetRelid(index);
	h->ii = BuildIndexInfo(index);
	Assert(h->ii->ii_NumIndexAttrs == 1 && h->ii->ii_Expressions != NIL);
	h->estate = CreateExecutorState();
	/* a copy: a relation's own descriptor would be pinned by the resource owner */
	h->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(rel)),
									   &TTSOpsVirtual);
	GetPerTupleExprContext(h->estate)->ecxt_scantuple = h->slot;
	MemoryContextSwitchTo(old);
	ds->key_hasher = h;
	return h;
}

/*
 * Keys by their hashes, in one array scan of the key index, which the
 * btree sorts, deduplicates and walks in order.  Each hash is the index's
 * own expression evaluated over the key (state_table.c): the same
 * functions and collations as its entries.
 */
static void
read_keys_by_hash(DurableState *ds, Datum *values, bool *nulls, int n)
{
	KeyedState *ks = ds->ks;
	StateScan	s;
	ScanKeyData skey;
	KeyHasher  *h;
	Datum	   *hashes;
	int			nhash = 0;
	RowLoader	l;
	int			nk = ds->nkeys;
	int			natts;
	int			i;

	state_scan_begin(&s, ds, ds->key_index);
	h = key_hasher(ds, s.rel, s.index);
	natts = h->slot->tts_tupleDescriptor->natts;
	hashes = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
	{
		Datum	   *kv = values + i * nk;
		bool	   *kn = nulls + i * nk;
		bool		hnull;

		if (keyed_state_holds(ks, kv, kn))
			continue;
		ExecClearTuple(h->slot);
		memset(h->slot->tts_isnull, true, sizeof(bool) * natts);
		memcpy(h->slot->tts_values, kv, sizeof(Datum) * nk);
		memcpy(h->slot->tts_isnull, kn, sizeof(bool) * nk);
		ExecStoreVirtualTuple(h->slot);
		FormIndexDatum(h->ii, h->slot, h->estate, &hashes[nhash], &hnull);
		Assert(!hnull);			/* a row of NULLs hashes too */
		nhash++;
		ResetPerTupleExprContext(h->estate);
	}
	ExecClearTuple(h->slot);
	/* a key of several rows (and its hash) is asked for once */
	if (nhash > 1)
	{
		int			j = 0;

		qsort(hashes, nhash, sizeof(Datum), hash_cmp);
		for (i = 1; i < nhash; i++)
			if (hashes[i] != hashes[j])
				hashes[++j] = hashes[i];
		nhash = j + 1;
	}
	ds->probes += nhash;		/* keys asked of the table */
	if (nhash > 0)
	{
		ArrayType  *arr = construct_array(hashes, nhash, INT8OID, sizeof(int64),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);

		ScanKeyEntryInitialize(&skey, SK_SEARCHARRAY, 1, BTEqualStrategyNumber,
							   InvalidOid, InvalidOid, F_INT8EQ, PointerGetDatum(arr));
		loader_begin(&l, ds, ks, ds->codec, true);
		index_scan_into(&l, &s, &skey, 1);
		loader_end(&l);
	}
	pfree(hashes);
	state_scan_end(&s);
}

/*
 * Keys of fixed-width columns, by an index on the columns (state_table.c).
 */
static void
read_keys_by_columns(DurableState *ds, Datum *values, bool *nulls, int n)
{
	KeyedState *ks = ds->ks;
	const StateCodec *codec = ds->codec;
	StateScan	s;
	ScanKeyData *skeys;
	RegProcedure procs[INDEX_MAX_KEYS];
	Oid			collations[INDEX_MAX_KEYS];
	Datum	   *array;
	int			narray = 0;
	RowLoader	l;
	int			nk = ds->nkeys;
	bool		by_array;
	int			i;
	int			j;

	if (n == 0)
		return;
	state_scan_begin(&s, ds, ds->key_index);
	skeys = palloc(sizeof(ScanKeyData) * nk);
	for (j = 0; j < nk; j++)
		index_column_eq(s.index, j, &procs[j], &collations[j]);
	/* an array of arrays is not an array: such keys are looked up one by one */
	by_array = (nk == 1 &&
				!type_is_array(getBaseType(TupleDescAttr(RelationGetDescr(s.rel), 0)->atttypid)));
	loader_begin(&l, ds, ks, codec, true);

	/*
	 * One key column: all keys in one array scan, which the btree sorts,
	 * deduplicates and walks in order.  Several (or a NULL): a scan per key.
	 */
	array = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
	{
		Datum	   *kv = values + i * nk;
		bool	   *kn = nulls + i * nk;

		if (keyed_state_holds(ks, kv, kn))
			continue;
		ds->probes++;			/* a key asked of the table */
		if (by_array && !kn[0])
		{
			array[narray++] = kv[0];
			continue;
		}
		for (j = 0; j < nk; j++)
		{
			if (kn[j])
				ScanKeyEntryInitialize(&skeys[j], SK_ISNULL | SK_SEARCHNULL, j + 1,
									   InvalidStrategy, InvalidOid, InvalidOid,
									   InvalidOid, (Datum) 0);
			else
				ScanKeyEntryInitialize(&skeys[j], 0, j + 1, BTEqualStrategyNumber,
									   InvalidOid, collations[j], procs[j], kv[j]);
		}
		index_scan_into(&l, &s, skeys, nk);
	}
	if (narray > 0)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(s.rel), 0);
		int16		typlen;
		bool		typbyval;
		char		typalign;
		ArrayType  *arr;

		get_typlenbyvalalign(att->atttypid, &typlen, &typbyval, &typalign);
		arr = construct_array(array, narray, att->atttypid, typlen, typbyval, typalign);
		ScanKeyEntryInitialize(&skeys[0], SK_SEARCHARRAY, 1, BTEqualStrategyNumber,
							   InvalidOid, collations[0], procs[0], PointerGetDatum(arr));
		index_scan_into(&l, &s, skeys, 1);
	}
	loader_end(&l);
	state_scan_end(&s);
}

/*
 * Read the stored state of the keys memory does not hold (values and
 * nulls: n keys of nkeys columns each).
 */
void
durable_read_keys(DurableState *ds, Datum *values, bool *nulls, int n)
{
	if (n == 0)
		return;
	Assert(OidIsValid(ds->key_index));	/* durable_start_probing */
	if (ds->key_index_hashed)
		read_keys_by_hash(ds, values, nulls, n);
	else
		read_keys_by_columns(ds, values, nulls, n);
}

static AttrNumber timer_attno(DurableState *ds);

/*
 * Make the indexes probing reads through, now: a probe runs while the
 * input's query runs, and SPI (which makes them) must not run under it.
 */
void
durable_start_probing(DurableState *ds)
{
	ds->expires = keyed_state_ttl(ds->ks) > 0;
	if (!OidIsValid(ds->key_index))
		ds->key_index = durable_ensure_key_index(ds);
	if (ds->layout->timer_field != NULL && !OidIsValid(ds->timer_index))
		ds->timer_index = durable_ensure_index(ds, timer_attno(ds), 1, true);
	if (ds->expires && ds->att_ns_space == 0 && !OidIsValid(ds->expiry_index))
		ds->expiry_index = durable_ensure_index(ds, ds->att_expires, 1, true);
}

/*
 * Delete the stored keys expired at now that memory does not hold, through
 * the expiry index: what sweeping a fully loaded state would have removed.
 * (Memory's own expired keys are swept there, and their TIDs are dead.)
 * Layouts with namespaces are not swept here: a key's namespace rows
 * would have to go with it.
 */
void
durable_sweep_expired(DurableState *ds, PtfTime now, bool stored_too)
{
	KeyedState *ks = ds->ks;
	StateScan	s;
	ScanKeyData skey;
	HTAB	   *dead;

	keyed_state_sweep(ks, now);
	/* the stored keys memory does not hold, unread */
	if (!stored_too || !OidIsValid(ds->expiry_index))
		return;
	state_scan_begin(&s, ds, ds->expiry_index);
	ScanKeyEntryInitialize(&skey, 0, 1, BTLessEqualStrategyNumber,
						   TIMESTAMPTZOID, s.index->rd_indcollation[0],
						   get_opcode(get_opfamily_member(s.index->rd_opfamily[0],
														  TIMESTAMPTZOID, TIMESTAMPTZOID,
														  BTLessEqualStrategyNumber)),
						   TimestampTzGetDatum((TimestampTz) now));
	dead = dead_set(ds, ks);
	state_scan_keys(&s, &skey, 1);
	while (index_getnext_slot(s.scan, ForwardScanDirection, s.slot))
	{
		CHECK_FOR_INTERRUPTS();
		if (dead != NULL && hash_search(dead, &s.slot->tts_tid, HASH_FIND, NULL) != NULL)
			continue;
		slot_getsomeattrs(s.slot, ds->nkeys);
		if (keyed_state_holds(ks, s.slot->tts_values, s.slot->tts_isnull))
			continue;
		simple_heap_delete(s.rel, &s.slot->tts_tid);
		ds->stored_keys--;
	}
	state_scan_end(&s);
}

/* The layout's timer field's column. */
static AttrNumber
timer_attno(DurableState *ds)
{
	int			i;

	for (i = 0; i < ds->layout->nfields; i++)
		if (strcmp(ds->layout->fields[i].name, ds->layout->timer_field) == 0)
		{
			Assert(ds->layout->fields[i].type == SF_TIME);
			return ds->att_fields + i;
		}
	elog(ERROR, "timer field \"%s\" is not in the layout", ds->layout->timer_field);
	return InvalidAttrNumber;
}

/* The timer index's scan keys for times in (after, upto]; how many. */
static int
timer_scan_keys(DurableState *ds, Relation index, PtfTime after, PtfTime upto,
				ScanKeyData *skeys)
{
	Oid			opfamily = index->rd_opfamily[0];
	int			nskeys = 0;

	if (after != PTF_TIME_MIN)
		ScanKeyEntryInitialize(&skeys[nskeys++], 0, 1, BTGreaterStrategyNumber,
							   ds->time_type, index->rd_indcollation[0],
							   get_opcode(get_opfamily_member(opfamily, ds->time_type,
															  ds->time_type,
															  BTGreaterStrategyNumber)),
							   ptf_time_to_datum(after, ds->time_type));
	if (upto != PTF_TIME_MAX)
		ScanKeyEntryInitialize(&skeys[nskeys++], 0, 1, BTLessEqualStrategyNumber,
							   ds->time_type, index->rd_indcollation[0],
							   get_opcode(get_opfamily_member(opfamily, ds->time_type,
															  ds->time_type,
															  BTLessEqualStrategyNumber)),
							   ptf_time_to_datum(upto, ds->time_type));
	return nskeys;
}

void
durable_read_timers(DurableState *ds, PtfTime after, PtfTime upto)
{
	StateScan	s;
	ScanKeyData skeys[2];
	int			nskeys;
	Datum	   *values;
	bool	   *nulls;
	int			n = 0;
	int			cap = 64;
	MemoryContext cxt;
	MemoryContext old;

	if (ds->layout->timer_field == NULL || upto <= after)
		return;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf timer keys", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	state_scan_begin(&s, ds, ds->timer_index);
	nskeys = timer_scan_keys(ds, s.index, after, upto, skeys);
	state_scan_keys(&s, skeys, nskeys);
	values = palloc(sizeof(Datum) * cap * Max(ds->nkeys, 1));
	nulls = palloc(sizeof(bool) * cap * Max(ds->nkeys, 1));
	/* the keys first, then the keys' rows: a key has rows the search does not find */
	while (index_getnext_slot(s.scan, ForwardScanDirection, s.slot))
	{
		TupleTableSlot *slot = s.slot;
		int			j;

		slot_getsomeattrs(slot, ds->nkeys);
		if (n == cap)
		{
			cap *= 2;
			values = repalloc(values, sizeof(Datum) * cap * ds->nkeys);
			nulls = repalloc(nulls, sizeof(bool) * cap * ds->nkeys);
		}
		for (j = 0; j < ds->nkeys; j++)
		{
			Form_pg_attribute att = TupleDescAttr(RelationGetDescr(s.rel), j);

			nulls[n * ds->nkeys + j] = slot->tts_isnull[j];
			values[n * ds->nkeys + j] = slot->tts_isnull[j] ? (Datum) 0 :
				datumCopy(slot->tts_values[j], att->attbyval, att->attlen);
		}
		n++;
	}
	state_scan_end(&s);
	{
		/* asking for these was not the call's rows' doing */
		uint64		probes = ds->probes;

		durable_read_keys(ds, values, nulls, n);
		ds->probes = probes;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * The earliest timer field after `after` in the table (PTF_TIME_MAX: none),
 * as the call's snapshot sees it: a bound on the next timer of the keys
 * memory does not hold.  A row of a key memory holds may be older than
 * memory: the bound is then early, never late.
 */
PtfTime
durable_next_timer(DurableState *ds, PtfTime after)
{
	StateScan	s;
	ScanKeyData skeys[2];
	int			nskeys;
	PtfTime		next = PTF_TIME_MAX;

	if (ds->layout->timer_field == NULL || !OidIsValid(ds->timer_index) ||
		after == PTF_TIME_MAX)
		return PTF_TIME_MAX;
	state_scan_begin(&s, ds, ds->timer_index);
	nskeys = timer_scan_keys(ds, s.index, after, PTF_TIME_MAX, skeys);
	state_scan_keys(&s, skeys, nskeys);
	/* the index holds no NULLs (ensure_index): its first row is the earliest */
	if (index_getnext_slot(s.scan, ForwardScanDirection, s.slot))
	{
		bool		isnull;
		Datum		d = slot_getattr(s.slot, timer_attno(ds), &isnull);

		Assert(!isnull);
		if (!isnull)
			next = ptf_time_from_datum(d, ds->time_type);
	}
	state_scan_end(&s);
	return next;
}

void
durable_stats(DurableState *ds, DurableStats *stats)
{
	stats->stored_keys = ds->stored_keys;
	stats->table_bytes = table_bytes(ds);
	stats->probes = ds->probes;
	stats->loaded_keys = ds->loaded_keys;
}

/* ---- writing back ---- */

/* The state-table row of a key (space STATE_KEY_SPACE) or of one of its namespaces. */
static void
value_to_row(DurableState *ds, KeyedState *ks, const StateCodec *codec,
			 StateRecord *rec, int space, int64 ns, void *ns_value,
			 Datum *values, bool *nulls)
{
	StateRef	ref;
	Datum	   *fv = values + ds->att_fields - 1;
	bool	   *fn = nulls + ds->att_fields - 1;
	int			i;

	memset(nulls, true, sizeof(bool) * ds->natts);
	keyed_state_record_key(ks, rec, values, nulls);
	keyed_state_record_ref(ks, rec, &ref);
	if (space == STATE_KEY_SPACE)
	{
		values[ds->att_expires - 1] = Int64GetDatum(rec->expires_at);
		nulls[ds->att_expires - 1] = (rec->expires_at == PTF_TIME_MAX);
	}
	else
	{
		values[ds->att_ns_space - 1] = Int16GetDatum((int16) space);
		nulls[ds->att_ns_space - 1] = false;
		values[ds->att_ns - 1] = Int64GetDatum(ns);
		nulls[ds->att_ns - 1] = false;
	}
	codec->save(codec->arg, &ref, space, ns, ns_value, fv, fn);
	for (i = 0; i < ds->layout->nfields; i++)
	{
		const StateField *f = &ds->layout->fields[i];

		if (fn[i])
			continue;
		switch (f->type)
		{
			case SF_TIME:
				fv[i] = ptf_time_to_datum(DatumGetInt64(fv[i]), ds->time_type);
				break;
			case SF_IMAGE:
				fv[i] = PointerGetDatum(row_image_to_bytea((MinimalTuple) DatumGetPointer(fv[i]),
													   ds->rowdescs[f->input]));
				break;
			case SF_IMAGES:
				fv[i] = PointerGetDatum(state_images_to_bytea((StateImages *) DatumGetPointer(fv[i]),
														ds->rowdescs[f->input]));
				break;
			default:
				break;
		}
	}
}

/* Rows to insert, batched for table_multi_insert, and where to note their TIDs. */
typedef struct InsertBatch
{
	Relation	rel;
	CommandId	cid;
	BulkInsertState bistate;
	TupleTableSlot **slots;
	ItemPointer *tids;			/* where each new row's TID goes */
	uint8	  **flags;			/* and its RECORD_STORED flag */
	uint16	  **ns_flags;
	int			n;
	uint64		nupdated;
	MemoryContext cxt;			/* the batch's row values */
	/* the table's indexes, when it has any (made by probing) */
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *upd_slot;
} InsertBatch;

/*
 * The batch's i-th slot, made when first needed: a call that writes a few
 * keys would otherwise make (and drop) INSERT_BATCH slots, each pinning the
 * table's descriptor in the resource owner -- most of a small call's time
 * over a large state.
 */
static TupleTableSlot *
batch_slot(InsertBatch *b, int i)
{
	Assert(i < INSERT_BATCH);
	if (b->slots[i] == NULL)
	{
		/* they live as long as the array, not in the batch's reset memory */
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(b->slots));

		b->slots[i] = MakeSingleTupleTableSlot(RelationGetDescr(b->rel), &TTSOpsVirtual);
		MemoryContextSwitchTo(old);
	}
	return b->slots[i];
}

static void
open_indexes(InsertBatch *b)
{
	if (!b->rel->rd_rel->relhasindex)
		return;
	b->estate = CreateExecutorState();
	b->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(b->rri, b->rel, 1, NULL, 0);
	ExecOpenIndices(b->rri, false);
	if (b->rri->ri_NumIndices == 0)
	{
		ExecCloseIndices(b->rri);
		FreeExecutorState(b->estate);
		b->estate = NULL;
		b->rri = NULL;
		return;
	}
	b->upd_slot = MakeSingleTupleTableSlot(RelationGetDescr(b->rel), &TTSOpsHeapTuple);
}

static void
close_indexes(InsertBatch *b)
{
	if (b->rri == NULL)
		return;
	ExecDropSingleTupleTableSlot(b->upd_slot);
	ExecCloseIndices(b->rri);
	FreeExecutorState(b->estate);
}

/*
 * The index entries of a tuple just written (slot: its values and TID).
 * Never flagged as an update's: that hint needs a range table, which a
 * write outside a query has not.
 */
static void
insert_index_entries(InsertBatch *b, TupleTableSlot *slot)
{
	List	   *r;

	if (b->rri == NULL)
		return;
	r = ExecInsertIndexTuples(b->rri, slot, b->estate, false, false, NULL, NIL);
	list_free(r);
	ResetPerTupleExprContext(b->estate);
}

static void
flush_batch(InsertBatch *b)
{
	int			i;

	if (b->n == 0)
		return;
	table_multi_insert(b->rel, b->slots, b->n, b->cid, 0, b->bistate);
	for (i = 0; i < b->n; i++)
	{
		insert_index_entries(b, b->slots[i]);
		*b->tids[i] = b->slots[i]->tts_tid;
		if (b->flags[i])
			*b->flags[i] |= RECORD_STORED;
		if (b->ns_flags[i])
			*b->ns_flags[i] |= RECORD_STORED;
		ExecClearTuple(b->slots[i]);
	}
	b->n = 0;
	MemoryContextReset(b->cxt);
}

/* Write one key's or namespace's row: update its tuple, or insert a new one. */
static void
write_value(DurableState *ds, KeyedState *ks, const StateCodec *codec, InsertBatch *b,
			StateRecord *rec, int space, int64 ns, void *ns_value,
			ItemPointer tid, uint8 *flags, uint16 *ns_flags, bool stored)
{
	TupleDesc	desc = RelationGetDescr(b->rel);
	MemoryContext old = MemoryContextSwitchTo(b->cxt);

	if (stored)
	{
		Datum	   *v = palloc(sizeof(Datum) * desc->natts);
		bool	   *n = palloc(sizeof(bool) * desc->natts);
		HeapTuple	tup;

		value_to_row(ds, ks, codec, rec, space, ns, ns_value, v, n);
		tup = heap_form_tuple(desc, v, n);
		simple_heap_update(b->rel, tid, tup);
		*tid = tup->t_self;
		/* a heap-only tuple is found through its chain: no new index entries */
		if (b->rri != NULL && !HeapTupleIsHeapOnly(tup))
		{
			ExecStoreHeapTuple(tup, b->upd_slot, false);
			insert_index_entries(b, b->upd_slot);
			ExecClearTuple(b->upd_slot);
		}
		MemoryContextSwitchTo(old);
		/* updated rows need nothing after the update: free them now and then */
		if (++b->nupdated % INSERT_BATCH == 0 && b->n == 0)
			MemoryContextReset(b->cxt);
		return;
	}
	else
	{
		TupleTableSlot *slot = batch_slot(b, b->n);

		ExecClearTuple(slot);
		value_to_row(ds, ks, codec, rec, space, ns, ns_value,
					 slot->tts_values, slot->tts_isnull);
		ExecStoreVirtualTuple(slot);
		b->tids[b->n] = tid;
		b->flags[b->n] = flags;
		b->ns_flags[b->n] = ns_flags;
		b->n++;
	}
	MemoryContextSwitchTo(old);
	if (b->n == INSERT_BATCH)
		flush_batch(b);
}

/* Inline state (keys without values, no TTL) only ever gains keys. */
static void
write_new_inline_keys(DurableState *ds, KeyedState *ks, InsertBatch *b)
{
	Datum	   *keys;
	bool	   *nulls;
	int			n = keyed_state_new_inline_keys(ks, &keys, &nulls);
	int			natts = RelationGetDescr(b->rel)->natts;
	int			nbatch = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		TupleTableSlot *slot = batch_slot(b, nbatch++);

		ExecClearTuple(slot);
		memset(slot->tts_isnull, true, sizeof(bool) * natts);
		if (ds->nkeys == 1)
		{
			slot->tts_values[0] = keys[i];
			slot->tts_isnull[0] = nulls[i];
		}
		ExecStoreVirtualTuple(slot);
		if (nbatch == INSERT_BATCH || i == n - 1)
		{
			int			j;

			table_multi_insert(b->rel, b->slots, nbatch, b->cid, 0, b->bistate);
			for (j = 0; j < nbatch; j++)
				insert_index_entries(b, b->slots[j]);
			while (nbatch > 0)
				ExecClearTuple(b->slots[--nbatch]);
			CHECK_FOR_INTERRUPTS();
		}
	}
}

static void
write_changes(DurableState *ds, KeyedState *ks, const StateCodec *codec)
{
	InsertBatch b;
	StateRecord **changed;
	ChangedNs  *changed_ns;
	ItemPointer dead;
	int			nchanged;
	int			ndead;
	int			i;

	Assert(codec->layout == ds->layout);
	memset(&b, 0, sizeof(b));
	b.rel = table_open(ds->state_relid, RowExclusiveLock);
	b.cid = GetCurrentCommandId(true);
	b.bistate = GetBulkInsertState();
	b.cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf state write",
								  ALLOCSET_DEFAULT_SIZES);
	b.slots = palloc0(sizeof(TupleTableSlot *) * INSERT_BATCH);
	b.tids = palloc(sizeof(ItemPointer) * INSERT_BATCH);
	b.flags = palloc(sizeof(uint8 *) * INSERT_BATCH);
	b.ns_flags = palloc(sizeof(uint16 *) * INSERT_BATCH);
	open_indexes(&b);

	dead = keyed_state_dead_tids(ks, &ndead);
	/*
	 * Millions of keys may be written back: a cancel is taken at any point,
	 * the transaction (and with it every write) rolled back, and memory
	 * not trusted again (a pipeline's kept state is let go, engine/call.c).
	 */
	for (i = 0; i < ndead; i++)
	{
		simple_heap_delete(b.rel, &dead[i]);
		CHECK_FOR_INTERRUPTS();
	}

	if (keyed_state_is_inline(ks))
		write_new_inline_keys(ds, ks, &b);

	changed = keyed_state_changed(ks, &nchanged);
	for (i = 0; i < nchanged; i++)
	{
		StateRecord *rec = changed[i];

		CHECK_FOR_INTERRUPTS();
		if (rec->flags & RECORD_REMOVED)
			continue;
		write_value(ds, ks, codec, &b, rec, STATE_KEY_SPACE, 0, NULL,
					&rec->tid, &rec->flags, NULL, (rec->flags & RECORD_STORED) != 0);
	}
	changed_ns = keyed_state_changed_ns(ks, &nchanged);
	for (i = 0; i < nchanged; i++)
	{
		NsEntry    *e = keyed_state_ns_entry(ks, changed_ns[i].rec, changed_ns[i].space,
											 changed_ns[i].ns);

		CHECK_FOR_INTERRUPTS();
		if (e == NULL)
			continue;			/* removed since: its tuple, if any, is dead */

		/*
		 * A namespace removed and made anew is listed twice, and both items
		 * find the new entry: write it once.
		 */
		if (!(e->flags & RECORD_LISTED))
			continue;
		e->flags &= ~RECORD_LISTED;
		write_value(ds, ks, codec, &b, changed_ns[i].rec, changed_ns[i].space, e->ns,
					e->value, &e->tid, NULL, &e->flags, (e->flags & RECORD_STORED) != 0);
	}
	flush_batch(&b);
	close_indexes(&b);
	table_finish_bulk_insert(b.rel, 0);
	FreeBulkInsertState(b.bistate);
	for (i = 0; i < INSERT_BATCH && b.slots[i] != NULL; i++)
		ExecDropSingleTupleTableSlot(b.slots[i]);
	MemoryContextDelete(b.cxt);
	keyed_state_clear_changes(ks);
	forget_dead_set(ds);
	table_close(b.rel, NoLock);

	/* make the writes visible to later commands of this transaction */
	CommandCounterIncrement();
}

/*
 * Write back what changed in the middle of a call, so that the keys can be
 * evicted; later partial loads see what was written.
 */
void
durable_flush(DurableState *ds)
{
	write_changes(ds, ds->ks, ds->codec);
	/* our own writes: the next command, under the same snapshot otherwise */
	if (ds->snapshot != NULL)
		ds->snapshot->curcid = GetCurrentCommandId(false);
}

void
durable_note_evicted(DurableState *ds, uint64 n)
{
	ds->evicted_keys += n;
}

void
durable_commit(DurableState *ds, const DurableProgress *progress)
{
	Assert(ds->main == NULL);
	if (ds->images != NULL)
	{
		durable_release_snapshot(ds->images);
		write_changes(ds->images, ds->images->ks, ds->images->codec);
	}
	durable_release_snapshot(ds);
	write_changes(ds, ds->ks, ds->codec);
	durable_write_progress(ds, ds->ks, progress);
	ds->must_write = false;
	durable_note_xid_writer(ds);
	durable_leave_uid(ds->uid);
}

/* ---- expired keys, for ptf.state ---- */

/*
 * The stored keys of a state table whose expiry passed at now, and the
 * bytes of their rows: what the next call that reads them (or sweeps)
 * deletes.  One scan, under a snapshot of now; a call running meanwhile
 * holds its uid's lock, not the table's rows, so nothing waits.  False
 * for a table that is not the state of a uid the caller may use.
 */
bool
durable_count_expired(Oid state_relid, PtfTime now, int64 *keys, int64 *bytes)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	Relation	rel;
	AttrNumber	att_expires;
	AttrNumber	att_ns;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;

	args[0] = ObjectIdGetDatum(state_relid);
	ptf_spi_exec_as_owner("SELECT owner FROM ptf.uid_registry "
						  "WHERE state_table OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1 ||
		!has_privs_of_role(GetUserId(), DatumGetObjectId(ptf_spi_datum(1))))
		return false;
	rel = try_table_open(state_relid, AccessShareLock);
	if (rel == NULL)
		return false;
	/* internal columns keep their names: key columns are renamed around them */
	att_expires = get_attnum(state_relid, "expires_at");
	att_ns = get_attnum(state_relid, "ns");
	*keys = *bytes = 0;
	if (att_expires == InvalidAttrNumber)
	{
		table_close(rel, AccessShareLock);
		return true;
	}
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snapshot, 0, NULL);
	slot = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		d;

		CHECK_FOR_INTERRUPTS();
		d = slot_getattr(slot, att_expires, &isnull);
		if (isnull || DatumGetTimestampTz(d) > (TimestampTz) now)
			continue;
		if (att_ns != InvalidAttrNumber)
		{
			(void) slot_getattr(slot, att_ns, &isnull);
			if (!isnull)
				continue;
		}
		(*keys)++;
		*bytes += ExecFetchSlotHeapTuple(slot, false, NULL)->t_len;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return true;
}

