/*-------------------------------------------------------------------------
 *
 * kept.c
 *	  The cache of what a pipeline worker keeps between steps.
 *
 * A handful of entries (one per pipeline at most, of each kind), found by
 * name: a fixed array searched linearly is all it needs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "base/kept.h"

#define MAX_KEPT 128

static PtfKept *kept[MAX_KEPT];

PtfKept *
ptf_kept_find(PtfKeptKind kind, const char *name)
{
	int			i;

	for (i = 0; i < MAX_KEPT; i++)
		if (kept[i] != NULL && kept[i]->kind == kind && strcmp(kept[i]->name, name) == 0)
			return kept[i];
	return NULL;
}

void
ptf_kept_forget(PtfKept *k)
{
	int			i;

	for (i = 0; i < MAX_KEPT; i++)
		if (kept[i] == k)
			kept[i] = NULL;
	if (k->release)
		k->release(k);
	MemoryContextDelete(k->cxt);
	pfree(k->name);
	pfree(k);
}

PtfKept *
ptf_kept_new(PtfKeptKind kind, const char *name)
{
	PtfKept    *k = ptf_kept_find(kind, name);
	int			i;

	if (k != NULL)
		ptf_kept_forget(k);
	for (i = 0; i < MAX_KEPT && kept[i] != NULL; i++)
		;
	if (i == MAX_KEPT)
		return NULL;
	k = MemoryContextAllocZero(TopMemoryContext, sizeof(PtfKept));
	k->kind = kind;
	k->name = MemoryContextStrdup(TopMemoryContext, name);
	k->cxt = AllocSetContextCreate(TopMemoryContext, "ptf kept",
								   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(k->cxt, k->name);
	kept[i] = k;
	return k;
}

void
ptf_kept_retain(PtfKeptKind kind, List *names)
{
	int			i;

	for (i = 0; i < MAX_KEPT; i++)
	{
		ListCell   *lc;
		bool		wanted = false;

		if (kept[i] == NULL || kept[i]->kind != kind)
			continue;
		foreach(lc, names)
			if (strcmp(kept[i]->name, (char *) lfirst(lc)) == 0)
				wanted = true;
		if (!wanted)
			ptf_kept_forget(kept[i]);
	}
}
