/*-------------------------------------------------------------------------
 *
 * keyed_state_durable.c
 *	  Keyed state as durable state sees it: keys restored from a state
 *	  table, loaded into state already in use, evicted by a clock when
 *	  memory is short, and the changes to write back.
 *
 * Loading more keys into state already in use (durable state read a batch
 * at a time): a key the state holds already -- changed, expired or not --
 * is newer in memory than in its table and must not be restored again; a
 * removed one has its TID among the dead ones.
 *
 * Eviction is a clock, the classic approximation of least recently used:
 * once tracking is on, every lookup marks its key used; a pass drops the
 * keys not used since the pass before, unless the operator needs one.
 * Only state without changes to write back is evicted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "state/keyed_state_internal.h"

static bool inline_restore(KeyedState *ks, Datum *keyvalues, bool *keynulls);

StateRecord *
keyed_state_restore_key(KeyedState *ks, Datum *keyvalues, bool *keynulls)
{
	uint32		hash;
	StateEntry *entry;
	StateKey	nokey = {0};
	bool		found;
	StateRecord *rec;

	if (ks->is_inline)
	{
		if (inline_restore(ks, keyvalues, keynulls))
			ptf_state_corrupted("the same key twice");
		return NULL;
	}

	key_probe_values(ks->keys, keyvalues, keynulls);
	hash = key_hash_values(ks->keys, keyvalues, keynulls);
	current_probe = ks->keys;
	entry = keyed_insert_hash(ks->hash, nokey, hash, &found);
	if (found)
		return entry->key.rec;
	rec = ks_record_create(ks, ks->keys);
	entry->key.rec = rec;
	return rec;
}

/* The inline slot of a key, found or made; true if it was there. */
static bool
inline_restore(KeyedState *ks, Datum *keyvalues, bool *keynulls)
{
	int			side = -1;
	uint64		pos;
	bool		full;
	bool		found;

	if (ks->keys->ncols == 0)
		side = SIDE_GLOBAL;
	else if (keynulls[0])
		side = SIDE_NULL;
	else if (keyvalues[0] == INLINE_EMPTY)
		side = SIDE_MARKER;
	if (side >= 0)
	{
		found = ks->map.side_used[side];
		ks->map.side_used[side] = true;
		return found;
	}
	return ks_inline_find_or_insert(ks, keyvalues[0], true, &pos, &full);
}

bool
keyed_state_holds(KeyedState *ks, Datum *keyvalues, bool *keynulls)
{
	StateKey	nokey = {0};
	uint32		hash;

	if (ks->is_inline)
	{
		uint64		pos;
		bool		full;

		if (ks->keys->ncols == 0)
			return ks->map.side_used[SIDE_GLOBAL];
		if (keynulls[0])
			return ks->map.side_used[SIDE_NULL];
		if (keyvalues[0] == INLINE_EMPTY)
			return ks->map.side_used[SIDE_MARKER];
		return ks_inline_find_or_insert(ks, keyvalues[0], false, &pos, &full);
	}
	key_probe_values(ks->keys, keyvalues, keynulls);
	hash = key_hash_values(ks->keys, keyvalues, keynulls);
	current_probe = ks->keys;
	return keyed_lookup_hash(ks->hash, nokey, hash) != NULL;
}

void
keyed_state_begin_load(KeyedState *ks)
{
	Assert(!ks->in_load && ks->nloading == 0);
	ks->in_load = true;
}

StateRecord *
keyed_state_load_key(KeyedState *ks, Datum *keyvalues, bool *keynulls, bool *held)
{
	uint32		hash;
	StateEntry *entry;
	StateKey	nokey = {0};
	bool		found;
	StateRecord *rec;

	Assert(ks->in_load);
	if (ks->is_inline)
	{
		/* a key is one row: found means held before */
		*held = inline_restore(ks, keyvalues, keynulls);
		return NULL;
	}
	key_probe_values(ks->keys, keyvalues, keynulls);
	hash = key_hash_values(ks->keys, keyvalues, keynulls);
	current_probe = ks->keys;
	entry = keyed_insert_hash(ks->hash, nokey, hash, &found);
	if (found)
	{
		rec = entry->key.rec;
		*held = (rec->flags & RECORD_LOADING) == 0;
		return rec;
	}
	rec = ks_record_create(ks, ks->keys);
	entry->key.rec = rec;
	rec->flags |= RECORD_LOADING | RECORD_USED;
	if (ks->nloading >= ks->maxloading)
		ks->loading = ks_grow_array(ks, ks->loading, &ks->maxloading,
								 sizeof(StateRecord *), 256);
	ks->loading[ks->nloading++] = rec;
	*held = false;
	return rec;
}

