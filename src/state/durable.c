/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  Durable keyed state: the uid registry and the per-uid state tables.
 *
 * The registry is ordinary SQL through SPI, run as the extension's owner
 * (the caller has no rights on ptf.uid_registry: durable state is read
 * and written only through our functions, DESIGN 5).  Calls of one uid
 * serialize on a transaction-level lock of the extension's own (which no
 * SQL function can take), and what one committed is what the next one
 * loads; callers other than pipeline workers also lock the registry row
 * FOR UPDATE, so that a call under REPEATABLE READ that waited fails
 * rather than use the state it saw before.
 *
 * State tables are made from the operator's declared layout
 * (state/layout.h):
 *
 *	  key columns..., [ns_space smallint, ns bigint,] expires_at, fields...
 *
 * one row per key (ns NULL) and one per (key, namespace).  Row images are
 * bytea (a MinimalTuple with TOASTed values inlined), so the table
 * depends on no user type; the input row types are recorded in the
 * registry (row_types) and must match whenever state is loaded.
 *
 * The rows themselves are read and written with the heap AM directly:
 * writing back is a multi-insert of new rows plus updates and deletes by
 * TID of changed and removed ones (each record and namespace remembers the
 * TID it was loaded from); the uid's lock keeps everybody else's hands off
 * the table while TIDs are in use (a pipeline worker keeps them between
 * its steps).
 *
 * Loading.  A call either loads the whole table by one sequential scan
 * (durable_load), or reads only the keys its rows touch (durable_probe_keys:
 * an index on the key columns, one scan per batch of keys, sorted and
 * deduplicated by the btree's array keys) and the keys whose timers come
 * due as the watermark moves (durable_probe_timers: an index on the
 * layout's timer field), and may load the rest by a scan later
 * (durable_load_rest).  The caller decides which (functions/call.c); here
 * a key already in memory is never read again -- memory is newer than the
 * table until written back -- nor is a row whose key was removed since
 * (its TID is dead).  The indexes are made by the first call that probes,
 * not with the table: a table filled by one bulk call pays no index upkeep
 * until state is large enough to be probed.  From then on every write
 * keeps them (insert_index_entries).
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
#include "access/heaptoast.h"
#include "access/stratnum.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "base/ptf_time.h"
#include "catalog.h"
#include "state/durable.h"

#define INSERT_BATCH 1000

struct DurableState
{
	char	   *uid;
	Oid			state_relid;
	int64		version;		/* the registry's, changed by every write */
	Oid			state_filenode; /* the state table's storage, for TIDs */
	bool		must_write;		/* the table was converted by this call */
	bool		had_xid;		/* the transaction had an xid when it began */
	int			nkeys;
	int			nspaces;
	Oid			time_type;		/* of SF_TIME fields */
	const StateLayout *layout;
	int			ninputs;
	TupleDesc	rowdescs[DURABLE_MAX_INPUTS];
	char	   *row_types;		/* their fingerprint, written with every commit */
	Datum		input_tables;	/* oid[] of their tables, written likewise */
	/* state table layout: keys 1..nkeys, then these */
	AttrNumber	att_ns_space;	/* 0: no namespaces */
	AttrNumber	att_ns;
	AttrNumber	att_expires;
	AttrNumber	att_fields;		/* the first field's */
	int			natts;

	/* loading part of the state */
	int64		stored_keys;	/* in the table when the call began */
	uint64		memory_keys;	/* in memory when the call began */
	uint64		loaded_keys;	/* read from the table by this call */
	uint64		evicted_keys;	/* dropped from memory by this call */
	Oid			key_index;		/* InvalidOid: not looked for yet */
	Oid			timer_index;
	Oid			expiry_index;
	bool		has_indexes;	/* writes must keep indexes */

	/* the dead TIDs of memory as a set, added to as they come, in cxt */
	MemoryContext cxt;			/* the call's, where this lives */
	HTAB	   *dead_set;
	int			dead_in_set;

	/*
	 * What partial loads read the table under: taken before the input runs,
	 * because while a change stream is decoded the transaction's snapshot
	 * is the decoder's historic one, which sees no user rows.
	 */
	Snapshot	snapshot;
	uint64		probes;			/* keys asked for, this call */
	bool		expires;		/* keys have a TTL */
};

/* ---- names and types ---- */

/*
 * The tables a uid reads, for the event trigger that warns when one is
 * dropped (functions/state_functions.c).
 */
static Datum
input_tables_array(const DurableIdentity *id)
{
	Datum		oids[DURABLE_MAX_INPUTS];
	int			n = 0;
	int			i;

	for (i = 0; i < id->ninputs; i++)
		if (OidIsValid(id->relids[i]))
			oids[n++] = ObjectIdGetDatum(id->relids[i]);
	return PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

static Datum
key_names_array(const DurableIdentity *id)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(id->keys->ncols, 1));
	int			i;

	for (i = 0; i < id->keys->ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(id->rowdescs[0],
											  id->keys->cols[i].attno - 1);

		names[i] = CStringGetTextDatum(NameStr(att->attname));
	}
	return PointerGetDatum(construct_array(names, id->keys->ncols, TEXTOID,
										   -1, false, TYPALIGN_INT));
}

static char *
text_array_to_string(Datum arr)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	StringInfoData buf;

	deconstruct_array(DatumGetArrayTypeP(arr), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? "," : "",
						 quote_identifier(TextDatumGetCString(elems[i])));
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * What the stored images' bytes depend on: each input row type's
 * columns, by type name (OIDs change in a dump and restore) and physical
 * layout, dropped ones by their layout alone:
 *
 *	  (pg_catalog.int4 4i, pg_catalog.text -1i, dropped 8d); (...)
 */
static char *
row_types_fingerprint(const DurableIdentity *id)
{
	StringInfoData buf;
	int			n;
	int			i;

	initStringInfo(&buf);
	for (n = 0; n < id->ninputs; n++)
	{
		TupleDesc	desc = id->rowdescs[n];

		if (n > 0)
			appendStringInfoString(&buf, "; ");
		appendStringInfoChar(&buf, '(');
		for (i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (i > 0)
				appendStringInfoString(&buf, ", ");
			if (att->attisdropped)
				appendStringInfoString(&buf, "dropped");
			else
				appendStringInfoString(&buf, format_type_extended(att->atttypid, -1,
																  FORMAT_TYPE_FORCE_QUALIFY));
			appendStringInfo(&buf, " %d%c", att->attlen, att->attalign);
		}
		appendStringInfoChar(&buf, ')');
	}
	return buf.data;
}

/*
 * Can rows stored as `stored` be read as rows of `now`?  Yes when every
 * stored column is still there with the same type, or dropped since (its
 * bytes are laid out the same), and columns were only added after them
 * (read as their defaults, as the heap reads old rows).
 */
static List *
split_list(const char *s, const char *delims)
{
	char	   *copy = pstrdup(s);
	char	   *save;
	char	   *tok;
	List	   *items = NIL;

	for (tok = strtok_r(copy, delims, &save); tok != NULL; tok = strtok_r(NULL, delims, &save))
	{
		while (*tok == ' ')
			tok++;
		items = lappend(items, tok);
	}
	return items;
}

static bool
row_types_compatible(const char *stored, const char *now)
{
	List	   *s_inputs;
	List	   *n_inputs;
	ListCell   *ls;
	ListCell   *ln;

	if (strcmp(stored, now) == 0)
		return true;
	s_inputs = split_list(stored, ";");
	n_inputs = split_list(now, ";");
	if (list_length(s_inputs) != list_length(n_inputs))
		return false;
	forboth(ls, s_inputs, ln, n_inputs)
	{
		List	   *s_cols = split_list(lfirst(ls), "(,)");
		List	   *n_cols = split_list(lfirst(ln), "(,)");
		ListCell   *cs;
		ListCell   *cn;

		if (list_length(n_cols) < list_length(s_cols))
			return false;		/* a column less */
		forboth(cs, s_cols, cn, n_cols)
		{
			const char *a = lfirst(cs);
			const char *b = lfirst(cn);

			if (strcmp(a, b) == 0)
				continue;
			/* dropped since: the same bytes */
			if (strncmp(b, "dropped ", 8) != 0 ||
				strcmp(strrchr(a, ' '), strrchr(b, ' ')) != 0)
				return false;
		}
	}
	return true;
}

/* a row type for messages, even when it is gone */
static char *
row_type_name(Oid typid)
{
	char	   *s = format_type_extended(typid, -1, FORMAT_TYPE_ALLOW_INVALID);

	if (strcmp(s, "???") == 0)
		return psprintf("a row type that no longer exists (OID %u; its table was dropped?)",
						typid);
	return s;
}

static void
identity_mismatch(const char *uid, const char *what, const char *was,
				  const char *now)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("uid \"%s\" keeps state for another %s", uid, what),
			 errdetail("Its state was made with %s %s; this call has %s.",
					   what, was, now),
			 errhint("Use another uid, or forget this one's state with ptf.drop_state('%s').",
					 uid)));
}

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

