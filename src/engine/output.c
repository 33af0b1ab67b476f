/*-------------------------------------------------------------------------
 *
 * output.c
 *	  A call's output as a materialized set-returning function result, and
 *	  what the last call of this backend did (ptf.last_call_stats()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tupmacs.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "engine/output.h"
#include "engine/state_load.h"

void
ptf_output_init(FunctionCallInfo fcinfo, PtfOutput *out)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	out->store = rsinfo->setResult;
	out->desc = rsinfo->setDesc;
	out->rows = 0;
	out->frame = NULL;
	out->buf = NULL;
	out->bufsize = 0;
	out->slot = NULL;
	out->shape = OUT_SHAPE_UNKNOWN;
	out->byval_desc = NULL;
	out->byval_off = NULL;
}

/*
 * What ptf_output_put_values kept across rows goes when the call ends: a
 * query may run the function many times (LATERAL, rescans), each with a
 * store of its own.
 */
void
ptf_output_end(PtfOutput *out)
{
	if (out->slot != NULL)
		ExecDropSingleTupleTableSlot(out->slot);
	if (out->buf != NULL)
		pfree(out->buf);
	if (out->byval_off != NULL)
		pfree(out->byval_off);
	out->slot = NULL;
	out->buf = NULL;
	out->bufsize = 0;
	out->byval_desc = NULL;
	out->byval_off = NULL;
}

/*
 * How heap_fill_tuple lays out a value: VALUE_ALIGNED at the column's
 * alignment (by value, fixed length, a 4-byte-header varlena kept so),
 * VALUE_SHORT as its short varlena is, VALUE_MADE_SHORT a 4-byte-header
 * varlena packed into a 1-byte header; both unaligned.  VALUE_OTHER for
 * what it would not simply copy (a TOAST pointer, an expanded object, a
 * cstring): the caller then forms the row the general way.
 */
typedef enum PlainValue
{
	VALUE_ALIGNED,
	VALUE_SHORT,
	VALUE_MADE_SHORT,
	VALUE_OTHER
} PlainValue;

/* How a varlena v of a column that may (packable) or may not be packed is laid out. */
static inline PlainValue
plain_varlena(Datum v, bool packable, Size *len)
{
	Pointer		p = DatumGetPointer(v);

	if (VARATT_IS_EXTERNAL(p))
		return VALUE_OTHER;
	if (VARATT_IS_SHORT(p))
	{
		*len = VARSIZE_SHORT(p);
		return VALUE_SHORT;
	}
	if (packable && VARATT_CAN_MAKE_SHORT(p))
	{
		*len = VARATT_CONVERTED_SHORT_SIZE(p);
		return VALUE_MADE_SHORT;
	}
	*len = VARSIZE(p);
	return VALUE_ALIGNED;
}

/* Write a varlena laid out as plain_varlena said at dst. */
static inline void
plain_varlena_fill(Datum v, PlainValue how, Size len, char *dst)
{
	Assert(how != VALUE_OTHER);
	if (how == VALUE_MADE_SHORT)
	{
		SET_VARSIZE_SHORT(dst, len);
		memcpy(dst + VARHDRSZ_SHORT, VARDATA(DatumGetPointer(v)), len - VARHDRSZ_SHORT);
	}
	else
		memcpy(dst, DatumGetPointer(v), len);
}

static inline PlainValue
plain_value(Form_pg_attribute att, Datum v, Size *len)
{
	*len = 0;
	if (att->attbyval || att->attlen > 0)
	{
		*len = att->attlen;
		return VALUE_ALIGNED;
	}
	if (att->attlen != -1)
		return VALUE_OTHER;
	return plain_varlena(v, att->attstorage != TYPSTORAGE_PLAIN, len);
}

/* Copy v to data + *off (zeroing the alignment before it), as heap_fill_tuple does. */
static inline void
plain_value_fill(Form_pg_attribute att, Datum v, char *data, Size *off)
{
	Size		len;
	PlainValue	how = plain_value(att, v, &len);
	Size		at = *off;

	Assert(how != VALUE_OTHER);
	if (how == VALUE_ALIGNED)
	{
		at = att_align_nominal(at, att->attalign);
		memset(data + *off, 0, at - *off);
	}
	if (att->attbyval)
		store_att_byval(data + at, v, att->attlen);
	else
		plain_varlena_fill(v, how, len, data + at);
	*off = at + len;
}

