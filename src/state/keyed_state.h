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
	/* value_size bytes of operator value, MAXALIGNed, then the packed key */
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
 * Memory implementation.  mem_limit 0: unbounded.  need_records: every key
 * gets a record even when it would hold nothing (durable state stores
 * them); otherwise records may be elided (keys-only mode).
 */
extern KeyedState *keyed_state_create(KeySpec *keys, Size value_size,
									  int64 ttl_us, Size mem_limit,
									  bool need_records, MemoryContext parent);
extern void keyed_state_destroy(KeyedState *ks);

extern StateRecord *keyed_state_lookup(KeyedState *ks, TupleTableSlot *row,
									   PtfTime now, bool create,
									   KeyedLookup *result);
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
extern void keyed_state_set_ttl(KeyedState *ks, int64 ttl_us);

typedef void (*StateRecordCallback) (StateRecord *rec, void *arg);
extern void keyed_state_foreach(KeyedState *ks, StateRecordCallback cb, void *arg);

/* For the durable implementation: restoring and enumerating changes. */
extern StateRecord *keyed_state_restore(KeyedState *ks, Datum *keyvalues,
										bool *keynulls, PtfTime expires_at,
										ItemPointer tid);
extern void keyed_state_record_key(KeyedState *ks, StateRecord *rec,
								   Datum *values, bool *nulls);
extern StateRecord **keyed_state_changed(KeyedState *ks, int *n);
extern ItemPointer keyed_state_dead_tids(KeyedState *ks, int *n);
extern void keyed_state_clear_changes(KeyedState *ks);

#endif							/* PTF_KEYED_STATE_H */
