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
 * expected, or its bitmap and slot_bytes per value of the range (the
 * caller's array beside it) would take more than budget bytes.
 */
extern DenseKeys *dense_keys_create(const KeySpec *keys, const PtfKeyRange *range,
									uint64 expected_keys, Size slot_bytes, Size budget,
									MemoryContext cxt);

/* Whether the row's key is in the range (a NULL key is not); its bit in *bit. */
extern bool dense_keys_covers(const DenseKeys *dk, TupleTableSlot *row, uint64 *bit);

/*
 * The same, as a batched row's prefetch noted it in a word of the row's
 * scratch (bit + 1, or 0: dense_keys_note), or worked out now when there
 * is no note: a batched row asks once.
 */
static inline uint64
dense_keys_note(const DenseKeys *dk, TupleTableSlot *row)
{
	uint64		bit;

	return dense_keys_covers(dk, row, &bit) ? bit + 1 : 0;
}

static inline bool
dense_keys_covers_noted(const DenseKeys *dk, TupleTableSlot *row, const uint64 *note,
						uint64 *bit)
{
	if (note != NULL)
	{
		*bit = *note - 1;
		return *note != 0;
	}
	return dense_keys_covers(dk, row, bit);
}

/* Mark the bit; true if it was marked already. */
extern bool dense_keys_test_and_set(DenseKeys *dk, uint64 bit);

/* Whether the bit is marked */
static inline bool
dense_keys_test(const uint64 *words, uint64 bit)
{
	return (words[bit / 64] >> (bit % 64)) & 1;
}
extern const uint64 *dense_keys_words(const DenseKeys *dk);

/* The first marked bit at or after from, or -1 */
extern int64 dense_keys_next(const DenseKeys *dk, uint64 from);

/* values of the range: a caller's array of this many slots, indexed by bit */
extern uint64 dense_keys_range_size(const DenseKeys *dk);

extern uint64 dense_keys_count(const DenseKeys *dk);
extern Size dense_keys_bytes(const DenseKeys *dk);

#endif							/* PTF_DENSE_KEYS_H */
