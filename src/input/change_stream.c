/*-------------------------------------------------------------------------
 *
 * change_stream.c
 *	  A table's changes read through logical decoding, in the calling
 *	  backend, handed to the frame as rows of kinds +I -U +U -D.
 *
 * The decoding loop is pg_logical_slot_peek_changes' (logicalfuncs.c),
 * with our own output plugin (decoding/plugin.c) in its in-process mode:
 * it gives us each change's heap tuples, which become slot contents with
 * no text in between.  Only the changes of the stream's tables are looked
 * at; a stream of several tables (a temporal join's two sides) hands each
 * table's changes to its own sink, in commit order.
 *
 * Exactly once: a transaction is read whole or not at all; the position
 * stored with the uid's state is the end LSN of the last transaction
 * read; transactions ending at or before the stored position are skipped;
 * the slot is confirmed only up to a position known to be committed (at
 * the start of the next call), so it never passes the stored progress,
 * and a call rolled back leaves the next one to read the same changes.
 *
 * Kinds: INSERT is +I; UPDATE is -U (the old image, when logged) then +U;
 * DELETE is -D.  Under REPLICA IDENTITY FULL old images are whole rows;
 * under DEFAULT an old image has only the key columns (marked partial) and
 * an UPDATE that keeps its key logs none.  Unchanged TOASTed values of an
 * UPDATE's new image are not in the WAL: under FULL they are taken from the
 * old image; otherwise the row is marked incomplete, and whoever would emit
 * or keep it must complete it from state or fail (never a placeholder).
 *
 * Rights: the reader must be able to read every row of a table when the
 * stream starts, and again as of each change read (the historic catalog
 * decoding replays), as the output plugin asks: a change made while the
 * reader could not read its table ends the stream there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/detoast.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "base/kept.h"
#include "catalog.h"
#include "decoding/plugin.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "state/durable.h"
#include "utils/guc.h"

int			ptf_max_changes_per_call = 1000000;
int			ptf_max_streams_per_role = 8;
ChangeStreamReport change_stream_last_report;
bool		change_stream_start_only = false;

/* A table of the stream, while it is read. */
typedef struct StreamTable
{
	ChangeStreamTable t;
	TupleDesc	checked_desc;	/* the historic descriptor last found compatible */
	bool		rights_checked; /* the reader's rights, as of the changes read */
	TupleTableSlot *old_slot;
	TupleTableSlot *new_slot;
} StreamTable;

struct PtfChangeStream
{
	char	   *slot_name;
	int			ntables;
	StreamTable *tables;

	/* set by change_stream_run */
	XLogRecPtr	resume_after;
	XLogRecPtr	position;		/* end of the last transaction read */
	uint64		rows;
	uint64		skipped;		/* truncations passed over */
	bool		stop;
	TimestampTz last_commit_time;
	bool		txn_handed_over;	/* the transaction being read gave rows */
	XLogRecPtr	last_productive;	/* end of the last transaction that did */

	/* the transaction being read */
	bool		skip_txn;
	bool		in_snapshot;	/* skipped: the initial snapshot had it */
	PtfRowMeta	meta;

	/* the initial snapshot read (change_stream_skip_snapshot), if any */
	bool		has_snapshot;
	TransactionId snap_xmin;
	TransactionId snap_xmax;
	int			snap_nxip;
	TransactionId *snap_xip;

	ResourceOwner outer_owner;	/* the caller's, not decoding's subtransaction's */
	MemoryContext outer_cxt;
	MemoryContext rowcxt;
};

/* ---- the uid's slot ---- */

/* Slots are per cluster: the name carries the database and a digest of the uid. */
static char *
slot_name_for(const char *uid)
{
	char		hex[33];
	const char *err;

	if (!pg_md5_hash(uid, strlen(uid), hex, &err))
		elog(ERROR, "could not compute a slot name: %s", err);
	hex[20] = '\0';
	return psprintf("ptf_%u_%s", MyDatabaseId, hex);
}

