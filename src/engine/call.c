/*-------------------------------------------------------------------------
 *
 * call.c
 *	  The run of a table-function call, the same for every function: input
 *	  through the frame, then what the call did stored with the uid.
 *
 * Phases of ptf_call_run():
 *	  1. prepare: SPI connected; each input planned (a relation or query),
 *		 or the uid's slot made sure of (change streams of all inputs);
 *		 the function's prepared() hook sees the inputs' shapes;
 *	  2. state: with a uid, its registry row locked and checked, and its
 *		 operator built over the stored state -- or, in a pipeline worker,
 *		 the operator kept from the uid's last step, while it is exactly
 *		 the stored state (loading the state every step would cost as much
 *		 as the state is big); the state is loaded whole, or read as rows
 *		 come (engine/state_load.c); without a uid, a fresh operator over
 *		 memory state;
 *	  3. run: the frame made and started with the operator, each input's
 *		 rows pushed into it (bounded inputs one after the other, change
 *		 streams interleaved in commit order through one slot), the frame
 *		 finished (a bounded call ends its stream);
 *	  4. store: counters, watermarks, the stream's position, expired keys
 *		 swept and changed keys written -- or nothing at all when the call
 *		 read nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "base/kept.h"
#include "engine/call.h"
#include "engine/parallel.h"
#include "engine/state_load.h"
#include "engine/step.h"
#include "engine/upsert.h"
#include "state/durable.h"

/* WAL an idle stream may read past before its position is stored anyway */
#define IDLE_STORE_DISTANCE (16 * 1024 * 1024)

void
ptf_call_init(PtfCall *call, const char *function)
{
	memset(call, 0, sizeof(PtfCall));
	call->function = function;
	call->step = ptf_step_current();
	call->cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf call",
									  ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(call->cxt, function);
}

PtfCallInput *
ptf_call_add_input(PtfCall *call, const char *name, const PtfInputArg *arg,
				   const char *query)
{
	PtfCallInput *in;

	Assert(call->ninputs < FRAME_MAX_INPUTS);
	in = &call->inputs[call->ninputs++];
	memset(in, 0, sizeof(PtfCallInput));
	in->name = name;
	in->arg = *arg;
	in->query = query;
	in->on_truncate = TRUNCATE_SKIP;
	in->old_rows = OLD_ROWS_ANY;
	in->frame.name = name;
	in->frame.rowdesc = arg->rowdesc;
	return in;
}

/* ---- operators kept between a pipeline worker's steps ---- */

/* What the pipeline worker running this call keeps, or NULL: nothing is kept. */
static PtfKeptSet *
call_kept(PtfCall *call)
{
	return call->step != NULL ? call->step->kept : NULL;
}

/*
 * A uid's operator, and for an upsert source the normalizer ahead of it
 * over the uid's images table: each kept while it equals its stored state.
 */
#define KEPT_MAIN	0
#define KEPT_UPSERT	1

typedef struct KeptPart
{
	DurableStamp stamp;			/* of the stored state it equals */
	bool		complete;		/* it holds every key of its table */
	PtfOperator *op;
} KeptPart;

typedef struct KeptOperator
{
	bool		in_use;			/* taken by a call: not the stored state */
	KeptPart	part[2];
	/*
	 * The inputs' row types the operators were built for: rows of another
	 * layout (a column dropped or added since) are not theirs to keep or
	 * emit -- a row image put in a slot of the old type would make a datum
	 * of the old type holding more columns than it has.
	 */
	int			ninputs;
	TupleDesc	rowdescs[FRAME_MAX_INPUTS];
} KeptOperator;

static KeptOperator *
kept_operator(PtfKept *k)
{
	return (KeptOperator *) k->data;
}

static bool
stamp_equal(const DurableStamp *a, const DurableStamp *b)
{
	return a->relid == b->relid && a->filenode == b->filenode && a->version == b->version;
}

/* Were the kept operators built for the call's row types, as they are now? */
static bool
same_row_types(KeptOperator *ko, PtfCall *call)
{
	int			i;

	if (ko->ninputs != call->ninputs)
		return false;
	for (i = 0; i < call->ninputs; i++)
		if (!equalTupleDescs(ko->rowdescs[i], call->inputs[i].frame.rowdesc))
			return false;
	return true;
}

/*
 * The kept operators of ds's uid (and of images, its images table, if
 * any), if they are exactly the stored state, built for the row types of
 * now; *complete per part.
 */
