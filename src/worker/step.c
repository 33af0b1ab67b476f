/*-------------------------------------------------------------------------
 *
 * step.c
 *	  One step of one pipeline: its query's rows into its sink, with the
 *	  uid's state and position, in one transaction, exactly once.
 *
 * A step runs the pipeline's query -- one of our functions over a change
 * stream, under the pipeline's uid -- as the pipeline's owner, and writes
 * its rows to the sink: appended (INSERT ... SELECT) or applied as a
 * changelog (ptf.apply_changelog).  The function stores its state and the
 * stream position in the same transaction, so a step commits whole or
 * not at all; after the commit the slot is moved up to the stored
 * position.  The step's transaction carries the pipeline's replication
 * origin, and the pipeline's own stream skips changes made under it: a
 * pipeline never reads its own writes back.  The call learns what the
 * worker keeps between steps, and tells it when to wake and how far it
 * read, through the step context (engine/step.h).
 *
 * A step that fails is logged, recorded in the pipeline's status and
 * retried after a pause that doubles up to ptf.pipeline_max_backoff; it
 * takes neither the worker nor other pipelines down.  A step holds its
 * pipeline's lock in a mode that excludes another step (and the uid's
 * lock), so steps of one pipeline never overlap, whichever worker runs
 * them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "base/kept.h"
#include "sink/append.h"
#include "base/ptf_time.h"
#include "catalog.h"
#include "engine/step.h"
#include "input/change_stream.h"
#include "worker/pipeline_internal.h"
#include "worker/shmem.h"
#include "worker/worker.h"

/* set by another room (src/citus/), see worker.h */
PtfStepHooks ptf_step_hooks;

/*
 * A step whose code catches the cancel of ptf.pipeline_step_timeout and
 * runs on would hold the database's worker, and every other pipeline of
 * it, for as long as it likes.  A second limit, as long again (at least
 * a second), ends the worker as pg_terminate_backend would -- a FATAL no
 * exception block catches; the step's transaction is rolled back by the
 * exit, the failure is recorded on the way out (so the pipeline backs
 * off), and the launcher starts the worker again.
 */
static TimeoutId step_kill_timeout;
static volatile sig_atomic_t step_overrun = false;
static Pipeline *stepping_pipeline;	/* the one in its step, or NULL */
static bool origin_session_set = false;

static void record_failure(Pipeline *p, const char *message);

static void
step_kill_handler(void)
{
	step_overrun = true;
	InterruptPending = true;
	ProcDiePending = true;
	SetLatch(MyLatch);
}

static int
step_kill_after_ms(void)
{
	return ptf_pipeline_step_timeout_ms + Max(ptf_pipeline_step_timeout_ms, 1000);
}

static void
record_overrun_at_exit(int code, Datum arg)
{
	if (!step_overrun || stepping_pipeline == NULL)
		return;
	ereport(LOG,
			(errmsg("pipeline \"%s\": its step went on after the cancel of ptf.pipeline_step_timeout, so the worker was ended",
					stepping_pipeline->name)));
	record_failure(stepping_pipeline,
				   psprintf("step ended with its worker: it went on for %d ms after the cancel of ptf.pipeline_step_timeout; nothing of it was written",
							step_kill_after_ms() - ptf_pipeline_step_timeout_ms));
}

/* The step's timeout and its record at exit, once per worker. */
void
pipeline_step_setup(PipelineWorker *w)
{
	/* registered after the worker's own exit callback, so run before it */
	before_shmem_exit(record_overrun_at_exit, 0);
	step_kill_timeout = RegisterTimeout(USER_TIMEOUT, step_kill_handler);
}

/* Tests stop a step here until ptf.debug_fault_point changes, or a kill. */
static void
fault_point(PtfFaultPoint point, const char *name)
{
	if (ptf_debug_fault_point != (int) point)
		return;
	ereport(LOG,
			(errmsg("ptf fault point \"%s\" reached", name)));
	while (ptf_debug_fault_point == (int) point)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}

