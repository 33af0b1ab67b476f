/*-------------------------------------------------------------------------
 *
 * state_table.c
 *	  A uid's state table, made from the layout its operator declares,
 *	  its indexes, and the conversion of version 1.0's tables.
 *
 * State tables are made from the operator's declared layout
 * (state/layout.h):
 *
 *	  key columns..., [ns_space smallint, ns bigint,] expires_at, fields...
 *
 * one row per key (ns NULL) and one per (key, namespace).  Row images are
 * bytea (a MinimalTuple with TOASTed values inlined, state/row_images.c),
 * so the table depends on no user type; the input row types are recorded
 * in the registry (row_types) and must match whenever state is read.
 *
 * The indexes (on the key columns or a hash of them, on the layout's
 * timer field, on expires_at) are made by the first call that reads key
 * by key, not with the table: a table filled by one bulk call pays no
 * index upkeep until its state is large enough to be read key by key.
 *
 * Layout 1 (version 1.0 of the extension: fixed columns expires_at,
 * event_time, seq, and image of the source's row type) is converted to
 * the declared layout by the first call that opens the uid, field by
 * field by name; nothing is read in the old layout after that.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "state/durable_internal.h"
#include "state/row_images.h"

static const char *
field_sql_type(const DurableState *ds, StateFieldType type)
{
	switch (type)
	{
		case SF_INT8:
			return "pg_catalog.int8";
		case SF_TIME:
			return format_type_extended(ds->time_type, -1, FORMAT_TYPE_FORCE_QUALIFY);
		case SF_BOOL:
			return "pg_catalog.bool";
		case SF_BYTEA:
		case SF_IMAGE:
		case SF_IMAGES:
			return "pg_catalog.bytea";
	}
	return NULL;				/* keep compiler quiet */
}

static Oid
field_type_oid(const DurableState *ds, StateFieldType type)
{
	switch (type)
	{
		case SF_INT8:
			return INT8OID;
		case SF_TIME:
			return ds->time_type;
		case SF_BOOL:
			return BOOLOID;
		default:
			return BYTEAOID;
	}
}

static bool
name_taken(const char *name, List *names)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp(name, (char *) lfirst(lc)) == 0)
			return true;
	return false;
}

/*
 * The state table's column names: the key columns keep their names unless
 * one is taken by an internal column, a field or another key column; then
 * it gets "key_" in front (again, until it is free).
 */
static List *
state_column_names(const DurableIdentity *id)
{
	List	   *reserved = list_make1("expires_at");
	List	   *keys = NIL;
	List	   *chosen = NIL;
	int			i;

	if (id->nspaces > 0)
		reserved = lappend(lappend(reserved, "ns_space"), "ns");
	for (i = 0; i < id->layout->nfields; i++)
		reserved = lappend(reserved, (char *) id->layout->fields[i].name);
	for (i = 0; i < id->keys->ncols; i++)
		keys = lappend(keys, NameStr(TupleDescAttr(id->rowdescs[0],
												   id->keys->cols[i].attno - 1)->attname));
	for (i = 0; i < id->keys->ncols; i++)
	{
		char	   *name = list_nth(keys, i);

		while (name_taken(name, reserved) || name_taken(name, chosen) ||
			   (name != list_nth(keys, i) && name_taken(name, keys)))
			name = psprintf("key_%s", name);
		chosen = lappend(chosen, name);
	}
	return list_concat(chosen, reserved);
}

