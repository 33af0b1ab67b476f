/*-------------------------------------------------------------------------
 *
 * keyed_state.h
 *	  The one keyed-state interface every operator talks to.
 *
 * A KeyedState maps a partition key to a record: a fixed-size value area
 * the operator owns (a hot part read for most rows, a cold part read
 * rarely), a processing-time expiry (state TTL), and the bookkeeping that
 * lets durable state write back only what changed.  Records never move,
 * so operators and timers may point at them; a removed record stays in
 * memory, flagged RECORD_REMOVED, until the state is destroyed.
 *
 * Namespaces.  A key may also hold values in namespaces, as Flink's keyed
 * state does: per key, up to KEYED_MAX_SPACES ordered sets of (int64
 * namespace, value), each value of a size the operator declares for its
 * space -- a window aggregate keeps one accumulator per (key, slice end),
 * a temporal join one version per (key, version time) and its buffered
 * probe rows per (key, probe time).  Namespaces come and go freely once
 * their key is in memory: only a new key is subject to the memory budget,
 * so a key's namespaces are never split between memory and a spill file.
 *
 * Keys are looked up with the key columns of the row's own type (a
 * KeySpec per input: the probe and build sides of a join have their key
 * columns at other positions, of the same types); the state packs keys in
 * the layout of its own KeySpec, which types alone determine.
 *
 * Two layouts share this interface: records in a hash table, and, when
 * nothing needs records (no TTL, no namespaces, values that may move, a
 * single pass-by-value key compared bitwise), an inline array of (key,
 * hot value) slots (keyed_state.c says why).  Memory state may be bounded:
 * a lookup that would need a new key when the budget is spent answers
 * KS_FULL and the caller spills the row.  Durable state (state/state_io.c)
 * loads records into memory and writes the changes back.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_KEYED_STATE_H
#define PTF_KEYED_STATE_H

#include "executor/tuptable.h"
#include "nodes/pg_list.h"
#include "storage/itemptr.h"

#include "base/base.h"
#include "state/key.h"

typedef struct StateRecord
{
	PtfTime		expires_at;		/* PTF_TIME_MAX: never */
	ItemPointerData tid;		/* durable: the tuple storing it, if any */
	uint8		flags;
	uint8		pad;			/* size class: MAXALIGN units, 0: none */
	/* the operator's value (hot part, cold part), namespaces, packed key */
} StateRecord;

#define RECORD_STORED		0x01	/* has a tuple (tid valid) */
#define RECORD_CHANGED		0x02	/* differs from its tuple, or new */
#define RECORD_LISTED		0x04	/* on the changed list */
#define RECORD_REMOVED		0x08	/* deleted from the hash table */
#define RECORD_KEY_NULLS	0x10	/* packed key has a null bitmap */
#define RECORD_LOADING		0x20	/* made by the load under way */
#define RECORD_USED			0x40	/* looked up since the last eviction pass */
#define RECORD_EVICTED		0x80	/* (with RECORD_REMOVED) still stored */

#define STATE_RECORD_VALUE(rec) ((void *) ((char *) (rec) + sizeof(StateRecord)))

#define KEYED_MAX_SPACES	4

/* One namespaced value of a key. */
typedef struct NsEntry
{
	int64		ns;
	void	   *value;			/* ns_value_size bytes of its space; never moves */
	ItemPointerData tid;		/* durable: the tuple storing it, if any */
	uint16		flags;			/* RECORD_STORED, RECORD_LISTED */
} NsEntry;

typedef enum KeyedLookup
{
	KS_FOUND,					/* a live record for the key */
	KS_CREATED,					/* new record (or an expired one reborn) */
	KS_ABSENT,					/* none, and create was false */
	KS_FULL						/* none, and the memory budget is spent */
} KeyedLookup;

typedef struct KeyedState KeyedState;

/*
 * What a lookup gives: the key's record and its value, in two parts: the
 * hot part, read for most rows, and the cold part, read rarely.  The
 * inline layout keeps the hot part next to the key and the cold part
 * apart, so most lookups touch one small array.
 */
typedef struct StateRef
{
	StateRecord *rec;			/* for touch, pin and mark_changed */
	void	   *value;			/* value_size bytes, zeroed when created */
	void	   *cold;			/* cold_size bytes, zeroed when created */
} StateRef;