/* a uid restored from another database's dump must not drop that one's slot */
static bool
slot_exists_here(const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	ptf_spi_exec_as_owner("SELECT 1 FROM pg_catalog.pg_replication_slots "
						  "WHERE slot_name OPERATOR(pg_catalog.=) $1::pg_catalog.name "
						  "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database()",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	return SPI_processed > 0;
}

/* ---- decoding contexts kept between calls (pipeline workers) ---- */

/*
 * A pipeline worker reads its streams a step at a time.  Creating a
 * decoding context reads the WAL again from the slot's restart_lsn, which
 * may lag many seconds behind; so the worker keeps each stream's context
 * between steps and goes on reading where it stopped -- as long as no
 * transaction it handed over since was lost with a rolled-back step, and
 * nobody else moved the slot.
 */
typedef struct KeptDecoder
{
	LogicalDecodingContext *ctx;
	ReplicationSlot *slot;
	XLogRecPtr	last_productive;	/* transactions up to here gave rows */
	XLogRecPtr	confirmed;		/* the slot's confirmed_flush, as we left it */
} KeptDecoder;

/* its WAL segment file is the reader's own descriptor */
static void
release_decoder(PtfKept *k)
{
	KeptDecoder *kd = (KeptDecoder *) k->data;

	if (kd != NULL && kd->ctx != NULL && kd->ctx->reader->seg.ws_file >= 0)
		wal_segment_close(kd->ctx->reader);
}

static KeptDecoder *
kept_decoder(PtfKept *k)
{
	return (KeptDecoder *) k->data;
}

/*
 * The kept context for the slot just acquired, if it can go on from
 * resume_after; one that cannot is let go.
 */
static PtfKept *
usable_kept(const char *slot_name, XLogRecPtr resume_after)
{
	PtfKept    *k = ptf_kept_find(PTF_KEPT_DECODER, slot_name);
	KeptDecoder *kd;

	if (k == NULL)
		return NULL;
	kd = kept_decoder(k);
	if (kd->ctx != NULL && kd->slot == MyReplicationSlot &&
		kd->confirmed == MyReplicationSlot->data.confirmed_flush &&
		kd->last_productive <= resume_after)
		return k;
	ptf_kept_forget(k);
	return NULL;
}

/* Does the reorder buffer hold transactions spilled to disk? */
static bool
has_spilled(ReorderBuffer *rb)
{
	dlist_iter	iter;

	dlist_foreach(iter, &rb->toplevel_by_lsn)
	{
		ReorderBufferTXN *txn = dlist_container(ReorderBufferTXN, node, iter.cur);

		if (rbtxn_is_serialized(txn))
			return true;
	}
	return false;
}

static PtfKept *
new_kept(const char *slot_name)
{
	PtfKept    *k = ptf_kept_new(PTF_KEPT_DECODER, slot_name);

	if (k == NULL)
		return NULL;
	k->data = MemoryContextAllocZero(k->cxt, sizeof(KeptDecoder));
	k->release = release_decoder;
	return k;
}

void
change_stream_confirm(const char *slot_name, XLogRecPtr lsn)
{
	ReplicationSlotAcquire(slot_name, true);
	PG_TRY();
	{
		PtfKept    *k = ptf_kept_find(PTF_KEPT_DECODER, slot_name);

		if (MyReplicationSlot->data.confirmed_flush < lsn)
		{
			LogicalConfirmReceivedLocation(lsn);
			ReplicationSlotMarkDirty();
		}
		if (k != NULL && kept_decoder(k)->slot == MyReplicationSlot)
			kept_decoder(k)->confirmed = MyReplicationSlot->data.confirmed_flush;
	}
	PG_FINALLY();
	{
		ReplicationSlotRelease();
	}
	PG_END_TRY();
}

void
change_stream_drop_slot(const char *slot_name)
{
	/* waits for a pipeline worker that holds it for a moment */
	if (slot_exists_here(slot_name))
		ReplicationSlotDrop(slot_name, false);
}

/*
 * Slots made by first calls of uids in the current transaction, and slots
 * of streams the transaction dropped.  A slot is not transactional: when
 * the transaction (or the subtransaction that made it) rolls back, the
 * uid's registry row goes, and a new slot would stay behind holding WAL
 * for a uid that does not exist; so it is dropped then.  A slot of a
 * stream dropped with DROP OWNED or DROP EXTENSION goes only once the drop
 * has committed: a drop that fails or rolls back must leave the streams
 * whole.
 */
typedef struct NewSlot
{
	char		name[NAMEDATALEN];
	SubTransactionId subid;
	bool		at_commit;		/* a dropped stream's, not a new one */
} NewSlot;

static List *new_slots = NIL;	/* of NewSlot, in TopMemoryContext */
static bool new_slot_callbacks = false;

/*
 * Drop a slot quietly, at abort or after commit: the transaction's end
 * must go on whatever happens.  false if it is in use.
 */
static bool
drop_slot_quietly(const char *name)
{
	MemoryContext cxt = CurrentMemoryContext;
	ReplicationSlot *slot;
	bool		idle;
	volatile bool dropped = false;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(name, false);
	idle = (slot != NULL && slot->active_pid == 0);
	LWLockRelease(ReplicationSlotControlLock);
	if (slot == NULL)
		return true;
	if (!idle || MyReplicationSlot != NULL)
		return false;
	PG_TRY();
	{
		ReplicationSlotDrop(name, true);
		dropped = true;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		/* what the failed drop held; the transaction released everything else before */
		LWLockReleaseAll();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
	}
	PG_END_TRY();
	return dropped;
}

/*
 * A dropped stream's slot, after the commit.  Our locks keep pipeline
 * steps and calls of the stream away, but a worker may still be moving
 * the slot after a step it committed just before: that takes moments, so
 * wait for it a little (interrupts are held here; no cancel can come).
 */
static void
drop_dropped_slot(const char *name)
{
	int			i;

	for (i = 0; i < 500; i++)
	{
		if (drop_slot_quietly(name))
			return;
		pg_usleep(10000L);
	}
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("replication slot %s of a dropped change stream is in use, and was left behind",
					name),
			 errhint("Drop it with pg_drop_replication_slot('%s') once it is free.", name)));
}

static void
new_slots_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (new_slots == NIL)
		return;
	/* a prepared transaction may roll back anywhere, later: nobody would drop its slot */
	if (event == XACT_EVENT_PRE_PREPARE)
	{
		foreach(lc, new_slots)
		{
			if (((NewSlot *) lfirst(lc))->at_commit)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that dropped a change stream"),
						 errdetail("The stream's replication slot is not transactional."),
						 errhint("Drop the stream in a transaction that is not prepared.")));
		}
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that started a change stream"),
				 errdetail("The stream's replication slot is not transactional."),
				 errhint("Make the uid's first call in a transaction of its own.")));
	}
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT)
		foreach(lc, new_slots)
		{
			NewSlot    *ns = lfirst(lc);

			if (event == XACT_EVENT_ABORT && !ns->at_commit)
				(void) drop_slot_quietly(ns->name);
			else if (event == XACT_EVENT_COMMIT && ns->at_commit)
				drop_dropped_slot(ns->name);
		}
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PREPARE)
	{
		list_free_deep(new_slots);
		new_slots = NIL;
	}
}

