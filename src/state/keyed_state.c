/*-------------------------------------------------------------------------
 *
 * keyed_state.c
 *	  Keyed state in backend memory.
 *
 * Two layouts behind one interface:
 *
 * Records: an open-addressing hash table (simplehash) of pointers to
 * records carved from an arena.  A record is a 16-byte header (expiry,
 * the TID durable state stored it under, flags), the operator's value,
 * one NsSet per namespace space and the packed key, bump-allocated without
 * chunk headers.  Records never move, so operators may point at them
 * (timers), and durable state can write back exactly the records that
 * changed.
 *
 * Namespaces: an NsSet is a sorted array of (namespace, value pointer,
 * TID, flags) entries, searched by interpolation -- a key holds a handful
 * (open slices, versions), and the order is what operators walk (slices
 * by end, versions by time).  A space whose namespaces lie on a grid (the
 * slice ends of a window) keeps its sets dense when they are not durable:
 * one entry per grid point between the first and the last, holes (value
 * NULL) between them, so that ns is at (ns - first) / step and a row out of
 * time order fills a hole instead of moving entries (HOP over 5M rows in
 * random order: the search and the merging of out-of-order entries were a
 * fifth of the call).  A set too sparse for that -- more than four grid
 * points an entry -- stays sorted.  Values have the size their space declares
 * and come from the arena, recycled through a free list per space; they
 * never move, only the entries do.  Why not TupleHashTable
 * (execGrouping.c)?  It keeps a MinimalTuple and a separately palloc'd
 * "additional" area per key: two chunk headers, a tuple header and
 * power-of-two rounding, well over a hundred bytes per key.
 *
 * Inline: when nothing needs records (no TTL, not durable, no pointers
 * into values) and the key is one pass-by-value column compared bitwise
 * (integers, dates, timestamps...), the state is one array of slots, each
 * the key datum followed by the hot part of the operator's value, probed
 * linearly; the cold part lives in a parallel array.  A lookup then
 * touches a single cache line of an array as small as it can be, where
 * the record layout touches two (slot, then record); on large states
 * those cache misses are nearly all the cost of keep-first.
 *
 * What durable state needs besides -- keys restored and loaded from a
 * state table, eviction, the changes to write back -- is in
 * keyed_state_durable.c; the layouts both files see are in
 * keyed_state_internal.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "common/int.h"
#include "nodes/pg_list.h"
#include "port/pg_bitutils.h"
#include "utils/memutils.h"

#include "base/ptf_time.h"
#include "state/keyed_state.h"

#include "state/keyed_state_internal.h"

/* contexts measured on every new key: below this, measuring is cheap */
#define BUDGET_CHEAP_CONTEXTS 64

/*
 * The bytes of the state's memory context and those under it, as
 * MemoryContextMemAllocated(cxt, true) counts them, and how many contexts
 * that took.
 */
static Size
ks_measure(KeyedState *ks, int *ncontexts)
{
	MemoryContext c = ks->cxt;
	Size		total = 0;
	int			n = 0;

	while (c != NULL)
	{
		total += c->mem_allocated;
		n++;
		if (c->firstchild != NULL)
			c = c->firstchild;
		else
		{
			while (c != ks->cxt && c->nextchild == NULL)
				c = c->parent;
			c = (c == ks->cxt) ? NULL : c->nextchild;
		}
	}
	/* (checked where it is cheap: walking again is what this saves) */
	Assert(n > BUDGET_CHEAP_CONTEXTS || total == MemoryContextMemAllocated(ks->cxt, true));
	*ncontexts = n;
	return total;
}

/*
 * May a new key (needing "more" bytes beyond the usual) be admitted?  Once
 * the budget is spent the state stays full until its input ends, even if
 * memory is freed meanwhile (large images go back to malloc): a key spilled
 * once must never come back to memory, or it would be decided twice, here
 * and when its partition is replayed (nodeAgg.c does the same).
 */
static bool
over_budget(KeyedState *ks, Size more)
{
	Size		used;
	int			ncontexts;

	if (ks->full)
		return true;
	if (ks->mem_limit == 0)
		return false;
	if (more == 0 && ks->budget_skip > 0)
	{
		ks->budget_skip--;
		return false;
	}
	used = ks_measure(ks, &ncontexts);
	if (used + more > ks->mem_limit)
		ks->full = true;
	else if (ncontexts > BUDGET_CHEAP_CONTEXTS)
	{
		/*
		 * Measuring walks every context: the states of session windows
		 * have one each (operators/aggs.c), so measuring for every new
		 * key cost as much as the keys (40k keys over array_agg
		 * sessions, 100k rows: 72% of 14.7 s; 0.74 s without).  The next
		 * keys are admitted unmeasured, as many as would take a quarter
		 * of the room left at the bytes a key holds so far, and no more
		 * than one a context beyond the cheap ones.
		 */
		uint64		keys = Max(keyed_state_count(ks), 1);
		Size		per_key = Max(used / keys, 1);
		Size		room = ks->mem_limit - used - more;

		ks->budget_skip = (int) Min((uint64) (ncontexts - BUDGET_CHEAP_CONTEXTS),
									(uint64) (room / 4 / per_key));
	}
	return ks->full;
}

/* staged prefetch (keyed_state_prefetch_stage): scratch[0] holds the key's hash */
#define PREFETCHED_HASHED	((uint64) 1 << 32)

/* stage 4's answer for an ns not in the set: lb, where it would go */
#define PREFETCHED_ABSENT(lb)	((int64) -2 - (int64) (lb))

/* ---- inline layout ---- */

#if defined(__GNUC__) || defined(__clang__)
#define prefetch_line(p)	__builtin_prefetch(p)
#else
#define prefetch_line(p)	((void) (p))
#endif

#define CPU_LINE	64

/*
 * The first two lines of [p, p + size), or the one it lies on: a miss
 * asked for in vain takes one of the few a core can have under way (a
 * HOP's slice, 64 bytes aligned, was asked for with the line after it: a
 * third of a row's misses were for nothing).
 */
static inline void
prefetch_span(const void *p, Size size)
{
	uintptr_t	line = (uintptr_t) p & ~(uintptr_t) (CPU_LINE - 1);
	uintptr_t	last = ((uintptr_t) p + size - 1) & ~(uintptr_t) (CPU_LINE - 1);

	Assert(size > 0);
	prefetch_line((const void *) line);
	if (last != line)
		prefetch_line((const void *) (line + CPU_LINE));
}


