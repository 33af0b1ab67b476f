/*-------------------------------------------------------------------------
 *
 * ddl.c
 *	  DDL that would strand a distributed pipeline is refused on the
 *	  coordinator before it runs.
 *
 * A distributed pipeline (ptf_citus.pipelines, a reference table every
 * node reads) names its owner, its source and sink tables and its query
 * by name: a node makes the group's shard pipeline from them when a shard
 * group moves, and the owner's name is how the nodes check rights.  Shard
 * pipelines follow renames of the shards on their nodes (commands/
 * renames.c), but the distributed pipeline's names would not follow a
 * rename on the coordinator: every later move would fail, and an owner's
 * name gone (renamed, or dropped after REASSIGN OWNED) would leave a
 * pipeline no one may drop.  So a rename of the source or sink table, of
 * their schema or columns, and a rename, drop or REASSIGN OWNED of an
 * owner are refused while the pipeline exists, naming the way out: drop
 * the pipeline, change, make it again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/meta.h"
#include "commands/drops.h"

/* the distributed pipelines naming (by name) what the statement changes, or NULL */
static char *
pipelines_naming(const char *where, Oid type, Datum value)
{
	Oid			types[1] = {type};
	Datum		values[1] = {value};
	char	   *names = NULL;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ptf_spi_exec_as_owner(psprintf("SELECT pg_catalog.string_agg(pg_catalog.quote_ident(name), ', ' ORDER BY name) "
								   "FROM ptf_citus.pipelines WHERE %s", where),
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1 && !ptf_spi_isnull(1))
		names = pstrdup(ptf_spi_text(1));
	SPI_finish();
	return names;
}

static void
refuse_for_table(Oid relid, const char *what)
{
	char	   *names;

	if (!OidIsValid(relid))
		return;
	names = pipelines_naming("pg_catalog.to_regclass(source) OPERATOR(pg_catalog.=) $1 "
							 "OR pg_catalog.to_regclass(sink) OPERATOR(pg_catalog.=) $1",
							 OIDOID, ObjectIdGetDatum(relid));
	if (names != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot %s table %s: distributed pipeline %s reads or writes it by name",
						what, get_rel_name(relid), names),
				 errhint("Drop the pipeline (ptf.drop_pipeline), make the change, and make the pipeline again.")));
}

static void
refuse_for_schema(const char *schema)
{
	char	   *names = pipelines_naming("(SELECT c.relnamespace FROM pg_catalog.pg_class c "
										 "  WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(source)) "
										 "  OPERATOR(pg_catalog.=) $1 "
										 "OR (SELECT c.relnamespace FROM pg_catalog.pg_class c "
										 "  WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(sink)) "
										 "  OPERATOR(pg_catalog.=) $1",
										 OIDOID, ObjectIdGetDatum(get_namespace_oid(schema, false)));

	if (names != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot rename schema %s: distributed pipeline %s reads or writes its tables by name",
						schema, names),
				 errhint("Drop the pipeline (ptf.drop_pipeline), make the change, and make the pipeline again.")));
}

static void
refuse_for_role(const char *role, const char *what)
{
	char	   *names = pipelines_naming("owner OPERATOR(pg_catalog.=) $1", TEXTOID,
										 CStringGetTextDatum(role));

	if (names != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot %s role %s: it owns distributed pipeline %s", what, role, names),
				 errhint("Drop the pipeline (ptf.drop_pipeline) first, and make it again as another role if it is to go on.")));
}

static void
refuse_for_roles(List *roles, const char *what)
{
	ListCell   *lc;

	foreach(lc, roles)
	{
		RoleSpec   *rs = lfirst_node(RoleSpec, lc);

		if (rs->roletype == ROLESPEC_CSTRING)
			refuse_for_role(rs->rolename, what);
		else
			refuse_for_role(GetUserNameFromId(get_rolespec_oid(rs, false), false), what);
	}
}

/*
 * The names are the coordinator's, and the statements that change them are
 * refused there before Citus passes them on.  On the other nodes Citus runs
 * its own statements (a rename passed on, the cleanup of a move's roles) in
 * connections where reading the reference table would be a distributed
 * query from a query on a shard, which Citus refuses: every rename and
 * DROP ROLE of the cluster failed once a distributed pipeline had existed.
 */
static bool
on_coordinator(void)
{
	int			group;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	group = citus_local_group();
	SPI_finish();
	return group == 0;
}

void
citus_check_utility(Node *stmt)
{
	Oid			relid;

	/*
	 * Only statements that can rename or drop what a pipeline names (asked
	 * first: a query run here for any other, such as SET TRANSACTION, would
	 * break it), where distributed pipelines were ever made.
	 */
	if (!IsA(stmt, RenameStmt) && !IsA(stmt, AlterObjectSchemaStmt) &&
		!IsA(stmt, DropRoleStmt) && !IsA(stmt, ReassignOwnedStmt))
		return;
	if (!OidIsValid(get_extension_oid("deduplicate_keep_first", true)) ||
		!OidIsValid(get_namespace_oid("ptf_citus", true)) ||
		!on_coordinator())
		return;
	switch (nodeTag(stmt))
	{
		case T_RenameStmt:
			{
				RenameStmt *rs = (RenameStmt *) stmt;

				if (rs->renameType == OBJECT_ROLE)
					refuse_for_role(rs->subname, "rename");
				else if (rs->renameType == OBJECT_SCHEMA)
					refuse_for_schema(rs->subname);
				else if (rs->relation != NULL &&
						 (rs->renameType == OBJECT_TABLE || rs->renameType == OBJECT_COLUMN ||
						  rs->renameType == OBJECT_FOREIGN_TABLE))
				{
					relid = RangeVarGetRelid(rs->relation, NoLock, true);
					refuse_for_table(relid, rs->renameType == OBJECT_COLUMN ?
									 "rename a column of" : "rename");
				}
				break;
			}
		case T_AlterObjectSchemaStmt:
			{
				AlterObjectSchemaStmt *as = (AlterObjectSchemaStmt *) stmt;

				if (as->relation != NULL && as->objectType == OBJECT_TABLE)
				{
					relid = RangeVarGetRelid(as->relation, NoLock, true);
					refuse_for_table(relid, "move");
				}
				break;
			}
		case T_DropRoleStmt:
			refuse_for_roles(((DropRoleStmt *) stmt)->roles, "drop");
			break;
		case T_ReassignOwnedStmt:
			refuse_for_roles(((ReassignOwnedStmt *) stmt)->roles, "reassign what is owned by");
			break;
		default:
			break;
	}
}