/* Room for a row of size bytes in the buffer kept across rows: more of it. */
static void
row_buffer_grow(PtfOutput *out, TupleDesc desc, Size size)
{
	MemoryContext old;

	/* in the store's memory, which outlives the call; freed at its end */
	old = MemoryContextSwitchTo(GetMemoryChunkContext(out->store));
	size = Max(size, Max(out->bufsize * 2, 1024));
	if (out->buf != NULL)
		pfree(out->buf);
	out->buf = palloc(size);
	out->bufsize = size;

	/*
	 * A copy of the descriptor, not pinned: the slot is dropped at the
	 * call's end, in another resource owner than the one current now (a
	 * spill's, a worker's) may be.
	 */
	if (out->slot == NULL)
		out->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(desc), &TTSOpsMinimalTuple);
	MemoryContextSwitchTo(old);
}

/* Room for a row of size bytes in the buffer kept across rows. */
static inline void
row_buffer(PtfOutput *out, TupleDesc desc, Size size)
{
	if (out->buf == NULL || out->bufsize < size)
		row_buffer_grow(out, desc, size);
}

/* The row formed in the buffer into the store. */
static void
row_store(PtfOutput *out, TupleDesc desc, Datum *values, bool *nulls)
{
#ifdef USE_ASSERT_CHECKING
	/* the bytes heap_form_minimal_tuple makes of the same values */
	MinimalTuple ref = heap_form_minimal_tuple(desc, values, nulls);

	Assert(ref->t_len == out->buf->t_len &&
		   memcmp(ref, out->buf, ref->t_len) == 0);
	pfree(ref);
#endif
	/* the slot only carries the bytes: a minimal tuple's copy reads no descriptor */
	ExecStoreMinimalTuple(out->buf, out->slot, false);
	tuplestore_puttupleslot(out->store, out->slot);
	ExecClearTuple(out->slot);
}

/*
 * A minimal tuple of desc's natts columns and len bytes of data begun in
 * the buffer: its header set, the data (returned) still to be written.
 */
static char *
row_begin(PtfOutput *out, TupleDesc desc, Size len, uint16 infomask)
{
	Size		hoff = MAXALIGN(SizeofMinimalTupleHeader);

	row_buffer(out, desc, hoff + len);
	memset(out->buf, 0, hoff);
	out->buf->t_len = hoff + len;
	HeapTupleHeaderSetNatts(out->buf, desc->natts);
	out->buf->t_hoff = hoff + MINIMAL_TUPLE_OFFSET;
	out->buf->t_infomask = infomask;
	return (char *) out->buf + hoff;
}

/*
 * Where each column of desc goes when all are by value (a window's output:
 * keys, bounds, counts, sums): the same offsets for every row, found once.
 */
static void
byval_layout(PtfOutput *out, TupleDesc desc)
{
	Size		len = 0;
	int			i;

	if (out->byval_off != NULL)
		pfree(out->byval_off);
	out->byval_off = MemoryContextAlloc(GetMemoryChunkContext(out->store),
										sizeof(int16) * Max(desc->natts, 1));
	out->byval_desc = desc;
	out->byval_len = -1;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attbyval || att->attisdropped)
			return;
		len = att_align_nominal(len, att->attalign);
		out->byval_off[i] = (int16) len;
		len += att->attlen;
	}
	out->byval_len = (int) len;
}

/* put_plain_row of a row whose columns are all by value, laid out once. */
static bool
put_byval_row(PtfOutput *out, TupleDesc desc, Datum *values, bool *nulls)
{
	char	   *data;
	int			i;

	for (i = 0; i < desc->natts; i++)
		if (nulls[i])
			return false;
	data = row_begin(out, desc, out->byval_len, 0);
	memset(data, 0, out->byval_len);	/* the alignment padding */
	for (i = 0; i < desc->natts; i++)
		store_att_byval(data + out->byval_off[i], values[i], TupleDescAttr(desc, i)->attlen);
	row_store(out, desc, values, nulls);
	return true;
}

