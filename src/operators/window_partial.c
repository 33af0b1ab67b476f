/*-------------------------------------------------------------------------
 *
 * window_partial.c
 *	  The sliced window aggregate split between parallel workers and their
 *	  leader: partial slice states, serialized in the workers and combined
 *	  in the leader, as PostgreSQL's partial aggregation does.
 *
 * A parallel window_aggregate call (engine/parallel.c) reads block ranges
 * of its table in every participant.  A worker's operator aggregates its
 * rows into slices as the serial one does, but fires nothing: when its
 * input ends it emits each (key, slice) as a partial row -- the key
 * columns, the slice end, the slice's row count and its states serialized
 * with the aggregates' serial functions (aggs_serialize_sliced, as a uid
 * stores them) -- and forgets them.  The leader's operator aggregates its
 * own rows, and takes partial rows as rows of a further input of its
 * frame: each is deserialized and combined into the key's slice with the
 * aggregates' combine functions (aggs_merge_into), and the key's timer set
 * for the slice's first window, as a row of that slice would.  At the end
 * of the input the leader fires every window as the serial call does.
 *
 * A slice is the same set of rows however it was split, so every window's
 * aggregates are the serial call's -- up to the order states are
 * combined, which only aggregates whose results depend on it (float sums
 * in their last bits) can tell, exactly as with PostgreSQL's own parallel
 * aggregation.  Only calls whose every aggregate has a combine function
 * (and serial functions for an internal state), without DISTINCT or ORDER
 * BY, are split (window_agg_parallel_ok).
 *
 * Partial rows go through the leader's frame like input rows: a key not
 * in memory once the budget is spent is spilled with them, and its slices
 * are combined when its partition is replayed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/memutils.h"

#include "operators/window_internal.h"

/* columns of a partial row after the key's */
#define PARTIAL_SLICE_END	0
#define PARTIAL_NROWS		1
#define PARTIAL_STATES		2
#define PARTIAL_EXTRA		3

TupleDesc
window_agg_partial_desc(TupleDesc rowdesc, KeySpec *keys)
{
	TupleDesc	desc = CreateTemplateTupleDesc(keys->ncols + PARTIAL_EXTRA);
	int			i;

	for (i = 0; i < keys->ncols; i++)
		TupleDescCopyEntry(desc, i + 1, rowdesc, keys->cols[i].attno);
	TupleDescInitEntry(desc, keys->ncols + PARTIAL_SLICE_END + 1, "slice_end", INT8OID, -1, 0);
	TupleDescInitEntry(desc, keys->ncols + PARTIAL_NROWS + 1, "nrows", INT8OID, -1, 0);
	TupleDescInitEntry(desc, keys->ncols + PARTIAL_STATES + 1, "states", BYTEAOID, -1, 0);
	return desc;
}

bool
window_agg_parallel_ok(const WindowAggOptions *opts)
{
	AggSetSpec	as;
	AttrNumber *key_attnos = palloc(sizeof(AttrNumber) * Max(opts->keys->ncols, 1));
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf parallel check",
											  ALLOCSET_SMALL_SIZES);
	bool		ok;
	int			i;

	if (opts->spec.kind == WINDOW_SESSION || opts->changelog)
		return false;
	for (i = 0; i < opts->keys->ncols; i++)
		key_attnos[i] = opts->keys->cols[i].attno;
	memset(&as, 0, sizeof(as));
	as.targetlist = opts->targetlist;
	as.rowdesc = opts->rowdesc;
	as.nkeys = opts->keys->ncols;
	as.key_attnos = key_attnos;
	as.combine = true;
	as.durable = true;
	as.time_attno = opts->time_attno;
	ok = aggs_all_sliced(aggs_create(&as, cxt));
	MemoryContextDelete(cxt);
	return ok;
}

typedef struct EmitContext
{
	WinAggOp   *wa;
	int			nkeys;
	MemoryContext rowcxt;		/* a key's rows: serial functions allocate freely */
} EmitContext;

