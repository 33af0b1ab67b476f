/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  Durable keyed state: the uid registry and the per-uid state tables.
 *
 * The registry is ordinary SQL through SPI, run as the extension's owner
 * (the caller has no rights on ptf.uid_registry: durable state is read
 * and written only through our functions, DESIGN 5).  Calls of one uid
 * serialize on a transaction-level advisory lock, and what one committed
 * is what the next one loads; callers other than pipeline workers also
 * lock the registry row FOR UPDATE, so that a call under REPEATABLE READ
 * that waited fails rather than use the state it saw before.
 *
 * The keys themselves are read and written with the heap AM directly:
 * loading is one sequential scan, writing back is a multi-insert of new
 * keys plus updates and deletes by TID of changed and removed ones (each
 * record remembers the TID it was loaded from).  State tables have no
 * index, so there is nothing else to maintain; the uid's lock keeps
 * everybody else's hands off the table while TIDs are in use (a pipeline
 * worker keeps them between its steps, see functions/call.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "parser/parse_type.h"
#include "utils/ruleutils.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "frame.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "state/durable.h"

#define INSERT_BATCH 1000

struct DurableState
{
	char	   *uid;
	Oid			state_relid;
	int64		version;		/* the registry's, changed by every write */
	Oid			state_filenode; /* the state table's storage, for TIDs */
	int			nkeys;
	Oid			time_type;		/* of the event_time column */
	bool		keeps_images;
	TupleDesc	rowdesc;
	/* state table layout: keys 1..nkeys, then these */
	AttrNumber	att_expires;
	AttrNumber	att_event_time;
	AttrNumber	att_seq;
	AttrNumber	att_image;		/* 0: none */
};

/* ---- the registry ---- */