/*
 * Form a row of desc without NULLs whose values are plain (by value, fixed
 * length, or in-line varlenas) into a buffer kept across rows, the layout
 * of heap_form_minimal_tuple done once per column without its general
 * cases, and copy it into the store: a change stream's output row, of a
 * kind, a row image and three fixed-width columns, took half its
 * instructions in heap_fill_tuple and heap_compute_data_size (a temporal
 * join's output, a pair of row images: 1% of the call).  False, with
 * nothing stored, for any other row.
 */
static bool
put_plain_row(PtfOutput *out, TupleDesc desc, Datum *values, bool *nulls)
{
	Size		len = 0;
	Size		off;
	bool		varwidth = false;
	char	   *data;
	int			i;

	if (desc != out->byval_desc)
		byval_layout(out, desc);
	if (out->byval_len >= 0)
		return put_byval_row(out, desc, values, nulls);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		PlainValue	how;
		Size		vlen;

		if (nulls[i] || att->attisdropped ||
			(how = plain_value(att, values[i], &vlen)) == VALUE_OTHER)
			return false;
		if (how == VALUE_ALIGNED)
			len = att_align_nominal(len, att->attalign);
		len += vlen;
		varwidth |= (att->attlen == -1);
	}
	data = row_begin(out, desc, len, varwidth ? HEAP_HASVARWIDTH : 0);
	off = 0;
	for (i = 0; i < desc->natts; i++)
		plain_value_fill(TupleDescAttr(desc, i), values[i], data, &off);
	Assert(off == len);
	row_store(out, desc, values, nulls);
	return true;
}

/*
 * A change stream's output row (to_changelog's op text, data record, lsn,
 * commit_time, xid): two varlenas, then three 8-byte values by value.
 * Formed by put_plain_row it still took ~470 instructions a row deciding
 * each column's layout from its pg_attribute entry, a tenth of the call
 * over 1.5M changes; the shape is known, so the row is laid out here in
 * straight lines.  change_shape says once per call whether out->desc has
 * it.
 */
static bool
change_shape(PtfOutput *out)
{
	TupleDesc	desc = out->desc;
	int			i;

	if (desc->natts != 5)
		return false;
	for (i = 0; i < 5; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			return false;
		if (i < 2)
		{
			if (att->attlen != -1)
				return false;
			out->change_pack[i] = (att->attstorage != TYPSTORAGE_PLAIN);
			out->change_align[i] = att->attalign;
		}
		else if (!att->attbyval || att->attlen != sizeof(int64) ||
				 att->attalign != TYPALIGN_DOUBLE)
			return false;
	}
	return true;
}

/* Where a varlena of change column i goes after off (see plain_value). */
static inline PlainValue
change_varlena(PtfOutput *out, int i, Datum v, Size off, Size *at, Size *len)
{
	PlainValue	how = plain_varlena(v, out->change_pack[i], len);

	*at = how == VALUE_ALIGNED ? att_align_nominal(off, out->change_align[i]) : off;
	return how;
}

static bool
put_change_row(PtfOutput *out, Datum *values, bool *nulls)
{
	Size		at0,
				len0,
				at1,
				len1,
				at2,
				len;
	PlainValue	how0,
				how1;
	char	   *data;

	if (nulls[0] || nulls[1] || nulls[2] || nulls[3] || nulls[4] ||
		(how0 = change_varlena(out, 0, values[0], 0, &at0, &len0)) == VALUE_OTHER ||
		(how1 = change_varlena(out, 1, values[1], at0 + len0, &at1, &len1)) == VALUE_OTHER)
		return false;
	at2 = TYPEALIGN(ALIGNOF_DOUBLE, at1 + len1);
	len = at2 + 3 * sizeof(int64);

	Assert(out->desc->natts == 5);
	data = row_begin(out, out->desc, len, HEAP_HASVARWIDTH);
	memset(data, 0, at0);
	plain_varlena_fill(values[0], how0, len0, data + at0);
	memset(data + at0 + len0, 0, at1 - (at0 + len0));
	plain_varlena_fill(values[1], how1, len1, data + at1);
	memset(data + at1 + len1, 0, at2 - (at1 + len1));
	store_att_byval(data + at2, values[2], sizeof(int64));
	store_att_byval(data + at2 + sizeof(int64), values[3], sizeof(int64));
	store_att_byval(data + at2 + 2 * sizeof(int64), values[4], sizeof(int64));
	row_store(out, out->desc, values, nulls);
	return true;
}