static KeptOperator *
take_kept_operator(PtfKeptSet *kept, PtfCall *call, DurableState *ds,
				   DurableState *images)
{
	const char *uid = call->uid;
	PtfKept    *k;
	KeptOperator *ko;
	DurableStamp stamp;
	bool		same;

	if ((k = ptf_kept_find(kept, PTF_KEPT_OPERATOR, uid)) == NULL)
		return NULL;
	ko = kept_operator(k);
	durable_stamp(ds, &stamp);
	same = !ko->in_use && ko->part[KEPT_MAIN].op != NULL &&
		stamp_equal(&ko->part[KEPT_MAIN].stamp, &stamp) && !durable_must_write(ds) &&
		same_row_types(ko, call);
	if (same && images != NULL)
	{
		durable_stamp(images, &stamp);
		same = ko->part[KEPT_UPSERT].op != NULL &&
			stamp_equal(&ko->part[KEPT_UPSERT].stamp, &stamp);
	}
	if (!same)
	{
		/* changed by a call that rolled back, or by someone else */
		ptf_kept_forget(kept, k);
		return NULL;
	}
	ko->in_use = true;
	return ko;
}

/* The kept operators of ds's uid, if op is its, now equal the stored state. */
static void
kept_operator_stored(PtfKeptSet *kept, const char *uid, DurableState *ds, PtfOperator *op,
					 bool complete, PtfUpsert *upsert)
{
	PtfKept    *k;
	KeptOperator *ko;

	if ((k = ptf_kept_find(kept, PTF_KEPT_OPERATOR, uid)) == NULL)
		return;
	ko = kept_operator(k);
	if (ko->part[KEPT_MAIN].op != op)
		return;
	durable_stamp(ds, &ko->part[KEPT_MAIN].stamp);
	ko->part[KEPT_MAIN].complete = complete;
	if (upsert != NULL)
	{
		durable_stamp(ptf_upsert_state(upsert), &ko->part[KEPT_UPSERT].stamp);
		ko->part[KEPT_UPSERT].complete = ptf_state_load_complete(ptf_upsert_load(upsert));
	}
	ko->in_use = false;
}

/*
 * A kept operator whose state outgrew ptf.state_memory_limit evicts the
 * keys its step did not use, or, when that frees nothing, goes: the next
 * step reads what it needs again (engine/state_load.c).  Operators
 * that cannot be read key by key keep all of their state.
 */
static bool
part_bound(KeptPart *part, PtfStateLoad *load)
{
	if (part->op->methods->evict == NULL)
		return true;
	if (!ptf_state_load_bound(load))
		return false;
	part->complete = ptf_state_load_complete(load);
	return true;
}

static void
kept_operator_bound(PtfKeptSet *kept, const char *uid, PtfOperator *op, PtfStateLoad *load,
					PtfUpsert *upsert)
{
	PtfKept    *k;
	KeptOperator *ko;

	if ((k = ptf_kept_find(kept, PTF_KEPT_OPERATOR, uid)) == NULL)
		return;
	ko = kept_operator(k);
	if (ko->part[KEPT_MAIN].op != op || ko->in_use)
		return;
	if (!part_bound(&ko->part[KEPT_MAIN], load) ||
		(upsert != NULL && !part_bound(&ko->part[KEPT_UPSERT], ptf_upsert_load(upsert))))
		ptf_kept_forget(kept, k);
}

/* What a new operator is built over, copied into cxt. */
static void
copy_build(PtfCall *call, MemoryContext cxt, PtfCallBuild *b)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			i;

	for (i = 0; i < call->ninputs; i++)
	{
		b->rowdescs[i] = CreateTupleDescCopy(call->inputs[i].frame.rowdesc);
		b->keys[i] = key_spec_copy(call->inputs[i].frame.keys, b->rowdescs[i]);
	}
	MemoryContextSwitchTo(old);
}

static PtfOperator *
build_operator(PtfCall *call, MemoryContext cxt, bool durable, Size mem_limit,
			   uint64 expected_keys, const PtfKeyRange *key_range)
{
	PtfOperatorEnv env;
	PtfCallBuild b;

	memset(&env, 0, sizeof(env));
	env.cxt = cxt;
	env.durable = durable;
	env.mem_limit = mem_limit;
	env.expected_keys = expected_keys;
	if (key_range != NULL)
		env.key_range = *key_range;
	env.emit = call->emit;
	env.emit_arg = call->emit_arg;
	copy_build(call, cxt, &b);
	return call->build(call, &env, &b);
}

