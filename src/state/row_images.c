/*-------------------------------------------------------------------------
 *
 * row_images.c
 *	  Rows of an input kept in state (candidates, last images per key):
 *	  in memory, in size-class blocks with out-of-line free stacks, so
 *	  freeing an image never touches its memory; in a state table, as
 *	  bytes (a MinimalTuple with its TOASTed values inline), checked
 *	  against the row type whenever they are read back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heaptoast.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "state/durable.h"
#include "state/row_images.h"

#define POOL_MIN_SHIFT	5		/* smallest class: 32 bytes */
#define POOL_CLASSES	7		/* up to 2kB */
#define POOL_PALLOC		0		/* capacity of an image that was palloc'd */

typedef struct FreeStack
{
	void	  **items;
	int			n;
	int			max;
} FreeStack;

struct TuplePool
{
	MemoryContext cxt;
	char	   *block;
	Size		used;
	Size		size;
	Size		block_size;		/* of new blocks: holds the largest class */
	FreeStack	free[POOL_CLASSES];
};

TuplePool *
tuple_pool_create(MemoryContext parent, Size block_size)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "ptf row images",
											  ALLOCSET_DEFAULT_SIZES);
	TuplePool  *pool = MemoryContextAllocZero(cxt, sizeof(TuplePool));

	pool->cxt = cxt;
	pool->block_size = Max(block_size, (Size) 1 << (POOL_MIN_SHIFT + POOL_CLASSES - 1));
	return pool;
}

static int
size_class(Size len)
{
	int			c = 0;

	while (c < POOL_CLASSES && ((Size) 1 << (POOL_MIN_SHIFT + c)) < len)
		c++;
	return c < POOL_CLASSES ? c : -1;
}

/* Memory for len bytes; *capacity tells how to free it. */
static void *
pool_alloc(TuplePool *pool, Size len, uint32 *capacity)
{
	int			c = size_class(len);
	Size		size;
	void	   *p;

	if (c < 0)
	{
		*capacity = POOL_PALLOC;
		return MemoryContextAlloc(pool->cxt, len);
	}
	size = (Size) 1 << (POOL_MIN_SHIFT + c);
	*capacity = (uint32) size;
	if (pool->free[c].n > 0)
		return pool->free[c].items[--pool->free[c].n];
	if (pool->block == NULL || pool->used + size > pool->size)
	{
		pool->block = MemoryContextAlloc(pool->cxt, pool->block_size);
		pool->size = pool->block_size;
		pool->used = 0;
	}
	p = pool->block + pool->used;
	pool->used += size;
	return p;
}

void
tuple_pool_free(TuplePool *pool, PooledTuple *pt)
{
	FreeStack  *fs;

	if (pt->tuple == NULL)
		return;
	if (pt->capacity == POOL_PALLOC)
	{
		pfree(pt->tuple);
		pt->tuple = NULL;
		return;
	}
	fs = &pool->free[size_class(pt->capacity)];
	if (fs->n >= fs->max)
	{
		fs->max = Max(256, fs->max * 2);
		fs->items = fs->items ?
			repalloc_huge(fs->items, sizeof(void *) * fs->max) :
			MemoryContextAllocHuge(pool->cxt, sizeof(void *) * fs->max);
	}
	fs->items[fs->n++] = pt->tuple;
	pt->tuple = NULL;
	pt->capacity = 0;
}

/* Make room for len bytes in *pt, reusing its memory when it fits. */
static MinimalTuple
make_room(TuplePool *pool, PooledTuple *pt, Size len)
{
	if (pt->tuple != NULL && pt->capacity != POOL_PALLOC && len <= pt->capacity)
		return pt->tuple;
	tuple_pool_free(pool, pt);
	pt->tuple = pool_alloc(pool, len, &pt->capacity);
	return pt->tuple;
}

void
tuple_pool_store_image(TuplePool *pool, PooledTuple *pt, MinimalTuple image)
{
	memcpy(make_room(pool, pt, image->t_len), image, image->t_len);
}

/*
 * The slot's own conversion makes the minimal tuple: builds may mark heap
 * tuples in ways (datum headers) that only their conversion functions know
 * to clear, so the header is never rewritten by hand here.
 */
void
tuple_pool_store_slot(TuplePool *pool, PooledTuple *pt, TupleTableSlot *slot)
{
	bool		should_free;
	MinimalTuple mt = ExecFetchSlotMinimalTuple(slot, &should_free);

	tuple_pool_store_image(pool, pt, mt);
	if (should_free)
		pfree(mt);
}

/* ---- images as bytes ---- */

/*
 * A row image as bytea: the MinimalTuple itself, with values TOASTed
 * elsewhere brought inline (the image must not depend on the source's
 * TOAST table, which the row may be deleted from).
 */