void
ks_inline_alloc(KeyedState *ks, uint64 size)
{
	InlineMap  *map = &ks->map;
	uint64		i;

	map->alloc = MemoryContextAllocHuge(ks->cxt, map->stride * size + PG_CACHE_LINE_SIZE);
	map->slots = (char *) TYPEALIGN(PG_CACHE_LINE_SIZE, map->alloc);
	map->mask = size - 1;
	map->used = 0;
	/* values start zeroed; keys are all written below */
	if (map->stride > sizeof(Datum))
		memset(map->slots, 0, map->stride * size);
	map->cold = NULL;
	if (ks->cold_size > 0)
		map->cold = MemoryContextAllocExtended(ks->cxt, ks->cold_size * size,
											   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (i = 0; i < size; i++)
		SLOT_KEY(map, i) = INLINE_EMPTY;
	if (map->hits != NULL)
		map->hits = MemoryContextAllocExtended(ks->cxt, size,
											   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

static void
inline_grow(KeyedState *ks)
{
	InlineMap  *map = &ks->map;
	char	   *old_slots = map->slots;
	void	   *old_alloc = map->alloc;
	char	   *old_cold = map->cold;
	uint8	   *old_hits = map->hits;
	uint64		old_size = map->mask + 1;
	uint64		i;

	ks_inline_alloc(ks, old_size * 2);
	for (i = 0; i < old_size; i++)
	{
		char	   *slot = old_slots + i * map->stride;
		Datum		key = *(Datum *) slot;
		uint64		j;

		if (key == INLINE_EMPTY)
			continue;
		for (j = mix64(key) & map->mask; SLOT_KEY(map, j) != INLINE_EMPTY;
			 j = (j + 1) & map->mask)
			;
		memcpy(SLOT(map, j), slot, map->stride);
		if (ks->cold_size > 0)
			memcpy(SLOT_COLD(ks, j), old_cold + i * ks->cold_size, ks->cold_size);
		if (old_hits != NULL)
			map->hits[j] = old_hits[i];
		map->used++;
	}
	pfree(old_alloc);
	if (old_cold)
		pfree(old_cold);
	if (old_hits)
		pfree(old_hits);
}

/* Inline durable state writes back the keys it created, nothing else. */
static void
note_new_inline_key(KeyedState *ks, Datum d, bool isnull)
{
	if (!ks->durable)
		return;
	if (ks->nnew >= ks->maxnew)
	{
		ks->maxnew = Max(1024, ks->maxnew * 2);
		ks->new_keys = ks->new_keys ?
			repalloc_huge(ks->new_keys, sizeof(Datum) * ks->maxnew) :
			MemoryContextAllocHuge(ks->cxt, sizeof(Datum) * ks->maxnew);
		ks->new_nulls = ks->new_nulls ?
			repalloc_huge(ks->new_nulls, sizeof(bool) * ks->maxnew) :
			MemoryContextAllocHuge(ks->cxt, sizeof(bool) * ks->maxnew);
	}
	ks->new_keys[ks->nnew] = d;
	ks->new_nulls[ks->nnew] = isnull;
	ks->nnew++;
}

/* The slot of key d in the map, or of the empty slot where it would go. */
static inline bool
inline_probe(InlineMap *map, Datum d, uint64 *pos)
{
	uint64		i;

	for (i = mix64(d) & map->mask;; i = (i + 1) & map->mask)
	{
		Datum		key = SLOT_KEY(map, i);

		*pos = i;
		if (key == d)
			return true;
		if (key == INLINE_EMPTY)
			return false;
	}
}

/* Find or insert the key d (not a side key); true if it was there. */
bool
ks_inline_find_or_insert(KeyedState *ks, Datum d, bool create, uint64 *pos,
					  bool *full)
{
	InlineMap  *map = &ks->map;
	uint64		i;

	*full = false;
	if (inline_probe(map, d, &i))
	{
		*pos = i;
		if (map->hits != NULL)
			map->hits[i] = 1;
		return true;
	}
	if (!create || ks->full)
	{
		*full = ks->full;
		return false;
	}
	/* at most 3/4 full: probe runs stay short */
	if ((map->used + 1) * 4 > (map->mask + 1) * 3)
	{
		if (over_budget(ks, map->stride * 2 * (map->mask + 1)))
		{
			*full = true;
			return false;
		}
		inline_grow(ks);
		for (i = mix64(d) & map->mask; SLOT_KEY(map, i) != INLINE_EMPTY;
			 i = (i + 1) & map->mask)
			;
	}
	else if (over_budget(ks, 0))
	{
		*full = true;
		return false;
	}
	SLOT_KEY(map, i) = d;
	map->used++;
	*pos = i;
	if (map->hits != NULL)
		map->hits[i] = 1;
	return false;
}

static KeyedLookup
inline_lookup(KeyedState *ks, KeySpec *probe, TupleTableSlot *row, bool create,
			  StateRef *ref)
{
	InlineMap  *map = &ks->map;
	int			side = -1;
	Datum		d = (Datum) 0;
	uint64		i;
	bool		full;

	ref->rec = &ks->inline_record;
	if (probe->ncols == 0)
		side = SIDE_GLOBAL;
	else
	{
		bool		isnull;

		d = slot_getattr(row, probe->cols[0].attno, &isnull);
		if (isnull)
			side = SIDE_NULL;
		else if (d == INLINE_EMPTY)
			side = SIDE_MARKER;
	}

	if (side >= 0)
	{
		ref->value = map->side_values + side * (ks->value_size + ks->cold_size);
		ref->cold = (char *) ref->value + ks->value_size;
		if (map->side_used[side])
			return KS_FOUND;
		if (ks->full)
			return KS_FULL;		/* the key may be in a spilled partition */
		if (!create)
			return KS_ABSENT;
		if (over_budget(ks, 0))
			return KS_FULL;
		map->side_used[side] = true;
		note_new_inline_key(ks, d, side == SIDE_NULL);
		return KS_CREATED;
	}

	if (ks_inline_find_or_insert(ks, d, create, &i, &full))
	{
		ref->value = SLOT_VALUE(map, i);
		ref->cold = ks->cold_size > 0 ? SLOT_COLD(ks, i) : NULL;
		return KS_FOUND;
	}
	if (full || ks->full)
		return KS_FULL;			/* the key may be in a spilled partition */
	if (!create)
		return KS_ABSENT;
	note_new_inline_key(ks, d, false);
	ref->value = SLOT_VALUE(map, i);
	ref->cold = ks->cold_size > 0 ? SLOT_COLD(ks, i) : NULL;
	return KS_CREATED;
}

/* ---- record layout ---- */

static void *
arena_alloc(KeyedState *ks, Size size)
{
	void	   *p;

	size = MAXALIGN(size);
	if (ks->block == NULL || ks->block_used + size > ks->block_end)
	{
		Size		bsize = Max(ks->block_size, size);

		ks->block = MemoryContextAllocHuge(ks->cxt, bsize);
		ks->block_end = bsize;
		ks->block_used = 0;
	}
	p = ks->block + ks->block_used;
	ks->block_used += size;
	memset(p, 0, size);
	return p;
}

/*
 * A value of 32 or 64 bytes placed at a multiple of its size, so that it
 * lies in one cache line: the slices of a window aggregate (64 bytes for
 * two sliced aggregates) are read at random, one miss each instead of two.
 * Values of one size follow each other aligned; the padding is paid where
 * a record comes between them.
 */
static void *
arena_alloc_aligned(KeyedState *ks, Size size)
{
	if ((size == 32 || size == 64) && ks->block != NULL)
	{
		Size		mis = (uintptr_t) (ks->block + ks->block_used) & (size - 1);

		if (mis != 0 && ks->block_used + (size - mis) + size <= ks->block_end)
			ks->block_used += size - mis;
	}
	return arena_alloc(ks, size);
}

void *
ks_grow_array(KeyedState *ks, void *array, int *max, Size elem, int min)
{
	*max = Max(min, *max * 2);
	if (array == NULL)
		return MemoryContextAllocHuge(ks->cxt, elem * *max);
	return repalloc_huge(array, elem * *max);
}

static void
note_changed(KeyedState *ks, StateRecord *rec)
{
	if (rec == &ks->inline_record || !ks->durable)
		return;					/* nothing to write back */
	Assert(!(rec->flags & RECORD_REMOVED));
	rec->flags |= RECORD_CHANGED;
	if (rec->flags & RECORD_LISTED)
		return;
	if (ks->nchanged >= ks->maxchanged)
		ks->changed = ks_grow_array(ks, ks->changed, &ks->maxchanged,
								 sizeof(StateRecord *), 1024);
	ks->changed[ks->nchanged++] = rec;
	rec->flags |= RECORD_LISTED;
}

static void
note_dead(KeyedState *ks, ItemPointer tid)
{
	if (ks->ndead >= ks->maxdead)
		ks->dead = ks_grow_array(ks, ks->dead, &ks->maxdead, sizeof(ItemPointerData), 256);
	ks->dead[ks->ndead++] = *tid;
}

/* Make a record for the probe's key. */
StateRecord *
ks_record_create(KeyedState *ks, KeySpec *probe)
{
	Size		size = MAXALIGN(sizeof(StateRecord) + ks->value_size + ks->cold_size +
								sizeof(NsSet) * ks->nspaces + key_packed_size(probe));
	Size		units = size / MAXIMUM_ALIGNOF;
	StateRecord *rec;

	if (units < RECORD_SIZE_CLASSES && ks->free_records[units] != NULL)
	{
		rec = ks->free_records[units];
		ks->free_records[units] = *(StateRecord **) rec;
		memset(rec, 0, size);
	}
	else
		rec = arena_alloc(ks, size);
	rec->pad = units < RECORD_SIZE_CLASSES ? (uint8) units : 0;
	rec->expires_at = PTF_TIME_MAX;
	ItemPointerSetInvalid(&rec->tid);
	if (probe->probe_has_nulls)
		rec->flags |= RECORD_KEY_NULLS;
	key_pack(probe, RECORD_PACKED_KEY(ks, rec));
	return rec;
}


static void clear_namespaces(KeyedState *ks, StateRecord *rec);

static KeyedLookup
record_lookup(KeyedState *ks, KeySpec *probe, uint32 hash, PtfTime now,
			  bool create, StateRef *ref)
{
	StateKey	nokey = {0};
	StateEntry *entry;
	StateRecord *rec;
	bool		found;

	current_probe = probe;
	entry = keyed_lookup_hash(ks->hash, nokey, hash);
	if (entry)
	{
		rec = entry->key.rec;
		Assert(!(rec->flags & RECORD_REMOVED));
		rec->flags |= RECORD_USED;
		ks_set_record_ref(ks, rec, ref);
		if (rec->expires_at > now)
			return KS_FOUND;
		if (!create)
			return KS_ABSENT;
		/* expired: the key starts a new period in the same record */
		memset(ref->value, 0, ks->value_size + ks->cold_size);
		clear_namespaces(ks, rec);
		rec->expires_at = PTF_TIME_MAX;
		note_changed(ks, rec);
		return KS_CREATED;
	}

	if (ks->full)
		return KS_FULL;			/* the key may be in a spilled partition */
	if (!create)
		return KS_ABSENT;
	/* simplehash doubles its array when it grows: count both while copying */
	if (over_budget(ks, ks->hash->members + 1 > ks->hash->grow_threshold ?
					(Size) ks->hash->size * 2 * sizeof(StateEntry) : 0))
		return KS_FULL;

	entry = keyed_insert_hash(ks->hash, nokey, hash, &found);
	Assert(!found);
	rec = ks_record_create(ks, probe);
	entry->key.rec = rec;
	rec->flags |= RECORD_USED;
	note_changed(ks, rec);
	ks_set_record_ref(ks, rec, ref);
	return KS_CREATED;
}

/* ---- namespaces ---- */


/* The first of entries[lo .. hi), ascending, whose ns >= ns; hi if none. */
static inline int
ns_bisect(const NsEntry *entries, int lo, int hi, int64 ns)
{
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (entries[mid].ns < ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Position of the first entry >= ns among the sorted ones.  Namespaces
 * are mostly times on a grid (slice ends, a key's versions) and mostly
 * arrive at the end: the last entry is looked at first, then the entry
 * where ns would sit if they were evenly spread, then its neighbours at
 * doubling distances, and bisection ends in the range they bound -- on a
 * large set, one or two cache lines instead of a dozen.
 */
static int
ns_search(NsSet *set, int64 ns)
{
	int			lo = 0;
	int			hi = set->n - set->tail;

	Assert(set->tail >= 0);

	if (hi == 0 || set->entries[hi - 1].ns < ns)
		return hi;
	if (set->entries[hi - 1].ns == ns)
		return hi - 1;
	if (set->entries[0].ns >= ns)
		return 0;
	if (hi > 8)
	{
		/* entries[0].ns < ns < entries[hi - 1].ns */
		double		span = (double) set->entries[hi - 1].ns - (double) set->entries[0].ns;
		int			guess = (int) (((double) ns - (double) set->entries[0].ns) / span * (hi - 1));
		int			p;
		int			step = 1;

		guess = Max(1, Min(guess, hi - 2));

		/*
		 * Gallop from the guess to a range around ns, then bisect it: the
		 * answer is mostly next to the guess, in the line it is on.  Below,
		 * the answer is in [lo, hi] and entries[hi].ns >= ns.
		 */
		if (set->entries[guess].ns < ns)
		{
			/* in [guess + 1, hi - 1]: entries[hi - 1].ns > ns */
			lo = guess + 1;
			hi = hi - 1;
			for (p = lo; p < hi && set->entries[p].ns < ns; p += step, step <<= 1)
				lo = p + 1;
			if (p < hi)
				hi = p;
		}
		else
		{
			/* in [1, guess]: entries[0].ns < ns */
			lo = 1;
			hi = guess;
			for (p = guess - 1; p > lo && set->entries[p].ns >= ns; p -= step, step <<= 1)
				hi = p;
			if (p > lo)
				lo = p + 1;
		}
		Assert(lo <= hi && set->entries[hi].ns >= ns && set->entries[lo - 1].ns < ns);
	}
	return ns_bisect(set->entries, lo, hi, ns);
}

static inline bool
ns_is_dense(const NsSet *set)
{
	return set->tail == NS_DENSE;
}

/*
 * The first position of a dense set whose ns >= ns, from its first two
 * entries alone (holes carry their grid point's ns): the line stage 2 of
 * the staged prefetch asks for.
 */
static inline int
ns_dense_lower_bound(const NsSet *set, int64 ns)
{
	const NsEntry *e = set->entries;
	int64		step;
	int64		d;
	int64		i;

	Assert(ns_is_dense(set));
	if (set->n == 0 || ns <= e[0].ns)
		return 0;
	if (set->n == 1)
		return 1;
	step = e[1].ns - e[0].ns;
	Assert(step > 0);
	if (pg_sub_s64_overflow(ns, e[0].ns, &d))
		return set->n;
	i = d / step + (d % step != 0);
	return (int) Min(i, (int64) set->n);
}

/* whether entry i of a dense set is ns, not a hole (i may be n) */
static inline bool
ns_dense_holds(const NsSet *set, int i, int64 ns)
{
	return i < set->n && set->entries[i].ns == ns && set->entries[i].value != NULL;
}

/*
 * Where ns is or would go in a dense set: hint when it holds ns (a
 * position an earlier stage found), else by arithmetic -- a division.
 */
static inline int
ns_dense_at(const NsSet *set, int64 ns, int64 hint)
{
	if (hint >= 0 && hint < set->n && set->entries[hint].ns == ns)
		return (int) hint;
	return ns_dense_lower_bound(set, ns);
}

/* Position of the first tail entry >= ns (the tail is sorted too). */
static inline int
ns_tail_search(NsSet *set, int64 ns)
{
	return ns_bisect(set->entries, set->n - set->tail, set->n, ns);
}

/* The position of ns in the tail; -1 when it is not there. */
static inline int
ns_tail_index(NsSet *set, int64 ns)
{
	int			i;

	if (set->tail == 0)
		return -1;
	i = ns_tail_search(set, ns);
	return (i < set->n && set->entries[i].ns == ns) ? i : -1;
}

/*
 * The position of ns, sorted or in the tail; -1 when it is not there.
 * *lb: where ns is or would go among the sorted entries.
 */
static inline int
ns_locate(NsSet *set, int64 ns, int *lb)
{
	int			sorted;
	int			i;

	if (ns_is_dense(set))
	{
		i = ns_dense_lower_bound(set, ns);
		*lb = i;
		return ns_dense_holds(set, i, ns) ? i : -1;
	}
	sorted = set->n - set->tail;
	i = ns_search(set, ns);
	*lb = i;
	if (i < sorted && set->entries[i].ns == ns)
		return i;
	return ns_tail_index(set, ns);
}

static int
ns_index(NsSet *set, int64 ns)
{
	int			lb;

	return ns_locate(set, ns, &lb);
}

/* The greatest sorted entry at or below ns; -1 when none. */
static inline int
ns_floor(NsSet *set, int64 ns)
{
	int			i = ns_search(set, ns);	/* (no grid space floors) */

	if (i < set->n - set->tail && set->entries[i].ns == ns)
		return i;
	return i - 1;
}

/*
 * A tail of t entries is full when t reaches NS_TAIL_MAX and the square
 * root of the sorted entries: merging it moves up to every sorted entry,
 * so a large set takes as many out-of-order entries in its tail as a
 * merge moves per entry merged (rows in random time order over a long
 * span: 150k slices a key cost minutes when every eighth new one moved
 * them all).  A set of up to NS_TAIL_MAX squared sorted entries merges
 * each one at once, an insertion moving at most 64 entries (1.5 kB): a
 * tail left there searches lines the staged prefetch did not ask for
 * (TUMBLE over 24 slices a key, rows in random order: a fifth of the
 * call's samples on one load in the tail's bisection).
 */
static inline bool
ns_tail_full(NsSet *set)
{
	int64		t = set->tail;
	int64		sorted = set->n - set->tail;

	Assert(t >= 0 && sorted >= 0);
	if (t == 0)
		return false;
	return sorted <= NS_TAIL_MAX * NS_TAIL_MAX || (t >= NS_TAIL_MAX && t * t >= sorted);
}

/*
 * Merge the tail into the sorted entries: one pass from the end, instead
 * of moving half the array for each entry added out of order.
 */
static void
ns_settle_tail(NsSet *set)
{
	NsEntry		few[NS_TAIL_MAX * 4];
	NsEntry    *tail = few;
	int			t = set->tail;
	int			i;
	int			j;
	int			k;

	Assert(t > 0 && t <= set->n);
	if (t > (int) lengthof(few))
		tail = palloc(sizeof(NsEntry) * t);
	memcpy(tail, &set->entries[set->n - t], sizeof(NsEntry) * t);
#ifdef USE_ASSERT_CHECKING
	for (i = 1; i < t; i++)
		Assert(tail[i - 1].ns < tail[i].ns);
#endif
	/*
	 * Merge from the back into the room the tail held: for each tail entry,
	 * the largest first, the sorted entries above it move up in one block
	 * (entries of a set are many, the tail few).
	 */
	i = set->n - t;				/* entries[0 .. i) not moved yet */
	k = set->n;					/* entries[k ..) in place */
	for (j = t - 1; j >= 0; j--)
	{
		/* the first of entries[0 .. i) above tail[j] */
		int			lo = ns_bisect(set->entries, 0, i, tail[j].ns);

		k -= i - lo;
		memmove(&set->entries[k], &set->entries[lo], sizeof(NsEntry) * (i - lo));
		set->entries[--k] = tail[j];
		i = lo;
	}
	Assert(k == i);
	set->tail = 0;
	if (tail != few)
		pfree(tail);
#ifdef USE_ASSERT_CHECKING
	for (i = 1; i < set->n; i++)
		Assert(set->entries[i - 1].ns < set->entries[i].ns);
#endif
}

/* (the check inline: most calls find no tail, and the call has a canary) */
static inline void
ns_settle(NsSet *set)
{
	if (set->tail > 0)
		ns_settle_tail(set);
}

static void *
ns_value_alloc(KeyedState *ks, int space)
{
	NsFreeList *fl = &ks->ns_free[space];
	void	   *v;

	if (fl->n > 0)
	{
		v = fl->items[--fl->n];
		memset(v, 0, ks->ns_value_size[space]);
		return v;
	}
	return arena_alloc_aligned(ks, ks->ns_value_size[space]);
}

void
ks_ns_value_free(KeyedState *ks, int space, void *v)
{
	NsFreeList *fl = &ks->ns_free[space];

	if (fl->n >= fl->max)
		fl->items = ks_grow_array(ks, fl->items, &fl->max, sizeof(void *), 256);
	fl->items[fl->n++] = v;
}

/*
 * Entry i of a dense set becomes a hole; holes at the ends go, so that the
 * ends stay entries (an emptied set is an empty sorted one again).  Dense
 * sets are never durable: no tuple to note dead.
 */
static void
ns_dense_drop_at(KeyedState *ks, NsSet *set, int space, int i)
{
	NsEntry    *e = &set->entries[i];

	Assert(!ks->durable && e->value != NULL && !(e->flags & RECORD_STORED));
	ks_ns_value_free(ks, space, e->value);
	e->value = NULL;
	if (i == 0)
		while (set->n > 0 && set->entries[0].value == NULL)
		{
			set->entries++;
			set->off++;
			set->n--;
		}
	while (set->n > 0 && set->entries[set->n - 1].value == NULL)
		set->n--;
	if (set->n == 0)
	{
		set->entries -= set->off;
		set->off = 0;
		set->tail = 0;
	}
}

/* Drop entry i of a set: its tuple is dead, its value recycled. */
static void
ns_drop_at(KeyedState *ks, NsSet *set, int space, int i)
{
	NsEntry    *e = &set->entries[i];

	if (ns_is_dense(set))
	{
		ns_dense_drop_at(ks, set, space, i);
		return;
	}
	if (e->flags & RECORD_STORED)
		note_dead(ks, &e->tid);
	ks_ns_value_free(ks, space, e->value);
	if (i >= set->n - set->tail)
	{
		/* the tail keeps its order: the entries after it move down */
		memmove(&set->entries[i], &set->entries[i + 1], sizeof(NsEntry) * (set->n - i - 1));
		set->tail--;
	}
	else if (i == 0)
	{
		set->entries++;
		set->off++;
	}
	else
		memmove(&set->entries[i], &set->entries[i + 1], sizeof(NsEntry) * (set->n - i - 1));
	set->n--;
	if (set->n == 0)
	{
		/* empty: back to the start of the allocation */
		set->entries -= set->off;
		set->off = 0;
	}
}

static void
clear_namespaces(KeyedState *ks, StateRecord *rec)
{
	int			space;

	for (space = 0; space < ks->nspaces; space++)
	{
		NsSet	   *set = ks_ns_set(ks, rec, space);

		while (set->n > 0)
			ns_drop_at(ks, set, space, set->n - 1);	/* (a dense set's last is no hole) */
		Assert(set->tail == 0);
		if (set->entries != NULL)
			pfree(set->entries - set->off);
		set->entries = NULL;
		set->cap = 0;
		set->off = 0;
	}
}

/* Room for one more entry at the end of the array. */
static void
ns_room_at_end(KeyedState *ks, NsSet *set)
{
	if (set->off + set->n < set->cap)
		return;
	if (set->off > 0)
	{
		/* the room dropped entries left at the front goes to the end */
		memmove(set->entries - set->off, set->entries, sizeof(NsEntry) * set->n);
		set->entries -= set->off;
		set->off = 0;
	}
	else
	{
		int			cap = Max(4, set->cap * 2);
		NsEntry    *entries = MemoryContextAlloc(ks->cxt, sizeof(NsEntry) * cap);

		if (set->n > 0)
			memcpy(entries, set->entries, sizeof(NsEntry) * set->n);
		if (set->entries)
			pfree(set->entries);
		set->entries = entries;
		set->cap = cap;
	}
}

/* entry e as grid point ns, with no value yet: a hole */
static inline void
ns_hole(NsEntry *e, int64 ns)
{
	e->ns = ns;
	e->value = NULL;
	ItemPointerSetInvalid(&e->tid);
	e->flags = 0;
}

/*
 * Entries to allocate for a dense set of len: all of the AllocSet chunk it
 * takes (a power of two, up to 8 kB), else half more -- a larger array is
 * malloc'd and freed on its own, its pages faulted in anew each call.
 */
static int
ns_dense_cap(int len)
{
	Size		bytes = pg_nextpower2_64(sizeof(NsEntry) * ((uint64) len + 2));

	if (bytes > 8192)
		return len + len / 2;
	return (int) (bytes / sizeof(NsEntry));
}

static int64
ns_dense_present(const NsSet *set)
{
	int64		present = 0;
	int			i;

	for (i = 0; i < set->n; i++)
		present += (set->entries[i].value != NULL);
	return present;
}

/*
 * Lay a dense set's n entries out as len entries starting shift points
 * before its first (holes around them): in its allocation when that holds
 * them (moving them only when the room is on the wrong side), else in a
 * larger one.  Room left over goes after the last entry, or, when the
 * set grows at the front, half before the first.
 */
static void
ns_dense_span(KeyedState *ks, NsSet *set, int shift, int len, int64 step)
{
	NsEntry    *old = set->entries;
	NsEntry    *base = set->entries - set->off;
	int64		first = old[0].ns;
	int			n = set->n;
	int			off;
	int			i;

	Assert(shift >= 0 && len >= n + shift && n > 0);
	if (set->off >= shift && set->off - shift + len <= set->cap)
		off = set->off - shift;	/* in place */
	else
	{
		/*
		 * Moved, it grows unless a sixteenth of it stays free: a set that
		 * slides (slices added at the end, fired ones dropped at the front)
		 * would otherwise move every few additions.
		 */
		if (len > set->cap - set->cap / 16)
		{
			int			cap = ns_dense_cap(len + len / 8);

			base = MemoryContextAlloc(ks->cxt, sizeof(NsEntry) * cap);
			set->cap = cap;
		}
		off = shift > 0 ? (set->cap - len) / 2 : 0;
		memmove(&base[off + shift], old, sizeof(NsEntry) * n);
		if (base != old - set->off)
			pfree(old - set->off);
	}
	set->entries = base + off;
	set->off = off;
	set->n = len;
	for (i = 0; i < shift; i++)
		ns_hole(&set->entries[i], first - (int64) (shift - i) * step);
	for (i = shift + n; i < len; i++)
		ns_hole(&set->entries[i], first + (int64) (i - shift) * step);
}

/*
 * Add ns (not there) to a dense set of step: NULL when it is off the grid,
 * or the set would grow past NS_DENSE_SPAN (the caller makes it sorted).
 */
static NsEntry *
ns_dense_insert(KeyedState *ks, NsSet *set, int space, int64 ns, int64 step)
{
	NsEntry    *e;
	int64		d;
	int64		i;
	int64		lo;
	int64		hi;
	int64		first = set->entries[0].ns;

	Assert(ns_is_dense(set) && set->n > 0 && step > 0);
	Assert(set->n == 1 || set->entries[1].ns - first == step);
	if (pg_sub_s64_overflow(ns, first, &d) || d % step != 0)
		return NULL;
	i = d / step;
	if (i > PG_INT32_MAX / 2 || i < -(PG_INT32_MAX / 2))
		return NULL;			/* (the span below must not overflow) */
	if (i < 0 || i >= set->n)
	{
		/* beyond an end: the set spans [lo, hi] points from its first */
		lo = Min(i, 0);
		hi = Max(i, (int64) set->n - 1);
		/* (counted only when it outgrows its allocation, which grows by half) */
		if (hi - lo + 1 > PG_INT32_MAX / 2 ||
			(hi - lo + 1 > set->cap &&
			 hi - lo + 1 > NS_DENSE_SPAN(ns_dense_present(set) + 1)))
			return NULL;
		ns_dense_span(ks, set, (int) -lo, (int) (hi - lo + 1), step);
		i -= lo;
	}
	e = &set->entries[i];
	Assert(e->value == NULL && e->ns == ns);
	e->value = ns_value_alloc(ks, space);
	return e;
}

/* A dense set made sorted: its holes go, its entries stay in order. */
static void
ns_undense(NsSet *set)
{
	int			k = 0;
	int			i;

	Assert(ns_is_dense(set));
	for (i = 0; i < set->n; i++)
		if (set->entries[i].value != NULL)
			set->entries[k++] = set->entries[i];
	set->n = k;
	set->tail = 0;
}

/* A sorted set of one grid space, its tail merged: dense once its span fits. */
static void
ns_try_dense(KeyedState *ks, NsSet *set, int64 step)
{
	NsEntry    *old = set->entries;
	NsEntry    *oldbase = set->entries - set->off;
	int64		first;
	int64		d;
	int64		len;
	int			n = set->n;
	int			cap;
	int			i;
	NsEntry    *dense;

	Assert(set->tail == 0 && n > 1 && step > 0);
	first = old[0].ns;
	if (pg_sub_s64_overflow(old[n - 1].ns, first, &d) || d % step != 0)
		return;
	if (d / step >= NS_DENSE_SPAN(n) || d / step >= PG_INT32_MAX / 2)
		return;
	len = d / step + 1;
	for (i = 1; i < n - 1; i++)
		if ((old[i].ns - first) % step != 0)
			return;
	cap = ns_dense_cap((int) len);
	dense = MemoryContextAlloc(ks->cxt, sizeof(NsEntry) * cap);
	set->off = (cap - (int) len) / 2;	/* rows out of order: room both ways */
	for (i = 0; i < len; i++)
		ns_hole(&dense[set->off + i], first + (int64) i * step);
	for (i = 0; i < n; i++)
		dense[set->off + (old[i].ns - first) / step] = old[i];
	pfree(oldbase);
	set->entries = dense + set->off;
	set->cap = cap;
	set->n = (int) len;
	set->tail = NS_DENSE;
}

/*
 * Add ns (not there yet).  After the last entry, or before the first into
 * the room dropped ones left, it goes in order; anywhere else it joins the
 * tail, in its order there, merged once the tail is full.
 */
NsEntry *
ks_ns_insert(KeyedState *ks, StateRecord *rec, int space, int64 ns)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);
	int64		step = ks->ns_grid[space];
	int			sorted;
	NsEntry    *e;
	int			i;

	Assert(ns_index(set, ns) < 0);
	if (step > 0 && set->n == 0)
	{
		/* a grid space's set starts dense */
		Assert(set->tail == 0 && set->off == 0);
		ns_room_at_end(ks, set);
		set->tail = NS_DENSE;
		set->n = 1;
		e = &set->entries[0];
		ns_hole(e, ns);
		e->value = ns_value_alloc(ks, space);
		return e;
	}
	if (ns_is_dense(set))
	{
		e = ns_dense_insert(ks, set, space, ns, step);
		if (e != NULL)
			return e;
		ns_undense(set);
	}
	sorted = set->n - set->tail;
	if (set->tail == 0 && sorted > 0 && set->off > 0 && ns < set->entries[0].ns)
	{
		set->entries--;
		set->off--;
		i = 0;
	}
	else
	{
		ns_room_at_end(ks, set);
		i = set->n;
		if (!(set->tail == 0 && (sorted == 0 || set->entries[sorted - 1].ns < ns)))
		{
			/* into the tail, before its first entry above ns */
			i = ns_tail_search(set, ns);
			memmove(&set->entries[i + 1], &set->entries[i], sizeof(NsEntry) * (set->n - i));
			set->tail++;
		}
	}
	set->n++;
	e = &set->entries[i];
	e->ns = ns;
	e->value = ns_value_alloc(ks, space);
	ItemPointerSetInvalid(&e->tid);
	e->flags = 0;
	if (ns_tail_full(set))
	{
		ns_settle(set);
		e = &set->entries[ns_index(set, ns)];
	}
	if (step > 0 && set->tail == 0 && set->n > 1)
	{
		ns_try_dense(ks, set, step);
		if (ns_is_dense(set))
			e = &set->entries[ns_index(set, ns)];
	}
	return e;
}

void *
keyed_state_ns_find(KeyedState *ks, StateRecord *rec, int space, int64 ns)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);
	int			i = ns_index(set, ns);

	return i >= 0 ? set->entries[i].value : NULL;
}

void *
keyed_state_ns_get(KeyedState *ks, StateRecord *rec, int space, int64 ns, bool *created)
{
	void	   *v = keyed_state_ns_find(ks, rec, space, ns);

	*created = (v == NULL);
	if (v != NULL)
		return v;
	return ks_ns_insert(ks, rec, space, ns)->value;
}

void
keyed_state_ns_remove(KeyedState *ks, StateRecord *rec, int space, int64 ns)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);
	int			i = ns_index(set, ns);

	if (i >= 0)
		ns_drop_at(ks, set, space, i);
}

