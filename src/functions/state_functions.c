/*-------------------------------------------------------------------------
 *
 * state_functions.c
 *	  SQL entry points that manage durable state: ptf.drop_state().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"

#include "functions/common.h"
#include "state/durable.h"

PG_FUNCTION_INFO_V1(ptf_drop_state);

Datum
ptf_drop_state(PG_FUNCTION_ARGS)
{
	char	   *uid = ptf_uid_arg(fcinfo, 0);
	bool		dropped;

	if (uid == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("uid must not be NULL")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	dropped = durable_drop(uid);
	SPI_finish();
	PG_RETURN_BOOL(dropped);
}
