/*-------------------------------------------------------------------------
 *
 * pipeline.c
 *	  A pipeline worker of one database: runs the pipelines assigned to it
 *	  in steps, one transaction per step, exactly once.
 *
 * A database has up to ptf.max_workers_per_database workers, so that one
 * owner's slow step does not hold up other owners' pipelines.  Owners are
 * isolated: the owners of the database's pipelines are ranked by their
 * oldest pipeline (lowest id), and the owner of rank r goes to the
 * (r mod n)-th of the database's n workers -- one owner's pipelines always
 * to one worker, different owners to different workers while there are as
 * many workers as owners.  Each worker works this out from the registry
 * every round and asks for the workers the database lacks (at most one per
 * owner).  An owner whose worker is starting, or restarting after it was
 * ended, waits for it: a step that ended its worker must not end another
 * owner's too.  While the assignment changes two workers may both
 * take up one pipeline: a step holds its pipeline's lock in a mode that
 * excludes another step (and the uid's lock), so the second skips it, and
 * steps of one pipeline never overlap; what a worker keeps between steps
 * is used again only while it equals what is stored.
 *
 * A step runs the pipeline's query -- one of our functions over a change
 * stream, under the pipeline's uid -- as the pipeline's owner, and writes
 * its rows to the sink: appended (INSERT ... SELECT) or applied as a
 * changelog (ptf.apply_changelog).  The function stores its state and the
 * stream position in the same transaction, so a step commits whole or
 * not at all; after the commit the slot is moved up to the stored
 * position.  The step's transaction carries the pipeline's replication
 * origin, and the pipeline's own stream skips changes made under it: a
 * pipeline never reads its own writes back.
 *
 * A step that fails is logged, recorded in the pipeline's status and
 * retried after a pause that doubles up to ptf.pipeline_max_backoff; it
 * takes neither the worker nor other pipelines down.  When nothing new
 * was committed since a pipeline last read everything, its step is not
 * run at all; when no pipeline had work, the worker naps until woken by a
 * commit that wrote a table its pipelines read (wake.c), a change of the
 * pipelines, or ptf.pipeline_idle_time passes.
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
#include "input/change_stream.h"
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

typedef struct Pipeline
{
	int32		id;
	char	   *name;
	Oid			owner;
	char	   *query;
	Oid			sink;
	char	   *sink_name;		/* the sink's name when it was dropped, or NULL */
	bool		changelog;		/* sink_mode 'changelog' */
	char	   *uid;
	bool		paused;
	char	   *slot_name;		/* its stream's, NULL before its first step */
	char	   *search_path;	/* as it was when the pipeline was made */
	Oid		   *sources;		/* the tables its uid reads, whose commits */
	int			nsources;		/* wake the worker; -1: not known yet */
	bool		has_origin;		/* its replication origin exists here */
} Pipeline;

static DatabaseWorker *me = NULL;
static int	my_index = 0;		/* which of the database's workers this is */

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