/*
 * What the statistics of relid say of a key of one column: the keys to
 * expect and, for an integer, the range of their values (0 and none
 * otherwise).  A parallel keep-first's workers ask the same.
 */
void
ptf_call_key_estimates(Oid relid, KeySpec *keys, uint64 *expected, PtfKeyRange *range)
{
	*expected = 0;
	memset(range, 0, sizeof(*range));
	if (keys == NULL || keys->ncols != 1)
		return;
	*expected = sql_input_estimate_distinct(relid, keys->cols[0].attno);
	range->valid = sql_input_estimate_range(relid, keys->cols[0].attno,
											&range->lo, &range->hi);
}

/*
 * The operator of a call without a uid, its state sized for the keys the
 * planner's statistics expect when the first input is a table keyed by
 * one column (those of its share when split by key), and told the range
 * of its values when they are integers (partitions spilled later start
 * small: spill_factory).
 */
static PtfOperator *
build_memory_operator(PtfCall *call)
{
	PtfCallInput *in = &call->inputs[0];
	PtfKeyRange range;

	call->expected_keys = 0;
	memset(&range, 0, sizeof(range));
	if (!call->changes && in->query == NULL && OidIsValid(in->arg.relid) &&
		in->adapter == NULL && call->keys_share_of >= 0)
		ptf_call_key_estimates(in->arg.relid, in->frame.keys, &call->expected_keys,
							   &range);
	if (call->keys_share_of > 1)
		call->expected_keys /= (uint64) call->keys_share_of;
	return build_operator(call, call->cxt, false, get_hash_memory_limit(),
						  call->expected_keys, &range);
}

/* A fresh operator over fresh memory state: spilled partitions start here. */
PtfOperator *
ptf_call_spill_factory(void *arg, bool unbounded)
{
	PtfCall    *call = (PtfCall *) arg;

	return build_operator(call, call->cxt, false, unbounded ? 0 : get_hash_memory_limit(), 0,
						  NULL);
}

/* The operator of a call without a uid, over memory state of work_mem's budget. */
PtfOperator *
ptf_call_build_operator(PtfCall *call, bool durable)
{
	Assert(!durable);
	return build_memory_operator(call);
}

/*
 * The operator of ds's uid over its stored state: kept from the worker's
 * last step (*kept; *complete if it holds every key), or built empty --
 * and with it, for an upsert source, the normalizer ahead of it
 * (ptf_upsert_begin).
 */
static PtfOperator *
durable_operator(PtfCall *call, DurableState *ds, PtfUpsert *upsert, bool *kept,
				 bool *complete)
{
	PtfKeptSet *set = call_kept(call);
	KeptOperator *ko = take_kept_operator(set, call, ds,
										  upsert ? ptf_upsert_state(upsert) : NULL);
	PtfKept    *k = NULL;
	PtfOperator *op;
	PtfOperator *front = NULL;

	*kept = (ko != NULL);
	if (ko != NULL)
	{
		op = ko->part[KEPT_MAIN].op;
		/* this call's output: a uid's calls may emit as a result or to a sink */
		op->emit = call->emit;
		op->emit_arg = call->emit_arg;
		*complete = ko->part[KEPT_MAIN].complete;
		if (upsert != NULL)
			ptf_upsert_begin(upsert, ko->part[KEPT_UPSERT].op, true,
							 ko->part[KEPT_UPSERT].complete);
		return op;
	}
	*complete = false;
	if ((k = ptf_kept_new(set, PTF_KEPT_OPERATOR, call->uid)) != NULL)
	{
		int			i;

		k->data = MemoryContextAllocZero(k->cxt, sizeof(KeptOperator));
		kept_operator(k)->in_use = true;
		kept_operator(k)->ninputs = call->ninputs;
		for (i = 0; i < call->ninputs; i++)
		{
			MemoryContext old = MemoryContextSwitchTo(k->cxt);

			kept_operator(k)->rowdescs[i] =
				CreateTupleDescCopyConstr(call->inputs[i].frame.rowdesc);
			MemoryContextSwitchTo(old);
		}
	}
	op = build_operator(call, k ? k->cxt : call->cxt, true, 0, 0, NULL);
	Assert(op->state != NULL && op->codec.layout == call->layout);
	if (upsert != NULL)
		front = ptf_upsert_build(upsert, k ? k->cxt : call->cxt);
	if (k != NULL)
	{
		kept_operator(k)->part[KEPT_MAIN].op = op;
		durable_stamp(ds, &kept_operator(k)->part[KEPT_MAIN].stamp);
		if (front != NULL)
		{
			kept_operator(k)->part[KEPT_UPSERT].op = front;
			durable_stamp(ptf_upsert_state(upsert), &kept_operator(k)->part[KEPT_UPSERT].stamp);
		}
	}
	if (front != NULL)
		ptf_upsert_begin(upsert, front, false, false);
	return op;
}