/* Every slice of a key as a partial row. */
static void
emit_key_partials(StateRef *ref, void *arg)
{
	EmitContext *ec = (EmitContext *) arg;
	WinAggOp   *wa = ec->wa;
	KeyedState *ks = wa->base.state;
	TupleTableSlot *slot = wa->partial_slot;
	int			n = keyed_state_ns_count(ks, ref->rec, SPACE_SLICES);
	int			i;

	MemoryContext old;

	if (n == 0)
		return;
	old = MemoryContextSwitchTo(ec->rowcxt);
	winagg_key_values(wa, ref->rec);
	for (i = 0; i < n; i++)
	{
		int64		s;
		SliceValue *sv = keyed_state_ns_at(ks, ref->rec, SPACE_SLICES, i, &s);
		bytea	   *states = NULL;

		if (sv == NULL)
			continue;			/* a hole of the grid */
		ExecClearTuple(slot);
		memcpy(slot->tts_values, wa->keyvals, sizeof(Datum) * ec->nkeys);
		memcpy(slot->tts_isnull, wa->keynulls, sizeof(bool) * ec->nkeys);
		slot->tts_values[ec->nkeys + PARTIAL_SLICE_END] = Int64GetDatum(s);
		slot->tts_values[ec->nkeys + PARTIAL_NROWS] = Int64GetDatum(sv->nrows);
		slot->tts_isnull[ec->nkeys + PARTIAL_SLICE_END] = false;
		slot->tts_isnull[ec->nkeys + PARTIAL_NROWS] = false;
		if (aggs_nsliced(wa->aggs) > 0)
			states = aggs_serialize_sliced(wa->aggs, sv->accs);
		slot->tts_values[ec->nkeys + PARTIAL_STATES] = PointerGetDatum(states);
		slot->tts_isnull[ec->nkeys + PARTIAL_STATES] = (states == NULL);
		ExecStoreVirtualTuple(slot);
		ptf_operator_emit(&wa->base, ROWKIND_INSERT, slot);
		ExecClearTuple(slot);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(ec->rowcxt);
}

void
winagg_emit_partials(WinAggOp *wa)
{
	EmitContext ec;

	Assert(wa->partial);
	ec.wa = wa;
	ec.nkeys = wa->keys->ncols;
	ec.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf partial rows",
									  ALLOCSET_DEFAULT_SIZES);
	keyed_state_foreach(wa->base.state, emit_key_partials, &ec);
	MemoryContextDelete(ec.rowcxt);
}

PtfRowResult
winagg_merge_partial(WinAggOp *wa, TupleTableSlot *row, const PtfRowContext *ctx)
{
	KeyedState *ks = wa->base.state;
	int			nkeys = ctx->keys->ncols;
	StateRef	ref;
	SliceValue *sv;
	bool		isnull;
	PtfTime		s;
	Datum		states;

	Assert(!wa->partial && wa->partial_input == ctx->input);
	switch (keyed_state_lookup(ks, ctx->keys, row, ctx->proc_time, true, &ref))
	{
		case KS_FULL:
			return PTF_ROW_SPILL;
		case KS_CREATED:
			((KeyHot *) ref.value)->next_fire = PTF_TIME_MIN;
			break;
		default:
			break;
	}
	s = DatumGetInt64(slot_getattr(row, nkeys + PARTIAL_SLICE_END + 1, &isnull));
	sv = winagg_slice_get(wa, ref.rec, s);
	sv->nrows += DatumGetInt64(slot_getattr(row, nkeys + PARTIAL_NROWS + 1, &isnull));
	states = slot_getattr(row, nkeys + PARTIAL_STATES + 1, &isnull);
	if (!isnull)
	{
		AggRows		none = {0};

		MemoryContext old;

		MemoryContextReset(wa->scratch_mem->cxt);
		old = MemoryContextSwitchTo(wa->scratch_mem->cxt);
		aggs_deserialize_sliced(wa->aggs, DatumGetByteaPP(states), wa->scratch_accs,
								wa->scratch_mem);
		aggs_merge_into(wa->aggs, sv->accs, &sv->rows, sv->mem, wa->scratch_accs, &none);
		MemoryContextSwitchTo(old);
	}
	winagg_schedule_slice(wa, ref.rec, (KeyHot *) ref.value, s, ctx->watermark);
	return PTF_ROW_DONE;
}
