/*-------------------------------------------------------------------------
 *
 * row_images.h
 *	  Row images kept in keyed state (candidates, last images per key).
 *
 * Images are carved from blocks in power-of-two size classes, and freed
 * images go on per-class stacks of pointers kept apart from them.  Freeing
 * an image therefore never reads it: on a large state the image being
 * replaced is cold, and palloc's pfree would wait for its chunk header to
 * come from memory.  Images above the largest class are palloc'd.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_ROW_IMAGES_H
#define PTF_ROW_IMAGES_H

#include "access/htup.h"
#include "executor/tuptable.h"

typedef struct TuplePool TuplePool;

/* An image and the size of its allocation (needed to free it). */
typedef struct PooledTuple
{
	MinimalTuple tuple;
	uint32		capacity;
} PooledTuple;

/* block_size: of the blocks images are cut from (keyed_state_block_size) */
extern TuplePool *tuple_pool_create(MemoryContext parent, Size block_size);

/* Copy the slot's row (or an image) into the pool, replacing *pt's image. */
extern void tuple_pool_store_slot(TuplePool *pool, PooledTuple *pt,
								  TupleTableSlot *slot);
extern void tuple_pool_store_image(TuplePool *pool, PooledTuple *pt,
								   MinimalTuple image);
extern void tuple_pool_free(TuplePool *pool, PooledTuple *pt);

/*
 * Images as bytes, for state tables: the MinimalTuple with values TOASTed
 * elsewhere brought inline (the image must not depend on the source's
 * TOAST table); read back, it is checked against desc, so that a damaged
 * state table is an error, not a crash.
 */
extern bytea *row_image_to_bytea(MinimalTuple mt, TupleDesc desc);
extern MinimalTuple row_image_from_bytes(const char *p, Size len, TupleDesc desc);

#endif							/* PTF_ROW_IMAGES_H */