/* ---- the phases ---- */

static char *
prepare_inputs(PtfCall *call)
{
	char	   *slot_name = NULL;
	int			i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	for (i = 0; i < call->ninputs; i++)
	{
		PtfCallInput *in = &call->inputs[i];

		if (!call->changes)
		{
			in->sql.relid = in->arg.relid;
			in->sql.query = in->query;
			in->sql.rowdesc = in->arg.rowdesc;
			sql_input_prepare(&in->sql);
		}
		in->frame.changelog = call->changes || in->sql.changelog;
	}
	if (call->prepared)
		call->prepared(call);
	/* last: a uid's first call makes its slot, once all else is known good */
	if (call->changes)
	{
		Oid			relids[FRAME_MAX_INPUTS];

		for (i = 0; i < call->ninputs; i++)
			relids[i] = call->inputs[i].arg.relid;
		slot_name = change_stream_prepare(call->uid, relids, call->ninputs);
	}
	return slot_name;
}

static DurableState *
open_state(PtfCall *call, const char *slot_name, DurableProgress *progress)
{
	DurableIdentity id;
	int			i;

	memset(&id, 0, sizeof(id));
	id.uid = call->uid;
	id.function = call->function;
	id.ninputs = call->ninputs;
	for (i = 0; i < call->ninputs; i++)
	{
		id.rowdescs[i] = call->inputs[i].frame.rowdesc;
		id.relids[i] = call->inputs[i].arg.relid;
	}
	id.keys = call->inputs[0].frame.keys;
	id.on_time = call->on_time;
	id.time_type = call->time_type;
	id.slot_name = slot_name;
	id.options = call->options;
	id.layout = call->layout;
	id.nspaces = call->nspaces;
	id.keeps_images = call->keeps_images;
	id.keys_by_number = call->keys_by_number;
	id.pipeline_step = (call->step != NULL && call->step->in_worker);
	return durable_open(&id, progress);
}

/* ---- a stream's initial snapshot (snapshot => true) ---- */

#define SNAPSHOT_PENDING "pending"
#define SNAPSHOT_RESYNC "resync"

/*
 * Read the stream's tables as they are now, every row an insert, and say
 * what was read: "lsn xmin xmax xip...", the snapshot and a WAL position
 * after it.  Every transaction the snapshot saw committed has its commit
 * record before that position, and the stream skips those transactions
 * (change_stream_skip_snapshot): no row is lost or doubled at the boundary,
 * wherever the slot started.
 */
static char *
read_initial_snapshot(PtfCall *call)
{
	Snapshot	snap;
	XLogRecPtr	lsn;
	StringInfoData text;
	int			i;

	PushActiveSnapshot(GetLatestSnapshot());
	snap = GetActiveSnapshot();
	lsn = GetXLogInsertRecPtr();
	for (i = 0; i < call->ninputs; i++)
	{
		PtfCallInput *in = &call->inputs[i];
		PtfSqlInput table;

		memset(&table, 0, sizeof(table));
		table.relid = in->arg.relid;
		table.rowdesc = in->arg.rowdesc;
		sql_input_prepare(&table);
		sql_input_run_in_active_snapshot(&table, in->adapter ? in->adapter : frame_push,
										 in->adapter ? in->adapter_arg : (void *) in->handle);
	}
	initStringInfo(&text);
	appendStringInfo(&text, "%X/%X %u %u", LSN_FORMAT_ARGS(lsn), snap->xmin, snap->xmax);
	for (i = 0; i < (int) snap->xcnt; i++)
		appendStringInfo(&text, " %u", snap->xip[i]);
	PopActiveSnapshot();
	return text.data;
}