Oid
durable_create_state_table(const DurableIdentity *id, DurableState *ds)
{
	ptf_spi_exec_as_owner("SELECT pg_catalog.nextval('ptf.state_table_seq')",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	return durable_create_named_state_table(id, ds,
											psprintf("state_%lld", (long long) ptf_spi_int64(1, 0)),
											"keyed state");
}

/* A state table ptf.relname made from the layout; what: its comment's words. */
Oid
durable_create_named_state_table(const DurableIdentity *id, DurableState *ds,
								 const char *relname, const char *what)
{
	StringInfoData sql;
	List	   *names = state_column_names(id);
	int			i;
	Oid			relid;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE ptf.%s (", relname);
	for (i = 0; i < id->keys->ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(id->rowdescs[0],
											  id->keys->cols[i].attno - 1);

		appendStringInfo(&sql, "%s %s", quote_identifier(list_nth(names, i)),
						 format_type_extended(att->atttypid, att->atttypmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN |
											  FORMAT_TYPE_FORCE_QUALIFY));
		/* the key's collation decides its equality: keep it visible and checked */
		if (OidIsValid(att->attcollation))
			appendStringInfo(&sql, " COLLATE %s",
							 generate_collation_name(att->attcollation));
		appendStringInfoString(&sql, ", ");
	}
	if (id->nspaces > 0)
		appendStringInfoString(&sql, "ns_space pg_catalog.int2, ns pg_catalog.int8, ");
	appendStringInfoString(&sql, "expires_at pg_catalog.timestamptz");
	for (i = 0; i < id->layout->nfields; i++)
		appendStringInfo(&sql, ", %s %s", quote_identifier(id->layout->fields[i].name),
						 field_sql_type(ds, id->layout->fields[i].type));
	/* explicit: the caller's default_tablespace must not choose for the owner */
	appendStringInfoString(&sql, ") USING heap TABLESPACE pg_default");
	ptf_spi_exec_as_owner(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);

	ptf_spi_exec_as_owner(psprintf("COMMENT ON TABLE ptf.%s IS %s", relname,
								   quote_literal_cstr(psprintf("%s of uid %s (%s)",
															   what, id->uid, id->function))),
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);

	relid = get_relname_relid(relname, get_namespace_oid("ptf", false));
	if (!OidIsValid(relid))
		elog(ERROR, "state table ptf.%s was not created", relname);
	return relid;
}

static void
state_table_altered(const char *uid, Relation rel)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("state table %s of uid \"%s\" has been altered",
					RelationGetRelationName(rel), uid),
			 errhint("Forget the state with ptf.drop_state('%s').", uid)));
}

/* The state table must still be what the layout makes, keys of the call's types. */
void
durable_check_state_table(const DurableIdentity *id, DurableState *ds)
{
	Relation	rel = table_open(ds->state_relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	/* rows are found by TID: a rewritten table (VACUUM FULL) has others */
	ds->state_filenode = rel->rd_node.relNode;
	if (desc->natts != ds->natts)
		state_table_altered(id->uid, rel);
	for (i = 0; i < ds->nkeys; i++)
	{
		Form_pg_attribute satt = TupleDescAttr(desc, i);
		Form_pg_attribute ratt = TupleDescAttr(id->rowdescs[0],
											   id->keys->cols[i].attno - 1);

		if (satt->atttypid != ratt->atttypid)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key column \"%s\" of uid \"%s\" changed type from %s to %s",
							NameStr(ratt->attname), id->uid,
							format_type_be(satt->atttypid),
							format_type_be(ratt->atttypid)),
					 errhint("Forget the state with ptf.drop_state('%s').", id->uid)));
		if (satt->attcollation != ratt->attcollation)
			ereport(ERROR,
					(errcode(ERRCODE_COLLATION_MISMATCH),
					 errmsg("key column \"%s\" of uid \"%s\" changed collation",
							NameStr(ratt->attname), id->uid),
					 errdetail("Keys kept under one collation may be equal under another."),
					 errhint("Forget the state with ptf.drop_state('%s').", id->uid)));
	}
	if (ds->att_ns_space != 0 &&
		(TupleDescAttr(desc, ds->att_ns_space - 1)->atttypid != INT2OID ||
		 TupleDescAttr(desc, ds->att_ns - 1)->atttypid != INT8OID))
		state_table_altered(id->uid, rel);
	if (TupleDescAttr(desc, ds->att_expires - 1)->atttypid != TIMESTAMPTZOID)
		state_table_altered(id->uid, rel);
	for (i = 0; i < ds->layout->nfields; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, ds->att_fields - 1 + i);

		if (att->atttypid != field_type_oid(ds, ds->layout->fields[i].type) ||
			strcmp(NameStr(att->attname), ds->layout->fields[i].name) != 0)
			state_table_altered(id->uid, rel);
	}
	table_close(rel, NoLock);
}

/* ---- layout 1 (extension version 1.0) ---- */

/*
 * The 1.0 table: key columns, then expires_at, event_time, seq and, when
 * images were kept, image of the source's row type.  Its rows become rows
 * of a table made from the declared layout, each field taken from the old
 * column of its name; the old table goes.
 */
