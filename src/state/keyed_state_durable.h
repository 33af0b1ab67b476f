/*-------------------------------------------------------------------------
 *
 * keyed_state_durable.h
 *	  The half of keyed state that durable state uses (keyed_state_durable.c):
 *	  keys restored and loaded from a state table, evicted by a clock, and
 *	  the changes to write back.  Operators do not use it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_KEYED_STATE_DURABLE_H
#define PTF_KEYED_STATE_DURABLE_H

#include "state/keyed_state.h"

/*
 * For the durable implementation: restoring and enumerating changes.
 * restore_key returns NULL in the inline layout, which has no records;
 * otherwise the key's record, created if need be (a namespace row may be
 * read before its key's row).
 */
extern StateRecord *keyed_state_restore_key(KeyedState *ks, Datum *keyvalues,
											bool *keynulls);
extern void keyed_state_restore_record(KeyedState *ks, StateRecord *rec,
									   PtfTime expires_at, ItemPointer tid);
extern void *keyed_state_restore_ns(KeyedState *ks, StateRecord *rec, int space,
									int64 ns, ItemPointer tid);

/*
 * Loading more keys into state already in use (durable state read a batch
 * at a time): a key the state holds already -- changed, expired or not --
 * is newer in memory than in its table and must not be restored again;
 * a removed one has its TID among the dead ones.  Between begin_load and
 * end_load, load_key says whether the key was held before the load
 * (*held: skip the row) and otherwise gives its record as restore_key.
 */
extern bool keyed_state_holds(KeyedState *ks, Datum *keyvalues, bool *keynulls);
extern void keyed_state_begin_load(KeyedState *ks);
extern StateRecord *keyed_state_load_key(KeyedState *ks, Datum *keyvalues,
										 bool *keynulls, bool *held);
/* the records the load under way made (before end_load) */
extern StateRecord **keyed_state_loading(KeyedState *ks, int *n);
extern void keyed_state_end_load(KeyedState *ks);

/*
 * Eviction of durable state read a key at a time (a clock, the classic
 * approximation of least recently used): once tracking is on, every lookup
 * marks its key used; an eviction pass drops the keys not used since the
 * pass before -- and clears the mark of the others -- unless release says
 * the operator needs one in memory.  Only state without changes to write
 * back is evicted: its keys are all in its table, and dropping them
 * deletes nothing; their timers are found by time in the table again.  Dropped records
 * wait for keyed_state_reclaim like removed ones (forget their timers
 * first); their namespaces go with them, after release has let go of
 * what their values hold.  mark_used: the key of a row about to be
 * processed stays.
 */
extern void keyed_state_track_use(KeyedState *ks);
extern bool keyed_state_tracks_use(KeyedState *ks);
extern bool keyed_state_mark_used(KeyedState *ks, Datum *keyvalues, bool *keynulls);

typedef struct ChangedNs
{
	StateRecord *rec;
	int			space;
	int64		ns;
} ChangedNs;

extern StateRecord **keyed_state_changed(KeyedState *ks, int *n);
extern ChangedNs *keyed_state_changed_ns(KeyedState *ks, int *n);
/* the entry of a changed namespace, or NULL when it was removed since */
extern NsEntry *keyed_state_ns_entry(KeyedState *ks, StateRecord *rec, int space,
									 int64 ns);
extern bool keyed_state_is_inline(KeyedState *ks);
extern int	keyed_state_new_inline_keys(KeyedState *ks, Datum **values, bool **nulls);
extern ItemPointer keyed_state_dead_tids(KeyedState *ks, int *n);
extern void keyed_state_clear_changes(KeyedState *ks);


#endif							/* PTF_KEYED_STATE_DURABLE_H */
