/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Access to the extension's SQL catalogs as the extension's owner, the
 *	  extension's locks, and relation names for SQL text.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "base/ptf_time.h"
#include "catalog.h"

/* locktag_field4 of our locks: SQL's advisory locks use 1 and 2 */
#define PTF_LOCKTAG_KIND 0x5054

static Oid
extension_owner(void)
{
	Oid			nspid = get_namespace_oid("ptf", false);
	HeapTuple	tup;
	Oid			owner;

	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nspid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for schema ptf");
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Errors need no cleanup: aborting the (sub)transaction restores the user
 * id and security context.  Statements are schema-qualified and use
 * OPERATOR(pg_catalog.=), so the caller's search_path cannot redirect them.
 */
int
ptf_spi_exec_as_owner(const char *sql, int nargs, Oid *argtypes,
					  Datum *values, const char *nulls, int expected)
{
	Oid			save_userid;
	int			save_sec;
	int			rc;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(extension_owner(),
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	/* a parallel worker (engine/parallel.c) may only read, in its snapshot */
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, IsInParallelMode(), 0);
	SetUserIdAndSecContext(save_userid, save_sec);

	if (rc != expected)
		elog(ERROR, "internal statement failed (%s): %s",
			 SPI_result_code_string(rc), sql);
	return rc;
}

/*
 * pg_create_logical_replication_slot(name, 'deduplicate_keep_first'), as the
 * extension's owner, called directly rather than through SPI: finding its
 * start point decodes the commits of other sessions, and one that changed
 * the catalog is replayed in a subtransaction that leaves
 * CurrentResourceOwner at the top transaction's (PostgreSQL 15 restores it
 * in pg_replication_slot_advance, not here); a statement around the call
 * would then end under the wrong owner ("snapshot reference ... is not
 * owned by resource owner TopTransaction").  So the owner is restored here.
 */
void
ptf_create_logical_slot(const char *name)
{
	ResourceOwner owner = CurrentResourceOwner;
	Oid			save_userid;
	int			save_sec;
	NameData	slot;
	NameData	plugin;

	/* until the transaction ends: what refers to the slot is written by then */
	(void) ptf_lock_slot(name, true);
	namestrcpy(&slot, name);
	namestrcpy(&plugin, "deduplicate_keep_first");
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		(void) OidFunctionCall4(F_PG_CREATE_LOGICAL_REPLICATION_SLOT, NameGetDatum(&slot),
								NameGetDatum(&plugin), BoolGetDatum(false), BoolGetDatum(false));
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = owner;
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
}

void
ptf_check_sql_version(void)
{
	char	   *version;

	if (SPI_execute("SELECT extversion FROM pg_catalog.pg_extension "
					"WHERE extname OPERATOR(pg_catalog.=) 'deduplicate_keep_first'",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "extension deduplicate_keep_first is not installed");
	version = ptf_spi_text(1);
	if (strcmp(version, PTF_SQL_VERSION) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension deduplicate_keep_first is at version %s, and its library needs version %s",
						version, PTF_SQL_VERSION),
				 errhint("ALTER EXTENSION deduplicate_keep_first UPDATE TO '%s' updates its SQL objects; state made by %s is kept.",
						 PTF_SQL_VERSION, version)));
}

bool
ptf_spi_isnull(int col)
{
	bool		isnull;

	Assert(SPI_processed >= 1);
	(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return isnull;
}

Datum
ptf_spi_datum(int col)
{
	bool		isnull;

	Assert(SPI_processed >= 1);
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
}

char *
ptf_spi_text(int col)
{
	bool		isnull;
	Datum		d;

	Assert(SPI_processed >= 1);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return isnull ? NULL : TextDatumGetCString(d);
}

int64
ptf_spi_int64(int col, int64 if_null)
{
	bool		isnull;
	Datum		d;

	Assert(SPI_processed >= 1);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return isnull ? if_null : DatumGetInt64(d);
}

int64
ptf_declared_watermark_delay(Oid relid, const char *on_time)
{
	Oid			argtypes[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2];

	if (!OidIsValid(relid))
		return -1;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(on_time);
	ptf_spi_exec_as_owner("SELECT delay FROM ptf.watermarks "
						  "WHERE relid OPERATOR(pg_catalog.=) $1 "
						  "AND on_time OPERATOR(pg_catalog.=) $2",
						  2, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0 || ptf_spi_isnull(1))
		return -1;
	return ptf_interval_to_us(ptf_spi_datum(1), "declared watermark delay");
}

char *
ptf_relation_sql_name(Oid relid)
{
	char	   *relname = get_rel_name(relid);

	if (relname == NULL)
		elog(ERROR, "cache lookup failed for relation %u", relid);
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  relname);
}

/*
 * A uid's lock is one of the advisory tags of ptf_lock(), field2 holding
 * the upper half of a 64-bit hash of the name with its top bit set -- no
 * other class comes near (they are small numbers) -- and field3 the lower
 * half.  A 32-bit hash (as it was) let an unprivileged role find in
 * seconds a uid of its own that collides with another role's, and, by
 * holding it in an open transaction, stall that role's calls and
 * pipeline: the owner check comes before the lock, but not for a
 * different name.
 */
bool
ptf_lock_uid(const char *uid, LOCKMODE mode, bool session, bool wait)
{
	uint64		h = hash_bytes_extended((const unsigned char *) uid, strlen(uid), 0);
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, ((uint32) (h >> 32)) | 0x80000000U, (uint32) h,
						 PTF_LOCKTAG_KIND);
	return LockAcquire(&tag, mode, session, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

bool
ptf_lock_slot(const char *name, bool wait)
{
	return ptf_lock(PTF_LOCK_SLOT, hash_bytes((const unsigned char *) name, strlen(name)),
					ExclusiveLock, false, wait);
}

bool
ptf_lock(PtfLockClass cls, uint32 id, LOCKMODE mode, bool session, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) cls, id, PTF_LOCKTAG_KIND);
	return LockAcquire(&tag, mode, session, !wait) != LOCKACQUIRE_NOT_AVAIL;
}