void
durable_convert_layout_1(const DurableIdentity *id, DurableState *ds, Oid old_relid)
{
	Relation	old_rel;
	Relation	new_rel;
	TupleDesc	old_desc;
	TupleDesc	new_desc;
	AttrNumber	old_att[64];
	AttrNumber	old_expires;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;
	Datum	   *values;
	bool	   *isnull;
	MemoryContext rowcxt;
	int			i;

	if (id->layout->nfields > (int) lengthof(old_att))
		elog(ERROR, "too many state fields");
	ds->state_relid = durable_create_state_table(id, ds);
	old_rel = table_open(old_relid, AccessExclusiveLock);
	new_rel = table_open(ds->state_relid, RowExclusiveLock);
	old_desc = RelationGetDescr(old_rel);
	new_desc = RelationGetDescr(new_rel);
	if (old_desc->natts < ds->nkeys + 3)
		state_table_altered(id->uid, old_rel);
	old_expires = ds->nkeys + 1;
	for (i = 0; i < id->layout->nfields; i++)
	{
		int			a;

		old_att[i] = InvalidAttrNumber;
		for (a = ds->nkeys; a < old_desc->natts; a++)
			if (strcmp(NameStr(TupleDescAttr(old_desc, a)->attname),
					   id->layout->fields[i].name) == 0)
				old_att[i] = a + 1;
	}

	values = palloc(sizeof(Datum) * new_desc->natts);
	isnull = palloc(sizeof(bool) * new_desc->natts);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf state conversion",
								   ALLOCSET_DEFAULT_SIZES);
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	scan = table_beginscan(old_rel, snapshot, 0, NULL);
	slot = table_slot_create(old_rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		MemoryContext old = MemoryContextSwitchTo(rowcxt);

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		memset(isnull, true, sizeof(bool) * new_desc->natts);
		for (i = 0; i < ds->nkeys; i++)
		{
			values[i] = slot->tts_values[i];
			isnull[i] = slot->tts_isnull[i];
		}
		values[ds->att_expires - 1] = slot->tts_values[old_expires - 1];
		isnull[ds->att_expires - 1] = slot->tts_isnull[old_expires - 1];
		for (i = 0; i < id->layout->nfields; i++)
		{
			AttrNumber	oa = old_att[i];
			AttrNumber	na = ds->att_fields + i;

			if (oa == InvalidAttrNumber || slot->tts_isnull[oa - 1])
				continue;
			isnull[na - 1] = false;
			if (id->layout->fields[i].type == SF_IMAGE)
			{
				HeapTupleHeader th = DatumGetHeapTupleHeader(slot->tts_values[oa - 1]);
				HeapTupleData htup;

				htup.t_len = HeapTupleHeaderGetDatumLength(th);
				ItemPointerSetInvalid(&htup.t_self);
				htup.t_tableOid = InvalidOid;
				htup.t_data = th;
				values[na - 1] = PointerGetDatum(row_image_to_bytea(minimal_tuple_from_heap_tuple(&htup),
																id->rowdescs[id->layout->fields[i].input]));
			}
			else
				values[na - 1] = slot->tts_values[oa - 1];
		}
		simple_heap_insert(new_rel, heap_form_tuple(new_desc, values, isnull));
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(new_rel, NoLock);
	table_close(old_rel, NoLock);
	MemoryContextDelete(rowcxt);
	CommandCounterIncrement();

	ptf_spi_exec_as_owner(psprintf("DROP TABLE %s", ptf_relation_sql_name(old_relid)),
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	durable_set_state_table(id->uid, ds->state_relid, durable_row_types_fingerprint(id));
	ds->must_write = true;
	ereport(NOTICE,
			(errmsg("the state of uid \"%s\" was converted to the layout of this version of the extension",
					id->uid)));
}

/* ---- indexes, made by the first call that reads key by key ---- */

/*
 * The key index.  A btree entry holds at most about 2.7 kB: an index on
 * key columns whose values can be longer (text, numeric, arrays...)
 * refused every write of a longer key (a 3 kB text key: 54000), the uid's
 * next calls too, for good.  Such keys are indexed by a 64-bit hash,
 * hash_record_extended(ROW(keys...), 0): each column's extended hash
 * function under the column's collation, so that keys equal under a
 * nondeterministic collation hash alike.  A probe asks for the hashes of
 * its keys; rows of another key with the same hash are that key's stored
 * state, loaded like the others (never over a key memory holds).  Keys of
 * fixed-width columns (integers, timestamps, uuid...), which always fit,
 * keep an index on the columns: probes of neighbouring keys then read
 * neighbouring index pages, and no hash is computed per key.
 */

/* the longest fixed-width key kept in a btree entry of its own columns */
#define KEY_COLUMNS_MAX_BYTES	1024

/* The key columns are indexed by a hash (rather than as they are). */
static bool
key_index_hashed(DurableState *ds, Relation rel)
{
	int			bytes = 0;
	int			i;

	for (i = 0; i < ds->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);

		if (att->attlen < 0 ||
			!OidIsValid(GetDefaultOpClass(att->atttypid, BTREE_AM_OID)))
			return true;
		bytes += att->attlen;
	}
	return bytes > KEY_COLUMNS_MAX_BYTES;
}