static void
new_slots_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	foreach(lc, new_slots)
	{
		NewSlot    *ns = lfirst(lc);

		if (ns->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			ns->subid = parentSubid;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			if (!ns->at_commit)
				(void) drop_slot_quietly(ns->name);
			new_slots = foreach_delete_current(new_slots, lc);
			pfree(ns);
		}
	}
}

static void
remember_slot(const char *name, bool at_commit)
{
	NewSlot    *ns;
	MemoryContext old;
	ListCell   *lc;

	/* a stream dropped and started again in one transaction keeps its new slot */
	foreach(lc, new_slots)
	{
		NewSlot    *other = lfirst(lc);

		if (!at_commit && other->at_commit && strcmp(other->name, name) == 0)
		{
			new_slots = foreach_delete_current(new_slots, lc);
			pfree(other);
		}
	}
	ns = MemoryContextAllocZero(TopMemoryContext, sizeof(NewSlot));
	if (!new_slot_callbacks)
	{
		RegisterXactCallback(new_slots_xact_callback, NULL);
		RegisterSubXactCallback(new_slots_subxact_callback, NULL);
		new_slot_callbacks = true;
	}
	strlcpy(ns->name, name, NAMEDATALEN);
	ns->subid = GetCurrentSubTransactionId();
	ns->at_commit = at_commit;
	old = MemoryContextSwitchTo(TopMemoryContext);
	new_slots = lappend(new_slots, ns);
	MemoryContextSwitchTo(old);
}

void
change_stream_drop_slot_at_commit(const char *slot_name)
{
	if (slot_exists_here(slot_name))
		remember_slot(slot_name, true);
}

/*
 * Starting a stream makes a replication slot, a server-wide resource that
 * pins WAL and catalog rows for as long as it lives.  PostgreSQL lets
 * only roles with REPLICATION make slots; the extension makes them as its
 * owner, so it asks for the same, or for membership in a role a DBA grants
 * for this on purpose.
 */
static void
check_may_start_stream(const char *uid)
{
	Oid			user = GetUserId();
	Oid			stream_role = get_role_oid(PTF_STREAM_ROLE, true);

	if (superuser_arg(user) || has_rolreplication(user) ||
		(OidIsValid(stream_role) && has_privs_of_role(user, stream_role)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to start the change stream of uid \"%s\"", uid),
			 errdetail("Starting a change stream makes a replication slot, which needs the REPLICATION attribute or the privileges of role %s.",
					   PTF_STREAM_ROLE),
			 errhint("A superuser may GRANT %s TO %s.", PTF_STREAM_ROLE,
					 quote_identifier(GetUserNameFromId(user, false)))));
}

/*
 * Slots are few (max_replication_slots): one role must not take them all.
 * Counted in this database's registry; one first call of a role at a time
 * counts, until its transaction ends, so concurrent ones cannot both pass.
 */
static void
check_streams_per_role(void)
{
	Oid			user = GetUserId();
	Oid			argtypes[1] = {REGROLEOID};
	Datum		values[1] = {ObjectIdGetDatum(user)};
	int64		streams;

	if (ptf_max_streams_per_role < 0 || superuser_arg(user))
		return;
	(void) ptf_lock(PTF_LOCK_ROLE_STREAMS, (uint32) user, ExclusiveLock, false, true);
	ptf_spi_exec_as_owner("SELECT pg_catalog.count(*) FROM ptf.uid_registry "
						  "WHERE owner OPERATOR(pg_catalog.=) $1 AND slot_name IS NOT NULL",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	streams = ptf_spi_int64(1, 0);
	if (streams >= ptf_max_streams_per_role)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg_plural("role %s has %lld change stream in this database, as many as ptf.max_streams_per_role allows",
							   "role %s has %lld change streams in this database, as many as ptf.max_streams_per_role allows",
							   (unsigned long) streams,
							   quote_identifier(GetUserNameFromId(user, false)), (long long) streams),
				 errhint("Drop the streams no longer read (ptf.drop_state, ptf.drop_pipeline), or have a superuser raise ptf.max_streams_per_role.")));
}

/* decoding shows every row: the caller must be able to read every row */
static bool
may_read_every_row(Oid relid)
{
	return pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ALL) == ACLCHECK_OK;
}

/* a table whose changes the caller may read */
static void
check_stream_table(Oid relid)
{
	char		relkind = get_rel_relkind(relid);

	if (relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("changes => true needs a plain table, and %s is not one",
						get_rel_name(relid)),
				 relkind == RELKIND_PARTITIONED_TABLE ?
				 errhint("The changes of a partitioned table arrive per partition; read a partition.") : 0));

	if (!may_read_every_row(relid))
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("changes => true cannot apply the row-level security of table %s",
						get_rel_name(relid)),
				 errhint("Read the change stream as the table's owner or a role that bypasses row-level security.")));
}

static const char *slot_lost(const char *slot_name);
static char *restart_stream(const char *uid, const char *stored, const char *lost);

