/*-------------------------------------------------------------------------
 *
 * kept.h
 *	  What a pipeline worker keeps between its steps: each uid's operator
 *	  with its state, each stream's decoding context.  One cache for both,
 *	  so that the worker lets go of what its pipelines no longer need in one
 *	  place.
 *
 * An entry is a name (a uid, a slot), a memory context holding the kept
 * object, and a release callback run before the context goes (a decoding
 * context has a file descriptor to close).  Whether a kept object may be
 * used again is for its user to decide; the cache only keeps it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_KEPT_H
#define PTF_KEPT_H

#include "nodes/pg_list.h"

typedef enum PtfKeptKind
{
	PTF_KEPT_OPERATOR,			/* named by uid */
	PTF_KEPT_DECODER			/* named by slot */
} PtfKeptKind;

typedef struct PtfKept PtfKept;
typedef struct PtfKeptSet PtfKeptSet;

typedef void (*PtfKeptRelease) (PtfKept *k);

struct PtfKept
{
	PtfKeptKind kind;
	char	   *name;
	MemoryContext cxt;			/* holds the object; deleted with the entry */
	PtfKeptRelease release;		/* or NULL */
	void	   *data;			/* the user's, allocated in cxt */
};

/* An empty cache, living in parent (the worker's, for its life). */
extern PtfKeptSet *ptf_kept_set_create(MemoryContext parent);

/* the entry of (kind, name), or NULL (also when set is NULL: nothing kept) */
extern PtfKept *ptf_kept_find(PtfKeptSet *set, PtfKeptKind kind, const char *name);

/*
 * A new entry for (kind, name), replacing any other; NULL when the cache
 * is full or there is none (the caller then keeps nothing).
 */
extern PtfKept *ptf_kept_new(PtfKeptSet *set, PtfKeptKind kind, const char *name);

extern void ptf_kept_forget(PtfKeptSet *set, PtfKept *k);

/* Forget the entries of kind whose names are not in names (char *). */
extern void ptf_kept_retain(PtfKeptSet *set, PtfKeptKind kind, List *names);

#endif							/* PTF_KEPT_H */
