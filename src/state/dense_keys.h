/*-------------------------------------------------------------------------
 *
 * dense_keys.h
 *	  The keys seen, a bit each, when they are integers filling a known
 *	  range densely (dense_keys.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DENSE_KEYS_H
#define PTF_DENSE_KEYS_H

#include "executor/tuptable.h"

#include "state/key.h"

/* A range of values of an integer key column, from the planner's statistics. */
typedef struct PtfKeyRange
{
	bool		valid;
	int64		lo;
	int64		hi;				/* inclusive */
} PtfKeyRange;

typedef struct DenseKeys DenseKeys;

/*
 * A set over range for a key of one int2, int4 or int8 column, in cxt; NULL
 * when it would not pay: the range holds more than 64 values per key
 * expected, or its bitmap would take more than budget bytes.
 */
extern DenseKeys *dense_keys_create(const KeySpec *keys, const PtfKeyRange *range,
									uint64 expected_keys, Size budget,
									MemoryContext cxt);

/* Whether the row's key is in the range (a NULL key is not); its bit in *bit. */
extern bool dense_keys_covers(const DenseKeys *dk, TupleTableSlot *row, uint64 *bit);

/* Mark the bit; true if it was marked already. */
extern bool dense_keys_test_and_set(DenseKeys *dk, uint64 bit);

extern uint64 dense_keys_count(const DenseKeys *dk);
extern Size dense_keys_bytes(const DenseKeys *dk);

#endif							/* PTF_DENSE_KEYS_H */
