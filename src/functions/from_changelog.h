/*-------------------------------------------------------------------------
 *
 * from_changelog.h
 *	  ptf.from_changelog() with its changes given to a sink as they come,
 *	  not returned: apply_changelog over a bare call of it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_FROM_CHANGELOG_H
#define PTF_FUNCTIONS_FROM_CHANGELOG_H

#include "fmgr.h"

#include "base/base.h"

/*
 * Run the call whose arguments fcinfo holds (its flinfo's fn_expr says
 * their types), each change to put(put_arg, kind, row, NULL); checks,
 * notices and statistics as the SQL call's, but for one thing:
 * retraction_columns, when not NULL, are the columns put reads of a
 * retraction (per column of rowtype, the target's type): the rest of its
 * jsonb image is not read (NULL; a value there that would not convert is
 * no error).
 */
extern void from_changelog_run_into(FunctionCallInfo fcinfo, PtfRowSink put, void *put_arg,
									const bool *retraction_columns, Oid rowtype);

/* the C function behind ptf.from_changelog, to recognize its calls */
extern PGDLLEXPORT Datum ptf_from_changelog(PG_FUNCTION_ARGS);

#endif							/* PTF_FUNCTIONS_FROM_CHANGELOG_H */
