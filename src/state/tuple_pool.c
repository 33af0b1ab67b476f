/*-------------------------------------------------------------------------
 *
 * tuple_pool.c
 *	  Row images kept in keyed state: size-class blocks with out-of-line
 *	  free stacks, so freeing an image never touches its memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "utils/memutils.h"

#include "state/tuple_pool.h"

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
