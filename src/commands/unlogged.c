/*-------------------------------------------------------------------------
 *
 * unlogged.c
 *	  ALTER TABLE ... SET UNLOGGED refused on a table a change stream reads.
 *
 * An unlogged table's changes are not written to the WAL, which is all a
 * change stream reads: a uid over it would go on as if nothing had
 * happened while it was unlogged, its changes lost without a word, and
 * SET LOGGED after writes the table whole, not as changes.  So the
 * statement is refused while a uid with a stream reads the table (a call
 * over an unlogged or temporary table is refused too: input/stream_slot.c).
 * Only this database's uids can be seen, as for DROP ROLE (drops.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "commands/unlogged.h"

static bool
sets_unlogged(AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (cmd->subtype == AT_SetUnLogged)
			return true;
	}
	return false;
}

void
ptf_refuse_unlogging_streamed(AlterTableStmt *stmt)
{
	Oid			relid;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1];
	char	   *uid = NULL;
	char	   *pipeline = NULL;
	bool		ours = false;

	if (stmt->objtype != OBJECT_TABLE || !sets_unlogged(stmt) ||
		!OidIsValid(get_extension_oid("deduplicate_keep_first", true)))
		return;
	/* ALTER TABLE itself says what is wrong with the name */
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return;
	args[0] = ObjectIdGetDatum(relid);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ptf_spi_exec_as_owner("SELECT u.uid, p.name, u.owner::pg_catalog.oid FROM ptf.uid_registry u "
						  "LEFT JOIN ptf.pipeline_registry p ON p.uid OPERATOR(pg_catalog.=) u.uid "
						  "WHERE u.slot_name IS NOT NULL "
						  "  AND $1 OPERATOR(pg_catalog.=) ANY (u.input_tables) "
						  "ORDER BY u.uid LIMIT 1",
						  1, argtypes, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		bool		isnull;

		ours = has_privs_of_role(GetUserId(),
								 DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
																SPI_tuptable->tupdesc, 3,
																&isnull)));
		uid = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		pipeline = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		if (pipeline != NULL)
			pipeline = pstrdup(pipeline);
	}
	SPI_finish();
	if (uid == NULL)
		return;
	/* the names of another role's streams are its own, as for DROP TABLE */
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 !ours ?
			 errmsg("table %s is read by a change stream of another role", get_rel_name(relid)) :
			 errmsg("table %s is read by the change stream of %s \"%s\"",
					get_rel_name(relid), pipeline != NULL ? "pipeline" : "uid",
					pipeline != NULL ? pipeline : uid),
			 errdetail("An unlogged table's changes are not written to the WAL, which the stream reads: it would lose them."),
			 !ours ? errhint("The stream's owner can drop it first.") :
			 pipeline != NULL ?
			 errhint("Drop the pipeline first: SELECT ptf.drop_pipeline(%s);",
					 quote_literal_cstr(pipeline)) :
			 errhint("Drop the uid's state first: SELECT ptf.drop_state(%s);",
					 quote_literal_cstr(uid))));
}