void
keyed_state_ns_mark_changed(KeyedState *ks, StateRecord *rec, int space, int64 ns)
{
	NsSet	   *set;
	int			i;
	NsEntry    *e;
	ChangedNs  *c;

	if (!ks->durable)
		return;					/* nothing is written back */
	set = ks_ns_set(ks, rec, space);
	i = ns_index(set, ns);
	Assert(i >= 0);
	e = &set->entries[i];
	if (e->flags & RECORD_LISTED)
		return;
	if (ks->nchanged_ns >= ks->maxchanged_ns)
		ks->changed_ns = ks_grow_array(ks, ks->changed_ns, &ks->maxchanged_ns,
									sizeof(ChangedNs), 1024);
	c = &ks->changed_ns[ks->nchanged_ns++];
	c->rec = rec;
	c->space = space;
	c->ns = ns;
	e->flags |= RECORD_LISTED;
}

int
keyed_state_ns_count(KeyedState *ks, StateRecord *rec, int space)
{
	return ks_ns_set(ks, rec, space)->n;
}

void *
keyed_state_ns_at(KeyedState *ks, StateRecord *rec, int space, int i, int64 *ns)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);

	ns_settle(set);				/* positions are in order */
	Assert(i >= 0 && i < set->n);
	if (ns)
		*ns = set->entries[i].ns;
	return set->entries[i].value;
}

