/*-------------------------------------------------------------------------
 *
 * wake.c
 *	  Pipeline workers woken at commit.  A worker that found nothing to do
 *	  would otherwise nap ptf.pipeline_idle_time between looks, and a fresh
 *	  change would wait for the end of the nap; instead, the commit of a
 *	  transaction that wrote a table a worker's pipelines read sets that
 *	  worker's latch.  The nap stays, as the fallback for what is not seen
 *	  here.
 *
 * Which tables did the transaction write?  Two ways were weighed:
 *
 * - ExecutorStart/ProcessUtility hooks noting result relations, COPY and
 *   TRUNCATE: a cost on every statement of every backend, and blind to
 *   writes that do not come through a top-level executor (the apply
 *   worker of a subscription, say).
 * - The cumulative statistics: every heap insert, update, delete and
 *   truncate already counts in the table's pending entry of this backend,
 *   with a record of the (sub)transaction that did it ("trans"), which
 *   exists exactly while a live (sub)transaction of ours wrote the table:
 *   an aborted subtransaction's goes, the top level's goes at the end of
 *   the transaction -- after the commit callbacks.  Nothing is paid per
 *   statement; at the commit of a transaction with an xid, in a database
 *   where some worker watches, one lookup in the backend's local hash of
 *   statistics entries per watched table.
 *
 * The second is used (xact_writes.c).  Its price: it reads
 * pgstat_internal.h (the PG 15 layout of a pending entry), and it needs
 * track_counts (on by default);
 * with track_counts off, any commit with an xid in a watched database
 * wakes its workers.  Not seen at all: COMMIT PREPARED (a prepared
 * transaction's counts go to its two-phase state) and writes made while
 * track_counts was off in the session; they wait for the nap.
 *
 * When: the tables are looked up at XACT_EVENT_PRE_COMMIT, where an error
 * (out of memory) still aborts the transaction cleanly -- after
 * XACT_EVENT_COMMIT it would be a PANIC -- and the latches are set at
 * XACT_EVENT_COMMIT, when the commit is visible and, with
 * synchronous_commit on, flushed.  Logical decoding reads flushed WAL
 * only: with synchronous_commit off the worker would find nothing yet and
 * nap again, so the commit's end is noted in shared memory and the woken
 * worker flushes the WAL up to it itself (as the WAL writer would within
 * wal_writer_delay): the writer's commit stays asynchronous, the worker
 * pays the flush.
 *
 * Shared memory: (database, table, worker latch) entries and a generation
 * that moves whenever they change.  Backends keep a copy of their
 * database's entries and read them again, under the lock, only when the
 * generation moved: a commit in a database without pipelines reads one
 * counter.  Entries are a cache like the rest of the workers' shared
 * memory: zeroed at every restart, given again by each worker.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "lib/qunique.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "worker/shmem.h"
#include "worker/wake.h"

bool		ptf_pipeline_wake_at_commit = true;

#define WAKE_TRANCHE "deduplicate_keep_first wake"

typedef struct WakeEntry
{
	Oid			dboid;			/* InvalidOid: free */
	Oid			relid;			/* InvalidOid: any write in the database */
	int			pid;			/* the worker that watches */
	Latch	   *latch;			/* ... and its latch */
} WakeEntry;

typedef struct WakeShared
{
	LWLock	   *lock;
	pg_atomic_uint64 generation;	/* moves whenever the entries change */
	pg_atomic_uint64 unflushed; /* the end of the newest waking commit that
								 * was not flushed when it woke */
	int			nentries;
	WakeEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} WakeShared;

static WakeShared *wake = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* a backend's copy of its database's entries, as of seen_generation */
static WakeEntry *local_entries = NULL;
static int	nlocal = 0;
static uint64 seen_generation = 0;

/* the latches this transaction's commit sets */
static Latch **to_wake = NULL;
static int	nto_wake = 0;

/* a worker: what it published last */
static Oid *published = NULL;
static int	npublished = -2;	/* -2: nothing yet */