static void
clear_worker_entry(int code, Datum arg)
{
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

/* The database's pipelines, NIL when it has none (or not the extension). */
static List *
load_pipelines(void)
{
	List	   *pipelines = NIL;
	MemoryContext outer = CurrentMemoryContext;
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
		 * registry of 1.0 has no sink_name (a syscache probe, every round).
		 */
		sql_1_0 = get_attnum(get_relname_relid("pipeline_registry",
											   get_namespace_oid("ptf", false)),
							 "sink_name") == InvalidAttrNumber;
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
			p->nsources = -1;
			{
				Datum		tables = SPI_getbinval(tup, desc, Natts_pipeline_registry + 2,
												   &isnull);

				if (!isnull)
				{
					Datum	   *elems;
					bool	   *nulls;
					int			n;
					int			j;

					deconstruct_array(DatumGetArrayTypeP(tables), OIDOID, sizeof(Oid), true,
									  TYPALIGN_INT, &elems, &nulls, &n);
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
				}
			}
			p->has_origin = replorigin_by_name(ptf_pipeline_origin_name(MyDatabaseId, p->id),
											   true) != InvalidRepOriginId;
			pipelines = lappend(pipelines, p);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return pipelines;
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
static void
make_origins(List *pipelines)
{
	MemoryContext cxt = CurrentMemoryContext;
	ListCell   *lc;
	bool		any = false;

	foreach(lc, pipelines)
		any |= !((Pipeline *) lfirst(lc))->has_origin;
	if (!any)
		return;
	StartTransactionCommand();
	foreach(lc, pipelines)
	{
		Pipeline   *p = lfirst(lc);
		char	   *name = ptf_pipeline_origin_name(MyDatabaseId, p->id);

		if (!p->has_origin && replorigin_by_name(name, true) == InvalidRepOriginId)
			(void) replorigin_create(name);
		p->has_origin = true;
	}
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
		if (get_rel_name(p->sink) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("the sink of pipeline \"%s\" no longer exists", p->name),
					 errhint("Drop the pipeline with SELECT ptf.drop_pipeline('%s'), and make it again with a sink.",
							 p->name)));
		return;
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
	TimestampTz wake_at;		/* ptf_wake_at of the step's call */
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
	/* used after the commit, to move the slot on */
	if (r->slot_name)
		r->slot_name = MemoryContextStrdup(keep, r->slot_name);
}

static void
record_success(Pipeline *p, const StepResult *r)
{
	PipelineStatus *st;
	const ChangeStreamReport *rep = &change_stream_last_report;

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

static void
record_paused(Pipeline *p)
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
		st->retry_at = 0;
	}
	ptf_shmem_unlock();
}

/*
 * Is there anything for a step to do?  Not when the pipeline last read all
 * that had committed and nothing was written since, unless its uid said it
 * has more to do by now without new changes (windows an idle source
 * closes); not while it waits to retry.
 */
static bool
step_due(Pipeline *p, TimestampTz now, TimestampTz *wake_at)
{
	PipelineStatus *st;
	bool		due = true;

	ptf_shmem_lock(false);
	st = ptf_pipeline_status(MyDatabaseId, p->id, false);
	if (st != NULL)
	{
		if (st->state == PIPELINE_FAILING && st->retry_at > now)
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

/* Move the slot up to what committed, outside any transaction. */
static void
advance_slot(const StepResult *r)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (r->slot_name == NULL || XLogRecPtrIsInvalid(r->stored))
		return;
	PG_TRY();
	{
		change_stream_confirm(r->slot_name, r->stored);
	}
	PG_CATCH();
	{
		/* the next step does it; the slot may be busy with a reader */
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
	}
	PG_END_TRY();
}

static bool origin_session_set = false;

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
set_stepping(int32 id)
{
	ptf_shmem_lock(true);
	me->stepping = id;
	ptf_shmem_unlock();
}

/* The worker's own lock: one worker per (database, index). */
static bool
take_worker_lock(void)
{
	return ptf_lock(PTF_LOCK_WORKER, (uint32) my_index, ExclusiveLock, true, false);
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
release_session_locks(void)
{
	LockReleaseSession(USER_LOCKMETHOD);
	if (!take_worker_lock())
	{
		ereport(LOG,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another pipeline worker took over the place of worker %d of database %u",
						my_index, MyDatabaseId)));
		proc_exit(0);
	}
}

