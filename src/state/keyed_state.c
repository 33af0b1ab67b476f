/*-------------------------------------------------------------------------
 *
 * keyed_state.c
 *	  Keyed state in backend memory: an open-addressing hash table of
 *	  pointers to records carved from an arena.
 *
 * Why not TupleHashTable (execGrouping.c)?  It keeps a MinimalTuple and a
 * separately palloc'd "additional" area per key: two chunk headers, a
 * tuple header and power-of-two rounding, well over a hundred bytes per
 * key.  Here a hash slot is 16 bytes and a record is a 16-byte header, the
 * operator's value and the packed key, bump-allocated without chunk
 * headers; records never move, so operators can point at them.
 *
 * Keys-only mode: when a record would hold nothing (no value, no TTL, not
 * durable) and the key is one pass-by-value column compared bitwise
 * (integers, dates, timestamps...), the state is a set of datums: an
 * open-addressing array of 8-byte slots with linear probing.  A lookup
 * touches one cache line of an array half the size of the general table's,
 * and cache misses on that array are nearly all the cost of keep-first by
 * arrival.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "state/keyed_state.h"

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

/* keys-only mode: a set of datums; these keys need no slot of their own */
typedef struct DatumSet
{
	Datum	   *slots;
	uint64		mask;			/* capacity - 1, capacity a power of two */
	uint64		used;			/* occupied slots */
	bool		has_marker;		/* the key whose datum is the empty marker */
	bool		has_null;		/* the NULL key */
	bool		has_global;		/* the one key of an unkeyed state */
} DatumSet;

/* an arbitrary value marks empty slots; a key equal to it is kept aside */
#define DATUMSET_EMPTY		((Datum) UINT64CONST(0x9e3779b97f4a7c15))
#define DATUMSET_MIN_SIZE	1024

struct KeyedState
{
	MemoryContext cxt;			/* everything below lives here */
	KeySpec    *keys;
	Size		value_size;		/* MAXALIGNed */
	int64		ttl_us;			/* 0: keep forever */
	Size		mem_limit;		/* 0: unbounded */
	bool		keys_only;		/* a DatumSet, no records */
	DatumSet	set;
	StateRecord keys_only_record;	/* what lookups return in keys-only mode */
	struct keyed_hash *hash;

	/* arena */
	char	   *block;
	Size		block_used;
	Size		block_size;

	/* changes since the last keyed_state_clear_changes() */
	StateRecord **changed;
	int			nchanged;
	int			maxchanged;
	ItemPointerData *dead;
	int			ndead;
	int			maxdead;
};

