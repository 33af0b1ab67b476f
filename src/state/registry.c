/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The uid registry: which uids exist, what each was made for, who
 *	  may use it, one call of it at a time, and what a call carried over.
 *
 * The registry is ordinary SQL through SPI, run as the extension's owner
 * (the caller has no rights on ptf.uid_registry: durable state is read
 * and written only through our functions).  Calls of one uid serialize on
 * a transaction-level lock of the extension's own (which no SQL function
 * can take), and what one committed is what the next one loads; callers
 * other than pipeline workers also lock the registry row FOR UPDATE, so
 * that a call under REPEATABLE READ that waited fails rather than use the
 * state it saw before.  A uid reused with other arguments (function, row
 * types, keys, time column, options) is refused, never silently read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/xid8.h"

#include "catalog.h"
#include "state/durable_internal.h"

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
char *
durable_row_types_fingerprint(const DurableIdentity *id)
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
		return psprintf("OID %u, a type that no longer exists (its table was dropped?)",
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
			 errhint("Use another uid, or forget this one's state with ptf.drop_state('%s') (a pipeline's: ptf.drop_pipeline()).",
					 uid)));
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

void
durable_leave_uid(const char *uid)
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

void
durable_note_xid_writer(DurableState *ds)
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

void
durable_set_layout(DurableState *ds, const DurableIdentity *id)
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

/*
 * The call is of the uid's state; true when its key columns have other
 * names than the registry's, and the call names its keys by number
 * (keys_by_number): renamed since.
 */
static bool
check_identity(const DurableIdentity *id, DurableState *ds, Datum call_keys)
{
	bool		renamed = false;
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
	{
		char	   *options = ptf_spi_text(Anum_uid_registry_options);

		/* renamed when the keys' numbers (in the options) are the same */
		if (!id->keys_by_number || options == NULL || id->options == NULL ||
			strcmp(options, id->options) != 0)
			identity_mismatch(id->uid, "partition_by", s, text_array_to_string(call_keys));
		renamed = true;
	}
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
				 errhint("Use another uid, or forget this one's state with ptf.drop_state('%s') (a pipeline's: ptf.drop_pipeline()).",
						 id->uid)));
	return renamed;
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

/* The owners before REASSIGN OWNED, and the transactions that handed the stream over. */
static void
read_handovers(DurableProgress *progress)
{
	Datum	   *roles;
	Datum	   *xids;
	bool	   *nulls;
	int			nroles;
	int			nxids;
	int			i;

	progress->nhandovers = 0;
	if (ptf_spi_isnull(Anum_uid_registry_handover_roles) ||
		ptf_spi_isnull(Anum_uid_registry_handover_xids))
		return;
	deconstruct_array(DatumGetArrayTypeP(ptf_spi_datum(Anum_uid_registry_handover_roles)),
					  OIDOID, sizeof(Oid), true, TYPALIGN_INT, &roles, &nulls, &nroles);
	deconstruct_array(DatumGetArrayTypeP(ptf_spi_datum(Anum_uid_registry_handover_xids)),
					  XID8OID, sizeof(FullTransactionId), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &xids, &nulls, &nxids);
	if (nroles != nxids)
		ptf_state_corrupted("%d owners handed over, but %d transactions that did", nroles, nxids);
	progress->nhandovers = nroles;
	progress->handover_roles = palloc(sizeof(Oid) * Max(nroles, 1));
	progress->handover_xids = palloc(sizeof(TransactionId) * Max(nroles, 1));
	for (i = 0; i < nroles; i++)
	{
		progress->handover_roles[i] = DatumGetObjectId(roles[i]);
		progress->handover_xids[i] = XidFromFullTransactionId(DatumGetFullTransactionId(xids[i]));
	}
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
	read_handovers(progress);
	progress->skip_lsn = ptf_spi_isnull(Anum_uid_registry_skip_lsn) ? InvalidXLogRecPtr :
		DatumGetLSN(ptf_spi_datum(Anum_uid_registry_skip_lsn));
	/* a position written by this very transaction may yet roll back */
	progress->last_lsn_committed =
		!TransactionIdIsCurrentTransactionId(DatumGetTransactionId(ptf_spi_datum(Anum_uid_registry_xmin)));
}


