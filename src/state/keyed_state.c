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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "state/keyed_state.h"

typedef struct StateEntry
{
	StateRecord *rec;
	uint32		hash;
	char		status;
} StateEntry;

#define ARENA_BLOCK_SIZE	(64 * 1024)

struct KeyedState
{
	MemoryContext cxt;			/* everything below lives here */
	KeySpec    *keys;
	Size		value_size;		/* MAXALIGNed */
	int64		ttl_us;			/* 0: keep forever */
	Size		mem_limit;		/* 0: unbounded */
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

/* the probe is always the KeySpec's current probe, never a record */
static inline bool
record_matches_probe(KeyedState *ks, StateRecord *rec)
{
	const char *packed = (const char *) STATE_RECORD_VALUE(rec) + ks->value_size;

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
#define SH_KEY_TYPE StateRecord *
#define SH_KEY rec
#define SH_HASH_KEY(tb, key) probe_hash_unavailable()
/* simplehash passes (stored key, looked-up key); the latter is always the probe */
#define SH_EQUAL(tb, a, b) record_matches_probe((KeyedState *) (tb)->private_data, (a))
#define SH_SCOPE static inline
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

KeyedState *
keyed_state_create(KeySpec *keys, Size value_size, int64 ttl_us,
				   Size mem_limit, MemoryContext parent)
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
	uint32		hash = key_probe(ks->keys, row);
	StateEntry *entry;
	bool		found;

	entry = keyed_lookup_hash(ks->hash, NULL, hash);
	if (entry)
	{
		StateRecord *rec = entry->rec;

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

	entry = keyed_insert_hash(ks->hash, NULL, hash, &found);
	Assert(!found);
	entry->rec = record_create(ks);
	note_changed(ks, entry->rec);
	*result = KS_CREATED;
	return entry->rec;
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

	keyed_state_record_key(ks, rec, values, nulls);
	key_probe_values(ks->keys, values, nulls);
	hash = key_hash_values(ks->keys, values, nulls);
	entry = keyed_lookup_hash(ks->hash, NULL, hash);
	if (entry == NULL || entry->rec != rec)
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

	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		cb(entry->rec, arg);
}

/* Remove every record expired at now (durable state, before writing back). */
void
keyed_state_sweep(KeyedState *ks, PtfTime now)
{
	keyed_iterator it;
	StateEntry *entry;
	List	   *expired = NIL;
	ListCell   *lc;

	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		if (entry->rec->expires_at <= now)
			expired = lappend(expired, entry->rec);
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
	bool		found;

	key_probe_values(ks->keys, keyvalues, keynulls);
	hash = key_hash_values(ks->keys, keyvalues, keynulls);
	entry = keyed_insert_hash(ks->hash, NULL, hash, &found);
	if (found)
		elog(ERROR, "durable state holds the same key twice");
	entry->rec = record_create(ks);
	entry->rec->expires_at = expires_at;
	entry->rec->tid = *tid;
	entry->rec->flags |= RECORD_STORED;
	return entry->rec;
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