char *
change_stream_prepare(const char *uid, const Oid *relids, int nrelids)
{
	char	   *slot;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	int			i;

	for (i = 0; i < nrelids; i++)
		check_stream_table(relids[i]);

	/* one creator at a time per uid, until this transaction ends */
	(void) ptf_lock(PTF_LOCK_UID, ptf_lock_id_of_name(uid), ExclusiveLock, false, true);
	values[0] = CStringGetTextDatum(uid);

	ptf_spi_exec_as_owner("SELECT slot_name FROM ptf.uid_registry WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
		{
			char	   *stored = TextDatumGetCString(d);
			const char *lost = slot_lost(stored);

			if (lost != NULL && durable_stream_can_restart(uid))
				return restart_stream(uid, stored, lost);
			return stored;
		}
		/* a uid made without changes: the registry check will refuse it */
		return slot_name_for(uid);
	}

	/* the uid's first call: its stream starts with its slot */
	check_may_start_stream(uid);
	slot = slot_name_for(uid);
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
	{
		/*
		 * PostgreSQL makes a logical slot only in a transaction without an
		 * xid (its start waits for every transaction that has one).  The
		 * caller may not have written anything: a call with a uid writes
		 * its state even when it only reads, so name the one that did.
		 */
		const char *writer = durable_xid_writer();

		if (writer != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("the first call of uid \"%s\" cannot run in a transaction that has already written",
							uid),
					 errdetail("The call of uid \"%s\" earlier in this transaction wrote its state, as every call with a uid does, even one that only reads; the first call of a change stream creates its replication slot, which needs a transaction without writes.",
							   writer),
					 errhint("Make the first call of uid \"%s\" in a transaction of its own: a transaction can start one change stream, before anything in it writes.",
							 uid)));
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("the first call of uid \"%s\" cannot run in a transaction that has already written",
						uid),
				 errdetail("It creates the uid's replication slot, which needs a transaction without writes."),
				 errhint("Make the first call of the uid in a transaction of its own.")));
	}

	/*
	 * After the check above: a transaction with an xid waiting here for the
	 * role's lock could deadlock with the holder, whose slot creation waits
	 * for every transaction with an xid to end.
	 */
	check_streams_per_role();
	/* left over by a first call whose backend died: start afresh */
	change_stream_drop_slot(slot);
	values[0] = CStringGetTextDatum(slot);
	ptf_spi_exec_as_owner("SELECT pg_catalog.pg_create_logical_replication_slot($1::pg_catalog.name, "
						  "'deduplicate_keep_first')",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	remember_slot(slot, false);
	return slot;
}

/*
 * Why a uid's slot cannot carry its stream here (it is gone, was
 * invalidated, or is another database's), or NULL when it can.
 */
/* A slot's database and restart position; false if there is none. */
static bool
slot_place(const char *slot_name, Oid *dboid, XLogRecPtr *restart_lsn)
{
	ReplicationSlot *slot;

	*dboid = InvalidOid;
	*restart_lsn = InvalidXLogRecPtr;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(slot_name, false);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		*dboid = slot->data.database;
		*restart_lsn = slot->data.restart_lsn;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return slot != NULL;
}

static const char *
slot_lost(const char *slot_name)
{
	Oid			dboid;
	XLogRecPtr	restart_lsn;

	if (!slot_place(slot_name, &dboid, &restart_lsn))
		return "it does not exist";
	if (dboid != MyDatabaseId)
		return "it belongs to another database: the uid was copied here";
	if (XLogRecPtrIsInvalid(restart_lsn))
		return "it was invalidated";
	return NULL;
}

/*
 * A stream that lost its slot (slot_lost) and whose function can say the
 * net effect of what it missed goes on, on a slot of its own here, brought
 * in line with its tables by this call (ptf.resync): nothing lost, nothing
 * twice.  Making a slot takes what a first call's does.
 */
static char *
restart_stream(const char *uid, const char *stored, const char *lost)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	char	   *slot = slot_name_for(uid);

	check_may_start_stream(uid);
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("the change stream of uid \"%s\" must start again, which cannot run in a transaction that has already written",
						uid),
				 errdetail("Its replication slot %s cannot carry it: %s.", stored, lost),
				 errhint("Call the uid in a transaction of its own.")));
	/* an invalidated slot of this name, or one left by a backend that died */
	change_stream_drop_slot(slot);
	values[0] = CStringGetTextDatum(slot);
	ptf_spi_exec_as_owner("SELECT pg_catalog.pg_create_logical_replication_slot($1::pg_catalog.name, "
						  "'deduplicate_keep_first')",
						  1, argtypes, values, NULL, SPI_OK_SELECT);
	remember_slot(slot, false);
	durable_restart_stream(uid, slot);
	ereport(NOTICE,
			(errmsg("the change stream of uid \"%s\" starts again on replication slot %s, brought in line with its tables",
					uid, slot),
			 errdetail("Its slot %s could not carry it: %s.", stored, lost)));
	return slot;
}

PtfChangeStream *
change_stream_create(const char *slot_name, const ChangeStreamTable *tables, int ntables)
{
	PtfChangeStream *cs = palloc0(sizeof(PtfChangeStream));
	int			i;

	cs->slot_name = pstrdup(slot_name);
	cs->ntables = ntables;
	cs->tables = palloc0(sizeof(StreamTable) * ntables);
	for (i = 0; i < ntables; i++)
	{
		cs->tables[i].t = tables[i];
		cs->tables[i].old_slot = MakeSingleTupleTableSlot(tables[i].rowdesc, &TTSOpsHeapTuple);
		cs->tables[i].new_slot = MakeSingleTupleTableSlot(tables[i].rowdesc, &TTSOpsHeapTuple);
	}
	cs->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf change row",
									   ALLOCSET_DEFAULT_SIZES);
	return cs;
}