static Oid
create_state_table(const DurableIdentity *id, DurableState *ds)
{
	StringInfoData sql;
	char	   *relname;
	List	   *names = state_column_names(id);
	int			i;
	Oid			relid;

	ptf_spi_exec_as_owner("SELECT pg_catalog.nextval('ptf.state_table_seq')",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	relname = psprintf("state_%lld", (long long) ptf_spi_int64(1, 0));

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
								   quote_literal_cstr(psprintf("keyed state of uid %s (%s)",
															   id->uid, id->function))),
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
static void
check_state_table(const DurableIdentity *id, DurableState *ds)
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

/* ---- images as bytes ---- */

/*
 * A row image as bytea: the MinimalTuple itself, with values TOASTed
 * elsewhere brought inline (the image must not depend on the source's
 * TOAST table, which the row may be deleted from).
 */
static bytea *
image_to_bytea(MinimalTuple mt, TupleDesc desc)
{
	bytea	   *b;

	if (mt->t_infomask & HEAP_HASEXTERNAL)
	{
		HeapTuple	htup = heap_tuple_from_minimal_tuple(mt);
		HeapTuple	flat = toast_flatten_tuple(htup, desc);

		mt = minimal_tuple_from_heap_tuple(flat);
	}
	b = palloc(VARHDRSZ + mt->t_len);
	SET_VARSIZE(b, VARHDRSZ + mt->t_len);
	memcpy(VARDATA(b), mt, mt->t_len);
	return b;
}

static void
bad_image(TupleDesc desc)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("a stored row image does not fit row type %s",
					format_type_be(desc->tdtypeid))));
}

/*
 * Every value of the image lies within it: a state table is plain data a
 * superuser may edit, and reading a row out of bounds would crash.
 */
static void
check_image(MinimalTuple mt, TupleDesc desc)
{
	HeapTupleHeader th = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
	int			natts = HeapTupleHeaderGetNatts(th);
	bool		hasnulls = (th->t_infomask & HEAP_HASNULL) != 0;
	Size		hoff = th->t_hoff;
	Size		end;
	Size		off = 0;
	const char *data;
	int			i;

	if (natts > desc->natts || hoff < offsetof(HeapTupleHeaderData, t_bits) ||
		(hasnulls && hoff < offsetof(HeapTupleHeaderData, t_bits) + BITMAPLEN(natts)) ||
		mt->t_len + MINIMAL_TUPLE_OFFSET < hoff)
		bad_image(desc);
	end = mt->t_len + MINIMAL_TUPLE_OFFSET - hoff;
	data = (const char *) th + hoff;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (hasnulls && att_isnull(i, th->t_bits))
			continue;
		if (att->attlen > 0)
		{
			off = att_align_nominal(off, att->attalign);
			if (off + att->attlen > end)
				bad_image(desc);
			off += att->attlen;
		}
		else if (att->attlen == -1)
		{
			const char *p;

			if (off >= end)
				bad_image(desc);
			off = att_align_pointer(off, att->attalign, -1, data + off);
			p = data + off;
			if (off >= end || (VARATT_IS_1B(p) ? 1 : 4) > end - off ||
				VARATT_IS_EXTERNAL(p) || VARSIZE_ANY(p) > end - off ||
				VARSIZE_ANY(p) < (VARATT_IS_1B(p) ? 1 : VARHDRSZ))
				bad_image(desc);
			off += VARSIZE_ANY(p);
		}
		else
		{
			Size		n = strnlen(data + off, end - off);

			if (n == end - off)
				bad_image(desc);
			off += n + 1;
		}
	}
}