/* the probe is always the KeySpec's current probe, never a stored key */
static inline bool
entry_matches_probe(KeyedState *ks, const StateEntry *entry)
{
	StateRecord *rec = entry->key.rec;
	const char *packed;

	packed = (const char *) STATE_RECORD_VALUE(rec) + ks->value_size;
	return key_packed_equals_probe(ks->keys, packed,
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

static void
datumset_init(KeyedState *ks, uint64 size)
{
	uint64		i;

	ks->set.slots = MemoryContextAllocHuge(ks->cxt, sizeof(Datum) * size);
	for (i = 0; i < size; i++)
		ks->set.slots[i] = DATUMSET_EMPTY;
	ks->set.mask = size - 1;
	ks->set.used = 0;
}

static void
datumset_grow(KeyedState *ks)
{
	Datum	   *old = ks->set.slots;
	uint64		oldsize = ks->set.mask + 1;
	uint64		i;

	datumset_init(ks, oldsize * 2);
	for (i = 0; i < oldsize; i++)
	{
		uint64		j;

		if (old[i] == DATUMSET_EMPTY)
			continue;
		j = mix64(old[i]) & ks->set.mask;
		while (ks->set.slots[j] != DATUMSET_EMPTY)
			j = (j + 1) & ks->set.mask;
		ks->set.slots[j] = old[i];
		ks->set.used++;
	}
	pfree(old);
}

static StateRecord *
keys_only_lookup(KeyedState *ks, TupleTableSlot *row, bool create,
				 KeyedLookup *result)
{
	DatumSet   *set = &ks->set;
	bool	   *flag = NULL;
	Datum		d = (Datum) 0;
	uint64		i;

	if (ks->keys->ncols == 0)
		flag = &set->has_global;
	else
	{
		bool		isnull;

		d = slot_getattr(row, ks->keys->cols[0].attno, &isnull);
		if (isnull)
			flag = &set->has_null;
		else if (d == DATUMSET_EMPTY)
			flag = &set->has_marker;
	}

	if (flag != NULL)
	{
		if (*flag)
			*result = KS_FOUND;
		else if (!create)
			*result = KS_ABSENT;
		else if (ks->mem_limit > 0 && keyed_state_memory(ks) >= ks->mem_limit)
			*result = KS_FULL;
		else
		{
			*flag = true;
			*result = KS_CREATED;
		}
		return *result == KS_FOUND || *result == KS_CREATED ? &ks->keys_only_record : NULL;
	}

	for (i = mix64(d) & set->mask;; i = (i + 1) & set->mask)
	{
		Datum		slot = set->slots[i];

		if (slot == d)
		{
			*result = KS_FOUND;
			return &ks->keys_only_record;
		}
		if (slot == DATUMSET_EMPTY)
			break;
	}

	if (!create)
	{
		*result = KS_ABSENT;
		return NULL;
	}
	/* at most 3/4 full: probe runs stay short */
	if ((set->used + 1) * 4 > (set->mask + 1) * 3)
	{
		if (ks->mem_limit > 0 &&
			keyed_state_memory(ks) + sizeof(Datum) * 2 * (set->mask + 1) > ks->mem_limit)
		{
			*result = KS_FULL;
			return NULL;
		}
		datumset_grow(ks);
		for (i = mix64(d) & set->mask; set->slots[i] != DATUMSET_EMPTY;
			 i = (i + 1) & set->mask)
			;
	}
	else if (ks->mem_limit > 0 && keyed_state_memory(ks) >= ks->mem_limit)
	{
		*result = KS_FULL;
		return NULL;
	}
	set->slots[i] = d;
	set->used++;
	*result = KS_CREATED;
	return &ks->keys_only_record;
}

KeyedState *
keyed_state_create(KeySpec *keys, Size value_size, int64 ttl_us,
				   Size mem_limit, bool need_records, MemoryContext parent)
{
	MemoryContext cxt;
	KeyedState *ks;

	cxt = AllocSetContextCreate(parent, "ptf keyed state",
								ALLOCSET_DEFAULT_SIZES);
	ks = MemoryContextAllocZero(cxt, sizeof(KeyedState));
	ks->cxt = cxt;
	ks->keys = keys;
	ks->value_size = MAXALIGN(value_size);
	ks->ttl_us = ttl_us;
	ks->mem_limit = mem_limit;
	ks->keys_only = (!need_records && value_size == 0 && ttl_us == 0 &&
					 (keys->ncols == 0 ||
					  (keys->ncols == 1 && keys->cols[0].typbyval &&
					   keys->cols[0].bitwise_eq)));
	ks->keys_only_record.expires_at = PTF_TIME_MAX;
	ItemPointerSetInvalid(&ks->keys_only_record.tid);
	if (ks->keys_only)
		datumset_init(ks, DATUMSET_MIN_SIZE);
	else
		ks->hash = keyed_create(cxt, 1024, ks);
	return ks;
}

void
keyed_state_destroy(KeyedState *ks)
{
	MemoryContextDelete(ks->cxt);
}

static void *
arena_alloc(KeyedState *ks, Size size)
{
	void	   *p;

	size = MAXALIGN(size);
	if (ks->block == NULL || ks->block_used + size > ks->block_size)
	{
		Size		bsize = Max(ARENA_BLOCK_SIZE, size);

		ks->block = MemoryContextAllocHuge(ks->cxt, bsize);
		ks->block_size = bsize;
		ks->block_used = 0;
	}
	p = ks->block + ks->block_used;
	ks->block_used += size;
	memset(p, 0, size);
	return p;
}

static void
note_changed(KeyedState *ks, StateRecord *rec)
{
	rec->flags |= RECORD_CHANGED;
	if (rec->flags & RECORD_LISTED)
		return;
	if (ks->nchanged >= ks->maxchanged)
	{
		ks->maxchanged = Max(1024, ks->maxchanged * 2);
		if (ks->changed == NULL)
			ks->changed = MemoryContextAllocHuge(ks->cxt,
												 sizeof(StateRecord *) * ks->maxchanged);
		else
			ks->changed = repalloc_huge(ks->changed,
										sizeof(StateRecord *) * ks->maxchanged);
	}
	ks->changed[ks->nchanged++] = rec;
	rec->flags |= RECORD_LISTED;
}

/* Make a record for the current probe. */
static StateRecord *
record_create(KeyedState *ks)
{
	Size		keysize = key_packed_size(ks->keys);
	StateRecord *rec;

	rec = arena_alloc(ks, sizeof(StateRecord) + ks->value_size + keysize);
	rec->expires_at = PTF_TIME_MAX;
	ItemPointerSetInvalid(&rec->tid);
	if (ks->keys->probe_has_nulls)
		rec->flags |= RECORD_KEY_NULLS;
	key_pack(ks->keys, (char *) STATE_RECORD_VALUE(rec) + ks->value_size);
	return rec;
}

StateRecord *
keyed_state_lookup(KeyedState *ks, TupleTableSlot *row, PtfTime now,
				   bool create, KeyedLookup *result)
{
	uint32		hash;
	StateEntry *entry;
	StateKey	nokey = {0};
	bool		found;

	if (ks->keys_only)
		return keys_only_lookup(ks, row, create, result);

	hash = key_probe(ks->keys, row);
	entry = keyed_lookup_hash(ks->hash, nokey, hash);
	if (entry)
	{
		StateRecord *rec = entry->key.rec;

		if (rec->expires_at > now)
		{
			*result = KS_FOUND;
			return rec;
		}
		if (!create)
		{
			*result = KS_ABSENT;
			return NULL;
		}
		/* expired: the key starts a new period in the same record */
		memset(STATE_RECORD_VALUE(rec), 0, ks->value_size);
		rec->expires_at = PTF_TIME_MAX;
		note_changed(ks, rec);
		*result = KS_CREATED;
		return rec;
	}

	if (!create)
	{
		*result = KS_ABSENT;
		return NULL;
	}
	if (ks->mem_limit > 0 && keyed_state_memory(ks) >= ks->mem_limit)
	{
		*result = KS_FULL;
		return NULL;
	}

	entry = keyed_insert_hash(ks->hash, nokey, hash, &found);
	Assert(!found);
	entry->key.rec = record_create(ks);
	note_changed(ks, entry->key.rec);
	*result = KS_CREATED;
	return entry->key.rec;
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

void
keyed_state_remove(KeyedState *ks, StateRecord *rec)
{
	Datum	   *values = palloc(sizeof(Datum) * Max(ks->keys->ncols, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(ks->keys->ncols, 1));
	uint32		hash;
	StateEntry *entry;

	StateKey	nokey = {0};

	Assert(!ks->keys_only);
	keyed_state_record_key(ks, rec, values, nulls);
	key_probe_values(ks->keys, values, nulls);
	hash = key_hash_values(ks->keys, values, nulls);
	entry = keyed_lookup_hash(ks->hash, nokey, hash);
	if (entry == NULL || entry->key.rec != rec)
		elog(ERROR, "keyed state record to remove is not in the table");
	keyed_delete_item(ks->hash, entry);

	if (rec->flags & RECORD_STORED)
	{
		if (ks->ndead >= ks->maxdead)
		{
			ks->maxdead = Max(256, ks->maxdead * 2);
			if (ks->dead == NULL)
				ks->dead = MemoryContextAllocHuge(ks->cxt,
												  sizeof(ItemPointerData) * ks->maxdead);
			else
				ks->dead = repalloc_huge(ks->dead,
										 sizeof(ItemPointerData) * ks->maxdead);
		}
		ks->dead[ks->ndead++] = rec->tid;
	}
	rec->flags |= RECORD_REMOVED;
	pfree(values);
	pfree(nulls);
}

MemoryContext
keyed_state_context(KeyedState *ks)
{
	return ks->cxt;
}

Size
keyed_state_memory(KeyedState *ks)
{
	return MemoryContextMemAllocated(ks->cxt, true);
}

uint64
keyed_state_count(KeyedState *ks)
{
	if (ks->keys_only)
		return ks->set.used + ks->set.has_null + ks->set.has_marker +
			ks->set.has_global;
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

void
keyed_state_set_ttl(KeyedState *ks, int64 ttl_us)
{
	ks->ttl_us = ttl_us;
}

void
keyed_state_foreach(KeyedState *ks, StateRecordCallback cb, void *arg)
{
	keyed_iterator it;
	StateEntry *entry;

	Assert(!ks->keys_only);
	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		cb(entry->key.rec, arg);
}

/* Remove every record expired at now (durable state, before writing back). */
void
keyed_state_sweep(KeyedState *ks, PtfTime now)
{
	keyed_iterator it;
	StateEntry *entry;
	List	   *expired = NIL;
	ListCell   *lc;

	if (ks->keys_only)
		return;					/* nothing expires */
	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		if (entry->key.rec->expires_at <= now)
			expired = lappend(expired, entry->key.rec);
	foreach(lc, expired)
		keyed_state_remove(ks, (StateRecord *) lfirst(lc));
	list_free(expired);
}

StateRecord *
keyed_state_restore(KeyedState *ks, Datum *keyvalues, bool *keynulls,
					PtfTime expires_at, ItemPointer tid)
{
	uint32		hash;
	StateEntry *entry;
	StateKey	nokey = {0};
	bool		found;

	Assert(!ks->keys_only);
	key_probe_values(ks->keys, keyvalues, keynulls);
	hash = key_hash_values(ks->keys, keyvalues, keynulls);
	entry = keyed_insert_hash(ks->hash, nokey, hash, &found);
	if (found)
		elog(ERROR, "durable state holds the same key twice");
	entry->key.rec = record_create(ks);
	entry->key.rec->expires_at = expires_at;
	entry->key.rec->tid = *tid;
	entry->key.rec->flags |= RECORD_STORED;
	return entry->key.rec;
}

void
keyed_state_record_key(KeyedState *ks, StateRecord *rec,
					   Datum *values, bool *nulls)
{
	key_unpack(ks->keys, (const char *) STATE_RECORD_VALUE(rec) + ks->value_size,
			   (rec->flags & RECORD_KEY_NULLS) != 0, values, nulls);
}

StateRecord **
keyed_state_changed(KeyedState *ks, int *n)
{
	*n = ks->nchanged;
	return ks->changed;
}

ItemPointer
keyed_state_dead_tids(KeyedState *ks, int *n)
{
	*n = ks->ndead;
	return ks->dead;
}

void
keyed_state_clear_changes(KeyedState *ks)
{
	int			i;

	for (i = 0; i < ks->nchanged; i++)
		ks->changed[i]->flags &= ~(RECORD_CHANGED | RECORD_LISTED);
	ks->nchanged = 0;
	ks->ndead = 0;
}