const NsEntry *
keyed_state_ns_entries(KeyedState *ks, StateRecord *rec, int space, int *n)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);

	ns_settle(set);				/* positions are in order */
	*n = set->n;
	return set->entries;
}

int
keyed_state_ns_lower_bound(KeyedState *ks, StateRecord *rec, int space, int64 ns)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);

	ns_settle(set);
	return ns_is_dense(set) ? ns_dense_lower_bound(set, ns) : ns_search(set, ns);
}

NsEntry *
keyed_state_ns_entry(KeyedState *ks, StateRecord *rec, int space, int64 ns)
{
	NsSet	   *set;
	int			i;

	if (rec->flags & RECORD_REMOVED)
		return NULL;
	set = ks_ns_set(ks, rec, space);
	Assert(!ns_is_dense(set));	/* durable sets are never dense */
	i = ns_index(set, ns);
	return i >= 0 ? &set->entries[i] : NULL;
}

/* ---- the interface ---- */

/*
 * Blocks of the arena and of image pools are at most 1/16 of the budget, as
 * nodeAgg.c bounds the blocks of its hash tables, and the hash table starts
 * at most at 1/32 of it.  Otherwise a small budget (work_mem = 64kB) is
 * spent by the first key's blocks: every replayed partition then keeps a
 * handful of keys and spills the others again, down to a partition per key.
 */
