/*-------------------------------------------------------------------------
 *
 * upsert.c
 *	  An upsert source read as a retract stream: Flink's ChangelogNormalize
 *	  run ahead of a call's operator.
 *
 * A table under REPLICA IDENTITY DEFAULT logs no old row for an UPDATE
 * that keeps its key and only the key of a DELETE.  An operator that takes
 * old rows back out of its state by their values (a window aggregate)
 * cannot read such a stream; Flink puts ChangelogNormalize ahead of it,
 * keyed by the primary key, keeping the last row of each key.  Here the
 * same operator as to_changelog's (operators/normalize.c, upsert mode)
 * runs in a frame of its own, keyed by the table's replica identity, over
 * state of its own: the uid's images table (state/images_table.c), read
 * key by key or whole as the main state is (engine/state_load.c) and
 * written back with it.  Its output -- +I for a key it has no row of, -U
 * with the kept row and +U for an update, -D with the kept row for a
 * delete -- goes into the main frame as whole rows; a delete of a key it
 * never saw (the row predates the stream) is passed over and counted.
 *
 * A truncation forgets every kept row without deleting it: the operator
 * behind passes truncations over (its windows keep what was truncated, as
 * under REPLICA IDENTITY FULL), and a key inserted again is new.
 *
 * The two frames run one after the other on each buffer of rows: this one
 * reads the keys of its buffer and normalizes it; its output fills the
 * main frame's buffer, which reads the keys of the rows as they now are
 * (the old row's group, which the WAL did not say).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "utils/lsyscache.h"

#include "engine/output.h"
#include "engine/upsert.h"
#include "input/change_stream.h"
#include "operators/normalize.h"

struct PtfUpsert
{
	PtfCall    *call;
	PtfCallInput *in;
	DurableState *ds;			/* the images table's */
	KeySpec    *keys;			/* the replica identity, in the input's row */
	PtfOperator *op;
	PtfStateLoad *load;
	PtfFrame   *frame;			/* its own */
	PtfFrameInput *handle;		/* of its frame */
	uint64		truncations;	/* passed over, this call */
	PtfRowSink	next;			/* the input's own adapter (a planned WHERE), or NULL */
	void	   *next_arg;
};

PtfUpsert *
ptf_upsert_open(PtfCall *call, PtfCallInput *in, DurableState *ds)
{
	PtfUpsert  *u = palloc0(sizeof(PtfUpsert));
	DurableIdentity id;

	Assert(in->upsert_keys != NULL && call->changes);
	u->call = call;
	u->in = in;
	u->keys = in->upsert_keys;
	memset(&id, 0, sizeof(id));
	id.uid = call->uid;
	id.function = call->function;
	id.ninputs = 1;
	id.rowdescs[0] = in->arg.rowdesc;
	id.relids[0] = in->arg.relid;
	id.keys = u->keys;
	id.layout = &normalize_layout;
	id.keeps_images = true;
	u->ds = durable_open_images(ds, &id);
	return u;
}

DurableState *
ptf_upsert_state(PtfUpsert *u)
{
	return u->ds;
}

/* A row of the stream, normalized: on into the main frame, whole. */
static void
upsert_emit(void *arg, RowKind kind, TupleTableSlot *row)
{
	PtfUpsert  *u = (PtfUpsert *) arg;
	PtfRowMeta	meta = *frame_current_meta(u->frame);
	int			i;

	if (kind == ROWKIND_TRUNCATE)
	{
		/* the kept rows are forgotten; what was truncated stays (as under FULL) */
		ereport(NOTICE,
				(errmsg("table %s was truncated; the deletions of its rows change nothing here",
						get_rel_name(u->in->arg.relid))));
		u->truncations++;
		return;
	}
	meta.partial = false;
	/* completed from the kept row, unless there was none */
	if (meta.incomplete)
	{
		TupleDesc	desc = row->tts_tupleDescriptor;

		meta.incomplete = false;
		slot_getallattrs(row);
		for (i = 0; i < desc->natts; i++)
			if (!row->tts_isnull[i] && TupleDescAttr(desc, i)->attlen == -1 &&
				VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(row->tts_values[i])))
				meta.incomplete = true;
		/* an operator would keep or emit a value the WAL did not carry */
		ptf_check_meta_complete(&meta);
	}
	/* a planned WHERE sees whole rows: the kept row's, for a key-only delete */
	if (u->next != NULL)
		u->next(u->next_arg, kind, row, &meta);
	else
		frame_push(u->in->handle, kind, row, &meta);
}