void
durable_set_state_table(const char *uid, Oid relid, const char *row_types)
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
	char	   *row_types = durable_row_types_fingerprint(id);
	char	   *stored_types;
	bool		layout_1;
	bool		keys_renamed;
	int			i;

	Assert(id->ninputs >= 1 && id->ninputs <= DURABLE_MAX_INPUTS);
	ds->cxt = CurrentMemoryContext;
	ds->uid = pstrdup(id->uid);
	ds->had_xid = TransactionIdIsValid(GetTopTransactionIdIfAny());
	ds->row_types = row_types;
	ds->time_type = OidIsValid(id->time_type) ? id->time_type : TIMESTAMPTZOID;
	durable_set_layout(ds, id);

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

	/* an owner check before taking the lock (ptf_lock_uid): no waiting on others' uids */
	ptf_spi_exec_as_owner("SELECT r.owner, " PIPELINE_OF_UID " FROM ptf.uid_registry r "
						  "WHERE r.uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	exists = (SPI_processed == 1);
	if (exists)
	{
		durable_check_owner(id->uid, DatumGetObjectId(ptf_spi_datum(1)));
		/* the worker's alone: a call from elsewhere would take its changes */
		if (!id->pipeline_step)
			durable_refuse_pipeline_uid(id->uid, ptf_spi_text(2));
	}

	/*
	 * Calls of one uid serialize on a lock that writes nothing: a pipeline
	 * step that finds no changes leaves no WAL behind.  Other callers also
	 * lock the row, so that under REPEATABLE READ a call that waited fails
	 * rather than work on the state it saw before.
	 */
	(void) ptf_lock_uid(id->uid, ExclusiveLock, false, true);
	if (!exists)
		ptf_spi_exec_as_owner("INSERT INTO ptf.uid_registry "
							  "(uid, function, owner, row_type, key_columns, on_time, time_type, "
							  "slot_name, options, layout, row_types, input_tables) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) "
							  "ON CONFLICT (uid) DO NOTHING",
							  12, argtypes, values, nulls, SPI_OK_INSERT);

	ptf_spi_exec_as_owner(id->pipeline_step ?
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

	keys_renamed = check_identity(id, ds, call_keys);
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
		ds->state_relid = durable_create_state_table(id, ds);
		durable_set_state_table(id->uid, ds->state_relid, row_types);
	}
	else
	{
		ds->state_relid = DatumGetObjectId(ptf_spi_datum(Anum_uid_registry_state_table));
		if (layout_1)
			durable_convert_layout_1(id, ds, ds->state_relid);
	}
	durable_check_state_table(id, ds);
	durable_note_xid_writer(ds);
	if (keys_renamed)
	{
		/* ptf.state shows the keys by their names now */
		values[4] = call_keys;
		ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET key_columns = $5 "
							  "WHERE uid OPERATOR(pg_catalog.=) $1",
							  5, argtypes, values, NULL, SPI_OK_UPDATE);
	}
	return ds;
}

void
durable_stamp(DurableState *ds, DurableStamp *stamp)
{
	stamp->relid = ds->state_relid;
	stamp->filenode = ds->state_filenode;
	/* an images table is written with its main state, under its version */
	stamp->version = ds->main != NULL ? ds->main->version : ds->version;
}

bool
durable_must_write(DurableState *ds)
{
	return ds->must_write;
}

void
durable_close(DurableState *ds)
{
	if (ds->images != NULL)
		durable_release_snapshot(ds->images);
	durable_release_snapshot(ds);
	Assert(!ds->must_write);
	durable_leave_uid(ds->uid);
}

void
durable_write_progress(DurableState *ds, KeyedState *ks, const DurableProgress *progress)
{
	Datum		values[15];
	char		nulls[15];
	Oid			argtypes[15] = {TEXTOID, INT8OID, INT8OID, LSNOID, INT8OID,
		INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID, TEXTOID, TEXTOID, OIDARRAYOID, INT4OID,
	BOOLOID};
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
	/* the handovers the stream passed go (the uid's lock keeps REASSIGN out meanwhile) */
	values[13] = Int32GetDatum(progress->handovers_passed);
	/* ptf.skip_transaction's request goes once the stream got there */
	values[14] = BoolGetDatum(progress->skip_passed);
	ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET max_event_time = $2, watermark = $3, "
						  "last_lsn = $4, keys = $5, rows_in = $6, rows_out = $7, "
						  "rows_late = $8, rows_skipped = $9, input_times = $10, "
						  "row_types = $11, stream_snapshot = $12, input_tables = $13, "
						  "handover_roles = CASE WHEN $14 OPERATOR(pg_catalog.<) "
						  "  pg_catalog.cardinality(handover_roles) "
						  "  THEN handover_roles[$14 OPERATOR(pg_catalog.+) 1:] END, "
						  "handover_xids = CASE WHEN $14 OPERATOR(pg_catalog.<) "
						  "  pg_catalog.cardinality(handover_xids) "
						  "  THEN handover_xids[$14 OPERATOR(pg_catalog.+) 1:] END, "
						  "skip_lsn = CASE WHEN NOT $15 THEN skip_lsn END, "
						  "version = pg_catalog.nextval('ptf.state_version_seq'), "
						  "updated_at = pg_catalog.clock_timestamp() "
						  "WHERE uid OPERATOR(pg_catalog.=) $1 RETURNING version",
						  15, argtypes, values, nulls, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 1)
		ds->version = ptf_spi_int64(1, 0);
}

