/*-------------------------------------------------------------------------
 *
 * dense_keys.c
 *	  The keys seen, a bit each, when they are integers filling a known
 *	  range densely.
 *
 * Keep-first by arrival keeps nothing of a key but that it was seen.  When
 * the planner's statistics say the key is one integer column whose values
 * fill a range densely (a user id, an order number), a bit per value of the
 * range says it: 500k keys take 62 kB, which stays in the CPU's caches,
 * where the keyed state's map takes some 17 bytes a key and every row's
 * lookup waits on memory.  DuckDB's perfect hash aggregate makes the same
 * choice from the min/max statistics of its group keys.
 *
 * Statistics are a sample and may be stale: a value outside the range is
 * no error, it is left to the caller's map.  Whether a value is in the
 * range depends on nothing but the value, so a key is never in both.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "port/pg_bitutils.h"
#include "utils/memutils.h"

#include "state/dense_keys.h"

/* the range may hold this many values per key expected, at most */
#define DENSE_KEYS_MAX_SPREAD 64

struct DenseKeys
{
	AttrNumber	attno;
	Oid			typid;
	int64		lo;
	uint64		nbits;
	uint64		count;			/* bits set */
	uint64	   *words;
};

DenseKeys *
dense_keys_create(const KeySpec *keys, const PtfKeyRange *range, uint64 expected_keys,
				  Size slot_bytes, Size budget, MemoryContext cxt)
{
	DenseKeys  *dk;
	Oid			typid;
	uint64		nbits;
	Size		bytes;

	if (range == NULL || !range->valid || keys == NULL || keys->ncols != 1 ||
		range->hi < range->lo)
		return NULL;
	typid = keys->cols[0].typid;
	if (typid != INT2OID && typid != INT4OID && typid != INT8OID)
		return NULL;
	/* hi - lo + 1 without overflow */
	nbits = (uint64) range->hi - (uint64) range->lo + 1;
	if (nbits == 0 || nbits > (uint64) DENSE_KEYS_MAX_SPREAD * Max(expected_keys, 1))
		return NULL;
	bytes = (Size) ((nbits + 63) / 64) * sizeof(uint64);
	if (bytes > budget || nbits > (budget - bytes) / Max(slot_bytes, 1) ||
		!AllocSizeIsValid(bytes))
		return NULL;

	dk = MemoryContextAllocZero(cxt, sizeof(DenseKeys));
	dk->attno = keys->cols[0].attno;
	dk->typid = typid;
	dk->lo = range->lo;
	dk->nbits = nbits;
	dk->words = MemoryContextAllocZero(cxt, bytes);
	return dk;
}

bool
dense_keys_covers(const DenseKeys *dk, TupleTableSlot *row, uint64 *bit)
{
	bool		isnull;
	Datum		d = slot_getattr(row, dk->attno, &isnull);
	int64		v;

	if (isnull)
		return false;
	switch (dk->typid)
	{
		case INT2OID:
			v = DatumGetInt16(d);
			break;
		case INT4OID:
			v = DatumGetInt32(d);
			break;
		default:
			v = DatumGetInt64(d);
			break;
	}
	/* v - lo, as unsigned: below lo wraps past nbits */
	*bit = (uint64) v - (uint64) dk->lo;
	return *bit < dk->nbits;
}

bool
dense_keys_test_and_set(DenseKeys *dk, uint64 bit)
{
	uint64	   *w = &dk->words[bit / 64];
	uint64		mask = UINT64CONST(1) << (bit % 64);

	Assert(bit < dk->nbits);
	if (*w & mask)
		return true;
	*w |= mask;
	dk->count++;
	return false;
}

const uint64 *
dense_keys_words(const DenseKeys *dk)
{
	return dk->words;
}

int64
dense_keys_next(const DenseKeys *dk, uint64 from)
{
	uint64		w = from / 64;
	uint64		nwords = (dk->nbits + 63) / 64;
	uint64		bits;

	if (from >= dk->nbits)
		return -1;
	bits = dk->words[w] & (~UINT64CONST(0) << (from % 64));
	for (;;)
	{
		if (bits != 0)
			return (int64) (w * 64 + pg_rightmost_one_pos64(bits));
		if (++w >= nwords)
			return -1;
		bits = dk->words[w];
	}
}

uint64
dense_keys_range_size(const DenseKeys *dk)
{
	return dk->nbits;
}

uint64
dense_keys_count(const DenseKeys *dk)
{
	return dk->count;
}

Size
dense_keys_bytes(const DenseKeys *dk)
{
	return (Size) ((dk->nbits + 63) / 64) * sizeof(uint64);
}
