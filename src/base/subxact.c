/*-------------------------------------------------------------------------
 *
 * subxact.c
 *	  A piece of work in a subtransaction of its own, as PL/pgSQL runs an
 *	  exception block: what it did is kept when it succeeds, undone when
 *	  it fails, and the caller decides what the error means.
 *
 * Used where a failure is expected and handled (a batch applied again in
 * order after a unique violation) or must not fail what already cannot be
 * undone (clean-up after DROP DATABASE).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "base/base.h"

ErrorData *
ptf_try_in_subtransaction(void (*work) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	/* the work runs, and its results stay, in the caller's memory */
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		work(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}
