/*-------------------------------------------------------------------------
 *
 * keyed_state.h
 *	  The one keyed-state interface every operator talks to.
 *
 * A KeyedState maps a partition key to a record: a fixed-size value area
 * the operator owns, a processing-time expiry (state TTL), and the
 * bookkeeping that lets the durable implementation write back only what
 * changed.  Records never move, so operators may point at them.
 *
 * Two implementations share this interface: backend memory, for calls
 * without uid (optionally bounded: a lookup that would need a new key when
 * the memory budget is spent answers KS_FULL and the caller spills the
 * row), and durable, for calls with uid (state/durable.c loads records
 * into memory, keyed_state_commit() writes the changes back in the
 * caller's transaction).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_KEYED_STATE_H
#define PTF_KEYED_STATE_H

#include "executor/tuptable.h"
#include "storage/itemptr.h"

#include "ptf.h"
#include "state/key.h"

typedef struct StateRecord
{
	PtfTime		expires_at;		/* PTF_TIME_MAX: never */
	ItemPointerData tid;		/* durable: the tuple storing it, if any */
	uint8		flags;
	uint8		pad;
	/* the operator's value (hot part, cold part), then the packed key */
} StateRecord;

#define RECORD_STORED		0x01	/* has a tuple (tid valid) */
#define RECORD_CHANGED		0x02	/* differs from its tuple, or new */
#define RECORD_LISTED		0x04	/* on the changed list */
#define RECORD_REMOVED		0x08	/* deleted from the hash table */
#define RECORD_KEY_NULLS	0x10	/* packed key has a null bitmap */

#define STATE_RECORD_VALUE(rec) ((void *) ((char *) (rec) + sizeof(StateRecord)))

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

/* keyed_state_create flags */
#define KEYED_STATE_DURABLE	0x01	/* changes are written back (state/durable.c) */
#define KEYED_STATE_STABLE	0x02	/* values must not move (pointed at) */
#define KEYED_STATE_REMOVABLE 0x04	/* keys are removed (keyed_state_remove) */

/*
 * Memory implementation.  mem_limit 0: unbounded.  Without TTL, a single
 * pass-by-value key may be kept inline (values move as the table grows:
 * valid until the next lookup); durable state is inline only when keys
 * carry no value, so that the only change to write back is a new key.
 */
extern KeyedState *keyed_state_create(KeySpec *keys, Size value_size,
									  Size cold_size, int64 ttl_us,
									  Size mem_limit, int flags,
									  MemoryContext parent);
extern void keyed_state_destroy(KeyedState *ks);

extern KeyedLookup keyed_state_lookup(KeyedState *ks, TupleTableSlot *row,
									  PtfTime now, bool create, StateRef *ref);
extern bool keyed_state_can_prefetch(KeyedState *ks);
extern void keyed_state_prefetch(KeyedState *ks, TupleTableSlot *row);
extern void keyed_state_touch(KeyedState *ks, StateRecord *rec, PtfTime now);
extern void keyed_state_pin(KeyedState *ks, StateRecord *rec);
extern void keyed_state_mark_changed(KeyedState *ks, StateRecord *rec);
extern void keyed_state_remove(KeyedState *ks, StateRecord *rec);
extern void keyed_state_sweep(KeyedState *ks, PtfTime now);

/* memory the state holds, including what operators allocate in its context */
extern MemoryContext keyed_state_context(KeyedState *ks);
extern Size keyed_state_memory(KeyedState *ks);
extern uint64 keyed_state_count(KeyedState *ks);
extern KeySpec *keyed_state_keys(KeyedState *ks);
extern int64 keyed_state_ttl(KeyedState *ks);

typedef void (*StateRefCallback) (StateRef *ref, void *arg);
extern void keyed_state_foreach(KeyedState *ks, StateRefCallback cb, void *arg);

/*
 * For the durable implementation: restoring and enumerating changes.
 * restore returns NULL in the inline layout, which has no records.
 */
extern StateRecord *keyed_state_restore(KeyedState *ks, Datum *keyvalues,
										bool *keynulls, PtfTime expires_at,
										ItemPointer tid);
extern void keyed_state_record_key(KeyedState *ks, StateRecord *rec,
								   Datum *values, bool *nulls);
extern StateRecord **keyed_state_changed(KeyedState *ks, int *n);
extern bool keyed_state_is_inline(KeyedState *ks);
extern int	keyed_state_new_inline_keys(KeyedState *ks, Datum **values, bool **nulls);
extern ItemPointer keyed_state_dead_tids(KeyedState *ks, int *n);
extern void keyed_state_clear_changes(KeyedState *ks);

#endif							/* PTF_KEYED_STATE_H */
