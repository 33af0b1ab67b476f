/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The shared-memory area of the pipeline workers: one struct with a
 *	  fixed array of worker entries (ptf.max_workers, shared by all
 *	  databases: the entries of a database are those with its OID) and one
 *	  of pipeline statuses, under one LWLock.  Requested in
 *	  shmem_request_hook (PostgreSQL 15), set up in shmem_startup_hook --
 *	  again, zeroed, after every crash restart.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "worker/shmem.h"

int			ptf_max_workers = 4;
int			ptf_max_pipelines = 64;

typedef struct PtfShared
{
	LWLock	   *lock;
	Latch	   *launcher_latch;
	bool		probe_all;		/* a database found no free place: look again */
	DatabaseWorker *databases;	/* ptf_max_workers workers' entries */
	PipelineStatus *pipelines;	/* ptf_max_pipelines of them */
} PtfShared;

static PtfShared *shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
shared_size(void)
{
	Size		size = MAXALIGN(sizeof(PtfShared));

	size = add_size(size, mul_size(ptf_max_workers, sizeof(DatabaseWorker)));
	size = add_size(size, mul_size(ptf_max_pipelines, sizeof(PipelineStatus)));
	return size;
}

static void
request_shmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("deduplicate_keep_first", 1);
}

static void
startup_shmem(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("deduplicate_keep_first", shared_size(), &found);
	if (!found)
	{
		char	   *p = (char *) shared;

		memset(shared, 0, shared_size());
		shared->lock = &(GetNamedLWLockTranche("deduplicate_keep_first"))->lock;
		p += MAXALIGN(sizeof(PtfShared));
		shared->databases = (DatabaseWorker *) p;
		p += ptf_max_workers * sizeof(DatabaseWorker);
		shared->pipelines = (PipelineStatus *) p;
	}
	LWLockRelease(AddinShmemInitLock);
}

void
ptf_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = request_shmem;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = startup_shmem;
}

bool
ptf_shmem_available(void)
{
	return shared != NULL;
}

void
ptf_shmem_lock(bool exclusive)
{
	LWLockAcquire(shared->lock, exclusive ? LW_EXCLUSIVE : LW_SHARED);
}

void
ptf_shmem_unlock(void)
{
	LWLockRelease(shared->lock);
}

void
ptf_shmem_set_launcher(Latch *latch)
{
	ptf_shmem_lock(true);
	shared->launcher_latch = latch;
	ptf_shmem_unlock();
}

bool
ptf_take_probe_all(void)
{
	bool		probe;

	ptf_shmem_lock(true);
	probe = shared->probe_all;
	shared->probe_all = false;
	ptf_shmem_unlock();
	return probe;
}

void
ptf_forget_database(Oid dboid)
{
	int			i;

	for (i = 0; i < ptf_max_pipelines; i++)
		if (shared->pipelines[i].dboid == dboid)
			memset(&shared->pipelines[i], 0, sizeof(PipelineStatus));
}

void
ptf_wake_launcher(void)
{
	Latch	   *latch;

	ptf_shmem_lock(false);
	latch = shared->launcher_latch;
	ptf_shmem_unlock();
	if (latch)
		SetLatch(latch);
}

DatabaseWorker *
ptf_database_worker_at(int i)
{
	return (i >= 0 && i < ptf_max_workers) ? &shared->databases[i] : NULL;
}

/*
 * A database's further workers (index > 0) never take the last free place:
 * it is kept for a database that has no worker yet, which would otherwise
 * wait for another database to lose an owner.
 */
DatabaseWorker *
ptf_database_worker(Oid dboid, int index, bool create)
{
	DatabaseWorker *free_entry = NULL;
	int			nfree = 0;
	int			i;

	for (i = 0; i < ptf_max_workers; i++)
	{
		DatabaseWorker *w = &shared->databases[i];

		if (w->dboid == dboid && w->index == index)
			return w;
		if (w->dboid == InvalidOid)
		{
			if (free_entry == NULL)
				free_entry = w;
			nfree++;
		}
	}
	if (!create || free_entry == NULL || (index > 0 && nfree < 2))
		return NULL;
	memset(free_entry, 0, sizeof(DatabaseWorker));
	free_entry->dboid = dboid;
	free_entry->index = index;
	return free_entry;
}