static Size
budget_block_size(Size mem_limit)
{
	Size		size;

	if (mem_limit == 0)
		return ARENA_BLOCK_SIZE;
	size = pg_prevpower2_size_t(Max(mem_limit / 16, 1));
	return Max(Min(size, ARENA_BLOCK_SIZE), MIN_BLOCK_SIZE);
}

/*
 * Sized at once for the keys the planner expects (a bounded call over a
 * table with statistics), so that the state does not grow by doubling --
 * each doubling rehashing every key and, for a moment, holding both
 * tables -- but never beyond the memory budget: an estimate too large
 * costs at most what the budget allows.
 */
static uint64
initial_inline_size(KeyedState *ks, uint64 expected)
{
	uint64		size = INLINE_MIN_SIZE;

	if (expected > 0)
	{
		/* at most 3/4 full, as ks_inline_find_or_insert keeps it */
		uint64		want = pg_nextpower2_64(expected + expected / 3 + 1);

		while (size < want &&
			   (ks->mem_limit == 0 ||
				2 * size * (ks->map.stride + ks->cold_size) <= ks->mem_limit / 2))
			size *= 2;
	}
	return size;
}

static uint32
initial_hash_size(KeyedState *ks, uint64 expected)
{
	uint64		n = expected;

	if (expected == 0)
		return 0;
	/* the table, and a record of at least its header and value per key */
	if (ks->mem_limit > 0)
		n = Min(n, ks->mem_limit / 2 /
				(sizeof(StateEntry) * 2 + sizeof(StateRecord) + ks->value_size + ks->cold_size));
	return (uint32) Min(n, PG_UINT32_MAX / 4);
}

