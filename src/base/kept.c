/*-------------------------------------------------------------------------
 *
 * kept.c
 *	  The cache of what a pipeline worker keeps between steps.
 *
 * A handful of entries (one per pipeline at most, of each kind), found by
 * name: a fixed array searched linearly is all it needs.  The worker owns
 * the set and hands it to each step in the step's context (engine/step.h);
 * nothing else keeps anything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "base/kept.h"

#define MAX_KEPT 128

struct PtfKeptSet
{
	MemoryContext cxt;			/* where entries live */
	PtfKept    *kept[MAX_KEPT];
};

PtfKeptSet *
ptf_kept_set_create(MemoryContext parent)
{
	PtfKeptSet *set = MemoryContextAllocZero(parent, sizeof(PtfKeptSet));

	set->cxt = parent;
	return set;
}

PtfKept *
ptf_kept_find(PtfKeptSet *set, PtfKeptKind kind, const char *name)
{
	int			i;

	if (set == NULL)
		return NULL;
	for (i = 0; i < MAX_KEPT; i++)
	{
		PtfKept    *k = set->kept[i];

		if (k != NULL && k->kind == kind && strcmp(k->name, name) == 0)
			return k;
	}
	return NULL;
}

void
ptf_kept_forget(PtfKeptSet *set, PtfKept *k)
{
	int			i;

	for (i = 0; i < MAX_KEPT; i++)
		if (set->kept[i] == k)
			set->kept[i] = NULL;
	if (k->release)
		k->release(k);
	MemoryContextDelete(k->cxt);
	pfree(k->name);
	pfree(k);
}

PtfKept *
ptf_kept_new(PtfKeptSet *set, PtfKeptKind kind, const char *name)
{
	PtfKept    *k;
	int			i;

	if (set == NULL)
		return NULL;
	k = ptf_kept_find(set, kind, name);
	if (k != NULL)
		ptf_kept_forget(set, k);
	for (i = 0; i < MAX_KEPT && set->kept[i] != NULL; i++)
		;
	if (i == MAX_KEPT)
		return NULL;
	k = MemoryContextAllocZero(set->cxt, sizeof(PtfKept));
	k->kind = kind;
	k->name = MemoryContextStrdup(set->cxt, name);
	k->cxt = AllocSetContextCreate(set->cxt, "ptf kept", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(k->cxt, k->name);
	set->kept[i] = k;
	return k;
}

void
ptf_kept_retain(PtfKeptSet *set, PtfKeptKind kind, List *names)
{
	int			i;

	for (i = 0; i < MAX_KEPT; i++)
	{
		PtfKept    *k = set->kept[i];
		ListCell   *lc;
		bool		wanted = false;

		if (k == NULL || k->kind != kind)
			continue;
		foreach(lc, names)
			if (strcmp(k->name, (char *) lfirst(lc)) == 0)
				wanted = true;
		if (!wanted)
			ptf_kept_forget(set, k);
	}
}
