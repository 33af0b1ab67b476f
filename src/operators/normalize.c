/*-------------------------------------------------------------------------
 *
 * normalize.c
 *	  Changelog normalization (Flink's ChangelogNormalize): an upsert stream
 *	  made a retract stream from the last image kept per key.
 *
 * A change stream under REPLICA IDENTITY DEFAULT logs no old image for an
 * UPDATE that keeps its key, and only the key columns of a DELETE's old
 * row (partial rows).  Keeping the last image of every key:
 *
 *	  +I / +U		a key with no image: +I; else -U with the kept image, then
 *				+U -- or nothing when the row equals the kept one and no
 *				state TTL is set; the row becomes the key's image
 *	  -U / -D		-D with the kept image, which goes; a key with no image:
 *				dropped and counted (its row predates the stream, or its
 *				image expired)
 *
 * That is Flink's processLastRowOnChangelog.  Unchanged TOASTed values
 * missing from a new image are completed from the kept image, or, for an
 * update that changed the key, from the image its -U just retracted.
 * Images live under the key's state TTL.
 *
 * Two more modes: passthrough, where every row goes on as it came and
 * nothing is kept, and retractions, for FROM_CHANGELOG over partial
 * deletes (consume_full_deletes => false): additions go on and become
 * their key's image, a -U or -D goes on carrying that image, and one of a
 * key with no image is dropped and counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "executor/tuptable.h"
#include "utils/datum.h"
#include "utils/memutils.h"

#include "operators/normalize.h"
#include "state/row_images.h"

typedef struct NormalizeValue
{
	PooledTuple image;			/* the key's last row */
} NormalizeValue;

typedef struct NormalizeOperator
{
	PtfOperator base;
	NormalizeMode mode;
	bool		truncate_forgets;
	TupleDesc	rowdesc;
	TuplePool  *pool;
	TupleTableSlot *image_slot;	/* a kept image, emitted */
	TupleTableSlot *done_slot;	/* a row completed from its image */
	uint64		dropped;		/* retractions of keys with no image */
	uint64		unchanged;		/* updates equal to the kept image */
	PooledTuple carry;			/* the image a -U just retracted */
	Datum	   *values;
	bool	   *nulls;
} NormalizeOperator;

static const StateField normalize_fields[] = {
	{"image", SF_IMAGE, 0},
};

const StateLayout normalize_layout = {lengthof(normalize_fields), normalize_fields};

static void
emit_image(NormalizeOperator *n, RowKind kind, NormalizeValue *v)
{
	ExecStoreMinimalTuple(v->image.tuple, n->image_slot, false);
	ptf_operator_emit(&n->base, kind, n->image_slot);
	ExecClearTuple(n->image_slot);
}

/*
 * The new image with what the WAL left out (unchanged TOASTed values, as
 * on-disk pointers) taken from the key's kept image.
 */
static TupleTableSlot *
complete_from_image(NormalizeOperator *n, TupleTableSlot *row, MinimalTuple image)
{
	int			natts = n->rowdesc->natts;
	int			i;

	slot_getallattrs(row);
	memcpy(n->values, row->tts_values, sizeof(Datum) * natts);
	memcpy(n->nulls, row->tts_isnull, sizeof(bool) * natts);
	ExecStoreMinimalTuple(image, n->image_slot, false);
	slot_getallattrs(n->image_slot);
	for (i = 0; i < natts; i++)
	{
		if (!n->nulls[i] && TupleDescAttr(n->rowdesc, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(n->values[i])))
		{
			n->values[i] = n->image_slot->tts_values[i];
			n->nulls[i] = n->image_slot->tts_isnull[i];
		}
	}
	ExecClearTuple(n->done_slot);
	memcpy(n->done_slot->tts_values, n->values, sizeof(Datum) * natts);
	memcpy(n->done_slot->tts_isnull, n->nulls, sizeof(bool) * natts);
	ExecStoreVirtualTuple(n->done_slot);
	/* the values point into the kept image: a copy before it is replaced */
	ExecMaterializeSlot(n->done_slot);
	ExecClearTuple(n->image_slot);
	return n->done_slot;
}