static MinimalTuple
image_from_bytes(const char *p, Size len, TupleDesc desc)
{
	MinimalTuple mt;

	if (len < SizeofMinimalTupleHeader)
		bad_image(desc);
	mt = palloc(len);
	memcpy(mt, p, len);
	if (mt->t_len != len)
		bad_image(desc);
	check_image(mt, desc);
	return mt;
}

Datum
durable_image_datum(bytea *image, TupleDesc desc)
{
	MinimalTuple mt = image_from_bytes(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image), desc);
	HeapTuple	htup = heap_tuple_from_minimal_tuple(mt);

	return heap_copy_tuple_as_datum(htup, desc);
}

bytea *
state_images_to_bytea(const StateImages *imgs, TupleDesc desc)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	for (i = 0; i < imgs->n; i++)
	{
		bytea	   *one = image_to_bytea(imgs->tuples[i], desc);
		uint32		len = VARSIZE(one) - VARHDRSZ;

		appendBinaryStringInfo(&buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(&buf, VARDATA(one), len);
	}
	SET_VARSIZE(buf.data, buf.len);
	return (bytea *) buf.data;
}

StateImages *
state_images_from_bytea(bytea *b, TupleDesc desc)
{
	StateImages *imgs = palloc0(sizeof(StateImages));
	const char *p = VARDATA_ANY(b);
	const char *end = p + VARSIZE_ANY_EXHDR(b);
	int			max = 8;

	imgs->tuples = palloc(sizeof(MinimalTuple) * max);
	while (p < end)
	{
		uint32		len;

		if (end - p < (ptrdiff_t) sizeof(len))
			elog(ERROR, "stored row images are truncated");
		memcpy(&len, p, sizeof(len));
		p += sizeof(len);
		if (end - p < (ptrdiff_t) len)
			elog(ERROR, "stored row images are truncated");
		if (imgs->n == max)
		{
			max *= 2;
			imgs->tuples = repalloc(imgs->tuples, sizeof(MinimalTuple) * max);
		}
		imgs->tuples[imgs->n++] = image_from_bytes(p, len, desc);
		p += len;
	}
	return imgs;
}

/* ---- calls in progress ---- */

/*
 * A uid is in use from durable_open to durable_commit.  Calls of one uid
 * serialize on its lock, but not within one transaction: a call whose
 * input query calls the same uid would load the keys before the inner
 * call wrote them, and both would write them back.  So re-entry is
 * refused; (sub)transaction aborts forget the calls they interrupted.
 */
typedef struct ActiveUid
{
	char	   *uid;
	int			nest_level;
} ActiveUid;

static List *active_uids = NIL;
static bool active_uids_callbacks = false;

static void
forget_active_uids(int min_level)
{
	ListCell   *lc;

	foreach(lc, active_uids)
	{
		ActiveUid  *a = (ActiveUid *) lfirst(lc);

		if (a->nest_level >= min_level)
		{
			active_uids = foreach_delete_current(active_uids, lc);
			pfree(a->uid);
			pfree(a);
		}
	}
}

static void
active_uids_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		forget_active_uids(0);
}

static void
active_uids_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget_active_uids(GetCurrentTransactionNestLevel());
}

static void
enter_uid(const char *uid)
{
	ListCell   *lc;
	ActiveUid  *a;
	MemoryContext old;

	foreach(lc, active_uids)
	{
		if (strcmp(((ActiveUid *) lfirst(lc))->uid, uid) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("uid \"%s\" is already in use by a call in progress", uid),
					 errdetail("A call's input cannot call the same uid.")));
	}
	if (!active_uids_callbacks)
	{
		RegisterXactCallback(active_uids_xact_callback, NULL);
		RegisterSubXactCallback(active_uids_subxact_callback, NULL);
		active_uids_callbacks = true;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	a = palloc(sizeof(ActiveUid));
	a->uid = pstrdup(uid);
	a->nest_level = GetCurrentTransactionNestLevel();
	active_uids = lappend(active_uids, a);
	MemoryContextSwitchTo(old);
}

static void
leave_uid(const char *uid)
{
	ListCell   *lc;

	foreach(lc, active_uids)
	{
		ActiveUid  *a = (ActiveUid *) lfirst(lc);

		if (strcmp(a->uid, uid) == 0)
		{
			active_uids = foreach_delete_current(active_uids, lc);
			pfree(a->uid);
			pfree(a);
			return;
		}
	}
}

/*
 * The uid whose call gave the current transaction its xid, if a uid's call
 * did.  Every such call writes (registry rows, state), even one that only
 * reads its input; a change stream's first call, which cannot make its
 * slot once the transaction has an xid, then names it.
 */
static char *xid_writer = NULL;	/* in TopMemoryContext */
static LocalTransactionId xid_writer_lxid = InvalidLocalTransactionId;