static Datum
key_names_array(const DurableIdentity *id)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(id->keys->ncols, 1));
	int			i;

	for (i = 0; i < id->keys->ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(id->rowdesc,
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

static char *
get_text(HeapTuple tup, TupleDesc desc, int col, bool *isnull)
{
	Datum		d = SPI_getbinval(tup, desc, col, isnull);

	return *isnull ? NULL : TextDatumGetCString(d);
}

static int64
get_int64(HeapTuple tup, TupleDesc desc, int col, int64 if_null)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? if_null : DatumGetInt64(d);
}

static Oid
create_state_table(const DurableIdentity *id, DurableState *ds)
{
	StringInfoData sql;
	int64		n;
	char	   *relname;
	int			i;
	Oid			relid;
	static const char *const state_cols[] = {"expires_at", "event_time", "seq", "image"};

	ptf_spi_exec_as_owner("SELECT pg_catalog.nextval('ptf.state_table_seq')",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	n = get_int64(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, 0);
	relname = psprintf("state_%lld", (long long) n);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE ptf.%s (", relname);
	for (i = 0; i < id->keys->ncols; i++)
	{
		Form_pg_attribute att = TupleDescAttr(id->rowdesc,
											  id->keys->cols[i].attno - 1);
		const char *name = NameStr(att->attname);
		int			j;

		for (j = 0; j < (int) lengthof(state_cols); j++)
			if (strcmp(name, state_cols[j]) == 0)
				name = psprintf("key_%s", name);
		appendStringInfo(&sql, "%s %s", quote_identifier(name),
						 format_type_extended(att->atttypid, att->atttypmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN |
											  FORMAT_TYPE_FORCE_QUALIFY));
		/* the key's collation decides its equality: keep it visible and checked */
		if (OidIsValid(att->attcollation))
			appendStringInfo(&sql, " COLLATE %s",
							 generate_collation_name(att->attcollation));
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfo(&sql, "expires_at pg_catalog.timestamptz, event_time %s, seq pg_catalog.int8",
					 format_type_extended(ds->time_type, -1, FORMAT_TYPE_FORCE_QUALIFY));
	if (id->keeps_images)
		appendStringInfo(&sql, ", image %s",
						 format_type_extended(id->rowdesc->tdtypeid, -1,
											  FORMAT_TYPE_FORCE_QUALIFY));
	/* explicit: the caller's default_tablespace must not choose for the owner */
	appendStringInfoString(&sql, ") USING heap TABLESPACE pg_default");
	ptf_spi_exec_as_owner(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);

	ptf_spi_exec_as_owner(psprintf("COMMENT ON TABLE ptf.%s IS %s", relname,
								   quote_literal_cstr(psprintf("keyed state of uid %s",
															   id->uid))),
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);

	relid = get_relname_relid(relname, get_namespace_oid("ptf", false));
	if (!OidIsValid(relid))
		elog(ERROR, "state table ptf.%s was not created", relname);
	return relid;
}

/* The state table must still have the key columns the keys need. */
static void
check_state_table(const DurableIdentity *id, DurableState *ds)
{
	Relation	rel = table_open(ds->state_relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	/* rows are found by TID: a rewritten table (VACUUM FULL) has others */
	ds->state_filenode = rel->rd_node.relNode;
	if (desc->natts != ds->nkeys + 3 + (ds->keeps_images ? 1 : 0))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("state table %s of uid \"%s\" has been altered",
						RelationGetRelationName(rel), id->uid),
				 errhint("Forget the state with ptf.drop_state('%s').", id->uid)));
	for (i = 0; i < ds->nkeys; i++)
	{
		Form_pg_attribute satt = TupleDescAttr(desc, i);
		Form_pg_attribute ratt = TupleDescAttr(id->rowdesc,
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
	ds->time_type = TupleDescAttr(desc, ds->att_event_time - 1)->atttypid;
	table_close(rel, NoLock);
}

/*
 * A uid is in use from durable_open to durable_commit.  Calls of one uid
 * serialize on its registry row, but not within one transaction: a call
 * whose input query calls the same uid would load the keys before the
 * inner call wrote them, and both would write them back.  So re-entry is
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

/* the pipeline whose state a uid is, as a column of a query over uid_registry r */
#define PIPELINE_OF_UID \
	"(SELECT p.name FROM ptf.pipeline_registry p WHERE p.uid OPERATOR(pg_catalog.=) r.uid)"

/* A pipeline's uid is read and dropped by the pipeline only. */
static void
refuse_pipeline_uid(const char *uid, const char *pipeline)
{
	if (pipeline != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("uid \"%s\" is the state of pipeline \"%s\"", uid, pipeline),
				 errdetail("Its changes are read by the pipeline worker, into the pipeline's sink."),
				 errhint("ptf.drop_pipeline() drops the pipeline with its state.")));
}

static void
check_owner(const char *uid, Oid owner)
{
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for the state of uid \"%s\"", uid),
				 errdetail("The state belongs to role %s.",
						   GetUserNameFromId(owner, false))));
}

/*
 * Durable state holds rows of its source (pending candidates, images):
 * using it needs the right to read that table now, not only when the
 * state was made.
 */
static void
check_source_privilege(const DurableIdentity *id)
{
	Oid			relid = typeidTypeRelid(id->rowdesc->tdtypeid);

	if (!OidIsValid(relid) || get_rel_relkind(relid) == RELKIND_COMPOSITE_TYPE)
		return;
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ALL) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

DurableState *
durable_open(const DurableIdentity *id, DurableProgress *progress)
{
	DurableState *ds = palloc0(sizeof(DurableState));
	Oid			caller = GetUserId();
	Oid			argtypes[9] = {TEXTOID, TEXTOID, OIDOID, OIDOID, TEXTARRAYOID, TEXTOID, OIDOID, TEXTOID, TEXTOID};
	Datum		values[9];
	char		nulls[9] = "         ";
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char	   *s;
	Oid			owner;
	Oid			row_type;
	bool		exists;
	Datum		stored_keys;
	Datum		call_keys = key_names_array(id);

	ds->uid = pstrdup(id->uid);
	ds->nkeys = id->keys->ncols;
	ds->keeps_images = id->keeps_images;
	ds->rowdesc = id->rowdesc;
	ds->time_type = OidIsValid(id->time_type) ? id->time_type : TIMESTAMPTZOID;
	ds->att_expires = ds->nkeys + 1;
	ds->att_event_time = ds->nkeys + 2;
	ds->att_seq = ds->nkeys + 3;
	ds->att_image = id->keeps_images ? ds->nkeys + 4 : 0;

	values[0] = CStringGetTextDatum(id->uid);
	values[1] = CStringGetTextDatum(id->function);
	values[2] = ObjectIdGetDatum(caller);
	values[3] = ObjectIdGetDatum(id->rowdesc->tdtypeid);
	values[4] = call_keys;
	values[5] = id->on_time ? CStringGetTextDatum(id->on_time) : (Datum) 0;
	nulls[5] = id->on_time ? ' ' : 'n';
	values[6] = ObjectIdGetDatum(ds->time_type);
	values[7] = id->slot_name ? CStringGetTextDatum(id->slot_name) : (Datum) 0;
	nulls[7] = id->slot_name ? ' ' : 'n';
	values[8] = id->options ? CStringGetTextDatum(id->options) : (Datum) 0;
	nulls[8] = id->options ? ' ' : 'n';

	check_source_privilege(id);
	enter_uid(id->uid);

	/* an owner check before taking the row lock: no waiting on others' uids */
	ptf_spi_exec_as_owner("SELECT r.owner, " PIPELINE_OF_UID " FROM ptf.uid_registry r "
						  "WHERE r.uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	exists = (SPI_processed == 1);
	if (exists)
	{
		check_owner(id->uid, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc,
															1, &isnull)));
		/* the worker's alone: a call from elsewhere would take its changes */
		if (!ptf_in_pipeline_worker)
			refuse_pipeline_uid(id->uid, SPI_getvalue(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 2));
	}

	/*
	 * Calls of one uid serialize on an advisory lock, which writes nothing:
	 * a pipeline step that finds no changes leaves no WAL behind.  Other
	 * callers also lock the row, so that under REPEATABLE READ a call that
	 * waited fails rather than work on the state it saw before.
	 */
	ptf_spi_exec_as_owner("SELECT pg_catalog.pg_advisory_xact_lock(1347700273, pg_catalog.hashtext($1))",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	if (!exists)
		ptf_spi_exec_as_owner("INSERT INTO ptf.uid_registry "
							  "(uid, function, owner, row_type, key_columns, on_time, time_type, slot_name, options) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (uid) DO NOTHING",
							  9, argtypes, values, nulls, SPI_OK_INSERT);

	ptf_spi_exec_as_owner(ptf_in_pipeline_worker ?
						  "SELECT function, owner, row_type, key_columns, on_time, state_table, "
						  "max_event_time, watermark, last_lsn, rows_in, rows_out, rows_late, rows_skipped, "
						  "slot_name, xmin, options, version "
						  "FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1" :
						  "SELECT function, owner, row_type, key_columns, on_time, state_table, "
						  "max_event_time, watermark, last_lsn, rows_in, rows_out, rows_late, rows_skipped, "
						  "slot_name, xmin, options, version "
						  "FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1 FOR UPDATE",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the state of uid \"%s\" was dropped by a concurrent transaction",
						id->uid),
				 errhint("Try the call again.")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	owner = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
	check_owner(id->uid, owner);

	s = get_text(tup, desc, 1, &isnull);
	if (strcmp(s, id->function) != 0)
		identity_mismatch(id->uid, "function", s, id->function);
	row_type = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
	if (row_type != id->rowdesc->tdtypeid)
		identity_mismatch(id->uid, "row type", format_type_be(row_type),
						  format_type_be(id->rowdesc->tdtypeid));
	stored_keys = SPI_getbinval(tup, desc, 4, &isnull);
	if (strcmp(text_array_to_string(stored_keys), text_array_to_string(call_keys)) != 0)
		identity_mismatch(id->uid, "partition_by", text_array_to_string(stored_keys),
						  text_array_to_string(call_keys));
	s = get_text(tup, desc, 5, &isnull);
	if ((s == NULL) != (id->on_time == NULL) ||
		(s != NULL && strcmp(s, id->on_time) != 0))
		identity_mismatch(id->uid, "on_time", s ? quote_identifier(s) : "(none)",
						  id->on_time ? quote_identifier(id->on_time) : "(none)");

	ds->version = get_int64(tup, desc, 17, 0);
	progress->max_event_time = get_int64(tup, desc, 7, PTF_TIME_MIN);
	progress->watermark = get_int64(tup, desc, 8, PTF_TIME_MIN);
	{
		Datum		lsn = SPI_getbinval(tup, desc, 9, &isnull);

		progress->last_lsn = isnull ? InvalidXLogRecPtr : DatumGetLSN(lsn);
	}
	progress->rows_in = get_int64(tup, desc, 10, 0);
	progress->rows_out = get_int64(tup, desc, 11, 0);
	progress->rows_late = get_int64(tup, desc, 12, 0);
	progress->rows_skipped = get_int64(tup, desc, 13, 0);

	s = get_text(tup, desc, 14, &isnull);
	if ((s == NULL) != (id->slot_name == NULL))
		identity_mismatch(id->uid, "input",
						  s ? "a change stream" : "a relation or query",
						  id->slot_name ? "a change stream" : "a relation or query");
	s = get_text(tup, desc, 16, &isnull);
	if ((s == NULL) != (id->options == NULL) ||
		(s != NULL && strcmp(s, id->options) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("uid \"%s\" keeps another kind of state", id->uid),
				 errdetail("Its state is %s; this call needs %s.",
						   s ? s : "plain", id->options ? id->options : "plain"),
				 errhint("Use another uid, or forget this one's state with ptf.drop_state('%s').",
						 id->uid)));
	/* a position written by this very transaction may yet roll back */
	progress->last_lsn_committed =
		!TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(tup, desc, 15,
																				  &isnull)));

	ds->state_relid = DatumGetObjectId(SPI_getbinval(tup, desc, 6, &isnull));
	if (isnull)
	{
		Oid			argt[2] = {TEXTOID, OIDOID};
		Datum		args[2];

		ds->state_relid = create_state_table(id, ds);
		args[0] = values[0];
		args[1] = ObjectIdGetDatum(ds->state_relid);
		ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET state_table = $2 "
							  "WHERE uid OPERATOR(pg_catalog.=) $1",
							  2, argt, args, NULL, SPI_OK_UPDATE);
	}
	check_state_table(id, ds);
	return ds;
}