bytea *
row_image_to_bytea(MinimalTuple mt, TupleDesc desc)
{
	bytea	   *b;

	if (mt->t_infomask & HEAP_HASEXTERNAL)
	{
		HeapTuple	htup = heap_tuple_from_minimal_tuple(mt);
		HeapTuple	flat = toast_flatten_tuple(htup, desc);

		mt = minimal_tuple_from_heap_tuple(flat);
	}
	b = palloc(VARHDRSZ + mt->t_len);
	SET_VARSIZE(b, VARHDRSZ + mt->t_len);
	memcpy(VARDATA(b), mt, mt->t_len);
	return b;
}

static void
bad_image(TupleDesc desc)
{
	ptf_state_corrupted("a row image that does not fit row type %s",
						format_type_be(desc->tdtypeid));
}

/*
 * Every value of the image lies within it: a state table is plain data a
 * superuser may edit, and reading a row out of bounds would crash.
 */
static void
check_image(MinimalTuple mt, TupleDesc desc)
{
	HeapTupleHeader th = (HeapTupleHeader) ((char *) mt - MINIMAL_TUPLE_OFFSET);
	int			natts = HeapTupleHeaderGetNatts(th);
	bool		hasnulls = (th->t_infomask & HEAP_HASNULL) != 0;
	Size		hoff = th->t_hoff;
	Size		end;
	Size		off = 0;
	const char *data;
	int			i;

	if (natts > desc->natts || hoff < offsetof(HeapTupleHeaderData, t_bits) ||
		(hasnulls && hoff < offsetof(HeapTupleHeaderData, t_bits) + BITMAPLEN(natts)) ||
		mt->t_len + MINIMAL_TUPLE_OFFSET < hoff)
		bad_image(desc);
	end = mt->t_len + MINIMAL_TUPLE_OFFSET - hoff;
	data = (const char *) th + hoff;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (hasnulls && att_isnull(i, th->t_bits))
			continue;
		if (att->attlen > 0)
		{
			off = att_align_nominal(off, att->attalign);
			if (off + att->attlen > end)
				bad_image(desc);
			off += att->attlen;
		}
		else if (att->attlen == -1)
		{
			const char *p;

			if (off >= end)
				bad_image(desc);
			off = att_align_pointer(off, att->attalign, -1, data + off);
			p = data + off;
			if (off >= end || (VARATT_IS_1B(p) ? 1 : 4) > end - off ||
				VARATT_IS_EXTERNAL(p) || VARSIZE_ANY(p) > end - off ||
				VARSIZE_ANY(p) < (VARATT_IS_1B(p) ? 1 : VARHDRSZ))
				bad_image(desc);
			off += VARSIZE_ANY(p);
		}
		else
		{
			Size		n = strnlen(data + off, end - off);

			if (n == end - off)
				bad_image(desc);
			off += n + 1;
		}
	}
}

MinimalTuple
row_image_from_bytes(const char *p, Size len, TupleDesc desc)
{
	MinimalTuple mt;

	if (len < SizeofMinimalTupleHeader)
		bad_image(desc);
	mt = palloc(len);
	memcpy(mt, p, len);
	if (mt->t_len != len)
		bad_image(desc);
	check_image(mt, desc);
	return mt;
}

Datum
durable_image_datum(bytea *image, TupleDesc desc)
{
	MinimalTuple mt = row_image_from_bytes(VARDATA_ANY(image), VARSIZE_ANY_EXHDR(image), desc);
	HeapTuple	htup = heap_tuple_from_minimal_tuple(mt);

	return heap_copy_tuple_as_datum(htup, desc);
}

bytea *
state_images_to_bytea(const StateImages *imgs, TupleDesc desc)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	for (i = 0; i < imgs->n; i++)
	{
		bytea	   *one = row_image_to_bytea(imgs->tuples[i], desc);
		uint32		len = VARSIZE(one) - VARHDRSZ;

		appendBinaryStringInfo(&buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(&buf, VARDATA(one), len);
	}
	SET_VARSIZE(buf.data, buf.len);
	return (bytea *) buf.data;
}

StateImages *
state_images_from_bytea(bytea *b, TupleDesc desc)
{
	StateImages *imgs = palloc0(sizeof(StateImages));
	const char *p = VARDATA_ANY(b);
	const char *end = p + VARSIZE_ANY_EXHDR(b);
	int			max = 8;

	imgs->tuples = palloc(sizeof(MinimalTuple) * max);
	while (p < end)
	{
		uint32		len;

		if (end - p < (ptrdiff_t) sizeof(len))
			ptf_state_corrupted("row images cut short");
		memcpy(&len, p, sizeof(len));
		p += sizeof(len);
		if (end - p < (ptrdiff_t) len)
			ptf_state_corrupted("row images cut short");
		if (imgs->n == max)
		{
			max *= 2;
			imgs->tuples = repalloc(imgs->tuples, sizeof(MinimalTuple) * max);
		}
		imgs->tuples[imgs->n++] = row_image_from_bytes(p, len, desc);
		p += len;
	}
	return imgs;
}