/* Flink's record equaliser: same values, compared as stored */
static bool
rows_equal(NormalizeOperator *n, TupleTableSlot *row, NormalizeValue *v)
{
	int			i;
	bool		equal = true;

	slot_getallattrs(row);
	ExecStoreMinimalTuple(v->image.tuple, n->image_slot, false);
	slot_getallattrs(n->image_slot);
	for (i = 0; i < n->rowdesc->natts && equal; i++)
	{
		Form_pg_attribute att = TupleDescAttr(n->rowdesc, i);

		if (row->tts_isnull[i] != n->image_slot->tts_isnull[i])
			equal = false;
		else if (!row->tts_isnull[i])
			equal = datum_image_eq(row->tts_values[i], n->image_slot->tts_values[i],
								   att->attbyval, att->attlen);
	}
	ExecClearTuple(n->image_slot);
	return equal;
}

static void
drop_carry(NormalizeOperator *n)
{
	if (n->carry.tuple != NULL)
		tuple_pool_free(n->pool, &n->carry);
}

static void
collect_record(StateRef *ref, void *arg)
{
	List	  **recs = (List **) arg;

	*recs = lappend(*recs, ref->rec);
}

/*
 * A truncation (the frame read every key first): with images kept, each
 * is deleted -- what the truncation did to its row -- and the key goes
 * (or only goes, truncate_forgets); then the truncation itself goes on,
 * for whoever maps it.
 */
static PtfRowResult
truncate_all(NormalizeOperator *n, TupleTableSlot *row)
{
	KeyedState *ks = n->base.state;
	List	   *recs = NIL;
	ListCell   *lc;

	drop_carry(n);
	if (n->mode != NORMALIZE_PASSTHROUGH && ks != NULL)
	{
		keyed_state_foreach(ks, collect_record, &recs);
		foreach(lc, recs)
		{
			StateRecord *rec = (StateRecord *) lfirst(lc);
			StateRef	ref;
			NormalizeValue *v;

			keyed_state_record_ref(ks, rec, &ref);
			v = (NormalizeValue *) ref.value;
			if (v->image.tuple != NULL)
			{
				if (!n->truncate_forgets)
					emit_image(n, ROWKIND_DELETE, v);
				tuple_pool_free(n->pool, &v->image);
			}
			keyed_state_remove(ks, rec);
		}
		list_free(recs);
	}
	ptf_operator_emit(&n->base, ROWKIND_TRUNCATE, row);
	return PTF_ROW_DONE;
}

/*
 * Partial retractions made whole: a -U or -D carries the kept image of its
 * key (a key with none is dropped and counted); additions go on as they
 * came and become their key's image.
 */
static PtfRowResult
retractions_on_row(NormalizeOperator *n, RowKind kind, TupleTableSlot *row,
				   const PtfRowContext *ctx)
{
	KeyedState *ks = n->base.state;
	PtfTime		proc_time = ctx->proc_time;
	StateRef	ref;
	NormalizeValue *v;
	KeyedLookup res;

	res = keyed_state_lookup(ks, ctx->keys, row, proc_time, ROWKIND_IS_ADDITION(kind), &ref);
	if (res == KS_FULL)
		return PTF_ROW_SPILL;
	if (!ROWKIND_IS_ADDITION(kind))
	{
		if (res != KS_FOUND)
		{
			n->dropped++;
			return PTF_ROW_DONE;
		}
		v = (NormalizeValue *) ref.value;
		emit_image(n, kind, v);
		tuple_pool_free(n->pool, &v->image);
		keyed_state_remove(ks, ref.rec);
		return PTF_ROW_DONE;
	}
	v = (NormalizeValue *) ref.value;
	ptf_operator_emit(&n->base, kind, row);
	tuple_pool_store_slot(n->pool, &v->image, row);
	keyed_state_touch(ks, ref.rec, proc_time);
	keyed_state_mark_changed(ks, ref.rec);
	return PTF_ROW_DONE;
}