static uint32
budget_hash_size(Size mem_limit)
{
	Size		n;

	if (mem_limit == 0)
		return HASH_INITIAL_SIZE;
	n = mem_limit / 32 / sizeof(StateEntry);
	return (uint32) Max(Min(n, HASH_INITIAL_SIZE), 64);
}

KeyedState *
keyed_state_create(const KeyedStateSpec *spec, MemoryContext parent)
{
	MemoryContext cxt;
	KeyedState *ks;
	KeySpec    *keys = spec->keys;
	int			i;

	Assert(spec->nspaces >= 0 && spec->nspaces <= KEYED_MAX_SPACES);
	cxt = AllocSetContextCreate(parent, "ptf keyed state",
								ALLOCSET_DEFAULT_MINSIZE, ALLOCSET_DEFAULT_INITSIZE,
								KEYED_STATE_MAX_BLOCK);
	ks = MemoryContextAllocZero(cxt, sizeof(KeyedState));
	ks->cxt = cxt;
	ks->keys = keys;
	ks->value_size = MAXALIGN(spec->hot);
	ks->cold_size = MAXALIGN(spec->cold);
	ks->nspaces = spec->nspaces;
	for (i = 0; i < spec->nspaces; i++)
	{
		ks->ns_value_size[i] = MAXALIGN(Max(spec->ns_value_size[i], 1));
		Assert(spec->ns_grid[i] >= 0);
		/* durable sets keep each entry's TID: they stay sorted */
		ks->ns_grid[i] = (spec->flags & KEYED_STATE_DURABLE) ? 0 : spec->ns_grid[i];
	}
	ks->ttl_us = spec->ttl_us;
	ks->mem_limit = spec->mem_limit;
	ks->block_size = budget_block_size(spec->mem_limit);
	ks->inline_record.expires_at = PTF_TIME_MAX;
	ItemPointerSetInvalid(&ks->inline_record.tid);

	ks->durable = (spec->flags & KEYED_STATE_DURABLE) != 0;
	ks->is_inline = ((spec->flags & (KEYED_STATE_STABLE | KEYED_STATE_REMOVABLE)) == 0 &&
					 spec->nspaces == 0 &&
					 (!ks->durable || ks->value_size + ks->cold_size == 0) &&
					 spec->ttl_us == 0 && ks->value_size <= INLINE_MAX_VALUE &&
					 (keys->ncols == 0 ||
					  (keys->ncols == 1 && keys->cols[0].typbyval &&
					   keys->cols[0].bitwise_eq)));
	if (ks->is_inline)
	{
		ks->map.stride = sizeof(Datum) + ks->value_size;
		ks->map.side_values = MemoryContextAllocZero(cxt,
													 Max(ks->value_size + ks->cold_size, 1) * SIDE_COUNT);
		ks_inline_alloc(ks, initial_inline_size(ks, spec->expected_keys));
	}
	else
		ks->hash = keyed_create(cxt, Max(budget_hash_size(spec->mem_limit),
										 initial_hash_size(ks, spec->expected_keys)), ks);
	return ks;
}

void
keyed_state_destroy(KeyedState *ks)
{
	MemoryContextDelete(ks->cxt);
}

KeyedLookup
keyed_state_lookup(KeyedState *ks, KeySpec *probe, TupleTableSlot *row, PtfTime now,
				   bool create, StateRef *ref)
{
	Assert(probe->ncols == ks->keys->ncols);
	if (ks->is_inline)
		return inline_lookup(ks, probe, row, create, ref);
	return record_lookup(ks, probe, key_probe(probe, row), now, create, ref);
}

/*
 * The same for a row of a batch: the key's hash is the one its prefetch's
 * first stage computed (prefetched, the row's scratch; NULL for a row that
 * was not prefetched), not computed again.
 */
KeyedLookup
keyed_state_lookup_prefetched(KeyedState *ks, KeySpec *probe, TupleTableSlot *row,
							  PtfTime now, bool create, const uint64 *prefetched,
							  StateRef *ref)
{
	if (prefetched == NULL || ks->is_inline || !(prefetched[0] & PREFETCHED_HASHED))
		return keyed_state_lookup(ks, probe, row, now, create, ref);
	Assert(probe->ncols == ks->keys->ncols);
	key_probe_fill(probe, row);
	Assert(key_hash_values(probe, probe->probe_values, probe->probe_nulls) ==
		   (uint32) prefetched[0]);
	return record_lookup(ks, probe, (uint32) prefetched[0], now, create, ref);
}

/* Only the inline layout knows where a key lives without hashing it. */
bool
keyed_state_can_prefetch(KeyedState *ks)
{
	return ks->is_inline && ks->keys->ncols == 1;
}

void
keyed_state_prefetch(KeyedState *ks, KeySpec *probe, TupleTableSlot *row)
{
	bool		isnull;
	Datum		d = slot_getattr(row, probe->cols[0].attno, &isnull);

	Assert(keyed_state_can_prefetch(ks));
	if (!isnull)
	{
		uint64		i = mix64(d) & ks->map.mask;

		prefetch_line(SLOT(&ks->map, i));
		if (ks->cold_size > 0)
			prefetch_line(SLOT_COLD(ks, i));
	}
}

/*
 * After keyed_state_prefetch() of the row, the lines it asked for have
 * come: where its key's value and cold part are, if the key is in the
 * inline map (found as a lookup finds it, nothing marked), for a prefetch
 * of what they point at.  false for a key that is not there, NULL or not
 * a map key.
 */
bool
keyed_state_prefetch_peek(KeyedState *ks, KeySpec *probe, TupleTableSlot *row,
						  void **value, void **cold)
{
	InlineMap  *map = &ks->map;
	bool		isnull;
	Datum		d = slot_getattr(row, probe->cols[0].attno, &isnull);
	uint64		i;

	Assert(keyed_state_can_prefetch(ks));
	if (isnull || d == INLINE_EMPTY || !inline_probe(map, d, &i))
		return false;
	*value = SLOT_VALUE(map, i);
	*cold = ks->cold_size > 0 ? SLOT_COLD(ks, i) : NULL;
	return true;
}

/*
 * The records layout, in stages over a batch of rows: each stage touches
 * only lines the one before asked for, so that the misses of the whole
 * batch overlap.  Stage 0 hashes the key and asks for its hash bucket;
 * 1 finds the record by hash (the key itself is compared by the lookup)
 * and asks for it and its namespace sets; 2 asks for the entries the
 * search for ns reads first (the last and the first), 3 for the one it
 * interpolates from them; 4 finds ns and asks for its value.  Nothing is changed: a wrong guess
 * costs a useless prefetch.  scratch[0..2] carry hash, record and the
 * position of ns found between the stages (-1: not known;
 * PREFETCHED_ABSENT: not there, and where it would go), and to the row's
 * processing: keyed_state_ns_get_prefetched() takes ns from there, or
 * inserts it, when that still holds, instead of searching again.  Stages
 * 1 .. 4 read the scratch alone, so that they can go over a batch in one
 * call (keyed_state_prefetch_batch).
 */
