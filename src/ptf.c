/*-------------------------------------------------------------------------
 *
 * ptf.c
 *	  Entry point of the library: _PG_init, the ptf.* GUCs, and the small
 *	  vocabulary (row kinds) every room shares.
 *
 * The library is meant to be in shared_preload_libraries (pipelines need
 * shared memory and a background worker), but the table functions work
 * from a plain CREATE EXTENSION too; what needs preloading says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "frame.h"
#include "input/change_stream.h"
#include "ptf.h"
#include "worker/shmem.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

int64		ptf_state_ttl_us = 0;
bool		ptf_loaded_at_startup = false;
bool		ptf_in_pipeline_worker = false;

static char *ptf_state_ttl_string = NULL;

static const struct config_enum_entry fault_points[] = {
	{"none", PTF_FAULT_NONE, false},
	{"before_commit", PTF_FAULT_BEFORE_COMMIT, false},
	{"after_commit", PTF_FAULT_AFTER_COMMIT, false},
	{NULL, 0, false}
};

static const char *const rowkind_short[ROWKIND_COUNT] = {"+I", "-U", "+U", "-D"};
static const char *const rowkind_long[ROWKIND_COUNT] = {
	"INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"
};

const char *
rowkind_short_name(RowKind kind)
{
	return rowkind_short[kind];
}

const char *
rowkind_long_name(RowKind kind)
{
	return rowkind_long[kind];
}

bool
rowkind_parse(const char *s, RowKind *kind)
{
	int			i;

	for (i = 0; i < ROWKIND_COUNT; i++)
	{
		if (strcmp(s, rowkind_short[i]) == 0 || strcmp(s, rowkind_long[i]) == 0)
		{
			*kind = (RowKind) i;
			return true;
		}
	}
	return false;
}

/*
 * ptf.state_ttl is an interval ('0', '5 minutes', '1 day'), like Flink's
 * table.exec.state.ttl.  PostgreSQL 15's input functions cannot report
 * errors softly, so the check hook traps interval_in's error.
 */
static bool
check_state_ttl(char **newval, void **extra, GucSource source)
{
	volatile int64 us = 0;
	volatile bool ok = true;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		Datum		iv = DirectFunctionCall3(interval_in,
											 CStringGetDatum(*newval),
											 ObjectIdGetDatum(InvalidOid),
											 Int32GetDatum(-1));

		us = ptf_interval_to_us(iv, "ptf.state_ttl");
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		GUC_check_errmsg("invalid value for ptf.state_ttl: \"%s\"", *newval);
		GUC_check_errdetail("%s", edata->message);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();

	if (ok)
	{
		/* GUC extra data is malloc'd: guc.c frees it with free() */
		int64	   *parsed = malloc(sizeof(int64));

		if (parsed == NULL)
		{
			GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
			return false;
		}
		*parsed = us;
		*extra = parsed;
	}
	return ok;
}

static void
assign_state_ttl(const char *newval, void *extra)
{
	ptf_state_ttl_us = extra ? *(int64 *) extra : 0;
}

void
_PG_init(void)
{
	ptf_loaded_at_startup = process_shared_preload_libraries_in_progress;

	DefineCustomStringVariable("ptf.state_ttl",
							   "Default processing-time retention of per-key state.",
							   "Used when a call passes no state_ttl. '0' keeps state forever, "
							   "as Flink's table.exec.state.ttl does by default.",
							   &ptf_state_ttl_string,
							   "0",
							   PGC_USERSET,
							   0,
							   check_state_ttl, assign_state_ttl, NULL);

	DefineCustomIntVariable("ptf.max_changes_per_call",
							"Rows a call reads from a change stream, at most.",
							"A call stops at the end of the transaction that reaches it; the next "
							"call continues there. 0: no limit.",
							&ptf_max_changes_per_call,
							1000000, 0, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

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
	DefineCustomEnumVariable("ptf.debug_fault_point",
							 "Tests only: a point where pipeline steps stop and wait.",
							 NULL,
							 &ptf_debug_fault_point,
							 PTF_FAULT_NONE, fault_points,
							 PGC_SIGHUP, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							 NULL, NULL, NULL);

	/* settings of the shared memory the workers use exist only when preloaded */
	if (process_shared_preload_libraries_in_progress && !IsBinaryUpgrade)
	{
		DefineCustomIntVariable("ptf.max_workers",
								"Databases that can run pipelines at the same time (a worker each).",
								"Each takes a background worker: keep max_worker_processes above it.",
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

	MarkGUCPrefixReserved("ptf");
}