/* Write back the changed keys and namespaces, delete the removed ones. */
/*
 * The registry row of a uid of the caller's that reads a change stream, as
 * the current SPI result; why only a stream, in the error otherwise.
 */
static void
read_own_stream(const char *uid, const char *only_a_stream)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(uid)};

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
				 errdetail("%s", only_a_stream)));
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
	/* on a new slot no change before it is read, and xids may be another cluster's */
						  "handover_roles = CASE WHEN $2 IS NULL THEN handover_roles END, "
						  "handover_xids = CASE WHEN $2 IS NULL THEN handover_xids END, "
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
/* set by another room (src/citus/), see durable.h */
ptf_stream_lost_hook_type ptf_stream_lost_hook = NULL;

bool
durable_stream_can_restart(const char *uid)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	/* another room's refusal (Citus: a shard group's stream, src/citus/fence.c) */
	if (ptf_stream_lost_hook)
		ptf_stream_lost_hook(uid);
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
 * call (engine/call.c): under the uid's lock, so that no call running
 * now writes over the mark, and with a new version, so that a pipeline
 * worker's kept operator is read again.  The function must be able to say
 * the net effect of changes it will not read one by one: keep-first by
 * arrival (a key in the tables not seen yet is a first row), to_changelog
 * with an image kept per key (the difference between images and rows).
 */
void
durable_resync(const char *uid)
{
	const char *function;
	char	   *options;
	bool		on_time;

	read_own_stream(uid, "Only a stream can be brought in line with its tables.");
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
	(void) ptf_lock_uid(uid, ExclusiveLock, false, true);
	mark_resync(CStringGetTextDatum(uid), NULL);
}

/* ---- ptf.skip_transaction ---- */

void
durable_skip_transaction(const char *uid, XLogRecPtr final_lsn)
{
	Oid			argtypes[2] = {TEXTOID, LSNOID};
	Datum		args[2];
	XLogRecPtr	last_lsn = InvalidXLogRecPtr;

	args[0] = CStringGetTextDatum(uid);
	args[1] = LSNGetDatum(final_lsn);
	/* calls of the uid (a pipeline's step) finish first, later ones see the request */
	(void) ptf_lock_uid(uid, ExclusiveLock, false, true);
	read_own_stream(uid, "Only a stream has transactions to pass over.");
	/* its position; with nothing read yet, where its slot starts */
	ptf_spi_exec_as_owner("SELECT COALESCE(r.last_lsn, s.confirmed_flush_lsn) "
						  "FROM ptf.uid_registry r LEFT JOIN pg_catalog.pg_replication_slots s "
						  "ON s.slot_name OPERATOR(pg_catalog.=) r.slot_name::pg_catalog.name "
						  "WHERE r.uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1 && !ptf_spi_isnull(1))
		last_lsn = DatumGetLSN(ptf_spi_datum(1));
	/* the stream's position is the end of the last transaction read: past its commit record */
	if (final_lsn < last_lsn)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the stream of uid \"%s\" has read past %X/%X already", uid,
						LSN_FORMAT_ARGS(final_lsn)),
				 errdetail("Its position is %X/%X.", LSN_FORMAT_ARGS(last_lsn)),
				 errhint("Give the LSN the CONTEXT of the error that stopped the stream names (\"finished at\").")));
	ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET skip_lsn = $2, "
						  "version = pg_catalog.nextval('ptf.state_version_seq'), "
						  "updated_at = pg_catalog.clock_timestamp() "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  2, argtypes, args, NULL, SPI_OK_UPDATE);
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
	{
		durable_drop_images_table(relid);
		ptf_spi_exec_as_owner(psprintf("DROP TABLE %s", ptf_relation_sql_name(relid)),
							  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	}
	ptf_spi_exec_as_owner("DELETE FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_DELETE);
	return true;
}

