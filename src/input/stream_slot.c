/*-------------------------------------------------------------------------
 *
 * stream_slot.c
 *	  The replication slot of a uid's change stream: who may make one,
 *	  how it is named, made, started again, moved on and dropped.
 *
 * Slots are a server-wide resource that keeps WAL and catalog rows: only
 * roles PostgreSQL would let make one (superusers, REPLICATION), or
 * members of a role a DBA grants for it, start streams, and a role has at
 * most ptf.max_streams_per_role of them in a database.  A slot is not
 * transactional, so the slots a transaction made or dropped are tracked
 * until it ends (NewSlot): a first call rolled back drops its new slot, a
 * stream dropped by a committed DROP OWNED or DROP EXTENSION loses its
 * slot then.  A slot whose maker died before its transaction ended goes
 * when the server has restarted (change_stream_drop_orphan_slots).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/logical.h"
#include "replication/slot.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rls.h"

#include "catalog.h"
#include "input/stream_slot.h"
#include "state/durable.h"

int			ptf_max_streams_per_role = 8;

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

static void
drop_slot_now(const char *slot_name)
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
 * stream dropped (drop_state, drop_pipeline, DROP OWNED, DROP EXTENSION)
 * goes only once the drop has committed: a drop that fails or rolls back
 * must leave the streams whole.
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
 *
 * Why catching an error here, outside any (sub)transaction, is safe -- an
 * xact callback at XACT_EVENT_ABORT or _COMMIT can start neither, and the
 * drop cannot wait for a later transaction (the backend may exit first,
 * leaving the slot to hold WAL): ReplicationSlotDrop's errors are raised
 * either before it changes anything (the slot busy: acquired with nowait,
 * and idle a moment ago) or after ReplicationSlotDropPtr has put the
 * slot's shared state back as it was (a failed rename of its directory);
 * what else is held at that point are LWLocks, which LWLockReleaseAll lets
 * go as AbortTransaction does, and the slot, which ReplicationSlotRelease
 * gives back.  Memory is the caller's context, and interrupts are held
 * during transaction end.  A failure leaves the slot; its uid's next first
 * call, DROP EXTENSION or DROP DATABASE drop it (README, Security).
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
 * Make the slot of a stream that starts (or starts again) in this
 * transaction: one of its name left over -- by a first call whose backend
 * died, or invalidated -- goes first; the new one goes again if the
 * transaction rolls back.  Made as the extension's owner, with our output
 * plugin (ptf_create_logical_slot: not through SPI, see there).
 */
static void
create_slot(const char *slot)
{
	/* held to the end: the drop of orphaned slots leaves this name alone */
	(void) ptf_lock_slot(slot, true);
	drop_slot_now(slot);
	ptf_create_logical_slot(slot);
	remember_slot(slot, false);
}

/*
 * Slots a server process made and could not take back: a first call (or
 * create_pipeline, a Citus move's placeholder) whose process died before
 * its transaction ended -- killed, or a crash -- leaves a slot no registry
 * row names, which would keep WAL for ever (abort and errors drop theirs:
 * NewSlot).  Such a slot is one of this database's, of our plugin, named
 * as we name slots, idle, and named neither by ptf.uid_registry nor by
 * ptf.citus_shard_pipelines once its maker's transaction is over: its
 * maker holds the slot's lock from before the slot exists to its end
 * (ptf_lock_slot), so a slot whose lock is free and that nothing names is
 * one whose maker's work was rolled back.  A slot whose lock is held is
 * left for the next time.  Run in a transaction, SPI connected.  Returns
 * how many were dropped.
 */