/*
 * The key columns can be indexed: by a hash, every column's type has an
 * extended hash function (arrays and records: their parts); as they are,
 * a default btree operator class.
 */
bool
durable_keys_indexable(DurableState *ds, Relation rel)
{
	bool		hashed = key_index_hashed(ds, rel);
	int			i;

	for (i = 0; i < ds->nkeys; i++)
	{
		Oid			typid = TupleDescAttr(RelationGetDescr(rel), i)->atttypid;

		if (hashed ?
			!OidIsValid(lookup_type_cache(typid, TYPECACHE_HASH_EXTENDED_PROC)->hash_extended_proc) :
			!OidIsValid(GetDefaultOpClass(typid, BTREE_AM_OID)))
			return false;
	}
	return true;
}

/* Is index the key index: hash_record_extended(ROW(key columns 1..nkeys), 0)? */
static bool
key_hash_usable(Relation index, int nkeys)
{
	bool		match = false;

	/* a btree of int8's default operator family, over the whole table */
	if (index->rd_index->indisvalid && index->rd_rel->relam == BTREE_AM_OID &&
		index->rd_index->indnatts == 1 && index->rd_index->indkey.values[0] == 0 &&
		index->rd_opfamily[0] == get_opclass_family(GetDefaultOpClass(INT8OID, BTREE_AM_OID)) &&
		RelationGetIndexPredicate(index) == NIL)
	{
		List	   *exprs = RelationGetIndexExpressions(index);
		FuncExpr   *f = list_length(exprs) == 1 ? linitial(exprs) : NULL;

		if (f != NULL && IsA(f, FuncExpr) && f->funcid == F_HASH_RECORD_EXTENDED &&
			list_length(f->args) == 2 && IsA(linitial(f->args), RowExpr) &&
			IsA(lsecond(f->args), Const) && !((Const *) lsecond(f->args))->constisnull &&
			DatumGetInt64(((Const *) lsecond(f->args))->constvalue) == 0)
		{
			RowExpr    *row = linitial(f->args);
			ListCell   *lc;

			match = list_length(row->args) == nkeys;
			foreach(lc, row->args)
			{
				Var		   *v = lfirst(lc);

				match = match && IsA(v, Var) &&
					v->varattno == foreach_current_index(lc) + 1;
			}
		}
	}
	return match;
}

/*
 * Can probes read through index: a valid btree over columns first ..
 * first + ncols - 1 of rel, each with its type's default operator family
 * and its column's collation, whole or without NULLs of its first column
 * (as durable_ensure_index makes them)?  An index of another kind or
 * operator class over the same columns, which the table's owner may make,
 * would answer the probes' scans otherwise, or not at all.
 */
static bool
index_usable(Relation rel, Relation index, AttrNumber first, int ncols)
{
	Form_pg_index ix = index->rd_index;
	List	   *pred;
	int			i;

	if (!ix->indisvalid || index->rd_rel->relam != BTREE_AM_OID || ix->indnkeyatts < ncols)
		return false;
	for (i = 0; i < ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), first + i - 1);
		Oid			opclass = GetDefaultOpClass(att->atttypid, BTREE_AM_OID);

		if (ix->indkey.values[i] != first + i || !OidIsValid(opclass) ||
			index->rd_opfamily[i] != get_opclass_family(opclass) ||
			index->rd_indcollation[i] != att->attcollation)
			return false;
	}
	pred = RelationGetIndexPredicate(index);
	if (pred == NIL)
		return true;
	if (list_length(pred) == 1 && IsA(linitial(pred), NullTest))
	{
		NullTest   *nt = linitial(pred);

		return nt->nulltesttype == IS_NOT_NULL && IsA(nt->arg, Var) &&
			((Var *) nt->arg)->varattno == first;
	}
	return false;
}