static void
note_xid_writer(DurableState *ds)
{
	if (ds->had_xid || !TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return;
	ds->had_xid = true;
	if (xid_writer != NULL)
		pfree(xid_writer);
	xid_writer = MemoryContextStrdup(TopMemoryContext, ds->uid);
	xid_writer_lxid = MyProc->lxid;
}

const char *
durable_xid_writer(void)
{
	if (xid_writer == NULL || xid_writer_lxid != MyProc->lxid ||
		!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return NULL;
	return xid_writer;
}

/* ---- who may use a uid ---- */

/* the pipeline whose state a uid is, as a column of a query over uid_registry r */
#define PIPELINE_OF_UID \
	"(SELECT p.name FROM ptf.pipeline_registry p WHERE p.uid OPERATOR(pg_catalog.=) r.uid)"

/* A pipeline's uid is read and dropped by the pipeline only. */
void
durable_refuse_pipeline_uid(const char *uid, const char *pipeline)
{
	if (pipeline != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("uid \"%s\" is the state of pipeline \"%s\"", uid, pipeline),
				 errdetail("Its changes are read by the pipeline worker, into the pipeline's sink."),
				 errhint("ptf.drop_pipeline() drops the pipeline with its state.")));
}

void
durable_check_owner(const char *uid, Oid owner)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for the state of uid \"%s\"", uid),
				 errdetail("Uids are named per database, and another role made this one."),
				 errhint("Choose another uid.")));
}

/*
 * Durable state holds rows of its sources (pending candidates, images):
 * using it needs the right to read those tables now, not only when the
 * state was made.
 */
static void
check_source_privilege(TupleDesc rowdesc)
{
	Oid			relid = typeidTypeRelid(rowdesc->tdtypeid);

	if (!OidIsValid(relid) || get_rel_relkind(relid) == RELKIND_COMPOSITE_TYPE)
		return;
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ALL) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/* ---- opening a uid ---- */

static void
set_layout(DurableState *ds, const DurableIdentity *id)
{
	AttrNumber	a = id->keys->ncols + 1;

	ds->nkeys = id->keys->ncols;
	ds->nspaces = id->nspaces;
	ds->layout = id->layout;
	ds->ninputs = id->ninputs;
	memcpy(ds->rowdescs, id->rowdescs, sizeof(TupleDesc) * id->ninputs);
	if (id->nspaces > 0)
	{
		ds->att_ns_space = a++;
		ds->att_ns = a++;
	}
	ds->att_expires = a++;
	ds->att_fields = a;
	ds->natts = a - 1 + id->layout->nfields;
}

static void
check_identity(const DurableIdentity *id, DurableState *ds, Datum call_keys)
{
	char	   *s;
	Oid			row_type;

	durable_check_owner(id->uid, DatumGetObjectId(ptf_spi_datum(Anum_uid_registry_owner)));

	s = ptf_spi_text(Anum_uid_registry_function);
	if (strcmp(s, id->function) != 0)
		identity_mismatch(id->uid, "function", s, id->function);
	row_type = DatumGetObjectId(ptf_spi_datum(Anum_uid_registry_row_type));
	if (row_type != id->rowdescs[0]->tdtypeid)
		identity_mismatch(id->uid, "row type", row_type_name(row_type),
						  format_type_be(id->rowdescs[0]->tdtypeid));
	s = text_array_to_string(ptf_spi_datum(Anum_uid_registry_key_columns));
	if (strcmp(s, text_array_to_string(call_keys)) != 0)
		identity_mismatch(id->uid, "partition_by", s, text_array_to_string(call_keys));
	s = ptf_spi_text(Anum_uid_registry_on_time);
	if ((s == NULL) != (id->on_time == NULL) ||
		(s != NULL && strcmp(s, id->on_time) != 0))
		identity_mismatch(id->uid, "on_time", s ? quote_identifier(s) : "(none)",
						  id->on_time ? quote_identifier(id->on_time) : "(none)");
	s = ptf_spi_text(Anum_uid_registry_slot_name);
	if ((s == NULL) != (id->slot_name == NULL))
		identity_mismatch(id->uid, "input",
						  s ? "a change stream" : "a relation or query",
						  id->slot_name ? "a change stream" : "a relation or query");
	s = ptf_spi_text(Anum_uid_registry_options);
	if ((s == NULL) != (id->options == NULL) ||
		(s != NULL && strcmp(s, id->options) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("uid \"%s\" keeps another kind of state", id->uid),
				 errdetail("Its state is %s; this call needs %s.",
						   s ? s : "plain", id->options ? id->options : "plain"),
				 errhint("Use another uid, or forget this one's state with ptf.drop_state('%s').",
						 id->uid)));
}

/* The images in state are rows of the types they were stored as. */
static void
check_row_types(const DurableIdentity *id, const char *stored, const char *now)
{
	if (id->keeps_images && stored != NULL && !row_types_compatible(stored, now))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the input row type of uid \"%s\" changed since its state was stored", id->uid),
				 errdetail("The state holds rows of %s; the input now has %s.", stored, now),
				 errhint("ALTER TABLE changed the source's columns; ptf.drop_state('%s') forgets the uid's state.",
						 id->uid)));
}

static void
read_progress(const DurableIdentity *id, DurableProgress *progress)
{
	int			i;

	memset(progress, 0, sizeof(DurableProgress));
	progress->ninputs = id->ninputs;
	for (i = 0; i < id->ninputs; i++)
		progress->max_event_time[i] = progress->watermark[i] =
			progress->last_row_proc_time[i] = PTF_TIME_MIN;
	progress->max_event_time[0] = ptf_spi_int64(Anum_uid_registry_max_event_time, PTF_TIME_MIN);
	progress->combined_watermark = ptf_spi_int64(Anum_uid_registry_watermark, PTF_TIME_MIN);
	progress->watermark[0] = progress->combined_watermark;
	if (!ptf_spi_isnull(Anum_uid_registry_input_times))
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(DatumGetArrayTypeP(ptf_spi_datum(Anum_uid_registry_input_times)),
						  INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
		/* per input: max event time, watermark, last row's processing time */
		for (i = 0; i < id->ninputs && 3 * i + 2 < n; i++)
		{
			progress->max_event_time[i] = DatumGetInt64(elems[3 * i]);
			progress->watermark[i] = DatumGetInt64(elems[3 * i + 1]);
			progress->last_row_proc_time[i] = DatumGetInt64(elems[3 * i + 2]);
		}
	}
	progress->last_lsn = ptf_spi_isnull(Anum_uid_registry_last_lsn) ? InvalidXLogRecPtr :
		DatumGetLSN(ptf_spi_datum(Anum_uid_registry_last_lsn));
	progress->rows_in = ptf_spi_int64(Anum_uid_registry_rows_in, 0);
	progress->rows_out = ptf_spi_int64(Anum_uid_registry_rows_out, 0);
	progress->rows_late = ptf_spi_int64(Anum_uid_registry_rows_late, 0);
	progress->rows_skipped = ptf_spi_int64(Anum_uid_registry_rows_skipped, 0);
	progress->stream_snapshot = ptf_spi_text(Anum_uid_registry_stream_snapshot);
	/* a position written by this very transaction may yet roll back */
	progress->last_lsn_committed =
		!TransactionIdIsCurrentTransactionId(DatumGetTransactionId(ptf_spi_datum(Anum_uid_registry_xmin)));
}