/* KeyedStateSpec flags */
#define KEYED_STATE_DURABLE	0x01	/* changes are written back (state/state_io.c) */
#define KEYED_STATE_STABLE	0x02	/* values must not move (pointed at) */
#define KEYED_STATE_REMOVABLE 0x04	/* keys are removed (keyed_state_remove) */

typedef struct KeyedStateSpec
{
	KeySpec    *keys;			/* the key columns: their types pack the key */
	Size		hot;			/* value parts per key */
	Size		cold;
	int			nspaces;		/* namespaces per key, 0..KEYED_MAX_SPACES */
	Size		ns_value_size[KEYED_MAX_SPACES];

	/*
	 * The namespaces of a space lie on a grid of this step (slice ends): its
	 * sets may be kept dense, one entry per grid point between the first
	 * and the last, found by arithmetic instead of a search.  0: no grid.
	 * Honoured by states that are not durable.
	 */
	int64		ns_grid[KEYED_MAX_SPACES];
	int64		ttl_us;			/* 0: keep forever */
	Size		mem_limit;		/* 0: unbounded */
	uint64		expected_keys;	/* sized for this many keys at once; 0: grows */
	int			flags;
} KeyedStateSpec;

extern KeyedState *keyed_state_create(const KeyedStateSpec *spec, MemoryContext parent);
extern void keyed_state_destroy(KeyedState *ks);

/* probe: the key columns of row's type (same types as the state's) */
extern KeyedLookup keyed_state_lookup(KeyedState *ks, KeySpec *probe,
									  TupleTableSlot *row, PtfTime now,
									  bool create, StateRef *ref);
extern KeyedLookup keyed_state_lookup_prefetched(KeyedState *ks, KeySpec *probe,
												 TupleTableSlot *row, PtfTime now,
												 bool create, const uint64 *prefetched,
												 StateRef *ref);
extern bool keyed_state_can_prefetch(KeyedState *ks);

/*
 * staged prefetch of a lookup and of namespace ns of space, for batches;
 * it takes the first KEYED_PREFETCH_WORDS words of a row's scratch
 */
#define KEYED_PREFETCH_STAGES 5
#define KEYED_PREFETCH_WORDS 3
extern void keyed_state_prefetch_stage(KeyedState *ks, KeySpec *probe, TupleTableSlot *row,
									   int stage, int space, int64 ns, uint64 *scratch);
/* stages after the first over n rows, their ns in word ns_word of their scratch */
#define KEYED_PREFETCH_NO_NS	PG_INT64_MIN	/* a row with no ns to ask for */
extern void keyed_state_prefetch_batch(KeyedState *ks, int stage, int space, int ns_word,
									   uint64 *const *scratch, int n);
extern void *keyed_state_prefetch_ns_value(KeyedState *ks, const uint64 *scratch, int space,
										   int64 ns);
extern void keyed_state_prefetch_batch_values(KeyedState *ks, int space, int ns_word,
											  uint64 *const *scratch, int n,
											  void (*ask) (void *arg, void *value),
											  void *arg);
extern void *keyed_state_prefetch_ns_floor(KeyedState *ks, uint64 *scratch, int space,
										   int64 ns);
extern int	keyed_state_ns_floor_prefetched(KeyedState *ks, StateRecord *rec, int space,
											int64 ns, const uint64 *prefetched);
extern void *keyed_state_ns_get_prefetched(KeyedState *ks, StateRecord *rec, int space,
										   int64 ns, const uint64 *prefetched, bool *created);
extern void keyed_state_prefetch(KeyedState *ks, KeySpec *probe, TupleTableSlot *row);
extern bool keyed_state_prefetch_peek(KeyedState *ks, KeySpec *probe, TupleTableSlot *row,
									  void **value, void **cold);
extern void keyed_state_touch(KeyedState *ks, StateRecord *rec, PtfTime now);
extern void keyed_state_pin(KeyedState *ks, StateRecord *rec);
extern void keyed_state_mark_changed(KeyedState *ks, StateRecord *rec);
extern void keyed_state_remove(KeyedState *ks, StateRecord *rec);
extern void keyed_state_sweep(KeyedState *ks, PtfTime now);

/* ---- namespaces of a key (records layout only) ---- */

