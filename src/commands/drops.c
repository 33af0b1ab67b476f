/*-------------------------------------------------------------------------
 *
 * drops.c
 *	  What the extension makes outside its tables -- replication slots and
 *	  origins, which are server-wide -- goes when what they belong to goes:
 *	  a role (DROP OWNED, DROP ROLE), the extension, a database.
 *
 * Uids and pipelines are rows of our catalogs, not objects PostgreSQL
 * tracks, so DROP OWNED and DROP ROLE cannot see them by themselves.
 * DROP OWNED and DROP EXTENSION fire an event trigger of the extension
 * (ptf_drop_streams, at ddl_command_start, so it runs while the registry
 * is still there -- and without the library preloaded).  DROP ROLE,
 * REASSIGN OWNED and DROP DATABASE fire no event trigger: they go through
 * a ProcessUtility hook, which needs the library loaded (pipelines, which
 * own the origins, need it preloaded anyway).
 *
 * Slots are not transactional: those of dropped streams go only when the
 * drop commits (change_stream_drop_slot_at_commit).  Origins are rows of
 * a catalog and go with the transaction.
 *
 * The same hook has pipelines' queries follow renames (commands/renames.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_replication_origin.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "catalog.h"
#include "commands/drops.h"
#include "commands/renames.h"
#include "commands/unlogged.h"
#include "functions/pipelines.h"
#include "input/change_stream.h"
#include "state/durable.h"
#include "worker/shmem.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(ptf_drop_streams);

#define PTF_EXTENSION_NAME "deduplicate_keep_first"

static ProcessUtility_hook_type prev_process_utility = NULL;

ptf_utility_check_hook_type ptf_utility_check_hook = NULL;

/*
 * DROP OWNED BY role: its uids and pipelines in this database go, as
 * ptf.drop_state and ptf.drop_pipeline drop them (DROP OWNED is per
 * database too).
 */
