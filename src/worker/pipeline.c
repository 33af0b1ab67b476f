/*-------------------------------------------------------------------------
 *
 * pipeline.c
 *	  A pipeline worker of one database: its loop over the pipelines
 *	  assigned to it (assign.c), a step at a time (step.c).
 *
 * The worker keeps the database's pipelines as it last loaded them from
 * ptf.pipeline_registry, and loads them again only when they may have
 * changed, as pg_cron keeps its jobs: a trigger on the registry (any
 * INSERT, UPDATE, DELETE or TRUNCATE) invalidates the registry's relcache
 * entry at commit, which reaches the worker through a relcache callback;
 * ptf.create_pipeline and the like also move the database's generation in
 * shared memory, which wakes it.  What changes with every step (a uid's
 * slot and tables) is read with the step's progress.
 *
 * When nothing new was committed since a pipeline last read everything,
 * its step is not run at all; when no pipeline had work, the worker naps
 * until woken by a commit that wrote a table its pipelines read (wake.c),
 * a change of the pipelines, or ptf.pipeline_idle_time passes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "base/kept.h"
#include "base/ptf_time.h"
#include "catalog.h"
#include "engine/step.h"
#include "input/change_stream.h"
#include "input/stream_slot.h"
#include "worker/pipeline_internal.h"
#include "worker/shmem.h"
#include "worker/wake.h"
#include "worker/worker.h"

PGDLLEXPORT void ptf_pipeline_worker_main(Datum arg);

int			ptf_pipeline_batch_size = 100000;
int			ptf_pipeline_idle_ms = 100;
int			ptf_pipeline_max_backoff_ms = 60000;
int			ptf_pipeline_step_timeout_ms = 60000;
int			ptf_max_workers_per_database = 2;
int			ptf_debug_fault_point = PTF_FAULT_NONE;

/* how a round that stepped is followed by the next: see the main loop */
#define PIPELINE_ROUND_SPACING_MS 10
#define PIPELINE_REST_FACTOR 3


static PipelineWorker worker;

/* the pipelines as last loaded, in pipelines_cxt; valid until invalidated */
static List *pipelines = NIL;
static MemoryContext pipelines_cxt = NULL;
static bool pipelines_valid = false;
static Oid	registry_relid = InvalidOid;	/* ptf.pipeline_registry's, when loaded */


static void
clear_worker_entry(int code, Datum arg)
{
	DatabaseWorker *me = worker.shm;

	if (me == NULL)
		return;
	ptf_shmem_lock(true);
	if (me->pid == MyProcPid)
	{
		me->pid = 0;
		me->latch = NULL;
	}
	ptf_shmem_unlock();
}

/* ptf.pipeline_registry changed (its trigger), or every relation did */
static void
registry_invalidated(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == registry_relid)
		pipelines_valid = false;
}

void
pipeline_set_sources(Pipeline *p, Datum tables, bool isnull)
{
	MemoryContext old = MemoryContextSwitchTo(pipelines_cxt);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			j;

	p->nsources = -1;
	if (isnull)
	{
		MemoryContextSwitchTo(old);
		return;
	}
	deconstruct_array(DatumGetArrayTypeP(tables), OIDOID, sizeof(Oid), true,
					  TYPALIGN_INT, &elems, &nulls, &n);
	if (p->sources != NULL)
		pfree(p->sources);
	p->sources = palloc(Max(n, 1) * sizeof(Oid));
	p->nsources = n;
	for (j = 0; j < n; j++)
	{
		if (nulls[j])
			p->nsources = -1;
		else
			p->sources[j] = DatumGetObjectId(elems[j]);
	}
	/* a stream reads tables: none known is not none read */
	if (p->nsources == 0)
		p->nsources = -1;
	MemoryContextSwitchTo(old);
}

void
pipeline_set_slot_name(Pipeline *p, const char *slot_name)
{
	if (slot_name == NULL || (p->slot_name != NULL && strcmp(p->slot_name, slot_name) == 0))
		return;
	p->slot_name = MemoryContextStrdup(pipelines_cxt, slot_name);
}