/*
 * Each pipeline's tables (most read one, a temporal join two), and one
 * entry per worker to spare for a worker that does not know its tables.
 */
static int
wake_entries(void)
{
	return 2 * ptf_max_pipelines + ptf_max_workers;
}

static Size
wake_size(void)
{
	return add_size(offsetof(WakeShared, entries),
					mul_size(wake_entries(), sizeof(WakeEntry)));
}

static void
request_shmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(wake_size());
	RequestNamedLWLockTranche(WAKE_TRANCHE, 1);
}

static void
startup_shmem(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wake = ShmemInitStruct(WAKE_TRANCHE, wake_size(), &found);
	if (!found)
	{
		memset(wake, 0, wake_size());
		wake->lock = &(GetNamedLWLockTranche(WAKE_TRANCHE))->lock;
		/* 1, not 0: a backend that has read nothing has seen 0 */
		pg_atomic_init_u64(&wake->generation, 1);
		pg_atomic_init_u64(&wake->unflushed, InvalidXLogRecPtr);
		wake->nentries = wake_entries();
	}
	LWLockRelease(AddinShmemInitLock);
}

/* ---- the committing backend ---- */

/* Read the database's entries again if a worker changed any. */
static void
refresh_local_entries(void)
{
	int			i;

	if (pg_atomic_read_u64(&wake->generation) == seen_generation)
		return;
	if (local_entries == NULL)
	{
		local_entries = MemoryContextAlloc(TopMemoryContext,
										   wake->nentries * sizeof(WakeEntry));
		to_wake = MemoryContextAlloc(TopMemoryContext,
									 wake->nentries * sizeof(Latch *));
	}
	LWLockAcquire(wake->lock, LW_SHARED);
	/* under the lock: a worker moves it under the lock, after its change */
	seen_generation = pg_atomic_read_u64(&wake->generation);
	nlocal = 0;
	for (i = 0; i < wake->nentries; i++)
		if (wake->entries[i].dboid == MyDatabaseId)
			local_entries[nlocal++] = wake->entries[i];
	LWLockRelease(wake->lock);
}

/* Did this transaction (a live part of it) write the table?  Not known: yes. */
static bool
wrote_table(Oid relid)
{
	bool		known;

	return ptf_xact_wrote_table(relid, &known) || !known;
}

static void
find_workers_to_wake(void)
{
	int			i;

	refresh_local_entries();
	for (i = 0; i < nlocal; i++)
	{
		Latch	   *latch = local_entries[i].latch;
		bool		listed = false;
		int			j;

		for (j = 0; j < nto_wake && !listed; j++)
			listed = (to_wake[j] == latch);
		if (!listed && wrote_table(local_entries[i].relid))
			to_wake[nto_wake++] = latch;
	}
}

/* The commit's end, unless flushed already: the worker flushes up to it. */
static void
note_unflushed_commit(void)
{
	XLogRecPtr	end = XactLastCommitEnd;
	uint64		old;

	if (XLogRecPtrIsInvalid(end) || end <= GetFlushRecPtr(NULL))
		return;
	old = pg_atomic_read_u64(&wake->unflushed);
	while (old < end &&
		   !pg_atomic_compare_exchange_u64(&wake->unflushed, &old, end))
		;
}

static void
wake_at_commit(XactEvent event, void *arg)
{
	int			i;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			nto_wake = 0;
			/* no xid: nothing written; no database: no pipelines */
			if (ptf_pipeline_wake_at_commit && OidIsValid(MyDatabaseId) &&
				TransactionIdIsValid(GetTopTransactionIdIfAny()))
				find_workers_to_wake();
			break;
		case XACT_EVENT_COMMIT:
			if (nto_wake == 0)
				break;
			note_unflushed_commit();
			/*
			 * A latch copied before its worker left may be another
			 * process's by now: it wakes once for nothing.
			 */
			for (i = 0; i < nto_wake; i++)
				SetLatch(to_wake[i]);
			nto_wake = 0;
			break;
		default:
			/* aborted, prepared (its COMMIT PREPARED is not seen), parallel */
			nto_wake = 0;
			break;
	}
}