int
change_stream_drop_orphan_slots(void)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(psprintf("ptf\\_%u\\_%%", MyDatabaseId))};
	bool		citus_table = OidIsValid(get_relname_relid("citus_shard_pipelines",
														   get_namespace_oid("ptf", false)));
	List	   *names = NIL;
	ListCell   *lc;
	uint64		i;
	int			dropped = 0;

	ptf_spi_exec_as_owner("SELECT s.slot_name::pg_catalog.text FROM pg_catalog.pg_replication_slots s "
						  "WHERE s.database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
						  "AND s.plugin OPERATOR(pg_catalog.=) 'deduplicate_keep_first' "
						  "AND NOT s.active "
						  "AND s.slot_name::pg_catalog.text OPERATOR(pg_catalog.~~) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
		names = lappend(names, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));

	foreach(lc, names)
	{
		char	   *name = lfirst(lc);

		if (!ptf_lock_slot(name, false))
			continue;
		/* a statement's snapshot taken now, with the lock: the maker's end is in it */
		args[0] = CStringGetTextDatum(name);
		ptf_spi_exec_as_owner(psprintf("SELECT 1 FROM ptf.uid_registry r "
									   "WHERE r.slot_name OPERATOR(pg_catalog.=) $1%s",
									   citus_table ?
									   " UNION ALL SELECT 1 FROM ptf.citus_shard_pipelines c "
									   "WHERE c.slot OPERATOR(pg_catalog.=) $1" : ""),
							  1, argtypes, args, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0 || !drop_slot_quietly(name))
			continue;
		ereport(LOG,
				(errmsg("dropped replication slot %s, which no change stream of database %u names",
						name, MyDatabaseId),
				 errdetail("A first call of a uid, or create_pipeline, made it and its server process ended before its transaction did.")));
		dropped++;
	}
	return dropped;
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
bool
stream_may_read_every_row(Oid relid)
{
	return stream_role_may_read_every_row(relid, InvalidOid);
}

bool
stream_role_may_read_every_row(Oid relid, Oid role)
{
	if (!OidIsValid(role))
		role = GetUserId();
	return pg_class_aclcheck(relid, role, ACL_SELECT) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, role, ACL_SELECT, ACLMASK_ALL) == ACLCHECK_OK;
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

	/* an unlogged table's changes are not in the WAL (commands/unlogged.c) */
	if (get_rel_persistence(relid) != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("changes => true needs a logged table, and %s is %s", get_rel_name(relid),
						get_rel_persistence(relid) == RELPERSISTENCE_TEMP ? "temporary" : "unlogged"),
				 errdetail("Its changes are not written to the WAL, which a change stream reads."),
				 get_rel_persistence(relid) == RELPERSISTENCE_UNLOGGED ?
				 errhint("ALTER TABLE %s SET LOGGED, then start the stream (snapshot => true reads the rows it has).",
						 quote_identifier(get_rel_name(relid))) : 0));
	if (!stream_may_read_every_row(relid))
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
	(void) ptf_lock_uid(uid, ExclusiveLock, false, true);
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
	create_slot(slot);
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
	char	   *slot = slot_name_for(uid);

	check_may_start_stream(uid);
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("the change stream of uid \"%s\" must start again, which cannot run in a transaction that has already written",
						uid),
				 errdetail("Its replication slot %s cannot carry it: %s.", stored, lost),
				 errhint("Call the uid in a transaction of its own.")));
	create_slot(slot);
	durable_restart_stream(uid, slot);
	ereport(NOTICE,
			(errmsg("the change stream of uid \"%s\" starts again on replication slot %s, brought in line with its tables",
					uid, slot),
			 errdetail("Its slot %s could not carry it: %s.", stored, lost)));
	return slot;
}

/*
 * The uid's slot must still be there, and be this database's: a uid copied
 * by pg_dump into another database or cluster names a slot it cannot use.
 */
void
stream_slot_check_usable(const char *slot_name, XLogRecPtr resume_after)
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
stream_slot_define_gucs(void)
{
	DefineCustomIntVariable("ptf.max_streams_per_role",
							"Change streams a role may have in a database, at most.",
							"Each stream (a uid read with changes => true, a pipeline) holds a "
							"replication slot. Superusers are not counted. -1: no limit.",
							&ptf_max_streams_per_role,
							8, -1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
}
