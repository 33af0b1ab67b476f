/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: a background worker started with the server (from
 *	  shared_preload_libraries) that keeps the pipeline workers running
 *	  that databases want: worker 0 of every database with pipelines, and
 *	  the further ones its running workers ask for (worker/pipeline.c).
 *
 * A worker can connect to one database only, so the launcher connects to
 * none.  At start it looks at every database once (a worker started there
 * finds out whether it has pipelines, and leaves if not); afterwards a
 * database asks for a worker when a pipeline is created in it, or rows are
 * put in its ptf.pipeline_registry otherwise, as pg_restore does
 * (ptf_request_worker).  A database made as a copy of another (CREATE
 * DATABASE ... TEMPLATE) arrives with its pipelines and nobody to ask: the
 * launcher reads pg_database every few seconds and looks at the databases
 * it had not seen.  A worker that dies is started again after a pause; one
 * that leaves because it has no pipelines left to run is not.  The
 * launcher starts the entries of shared memory, whatever their index: it
 * does not know owners, which only a worker connected to the database can
 * read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "worker/shmem.h"
#include "worker/worker.h"

PGDLLEXPORT void ptf_launcher_main(Datum arg);

#define RESTART_PAUSE_MS	5000	/* before starting a dead worker again */
#define LAUNCHER_NAP_MS		10000
#define RESCAN_MS			5000	/* pg_database read again for new databases */

/* databases not looked at yet */
static List *unprobed = NIL;

/* the databases a worker may connect to, as pg_database was last read */
static List *known = NIL;

void
ptf_register_launcher(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	strlcpy(bgw.bgw_library_name, "deduplicate_keep_first", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "ptf_launcher_main", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "ptf pipeline launcher", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "ptf pipeline launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/*
 * Databases to look at: every one, or those that were not there (or did
 * not allow connections) when pg_database was last read.  Reading it costs
 * a scan of a small catalog; a database is looked at (a worker started
 * there, which leaves at once when it has no pipelines) once, when it
 * appears, not again every time.
 */
static void
probe_databases(bool all)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext outer = CurrentMemoryContext;
	List	   *now_known = NIL;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old;

		if (!db->datallowconn || db->datistemplate)
			continue;
		old = MemoryContextSwitchTo(outer);
		now_known = lappend_oid(now_known, db->oid);
		if ((all || !list_member_oid(known, db->oid)) && !list_member_oid(unprobed, db->oid))
			unprobed = lappend_oid(unprobed, db->oid);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	list_free(known);
	known = now_known;
}

static bool
database_exists(Oid dboid)
{
	bool		exists;

	StartTransactionCommand();
	exists = SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dboid));
	CommitTransactionCommand();
	return exists;
}

static bool
start_worker(Oid dboid, int index, BackgroundWorkerHandle **handle)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(bgw.bgw_library_name, "deduplicate_keep_first", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "ptf_pipeline_worker_main", BGW_MAXLEN);
	snprintf(bgw.bgw_name, BGW_MAXLEN, "ptf pipeline worker %d for database %u", index, dboid);
	strlcpy(bgw.bgw_type, "ptf pipeline worker", BGW_MAXLEN);
	bgw.bgw_main_arg = ObjectIdGetDatum(dboid);
	memcpy(bgw.bgw_extra, &index, sizeof(index));
	bgw.bgw_notify_pid = MyProcPid;
	return RegisterDynamicBackgroundWorker(&bgw, handle);
}