static void convert_layout_1(const DurableIdentity *id, DurableState *ds, Oid old_relid);

static void
set_state_table(const char *uid, Oid relid, const char *row_types)
{
	Oid			argt[3] = {TEXTOID, OIDOID, TEXTOID};
	Datum		args[3];

	args[0] = CStringGetTextDatum(uid);
	args[1] = ObjectIdGetDatum(relid);
	args[2] = CStringGetTextDatum(row_types);
	ptf_spi_exec_as_owner(psprintf("UPDATE ptf.uid_registry SET state_table = $2, "
								   "layout = %d, row_types = $3 "
								   "WHERE uid OPERATOR(pg_catalog.=) $1",
								   STATE_LAYOUT_VERSION),
						  3, argt, args, NULL, SPI_OK_UPDATE);
}

DurableState *
durable_open(const DurableIdentity *id, DurableProgress *progress)
{
	DurableState *ds = palloc0(sizeof(DurableState));
	Oid			caller = GetUserId();
	Oid			argtypes[12] = {TEXTOID, TEXTOID, OIDOID, OIDOID, TEXTARRAYOID, TEXTOID,
	OIDOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, OIDARRAYOID};
	Datum		values[12];
	char		nulls[12] = "            ";
	bool		exists;
	Datum		call_keys = key_names_array(id);
	char	   *row_types = row_types_fingerprint(id);
	char	   *stored_types;
	bool		layout_1;
	int			i;

	Assert(id->ninputs >= 1 && id->ninputs <= DURABLE_MAX_INPUTS);
	ds->cxt = CurrentMemoryContext;
	ds->uid = pstrdup(id->uid);
	ds->had_xid = TransactionIdIsValid(GetTopTransactionIdIfAny());
	ds->row_types = row_types;
	ds->time_type = OidIsValid(id->time_type) ? id->time_type : TIMESTAMPTZOID;
	set_layout(ds, id);

	values[0] = CStringGetTextDatum(id->uid);
	values[1] = CStringGetTextDatum(id->function);
	values[2] = ObjectIdGetDatum(caller);
	values[3] = ObjectIdGetDatum(id->rowdescs[0]->tdtypeid);
	values[4] = call_keys;
	values[5] = id->on_time ? CStringGetTextDatum(id->on_time) : (Datum) 0;
	nulls[5] = id->on_time ? ' ' : 'n';
	values[6] = ObjectIdGetDatum(ds->time_type);
	values[7] = id->slot_name ? CStringGetTextDatum(id->slot_name) : (Datum) 0;
	nulls[7] = id->slot_name ? ' ' : 'n';
	values[8] = id->options ? CStringGetTextDatum(id->options) : (Datum) 0;
	nulls[8] = id->options ? ' ' : 'n';
	values[9] = Int32GetDatum(STATE_LAYOUT_VERSION);
	values[10] = CStringGetTextDatum(row_types);
	values[11] = ds->input_tables = input_tables_array(id);

	ptf_check_sql_version();
	for (i = 0; i < id->ninputs; i++)
		check_source_privilege(id->rowdescs[i]);
	enter_uid(id->uid);

	/* an owner check before taking the lock: no waiting on others' uids */
	ptf_spi_exec_as_owner("SELECT r.owner, " PIPELINE_OF_UID " FROM ptf.uid_registry r "
						  "WHERE r.uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	exists = (SPI_processed == 1);
	if (exists)
	{
		durable_check_owner(id->uid, DatumGetObjectId(ptf_spi_datum(1)));
		/* the worker's alone: a call from elsewhere would take its changes */
		if (!ptf_in_pipeline_worker)
			durable_refuse_pipeline_uid(id->uid, ptf_spi_text(2));
	}

	/*
	 * Calls of one uid serialize on a lock that writes nothing: a pipeline
	 * step that finds no changes leaves no WAL behind.  Other callers also
	 * lock the row, so that under REPEATABLE READ a call that waited fails
	 * rather than work on the state it saw before.
	 */
	(void) ptf_lock(PTF_LOCK_UID, ptf_lock_id_of_name(id->uid), ExclusiveLock, false, true);
	if (!exists)
		ptf_spi_exec_as_owner("INSERT INTO ptf.uid_registry "
							  "(uid, function, owner, row_type, key_columns, on_time, time_type, "
							  "slot_name, options, layout, row_types, input_tables) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) "
							  "ON CONFLICT (uid) DO NOTHING",
							  12, argtypes, values, nulls, SPI_OK_INSERT);

	ptf_spi_exec_as_owner(ptf_in_pipeline_worker ?
						  "SELECT " UID_REGISTRY_COLUMNS " FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1" :
						  "SELECT " UID_REGISTRY_COLUMNS " FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1 FOR UPDATE",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the state of uid \"%s\" was dropped by a concurrent transaction",
						id->uid),
				 errhint("Try the call again.")));

	check_identity(id, ds, call_keys);
	read_progress(id, progress);
	progress->created = !exists;
	ds->version = ptf_spi_int64(Anum_uid_registry_version, 0);
	ds->stored_keys = ptf_spi_int64(Anum_uid_registry_keys, 0);
	stored_types = ptf_spi_text(Anum_uid_registry_row_types);
	layout_1 = ptf_spi_isnull(Anum_uid_registry_layout);
	if (!layout_1 && ptf_spi_int64(Anum_uid_registry_layout, 0) != STATE_LAYOUT_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the state of uid \"%s\" has layout %lld, which this version of the extension does not read",
						id->uid, (long long) ptf_spi_int64(Anum_uid_registry_layout, 0)),
				 errhint("Update the extension's library, or forget the state with ptf.drop_state('%s').",
						 id->uid)));
	check_row_types(id, stored_types, row_types);

	if (ptf_spi_isnull(Anum_uid_registry_state_table))
	{
		ds->state_relid = create_state_table(id, ds);
		set_state_table(id->uid, ds->state_relid, row_types);
	}
	else
	{
		ds->state_relid = DatumGetObjectId(ptf_spi_datum(Anum_uid_registry_state_table));
		if (layout_1)
			convert_layout_1(id, ds, ds->state_relid);
	}
	check_state_table(id, ds);
	note_xid_writer(ds);
	return ds;
}