/* the stream's table of a decoded relation, or NULL */
static StreamTable *
stream_table(PtfChangeStream *cs, Oid relid)
{
	int			i;

	for (i = 0; i < cs->ntables; i++)
		if (cs->tables[i].t.relid == relid)
			return &cs->tables[i];
	return NULL;
}

XLogRecPtr
change_stream_position(PtfChangeStream *cs)
{
	return cs->position;
}

uint64
change_stream_skipped(PtfChangeStream *cs)
{
	return cs->skipped;
}

/* ---- the initial snapshot ---- */

/* Did the snapshot see xid committed?  (Only committed transactions are decoded.) */
static bool
snapshot_had(PtfChangeStream *cs, TransactionId xid)
{
	int			i;

	if (TransactionIdPrecedes(xid, cs->snap_xmin))
		return true;
	if (!TransactionIdPrecedes(xid, cs->snap_xmax))
		return false;
	for (i = 0; i < cs->snap_nxip; i++)
		if (TransactionIdEquals(cs->snap_xip[i], xid))
			return false;
	return true;
}

void
change_stream_skip_snapshot(PtfChangeStream *cs, TransactionId xmin, TransactionId xmax,
							const TransactionId *xip, int nxip)
{
	cs->has_snapshot = true;
	cs->snap_xmin = xmin;
	cs->snap_xmax = xmax;
	cs->snap_nxip = nxip;
	cs->snap_xip = palloc(sizeof(TransactionId) * Max(nxip, 1));
	memcpy(cs->snap_xip, xip, sizeof(TransactionId) * nxip);
}

/* ---- the in-process sink the plugin hands transactions to ---- */

static void
cs_begin(void *arg, ReorderBufferTXN *txn)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;

	/* read before, by a call whose state is stored: skip it whole */
	cs->skip_txn = (!XLogRecPtrIsInvalid(cs->resume_after) &&
					txn->end_lsn <= cs->resume_after);
	/* committed before the initial snapshot: its rows are in it */
	cs->in_snapshot = (!cs->skip_txn && cs->has_snapshot && snapshot_had(cs, txn->xid));
	if (cs->in_snapshot)
		cs->skip_txn = true;
	cs->meta.commit_time = txn->xact_time.commit_time;
	cs->meta.xid = txn->xid;
}

static void
cs_commit(void *arg, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;

	if (cs->skip_txn && !cs->in_snapshot)
		return;
	cs->position = txn->end_lsn;
	cs->last_commit_time = txn->xact_time.commit_time;
	if (cs->txn_handed_over)
		cs->last_productive = txn->end_lsn;
	cs->txn_handed_over = false;
	if (ptf_max_changes_per_call > 0 && cs->rows >= (uint64) ptf_max_changes_per_call)
		cs->stop = true;
}

/*
 * The historic descriptor of the table at the change must be the one we
 * read rows with, but for columns added since (read as their defaults).
 */
static void
check_descriptor(PtfChangeStream *cs, StreamTable *st, Relation rel)
{
	TupleDesc	hist = RelationGetDescr(rel);
	TupleDesc	rowdesc = st->t.rowdesc;
	int			i;

	if (hist == st->checked_desc)
		return;
	if (hist->natts > rowdesc->natts)
		goto incompatible;
	for (i = 0; i < hist->natts; i++)
	{
		Form_pg_attribute h = TupleDescAttr(hist, i);
		Form_pg_attribute r = TupleDescAttr(rowdesc, i);

		if (h->attisdropped != r->attisdropped && !r->attisdropped)
			goto incompatible;
		if (!h->attisdropped && !r->attisdropped &&
			(h->atttypid != r->atttypid || h->attlen != r->attlen))
			goto incompatible;
	}
	st->checked_desc = hist;
	return;

incompatible:
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the columns of table %s changed while its changes were being read",
					RelationGetRelationName(rel)),
			 errdetail("A change at %X/%X has columns of other types than the table has now.",
					   LSN_FORMAT_ARGS(cs->meta.lsn)),
			 errhint("Forget the state of the uid with ptf.drop_state() to start over from now.")));
}

/* Does a new image hold unchanged TOASTed values (on-disk pointers)? */
static bool
has_unchanged_toast(TupleDesc desc, HeapTuple tup)
{
	int			i;

	if (!HeapTupleHasExternal(tup))
		return false;
	for (i = 0; i < desc->natts && i < HeapTupleHeaderGetNatts(tup->t_data); i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		bool		isnull;
		Datum		d;

		if (att->attlen != -1 || att->attisdropped)
			continue;
		d = heap_getattr(tup, i + 1, desc, &isnull);
		if (!isnull && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)))
			return true;
	}
	return false;
}

/* Under REPLICA IDENTITY FULL the old image has what the new one lacks. */
static HeapTuple
complete_from_old(TupleDesc desc, HeapTuple newtup, HeapTuple oldtup)
{
	Datum	   *nv = palloc(sizeof(Datum) * desc->natts);
	bool	   *nn = palloc(sizeof(bool) * desc->natts);
	Datum	   *ov = palloc(sizeof(Datum) * desc->natts);
	bool	   *on = palloc(sizeof(bool) * desc->natts);
	int			i;

	heap_deform_tuple(newtup, desc, nv, nn);
	heap_deform_tuple(oldtup, desc, ov, on);
	for (i = 0; i < desc->natts; i++)
	{
		if (!nn[i] && TupleDescAttr(desc, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(nv[i])))
		{
			nv[i] = ov[i];
			nn[i] = on[i];
		}
	}
	return heap_form_tuple(desc, nv, nn);
}