void
ptf_launcher_main(Datum arg)
{
	BackgroundWorkerHandle **handles;
	Oid		   *to_start;
	int		   *to_start_index;
	MemoryContext cxt;
	TimestampTz next_scan;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	cxt = AllocSetContextCreate(TopMemoryContext, "ptf launcher", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	handles = palloc0(sizeof(BackgroundWorkerHandle *) * ptf_max_workers);
	to_start = palloc0(sizeof(Oid) * ptf_max_workers);
	to_start_index = palloc0(sizeof(int) * ptf_max_workers);
	ptf_shmem_set_launcher(MyLatch);
	probe_databases(true);
	next_scan = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RESCAN_MS);

	while (!ShutdownRequestPending)
	{
		TimestampTz now = GetCurrentTimestamp();
		long		nap = LAUNCHER_NAP_MS;
		int			i;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/* a database asked while every place was taken: look at all again */
		if (ptf_take_probe_all())
		{
			list_free(unprobed);
			unprobed = NIL;
			probe_databases(true);
		}
		if (now >= next_scan)
		{
			probe_databases(false);
			next_scan = TimestampTzPlusMilliseconds(now, RESCAN_MS);
		}
		nap = Min(nap, (long) ((next_scan - now) / 1000) + 1);

		ptf_shmem_lock(true);
		/* databases not yet looked at take free places */
		while (unprobed != NIL)
		{
			Oid			dboid = linitial_oid(unprobed);
			DatabaseWorker *w = ptf_database_worker(dboid, 0, false);

			if (w == NULL)
			{
				w = ptf_database_worker(dboid, 0, true);
				if (w == NULL)
					break;		/* all taken: later */
				w->wanted = true;
			}
			unprobed = list_delete_first(unprobed);
		}

		for (i = 0; i < ptf_max_workers; i++)
		{
			DatabaseWorker *w = ptf_database_worker_at(i);
			pid_t		pid;

			if (handles[i] != NULL &&
				GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
			{
				pfree(handles[i]);
				handles[i] = NULL;
				w->pid = 0;
				w->latch = NULL;
				/*
				 * Wanted still: it failed (try again after a pause), or it
				 * left just as a pipeline was made (start one at once).
				 */
				if (w->wanted)
					w->retry_at = w->left_cleanly ? 0 :
						TimestampTzPlusMilliseconds(now, RESTART_PAUSE_MS);
				w->left_cleanly = false;
			}
			/* a worker with a pid and no handle was started by a launcher before this one */
			if (w->dboid == InvalidOid || handles[i] != NULL || w->pid != 0)
				continue;
			if (!w->wanted)
			{
				w->dboid = InvalidOid;	/* the place is free again */
				continue;
			}
			if (w->retry_at > now)
			{
				nap = Min(nap, (long) ((w->retry_at - now) / 1000) + 1);
				continue;
			}
			to_start[i] = w->dboid;
			to_start_index[i] = w->index;
		}
		ptf_shmem_unlock();

		/* catalog lookups and starts without the lock */
		for (i = 0; i < ptf_max_workers; i++)
		{
			Oid			dboid = to_start[i];
			bool		exists;
			bool		started = false;

			if (dboid == InvalidOid)
				continue;
			to_start[i] = InvalidOid;
			exists = database_exists(dboid);
			if (exists)
			{
				started = start_worker(dboid, to_start_index[i], &handles[i]);
				if (!started)
				{
					handles[i] = NULL;
					ereport(LOG,
							(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
							 errmsg("could not start pipeline worker %d for database %u",
									to_start_index[i], dboid),
							 errhint("Raise max_worker_processes.")));
				}
			}
			ptf_shmem_lock(true);
			{
				DatabaseWorker *w = ptf_database_worker_at(i);

				/* the place may have been freed and taken meanwhile */
				if (w->dboid == dboid && w->index == to_start_index[i])
				{
					if (!exists)
					{
						w->wanted = false;	/* dropped meanwhile */
						w->dboid = InvalidOid;
						ptf_forget_database(dboid);
					}
					else if (!started)
					{
						w->retry_at = TimestampTzPlusMilliseconds(now, RESTART_PAUSE_MS);
						w->start_failed = true;
					}
				}
			}
			ptf_shmem_unlock();
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 nap, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	ptf_shmem_set_launcher(NULL);
	/* not 0: a launcher stopped by hand is started again */
	proc_exit(1);
}