/* ---- layout 1 (extension version 1.0) ---- */

/*
 * The 1.0 table: key columns, then expires_at, event_time, seq and, when
 * images were kept, image of the source's row type.  Its rows become rows
 * of a table made from the declared layout, each field taken from the old
 * column of its name; the old table goes.
 */
static void
convert_layout_1(const DurableIdentity *id, DurableState *ds, Oid old_relid)
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
	ds->state_relid = create_state_table(id, ds);
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
				values[na - 1] = PointerGetDatum(image_to_bytea(minimal_tuple_from_heap_tuple(&htup),
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
	set_state_table(id->uid, ds->state_relid, row_types_fingerprint(id));
	ds->must_write = true;
	ereport(NOTICE,
			(errmsg("the state of uid \"%s\" was converted to the layout of this version of the extension",
					id->uid)));
}

/* ---- loading and writing back ---- */

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

					values[i] = PointerGetDatum(image_from_bytes(VARDATA_ANY(b),
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
} RowLoader;

/*
 * The dead TIDs as a set, brought up to date: memory's list only grows
 * until it is written back (forget_dead_set), so only its new end is added.
 */
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
durable_load(DurableState *ds, KeyedState *ks, const StateCodec *codec)
{
	Assert(keyed_state_count(ks) == 0);
	ds->memory_keys = 0;
	scan_into(ds, ks, codec, false);
	keyed_state_clear_changes(ks);
	/* what the table holds, counted: a stored count that drifted heals */
	ds->stored_keys = ds->loaded_keys;
}

void
durable_attach(DurableState *ds, KeyedState *ks)
{
	ds->memory_keys = keyed_state_count(ks);
	if (ds->snapshot == NULL)
		ds->snapshot = RegisterSnapshot(GetTransactionSnapshot());
}

static void
release_snapshot(DurableState *ds)
{
	if (ds->snapshot != NULL)
		UnregisterSnapshot(ds->snapshot);
	ds->snapshot = NULL;
}

void
durable_load_rest(DurableState *ds, KeyedState *ks, const StateCodec *codec)
{
	scan_into(ds, ks, codec, true);
}

/* ---- probing: indexes, made on first use ---- */

/* the key columns have a default btree operator class each */
static bool
keys_indexable(DurableState *ds, Relation rel)
{
	int			i;

	for (i = 0; i < ds->nkeys; i++)
		if (!OidIsValid(GetDefaultOpClass(TupleDescAttr(RelationGetDescr(rel), i)->atttypid,
										  BTREE_AM_OID)))
			return false;
	return true;
}

/* An index of rel whose first column is attno (and, for keys, all key columns). */
static Oid
find_index(Relation rel, AttrNumber first, int ncols)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		Form_pg_index ix;
		int			i;
		bool		match;

		if (!HeapTupleIsValid(tup))
			continue;
		ix = (Form_pg_index) GETSTRUCT(tup);
		match = ix->indisvalid && ix->indnkeyatts >= ncols;
		for (i = 0; match && i < ncols; i++)
			match = ix->indkey.values[i] == first + i;
		ReleaseSysCache(tup);
		if (match)
		{
			found = indexoid;
			break;
		}
	}
	list_free(indexes);
	return found;
}

static Oid
ensure_index(DurableState *ds, AttrNumber first, int ncols, bool not_null_only)
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

bool
durable_can_probe(DurableState *ds)
{
	Relation	rel;
	bool		ok;

	if (ds->nkeys == 0)
		return false;
	rel = table_open(ds->state_relid, AccessShareLock);
	ok = keys_indexable(ds, rel);
	table_close(rel, AccessShareLock);
	return ok;
}

int64
durable_stored_keys(DurableState *ds)
{
	return ds->stored_keys;
}

uint64
durable_probes(DurableState *ds)
{
	return ds->probes;
}

uint64
durable_loaded_keys(DurableState *ds)
{
	return ds->loaded_keys;
}

Size
durable_table_bytes(DurableState *ds)
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
	Assert(OidIsValid(indexoid));	/* durable_prepare_probes */
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