char *
ptf_pipeline_origin_name(Oid dboid, int32 id)
{
	return psprintf(PTF_PIPELINE_ORIGIN_PREFIX "%u_%d", dboid, id);
}

/*
 * The replication origins of the worker's pipelines that have none here
 * yet (new ones, and those of a restored or copied database), made in a
 * transaction of their own: a step's transaction must not have written
 * before its call, which may have to make its uid's slot.
 */
void
pipeline_make_origins(List *pipelines)
{
	MemoryContext cxt = CurrentMemoryContext;
	ListCell   *lc;
	bool		any = false;

	foreach(lc, pipelines)
		any |= !((Pipeline *) lfirst(lc))->has_origin;
	if (!any)
		return;
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	foreach(lc, pipelines)
	{
		Pipeline   *p = lfirst(lc);
		Oid			argtypes[1] = {INT4OID};
		Datum		args[1] = {Int32GetDatum(p->id)};
		char	   *name;

		if (p->has_origin)
			continue;

		/*
		 * Not the origin of a pipeline being dropped: the list may have been
		 * read before drop_pipeline committed, and an origin made after it
		 * dropped the pipeline's would outlive the pipeline.  drop_pipeline
		 * holds the pipeline's lock while it drops it; the registry is read
		 * once the lock is ours, in a snapshot of its own (SPI, not read
		 * only, takes one per statement).  A pipeline whose lock is taken
		 * gets its origin next time, or in its step, which checks the
		 * registry the same way.
		 */
		if (!ptf_lock(PTF_LOCK_PIPELINE, (uint32) p->id, ShareUpdateExclusiveLock,
					  false, false))
			continue;
		ptf_spi_exec_as_owner("SELECT 1 FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
							  1, argtypes, args, NULL, SPI_OK_SELECT);
		if (SPI_processed != 1)
			continue;
		name = ptf_pipeline_origin_name(MyDatabaseId, p->id);
		if (replorigin_by_name(name, true) == InvalidRepOriginId)
			(void) replorigin_create(name);
		p->has_origin = true;
	}
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
}

/* The pipeline's replication origin (make_origins made it). */
static RepOriginId
pipeline_origin(Pipeline *p)
{
	char	   *name = ptf_pipeline_origin_name(MyDatabaseId, p->id);
	RepOriginId origin = replorigin_by_name(name, true);

	if (origin == InvalidRepOriginId)
	{
		origin = replorigin_create(name);
		CommandCounterIncrement();
	}
	return origin;
}

/* The name the registry keeps of the pipeline's dropped sink, or NULL. */
static char *
dropped_sink_name(Pipeline *p)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(p->id)};

	ptf_spi_exec_as_owner("SELECT sink_name FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1 || ptf_spi_isnull(1))
		return NULL;
	/* as long as the worker keeps the pipeline */
	return MemoryContextStrdup(GetMemoryChunkContext(p), ptf_spi_text(1));
}

/*
 * The sink is the table itself, whatever it is renamed to.  Once it is
 * dropped the event trigger keeps the name it had (sink_name), and the
 * pipeline goes on into a table made again under that name -- as a user
 * who drops and makes again a table expects -- if its owner could have
 * made it (owns it or has the rights of its owner): another role's table
 * of that name is not handed the pipeline's rows.  The new table is the
 * sink from this step on, in the step's transaction: a step that fails
 * later looks it up again.
 */