static pg_attribute_always_inline void
prefetch_later_stage(KeyedState *ks, int stage, int space, int64 ns, uint64 *scratch)
{
	StateRecord *rec;
	NsSet	   *set;

	switch (stage)
	{
		case 1:
			{
				uint32		hash = (uint32) scratch[0];
				uint32		i = hash & ks->hash->sizemask;
				int			probes;

				if (!(scratch[0] & PREFETCHED_HASHED))
					return;
				for (probes = 0; probes < 8; probes++)
				{
					StateEntry *e = &ks->hash->data[i];

					if (e->status != keyed_SH_IN_USE)
						return;
					if (e->hash == hash)
					{
						rec = e->key.rec;
						scratch[1] = (uint64) (uintptr_t) rec;
						prefetch_line(rec);
						prefetch_line(RECORD_NSSETS(ks, rec));
						prefetch_line(RECORD_PACKED_KEY(ks, rec));
						return;
					}
					i = (i + 1) & ks->hash->sizemask;
				}
				return;
			}
		case 2:
		case 3:
		case 4:
			rec = (StateRecord *) (uintptr_t) scratch[1];
			if (rec == NULL || space < 0 || space >= ks->nspaces)
				return;
			set = ks_ns_set(ks, rec, space);
			if (set->n == 0)
			{
				if (stage == 4)
					scratch[2] = (uint64) PREFETCHED_ABSENT(0);
				return;
			}
			if (ns_is_dense(set))
			{
				int			i;

				/* 2: the first two entries; 3: the one of ns; 4: its value */
				if (stage == 2)
				{
					prefetch_line(&set->entries[0]);
					prefetch_line(&set->entries[Min(1, set->n - 1)]);
					return;
				}
				if (stage == 3)
				{
					i = ns_dense_lower_bound(set, ns);
					scratch[2] = (uint64) (int64) i;	/* (a hint for stage 4) */
					if (i < set->n)
						prefetch_line(&set->entries[i]);
					return;
				}
				i = ns_dense_at(set, ns, (int64) scratch[2]);
				if (ns_dense_holds(set, i, ns))
				{
					scratch[2] = (uint64) (int64) i;
					prefetch_span(set->entries[i].value, ks->ns_value_size[space]);
				}
				else
					scratch[2] = (uint64) PREFETCHED_ABSENT(i);
				return;
			}
			if (stage == 2)
			{
				/* where the search starts */
				prefetch_line(&set->entries[set->n - set->tail - 1]);
				prefetch_line(&set->entries[0]);
			}
			else if (stage == 3)
			{
				int			sorted = set->n - set->tail;

				/* where it goes next: the interpolated guess, and the tail */
				if (set->tail > 0)
					prefetch_line(&set->entries[sorted]);
				if (sorted > 8 && set->entries[sorted - 1].ns > set->entries[0].ns)
				{
					double		span = (double) set->entries[sorted - 1].ns -
						(double) set->entries[0].ns;
					double		at = ((double) ns - (double) set->entries[0].ns) / span;

					if (at > 0 && at < 1)
						prefetch_line(&set->entries[(int) (at * (sorted - 1))]);
				}
			}
			else
			{
				int			lb;
				int			i = ns_locate(set, ns, &lb);

				scratch[2] = (uint64) (i >= 0 ? (int64) i : PREFETCHED_ABSENT(lb));
				if (i >= 0)
				{
					prefetch_span(set->entries[i].value, ks->ns_value_size[space]);
				}
			}
			return;
	}
}

void
keyed_state_prefetch_stage(KeyedState *ks, KeySpec *probe, TupleTableSlot *row, int stage,
						   int space, int64 ns, uint64 *scratch)
{
	uint32		hash;

	if (stage > 0)
	{
		if (!ks->is_inline)
			prefetch_later_stage(ks, stage, space, ns, scratch);
		return;
	}
	scratch[0] = 0;
	scratch[1] = 0;
	scratch[2] = (uint64) -1;
	if (ks->is_inline)
	{
		if (keyed_state_can_prefetch(ks))
			keyed_state_prefetch(ks, probe, row);
		return;
	}
	hash = key_probe(probe, row);
	scratch[0] = hash | PREFETCHED_HASHED;
	prefetch_line(&ks->hash->data[hash & ks->hash->sizemask]);
}

/*
 * A later stage (1 .. KEYED_PREFETCH_STAGES - 1) of n rows at once, each
 * for namespace scratch[i][ns_word] of space (KEYED_PREFETCH_NO_NS: none):
 * one call a stage, not one a row and stage.
 */
void
keyed_state_prefetch_batch(KeyedState *ks, int stage, int space, int ns_word,
						   uint64 *const *scratch, int n)
{
	int			i;

	Assert(stage > 0 && stage < KEYED_PREFETCH_STAGES);
	Assert(ns_word >= KEYED_PREFETCH_WORDS);
	if (ks->is_inline)
		return;
	for (i = 0; i < n; i++)
	{
		int64		ns = (int64) scratch[i][ns_word];

		prefetch_later_stage(ks, stage, ns == KEYED_PREFETCH_NO_NS ? -1 : space, ns,
							 scratch[i]);
	}
}

/*
 * The position stage 4 found ns at in rec's set, if it is still there;
 * -1 if not known.  *absent: ns is not in the set (stage 4 found where it
 * would go among the sorted entries, still so, and the tail lacks it).
 */
static inline int
prefetched_index(NsSet *set, StateRecord *rec, int64 ns, const uint64 *scratch,
				 bool *absent)
{
	int64		i;

	*absent = false;
	if (ns_is_dense(set))
	{
		int64		hint = -1;
		int			k;

		/* the position stage 4 found, if it still holds ns; else arithmetic */
		if (scratch != NULL && (StateRecord *) (uintptr_t) scratch[1] == rec)
		{
			hint = (int64) scratch[2];
			if (hint <= PREFETCHED_ABSENT(0))
				hint = PREFETCHED_ABSENT(0) - hint;
		}
		k = ns_dense_at(set, ns, hint);
		if (ns_dense_holds(set, k, ns))
			return k;
		*absent = true;
		return -1;
	}
	if (scratch == NULL || (StateRecord *) (uintptr_t) scratch[1] != rec)
		return -1;
	i = (int64) scratch[2];
	if (i >= 0)
		return (i < set->n && set->entries[i].ns == ns) ? (int) i : -1;
	if (i <= PREFETCHED_ABSENT(0))
	{
		int			lb = (int) (PREFETCHED_ABSENT(0) - i);
		int			sorted = set->n - set->tail;
		int			k;

		if (lb > sorted || (lb > 0 && set->entries[lb - 1].ns >= ns) ||
			(lb < sorted && set->entries[lb].ns <= ns))
			return -1;
		k = ns_tail_index(set, ns);
		if (k >= 0)
			return k;
		*absent = true;
	}
	return -1;
}

/*
 * keyed_state_ns_get() for a row whose staged prefetch looked for ns
 * (prefetched: its scratch, or NULL): the position found then is taken
 * when it still holds ns -- rows of the batch before may have moved it.
 */
void *
keyed_state_ns_get_prefetched(KeyedState *ks, StateRecord *rec, int space, int64 ns,
							  const uint64 *prefetched, bool *created)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);
	bool		absent;
	int			i = prefetched_index(set, rec, ns, prefetched, &absent);

	if (i >= 0)
	{
		Assert(i == ns_index(set, ns));
		*created = false;
		return set->entries[i].value;
	}
	if (absent)
	{
		*created = true;
		return ks_ns_insert(ks, rec, space, ns)->value;
	}
	return keyed_state_ns_get(ks, rec, space, ns, created);
}

/*
 * After the stages: the value of ns in the record the staged prefetch
 * found (a record of the key's hash, maybe another key's: what an operator
 * reads of it may only be prefetched), or NULL.
 */
void *
keyed_state_prefetch_ns_value(KeyedState *ks, const uint64 *scratch, int space, int64 ns)
{
	StateRecord *rec = (StateRecord *) (uintptr_t) scratch[1];
	NsSet	   *set;
	bool		absent;
	int			i;

	if (ks->is_inline || rec == NULL || space < 0 || space >= ks->nspaces)
		return NULL;
	set = ks_ns_set(ks, rec, space);
	i = prefetched_index(set, rec, ns, scratch, &absent);
	if (i < 0 && !absent)
		i = ns_index(set, ns);
	return i >= 0 ? set->entries[i].value : NULL;
}

/*
 * A stage after the last, over n rows as keyed_state_prefetch_batch: for
 * each whose value of ns the stages found, ask(arg, value), which asks for
 * what the operator reads through it.
 */
void
keyed_state_prefetch_batch_values(KeyedState *ks, int space, int ns_word,
								  uint64 *const *scratch, int n,
								  void (*ask) (void *arg, void *value), void *arg)
{
	int			i;

	Assert(ns_word >= KEYED_PREFETCH_WORDS);
	for (i = 0; i < n; i++)
	{
		int64		ns = (int64) scratch[i][ns_word];
		void	   *value;

		if (ns == KEYED_PREFETCH_NO_NS || scratch[i][1] == 0)
			continue;
		value = keyed_state_prefetch_ns_value(ks, scratch[i], space, ns);
		if (value != NULL)
			ask(arg, value);
	}
}

/*
 * The same for the greatest ns at or below the given one, of the sorted
 * entries (the tail is not searched: a prefetch may miss); its
 * position goes to scratch[2], for keyed_state_ns_floor_prefetched().
 */
void *
keyed_state_prefetch_ns_floor(KeyedState *ks, uint64 *scratch, int space, int64 ns)
{
	StateRecord *rec = (StateRecord *) (uintptr_t) scratch[1];
	NsSet	   *set;
	int			i;

	scratch[2] = (uint64) -1;
	if (ks->is_inline || rec == NULL || space < 0 || space >= ks->nspaces)
		return NULL;
	set = ks_ns_set(ks, rec, space);
	if (ns_is_dense(set))
		elog(ERROR, "floor of a dense namespace set");	/* no grid space floors */
	i = ns_floor(set, ns);
	scratch[2] = (uint64) (int64) i;
	return i >= 0 ? set->entries[i].value : NULL;
}