void
durable_probe_keys(DurableState *ds, KeyedState *ks, const StateCodec *codec,
				   Datum *values, bool *nulls, int n)
{
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

static AttrNumber timer_attno(DurableState *ds);

/*
 * Make the indexes probing reads through, now: a probe runs while the
 * input's query runs, and SPI (which makes them) must not run under it.
 */
void
durable_prepare_probes(DurableState *ds, KeyedState *ks)
{
	ds->expires = keyed_state_ttl(ks) > 0;
	if (!OidIsValid(ds->key_index))
		ds->key_index = ensure_index(ds, 1, ds->nkeys, false);
	if (ds->layout->timer_field != NULL && !OidIsValid(ds->timer_index))
		ds->timer_index = ensure_index(ds, timer_attno(ds), 1, true);
	if (ds->expires && ds->att_ns_space == 0 && !OidIsValid(ds->expiry_index))
		ds->expiry_index = ensure_index(ds, ds->att_expires, 1, true);
}

/*
 * Delete the stored keys expired at now that memory does not hold, through
 * the expiry index: what sweeping a fully loaded state would have removed.
 * (Memory's own expired keys are swept there, and their TIDs are dead.)
 * Layouts with namespaces are not swept here: a key's namespace rows
 * would have to go with it.
 */
void
durable_sweep_expired(DurableState *ds, KeyedState *ks, PtfTime now)
{
	StateScan	s;
	ScanKeyData skey;
	HTAB	   *dead;

	if (!OidIsValid(ds->expiry_index))
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
durable_probe_timers(DurableState *ds, KeyedState *ks, const StateCodec *codec,
					 PtfTime after, PtfTime upto)
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

		durable_probe_keys(ds, ks, codec, values, nulls, n);
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
				fv[i] = PointerGetDatum(image_to_bytea((MinimalTuple) DatumGetPointer(fv[i]),
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
		TupleTableSlot *slot = b->slots[b->n];

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
		TupleTableSlot *slot = b->slots[nbatch++];

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
		}
	}
}

const char *
durable_uid(DurableState *ds)
{
	return ds->uid;
}

Oid
durable_state_relid(DurableState *ds)
{
	return ds->state_relid;
}

int64
durable_version(DurableState *ds)
{
	return ds->version;
}

Oid
durable_state_filenode(DurableState *ds)
{
	return ds->state_filenode;
}

bool
durable_must_write(DurableState *ds)
{
	return ds->must_write;
}

void
durable_close(DurableState *ds)
{
	release_snapshot(ds);
	Assert(!ds->must_write);
	leave_uid(ds->uid);
}

static void
write_progress(DurableState *ds, KeyedState *ks, const DurableProgress *progress)
{
	Datum		values[13];
	char		nulls[13];
	Oid			argtypes[13] = {TEXTOID, INT8OID, INT8OID, LSNOID, INT8OID,
	INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID, TEXTOID, TEXTOID, OIDARRAYOID};
	Datum		times[3 * DURABLE_MAX_INPUTS];
	int			i;

	for (i = 0; i < progress->ninputs; i++)
	{
		times[3 * i] = Int64GetDatum(progress->max_event_time[i]);
		times[3 * i + 1] = Int64GetDatum(progress->watermark[i]);
		times[3 * i + 2] = Int64GetDatum(progress->last_row_proc_time[i]);
	}
	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(ds->uid);
	values[1] = Int64GetDatum(progress->max_event_time[0]);
	nulls[1] = progress->max_event_time[0] == PTF_TIME_MIN ? 'n' : ' ';
	values[2] = Int64GetDatum(progress->combined_watermark);
	nulls[2] = progress->combined_watermark == PTF_TIME_MIN ? 'n' : ' ';
	values[3] = LSNGetDatum(progress->last_lsn);
	nulls[3] = XLogRecPtrIsInvalid(progress->last_lsn) ? 'n' : ' ';
	/* memory may hold part of the keys: the table's count moves by what memory gained */
	values[4] = Int64GetDatum(ds->stored_keys + (int64) keyed_state_count(ks) -
							  (int64) ds->memory_keys - (int64) ds->loaded_keys +
							  (int64) ds->evicted_keys);
	values[5] = Int64GetDatum((int64) progress->rows_in);
	values[6] = Int64GetDatum((int64) progress->rows_out);
	values[7] = Int64GetDatum((int64) progress->rows_late);
	values[8] = Int64GetDatum((int64) progress->rows_skipped);
	values[9] = PointerGetDatum(construct_array(times, 3 * progress->ninputs, INT8OID,
												8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	/* rows written now are of the current types (columns may have been added) */
	values[10] = CStringGetTextDatum(ds->row_types);
	values[11] = progress->stream_snapshot ? CStringGetTextDatum(progress->stream_snapshot) : (Datum) 0;
	nulls[11] = progress->stream_snapshot ? ' ' : 'n';
	/* a uid of 1.0, or one whose source was made again, learns its tables */
	values[12] = ds->input_tables;
	ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET max_event_time = $2, watermark = $3, "
						  "last_lsn = $4, keys = $5, rows_in = $6, rows_out = $7, "
						  "rows_late = $8, rows_skipped = $9, input_times = $10, "
						  "row_types = $11, stream_snapshot = $12, input_tables = $13, "
						  "version = pg_catalog.nextval('ptf.state_version_seq'), "
						  "updated_at = pg_catalog.clock_timestamp() "
						  "WHERE uid OPERATOR(pg_catalog.=) $1 RETURNING version",
						  13, argtypes, values, nulls, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 1)
		ds->version = ptf_spi_int64(1, 0);
}

/* Write back the changed keys and namespaces, delete the removed ones. */
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
	b.slots = palloc(sizeof(TupleTableSlot *) * INSERT_BATCH);
	b.tids = palloc(sizeof(ItemPointer) * INSERT_BATCH);
	b.flags = palloc(sizeof(uint8 *) * INSERT_BATCH);
	b.ns_flags = palloc(sizeof(uint16 *) * INSERT_BATCH);
	for (i = 0; i < INSERT_BATCH; i++)
		b.slots[i] = MakeSingleTupleTableSlot(RelationGetDescr(b.rel), &TTSOpsVirtual);
	open_indexes(&b);

	dead = keyed_state_dead_tids(ks, &ndead);
	for (i = 0; i < ndead; i++)
		simple_heap_delete(b.rel, &dead[i]);

	if (keyed_state_is_inline(ks))
		write_new_inline_keys(ds, ks, &b);

	changed = keyed_state_changed(ks, &nchanged);
	for (i = 0; i < nchanged; i++)
	{
		StateRecord *rec = changed[i];

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
	for (i = 0; i < INSERT_BATCH; i++)
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
durable_flush(DurableState *ds, KeyedState *ks, const StateCodec *codec)
{
	write_changes(ds, ks, codec);
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
durable_commit(DurableState *ds, KeyedState *ks, const StateCodec *codec,
			   const DurableProgress *progress)
{
	release_snapshot(ds);
	write_changes(ds, ks, codec);
	write_progress(ds, ks, progress);
	ds->must_write = false;
	note_xid_writer(ds);
	leave_uid(ds->uid);
}

/* ---- ptf.resync ---- */

/* the functions that can say the net effect of changes not read one by one */
static bool
can_resync(const char *function, bool on_time, const char *options)
{
	return (strcmp(function, "deduplicate_keep_first") == 0 && !on_time) ||
		(strcmp(function, "to_changelog") == 0 && options != NULL &&
		 strstr(options, "normalizing") != NULL);
}

static void
mark_resync(Datum uid, const char *slot_name)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	char		nulls[2] = "  ";

	args[0] = uid;
	args[1] = slot_name ? CStringGetTextDatum(slot_name) : (Datum) 0;
	nulls[1] = slot_name ? ' ' : 'n';
	ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET stream_snapshot = 'resync', "
						  "slot_name = coalesce($2, slot_name), "
						  "last_lsn = CASE WHEN $2 IS NULL THEN last_lsn END, "
						  "version = pg_catalog.nextval('ptf.state_version_seq'), "
						  "updated_at = pg_catalog.clock_timestamp() "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  2, argtypes, args, nulls, SPI_OK_UPDATE);
}

/*
 * A stream whose slot is lost here (dropped, invalidated, or another
 * database's: the uid was copied) can go on, on a new slot, when its
 * function can say the net effect of what it missed: true, and the uid is
 * marked to be brought in line with its tables.  The caller holds the
 * uid's lock and made the slot.
 */
bool
durable_stream_can_restart(const char *uid)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	args[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT " UID_REGISTRY_COLUMNS " FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1 ||
		!has_privs_of_role(GetUserId(), DatumGetObjectId(ptf_spi_datum(Anum_uid_registry_owner))))
		return false;
	return can_resync(ptf_spi_text(Anum_uid_registry_function),
					  !ptf_spi_isnull(Anum_uid_registry_on_time),
					  ptf_spi_text(Anum_uid_registry_options));
}

void
durable_restart_stream(const char *uid, const char *slot_name)
{
	mark_resync(CStringGetTextDatum(uid), slot_name);
}

/*
 * Mark a uid's stream to be brought in line with its tables by its next
 * call (functions/call.c): under the uid's lock, so that no call running
 * now writes over the mark, and with a new version, so that a pipeline
 * worker's kept operator is read again.  The function must be able to say
 * the net effect of changes it will not read one by one: keep-first by
 * arrival (a key in the tables not seen yet is a first row), to_changelog
 * with an image kept per key (the difference between images and rows).
 */
void
durable_resync(const char *uid)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	const char *function;
	char	   *options;
	bool		on_time;

	args[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT " UID_REGISTRY_COLUMNS " FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("uid \"%s\" has no state", uid),
				 errhint("ptf.state lists the uids of your roles.")));
	durable_check_owner(uid, DatumGetObjectId(ptf_spi_datum(Anum_uid_registry_owner)));
	if (ptf_spi_isnull(Anum_uid_registry_slot_name))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("uid \"%s\" reads no change stream", uid),
				 errdetail("Only a stream can be brought in line with its tables.")));
	function = ptf_spi_text(Anum_uid_registry_function);
	options = ptf_spi_text(Anum_uid_registry_options);
	on_time = !ptf_spi_isnull(Anum_uid_registry_on_time);
	if (!can_resync(function, on_time, options))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the stream of uid \"%s\" (%s) cannot be brought in line with its tables",
						uid, function),
				 errdetail("Only keep-first by arrival, and to_changelog keeping an image per key, can say the net effect of changes they do not read one by one."),
				 errhint("ptf.drop_state('%s') forgets the uid; a first call with snapshot => true starts it again from the tables' rows.",
						 uid)));
	(void) ptf_lock(PTF_LOCK_UID, ptf_lock_id_of_name(uid), ExclusiveLock, false, true);
	mark_resync(args[0], NULL);
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