/*
 * Decoding hands over TOASTed values it reassembled as indirect pointers
 * into its own memory, which is gone after the change: a row kept past it
 * (an image, a candidate) must hold the values themselves.  Unchanged
 * on-disk pointers stay; they are marked incomplete and never fetched.
 */
static HeapTuple
flatten_indirect(TupleDesc desc, HeapTuple tup)
{
	int			natts = Min(desc->natts, HeapTupleHeaderGetNatts(tup->t_data));
	Datum	   *values;
	bool	   *nulls;
	bool		any = false;
	int			i;

	if (!HeapTupleHasExternal(tup))
		return tup;
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(tup, desc, values, nulls);
	for (i = 0; i < natts; i++)
	{
		if (!nulls[i] && TupleDescAttr(desc, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL_INDIRECT(DatumGetPointer(values[i])))
		{
			values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
															  DatumGetPointer(values[i])));
			any = true;
		}
	}
	return any ? heap_form_tuple(desc, values, nulls) : tup;
}

static void
hand_over(PtfChangeStream *cs, StreamTable *st, RowKind kind, TupleTableSlot *slot,
		  HeapTuple tup, bool partial, bool incomplete)
{
	ResourceOwner decoding_owner = CurrentResourceOwner;

	ExecStoreHeapTuple(flatten_indirect(slot->tts_tupleDescriptor, tup), slot, false);
	cs->meta.partial = partial;
	cs->meta.incomplete = incomplete;

	/*
	 * Decoding runs us inside a subtransaction it rolls back: what the
	 * operators acquire (temporary files of the output, relations) belongs
	 * to the caller.
	 */
	CurrentResourceOwner = cs->outer_owner;
	st->t.sink(st->t.sink_arg, kind, slot, &cs->meta);
	CurrentResourceOwner = decoding_owner;
	ExecClearTuple(slot);
	cs->rows++;
	cs->txn_handed_over = true;
}

/*
 * The reader's rights as of each change, the output plugin's rule: what
 * check_stream_table() asked when the stream started is asked again under
 * decoding's historic catalog, so that a change made while the reader
 * could not read its table -- SELECT revoked, or row-level security in
 * force, and later undone -- is never delivered.  A verdict holds until an
 * invalidation replayed with the changes says that the table or a role
 * changed; a stream that meets such a change ends there, every time, until
 * its state is dropped.
 */
static PtfChangeStream *decoding_stream;	/* the stream being decoded */
static bool rights_callbacks;	/* registered, once per backend */

static void
forget_rights(PtfChangeStream *cs, Oid relid)
{
	int			i;

	for (i = 0; i < cs->ntables; i++)
		if (!OidIsValid(relid) || cs->tables[i].t.relid == relid)
			cs->tables[i].rights_checked = false;
}

static void
rights_relcache_callback(Datum arg, Oid relid)
{
	if (decoding_stream != NULL)
		forget_rights(decoding_stream, relid);
}

/* memberships and BYPASSRLS */
static void
rights_role_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (decoding_stream != NULL)
		forget_rights(decoding_stream, InvalidOid);
}

static void
check_rights_then(PtfChangeStream *cs, StreamTable *st, Relation rel)
{
	Oid			relid = RelationGetRelid(rel);

	if (st->rights_checked)
		return;
	if (!may_read_every_row(relid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s when one of its changes was made",
						RelationGetRelationName(rel)),
				 errdetail("The reader could not SELECT every row of it when its change at %X/%X was made. A change stream delivers only changes its reader could read when they were made, as the output plugin does.",
						   LSN_FORMAT_ARGS(cs->meta.lsn)),
				 errhint("The stream cannot go on past this change: ptf.drop_state() forgets the uid, and a first call with snapshot => true starts it again from the table's rows.")));
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s had row-level security in force for this reader when one of its changes was made",
						RelationGetRelationName(rel)),
				 errdetail("The change is at %X/%X. A change stream cannot apply row-level security, and delivers no change made under it.",
						   LSN_FORMAT_ARGS(cs->meta.lsn)),
				 errhint("The stream cannot go on past this change: ptf.drop_state() forgets the uid, and a first call with snapshot => true starts it again from the table's rows.")));
	st->rights_checked = true;
}

static void
cs_change(void *arg, ReorderBufferTXN *txn, Relation rel, ReorderBufferChange *change)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;
	MemoryContext old;
	HeapTuple	newtup;
	HeapTuple	oldtup;
	bool		full;
	StreamTable *st;

	if (cs->skip_txn || (st = stream_table(cs, RelationGetRelid(rel))) == NULL)
		return;

	MemoryContextReset(cs->rowcxt);
	old = MemoryContextSwitchTo(cs->rowcxt);
	cs->meta.lsn = change->lsn;
	check_descriptor(cs, st, rel);
	check_rights_then(cs, st, rel);
	full = (rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL);
	newtup = change->data.tp.newtuple ? &change->data.tp.newtuple->tuple : NULL;
	oldtup = change->data.tp.oldtuple ? &change->data.tp.oldtuple->tuple : NULL;

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			hand_over(cs, st, ROWKIND_INSERT, st->new_slot, newtup, false, false);
			break;

		case REORDER_BUFFER_CHANGE_UPDATE:
			{
				bool		incomplete = has_unchanged_toast(RelationGetDescr(rel), newtup);

				if (incomplete && full && oldtup)
				{
					newtup = complete_from_old(RelationGetDescr(rel), newtup, oldtup);
					incomplete = false;
				}
				if (oldtup)
					hand_over(cs, st, ROWKIND_UPDATE_BEFORE, st->old_slot, oldtup, !full, false);
				hand_over(cs, st, ROWKIND_UPDATE_AFTER, st->new_slot, newtup, false, incomplete);
			}
			break;

		case REORDER_BUFFER_CHANGE_DELETE:
			/* REPLICA IDENTITY NOTHING logs no old image: no key, nothing to say */
			if (oldtup)
				hand_over(cs, st, ROWKIND_DELETE, st->old_slot, oldtup, !full, false);
			else
				cs->skipped++;
			break;

		default:
			break;
	}
	MemoryContextSwitchTo(old);
}