static PtfRowResult
normalize_on_row(PtfOperator *op, RowKind kind, TupleTableSlot *row,
				 const PtfRowContext *ctx)
{
	NormalizeOperator *n = (NormalizeOperator *) op;
	KeyedState *ks = op->state;
	const PtfRowMeta *meta = ctx->meta;
	PtfTime		proc_time = ctx->proc_time;
	StateRef	ref;
	NormalizeValue *v;
	KeyedLookup res;

	if (kind == ROWKIND_TRUNCATE)
		return truncate_all(n, row);
	if (n->mode == NORMALIZE_PASSTHROUGH)
	{
		ptf_operator_emit(op, kind, row);
		return PTF_ROW_DONE;
	}
	if (n->mode == NORMALIZE_RETRACTIONS)
		return retractions_on_row(n, kind, row, ctx);

	if (!ROWKIND_IS_ADDITION(kind))
	{
		res = keyed_state_lookup(ks, ctx->keys, row, proc_time, false, &ref);
		if (res == KS_FULL)
			return PTF_ROW_SPILL;
		drop_carry(n);
		if (res != KS_FOUND)
		{
			n->dropped++;
			return PTF_ROW_DONE;
		}
		v = (NormalizeValue *) ref.value;

		/*
		 * Flink retracts the kept row with -D even for a -U: no +U of this
		 * key need follow.  An update that moved the row to another key
		 * follows at once, and completes its unlogged values from this row.
		 */
		emit_image(n, ROWKIND_DELETE, v);
		if (kind == ROWKIND_UPDATE_BEFORE)
		{
			n->carry = v->image;
			v->image.tuple = NULL;
		}
		else
			tuple_pool_free(n->pool, &v->image);
		keyed_state_remove(ks, ref.rec);
		return PTF_ROW_DONE;
	}

	res = keyed_state_lookup(ks, ctx->keys, row, proc_time, true, &ref);
	if (res == KS_FULL)
	{
		drop_carry(n);
		return PTF_ROW_SPILL;
	}
	v = (NormalizeValue *) ref.value;
	if (res == KS_FOUND && v->image.tuple != NULL)
	{
		if (meta->incomplete)
			row = complete_from_image(n, row, v->image.tuple);

		/* without a TTL to renew, a row equal to the kept one says nothing */
		if (keyed_state_ttl(ks) == 0 && rows_equal(n, row, v))
		{
			n->unchanged++;
			drop_carry(n);
			return PTF_ROW_DONE;
		}
		emit_image(n, ROWKIND_UPDATE_BEFORE, v);
		ptf_operator_emit(op, ROWKIND_UPDATE_AFTER, row);
	}
	else
	{
		if (meta->incomplete && n->carry.tuple != NULL)
			row = complete_from_image(n, row, n->carry.tuple);
		ptf_operator_emit(op, ROWKIND_INSERT, row);
	}
	tuple_pool_store_slot(n->pool, &v->image, row);
	drop_carry(n);
	keyed_state_touch(ks, ref.rec, proc_time);
	keyed_state_mark_changed(ks, ref.rec);
	return PTF_ROW_DONE;
}

static void
normalize_save(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
			   Datum *values, bool *nulls)
{
	NormalizeValue *v = (NormalizeValue *) ref->value;

	Assert(space == STATE_KEY_SPACE);
	if (v->image.tuple != NULL)
	{
		values[0] = PointerGetDatum(v->image.tuple);
		nulls[0] = false;
	}
}

static void
normalize_restore(void *arg, const StateRef *ref, int space, int64 ns, void *ns_value,
				  Datum *values, bool *nulls)
{
	NormalizeOperator *n = (NormalizeOperator *) arg;
	NormalizeValue *v = (NormalizeValue *) ref->value;

	if (!nulls[0])
		tuple_pool_store_image(n->pool, &v->image, (MinimalTuple) DatumGetPointer(values[0]));
}