/* ---- ptf.drop_state ---- */

static bool
is_state_table(Oid relid)
{
	char	   *name = get_rel_name(relid);

	return name != NULL && strncmp(name, "state_", 6) == 0 &&
		get_rel_namespace(relid) == get_namespace_oid("ptf", false) &&
		get_rel_relkind(relid) == RELKIND_RELATION;
}

bool
durable_drop(const char *uid, bool of_pipeline, char **slot_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	Oid			relid = InvalidOid;

	*slot_name = NULL;
	values[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT r.owner, r.state_table, r.slot_name, " PIPELINE_OF_UID
						  " FROM ptf.uid_registry r WHERE r.uid OPERATOR(pg_catalog.=) $1 FOR UPDATE",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	durable_check_owner(uid, DatumGetObjectId(ptf_spi_datum(1)));
	/* a pipeline's stream would silently start over */
	if (!of_pipeline)
		durable_refuse_pipeline_uid(uid, ptf_spi_text(4));
	*slot_name = ptf_spi_text(3);
	if (!ptf_spi_isnull(2))
		relid = DatumGetObjectId(ptf_spi_datum(2));

	/* drop only what is still our state table: the OID may be reused */
	if (OidIsValid(relid) && is_state_table(relid))
		ptf_spi_exec_as_owner(psprintf("DROP TABLE %s", ptf_relation_sql_name(relid)),
							  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("DELETE FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_DELETE);
	return true;
}
