/*-------------------------------------------------------------------------
 *
 * rowkind.c
 *	  Row kinds by name, and a row that knows nothing of its origin.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"

#include "base/base.h"

const PtfRowMeta ptf_no_meta = {InvalidXLogRecPtr, 0, InvalidTransactionId, false, false};


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