/* The database's pipelines, NIL when it has none (or not the extension). */
static List *
load_pipelines(void)
{
	List	   *loaded = NIL;
	MemoryContext outer = pipelines_cxt;
	uint64		i;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "loading pipelines");

	if (OidIsValid(get_extension_oid("deduplicate_keep_first", true)))
	{
		bool		sql_1_0;

		/*
		 * Before ALTER EXTENSION ... UPDATE the steps wait, and say why; the
		 * registry of 1.0 has no sink_name.
		 */
		registry_relid = get_relname_relid("pipeline_registry", get_namespace_oid("ptf", false));
		sql_1_0 = get_attnum(registry_relid, "sink_name") == InvalidAttrNumber;
		/* the registry's columns by Anum_, then the uid's slot and tables */
		if (SPI_execute(psprintf("SELECT %s, "
								 "(SELECT r.slot_name FROM ptf.uid_registry r "
								 " WHERE r.uid OPERATOR(pg_catalog.=) p.uid), "
								 "%s "
								 "FROM ptf.pipeline_registry p ORDER BY p.id",
								 sql_1_0 ? PIPELINE_REGISTRY_COLUMNS_1_0 ", NULL::pg_catalog.text" :
								 PIPELINE_REGISTRY_COLUMNS,
								 sql_1_0 ? "NULL::pg_catalog.oid[]" :
								 "(SELECT r.input_tables FROM ptf.uid_registry r "
								 " WHERE r.uid OPERATOR(pg_catalog.=) p.uid)"),
						true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read ptf.pipeline_registry");
		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			MemoryContext old = MemoryContextSwitchTo(outer);
			Pipeline   *p = palloc0(sizeof(Pipeline));
			bool		isnull;

			p->id = DatumGetInt32(SPI_getbinval(tup, desc, Anum_pipeline_registry_id, &isnull));
			p->name = SPI_getvalue(tup, desc, Anum_pipeline_registry_name);
			p->owner = DatumGetObjectId(SPI_getbinval(tup, desc, Anum_pipeline_registry_owner,
													  &isnull));
			p->query = SPI_getvalue(tup, desc, Anum_pipeline_registry_query);
			p->sink = DatumGetObjectId(SPI_getbinval(tup, desc, Anum_pipeline_registry_sink,
													 &isnull));
			p->changelog = strcmp(SPI_getvalue(tup, desc, Anum_pipeline_registry_sink_mode),
								  "changelog") == 0;
			p->uid = SPI_getvalue(tup, desc, Anum_pipeline_registry_uid);
			p->paused = DatumGetBool(SPI_getbinval(tup, desc, Anum_pipeline_registry_paused,
												   &isnull));
			p->search_path = SPI_getvalue(tup, desc, Anum_pipeline_registry_search_path);
			p->sink_name = SPI_getvalue(tup, desc, Anum_pipeline_registry_sink_name);
			p->slot_name = SPI_getvalue(tup, desc, Natts_pipeline_registry + 1);
			p->sources = NULL;
			{
				Datum		tables = SPI_getbinval(tup, desc, Natts_pipeline_registry + 2,
												   &isnull);

				pipeline_set_sources(p, tables, isnull);
			}
			p->has_origin = replorigin_by_name(ptf_pipeline_origin_name(MyDatabaseId, p->id),
											   true) != InvalidRepOriginId;
			loaded = lappend(loaded, p);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return loaded;
}

/*
 * The database's pipelines: as last loaded, unless they may have changed
 * since (their generation moved, the registry was written, a step failed).
 * Invalidations arrive when a transaction starts.
 */
static List *
current_pipelines(uint64 generation)
{
	static uint64 loaded_generation = 0;

	StartTransactionCommand();
	AcceptInvalidationMessages();
	CommitTransactionCommand();
	if (pipelines_valid && generation == loaded_generation)
		return pipelines;
	MemoryContextReset(pipelines_cxt);
	pipelines = NIL;
	/* set before loading: an invalidation that comes while it loads counts */
	pipelines_valid = true;
	loaded_generation = generation;
	pipelines = load_pipelines();
	return pipelines;
}


/*
 * The tables whose commits wake the worker: those of its pipelines that
 * may step -- not paused ones, nor failing ones before their retry, which
 * would be woken for nothing.  A pipeline whose tables are not known (a
 * uid of 1.0 before its first step under 1.1) is woken by any commit.
 */
static void
watch_sources(List *pipelines, TimestampTz now)
{
	Oid		   *relids = palloc(sizeof(Oid));
	int			n = 0;
	int			cap = 1;
	ListCell   *lc;

	foreach(lc, pipelines)
	{
		Pipeline   *p = lfirst(lc);
		PipelineStatus *st;
		bool		backing_off;

		if (p->paused)
			continue;
		ptf_shmem_lock(false);
		st = ptf_pipeline_status(MyDatabaseId, p->id, false);
		backing_off = (st != NULL && st->state == PIPELINE_FAILING && st->retry_at > now);
		ptf_shmem_unlock();
		if (backing_off)
			continue;
		if (p->nsources < 0)
		{
			ptf_wake_watch(NULL, -1);
			return;
		}
		while (n + p->nsources > cap)
		{
			cap *= 2;
			relids = repalloc(relids, cap * sizeof(Oid));
		}
		memcpy(relids + n, p->sources, p->nsources * sizeof(Oid));
		n += p->nsources;
	}
	ptf_wake_watch(relids, n);
}


/*
 * After every start of the server, a crash's included, the database's
 * first worker drops the slots of first calls whose server process died
 * before their transaction ended (change_stream_drop_orphan_slots): the
 * launcher starts it in every database then.
 */
static void
drop_orphan_slots(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "dropping orphaned replication slots");
	if (OidIsValid(get_extension_oid("deduplicate_keep_first", true)))
		(void) change_stream_drop_orphan_slots();
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Take the worker's lock, held for its life. */
static bool
only_worker(void)
{
	bool		got;

	StartTransactionCommand();
	got = pipeline_take_worker_lock(&worker);
	CommitTransactionCommand();
	return got;
}

void
ptf_pipeline_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	MemoryContext loop_cxt;
	DatabaseWorker *me;

	memset(&worker, 0, sizeof(worker));
	memcpy(&worker.index, MyBgworkerEntry->bgw_extra, sizeof(worker.index));
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	worker.cxt = AllocSetContextCreate(TopMemoryContext, "ptf pipeline worker",
									   ALLOCSET_DEFAULT_SIZES);
	worker.kept = ptf_kept_set_create(worker.cxt);
	pipelines_cxt = AllocSetContextCreate(worker.cxt, "ptf pipelines",
										  ALLOCSET_DEFAULT_SIZES);
	CacheRegisterRelcacheCallback(registry_invalidated, (Datum) 0);

	/*
	 * One worker per place: a launcher started again does not know the
	 * workers of the one before, so each worker makes sure.
	 */
	if (!only_worker())
	{
		ereport(LOG,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("pipeline worker %d of database %u is running already", worker.index, dboid)));
		proc_exit(0);
	}

	ptf_shmem_lock(true);
	me = ptf_database_worker(dboid, worker.index, true);
	if (me != NULL)
	{
		me->pid = MyProcPid;
		me->latch = MyLatch;
		me->start_failed = false;
	}
	ptf_shmem_unlock();
	if (me == NULL)
		proc_exit(1);
	worker.shm = me;
	before_shmem_exit(clear_worker_entry, 0);
	pipeline_step_setup(&worker);
	if (worker.index == 0)
		drop_orphan_slots();

	loop_cxt = AllocSetContextCreate(worker.cxt, "ptf pipeline worker round",
									 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		List	   *all;
		List	   *mine;
		ListCell   *lc;
		uint64		generation;
		bool		more = false;
		bool		stepped = false;
		TimestampTz now;
		TimestampTz wake_at = 0;
		long		nap;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(loop_cxt);
		MemoryContextSwitchTo(loop_cxt);

		ptf_shmem_lock(false);
		generation = me->generation;
		ptf_shmem_unlock();

		all = current_pipelines(generation);
		pipeline_forget_dropped(all);
		mine = pipeline_assigned(&worker, all);
		pipeline_make_origins(mine);
		{
			/* what is kept for pipelines gone, or gone to another worker, goes */
			List	   *slots = NIL;
			List	   *uids = NIL;

			foreach(lc, mine)
			{
				Pipeline   *p = lfirst(lc);

				uids = lappend(uids, p->uid);
				if (p->slot_name != NULL)
					slots = lappend(slots, p->slot_name);
			}
			ptf_kept_retain(worker.kept, PTF_KEPT_DECODER, slots);
			ptf_kept_retain(worker.kept, PTF_KEPT_OPERATOR, uids);
		}
		if (mine == NIL)
		{
			/* nothing to run: leave, unless the pipelines changed meanwhile */
			bool		leave;

			ptf_shmem_lock(true);
			leave = (me->generation == generation);
			if (leave)
			{
				me->wanted = false;
				me->left_cleanly = true;
			}
			ptf_shmem_unlock();
			if (leave)
				break;
			continue;
		}

		now = GetCurrentTimestamp();
		/* a commit that wrote a table of this worker's pipelines wakes it */
		watch_sources(mine, now);
		ptf_wake_flush_commits();
		foreach(lc, mine)
		{
			Pipeline   *p = lfirst(lc);

			if (p->paused)
				pipeline_record_paused(p, 0);
			else if (pipeline_step_due(p, now, &wake_at))
			{
				bool		reload;

				more |= pipeline_run_step(&worker, p, &reload);
				stepped = true;
				/* a failure, or a new owner, may be the registry's: load it again */
				if (reload)
					pipelines_valid = false;
			}
			CHECK_FOR_INTERRUPTS();
		}
		if (more)
			continue;
		/*
		 * Commits wake the worker as often as they come.  Under a steady
		 * stream of them a round that stepped would be followed by the next
		 * at once, paying a step's fixed cost (its transactions, the slot
		 * moved and saved) per commit and taking the writers' CPU: the
		 * worker rests first, PIPELINE_REST_FACTOR times as long as the
		 * round took, so that it steps a quarter of the time at most, and
		 * at least until PIPELINE_ROUND_SPACING_MS after the round began.
		 * Never longer than ptf.pipeline_idle_time, the nap it took after
		 * every round before commits woke it: it keeps up with whatever it
		 * kept up with then.  A commit after idle is read at once; a step
		 * that stopped at ptf.pipeline_batch_size goes on at once (above).
		 */
		if (stepped && ptf_pipeline_wake_at_commit)
		{
			long		took = (long) ((GetCurrentTimestamp() - now) / 1000);
			long		rest = Min(Max(PIPELINE_REST_FACTOR * took,
									   PIPELINE_ROUND_SPACING_MS - took),
								   ptf_pipeline_idle_ms);

			if (rest > 0)
				(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, rest,
								 PG_WAIT_EXTENSION);
		}

		/* woken by a commit (wake.c), by a change of the pipelines, or at the end of the nap */
		nap = ptf_pipeline_idle_ms;
		if (wake_at != 0)
			nap = Min(nap, Max((long) ((wake_at - GetCurrentTimestamp()) / 1000), 1));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 nap, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

static const struct config_enum_entry fault_points[] = {
	{"none", PTF_FAULT_NONE, false},
	{"before_commit", PTF_FAULT_BEFORE_COMMIT, false},
	{"after_commit", PTF_FAULT_AFTER_COMMIT, false},
	{NULL, 0, false}
};

void
ptf_worker_init(void)
{
	DefineCustomIntVariable("ptf.pipeline_batch_size",
							"Changes a pipeline step reads, at most.",
							"A step ends at the end of the transaction that reaches it.",
							&ptf_pipeline_batch_size,
							100000, 1, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.pipeline_idle_time",
							"How long a pipeline worker naps when nothing is new.",
							"It is woken sooner when pipelines change.",
							&ptf_pipeline_idle_ms,
							100, 1, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.pipeline_max_backoff",
							"The longest pause before a failing pipeline is tried again.",
							"The pause starts at a second and doubles with each failure.",
							&ptf_pipeline_max_backoff_ms,
							60000, 1000, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.pipeline_step_timeout",
							"The longest a pipeline step may run; 0: no limit.",
							"A step over it is cancelled, as statement_timeout cancels a statement, and tried again later.",
							&ptf_pipeline_step_timeout_ms,
							60000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("ptf.max_workers_per_database",
							"Pipeline workers a database runs its pipelines on, at most.",
							"Each owner's pipelines run on one worker; owners are spread over up to this many, one each while there are enough.",
							&ptf_max_workers_per_database,
							2, 1, PTF_MAX_WORKERS_PER_DATABASE,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("ptf.debug_fault_point",
							 "Tests only: a point where pipeline steps stop and wait.",
							 NULL,
							 &ptf_debug_fault_point,
							 PTF_FAULT_NONE, fault_points,
							 PGC_SIGHUP, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							 NULL, NULL, NULL);
	ptf_wake_init(process_shared_preload_libraries_in_progress && !IsBinaryUpgrade);

	/* settings of the shared memory the workers use exist only when preloaded */
	if (process_shared_preload_libraries_in_progress && !IsBinaryUpgrade)
	{
		DefineCustomIntVariable("ptf.max_workers",
								"Pipeline workers, across all databases.",
								"Each takes a background worker: keep max_worker_processes above it.  A database's second and later workers leave one place free for a database that has none.",
								&ptf_max_workers,
								4, 1, 64,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
		DefineCustomIntVariable("ptf.max_pipelines",
								"Pipelines whose live status is kept, across all databases.",
								NULL,
								&ptf_max_pipelines,
								64, 1, 10000,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
		ptf_shmem_init();
		ptf_register_launcher();
	}
}