static void
resolve_sink(Pipeline *p)
{
	Oid			relid;
	Oid			argtypes[2] = {INT4OID, OIDOID};
	Datum		args[2];

	if (p->sink_name == NULL)
	{
		/*
		 * The step's statement names the sink: lock it by its oid first, so
		 * that the name is still its name when the statement is parsed.
		 * Otherwise a drop committed meanwhile would leave the name to
		 * another table, which the statement would write -- without the
		 * owner's check that a table made again must pass (below).
		 */
		LockRelationOid(p->sink, RowExclusiveLock);
		if (get_rel_name(p->sink) != NULL)
			return;
		/* dropped since the pipelines were loaded: the registry says as what */
		p->sink_name = dropped_sink_name(p);
		if (p->sink_name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("the sink of pipeline \"%s\" no longer exists", p->name),
					 errhint("Drop the pipeline with SELECT ptf.drop_pipeline('%s'), and make it again with a sink.",
							 p->name)));
	}
	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(p->sink_name)),
							 NoLock, true);
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the sink of pipeline \"%s\", table %s, was dropped", p->name, p->sink_name),
				 errdetail("Its changes wait in the pipeline's stream."),
				 errhint("Make table %s again, and the pipeline goes on into it from where it stopped; or drop the pipeline with SELECT ptf.drop_pipeline('%s').",
						 p->sink_name, p->name)));
	if (get_rel_relkind(relid) != RELKIND_RELATION &&
		get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the sink of pipeline \"%s\", %s, is not a table", p->name, p->sink_name),
				 errhint("Make %s a table again, or drop the pipeline with SELECT ptf.drop_pipeline('%s').",
						 p->sink_name, p->name)));
	if (!pg_class_ownercheck(relid, p->owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the sink of pipeline \"%s\", table %s, was made again by another role", p->name,
						p->sink_name),
				 errdetail("A dropped sink is followed to a table of its name only if the pipeline's owner owns it."),
				 errhint("ALTER TABLE %s OWNER TO %s; or drop the pipeline with SELECT ptf.drop_pipeline('%s').",
						 p->sink_name, quote_identifier(GetUserNameFromId(p->owner, false)), p->name)));
	args[0] = Int32GetDatum(p->id);
	args[1] = ObjectIdGetDatum(relid);
	ptf_spi_exec_as_owner("UPDATE ptf.pipeline_registry SET sink = $2, sink_name = NULL "
						  "WHERE id OPERATOR(pg_catalog.=) $1",
						  2, argtypes, args, NULL, SPI_OK_UPDATE);
	ereport(LOG,
			(errmsg("pipeline \"%s\" goes on into table %s, made again", p->name, p->sink_name)));
	p->sink = relid;
	p->sink_name = NULL;
}

/* The step's statement: the query's rows into the sink. */
static void
run_query_into_sink(Pipeline *p)
{
	int			rc;

	resolve_sink(p);
	if (p->changelog)
	{
		Oid			argtypes[2] = {REGCLASSOID, TEXTOID};
		Datum		args[2];

		args[0] = ObjectIdGetDatum(p->sink);
		args[1] = CStringGetTextDatum(p->query);
		rc = SPI_execute_with_args("SELECT 1 FROM ptf.apply_changelog($1, $2)",
								   2, argtypes, args, NULL, false, 0);
	}
	else if (append_rows_direct(p->sink, p->query))
		rc = SPI_OK_SELECT;
	else
		rc = SPI_execute(psprintf("INSERT INTO %s SELECT * FROM (%s) AS q",
								  ptf_relation_sql_name(p->sink), p->query),
						 false, 0);
	if (rc < 0)
		elog(ERROR, "pipeline step failed: %s", SPI_result_code_string(rc));
}

typedef struct StepResult
{
	uint64		rows_in;
	uint64		rows_out;
	uint64		rows_late;
	uint64		rows_skipped;
	TimestampTz wake_at;		/* when the step's call has more to do without input */
	ChangeStreamReport report;	/* how far its stream was read */
	TimestampTz started_at;
	XLogRecPtr	stored;			/* the uid's stored position */
	char	   *slot_name;
} StepResult;

