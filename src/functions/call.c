/*-------------------------------------------------------------------------
 *
 * call.c
 *	  The run of a table-function call, the same for every function: input
 *	  through the frame, then what the call did stored with the uid.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/memutils.h"

#include "functions/call.h"

/* WAL an idle stream may read past before its position is stored anyway */
#define IDLE_STORE_DISTANCE (16 * 1024 * 1024)

typedef struct KeptOperator
{
	char	   *uid;
	Oid			state_relid;
	Oid			state_filenode; /* its records' TIDs are of this storage */
	int64		version;		/* of the stored state it equals */
	bool		in_use;			/* taken by a call: not the stored state */
	MemoryContext cxt;
	PtfOperator *op;
} KeptOperator;

#define MAX_KEPT_OPERATORS 64
static KeptOperator *kept_ops[MAX_KEPT_OPERATORS];

static KeptOperator *
find_kept_op(const char *uid)
{
	int			i;

	for (i = 0; i < MAX_KEPT_OPERATORS; i++)
		if (kept_ops[i] != NULL && strcmp(kept_ops[i]->uid, uid) == 0)
			return kept_ops[i];
	return NULL;
}

static void
forget_kept_op(KeptOperator *k)
{
	int			i;

	for (i = 0; i < MAX_KEPT_OPERATORS; i++)
		if (kept_ops[i] == k)
			kept_ops[i] = NULL;
	MemoryContextDelete(k->cxt);
	pfree(k->uid);
	pfree(k);
}

static PtfOperator *
ptf_call_kept_operator(DurableState *ds)
{
	KeptOperator *k;

	if (!ptf_in_pipeline_worker || (k = find_kept_op(durable_uid(ds))) == NULL)
		return NULL;
	if (k->in_use || k->op == NULL || k->state_relid != durable_state_relid(ds) ||
		k->state_filenode != durable_state_filenode(ds) || k->version != durable_version(ds))
	{
		/* changed by a call that rolled back, or by someone else */
		forget_kept_op(k);
		return NULL;
	}
	k->in_use = true;
	return k->op;
}

static MemoryContext
ptf_call_keep_context(DurableState *ds)
{
	KeptOperator *k;
	int			i;

	if (!ptf_in_pipeline_worker)
		return NULL;
	if ((k = find_kept_op(durable_uid(ds))) != NULL)
		forget_kept_op(k);
	for (i = 0; i < MAX_KEPT_OPERATORS && kept_ops[i] != NULL; i++)
		;
	if (i == MAX_KEPT_OPERATORS)
		return NULL;
	k = MemoryContextAllocZero(TopMemoryContext, sizeof(KeptOperator));
	k->uid = MemoryContextStrdup(TopMemoryContext, durable_uid(ds));
	k->cxt = AllocSetContextCreate(TopMemoryContext, "ptf kept operator",
								   ALLOCSET_DEFAULT_SIZES);
	k->in_use = true;
	kept_ops[i] = k;
	return k->cxt;
}

static void
ptf_call_keep(DurableState *ds, PtfOperator *op)
{
	KeptOperator *k = find_kept_op(durable_uid(ds));

	if (k != NULL)
	{
		k->op = op;
		k->state_relid = durable_state_relid(ds);
		k->state_filenode = durable_state_filenode(ds);
	}
}

void
ptf_call_forget_kept(List *keep_uids)
{
	int			i;

	for (i = 0; i < MAX_KEPT_OPERATORS; i++)
	{
		ListCell   *lc;
		bool		wanted = false;

		if (kept_ops[i] == NULL)
			continue;
		foreach(lc, keep_uids)
			if (strcmp(kept_ops[i]->uid, (char *) lfirst(lc)) == 0)
				wanted = true;
		if (!wanted)
			forget_kept_op(kept_ops[i]);
	}
}