static void
cs_truncate(void *arg, ReorderBufferTXN *txn, int nrelations, Relation *relations,
			ReorderBufferChange *change)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;
	int			i;

	if (cs->skip_txn)
		return;
	for (i = 0; i < nrelations; i++)
	{
		StreamTable *st = stream_table(cs, RelationGetRelid(relations[i]));

		if (st == NULL)
			continue;
		if (st->t.on_truncate == TRUNCATE_ERROR)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table %s was truncated, which a changelog without kept images cannot represent",
							RelationGetRelationName(relations[i])),
					 errdetail("The truncation is at %X/%X; the WAL names no row it removed.",
							   LSN_FORMAT_ARGS(change->lsn)),
					 errhint("Map \"TRUNCATE\" in op_mapping to read it as a row of its own, then call again; ptf.drop_state() forgets the uid and starts a new stream.")));
		if (st->t.on_truncate == TRUNCATE_PASS)
		{
			ResourceOwner decoding_owner = CurrentResourceOwner;

			cs->meta.lsn = change->lsn;
			cs->meta.partial = cs->meta.incomplete = false;
			ExecStoreAllNullTuple(st->old_slot);
			/* as hand_over: what the operators acquire is the caller's */
			CurrentResourceOwner = cs->outer_owner;
			st->t.sink(st->t.sink_arg, ROWKIND_TRUNCATE, st->old_slot, &cs->meta);
			CurrentResourceOwner = decoding_owner;
			ExecClearTuple(st->old_slot);
			cs->rows++;
			cs->txn_handed_over = true;
			continue;
		}
		ereport(NOTICE,
				(errmsg("table %s was truncated; the deletions of its rows change nothing here",
						RelationGetRelationName(relations[i]))));
		cs->skipped++;
		cs->txn_handed_over = true;
	}
}

bool
change_stream_images_may_be_incomplete(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		may = false;
	int			i;

	if (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL)
		for (i = 0; i < desc->natts && !may; i++)
		{
			Form_pg_attribute a = TupleDescAttr(desc, i);

			may = !a->attisdropped && a->attlen == -1 && a->attstorage != TYPSTORAGE_PLAIN;
		}
	relation_close(rel, AccessShareLock);
	return may;
}

/* ---- the decoding loop ---- */

static void
write_refused(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid,
			  bool last_write)
{
	elog(ERROR, "in-process decoding does not write output");
}

/*
 * The uid's slot must still be there, and be this database's: a uid copied
 * by pg_dump into another database or cluster names a slot it cannot use.
 */
static void
check_slot_usable(const char *slot_name, XLogRecPtr resume_after)
{
	Oid			dboid;
	XLogRecPtr	restart_lsn;

	if (!slot_place(slot_name, &dboid, &restart_lsn))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the replication slot %s of this uid does not exist", slot_name),
				 XLogRecPtrIsInvalid(resume_after) ? 0 :
				 errdetail("The changes after %X/%X cannot be read any more.",
						   LSN_FORMAT_ARGS(resume_after)),
				 errhint("ptf.drop_state() forgets the uid; its next call starts a new stream.")));
	if (XLogRecPtrIsInvalid(restart_lsn))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the replication slot %s of this uid was invalidated", slot_name),
				 errdetail("It fell more than max_slot_wal_keep_size behind%s; the WAL it needed is gone.",
						   XLogRecPtrIsInvalid(resume_after) ? "" :
						   psprintf(" (the uid's position is %X/%X)", LSN_FORMAT_ARGS(resume_after))),
				 errhint("ptf.drop_state() forgets the uid; its next call starts a new stream.")));
	if (dboid != MyDatabaseId)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the replication slot %s of this uid belongs to another database", slot_name),
				 errdetail("The uid's state was copied here (pg_dump?); its changes are read where it was made."),
				 errhint("ptf.drop_state() forgets the uid here; its next call starts a new stream.")));
}