/* Put a row of values of the output's row type into the output. */
void
ptf_output_put_values(PtfOutput *out, Datum *values, bool *nulls)
{
	if (out->shape == OUT_SHAPE_UNKNOWN)
		out->shape = change_shape(out) ? OUT_SHAPE_CHANGE : OUT_SHAPE_OTHER;
	if (out->shape == OUT_SHAPE_CHANGE && put_change_row(out, values, nulls))
		return;
	if (!put_plain_row(out, out->desc, values, nulls))
		tuplestore_putvalues(out->store, out->desc, values, nulls);
}

/*
 * A change stream's row may lack unchanged TOASTed values the WAL did not
 * carry; an operator that emits it as it came would print placeholders.
 */
void
ptf_check_row_complete(PtfFrame *frame, TupleTableSlot *row)
{
	if (frame == NULL || row != frame_current_row(frame))
		return;
	ptf_check_meta_complete(frame_current_meta(frame));
}

/* An incomplete row (see ptf_check_row_complete) cannot be kept or emitted. */
void
ptf_check_meta_complete(const PtfRowMeta *meta)
{
	if (meta->incomplete)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the new image of an update lacks values the WAL does not carry"),
				 errdetail("The update at %X/%X left a TOASTed column unchanged, which logs no value for it, and no earlier image of the row is kept.",
						   LSN_FORMAT_ARGS(meta->lsn)),
				 errhint("ALTER TABLE ... REPLICA IDENTITY FULL logs whole old images, from which such values are taken; for this update, ptf.resync(uid) brings the stream in line with its table where the function can, else ptf.skip_transaction(uid, lsn) passes over its transaction (the CONTEXT names it).")));
}

void
ptf_output_emit_row(void *arg, RowKind kind, TupleTableSlot *row)
{
	PtfOutput  *out = (PtfOutput *) arg;

	ptf_check_row_complete(out->frame, row);
	/* an operator's own row (a window's, a join's pair): formed as values are */
	if (!TTS_IS_VIRTUAL(row) ||
		!put_plain_row(out, row->tts_tupleDescriptor, row->tts_values, row->tts_isnull))
		tuplestore_puttupleslot(out->store, row);
	out->rows++;
}

static PtfCallStats last_call;
static bool have_last_call = false;

void
ptf_record_call_stats(const char *function, PtfFrame *frame, uint64 rows_out)
{
	last_call.function = function;
	frame_stats(frame, &last_call.frame);
	last_call.rows_out = rows_out;
	last_call.state_load = NULL;
	last_call.keys_probed = last_call.keys_loaded = last_call.keys_evicted = 0;
	last_call.workers_planned = last_call.workers_launched = 0;
	last_call.user = GetUserId();
	have_last_call = true;
}

/* State the call kept besides its operator's (an upsert source's rows). */
void
ptf_record_more_state(Size bytes)
{
	last_call.frame.state_bytes += bytes;
}

void
ptf_record_parallel_stats(int planned, int launched, uint64 worker_rows,
						  uint64 rows_from_workers)
{
	Assert(last_call.frame.rows_in >= rows_from_workers);
	last_call.workers_planned = planned;
	last_call.workers_launched = launched;
	last_call.frame.rows_in += worker_rows - rows_from_workers;
}

/*
 * A parallel call split by key: its state is the workers' (added to the
 * leader's, which holds a share of its own when a CPU was left for it),
 * each holding the keys of its share; summed (state_bytes: the sum of
 * their peaks).
 */
void
ptf_record_workers_state(const PtfFrameStats *workers)
{
	frame_stats_add_state(&last_call.frame, workers);
}

void
ptf_record_state_load_stats(struct PtfStateLoad *load)
{
	PtfStateLoadStats st;

	ptf_state_load_stats(load, &st);
	last_call.state_load = st.how;
	last_call.keys_probed = st.keys_probed;
	last_call.keys_loaded = st.keys_loaded;
	last_call.keys_evicted = st.keys_evicted;
}

/*
 * A pipeline worker runs steps of several owners, and a step's arguments,
 * evaluated as its owner, may call last_call_stats(): another owner's
 * step is not theirs to see.
 */
const PtfCallStats *
ptf_get_last_call_stats(void)
{
	return have_last_call && last_call.user == GetUserId() ? &last_call : NULL;
}
