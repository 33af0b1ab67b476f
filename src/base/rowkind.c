/*-------------------------------------------------------------------------
 *
 * rowkind.c
 *	  Row kinds by name, a row that knows nothing of its origin, and the
 *	  error context that names a change's transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xlogdefs.h"

#include "base/base.h"

const PtfRowMeta ptf_no_meta = {InvalidXLogRecPtr, 0, InvalidTransactionId, false, false,
InvalidXLogRecPtr};

static bool
names_change(const PtfChangeContext *cc)
{
	return cc->meta != NULL && !XLogRecPtrIsInvalid(cc->meta->final_lsn);
}

static void
change_context_callback(void *arg)
{
	PtfChangeContext *cc = (PtfChangeContext *) arg;
	ErrorContextCallback *e;

	if (!names_change(cc))
		return;
	/* an inner one that names a change is the change at fault */
	for (e = error_context_stack; e != NULL && e != &cc->cb; e = e->previous)
		if (e->callback == change_context_callback &&
			names_change((PtfChangeContext *) e->arg))
			return;
	errcontext(PTF_CHANGE_CONTEXT_PREFIX "%u, finished at %X/%X", cc->meta->xid,
			   LSN_FORMAT_ARGS(cc->meta->final_lsn));
}

void
ptf_change_context_push(PtfChangeContext *cc, const PtfRowMeta *meta)
{
	cc->meta = meta;
	ptf_error_context_push(&cc->cb, change_context_callback, cc);
}

void
ptf_change_context_pop(PtfChangeContext *cc)
{
	ptf_error_context_pop(&cc->cb);
}


static const char *const rowkind_short[ROWKIND_COUNT] = {"+I", "-U", "+U", "-D"};
static const char *const rowkind_long[ROWKIND_COUNT] = {
	"INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"
};

const char *
rowkind_short_name(RowKind kind)
{
	Assert(kind >= 0 && kind < ROWKIND_COUNT);
	return rowkind_short[kind];
}

const char *
rowkind_long_name(RowKind kind)
{
	Assert(kind >= 0 && kind < ROWKIND_COUNT);
	return rowkind_long[kind];
}

bool
rowkind_parse(const char *s, RowKind *kind)
{
	int			i;

	for (i = 0; i < ROWKIND_COUNT; i++)
	{
		if (strcmp(s, rowkind_short[i]) == 0 || strcmp(s, rowkind_long[i]) == 0)
		{
			*kind = (RowKind) i;
			return true;
		}
	}
	return false;
}
