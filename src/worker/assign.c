/*-------------------------------------------------------------------------
 *
 * assign.c
 *	  Which of the database's pipeline workers runs which pipelines.
 *
 * A database has up to ptf.max_workers_per_database workers, so that one
 * owner's slow step does not hold up other owners' pipelines.  Owners are
 * isolated: the owners of the database's pipelines are ranked by their
 * oldest pipeline (lowest id), and the owner of rank r goes to the
 * (r mod n)-th of the database's n workers -- one owner's pipelines always
 * to one worker, different owners to different workers while there are as
 * many workers as owners.  Each worker works this out from the registry
 * and asks for the workers the database lacks (at most one per owner).
 * An owner whose worker is starting, or restarting after it was ended,
 * waits for it: a step that ended its worker must not end another owner's
 * too.  While the assignment changes two workers may both take up one
 * pipeline: its step's lock keeps them from running it at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "worker/pipeline_internal.h"
#include "worker/shmem.h"
#include "worker/worker.h"

/* Statuses of pipelines that are gone are forgotten. */
void
pipeline_forget_dropped(List *pipelines)
{
	int			i;

	ptf_shmem_lock(true);
	for (i = 0;; i++)
	{
		PipelineStatus *st = ptf_pipeline_status_at(i);
		ListCell   *lc;
		bool		found = false;

		if (st == NULL)
			break;
		if (st->dboid != MyDatabaseId)
			continue;
		foreach(lc, pipelines)
			if (((Pipeline *) lfirst(lc))->id == st->id)
				found = true;
		if (!found)
			memset(st, 0, sizeof(PipelineStatus));
	}
	ptf_shmem_unlock();
}

/*
 * The database's owners, each once, ranked by their oldest pipeline:
 * pipelines come ordered by id.  An owner keeps its rank while owners of
 * newer pipelines come and go.
 */
static List *
ranked_owners(List *pipelines)
{
	List	   *owners = NIL;
	ListCell   *lc;

	foreach(lc, pipelines)
	{
		Oid			owner = ((Pipeline *) lfirst(lc))->owner;

		if (!list_member_oid(owners, owner))
			owners = lappend_oid(owners, owner);
	}
	return owners;
}

static int
owner_rank(List *owners, Oid owner)
{
	ListCell   *lc;

	foreach(lc, owners)
		if (lfirst_oid(lc) == owner)
			return foreach_current_index(lc);
	return 0;
}

/* The index of the k-th (from 0) worker of the set. */
static int
kth_worker(uint64 workers, int k)
{
	int			index;

	for (index = 0; index < PTF_MAX_WORKERS_PER_DATABASE; index++)
		if ((workers & (UINT64CONST(1) << index)) != 0 && k-- == 0)
			return index;
	return -1;
}

static int
count_workers(uint64 workers)
{
	int			n = 0;

	for (; workers != 0; workers &= workers - 1)
		n++;
	return n;
}

/*
 * The workers the database runs its owners on: as many as it has owners,
 * up to ptf.max_workers_per_database, those a place was found for, and of
 * them those running.  Those it lacks are asked of the launcher.
 */
static uint64
database_workers(int owners)
{
	uint64		workers;
	bool		added;

	ptf_shmem_lock(true);
	workers = ptf_database_workers_want(MyDatabaseId,
										Min(owners, ptf_max_workers_per_database), &added);
	ptf_shmem_unlock();
	if (added)
		ptf_wake_launcher();
	return workers;
}

/*
 * The pipelines this worker runs (see the header).  Their statuses name
 * this worker; those of pipelines it no longer runs name none until their
 * new worker takes them up, so pipeline_status says "waiting" meanwhile.
 */
List *
pipeline_assigned(PipelineWorker *w, List *pipelines)
{
	List	   *owners = ranked_owners(pipelines);
	uint64		workers = database_workers(list_length(owners));
	int			nworkers = count_workers(workers);
	List	   *mine = NIL;
	ListCell   *lc;

	ptf_shmem_lock(true);
	foreach(lc, pipelines)
	{
		Pipeline   *p = lfirst(lc);
		int			rank = owner_rank(owners, p->owner);
		bool		is_mine = nworkers > 0 && kth_worker(workers, rank % nworkers) == w->index;
		PipelineStatus *st = ptf_pipeline_status(MyDatabaseId, p->id, is_mine);

		if (is_mine)
			mine = lappend(mine, p);
		if (st == NULL)
			continue;
		if (is_mine)
			st->pid = MyProcPid;
		else if (st->pid == MyProcPid)
			st->pid = 0;
	}
	ptf_shmem_unlock();
	return mine;
}