/* find_index's first column for the key index by a hash of keys 1..ncols */
#define KEY_HASH_INDEX	0

/*
 * An index of rel probes can read through (index_usable, or for
 * KEY_HASH_INDEX key_hash_usable); InvalidOid if none.
 */
static Oid
find_index(Relation rel, AttrNumber first, int ncols)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		bool		match = first == KEY_HASH_INDEX ? key_hash_usable(index, ncols) :
			index_usable(rel, index, first, ncols);

		index_close(index, AccessShareLock);
		if (match)
		{
			found = lfirst_oid(lc);
			break;
		}
	}
	list_free(indexes);
	return found;
}

Oid
durable_ensure_index(DurableState *ds, AttrNumber first, int ncols, bool not_null_only)
{
	Relation	rel = table_open(ds->state_relid, AccessShareLock);
	Oid			index = find_index(rel, first, ncols);
	StringInfoData sql;
	int			i;

	if (!OidIsValid(index))
	{
		TupleDesc	desc = RelationGetDescr(rel);

		initStringInfo(&sql);
		appendStringInfo(&sql, "CREATE INDEX ON %s.%s (",
						 quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
						 quote_identifier(RelationGetRelationName(rel)));
		for (i = 0; i < ncols; i++)
			appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(desc, first + i - 1)->attname)));
		appendStringInfoChar(&sql, ')');
		if (not_null_only)
			appendStringInfo(&sql, " WHERE %s IS NOT NULL",
							 quote_identifier(NameStr(TupleDescAttr(desc, first - 1)->attname)));
		table_close(rel, AccessShareLock);
		ptf_spi_exec_as_owner(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
		CommandCounterIncrement();
		rel = table_open(ds->state_relid, AccessShareLock);
		index = find_index(rel, first, ncols);
		if (!OidIsValid(index))
			elog(ERROR, "index on state table %s was not made", RelationGetRelationName(rel));
	}
	ds->has_indexes = true;
	table_close(rel, AccessShareLock);
	return index;
}

/*
 * The key index, made now if the table has none.  A table of an earlier
 * version indexed long keys' columns themselves: that index goes, or every
 * write of a long key would still fail.
 */
Oid
durable_ensure_key_index(DurableState *ds)
{
	Relation	rel = table_open(ds->state_relid, AccessShareLock);
	Oid			index;
	Oid			by_columns;
	char	   *qualified;
	StringInfoData sql;
	int			i;

	ds->key_index_hashed = key_index_hashed(ds, rel);
	if (!ds->key_index_hashed)
	{
		table_close(rel, AccessShareLock);
		return durable_ensure_index(ds, 1, ds->nkeys, false);
	}
	index = find_index(rel, KEY_HASH_INDEX, ds->nkeys);
	if (OidIsValid(index))
	{
		table_close(rel, AccessShareLock);
		ds->has_indexes = true;
		return index;
	}
	qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										   RelationGetRelationName(rel));
	by_columns = find_index(rel, 1, ds->nkeys);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE INDEX ON %s (pg_catalog.hash_record_extended(ROW(", qualified);
	for (i = 0; i < ds->nkeys; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel), i)->attname)));
	appendStringInfoString(&sql, "), 0))");
	table_close(rel, AccessShareLock);

	if (OidIsValid(by_columns))
		ptf_spi_exec_as_owner(psprintf("DROP INDEX %s",
									   quote_qualified_identifier(get_namespace_name(get_rel_namespace(by_columns)),
																  get_rel_name(by_columns))),
							  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	CommandCounterIncrement();
	rel = table_open(ds->state_relid, AccessShareLock);
	index = find_index(rel, KEY_HASH_INDEX, ds->nkeys);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(index))
		elog(ERROR, "the key index of state table %s was not made", qualified);
	ds->has_indexes = true;
	return index;
}

