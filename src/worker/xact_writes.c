/*-------------------------------------------------------------------------
 *
 * xact_writes.c
 *	  Did the current transaction write a table?  Read from the backend's
 *	  pending statistics entries, which know it for free (see wake.c for
 *	  why this way).
 *
 * This is the one place that reads PostgreSQL's internal statistics
 * layout (utils/pgstat_internal.h, PostgreSQL 15's): a pending relation
 * entry has a "trans" record exactly while a live (sub)transaction of this
 * backend wrote the table.  The layout is not an API and may move in any
 * major release, so this file builds only against PostgreSQL 15, and
 * ptf._xact_wrote_table() lets a regression test (sql/xact_writes.sql)
 * check the answer on the server it runs against.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/pgstat_internal.h"

#include "worker/wake.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 160000
#error "xact_writes.c reads PostgreSQL 15's pending statistics entries: check utils/pgstat_internal.h of this version"
#endif

PG_FUNCTION_INFO_V1(ptf_xact_wrote_table_sql);

bool
ptf_xact_wrote_table(Oid relid, bool *known)
{
	PgStat_EntryRef *ref;

	*known = OidIsValid(relid) && pgstat_track_counts;
	if (!*known)
		return true;
	ref = pgstat_fetch_pending_entry(PGSTAT_KIND_RELATION, MyDatabaseId, relid);
	return ref != NULL && ((PgStat_TableStatus *) ref->pending)->trans != NULL;
}

/* ptf._xact_wrote_table(regclass): the same, NULL when it cannot be known */
Datum
ptf_xact_wrote_table_sql(PG_FUNCTION_ARGS)
{
	bool		known;
	bool		wrote = ptf_xact_wrote_table(PG_GETARG_OID(0), &known);

	if (!known)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(wrote);
}
