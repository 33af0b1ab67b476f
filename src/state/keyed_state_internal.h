/*-------------------------------------------------------------------------
 *
 * keyed_state_internal.h
 *	  The layouts of keyed state (see keyed_state.c), shared by the file
 *	  that keeps keys (keyed_state.c) and the one that brings them in from
 *	  durable state and lets them go (keyed_state_durable.c).  Nobody else
 *	  includes it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_KEYED_STATE_INTERNAL_H
#define PTF_KEYED_STATE_INTERNAL_H

#include "state/keyed_state.h"
#include "state/keyed_state_durable.h"

/* ---- record layout: simplehash over record pointers ---- */

typedef struct StateKey
{
	StateRecord *rec;
} StateKey;

typedef struct StateEntry
{
	StateKey	key;
	uint32		hash;
	char		status;
} StateEntry;

#define ARENA_BLOCK_SIZE	(64 * 1024)
#define MIN_BLOCK_SIZE		(4 * 1024)	/* room for the largest pooled image */

/*
 * The largest block the state's context takes from malloc for its small
 * chunks (namespace arrays, keys' bytes).  The default, 8 MB, left up to
 * half a block unused at the end of a call (temporal join, 100k versions:
 * 3.6 MB of 18.8 MB, counted against the budget); past this size a block
 * more costs one malloc in a quarter megabyte.
 */
#define KEYED_STATE_MAX_BLOCK	(256 * 1024)
#define HASH_INITIAL_SIZE	1024

/* ---- inline layout: slots of (key datum, value) ---- */

#define INLINE_MAX_VALUE	24	/* a slot is at most half a cache line */
#define INLINE_MIN_SIZE		1024

/* an arbitrary value marks empty slots; a key equal to it is kept aside */
#define INLINE_EMPTY		((Datum) UINT64CONST(0x9e3779b97f4a7c15))

/* keys that have no slot of their own */
#define SIDE_NULL		0
#define SIDE_MARKER		1
#define SIDE_GLOBAL		2		/* the one key of an unkeyed state */
#define SIDE_COUNT		3

typedef struct InlineMap
{
	char	   *slots;			/* stride bytes each, cache-line aligned */
	void	   *alloc;			/* what to pfree */
	Size		stride;
	char	   *cold;			/* cold_size bytes per slot */
	uint64		mask;			/* capacity - 1, capacity a power of two */
	uint64		used;
	bool		side_used[SIDE_COUNT];
	char	   *side_values;	/* SIDE_COUNT values, hot and cold */
	uint8	   *hits;			/* per slot, once use is tracked: looked up */
} InlineMap;

/*
 * Entries are taken from the front (the oldest slice, the oldest version)
 * far more often than from anywhere else: the array may begin past the
 * start of its allocation (off entries), so that dropping the first entry
 * moves nothing and adding a first one reuses the room.  Entries added
 * out of order (rows out of time order; after the last sorted entry too,
 * once a tail is waiting) first wait in a tail, sorted on its own, of up
 * to NS_TAIL_MAX entries or the square root of the others (ns_tail_full):
 * lookups search it too, and anything that walks positions merges it
 * first.  A set of up to NS_TAIL_MAX squared sorted entries merges its
 * tail at its next insertion (so at once, unless it shrank with a tail).
 */
typedef struct NsSet
{
	NsEntry    *entries;		/* ascending ns, but for the tail; the
								 * allocation starts off entries before */
	int32		n;
	int32		cap;			/* entries the allocation holds */
	int32		off;
	int32		tail;			/* the last tail entries: a second sorted run;
								 * NS_DENSE: a dense set */
} NsSet;

/*
 * A dense set (a space on a grid): one entry per grid point from the first
 * ns to the last, holes (value NULL) between, so that the position of ns is
 * (ns - first) / step -- no search, and an insertion between fills a hole
 * instead of moving entries.  Its ends are never holes.  It spans at most
 * NS_DENSE_SPAN(entries) points when it grows (else it goes back to sorted);
 * a sorted set of a grid space goes dense once its span fits.
 */
#define NS_DENSE (-1)
#define NS_DENSE_SPAN(present) Max((int64) 8, 4 * (int64) (present))

/* entries added out of order wait at the end, at least this many */
#define NS_TAIL_MAX 8

/* records up to this many MAXALIGN units are recycled (StateRecord.pad) */
#define RECORD_SIZE_CLASSES 256

typedef struct NsFreeList
{
	void	  **items;
	int			n;
	int			max;
} NsFreeList;

struct KeyedState
{
	MemoryContext cxt;			/* everything below lives here */
	KeySpec    *keys;
	Size		value_size;		/* hot part, MAXALIGNed */
	Size		cold_size;		/* cold part, MAXALIGNed */
	int			nspaces;
	Size		ns_value_size[KEYED_MAX_SPACES];	/* MAXALIGNed */
	int64		ns_grid[KEYED_MAX_SPACES];	/* 0: none, or not durable */
	NsFreeList	ns_free[KEYED_MAX_SPACES];
	int64		ttl_us;			/* 0: keep forever */
	Size		mem_limit;		/* 0: unbounded */
	bool		full;			/* once full, no new key until the end */
	int			budget_skip;	/* new keys admitted before measuring again */
	Size		block_size;		/* of the arena and the image pools */