/* A stored snapshot's parts; false if it is none (or only pending). */
static bool
parse_snapshot(const char *text, XLogRecPtr *lsn, TransactionId *xmin, TransactionId *xmax,
			   TransactionId **xip, int *nxip)
{
	uint32		hi;
	uint32		lo;
	int			consumed = 0;
	const char *p;
	int			cap = 8;

	if (text == NULL || strcmp(text, SNAPSHOT_PENDING) == 0 ||
		strcmp(text, SNAPSHOT_RESYNC) == 0)
		return false;
	if (sscanf(text, "%X/%X %u %u%n", &hi, &lo, xmin, xmax, &consumed) != 4)
		ptf_state_corrupted("a stream snapshot that cannot be read, \"%s\"", text);
	*lsn = ((uint64) hi << 32) | lo;
	*xip = palloc(sizeof(TransactionId) * cap);
	*nxip = 0;
	for (p = text + consumed; *p != '\0';)
	{
		char	   *end;
		unsigned long x = strtoul(p, &end, 10);

		if (end == p)
			break;
		if (*nxip == cap)
			*xip = repalloc(*xip, sizeof(TransactionId) * (cap *= 2));
		(*xip)[(*nxip)++] = (TransactionId) x;
		p = end;
	}
	return true;
}

/*
 * ptf.resync: the tables' rows as they are now, read over every key of the
 * state (their marks cleared), and what the operator says of the keys no
 * row came for (to_changelog: deleted).  The snapshot is then skipped in the
 * stream as a first one is: the changes it holds are not read again.
 */
static char *
read_resync_snapshot(PtfCall *call, PtfOperator *op, PtfStateLoad *load)
{
	char	   *snapshot;

	ptf_state_load_all(load);
	Assert(op->methods->on_resync != NULL);
	op->methods->on_resync(op, false);
	snapshot = read_initial_snapshot(call);
	frame_flush(call->frame);
	op->methods->on_resync(op, true);
	return snapshot;
}

static PtfChangeStream *
run_inputs(PtfCall *call, const char *slot_name, DurableProgress *progress,
		   PtfOperator *op, PtfStateLoad *load)
{
	PtfChangeStream *cs = NULL;
	int			i;

	if (slot_name != NULL)
	{
		ChangeStreamTable tables[FRAME_MAX_INPUTS];
		XLogRecPtr	snap_lsn;
		TransactionId xmin;
		TransactionId xmax;
		TransactionId *xip;
		int			nxip;
		bool		has_snapshot;

		bool		start_only = (call->step != NULL && call->step->start_only);
		ChangeStreamReport report;

		/* the first call that reads a stream asked to start with a snapshot reads it */
		if (progress->stream_snapshot != NULL &&
			strcmp(progress->stream_snapshot, SNAPSHOT_PENDING) == 0 && !start_only)
		{
			progress->stream_snapshot = read_initial_snapshot(call);
			progress->snapshot_changed = true;
		}
		else if (progress->stream_snapshot != NULL &&
				 strcmp(progress->stream_snapshot, SNAPSHOT_RESYNC) == 0)
		{
			if (op->methods->on_resync == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("the stream of uid \"%s\" cannot be brought in line with its tables by %s",
								call->uid, call->function),
						 errhint("ptf.drop_state('%s') forgets the uid.", call->uid)));
			progress->stream_snapshot = read_resync_snapshot(call, op, load);
			progress->snapshot_changed = true;
		}
		has_snapshot = parse_snapshot(progress->stream_snapshot, &snap_lsn, &xmin, &xmax, &xip, &nxip);

		for (i = 0; i < call->ninputs; i++)
		{
			PtfCallInput *in = &call->inputs[i];

			tables[i].relid = in->arg.relid;
			tables[i].rowdesc = in->arg.rowdesc;
			tables[i].on_truncate = in->on_truncate;
			tables[i].old_rows = in->old_rows;
			tables[i].sink = in->adapter ? in->adapter : frame_push;
			tables[i].sink_arg = in->adapter ? in->adapter_arg : (void *) in->handle;
		}
		cs = change_stream_create(slot_name, tables, call->ninputs);
		if (has_snapshot)
			change_stream_skip_snapshot(cs, xmin, xmax, xip, nxip);
		/* changes before REASSIGN OWNED are read with their owner's rights then */
		change_stream_handovers(cs, progress->handover_roles, progress->handover_xids,
								progress->nhandovers);
		if (!XLogRecPtrIsInvalid(progress->skip_lsn))
			change_stream_skip_transaction(cs, progress->skip_lsn);
		/* a stream made by create_pipeline starts at its slot, read from the next call on */
		if (!start_only)
			change_stream_run(cs, progress->last_lsn, progress->last_lsn_committed,
							  call_kept(call));
		change_stream_report(cs, &report);
		progress->handovers_passed = change_stream_handovers_passed(cs);
		progress->skip_passed = change_stream_skip_lsn_passed(cs);
		/* past the snapshot's position no transaction it saw can come */
		if (has_snapshot &&
			(report.position >= snap_lsn || (report.reached_end && report.end_of_wal >= snap_lsn)))
		{
			progress->stream_snapshot = NULL;
			progress->snapshot_changed = true;
		}
	}
	else
		for (i = 0; i < call->ninputs; i++)
		{
			PtfCallInput *in = &call->inputs[i];

			sql_input_run(&in->sql, in->adapter ? in->adapter : frame_push,
						  in->adapter ? in->adapter_arg : (void *) in->handle);
		}
	return cs;
}