static void
drop_streams_of(Oid role)
{
	Oid			argtypes[1] = {REGROLEOID};
	Datum		args[1] = {ObjectIdGetDatum(role)};
	List	   *uids = NIL;
	ListCell   *lc;
	uint64		i;

	/* pipelines first: drop_state refuses a pipeline's uid */
	ptf_drop_pipelines_of(role);
	ptf_spi_exec_as_owner("SELECT uid FROM ptf.uid_registry "
						  "WHERE owner OPERATOR(pg_catalog.=) $1 ORDER BY uid",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
		uids = lappend(uids, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	foreach(lc, uids)
	{
		char	   *slot_name;

		if (durable_drop(lfirst(lc), false, &slot_name) && slot_name != NULL)
			change_stream_drop_slot_at_commit(slot_name);
	}
}

/*
 * DROP EXTENSION: the tables go with it; what is outside them goes here.
 * Slots of this database made by first calls whose backend died, with no
 * registry row, go too.
 */
static void
drop_all_streams(void)
{
	uint64		i;
	List	   *slots = NIL;
	ListCell   *lc;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(psprintf("ptf\\_%u\\_%%", MyDatabaseId))};

	/* steps in progress finish first, later ones are refused */
	ptf_drop_pipeline_origins();

	/*
	 * The drop locks the extension's objects one by one; a pipeline worker
	 * reading the registry in its own order would deadlock with it.  So
	 * the registry first, in the worker's order: the worker then waits for
	 * the drop holding nothing of ours.
	 */
	ptf_spi_exec_as_owner("LOCK TABLE ptf.pipeline_registry, ptf.uid_registry IN ACCESS EXCLUSIVE MODE",
						  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	ptf_spi_exec_as_owner("SELECT s.slot_name::pg_catalog.text FROM pg_catalog.pg_replication_slots s "
						  "WHERE s.database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
						  "AND (s.slot_name OPERATOR(pg_catalog.=) ANY "
						  "       (SELECT r.slot_name::pg_catalog.name FROM ptf.uid_registry r) "
						  "  OR (s.plugin OPERATOR(pg_catalog.=) '" PTF_EXTENSION_NAME "' "
						  "      AND s.slot_name::pg_catalog.text OPERATOR(pg_catalog.~~) $1))",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
		slots = lappend(slots, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	foreach(lc, slots)
		change_stream_drop_slot_at_commit(lfirst(lc));
}

static bool
names_us(List *objects)
{
	ListCell   *lc;

	foreach(lc, objects)
		if (strcmp(strVal(lfirst(lc)), PTF_EXTENSION_NAME) == 0)
			return true;
	return false;
}

static Oid
extension_owner(void)
{
	Oid			extoid = get_extension_oid(PTF_EXTENSION_NAME, true);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (!OidIsValid(extoid))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/* The event trigger ptf_drop_streams: DROP OWNED, DROP EXTENSION. */
Datum
ptf_drop_streams(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *stmt;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ptf._drop_streams() is an event trigger function")));
	trigdata = (EventTriggerData *) fcinfo->context;
	stmt = trigdata->parsetree;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
	{
		Oid			extoid = get_extension_oid(PTF_EXTENSION_NAME, true);

		/*
		 * This fires before DROP EXTENSION checks who may drop it: whoever
		 * may not must not get the clean-up's locks and drops either.
		 */
		if (names_us(((DropStmt *) stmt)->objects) && OidIsValid(extoid) &&
			pg_extension_ownercheck(extoid, GetUserId()))
			drop_all_streams();
	}
	else if (IsA(stmt, DropOwnedStmt))
	{
		Oid			ext_owner = extension_owner();
		ListCell   *lc;

		foreach(lc, ((DropOwnedStmt *) stmt)->roles)
		{
			Oid			role = get_rolespec_oid(lfirst(lc), true);

			/* DROP OWNED itself refuses these, after us */
			if (!OidIsValid(role) || !has_privs_of_role(GetUserId(), role))
				continue;
			/* the extension is among what the role owns */
			if (role == ext_owner && role != BOOTSTRAP_SUPERUSERID)
				drop_all_streams();
			else
				drop_streams_of(role);
		}
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * DROP ROLE: refused while the role has uids or pipelines here, as for
 * the objects it owns.  Only this database's registry can be seen; DROP
 * OWNED in each database drops them.
 */
static void
refuse_dropping_stream_owners(DropRoleStmt *stmt)
{
	ListCell   *lc;

	if (!OidIsValid(get_extension_oid(PTF_EXTENSION_NAME, true)))
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, stmt->roles)
	{
		RoleSpec   *rs = lfirst(lc);
		Oid			role = rs->roletype == ROLESPEC_CSTRING ?
			get_role_oid(rs->rolename, true) : InvalidOid;
		Oid			argtypes[1] = {REGROLEOID};
		Datum		args[1] = {ObjectIdGetDatum(role)};
		int64		uids;
		int64		pipelines;

		/* DROP ROLE itself refuses CURRENT_USER and the like */
		if (rs->roletype != ROLESPEC_CSTRING || !OidIsValid(role))
			continue;
		ptf_spi_exec_as_owner("SELECT (SELECT pg_catalog.count(*) FROM ptf.uid_registry "
							  "        WHERE owner OPERATOR(pg_catalog.=) $1), "
							  "       (SELECT pg_catalog.count(*) FROM ptf.pipeline_registry "
							  "        WHERE owner OPERATOR(pg_catalog.=) $1)",
							  1, argtypes, args, NULL, SPI_OK_SELECT);
		uids = ptf_spi_int64(1, 0);
		pipelines = ptf_spi_int64(2, 0);
		if (uids > 0 || pipelines > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("role \"%s\" cannot be dropped because it owns uids or pipelines of deduplicate_keep_first",
							rs->rolename),
					 errdetail("It has %lld uids (%lld of them pipelines') in database %s.",
							   (long long) uids, (long long) pipelines,
							   get_database_name(MyDatabaseId)),
					 errhint("DROP OWNED BY %s drops them, with their slots.",
							 quote_identifier(rs->rolename))));
	}
	SPI_finish();
}

/*
 * REASSIGN OWNED BY old TO new: the uids and pipelines of old in this
 * database become new's, as its objects there do (and a later DROP OWNED
 * BY old leaves them).
 *
 * A stream goes on exactly once across the hand-over: its changes not read
 * yet were made while old owned it, and are read with old's rights as of
 * each change (input/change_stream.c), those committed after the REASSIGN
 * with new's -- new had no rights on them then, and would find the stream
 * closed for good at the first.  So each stream records old with the
 * REASSIGN's transaction, until it has read past that transaction's commit.
 * The uids are locked before anything changes, as their calls lock them:
 * no call or pipeline step runs across the hand-over or writes its
 * registry row over it.
 */
static List *
reassigned_roles(ReassignOwnedStmt *stmt)
{
	List	   *roles = NIL;
	ListCell   *lc;

	foreach(lc, stmt->roles)
	{
		Oid			role = get_rolespec_oid(lfirst(lc), true);

		/* REASSIGN OWNED itself refuses the others, after us */
		if (OidIsValid(role) && has_privs_of_role(GetUserId(), role))
			roles = lappend_oid(roles, role);
	}
	return roles;
}

/* SPI: what sql (a query of one parameter, a role) finds of role */
static uint64
owned_by(const char *sql, Oid role)
{
	Oid			argtypes[1] = {REGROLEOID};
	Datum		args[1] = {ObjectIdGetDatum(role)};

	ptf_spi_exec_as_owner(sql, 1, argtypes, args, NULL, SPI_OK_SELECT);
	return SPI_processed;
}

/*
 * The roles' pipelines first, as drop_pipeline locks a pipeline before its
 * uid: a step in progress finishes, and later ones find the pipeline busy
 * and come back after the REASSIGN (worker/step.c).  A step that started
 * would hold its sink and want its source, which the REASSIGN may hold
 * already while it waits for the sink: a deadlock that failed the
 * REASSIGN.  Then the uids, in one order, as any caller of several uids
 * would meet them.
 */
static void
lock_streams_of(ReassignOwnedStmt *stmt)
{
	List	   *roles;
	ListCell   *lc;
	uint64		i;
	uint64		n;
	bool		isnull;

	if (!OidIsValid(get_extension_oid(PTF_EXTENSION_NAME, true)))
		return;
	roles = reassigned_roles(stmt);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, roles)
	{
		n = owned_by("SELECT id FROM ptf.pipeline_registry "
					 "WHERE owner OPERATOR(pg_catalog.=) $1 ORDER BY id", lfirst_oid(lc));
		for (i = 0; i < n; i++)
			(void) ptf_lock(PTF_LOCK_PIPELINE,
							(uint32) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
																 SPI_tuptable->tupdesc, 1, &isnull)),
							ExclusiveLock, false, true);
	}
	foreach(lc, roles)
	{
		n = owned_by("SELECT uid FROM ptf.uid_registry "
					 "WHERE owner OPERATOR(pg_catalog.=) $1 ORDER BY uid", lfirst_oid(lc));
		for (i = 0; i < n; i++)
			(void) ptf_lock_uid(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
								ExclusiveLock, false, true);
	}
	SPI_finish();
}

/* After PostgreSQL's own checks and changes. */
static void
reassign_streams(ReassignOwnedStmt *stmt)
{
	Oid			newrole;
	ListCell   *lc;

	if (!OidIsValid(get_extension_oid(PTF_EXTENSION_NAME, true)))
		return;
	newrole = get_rolespec_oid(stmt->newrole, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, reassigned_roles(stmt))
	{
		Oid			argtypes[2] = {REGROLEOID, REGROLEOID};
		Datum		args[2];

		args[0] = ObjectIdGetDatum(lfirst_oid(lc));
		args[1] = ObjectIdGetDatum(newrole);
		if (args[0] == args[1])
			continue;
		ptf_spi_exec_as_owner("UPDATE ptf.uid_registry SET owner = $2, "
							  "handover_roles = CASE WHEN slot_name IS NULL THEN handover_roles "
							  "  ELSE pg_catalog.array_append(handover_roles, $1::pg_catalog.oid) END, "
							  "handover_xids = CASE WHEN slot_name IS NULL THEN handover_xids "
							  "  ELSE pg_catalog.array_append(handover_xids, pg_catalog.pg_current_xact_id()) END "
							  "WHERE owner OPERATOR(pg_catalog.=) $1",
							  2, argtypes, args, NULL, SPI_OK_UPDATE);
		ptf_spi_exec_as_owner("UPDATE ptf.pipeline_registry SET owner = $2 "
							  "WHERE owner OPERATOR(pg_catalog.=) $1",
							  2, argtypes, args, NULL, SPI_OK_UPDATE);
	}
	SPI_finish();
}

/*
 * The database's pipeline workers are not to be started again; their pids
 * (0: not running) go into pids, ptf_max_workers of them, if given.  True
 * if it had any.  Under the shared-memory lock.
 */
static bool
unwant_workers(Oid dboid, int *pids)
{
	bool		any = false;
	int			i;

	for (i = 0; i < ptf_max_workers; i++)
	{
		DatabaseWorker *w = ptf_database_worker_at(i);

		if (pids)
			pids[i] = 0;
		if (w->dboid != dboid)
			continue;
		w->wanted = false;
		w->left_cleanly = false;	/* nor wanted again by a worker of it */
		if (pids)
			pids[i] = w->pid;
		any = true;
	}
	return any;
}

/*
 * DROP DATABASE: PostgreSQL drops the database's slots; the replication
 * origins of its pipelines are server-wide and named after it.
 */
static void
drop_origins_of_database(Oid dboid)
{
	char	   *prefix = psprintf(PTF_PIPELINE_ORIGIN_PREFIX "%u_", dboid);
	size_t		len = strlen(prefix);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *names = NIL;
	ListCell   *lc;

	rel = table_open(ReplicationOriginRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_replication_origin_roname,
									 RelationGetDescr(rel), &isnull);
		char	   *name;

		if (isnull)
			continue;
		name = TextDatumGetCString(d);
		if (strncmp(name, prefix, len) == 0)
			names = lappend(names, name);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	foreach(lc, names)
		replorigin_drop_by_name(lfirst(lc), true, false);

	/*
	 * Its workers' places are free at once (the launcher would keep them
	 * for their restart pause, taken for workers that failed), and its
	 * pipelines' statuses go.
	 */
	if (ptf_shmem_available())
	{
		ptf_shmem_lock(true);
		(void) unwant_workers(dboid, NULL);
		ptf_forget_database(dboid);
		ptf_shmem_unlock();
		ptf_wake_launcher();
	}
}

/*
 * DROP DATABASE ... WITH (FORCE) checks for active slots before it ends
 * the database's sessions: a pipeline worker in the middle of a step
 * would make it fail now and then.  So a superuser (only one may end
 * the workers, superusers' processes) has the database's workers stopped
 * first, and its slots waited for.
 */
static bool
stop_worker_before_drop(DropdbStmt *stmt, Oid dboid)
{
	ListCell   *lc;
	bool		force = false;
	bool		any;
	int		   *pids;
	int			i;

	foreach(lc, stmt->options)
		if (strcmp(((DefElem *) lfirst(lc))->defname, "force") == 0)
			force = true;
	/* a drop that will fail its own checks stops nothing */
	if (!force || !superuser() || !ptf_shmem_available() ||
		IsTransactionBlock() || dboid == MyDatabaseId)
		return false;
	pids = palloc(sizeof(int) * ptf_max_workers);
	ptf_shmem_lock(true);
	any = unwant_workers(dboid, pids);
	ptf_shmem_unlock();
	for (i = 0; i < ptf_max_workers; i++)
	{
		PGPROC	   *proc;

		if (pids[i] == 0)
			continue;
		/* the place may hold a pid that is no longer its worker's */
		proc = BackendPidGetProc(pids[i]);
		if (proc != NULL && proc->databaseId == dboid)
			(void) kill(pids[i], SIGTERM);
	}
	pfree(pids);
	if (!any)
		return false;
	for (i = 0; i < 1000; i++)
	{
		int			nslots;
		int			nactive;

		(void) ReplicationSlotsCountDBSlots(dboid, &nslots, &nactive);
		if (nactive == 0)
			break;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(10000L);
	}
	return true;
}

/*
 * After DROP DATABASE, which cannot be undone (its files are gone): a
 * failure to drop the origins must not fail it, so it is a WARNING, in a
 * subtransaction of its own.
 */
static void
drop_origins_work(void *arg)
{
	drop_origins_of_database(*(Oid *) arg);
}

static void
drop_origins_after_drop(Oid dboid)
{
	ErrorData  *edata = ptf_try_in_subtransaction(drop_origins_work, &dboid);

	if (edata == NULL)
		return;
	ereport(WARNING,
			(errmsg("could not drop the replication origins of the dropped database's pipelines: %s",
					edata->message),
			 errhint("Drop the origins named ptf_pipeline_%u_* with pg_replication_origin_drop().",
					 dboid)));
	FreeErrorData(edata);
}

static void
ptf_process_utility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	volatile Oid dropped_db = InvalidOid;
	volatile bool stopped = false;
	/* pipelines' queries follow renames (commands/renames.c) */
	void	   *renames;

	if (ptf_utility_check_hook != NULL)
		ptf_utility_check_hook(stmt);
	renames = ptf_renames_before(stmt);
	if (IsA(stmt, DropRoleStmt))
		refuse_dropping_stream_owners((DropRoleStmt *) stmt);
	else if (IsA(stmt, ReassignOwnedStmt))
		lock_streams_of((ReassignOwnedStmt *) stmt);
	else if (IsA(stmt, AlterTableStmt))
		ptf_refuse_unlogging_streamed((AlterTableStmt *) stmt);
	else if (IsA(stmt, DropdbStmt))
	{
		dropped_db = get_database_oid(((DropdbStmt *) stmt)->dbname, true);
		if (OidIsValid(dropped_db))
			stopped = stop_worker_before_drop((DropdbStmt *) stmt, dropped_db);
	}

	PG_TRY();
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		if (stopped)
			ptf_request_worker(dropped_db);	/* the drop failed: wanted again */
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (OidIsValid(dropped_db))
		drop_origins_after_drop(dropped_db);
	else if (IsA(stmt, ReassignOwnedStmt))
		reassign_streams((ReassignOwnedStmt *) stmt);
	ptf_renames_after(renames);
}

void
ptf_drops_init(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = ptf_process_utility;
}