/*
 * The position of the greatest ns at or below the given one in rec's set
 * of space, -1 for none; from the prefetch of the row (prefetched: its
 * scratch, or NULL) when that position still answers.
 */
int
keyed_state_ns_floor_prefetched(KeyedState *ks, StateRecord *rec, int space, int64 ns,
								const uint64 *prefetched)
{
	NsSet	   *set = ks_ns_set(ks, rec, space);

	if (ns_is_dense(set))
		elog(ERROR, "floor of a dense namespace set");	/* no grid space floors */
	if (prefetched != NULL && (StateRecord *) (uintptr_t) prefetched[1] == rec &&
		set->tail == 0)
	{
		int64		p = (int64) prefetched[2];

		if (p >= -1 && p < set->n &&
			(p < 0 || set->entries[p].ns <= ns) &&
			(p + 1 == set->n || set->entries[p + 1].ns > ns))
		{
			Assert(p == ns_floor(set, ns));
			return (int) p;
		}
	}
	ns_settle(set);
	return ns_floor(set, ns);
}

/* Processing-time TTL starts (again) now. */
void
keyed_state_touch(KeyedState *ks, StateRecord *rec, PtfTime now)
{
	PtfTime		expires = ks->ttl_us > 0 ? ptf_time_add(now, ks->ttl_us) : PTF_TIME_MAX;

	if (rec->expires_at != expires)
	{
		rec->expires_at = expires;
		note_changed(ks, rec);
	}
}

/* The record must not expire until touched (a pending candidate). */
void
keyed_state_pin(KeyedState *ks, StateRecord *rec)
{
	if (rec->expires_at != PTF_TIME_MAX)
	{
		rec->expires_at = PTF_TIME_MAX;
		note_changed(ks, rec);
	}
}

void
keyed_state_mark_changed(KeyedState *ks, StateRecord *rec)
{
	note_changed(ks, rec);
}

/* Take rec out of the hash table (by its own key). */
void
ks_unlink_record(KeyedState *ks, StateRecord *rec)
{
	Datum	   *values = palloc(sizeof(Datum) * Max(ks->keys->ncols, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(ks->keys->ncols, 1));
	StateKey	nokey = {0};
	uint32		hash;
	StateEntry *entry;

	keyed_state_record_key(ks, rec, values, nulls);
	key_probe_values(ks->keys, values, nulls);
	hash = key_hash_values(ks->keys, values, nulls);
	current_probe = ks->keys;
	entry = keyed_lookup_hash(ks->hash, nokey, hash);
	if (entry == NULL || entry->key.rec != rec)
		elog(ERROR, "keyed state record to remove is not in the table");
	keyed_delete_item(ks->hash, entry);
	pfree(values);
	pfree(nulls);
}

/* A record out of the table waits for reclaim (its memory, if recycled). */
void
ks_note_removed(KeyedState *ks, StateRecord *rec, uint8 flags)
{
	rec->flags |= flags;
	if (rec->pad != 0)
	{
		if (ks->nremoved >= ks->maxremoved)
			ks->removed = ks_grow_array(ks, ks->removed, &ks->maxremoved,
									 sizeof(StateRecord *), 256);
		ks->removed[ks->nremoved++] = rec;
	}
}

void
keyed_state_remove(KeyedState *ks, StateRecord *rec)
{
	Assert(!ks->is_inline);
	Assert(!(rec->flags & RECORD_REMOVED));
	ks_unlink_record(ks, rec);
	clear_namespaces(ks, rec);
	if (rec->flags & RECORD_STORED)
		note_dead(ks, &rec->tid);
	ks_note_removed(ks, rec, RECORD_REMOVED);
}

int
keyed_state_removed_count(KeyedState *ks)
{
	return ks->nremoved;
}

bool
keyed_state_can_reclaim(KeyedState *ks)
{
	/* a changed list not yet written back may still name a removed record */
	return ks->nremoved > 0 && (!ks->durable || (ks->nchanged == 0 && ks->nchanged_ns == 0));
}

void
keyed_state_reclaim(KeyedState *ks)
{
	int			i;

	Assert(keyed_state_can_reclaim(ks) || ks->nremoved == 0);
	for (i = 0; i < ks->nremoved; i++)
	{
		StateRecord *rec = ks->removed[i];

		Assert((rec->flags & RECORD_REMOVED) && rec->pad != 0);
		*(StateRecord **) rec = ks->free_records[rec->pad];
		ks->free_records[rec->pad] = rec;
	}
	ks->nremoved = 0;
}

/* Remove every record expired at now (durable state, before writing back). */
void
keyed_state_sweep(KeyedState *ks, PtfTime now)
{
	keyed_iterator it;
	StateEntry *entry;
	List	   *expired = NIL;
	ListCell   *lc;

	if (ks->is_inline)
		return;					/* no TTL there */
	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		if (entry->key.rec->expires_at <= now)
			expired = lappend(expired, entry->key.rec);
	foreach(lc, expired)
		keyed_state_remove(ks, (StateRecord *) lfirst(lc));
	list_free(expired);
}

MemoryContext
keyed_state_context(KeyedState *ks)
{
	return ks->cxt;
}

Size
keyed_state_block_size(KeyedState *ks)
{
	return ks->block_size;
}

Size
keyed_state_memory(KeyedState *ks)
{
	return MemoryContextMemAllocated(ks->cxt, true);
}

Size
keyed_state_table_bytes(KeyedState *ks)
{
	if (ks->is_inline)
		return (ks->map.mask + 1) * (ks->map.stride + ks->cold_size);
	/* the hash table, the records it points at, what they hold */
	return keyed_state_memory(ks);
}

Size
keyed_state_growth_bytes(KeyedState *ks, uint64 nnew)
{
	if (ks->is_inline)
	{
		uint64		cap = ks->map.mask + 1;

		/* ks_inline_find_or_insert doubles it past 3/4 full */
		if ((ks->map.used + nnew) * 4 <= cap * 3)
			return 0;
		return 2 * cap * (ks->map.stride + ks->cold_size + (ks->map.hits != NULL ? 1 : 0));
	}
	if (ks->hash->members + nnew < ks->hash->grow_threshold)
		return 0;
	return 2 * (Size) ks->hash->size * sizeof(StateEntry);
}

uint64
keyed_state_count(KeyedState *ks)
{
	if (ks->is_inline)
		return ks->map.used + ks->map.side_used[SIDE_NULL] +
			ks->map.side_used[SIDE_MARKER] + ks->map.side_used[SIDE_GLOBAL];
	return ks->hash->members;
}

KeySpec *
keyed_state_keys(KeyedState *ks)
{
	return ks->keys;
}

int64
keyed_state_ttl(KeyedState *ks)
{
	return ks->ttl_us;
}

int
keyed_state_nspaces(KeyedState *ks)
{
	return ks->nspaces;
}

void
keyed_state_record_ref(KeyedState *ks, StateRecord *rec, StateRef *ref)
{
	Assert(!ks->is_inline);
	ks_set_record_ref(ks, rec, ref);
}

void
keyed_state_foreach(KeyedState *ks, StateRefCallback cb, void *arg)
{
	StateRef	ref;

	if (ks->is_inline)
	{
		InlineMap  *map = &ks->map;
		uint64		i;
		int			side;

		ref.rec = &ks->inline_record;
		for (side = 0; side < SIDE_COUNT; side++)
		{
			if (!map->side_used[side])
				continue;
			ref.value = map->side_values + side * (ks->value_size + ks->cold_size);
			ref.cold = (char *) ref.value + ks->value_size;
			cb(&ref, arg);
		}
		for (i = 0; i <= map->mask; i++)
		{
			if (SLOT_KEY(map, i) == INLINE_EMPTY)
				continue;
			ref.value = SLOT_VALUE(map, i);
			ref.cold = ks->cold_size > 0 ? SLOT_COLD(ks, i) : NULL;
			cb(&ref, arg);
		}
	}
	else
	{
		keyed_iterator it;
		StateEntry *entry;

		keyed_start_iterate(ks->hash, &it);
		while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		{
			ks_set_record_ref(ks, entry->key.rec, &ref);
			cb(&ref, arg);
		}
	}
}

void
keyed_state_record_key(KeyedState *ks, StateRecord *rec,
					   Datum *values, bool *nulls)
{
	key_unpack(ks->keys, RECORD_PACKED_KEY(ks, rec),
			   (rec->flags & RECORD_KEY_NULLS) != 0, values, nulls);
}