DatabaseWorker *
ptf_database_worker_of_pid(Oid dboid, int pid)
{
	int			i;

	if (pid == 0)
		return NULL;
	for (i = 0; i < ptf_max_workers; i++)
		if (shared->databases[i].dboid == dboid && shared->databases[i].pid == pid)
			return &shared->databases[i];
	return NULL;
}

/*
 * The pipelines are shared out over the wanted workers, running or not:
 * an owner whose worker is starting, or was stopped and waits for its
 * restart, waits with it -- its step that ended the worker does not end
 * another owner's next.  Only a worker that could not be started at all
 * (no background worker free) is left out meanwhile, its owners run by
 * the others.  A place given up by someone else (DROP DATABASE) is not
 * wanted again.
 */
uint64
ptf_database_workers_want(Oid dboid, int n, bool *added)
{
	uint64		workers = 0;
	int			index;

	*added = false;
	for (index = 0; index < Min(n, PTF_MAX_WORKERS_PER_DATABASE); index++)
	{
		DatabaseWorker *w = ptf_database_worker(dboid, index, false);

		if (w == NULL)
		{
			w = ptf_database_worker(dboid, index, true);
			if (w == NULL)
				continue;
			w->wanted = true;
			*added = true;
		}
		else if (!w->wanted && w->left_cleanly)
		{
			/* it found nothing to run just now: there is again */
			w->wanted = true;
			*added = true;
		}
		if (w->wanted && !w->start_failed)
			workers |= UINT64CONST(1) << index;
	}
	return workers;
}

void
ptf_request_worker(Oid dboid)
{
	DatabaseWorker *w;
	bool		have_slot;
	bool		first_running;
	int			i;

	if (shared == NULL)
		return;
	ptf_shmem_lock(true);
	w = ptf_database_worker(dboid, 0, true);
	have_slot = (w != NULL);
	first_running = (w != NULL && w->pid != 0);
	if (w != NULL)
	{
		w->wanted = true;
		w->retry_at = 0;
	}
	/* every worker of the database looks again: the owners may have changed */
	for (i = 0; i < ptf_max_workers; i++)
	{
		w = &shared->databases[i];
		if (w->dboid != dboid)
			continue;
		w->generation++;
		if (w->pid != 0 && w->latch != NULL)
			SetLatch(w->latch);
	}
	if (!have_slot)
		shared->probe_all = true;
	ptf_shmem_unlock();
	if (!have_slot)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no pipeline worker can be started for this database now"),
				 errdetail("ptf.max_workers (%d) pipeline workers run in other databases; this one gets one when a place is free.",
						   ptf_max_workers),
				 errhint("Raise ptf.max_workers (needs a restart).")));
	if (!first_running)
		ptf_wake_launcher();
}

PipelineStatus *
ptf_pipeline_status_at(int i)
{
	return (i >= 0 && i < ptf_max_pipelines) ? &shared->pipelines[i] : NULL;
}

PipelineStatus *
ptf_pipeline_status(Oid dboid, int32 id, bool create)
{
	PipelineStatus *free_entry = NULL;
	int			i;

	for (i = 0; i < ptf_max_pipelines; i++)
	{
		PipelineStatus *s = &shared->pipelines[i];

		if (s->dboid == dboid && s->id == id)
			return s;
		if (s->dboid == InvalidOid && free_entry == NULL)
			free_entry = s;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(PipelineStatus));
	free_entry->dboid = dboid;
	free_entry->id = id;
	return free_entry;
}

void
ptf_pipeline_status_forget(Oid dboid, int32 id)
{
	PipelineStatus *s = ptf_pipeline_status(dboid, id, false);

	if (s)
		memset(s, 0, sizeof(PipelineStatus));
}