/*
 * Store the call's effect with the uid's state, in the caller's
 * transaction: counters, watermarks, the stream's position, expired keys
 * swept, changed keys written.
 */
static void
store_state(PtfCall *call, DurableState *ds, PtfOperator *op, PtfChangeStream *cs,
			DurableProgress *progress, uint64 skipped, bool complete)
{
	PtfFrameStats stats;
	int			i;

	frame_stats(call->frame, &stats);

	/*
	 * A call that read nothing and did nothing writes nothing -- an idle
	 * pipeline leaves no WAL behind -- unless its stream moved on far
	 * enough that the slot should let go of the WAL in between.  (A call
	 * that read nothing may still have moved the watermark: the idle rule.)
	 */
	if (stats.rows_in == 0 && skipped == 0 && !durable_must_write(ds) &&
		!progress->snapshot_changed && !progress->skip_passed &&
		(call->upsert == NULL || ptf_upsert_rows_in(call->upsert) == 0) &&
		call->out->rows == 0 && stats.watermark == progress->combined_watermark &&
		(cs == NULL || (change_stream_skipped(cs) == 0 &&
						change_stream_position(cs) - progress->last_lsn < IDLE_STORE_DISTANCE)))
	{
		durable_close(ds);
		kept_operator_stored(call_kept(call), call->uid, ds, op, complete, call->upsert);
		return;
	}

	for (i = 0; i < call->ninputs; i++)
		frame_input_progress(call->inputs[i].handle, &progress->max_event_time[i],
							 &progress->watermark[i], &progress->last_row_proc_time[i]);
	progress->combined_watermark = stats.watermark;
	progress->rows_in += stats.rows_in;
	progress->rows_out += call->out->rows;
	progress->rows_late += stats.rows_late;
	progress->rows_skipped += skipped;
	if (cs != NULL)
	{
		progress->last_lsn = change_stream_position(cs);
		progress->rows_skipped += change_stream_skipped(cs);
	}
	/* expiry is measured in the stream's processing time: no rows, no sweep */
	if (call->ttl_us > 0 && stats.rows_in > 0)
	{
		PtfTime		now = frame_processing_time(call->frame);

		if (now != PTF_TIME_MIN)
			durable_sweep_expired(ds, now, !complete);
	}
	durable_commit(ds, progress);
	kept_operator_stored(call_kept(call), call->uid, ds, op, complete, call->upsert);
}

/*
 * Calls free large blocks again and again: decoding each transaction's
 * changes once replayed (the reorder buffer's blocks of up to 8 MB),
 * state tables and batches as they grow, and the output rows when the
 * query ends.  With nothing allocated after them glibc gives the heap's
 * top back to the kernel every time, or maps and unmaps the blocks, and
 * the next use touches new pages, a page fault each (a read of 1.5M
 * changes: 94k more faults, twice the time; a temporal join's million
 * output rows: 35k faults, a fifth of its time).  Once a process runs a
 * call, blocks up to 32 MB come from the heap (glibc's own dynamic rule
 * moves there after its first large free) and the heap keeps free at its
 * top what one sort or hash of the session may use anyway, twice
 * work_mem, at least 64 MB: memory the session's work_mem allows it, used
 * again by its next call instead of faulted in anew.
 */
