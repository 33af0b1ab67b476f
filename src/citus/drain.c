/*-------------------------------------------------------------------------
 *
 * drain.c
 *	  A shard pipeline made to catch up, now, with everything committed:
 *	  what a move needs of the group's pipeline once Citus has blocked the
 *	  group's writes, before it copies the sink.
 *
 * The backend that needs it (the move's, on the group's node) flushes the
 * WAL -- a commit with synchronous_commit off is then readable too --,
 * asks through shared memory, wakes the database's pipeline workers and
 * waits.  The worker that runs the pipeline steps it at once, past its
 * fence (the asker holds the group's lock the fence would wait for), and
 * says so when a step that read to the end of the WAL has committed
 * (ptf_citus_step_done, called by the worker after each step); a failed
 * step fails the asker with the pipeline's error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/drain.h"
#include "citus/shard.h"

#define DRAIN_SLOTS 64
#define DRAIN_LISTENERS 64

typedef struct DrainSlot
{
	Oid			dboid;			/* InvalidOid: free */
	int32		pipeline;
	uint32		requested;		/* generations of requests */
	uint32		done;
	uint32		failed;
	int			waiters;		/* askers still looking at it */
} DrainSlot;

typedef struct DrainListener
{
	Oid			dboid;
	int			pid;
	Latch	   *latch;
} DrainListener;

typedef struct DrainShared
{
	slock_t		mutex;
	DrainSlot	slots[DRAIN_SLOTS];
	DrainListener listeners[DRAIN_LISTENERS];
} DrainShared;

static DrainShared *shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

int			ptf_citus_drain_timeout_ms = 60000;
int			ptf_citus_pending_timeout_ms = 60000;

/* the worker's drain step under way: its pipeline and generation */
static int32 draining_pipeline = 0;
static uint32 draining_generation = 0;
static bool listening = false;

static void
request_shmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(DrainShared)));
}

