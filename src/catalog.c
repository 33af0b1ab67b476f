/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Access to the extension's SQL catalogs as the extension's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "frame.h"

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
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	SetUserIdAndSecContext(save_userid, save_sec);

	if (rc != expected)
		elog(ERROR, "internal statement failed (%s): %s",
			 SPI_result_code_string(rc), sql);
	return rc;
}

int64
ptf_declared_watermark_delay(Oid relid, const char *on_time)
{
	Oid			argtypes[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2];
	bool		isnull;
	Datum		d;

	if (!OidIsValid(relid))
		return -1;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(on_time);
	ptf_spi_exec_as_owner("SELECT delay FROM ptf.watermarks "
						  "WHERE relid OPERATOR(pg_catalog.=) $1 "
						  "AND on_time OPERATOR(pg_catalog.=) $2",
						  2, argtypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return -1;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return -1;
	return ptf_interval_to_us(d, "declared watermark delay");
}