/* ---- the pipeline worker ---- */

/* under the exclusive lock */
static void
remove_my_entries(void)
{
	int			i;

	for (i = 0; i < wake->nentries; i++)
		if (wake->entries[i].pid == MyProcPid && wake->entries[i].dboid != InvalidOid)
			memset(&wake->entries[i], 0, sizeof(WakeEntry));
}

/* under the exclusive lock; false when there is no room */
static bool
add_entry(Oid relid)
{
	int			i;

	for (i = 0; i < wake->nentries; i++)
	{
		WakeEntry  *e = &wake->entries[i];

		if (e->dboid != InvalidOid)
			continue;
		e->dboid = MyDatabaseId;
		e->relid = relid;
		e->pid = MyProcPid;
		e->latch = MyLatch;
		return true;
	}
	return false;
}

static void
unwatch_at_exit(int code, Datum arg)
{
	if (wake == NULL || npublished == -2)
		return;
	LWLockAcquire(wake->lock, LW_EXCLUSIVE);
	remove_my_entries();
	pg_atomic_fetch_add_u64(&wake->generation, 1);
	LWLockRelease(wake->lock);
}

void
ptf_wake_watch(const Oid *relids, int n)
{
	Oid		   *sorted = NULL;
	bool		fits = true;
	int			i;

	if (wake == NULL)
		return;
	if (n > 0)
	{
		sorted = palloc(n * sizeof(Oid));
		memcpy(sorted, relids, n * sizeof(Oid));
		qsort(sorted, n, sizeof(Oid), oid_cmp);
		n = qunique(sorted, n, sizeof(Oid), oid_cmp);
	}
	/* steps run again and again; the entries change with the pipelines only */
	if (n == npublished &&
		(n <= 0 || memcmp(sorted, published, n * sizeof(Oid)) == 0))
		return;

	if (npublished == -2)
		before_shmem_exit(unwatch_at_exit, 0);
	LWLockAcquire(wake->lock, LW_EXCLUSIVE);
	remove_my_entries();
	if (n < 0)
		fits = add_entry(InvalidOid);
	else
		for (i = 0; i < n && fits; i++)
			fits = add_entry(sorted[i]);
	if (!fits && n >= 0)
	{
		/* no room for each table: one entry for the whole database */
		remove_my_entries();
		fits = add_entry(InvalidOid);
	}
	pg_atomic_fetch_add_u64(&wake->generation, 1);
	LWLockRelease(wake->lock);

	if (!fits)
		ereport(LOG,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("pipeline worker of database %u is not woken at commit: no room left to say what it watches",
						MyDatabaseId),
				 errhint("Raise ptf.max_pipelines (needs a restart); until then the worker looks every ptf.pipeline_idle_time.")));

	if (published != NULL)
		pfree(published);
	published = NULL;
	if (n > 0)
	{
		published = MemoryContextAlloc(TopMemoryContext, n * sizeof(Oid));
		memcpy(published, sorted, n * sizeof(Oid));
	}
	npublished = n;
}

void
ptf_wake_flush_commits(void)
{
	XLogRecPtr	end;

	if (wake == NULL)
		return;
	end = pg_atomic_read_u64(&wake->unflushed);
	if (!XLogRecPtrIsInvalid(end) && end > GetFlushRecPtr(NULL))
		XLogFlush(end);
}

void
ptf_wake_init(bool preloading)
{
	DefineCustomBoolVariable("ptf.pipeline_wake_at_commit",
							 "Wake a pipeline worker when a transaction that wrote a table its pipelines read commits.",
							 "Off: the worker looks for new changes every ptf.pipeline_idle_time only.",
							 &ptf_pipeline_wake_at_commit,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	if (!preloading)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = request_shmem;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = startup_shmem;
	/* registered in the postmaster: every backend forked from it has it */
	RegisterXactCallback(wake_at_commit, NULL);
}