static void
read_progress(Pipeline *p, StepResult *r, MemoryContext keep)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(p->uid)};

	ptf_spi_exec_as_owner("SELECT " UID_REGISTRY_COLUMNS " FROM ptf.uid_registry "
						  "WHERE uid OPERATOR(pg_catalog.=) $1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return;
	r->rows_in = ptf_spi_int64(Anum_uid_registry_rows_in, 0);
	r->rows_out = ptf_spi_int64(Anum_uid_registry_rows_out, 0);
	r->rows_late = ptf_spi_int64(Anum_uid_registry_rows_late, 0);
	r->rows_skipped = ptf_spi_int64(Anum_uid_registry_rows_skipped, 0);
	r->stored = ptf_spi_isnull(Anum_uid_registry_last_lsn) ? InvalidXLogRecPtr :
		DatumGetLSN(ptf_spi_datum(Anum_uid_registry_last_lsn));
	r->slot_name = ptf_spi_text(Anum_uid_registry_slot_name);
	/* the worker's copy: which slot it keeps a decoder of, which tables wake it */
	pipeline_set_slot_name(p, r->slot_name);
	pipeline_set_sources(p, ptf_spi_datum(Anum_uid_registry_input_tables),
						 ptf_spi_isnull(Anum_uid_registry_input_tables));
	/* used after the commit, to move the slot on */
	if (r->slot_name)
		r->slot_name = MemoryContextStrdup(keep, r->slot_name);
}

static void
record_success(Pipeline *p, const StepResult *r)
{
	PipelineStatus *st;
	const ChangeStreamReport *rep = &r->report;

	ptf_shmem_lock(true);
	st = ptf_pipeline_status(MyDatabaseId, p->id, true);
	if (st)
	{
		st->state = PIPELINE_RUNNING;
		st->pid = MyProcPid;
		st->rows_in = r->rows_in;
		st->rows_out = r->rows_out;
		st->rows_late = r->rows_late;
		st->rows_skipped = r->rows_skipped;
		if (rep->position > st->position)
		{
			st->position = rep->position;
			st->last_change_at = rep->last_commit_time;
		}
		if (r->stored > st->position)
			st->position = r->stored;
		st->read_upto = rep->end_of_wal;
		st->read_at = r->started_at;
		st->caught_up = rep->reached_end;
		st->wake_at = r->wake_at;
		st->last_step_at = GetCurrentTimestamp();
		st->failures = 0;
		st->retry_at = 0;
		st->last_error[0] = '\0';
	}
	ptf_shmem_unlock();
}

static void
record_failure(Pipeline *p, const char *message)
{
	PipelineStatus *st;

	ptf_shmem_lock(true);
	st = ptf_pipeline_status(MyDatabaseId, p->id, true);
	if (st)
	{
		int64		backoff = 1000;
		int			i;

		st->state = PIPELINE_FAILING;
		st->pid = MyProcPid;
		st->failures++;
		for (i = 1; i < st->failures && backoff < ptf_pipeline_max_backoff_ms; i++)
			backoff *= 2;
		backoff = Min(backoff, ptf_pipeline_max_backoff_ms);
		st->last_step_at = GetCurrentTimestamp();
		st->retry_at = TimestampTzPlusMilliseconds(st->last_step_at, backoff);
		st->caught_up = false;
		strlcpy(st->last_error, message, PTF_MAX_ERROR_LEN);
	}
	ptf_shmem_unlock();
}

/*
 * The line of an error's context that names the change of the stream it
 * stopped at (base/rowkind.c: PtfChangeContext), or NULL: pipeline_status
 * shows it, for ptf.skip_transaction.
 */
static const char *
change_context(ErrorData *edata)
{
	const char *line = edata->context;

	while (line != NULL)
	{
		const char *end = strchr(line, '\n');

		if (strncmp(line, PTF_CHANGE_CONTEXT_PREFIX, strlen(PTF_CHANGE_CONTEXT_PREFIX)) == 0)
			return end ? pnstrdup(line, end - line) : line;
		line = end ? end + 1 : NULL;
	}
	return NULL;
}

/* recheck_at: when to look again (a pause not in the registry), or 0 */
void
pipeline_record_paused(Pipeline *p, TimestampTz recheck_at)
{
	PipelineStatus *st;

	ptf_shmem_lock(true);
	st = ptf_pipeline_status(MyDatabaseId, p->id, true);
	if (st)
	{
		st->state = PIPELINE_PAUSED;
		st->pid = MyProcPid;
		st->caught_up = false;
		st->failures = 0;
		st->retry_at = recheck_at;
	}
	ptf_shmem_unlock();
}

