/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The shared-memory area of the pipeline workers: one struct with a
 *	  fixed array of databases and one of pipeline statuses, under one
 *	  LWLock.  Requested in shmem_request_hook (PostgreSQL 15), set up in
 *	  shmem_startup_hook -- again, zeroed, after every crash restart.
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
	DatabaseWorker *databases;	/* ptf_max_workers of them */
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

DatabaseWorker *
ptf_database_worker(Oid dboid, bool create)
{
	DatabaseWorker *free_entry = NULL;
	int			i;

	for (i = 0; i < ptf_max_workers; i++)
	{
		DatabaseWorker *w = &shared->databases[i];

		if (w->dboid == dboid)
			return w;
		if (w->dboid == InvalidOid && free_entry == NULL)
			free_entry = w;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(DatabaseWorker));
	free_entry->dboid = dboid;
	return free_entry;
}

void
ptf_request_worker(Oid dboid)
{
	DatabaseWorker *w;
	Latch	   *worker_latch = NULL;
	bool		have_slot;

	if (shared == NULL)
		return;
	ptf_shmem_lock(true);
	w = ptf_database_worker(dboid, true);
	have_slot = (w != NULL);
	if (w != NULL)
	{
		w->wanted = true;
		w->generation++;
		w->retry_at = 0;
		if (w->pid != 0)
			worker_latch = w->latch;
	}
	ptf_shmem_unlock();
	if (!have_slot)
	{
		ptf_shmem_lock(true);
		shared->probe_all = true;
		ptf_shmem_unlock();
		ereport(WARNING,
				(errmsg("no pipeline worker can be started for this database now"),
				 errdetail("ptf.max_workers (%d) databases have one; this one gets one when a place is free.",
						   ptf_max_workers),
				 errhint("Raise ptf.max_workers (needs a restart).")));
	}
	if (worker_latch)
		SetLatch(worker_latch);
	else
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