static void
keep_freed_memory(void)
{
#ifdef __GLIBC__
	static bool mmap_set = false;
	static Size trim_set = 0;
	Size		trim = Max((Size) 64 * 1024 * 1024,
						   Min((Size) work_mem * 1024 * 2, (Size) MaxAllocSize));

	if (!mmap_set)
	{
		mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
		mmap_set = true;
	}
	if (trim != trim_set)
	{
		mallopt(M_TRIM_THRESHOLD, (int) trim);
		trim_set = trim;
	}
#endif
}

/*
 * A stream that starts without its tables' rows can stop for good at an
 * UPDATE of a row it has not seen that leaves a TOASTed value unchanged:
 * the WAL has no value for it, and no image of the row is kept.  Said
 * once, when the stream starts, with both ways to avoid it.
 */
static void
warn_incomplete_images(PtfCall *call)
{
	int			i;

	for (i = 0; i < call->ninputs; i++)
	{
		Oid			relid = call->inputs[i].arg.relid;

		if (call->inputs[i].inserts_only || !change_stream_images_may_be_incomplete(relid))
			continue;
		ereport(WARNING,
				(errmsg("the change stream of uid \"%s\" can stop at an update of table %s that it cannot complete",
						call->uid, get_rel_name(relid)),
				 errdetail("Under a replica identity other than FULL, an update that leaves a TOASTed value unchanged logs no value for it, and a row the stream has not seen cannot be completed from state."),
				 !call->inputs[i].rows_not_kept ?
				 errhint("Start the stream with the table's rows (ptf.drop_state('%s'), then a first call with snapshot => true), or ALTER TABLE %s REPLICA IDENTITY FULL.",
						 call->uid, get_rel_name(relid)) :
				 errhint("ALTER TABLE %s REPLICA IDENTITY FULL: %s keeps no rows to complete one from.",
						 get_rel_name(relid), call->function)));
	}
}