static void
startup_shmem(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("ptf citus drains", sizeof(DrainShared), &found);
	if (!found)
	{
		memset(shared, 0, sizeof(DrainShared));
		SpinLockInit(&shared->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
citus_drain_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = request_shmem;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = startup_shmem;
}

/* under the mutex */
static DrainSlot *
find_slot(Oid dboid, int32 pipeline, bool create)
{
	DrainSlot  *free_slot = NULL;
	int			i;

	for (i = 0; i < DRAIN_SLOTS; i++)
	{
		DrainSlot  *s = &shared->slots[i];

		if (s->dboid == dboid && s->pipeline == pipeline)
			return s;
		if (free_slot == NULL && s->waiters == 0 &&
			(s->dboid == InvalidOid || (s->requested == s->done || s->requested == s->failed)))
			free_slot = s;
	}
	if (!create || free_slot == NULL)
		return NULL;
	free_slot->dboid = dboid;
	free_slot->pipeline = pipeline;
	free_slot->requested = free_slot->done = free_slot->failed = 0;
	free_slot->waiters = 0;
	return free_slot;
}

static bool
pending(const DrainSlot *s)
{
	return s->requested != s->done && s->requested != s->failed;
}

/* ---- the pipeline worker's side ---- */

bool
ptf_citus_drain_wanted(int32 pipeline_id)
{
	DrainSlot  *s;
	bool		wanted;

	if (shared == NULL)
		return false;
	SpinLockAcquire(&shared->mutex);
	if (!listening)
	{
		/* the worker may be woken: a place of its own, or the oldest */
		int			i;
		int			at = 0;

		for (i = 0; i < DRAIN_LISTENERS; i++)
			if (shared->listeners[i].pid == 0 || shared->listeners[i].pid == MyProcPid)
			{
				at = i;
				break;
			}
		shared->listeners[at].dboid = MyDatabaseId;
		shared->listeners[at].pid = MyProcPid;
		shared->listeners[at].latch = MyLatch;
		listening = true;
	}
	s = find_slot(MyDatabaseId, pipeline_id, false);
	wanted = (s != NULL && pending(s));
	SpinLockRelease(&shared->mutex);
	return wanted;
}

bool
citus_drain_begin(int32 pipeline_id)
{
	DrainSlot  *s;

	if (shared == NULL)
		return false;
	SpinLockAcquire(&shared->mutex);
	s = find_slot(MyDatabaseId, pipeline_id, false);
	if (s != NULL && pending(s))
	{
		draining_pipeline = pipeline_id;
		draining_generation = s->requested;
	}
	SpinLockRelease(&shared->mutex);
	return draining_pipeline == pipeline_id;
}

void
citus_drain_fail(int32 pipeline_id)
{
	DrainSlot  *s;

	if (shared == NULL)
		return;
	SpinLockAcquire(&shared->mutex);
	s = find_slot(MyDatabaseId, pipeline_id, false);
	if (s != NULL && pending(s))
		s->failed = s->requested;
	SpinLockRelease(&shared->mutex);
	if (draining_pipeline == pipeline_id)
		draining_pipeline = 0;
}

void
ptf_citus_step_done(int32 pipeline_id, bool committed, bool reached_end)
{
	DrainSlot  *s;

	if (shared == NULL || draining_pipeline != pipeline_id || pipeline_id == 0)
		return;
	SpinLockAcquire(&shared->mutex);
	s = find_slot(MyDatabaseId, pipeline_id, false);
	if (s != NULL)
	{
		if (!committed)
			s->failed = draining_generation;
		else if (reached_end)
			s->done = draining_generation;
		/* committed short of the end (ptf.pipeline_batch_size): another step */
	}
	SpinLockRelease(&shared->mutex);
	draining_pipeline = 0;
}

/* ---- the asking side ---- */

static void
wake_listeners(Oid dboid)
{
	int			i;

	for (i = 0; i < DRAIN_LISTENERS; i++)
		if (shared->listeners[i].dboid == dboid && shared->listeners[i].latch != NULL)
			SetLatch(shared->listeners[i].latch);
}

static char *
last_error(const ShardPipeline *sp)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(sp->name)};

	ptf_spi_exec_as_owner("SELECT last_error FROM ptf._pipeline_status() "
						  "WHERE name OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0 || ptf_spi_isnull(1))
		return "it did not step (paused, or gone)";
	return ptf_spi_text(1);
}

/*
 * The end of the WAL inserted so far, for XLogFlush.  GetXLogInsertRecPtr
 * gives where the next record would start: at a page boundary, after the
 * next page's header, which is not written yet -- XLogFlush of it fails
 * with "xlog flush request ... is not satisfied" (seen in a shard move of
 * 102_citus_moves.pl).  PostgreSQL's XLogBytePosToEndRecPtr makes the
 * same correction, but is not exported.  A record cannot end right after
 * a page header, so there it is the boundary.
 */
static XLogRecPtr
inserted_end(void)
{
	XLogRecPtr	ptr = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(ptr, wal_segment_size) == SizeOfXLogLongPHD)
		return ptr - SizeOfXLogLongPHD;
	if (ptr % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		return ptr - SizeOfXLogShortPHD;
	return ptr;
}

void
citus_drain(const ShardPipeline *sp)
{
	DrainSlot  *s;
	uint32		generation;
	TimestampTz start = GetCurrentTimestamp();
	bool		done = false;

	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pipelines need deduplicate_keep_first in shared_preload_libraries")));

	/* every commit readable: the step reads the WAL up to what is flushed */
	XLogFlush(inserted_end());

	SpinLockAcquire(&shared->mutex);
	s = find_slot(MyDatabaseId, sp->pipeline, true);
	if (s == NULL)
	{
		SpinLockRelease(&shared->mutex);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many shard pipelines catching up at once"),
				 errhint("Move fewer shard groups at a time.")));
	}
	generation = ++s->requested;
	s->waiters++;
	wake_listeners(MyDatabaseId);
	SpinLockRelease(&shared->mutex);

	for (;;)
	{
		bool		failed;
		bool		timed_out = TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
														   ptf_citus_drain_timeout_ms);

		SpinLockAcquire(&shared->mutex);
		s = find_slot(MyDatabaseId, sp->pipeline, false);
		Assert(s != NULL);
		done = ((int32) (s->done - generation) >= 0);
		failed = ((int32) (s->failed - generation) >= 0);
		if (done || failed || timed_out)
		{
			s->waiters--;
			if (timed_out && !done && !failed)
				s->failed = s->requested;
		}
		else
			wake_listeners(MyDatabaseId);
		SpinLockRelease(&shared->mutex);
		if (done)
			break;
		if (failed)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("pipeline \"%s\" could not catch up with shard %lld before the move",
							sp->name, (long long) sp->shard),
					 errdetail("Its step failed: %s", last_error(sp)),
					 errhint("A shard group moves once its pipelines have read everything written to it; fix what makes the step fail (ptf.pipeline_status on this node), or drop the pipeline, and move again.")));
		if (timed_out)
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("pipeline \"%s\" did not catch up with shard %lld within ptf.citus_drain_timeout",
							sp->name, (long long) sp->shard),
					 errhint("Its pipeline worker must run (ptf.pipeline_status on this node); or raise ptf.citus_drain_timeout.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (InterruptPending)
		{
			/* a cancel ends the wait: this asker looks no more */
			SpinLockAcquire(&shared->mutex);
			s = find_slot(MyDatabaseId, sp->pipeline, false);
			if (s != NULL)
				s->waiters--;
			SpinLockRelease(&shared->mutex);
			CHECK_FOR_INTERRUPTS();
			SpinLockAcquire(&shared->mutex);
			if (s != NULL)
				s->waiters++;
			SpinLockRelease(&shared->mutex);
		}
	}
}

void
citus_drain_define_gucs(void)
{
	DefineCustomIntVariable("ptf.citus_drain_timeout",
							"How long a shard move waits for the group's pipelines to catch up.",
							"Writes to the group are blocked meanwhile; past it the move fails and the group stays where it is.",
							&ptf_citus_drain_timeout_ms,
							60000, 1000, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.citus_pending_timeout",
							"How long a node keeps a shard group's stream that no committed pipeline or move claims.",
							"A distributed create_pipeline starts the groups' streams before it commits, a move the new node's before Citus copies: past this, one whose transaction is not seen committed is dropped.  Commit within it.",
							&ptf_citus_pending_timeout_ms,
							60000, 1000, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
}