StateRecord **
keyed_state_loading(KeyedState *ks, int *n)
{
	Assert(ks->in_load);
	*n = ks->nloading;
	return ks->loading;
}

void
keyed_state_end_load(KeyedState *ks)
{
	int			i;

	Assert(ks->in_load);
	for (i = 0; i < ks->nloading; i++)
		ks->loading[i]->flags &= ~RECORD_LOADING;
	ks->nloading = 0;
	ks->in_load = false;
}

void
keyed_state_track_use(KeyedState *ks)
{
	if (ks->is_inline && ks->map.hits == NULL)
		ks->map.hits = MemoryContextAllocExtended(ks->cxt, ks->map.mask + 1,
												  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

void
keyed_state_clear_used(KeyedState *ks)
{
	keyed_iterator it;
	StateEntry *entry;

	Assert(!ks->is_inline);
	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		entry->key.rec->flags &= ~RECORD_USED;
}

List *
keyed_state_unused(KeyedState *ks)
{
	keyed_iterator it;
	StateEntry *entry;
	List	   *unused = NIL;

	Assert(!ks->is_inline);
	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
		if (!(entry->key.rec->flags & RECORD_USED))
			unused = lappend(unused, entry->key.rec);
	return unused;
}

/* records always mark their use; the inline map once asked to */
bool
keyed_state_tracks_use(KeyedState *ks)
{
	return !ks->is_inline || ks->map.hits != NULL;
}

bool
keyed_state_mark_used(KeyedState *ks, Datum *keyvalues, bool *keynulls)
{
	StateKey	nokey = {0};
	StateEntry *entry;
	uint32		hash;

	if (ks->is_inline)
		return keyed_state_holds(ks, keyvalues, keynulls);	/* marks its slot */
	key_probe_values(ks->keys, keyvalues, keynulls);
	hash = key_hash_values(ks->keys, keyvalues, keynulls);
	current_probe = ks->keys;
	entry = keyed_lookup_hash(ks->hash, nokey, hash);
	if (entry == NULL)
		return false;
	entry->key.rec->flags |= RECORD_USED;
	return true;
}

/* A key's namespaces leave memory; their tuples stay (no dead TIDs). */
static void
release_namespaces(KeyedState *ks, StateRecord *rec)
{
	int			space;

	for (space = 0; space < ks->nspaces; space++)
	{
		NsSet	   *set = ks_ns_set(ks, rec, space);
		int			i;

		if (set->tail < 0)
			elog(ERROR, "a durable namespace set is dense");	/* ns_grid is 0 */
		for (i = 0; i < set->n; i++)
			ks_ns_value_free(ks, space, set->entries[i].value);
		if (set->entries != NULL)
			pfree(set->entries - set->off);
		set->entries = NULL;
		set->n = set->cap = set->off = set->tail = 0;
	}
}

/*
 * The inline map again, with only the slots looked up since the last pass,
 * in an array sized for them: the memory of the keys evicted goes back.
 */
static uint64
inline_evict(KeyedState *ks)
{
	InlineMap  *map = &ks->map;
	uint64		old_size = map->mask + 1;
	uint64		size = INLINE_MIN_SIZE;
	uint64		kept = 0;
	char	   *old_slots = map->slots;
	void	   *old_alloc = map->alloc;
	char	   *old_cold = map->cold;
	uint8	   *old_hits = map->hits;
	uint64		before = map->used;
	uint64		i;

	Assert(old_hits != NULL && ks->nnew == 0);
	for (i = 0; i < old_size; i++)
		if (old_hits[i] && SLOT_KEY(map, i) != INLINE_EMPTY)
			kept++;
	/* at most 3/4 full, as the map grows */
	while ((kept + 1) * 4 > size * 3)
		size *= 2;
	ks_inline_alloc(ks, size);
	for (i = 0; i < old_size; i++)
	{
		char	   *slot = old_slots + i * map->stride;
		Datum		key = *(Datum *) slot;
		uint64		j;

		if (key == INLINE_EMPTY || !old_hits[i])
			continue;
		for (j = mix64(key) & map->mask; SLOT_KEY(map, j) != INLINE_EMPTY;
			 j = (j + 1) & map->mask)
			;
		memcpy(SLOT(map, j), slot, map->stride);
		if (ks->cold_size > 0)
			memcpy(SLOT_COLD(ks, j), old_cold + i * ks->cold_size, ks->cold_size);
		map->used++;
	}
	pfree(old_alloc);
	if (old_cold)
		pfree(old_cold);
	pfree(old_hits);
	ks->full = false;
	ks->budget_skip = 0;
	return before - map->used;
}

uint64
keyed_state_evict(KeyedState *ks, KeyedEvictFn release, void *arg)
{
	keyed_iterator it;
	StateEntry *entry;
	List	   *evict = NIL;
	ListCell   *lc;
	uint64		n = 0;

	Assert(ks->nchanged == 0 && ks->nchanged_ns == 0 && ks->ndead == 0);
	Assert(!ks->in_load);
	if (ks->is_inline)
		/* nothing says which keys were used before tracking began */
		return keyed_state_tracks_use(ks) ? inline_evict(ks) : 0;
	keyed_start_iterate(ks->hash, &it);
	while ((entry = keyed_iterate(ks->hash, &it)) != NULL)
	{
		StateRecord *rec = entry->key.rec;
		StateRef	ref;

		Assert(!(rec->flags & (RECORD_CHANGED | RECORD_LISTED | RECORD_REMOVED)));
		if (rec->flags & RECORD_USED)
		{
			rec->flags &= ~RECORD_USED;
			continue;
		}
		ks_set_record_ref(ks, rec, &ref);
		if (!release(&ref, arg))
			continue;
		evict = lappend(evict, rec);
	}
	foreach(lc, evict)
	{
		StateRecord *rec = (StateRecord *) lfirst(lc);

		ks_unlink_record(ks, rec);
		/* its tuples stay: removed from memory only */
		release_namespaces(ks, rec);
		ks_note_removed(ks, rec, RECORD_REMOVED | RECORD_EVICTED);
		n++;
	}
	list_free(evict);
	ks->full = false;
	ks->budget_skip = 0;
	return n;
}

void
keyed_state_restore_record(KeyedState *ks, StateRecord *rec, PtfTime expires_at,
						   ItemPointer tid)
{
	if (rec->flags & RECORD_STORED)
		ptf_state_corrupted("the same key twice");
	rec->expires_at = expires_at;
	rec->tid = *tid;
	rec->flags |= RECORD_STORED;
}

void *
keyed_state_restore_ns(KeyedState *ks, StateRecord *rec, int space, int64 ns,
					   ItemPointer tid)
{
	NsEntry    *e;

	if (space < 0 || space >= ks->nspaces)
		ptf_state_corrupted("namespace space %d of %d", space, ks->nspaces);
	if (keyed_state_ns_find(ks, rec, space, ns) != NULL)
		ptf_state_corrupted("the same namespace of a key twice");
	e = ks_ns_insert(ks, rec, space, ns);
	e->tid = *tid;
	e->flags |= RECORD_STORED;
	return e->value;
}


StateRecord **
keyed_state_changed(KeyedState *ks, int *n)
{
	*n = ks->nchanged;
	return ks->changed;
}

ChangedNs *
keyed_state_changed_ns(KeyedState *ks, int *n)
{
	*n = ks->nchanged_ns;
	return ks->changed_ns;
}

bool
keyed_state_is_inline(KeyedState *ks)
{
	return ks->is_inline;
}

int
keyed_state_new_inline_keys(KeyedState *ks, Datum **values, bool **nulls)
{
	*values = ks->new_keys;
	*nulls = ks->new_nulls;
	return ks->nnew;
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
	for (i = 0; i < ks->nchanged_ns; i++)
	{
		NsEntry    *e = keyed_state_ns_entry(ks, ks->changed_ns[i].rec,
											 ks->changed_ns[i].space,
											 ks->changed_ns[i].ns);

		if (e != NULL)
			e->flags &= ~RECORD_LISTED;
	}
	ks->nchanged = 0;
	ks->nchanged_ns = 0;
	ks->ndead = 0;
	ks->nnew = 0;
}

void
ptf_state_corrupted(const char *fmt,...)
{
	char		what[256];
	va_list		args;

	va_start(args, fmt);
	vsnprintf(what, sizeof(what), fmt, args);
	va_end(args);
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("durable state is damaged: it holds %s", what),
			 errhint("A uid's state is kept in ordinary tables, and one changed by hand cannot be read: ptf.drop_state() forgets the uid's state, and its next call starts afresh.")));
}