/* ---- loading and writing back keys ---- */

void
durable_load(DurableState *ds, KeyedState *ks, PtfOperator *op)
{
	Relation	rel = table_open(ds->state_relid, RowExclusiveLock);
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext,
												 "ptf state load",
												 ALLOCSET_DEFAULT_SIZES);
	bool		keep_expiry = keyed_state_ttl(ks) > 0;

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		MemoryContext old = MemoryContextSwitchTo(rowcxt);
		PtfStoredValue sv;
		StateRecord *rec;
		PtfTime		expires;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		/* without a TTL now, state is kept forever, whatever it was kept for */
		expires = (slot->tts_isnull[ds->att_expires - 1] || !keep_expiry) ? PTF_TIME_MAX :
			DatumGetInt64(slot->tts_values[ds->att_expires - 1]);
		rec = keyed_state_restore(ks, slot->tts_values, slot->tts_isnull,
								  expires, &slot->tts_tid);
		if (rec == NULL)
		{
			/* inline layout: a key and nothing else */
			MemoryContextSwitchTo(old);
			continue;
		}

		memset(&sv, 0, sizeof(sv));
		if (!slot->tts_isnull[ds->att_event_time - 1])
		{
			sv.has_time = true;
			sv.event_time = ptf_time_from_datum(slot->tts_values[ds->att_event_time - 1],
												ds->time_type);
		}
		if (!slot->tts_isnull[ds->att_seq - 1])
			sv.seq = DatumGetInt64(slot->tts_values[ds->att_seq - 1]);
		if (ds->att_image != 0 && !slot->tts_isnull[ds->att_image - 1])
		{
			HeapTupleHeader th = DatumGetHeapTupleHeader(slot->tts_values[ds->att_image - 1]);
			HeapTupleData htup;

			htup.t_len = HeapTupleHeaderGetDatumLength(th);
			ItemPointerSetInvalid(&htup.t_self);
			htup.t_tableOid = InvalidOid;
			htup.t_data = th;
			sv.has_image = true;
			sv.image = minimal_tuple_from_heap_tuple(&htup);
		}
		op->methods->restore_value(op, rec, &sv);

		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
	}

	keyed_state_clear_changes(ks);
	MemoryContextDelete(rowcxt);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
}