PtfOperator *
ptf_upsert_build(PtfUpsert *u, MemoryContext cxt)
{
	PtfOperatorEnv env;
	NormalizeOptions opts;
	MemoryContext old = MemoryContextSwitchTo(cxt);

	memset(&opts, 0, sizeof(opts));
	opts.rowdesc = CreateTupleDescCopy(u->in->arg.rowdesc);
	opts.keys = key_spec_copy(u->keys, opts.rowdesc);
	opts.mode = NORMALIZE_UPSERT;
	opts.truncate_forgets = true;
	MemoryContextSwitchTo(old);
	memset(&env, 0, sizeof(env));
	env.cxt = cxt;
	env.durable = true;
	env.mem_limit = 0;
	env.emit = upsert_emit;
	env.emit_arg = u;
	return normalize_create(&opts, &env);
}

/* Durable state never spills (it is unbounded): no partition to replay. */
static PtfOperator *
no_spill(void *arg, bool unbounded)
{
	elog(ERROR, "the rows of an upsert source's keys never spill");
	return NULL;
}

/* A row of the input: into this frame first. */
static void
upsert_push(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	PtfUpsert  *u = (PtfUpsert *) arg;

	frame_push(u->handle, kind, row, meta);
}

void
ptf_upsert_begin(PtfUpsert *u, PtfOperator *op, bool kept, bool complete)
{
	KeySpec    *keys[1];

	u->op = op;
	op->emit_arg = u;
	keys[0] = u->keys;
	/* a stream's call reads at most ptf.max_changes_per_call rows (0: any) */
	u->load = ptf_state_load_begin(u->ds, op, kept, complete, true, keys, 1,
								   ptf_max_changes_per_call > 0 ?
								   (uint64) ptf_max_changes_per_call : 0, NULL);
}

void
ptf_upsert_start(PtfUpsert *u)
{
	PtfFrameInputSpec spec;
	PtfOperator *op = u->op;

	Assert(u->in->handle != NULL && op != NULL);
	memset(&spec, 0, sizeof(spec));
	spec.name = u->in->name;
	spec.rowdesc = u->in->arg.rowdesc;
	spec.keys = u->keys;
	spec.changelog = true;
	u->frame = frame_create(false, no_spill, NULL);
	u->handle = frame_add_input(u->frame, &spec);
	frame_start(u->frame, op);
	ptf_state_load_start(u->load, u->frame);
	/* the input's adapter, if any, runs after normalizing: rows reach it whole */
	u->next = u->in->adapter;
	u->next_arg = u->in->adapter_arg;
	u->in->adapter = upsert_push;
	u->in->adapter_arg = u;
}

void
ptf_upsert_finish(PtfUpsert *u)
{
	frame_finish(u->frame, false);
}

uint64
ptf_upsert_rows_in(PtfUpsert *u)
{
	PtfFrameStats stats;

	if (u->frame == NULL)
		return 0;
	frame_stats(u->frame, &stats);
	return stats.rows_in;
}

uint64
ptf_upsert_skipped(PtfUpsert *u)
{
	if (u->op == NULL)
		return 0;
	return normalize_dropped(u->op) + normalize_unchanged(u->op) + u->truncations;
}

PtfStateLoad *
ptf_upsert_load(PtfUpsert *u)
{
	return u->load;
}

PtfOperator *
ptf_upsert_operator(PtfUpsert *u)
{
	return u->op;
}