/*
 * Is there anything for a step to do?  Not when the pipeline last read all
 * that had committed and nothing was written since, unless its uid said it
 * has more to do by now without new changes (windows an idle source
 * closes); not while it waits to retry.
 */
bool
pipeline_step_due(Pipeline *p, TimestampTz now, TimestampTz *wake_at)
{
	PipelineStatus *st;
	bool		due = true;

	/* another room wants it to catch up now (Citus: a move, src/citus/drain.c) */
	if (ptf_step_hooks.drain_wanted && ptf_step_hooks.drain_wanted(p->id))
		return true;
	ptf_shmem_lock(false);
	st = ptf_pipeline_status(MyDatabaseId, p->id, false);
	if (st != NULL)
	{
		if ((st->state == PIPELINE_FAILING || st->state == PIPELINE_PAUSED) && st->retry_at > now)
		{
			due = false;
			if (*wake_at == 0 || st->retry_at < *wake_at)
				*wake_at = st->retry_at;
		}
		else if (st->state == PIPELINE_RUNNING && st->caught_up &&
				 GetFlushRecPtr(NULL) <= st->read_upto)
		{
			if (st->wake_at == 0 || st->wake_at > ptf_now())
				due = false;
			if (!due && st->wake_at != 0)
			{
				/* on the real clock, as the worker naps by it */
				TimestampTz at = now + (st->wake_at - ptf_now());

				if (*wake_at == 0 || at < *wake_at)
					*wake_at = at;
			}
		}
	}
	ptf_shmem_unlock();
	return due;
}

/*
 * Move the slot up to what the step committed.  In a transaction of its
 * own, so that whatever fails is cleaned up as any error is; a failure is
 * logged and left to the next step, which moves the slot first thing (the
 * slot may be busy for a moment with someone reading ptf.state).
 */