/* Fill the state-table columns of a record. */
static void
record_to_row(DurableState *ds, KeyedState *ks, PtfOperator *op,
			  StateRecord *rec, Datum *values, bool *nulls)
{
	PtfStoredValue sv;

	keyed_state_record_key(ks, rec, values, nulls);

	values[ds->att_expires - 1] = Int64GetDatum(rec->expires_at);
	nulls[ds->att_expires - 1] = (rec->expires_at == PTF_TIME_MAX);

	op->methods->save_value(op, rec, &sv);
	values[ds->att_event_time - 1] = ptf_time_to_datum(sv.event_time, ds->time_type);
	nulls[ds->att_event_time - 1] = !sv.has_time;
	values[ds->att_seq - 1] = Int64GetDatum(sv.seq);
	nulls[ds->att_seq - 1] = !sv.has_time;
	if (ds->att_image != 0)
	{
		nulls[ds->att_image - 1] = !sv.has_image;
		if (sv.has_image)
		{
			HeapTuple	htup = heap_tuple_from_minimal_tuple(sv.image);

			values[ds->att_image - 1] = heap_copy_tuple_as_datum(htup, ds->rowdesc);
		}
	}
}

static void
insert_batch(Relation rel, TupleTableSlot **slots, StateRecord **batch, int n,
			 CommandId cid, BulkInsertState bistate)
{
	int			i;

	if (n == 0)
		return;
	table_multi_insert(rel, slots, n, cid, 0, bistate);
	for (i = 0; i < n; i++)
	{
		batch[i]->tid = slots[i]->tts_tid;
		batch[i]->flags |= RECORD_STORED;
		ExecClearTuple(slots[i]);
	}
}