	bool		is_inline;
	InlineMap	map;
	StateRecord inline_record;	/* what refs carry in the inline layout */

	struct keyed_hash *hash;
	char	   *block;			/* arena */
	Size		block_used;
	Size		block_end;

	/*
	 * Removed records wait here until nothing points at them (timers,
	 * changed lists), then go to the free list of their size, in units of
	 * MAXALIGN; a record of the same size is made from one of them.
	 */
	StateRecord **removed;
	int			nremoved;
	int			maxremoved;
	StateRecord *free_records[RECORD_SIZE_CLASSES];

	/* changes since the last keyed_state_clear_changes() */
	bool		durable;
	Datum	   *new_keys;		/* inline layout: keys created */
	bool	   *new_nulls;
	int			nnew;
	int			maxnew;
	StateRecord **changed;
	int			nchanged;
	int			maxchanged;
	ChangedNs  *changed_ns;
	int			nchanged_ns;
	int			maxchanged_ns;
	ItemPointerData *dead;
	int			ndead;
	int			maxdead;

	/* records made by the load under way (keyed_state_begin_load) */
	StateRecord **loading;
	int			nloading;
	int			maxloading;
	bool		in_load;
};

#define RECORD_NSSETS(ks, rec) \
	((NsSet *) ((char *) STATE_RECORD_VALUE(rec) + (ks)->value_size + (ks)->cold_size))
#define RECORD_PACKED_KEY(ks, rec) \
	((char *) RECORD_NSSETS(ks, rec) + sizeof(NsSet) * (ks)->nspaces)

/*
 * The probe of the lookup under way; set around simplehash calls, whose
 * equality callback cannot be passed it.
 */
static KeySpec *current_probe = NULL;

/* the probe is always the current lookup's, never a stored key */
static inline bool
entry_matches_probe(KeyedState *ks, const StateEntry *entry)
{
	StateRecord *rec = entry->key.rec;

	Assert(current_probe != NULL);
	return key_packed_equals_probe(current_probe, RECORD_PACKED_KEY(ks, rec),
								   (rec->flags & RECORD_KEY_NULLS) != 0);
}

/* every lookup passes the probe's hash: the key itself cannot be hashed */
static inline uint32
probe_hash_unavailable(void)
{
	elog(ERROR, "keyed state lookups must pass the probe's hash");
	return 0;
}

#define SH_PREFIX keyed
#define SH_ELEMENT_TYPE StateEntry
#define SH_KEY_TYPE StateKey
#define SH_KEY key
#define SH_HASH_KEY(tb, key) probe_hash_unavailable()
/*
 * simplehash calls SH_EQUAL(tb, entry->key, looked-up key), the latter
 * always the probe; the entry is recovered from its key's address.
 */
#define SH_EQUAL(tb, a, b) \
	entry_matches_probe((KeyedState *) (tb)->private_data, \
						(const StateEntry *) ((const char *) &(a) - offsetof(StateEntry, key)))
#define SH_SCOPE static inline
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"


static inline void
ks_set_record_ref(KeyedState *ks, StateRecord *rec, StateRef *ref)
{
	ref->rec = rec;
	ref->value = STATE_RECORD_VALUE(rec);
	ref->cold = (char *) ref->value + ks->value_size;
}

static inline NsSet *
ks_ns_set(KeyedState *ks, StateRecord *rec, int space)
{
	Assert(space >= 0 && space < ks->nspaces);
	Assert(!ks->is_inline);
	return &RECORD_NSSETS(ks, rec)[space];
}

/* murmur3's 64-bit finalizer */
static inline uint64
mix64(uint64 k)
{
	k ^= k >> 33;
	k *= UINT64CONST(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64CONST(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return k;
}

#define SLOT(map, i)		((map)->slots + (i) * (map)->stride)
#define SLOT_KEY(map, i)	(*(Datum *) SLOT(map, i))
#define SLOT_VALUE(map, i)	((void *) (SLOT(map, i) + sizeof(Datum)))
#define SLOT_COLD(ks, i)	((void *) ((ks)->map.cold + (i) * (ks)->cold_size))

/* keyed_state.c: what keyed_state_durable.c uses of it */
extern StateRecord *ks_record_create(KeyedState *ks, KeySpec *probe);
extern bool ks_inline_find_or_insert(KeyedState *ks, Datum d, bool create, uint64 *pos, bool *full);
extern void ks_unlink_record(KeyedState *ks, StateRecord *rec);
extern void ks_ns_value_free(KeyedState *ks, int space, void *v);
extern NsEntry *ks_ns_insert(KeyedState *ks, StateRecord *rec, int space, int64 ns);
extern void ks_note_removed(KeyedState *ks, StateRecord *rec, uint8 flags);
extern void ks_inline_alloc(KeyedState *ks, uint64 size);
extern void *ks_grow_array(KeyedState *ks, void *array, int *max, Size elem, int min);

#endif							/* PTF_KEYED_STATE_INTERNAL_H */