PtfOperator *
ptf_call_durable_operator(DurableState *ds, const PtfStateSpec *spec, MemoryContext call_cxt,
						  PtfBuildOperator build, void *build_arg, void *emit_arg)
{
	PtfOperator *op = ptf_call_kept_operator(ds);
	MemoryContext keep;
	MemoryContext cxt;
	MemoryContext old;
	TupleDesc	rowdesc = spec->rowdesc;
	KeySpec    *keys = spec->keys;
	KeyedState *ks;

	if (op != NULL)
	{
		op->emit_arg = emit_arg;
		return op;
	}

	keep = ptf_call_keep_context(ds);
	cxt = keep ? keep : call_cxt;
	old = MemoryContextSwitchTo(cxt);
	/* what a kept operator points at lives as long as it does */
	if (keep)
	{
		rowdesc = CreateTupleDescCopy(spec->rowdesc);
		keys = key_spec_copy(spec->keys, rowdesc);
	}
	ks = keyed_state_create(keys, spec->hot, spec->cold, spec->ttl_us, 0,
							KEYED_STATE_DURABLE | spec->flags, cxt);
	op = build(build_arg, ks, rowdesc);
	op->emit_arg = emit_arg;
	MemoryContextSwitchTo(old);

	durable_load(ds, ks, op);
	if (keep)
		ptf_call_keep(ds, op);
	return op;
}

/* The kept operator of ds, if op is it, now equals the stored state. */
static void
kept_op_stored(DurableState *ds, PtfOperator *op)
{
	KeptOperator *k = find_kept_op(durable_uid(ds));

	if (k != NULL && k->op == op)
	{
		k->version = durable_version(ds);
		k->in_use = false;
	}
}

char *
ptf_call_prepare(PtfSqlInput *sql_in, Oid relid, TupleDesc rowdesc, const char *query,
				 bool changes, const char *uid)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	memset(sql_in, 0, sizeof(PtfSqlInput));
	if (changes)
		return change_stream_prepare(uid, relid);
	sql_in->relid = relid;
	sql_in->query = query;
	sql_in->rowdesc = rowdesc;
	sql_input_prepare(sql_in);
	return NULL;
}

PtfChangeStream *
ptf_call_run(PtfSqlInput *sql_in, Oid relid, TupleDesc rowdesc, const char *slot_name,
			 ChangeStreamTruncate on_truncate, const DurableProgress *progress,
			 const PtfCallSinks *sinks, PtfFrame *frame, bool end_of_stream)
{
	PtfChangeStream *cs = NULL;

	if (slot_name != NULL)
	{
		cs = change_stream_create(relid, rowdesc, slot_name, on_truncate);
		change_stream_run(cs, progress->last_lsn, progress->last_lsn_committed,
						  sinks ? sinks->changes : frame_push_meta,
						  sinks ? sinks->arg : (void *) frame);
	}
	else
		sql_input_run(sql_in, sinks ? sinks->rows : frame_push,
					  sinks ? sinks->arg : (void *) frame);
	frame_finish(frame, end_of_stream);
	return cs;
}

void
ptf_call_store(DurableState *ds, PtfOperator *op, PtfFrame *frame, PtfChangeStream *cs,
			   DurableProgress *progress, uint64 rows_out, uint64 rows_skipped,
			   int64 ttl_us)
{
	PtfFrameStats stats;

	frame_stats(frame, &stats);

	/*
	 * A call that read nothing writes nothing -- an idle pipeline leaves no
	 * WAL behind -- unless its stream moved on far enough that the slot
	 * should let go of the WAL in between.
	 */
	if (stats.rows_in == 0 && rows_skipped == 0 &&
		(cs == NULL || (change_stream_skipped(cs) == 0 &&
						change_stream_position(cs) - progress->last_lsn < IDLE_STORE_DISTANCE)))
	{
		durable_close(ds);
		kept_op_stored(ds, op);
		return;
	}

	progress->max_event_time = stats.max_event_time;
	progress->watermark = stats.watermark;
	progress->rows_in += stats.rows_in;
	progress->rows_out += rows_out;
	progress->rows_late += stats.rows_late;
	progress->rows_skipped += rows_skipped;
	if (cs != NULL)
	{
		progress->last_lsn = change_stream_position(cs);
		progress->rows_skipped += change_stream_skipped(cs);
	}
	/* expiry is measured in the stream's processing time: no rows, no sweep */
	if (ttl_us > 0 && stats.rows_in > 0)
		keyed_state_sweep(op->state, frame_processing_time(frame));
	durable_commit(ds, op->state, op, progress);
	kept_op_stored(ds, op);
}