/*
 * ptf.resync: the rows of the table as it is now come as inserts, each an
 * upsert of its key (an update when its image differs, nothing when equal,
 * an insert when new); at the end the keys no row came for are deleted.
 */
static void
normalize_on_resync(PtfOperator *op, bool end)
{
	NormalizeOperator *n = (NormalizeOperator *) op;
	List	   *gone;
	ListCell   *lc;

	Assert(n->mode == NORMALIZE_UPSERT);
	drop_carry(n);
	if (!end)
	{
		keyed_state_clear_used(op->state);
		return;
	}
	gone = keyed_state_unused(op->state);
	foreach(lc, gone)
	{
		StateRecord *rec = (StateRecord *) lfirst(lc);
		StateRef	ref;
		NormalizeValue *v;

		keyed_state_record_ref(op->state, rec, &ref);
		v = (NormalizeValue *) ref.value;
		if (v->image.tuple != NULL)
		{
			emit_image(n, ROWKIND_DELETE, v);
			tuple_pool_free(n->pool, &v->image);
		}
		keyed_state_remove(op->state, rec);
	}
	list_free(gone);
}

/* A key leaves memory: its image stays in its table. */
static bool
normalize_evict(PtfOperator *op, StateRef *ref)
{
	NormalizeOperator *n = (NormalizeOperator *) op;
	NormalizeValue *v = (NormalizeValue *) ref->value;

	tuple_pool_free(n->pool, &v->image);
	return true;
}

static const PtfOperatorMethods normalize_methods = {
	.name = "changelog normalize",
	.on_row = normalize_on_row,
	.evict = normalize_evict,
	.on_resync = normalize_on_resync,
};

uint64
normalize_dropped(PtfOperator *op)
{
	return ((NormalizeOperator *) op)->dropped;
}

uint64
normalize_unchanged(PtfOperator *op)
{
	return ((NormalizeOperator *) op)->unchanged;
}

PtfOperator *
normalize_create(const NormalizeOptions *opts, const PtfOperatorEnv *env)
{
	NormalizeOperator *n;
	KeyedStateSpec spec;
	MemoryContext old;
	int			natts = opts->rowdesc->natts;

	memset(&spec, 0, sizeof(spec));
	spec.keys = opts->keys;
	spec.hot = sizeof(NormalizeValue);
	spec.ttl_us = opts->ttl_us;
	spec.mem_limit = env->mem_limit;
	spec.expected_keys = env->expected_keys;
	spec.flags = KEYED_STATE_REMOVABLE | (env->durable ? KEYED_STATE_DURABLE : 0);

	n = (NormalizeOperator *) ptf_operator_alloc(sizeof(NormalizeOperator),
												 &normalize_methods, env);
	old = MemoryContextSwitchTo(n->base.cxt);
	n->base.state = keyed_state_create(&spec, n->base.cxt);
	n->base.codec.layout = &normalize_layout;
	n->base.codec.arg = n;
	n->base.codec.save = normalize_save;
	n->base.codec.restore = normalize_restore;
	n->mode = opts->mode;
	n->truncate_forgets = opts->truncate_forgets;
	n->rowdesc = opts->rowdesc;
	n->pool = tuple_pool_create(keyed_state_context(n->base.state),
								 keyed_state_block_size(n->base.state));
	n->image_slot = MakeSingleTupleTableSlot(opts->rowdesc, &TTSOpsMinimalTuple);
	n->done_slot = MakeSingleTupleTableSlot(opts->rowdesc, &TTSOpsVirtual);
	n->values = palloc(sizeof(Datum) * Max(natts, 1));
	n->nulls = palloc(sizeof(bool) * Max(natts, 1));
	MemoryContextSwitchTo(old);
	return &n->base;
}