static void
advance_slot(PipelineWorker *w, const StepResult *r)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (r->slot_name == NULL || XLogRecPtrIsInvalid(r->stored))
		return;
	PG_TRY();
	{
		StartTransactionCommand();
		change_stream_confirm(r->slot_name, r->stored, w->kept);
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(DEBUG1,
				(errmsg("replication slot %s not moved on after a step: %s",
						r->slot_name, edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

/* After a step's transaction, committed or not: no origin, idle. */
static void
end_step_session(void)
{
	if (origin_session_set)
	{
		replorigin_session_reset();
		replorigin_session_origin = InvalidRepOriginId;
		origin_session_set = false;
	}
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * The owner's part of a step: its query into its sink.  It runs as the
 * owner in a security-restricted operation (as REFRESH MATERIALIZED VIEW
 * runs a view's owner's query): nothing the owner's code leaves behind --
 * a deferred trigger, a cursor WITH HOLD, a temporary object -- can run
 * later with the worker's rights.  Settings it changes end with it; the
 * search_path is the one the pipeline was made with.
 */
static void
run_as_owner(Pipeline *p)
{
	Oid			save_user;
	int			save_sec;
	int			nest;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(p->owner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	nest = NewGUCNestLevel();
	(void) set_config_option("search_path", p->search_path,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("ptf.max_changes_per_call",
							 psprintf("%d", ptf_pipeline_batch_size),
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* a lock someone holds delays this pipeline, not the worker's others */
	(void) set_config_option("lock_timeout", "5s",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	run_query_into_sink(p);
	AtEOXact_GUC(false, nest);
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * The pipeline's query, in the step's context: its call learns what the
 * worker keeps, and says when it has more to do and how far it read.
 */
static void
run_pipeline_query(PipelineWorker *w, Pipeline *p, StepResult *result)
{
	PtfTime		started = ptf_now();
	PtfStep		step;
	PtfStep    *previous;

	memset(&step, 0, sizeof(step));
	step.in_worker = true;
	step.kept = w->kept;
	previous = ptf_step_begin(&step);
	PG_TRY();
	{
		run_as_owner(p);
	}
	PG_FINALLY();
	{
		ptf_step_end(previous);
	}
	PG_END_TRY();
	result->wake_at = step.wake_at;
	result->report = step.report;
	/* a uid that would wake at once again waits a second */
	if (result->wake_at != 0 && result->wake_at <= started)
		result->wake_at = started + USECS_PER_SEC;
}

/*
 * Has the step run past ptf.pipeline_step_timeout?  Told by the clock: the
 * cancel resets the timeout's indicator as it reports it.
 */
static bool
step_over_time(TimestampTz started_at)
{
	return ptf_pipeline_step_timeout_ms > 0 &&
		TimestampDifferenceExceeds(started_at, GetCurrentTimestamp(),
								   ptf_pipeline_step_timeout_ms);
}

/* Which pipeline's step the worker is in, for the status of the others. */
static void
set_stepping(PipelineWorker *w, int32 id)
{
	ptf_shmem_lock(true);
	w->shm->stepping = id;
	ptf_shmem_unlock();
}

/* The worker's own lock: one worker per (database, index). */
bool
pipeline_take_worker_lock(PipelineWorker *w)
{
	return ptf_lock(PTF_LOCK_WORKER, (uint32) w->index, ExclusiveLock, true, false);
}

/*
 * Session-level advisory locks the owner's code took (pg_advisory_lock)
 * end with its step, as they would with its session: the worker must not
 * keep them for every later step of every pipeline.  There is no way to
 * release them but all at once (pg_advisory_unlock_all), which releases
 * the worker's own lock too -- as the owner's code may have done already --
 * so it is taken again.  Who got it meanwhile is another worker of this
 * database, started by a launcher that did not know this one: that one
 * goes on, this one leaves.  Steps are serialized by their pipeline's and
 * uid's locks whatever happens, so two workers never run one step twice.
 */
static void
release_session_locks(PipelineWorker *w)
{
	LockReleaseSession(USER_LOCKMETHOD);
	if (!pipeline_take_worker_lock(w))
	{
		ereport(LOG,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another pipeline worker took over the place of worker %d of database %u",
						w->index, MyDatabaseId)));
		proc_exit(0);
	}
}

/*
 * One step of one pipeline; true when it may have more to do at once.
 * *reload: the pipelines as loaded may be out of date -- the step failed
 * (and was recorded so), or the registry names another owner.
 */
bool
pipeline_run_step(PipelineWorker *w, Pipeline *p, bool *reload)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool more = false;
	volatile bool busy = false;
	volatile PtfStepFence fence = PTF_STEP_GO;
	StepResult	result;

	*reload = false;
	memset(&result, 0, sizeof(result));
	result.report.reached_end = true;
	result.started_at = GetCurrentTimestamp();
	set_stepping(w, p->id);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		Oid			argtypes[1] = {INT4OID};
		Datum		args[1] = {Int32GetDatum(p->id)};
		bool		isnull;
		bool		runnable = false;
		RepOriginId origin;

		/*
		 * The whole step, reading the changes included, is cancelled as
		 * statement_timeout cancels a statement: a slow one must not hold up
		 * the worker's other pipelines for long.
		 */
		if (ptf_pipeline_step_timeout_ms > 0)
		{
			enable_timeout_after(STATEMENT_TIMEOUT, ptf_pipeline_step_timeout_ms);
			enable_timeout_after(step_kill_timeout, step_kill_after_ms());
		}
		stepping_pipeline = p;
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, p->query);

		/*
		 * drop_pipeline and pause_pipeline hold the pipeline's lock while
		 * they change it, and so does another worker's step of it while the
		 * assignment changes: the step then comes back later rather than
		 * wait.  It is not a failure.  Held for the session, it covers the
		 * slot's move after the commit too (a step of another worker would
		 * find the slot in use), and goes with release_session_locks.
		 */
		busy = !ptf_lock(PTF_LOCK_PIPELINE, (uint32) p->id, ShareUpdateExclusiveLock,
						 true, false);
		if (!busy)
		{
			ptf_spi_exec_as_owner("SELECT paused, owner FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
								  1, argtypes, args, NULL, SPI_OK_SELECT);

			/*
			 * A REASSIGN OWNED committed since the pipelines were loaded: the
			 * step would run as the owner before, who may have no rights left
			 * (a failure, retried after a pause).  It comes back once they are
			 * loaded again (the registry's invalidation has them be, but not
			 * under 1.1's trigger, which fires on inserts only).
			 */
			if (SPI_processed == 1 &&
				DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											   2, &isnull)) != p->owner)
			{
				busy = true;
				*reload = true;
			}
		}
		if (!busy && SPI_processed == 1 &&
			!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		{
			if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(p->owner)))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("the owner of pipeline \"%s\" no longer exists", p->name)));

			/* another room's fence (Citus: a shard group's pipeline, src/citus/fence.c) */
			if (ptf_step_hooks.fence)
				fence = ptf_step_hooks.fence(p->id);
			runnable = (fence == PTF_STEP_GO);
		}
		if (runnable)
		{
			/* the step's writes carry the pipeline's origin */
			origin = pipeline_origin(p);
			replorigin_session_setup(origin);
			replorigin_session_origin = origin;
			origin_session_set = true;

			run_pipeline_query(w, p, &result);

			read_progress(p, &result, cxt);
			more = !result.report.reached_end;
		}

		if (!busy)
			fault_point(PTF_FAULT_BEFORE_COMMIT, "before_commit");

		/*
		 * Code of the owner's that caught the cancel (an exception block
		 * naming query_canceled) must not make a step over its time commit.
		 */
		disable_timeout(STATEMENT_TIMEOUT, false);
		disable_timeout(step_kill_timeout, false);
		stepping_pipeline = NULL;
		if (step_over_time(result.started_at))
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling statement due to statement timeout")));
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		end_step_session();

		if (!busy && fence == PTF_STEP_GO)
		{
			fault_point(PTF_FAULT_AFTER_COMMIT, "after_commit");
			advance_slot(w, &result);
			record_success(p, &result);
			if (ptf_step_hooks.step_done)
				ptf_step_hooks.step_done(p->id, true, !more);
		}
		else if (!busy && fence == PTF_STEP_PAUSED)
			pipeline_record_paused(p, TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000));
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		timed_out;

		/* as PostgresMain recovers: no timeout or cancel left pending */
		HOLD_INTERRUPTS();
		disable_all_timeouts(false);
		stepping_pipeline = NULL;
		QueryCancelPending = false;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		end_step_session();
		RESUME_INTERRUPTS();
		timed_out = (edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
					 step_over_time(result.started_at));
		if (timed_out)
		{
			char	   *message = psprintf("step cancelled: it ran longer than ptf.pipeline_step_timeout (%d ms); nothing of it was written",
										   ptf_pipeline_step_timeout_ms);

			ereport(LOG,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("pipeline \"%s\" failed: %s", p->name, message),
					 errhint("Raise ptf.pipeline_step_timeout, lower ptf.pipeline_batch_size, or make the pipeline's query and its sink's triggers faster.")));
			record_failure(p, message);
		}
		else
		{
			const char *change = change_context(edata);

			ereport(LOG,
					(errcode(edata->sqlerrcode),
					 errmsg("pipeline \"%s\" failed: %s", p->name, edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
					 edata->hint ? errhint("%s", edata->hint) : 0,
					 edata->context ? errcontext("%s", edata->context) : 0));
			record_failure(p, change ? psprintf("%s (%s)", edata->message, change) :
						   edata->message);
		}
		FreeErrorData(edata);
		more = false;
		*reload = true;
		if (ptf_step_hooks.step_done)
			ptf_step_hooks.step_done(p->id, false, false);
	}
	PG_END_TRY();
	set_stepping(w, 0);
	release_session_locks(w);
	return more;
}