/* One step of one pipeline; true when it may have more to do at once. */
static bool
run_step(Pipeline *p)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool more = false;
	volatile bool busy = false;
	StepResult	result;

	memset(&result, 0, sizeof(result));
	memset(&change_stream_last_report, 0, sizeof(change_stream_last_report));
	change_stream_last_report.reached_end = true;
	result.started_at = GetCurrentTimestamp();
	set_stepping(p->id);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		Oid			argtypes[1] = {INT4OID};
		Datum		args[1] = {Int32GetDatum(p->id)};
		bool		isnull;
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
			ptf_spi_exec_as_owner("SELECT paused FROM ptf.pipeline_registry WHERE id OPERATOR(pg_catalog.=) $1",
								  1, argtypes, args, NULL, SPI_OK_SELECT);
		if (!busy && SPI_processed == 1 &&
			!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		{
			if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(p->owner)))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("the owner of pipeline \"%s\" no longer exists", p->name)));

			/* the step's writes carry the pipeline's origin */
			origin = pipeline_origin(p);
			replorigin_session_setup(origin);
			replorigin_session_origin = origin;
			origin_session_set = true;

			{
				PtfTime		started = ptf_now();

				ptf_wake_at = 0;
				run_as_owner(p);
				result.wake_at = ptf_wake_at;
				/* a uid that would wake at once again waits a second */
				if (result.wake_at != 0 && result.wake_at <= started)
					result.wake_at = started + USECS_PER_SEC;
			}

			read_progress(p, &result, cxt);
			more = !change_stream_last_report.reached_end;
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

		if (!busy)
		{
			fault_point(PTF_FAULT_AFTER_COMMIT, "after_commit");
			advance_slot(&result);
			record_success(p, &result);
		}
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
			ereport(LOG,
					(errcode(edata->sqlerrcode),
					 errmsg("pipeline \"%s\" failed: %s", p->name, edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
					 edata->hint ? errhint("%s", edata->hint) : 0));
			record_failure(p, edata->message);
		}
		FreeErrorData(edata);
		more = false;
	}
	PG_END_TRY();
	set_stepping(0);
	release_session_locks();
	return more;
}

/* Statuses of pipelines that are gone are forgotten. */
static void
forget_dropped(List *pipelines)
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
static List *
assigned_pipelines(List *pipelines)
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
		bool		is_mine = nworkers > 0 && kth_worker(workers, rank % nworkers) == my_index;
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

/* Take the worker's lock, held for its life. */
static bool
only_worker(void)
{
	bool		got;

	StartTransactionCommand();
	got = take_worker_lock();
	CommitTransactionCommand();
	return got;
}

void
ptf_pipeline_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	MemoryContext loop_cxt;

	memcpy(&my_index, MyBgworkerEntry->bgw_extra, sizeof(my_index));
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	ptf_in_pipeline_worker = true;

	/*
	 * One worker per place: a launcher started again does not know the
	 * workers of the one before, so each worker makes sure.
	 */
	if (!only_worker())
	{
		ereport(LOG,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("pipeline worker %d of database %u is running already", my_index, dboid)));
		proc_exit(0);
	}

	ptf_shmem_lock(true);
	me = ptf_database_worker(dboid, my_index, true);
	if (me != NULL)
	{
		me->pid = MyProcPid;
		me->latch = MyLatch;
		me->start_failed = false;
	}
	ptf_shmem_unlock();
	if (me == NULL)
		proc_exit(1);
	before_shmem_exit(clear_worker_entry, 0);
	/* after it, so that it runs before: the status is written, then the place freed */
	before_shmem_exit(record_overrun_at_exit, 0);
	step_kill_timeout = RegisterTimeout(USER_TIMEOUT, step_kill_handler);

	loop_cxt = AllocSetContextCreate(TopMemoryContext, "ptf pipeline worker",
									 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		List	   *pipelines;
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

		pipelines = load_pipelines();
		forget_dropped(pipelines);
		mine = assigned_pipelines(pipelines);
		make_origins(mine);
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
			ptf_kept_retain(PTF_KEPT_DECODER, slots);
			ptf_kept_retain(PTF_KEPT_OPERATOR, uids);
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
				record_paused(p);
			else if (step_due(p, now, &wake_at))
			{
				more |= run_step(p);
				stepped = true;
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