void
change_stream_run(PtfChangeStream *cs, XLogRecPtr resume_after, bool resume_committed)
{
	PtfDecodingSink dsink;
	LogicalDecodingContext *volatile ctx = NULL;
	PtfKept    *volatile kd = NULL;
	XLogRecPtr	end_of_wal;

	if (change_stream_start_only)
	{
		/* the stream starts at the slot, read from the next call on */
		memset(&change_stream_last_report, 0, sizeof(change_stream_last_report));
		change_stream_last_report.reached_end = true;
		return;
	}

	cs->outer_owner = CurrentResourceOwner;
	cs->outer_cxt = CurrentMemoryContext;
	cs->resume_after = resume_after;
	cs->position = resume_after;
	cs->last_productive = InvalidXLogRecPtr;

	dsink.begin = cs_begin;
	dsink.change = cs_change;
	dsink.truncate = cs_truncate;
	dsink.commit = cs_commit;
	dsink.arg = cs;
	/* a pipeline's own writes carry its origin: never read them back */
	dsink.skip_origin = replorigin_session_origin;

	CheckLogicalDecodingRequirements();
	check_slot_usable(cs->slot_name, resume_after);
	if (!rights_callbacks)
	{
		CacheRegisterRelcacheCallback(rights_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, rights_role_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, rights_role_callback, (Datum) 0);
		rights_callbacks = true;
	}
	forget_rights(cs, InvalidOid);
	end_of_wal = GetFlushRecPtr(NULL);
	ReplicationSlotAcquire(cs->slot_name, true);

	PG_TRY();
	{
		XLogRecPtr	confirmed = MyReplicationSlot->data.confirmed_flush;

		if (!XLogRecPtrIsInvalid(resume_after) && confirmed > resume_after)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the uid's replication slot was moved past the uid's stored position"),
					 errdetail("Slot %s is at %X/%X, the uid's state at %X/%X: changes in between are lost.",
							   cs->slot_name, LSN_FORMAT_ARGS(confirmed),
							   LSN_FORMAT_ARGS(resume_after)),
					 errhint("Do not consume the slot of a uid with other tools; ptf.drop_state() starts the uid over.")));

		if (ptf_in_pipeline_worker)
			kd = usable_kept(cs->slot_name, resume_after);

		/* what is committed can be let go of: WAL before it is released */
		if (resume_committed && !XLogRecPtrIsInvalid(resume_after) && resume_after > confirmed)
		{
			LogicalConfirmReceivedLocation(resume_after);
			ReplicationSlotMarkDirty();
		}

		ptf_decoding_sink = &dsink;
		decoding_stream = cs;
		if (kd != NULL)
			ctx = kept_decoder(kd)->ctx;
		else
		{
			MemoryContext old = CurrentMemoryContext;

			if (ptf_in_pipeline_worker && (kd = new_kept(cs->slot_name)) != NULL)
				MemoryContextSwitchTo(kd->cxt);
			ctx = CreateDecodingContext(InvalidXLogRecPtr, NIL, false,
										XL_ROUTINE(.page_read = read_local_xlog_page,
												   .segment_open = wal_segment_open,
												   .segment_close = wal_segment_close),
										NULL, write_refused, NULL);
			MemoryContextSwitchTo(old);
			if (kd != NULL)
				kept_decoder(kd)->ctx = ctx;
			XLogBeginRead(ctx->reader, MyReplicationSlot->data.restart_lsn);
		}
		InvalidateSystemCaches();

		while (ctx->reader->EndRecPtr < end_of_wal && !cs->stop)
		{
			XLogRecord *record;
			char	   *errm = NULL;

			/* what the reader keeps between records lives as long as it does */
			MemoryContextSwitchTo(ctx->context);
			record = XLogReadRecord(ctx->reader, &errm);
			if (errm)
				elog(ERROR, "could not find record for logical decoding: %s", errm);
			if (record != NULL)
				LogicalDecodingProcessRecord(ctx, ctx->reader);
			/* decoding's transaction management leaves its own owner and context behind */
			CurrentResourceOwner = cs->outer_owner;
			MemoryContextSwitchTo(cs->outer_cxt);
			CHECK_FOR_INTERRUPTS();
		}

		change_stream_last_report.end_of_wal = end_of_wal;
		change_stream_last_report.position = cs->position;
		change_stream_last_report.last_commit_time = cs->last_commit_time;
		change_stream_last_report.reached_end = !cs->stop;

		if (kd != NULL && has_spilled(ctx->reorder))
		{
			/*
			 * Whoever decodes the slot next deletes its spill files: a
			 * context holding spilled transactions is not kept.
			 */
			ptf_kept_forget(kd);
			kd = NULL;
			ctx = NULL;
		}
		if (kd != NULL)
		{
			KeptDecoder *d = kept_decoder(kd);

			if (!XLogRecPtrIsInvalid(cs->last_productive))
				d->last_productive = cs->last_productive;
			d->slot = MyReplicationSlot;
			d->confirmed = MyReplicationSlot->data.confirmed_flush;
		}
		else if (ctx != NULL)
			FreeDecodingContext(ctx);
		ptf_decoding_sink = NULL;
		decoding_stream = NULL;
		ReplicationSlotRelease();
		InvalidateSystemCaches();
	}
	PG_CATCH();
	{
		CurrentResourceOwner = cs->outer_owner;
		MemoryContextSwitchTo(cs->outer_cxt);
		ptf_decoding_sink = NULL;
		decoding_stream = NULL;
		/* a context that failed midway is not to be trusted again */
		if (kd != NULL)
			ptf_kept_forget(kd);
		InvalidateSystemCaches();
		/* an error caught by a savepoint must not leave the slot ours */
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		PG_RE_THROW();
	}
	PG_END_TRY();
}

void
change_stream_define_gucs(void)
{
	DefineCustomIntVariable("ptf.max_changes_per_call",
							"Rows a call reads from a change stream, at most.",
							"A call stops at the end of the transaction that reaches it; the next "
							"call continues there. 0: no limit.",
							&ptf_max_changes_per_call,
							1000000, 0, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.max_streams_per_role",
							"Change streams a role may have in a database, at most.",
							"Each stream (a uid read with changes => true, a pipeline) holds a "
							"replication slot. Superusers are not counted. -1: no limit.",
							&ptf_max_streams_per_role,
							8, -1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
}