/* Inline state (keys without values, no TTL) only ever gains keys. */
static void
write_new_inline_keys(DurableState *ds, KeyedState *ks, Relation rel,
					  TupleTableSlot **slots, CommandId cid,
					  BulkInsertState bistate)
{
	Datum	   *keys;
	bool	   *nulls;
	int			n = keyed_state_new_inline_keys(ks, &keys, &nulls);
	int			natts = RelationGetDescr(rel)->natts;
	int			nbatch = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		TupleTableSlot *slot = slots[nbatch++];

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
			table_multi_insert(rel, slots, nbatch, cid, 0, bistate);
			while (nbatch > 0)
				ExecClearTuple(slots[--nbatch]);
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

void
durable_close(DurableState *ds)
{
	leave_uid(ds->uid);
}

void
durable_commit(DurableState *ds, KeyedState *ks, PtfOperator *op,
			   const DurableProgress *progress)
{
	Relation	rel = table_open(ds->state_relid, RowExclusiveLock);
	TupleDesc	desc = RelationGetDescr(rel);
	CommandId	cid = GetCurrentCommandId(true);
	BulkInsertState bistate = GetBulkInsertState();
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ptf state write",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;
	TupleTableSlot **slots = palloc(sizeof(TupleTableSlot *) * INSERT_BATCH);
	StateRecord **batch = palloc(sizeof(StateRecord *) * INSERT_BATCH);
	int			nbatch = 0;
	int			nupdated = 0;
	StateRecord **changed;
	ItemPointer dead;
	int			nchanged;
	int			ndead;
	int			i;
	Datum		values[10];
	char		nulls[10];
	Oid			argtypes[10] = {TEXTOID, INT8OID, INT8OID, LSNOID, INT8OID,
	INT8OID, INT8OID, INT8OID, INT8OID};

	for (i = 0; i < INSERT_BATCH; i++)
		slots[i] = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);

	dead = keyed_state_dead_tids(ks, &ndead);
	for (i = 0; i < ndead; i++)
		simple_heap_delete(rel, &dead[i]);

	if (keyed_state_is_inline(ks))
		write_new_inline_keys(ds, ks, rel, slots, cid, bistate);

	changed = keyed_state_changed(ks, &nchanged);
	old = MemoryContextSwitchTo(cxt);
	for (i = 0; i < nchanged; i++)
	{
		StateRecord *rec = changed[i];

		if (rec->flags & RECORD_REMOVED)
			continue;
		if (rec->flags & RECORD_STORED)
		{
			Datum	   *v = palloc(sizeof(Datum) * desc->natts);
			bool	   *n = palloc(sizeof(bool) * desc->natts);
			HeapTuple	tup;

			record_to_row(ds, ks, op, rec, v, n);
			tup = heap_form_tuple(desc, v, n);
			simple_heap_update(rel, &rec->tid, tup);
			rec->tid = tup->t_self;
			if (++nupdated % INSERT_BATCH == 0 && nbatch == 0)
				MemoryContextReset(cxt);
		}
		else
		{
			TupleTableSlot *slot = slots[nbatch];

			ExecClearTuple(slot);
			record_to_row(ds, ks, op, rec, slot->tts_values, slot->tts_isnull);
			ExecStoreVirtualTuple(slot);
			batch[nbatch++] = rec;
		}
		if (nbatch == INSERT_BATCH)
		{
			insert_batch(rel, slots, batch, nbatch, cid, bistate);
			nbatch = 0;
			MemoryContextReset(cxt);
		}
	}
	insert_batch(rel, slots, batch, nbatch, cid, bistate);
	MemoryContextSwitchTo(old);
	table_finish_bulk_insert(rel, 0);
	FreeBulkInsertState(bistate);
	for (i = 0; i < INSERT_BATCH; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	MemoryContextDelete(cxt);
	keyed_state_clear_changes(ks);
	table_close(rel, NoLock);

	/* make the writes visible to later commands of this transaction */
	CommandCounterIncrement();

	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(ds->uid);
	values[1] = Int64GetDatum(progress->max_event_time);
	nulls[1] = progress->max_event_time == PTF_TIME_MIN ? 'n' : ' ';
	values[2] = Int64GetDatum(progress->watermark);
	nulls[2] = progress->watermark == PTF_TIME_MIN ? 'n' : ' ';
	values[3] = LSNGetDatum(progress->last_lsn);
	nulls[3] = XLogRecPtrIsInvalid(progress->last_lsn) ? 'n' : ' ';
	values[4] = Int64GetDatum((int64) keyed_state_count(ks));
	values[5] = Int64GetDatum((int64) progress->rows_in);
	values[6] = Int64GetDatum((int64) progress->rows_out);
	values[7] = Int64GetDatum((int64) progress->rows_late);
	values[8] = Int64GetDatum((int64) progress->rows_skipped);
	ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET max_event_time = $2, watermark = $3, "
						  "last_lsn = $4, keys = $5, rows_in = $6, rows_out = $7, "
						  "rows_late = $8, rows_skipped = $9, "
						  "version = pg_catalog.nextval('ptf.state_version_seq'), "
						  "updated_at = pg_catalog.clock_timestamp() "
						  "WHERE uid OPERATOR(pg_catalog.=) $1 RETURNING version",
						  9, argtypes, values, nulls, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 1)
		ds->version = get_int64(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, 0);
	leave_uid(ds->uid);
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

/*
 * The slot of a change stream goes at once (slots are not transactional):
 * if the dropping transaction rolls back, the uid keeps its state but has
 * lost its stream, and its next call says so.
 */
bool
durable_drop(const char *uid, bool of_pipeline)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;
	bool		noslot;
	Datum		relid;
	Datum		slot;

	values[0] = CStringGetTextDatum(uid);
	ptf_spi_exec_as_owner("SELECT r.owner, r.state_table, r.slot_name, " PIPELINE_OF_UID
						  " FROM ptf.uid_registry r WHERE r.uid OPERATOR(pg_catalog.=) $1 FOR UPDATE",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	check_owner(uid, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 1, &isnull)));
	/* a pipeline's stream would silently start over */
	if (!of_pipeline)
		refuse_pipeline_uid(uid, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4));
	slot = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &noslot);
	relid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!noslot)
		slot = PointerGetDatum(TextDatumGetCString(slot));

	/* drop only what is still our state table: the OID may be reused */
	if (!isnull && is_state_table(DatumGetObjectId(relid)))
		ptf_spi_exec_as_owner(psprintf("DROP TABLE %s",
									   ptf_relation_sql_name(DatumGetObjectId(relid))),
							  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("DELETE FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_DELETE);
	if (!noslot)
		change_stream_drop_slot(DatumGetPointer(slot));
	return true;
}