void
ptf_call_run(PtfCall *call)
{
	char	   *slot_name;
	DurableState *ds = NULL;
	DurableProgress progress;
	PtfOperator *op;
	PtfChangeStream *cs;
	PtfStateLoad *load = NULL;
	PtfParallel *par = NULL;
	PtfParallelStats pstats;
	uint64		skipped_before = 0;
	int			i;
	MemoryContext old = MemoryContextSwitchTo(call->cxt);

	Assert(call->ninputs >= 1 && call->build != NULL && call->out != NULL);
	Assert(call->uid != NULL || !call->changes);
	keep_freed_memory();

	/*
	 * A step runs its pipeline's one call with a uid.  Another in it -- from
	 * a trigger of the sink, or a function the query or a condition calls --
	 * would pass for the step (a pipeline's uid is the worker's alone) and
	 * read a stream inside the step's transaction.
	 */
	if (call->uid != NULL && call->step != NULL)
	{
		if (call->step->called)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("uid \"%s\" cannot be called within a step of a pipeline", call->uid),
					 errdetail("A step runs its pipeline's one call; a trigger of its sink, or a function its query calls, made another."),
					 errhint("Call it from another session, or make it a pipeline of its own.")));
		call->step->called = true;
	}

	/* 1. prepare */
	slot_name = prepare_inputs(call);
	if (ptf_parallel_in_worker())
	{
		/* a parallel worker's share of its leader's call (engine/parallel.c) */
		ptf_parallel_worker_run(call);
		SPI_finish();
		MemoryContextSwitchTo(old);
		return;
	}
	if (call->uid == NULL)
		par = ptf_parallel_begin(call);

	/* 2. state */
	memset(&progress, 0, sizeof(progress));
	if (call->uid != NULL)
	{
		KeySpec    *keys[FRAME_MAX_INPUTS];
		bool		kept;
		bool		complete;

		ds = open_state(call, slot_name, &progress);
		if (call->inputs[0].upsert_keys != NULL)
			call->upsert = ptf_upsert_open(call, &call->inputs[0], ds);
		op = durable_operator(call, ds, call->upsert, &kept, &complete);
		for (i = 0; i < call->ninputs; i++)
			keys[i] = call->inputs[i].frame.keys;
		/* a stream's call reads at most ptf.max_changes_per_call rows (0: any) */
		load = ptf_state_load_begin(ds, op, kept, complete, call->probe_ok,
									keys, call->ninputs,
									call->changes && ptf_max_changes_per_call > 0 ?
									(uint64) ptf_max_changes_per_call : 0,
									!call->changes && call->ninputs == 1 ?
									&call->inputs[0].sql : NULL);
		/* a stream starting with a snapshot: read by its first reading call */
		if (call->snapshot && progress.created)
		{
			progress.stream_snapshot = SNAPSHOT_PENDING;
			progress.snapshot_changed = true;
		}
		else if (call->changes && progress.created)
			warn_incomplete_images(call);
	}
	else
		op = build_memory_operator(call);
	if (call->skipped)
		skipped_before = call->skipped(call, op);
	if (call->upsert != NULL)
		skipped_before += ptf_upsert_skipped(call->upsert);

	/* 3. run */
	call->frame = frame_create(call->need_proc_time, ptf_call_spill_factory, call);
	for (i = 0; i < call->ninputs; i++)
		call->inputs[i].handle = frame_add_input(call->frame, &call->inputs[i].frame);
	if (par != NULL)
		ptf_parallel_add_inputs(par, call->frame);
	if (ds != NULL)
		for (i = 0; i < call->ninputs; i++)
			frame_restore_input(call->inputs[i].handle, progress.max_event_time[i],
								progress.watermark[i], progress.last_row_proc_time[i]);
	op->rows_before = progress.rows_in;
	frame_start(call->frame, op);
	if (load != NULL)
		ptf_state_load_start(load, call->frame);
	if (call->upsert != NULL)
		ptf_upsert_start(call->upsert);
	call->out->frame = call->frame;
	if (par != NULL)
	{
		cs = NULL;
		ptf_parallel_run(par);
		ptf_parallel_end(par, &pstats);
	}
	else
		cs = run_inputs(call, slot_name, &progress, op, load);
	if (call->upsert != NULL)
		ptf_upsert_finish(call->upsert);
	frame_finish(call->frame, call->uid == NULL);
	if (call->uid != NULL && call->step != NULL)
	{
		PtfTime		stored_timer = PTF_TIME_MAX;

		/* what the runner of the step learns: when to wake, how far the stream was read */
		for (i = 0; load != NULL && i < call->ninputs; i++)
			if (call->inputs[i].frame.idle_us > 0)
			{
				/* with the idle rule, the timers of keys not read too */
				stored_timer = ptf_state_load_next_timer(load);
				break;
			}
		call->step->wake_at = frame_next_wake(call->frame, stored_timer);
		if (cs != NULL)
			change_stream_report(cs, &call->step->report);
	}

	/* 4. store */
	if (ds != NULL)
	{
		uint64		skipped = call->skipped ? call->skipped(call, op) : 0;

		if (call->upsert != NULL)
			skipped += ptf_upsert_skipped(call->upsert);
		store_state(call, ds, op, cs, &progress, skipped - skipped_before,
					ptf_state_load_complete(load));
		/* written back: a kept operator may recycle the keys it removed */
		ptf_operator_reclaim(op, 1);
		if (call->upsert != NULL)
			ptf_operator_reclaim(ptf_upsert_operator(call->upsert), 1);
	}
	ptf_record_call_stats(call->function, call->frame, call->out->rows);
	if (call->upsert != NULL)
		ptf_record_more_state(ptf_operator_memory(ptf_upsert_operator(call->upsert)));
	if (par != NULL)
	{
		ptf_record_parallel_stats(pstats.workers_planned, pstats.workers_launched,
								  pstats.worker_rows, pstats.rows_from_workers);
		if (pstats.by_key)
			ptf_record_workers_state(&pstats.workers_state);
	}
	if (load != NULL)
	{
		kept_operator_bound(call_kept(call), call->uid, op, load, call->upsert);
		ptf_record_state_load_stats(load);
	}

	SPI_finish();
	MemoryContextSwitchTo(old);
}

void
ptf_call_output(PtfCall *call, FunctionCallInfo fcinfo, PtfOutput *out, PtfEmitFn emit,
				void *emit_arg)
{
	ptf_output_init(fcinfo, out);
	call->fcinfo = fcinfo;
	call->out = out;
	call->emit = emit != NULL ? emit : ptf_output_emit_row;
	call->emit_arg = emit != NULL ? emit_arg : out;
}

Datum
ptf_call_return(PtfCall *call)
{
	ptf_call_run(call);
	if (call->finished != NULL)
		call->finished(call);
	if (call->out != NULL)
		ptf_output_end(call->out);
	MemoryContextDelete(call->cxt);
	return (Datum) 0;
}