/* the value of (space, ns), or NULL */
extern void *keyed_state_ns_find(KeyedState *ks, StateRecord *rec, int space, int64 ns);

/* the value of (space, ns), created (zeroed) if absent: never refused */
extern void *keyed_state_ns_get(KeyedState *ks, StateRecord *rec, int space, int64 ns,
								bool *created);
extern void keyed_state_ns_remove(KeyedState *ks, StateRecord *rec, int space, int64 ns);
extern void keyed_state_ns_mark_changed(KeyedState *ks, StateRecord *rec, int space,
										int64 ns);

/*
 * The namespaces of a space in ascending order: i in [0, count).  A space
 * on a grid (KeyedStateSpec.ns_grid) may hold holes between them: entries
 * whose value is NULL, counted, with the ns of their grid point.  The first
 * and the last entry are never holes; anything that walks positions skips
 * the holes.
 */
extern int	keyed_state_ns_count(KeyedState *ks, StateRecord *rec, int space);
extern void *keyed_state_ns_at(KeyedState *ks, StateRecord *rec, int space, int i,
							   int64 *ns);

/*
 * The space's entries in ascending order, *n of them, read in place: for a
 * loop over them (a window's slices), which keyed_state_ns_at would settle
 * and bound-check once per entry.  Valid until the space changes.
 */
extern const NsEntry *keyed_state_ns_entries(KeyedState *ks, StateRecord *rec, int space,
											 int *n);

/* the position of the first namespace >= ns (count when none) */
extern int	keyed_state_ns_lower_bound(KeyedState *ks, StateRecord *rec, int space,
									   int64 ns);

/* memory the state holds, including what operators allocate in its context */
extern MemoryContext keyed_state_context(KeyedState *ks);
/* the block size for memory kept in that context (a share of the budget) */
extern Size keyed_state_block_size(KeyedState *ks);
extern Size keyed_state_memory(KeyedState *ks);
/* the bytes of its lookup table (what a lookup touches at random) */
extern Size keyed_state_table_bytes(KeyedState *ks);
/* the bytes its lookup table would take at once if nnew keys came (0: none) */
extern Size keyed_state_growth_bytes(KeyedState *ks, uint64 nnew);
extern uint64 keyed_state_count(KeyedState *ks);
extern KeySpec *keyed_state_keys(KeyedState *ks);
extern int64 keyed_state_ttl(KeyedState *ks);
extern int	keyed_state_nspaces(KeyedState *ks);

typedef void (*StateRefCallback) (StateRef *ref, void *arg);
extern void keyed_state_foreach(KeyedState *ks, StateRefCallback cb, void *arg);

/* the value parts of a record (records layout), and its key's values */
extern void keyed_state_record_ref(KeyedState *ks, StateRecord *rec, StateRef *ref);
extern void keyed_state_record_key(KeyedState *ks, StateRecord *rec,
								   Datum *values, bool *nulls);

/*
 * Eviction (keyed_state_durable.c says when): the keys not used since the
 * last pass go, unless release (the operator's) says one must stay and
 * lets go of what its value holds.
 */
typedef bool (*KeyedEvictFn) (StateRef *ref, void *arg);	/* false: keep it */
extern uint64 keyed_state_evict(KeyedState *ks, KeyedEvictFn release, void *arg);

/* records layout: every mark cleared; then the records not looked up since */
extern void keyed_state_clear_used(KeyedState *ks);
extern List *keyed_state_unused(KeyedState *ks);

/*
 * Removed records are kept until nothing points at them; when the changed
 * lists are written back (durable) and the operator forgot its timers of
 * removed records, keyed_state_reclaim() recycles their memory for new
 * keys.  A long-running pipeline's state then does not grow with keys that
 * come and go.
 */
extern int	keyed_state_removed_count(KeyedState *ks);
extern bool keyed_state_can_reclaim(KeyedState *ks);
extern void keyed_state_reclaim(KeyedState *ks);

/*
 * Durable state read back that cannot be what was written (a state table
 * changed by hand): 22000-class ERRCODE_DATA_CORRUPTED, with the way out.
 * fmt says what it holds ("the same key twice").
 */
extern void ptf_state_corrupted(const char *fmt,...) pg_attribute_printf(1, 2) pg_attribute_noreturn();

#endif							/* PTF_KEYED_STATE_H */
