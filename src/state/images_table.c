/*-------------------------------------------------------------------------
 *
 * images_table.c
 *	  A uid's second state table: the last row of each primary key of an
 *	  upsert source (engine/upsert.c), keyed otherwise than the operator's
 *	  own state.
 *
 * A window aggregate over a table under REPLICA IDENTITY DEFAULT keeps
 * its windows by its partition_by key, but an update or delete of the
 * table names only the row's primary key: the row it takes back is found
 * by that key, in state of its own (Flink's ChangelogNormalize, keyed by
 * the primary key ahead of the aggregate).  That state is a state table
 * like any (state/state_table.c, made from the normalizer's layout), named
 * after the uid's state table -- ptf.state_<n>_images -- so that the
 * registry needs nothing more: it is found, dumped, restored and dropped
 * with its uid.  It is read and written in the uid's calls, under its
 * lock, with the main state (state/state_io.c), and moves the registry's
 * version with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "executor/spi.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "catalog.h"
#include "state/durable_internal.h"

char *
durable_images_table_name(Oid state_relid)
{
	char	   *name = get_rel_name(state_relid);

	if (name == NULL)
		elog(ERROR, "state table %u is gone", state_relid);
	return psprintf("%s_images", name);
}

/* The images table of a state table, or InvalidOid. */
static Oid
images_relid(Oid state_relid)
{
	return get_relname_relid(durable_images_table_name(state_relid),
							 get_rel_namespace(state_relid));
}

void
durable_drop_images_table(Oid state_relid)
{
	Oid			relid = images_relid(state_relid);

	if (OidIsValid(relid))
		ptf_spi_exec_as_owner(psprintf("DROP TABLE %s", ptf_relation_sql_name(relid)),
							  0, NULL, NULL, NULL, SPI_OK_UTILITY);
}

/* What the table holds, as far as its statistics say: a guide, not a count. */
static int64
estimated_keys(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	float4		tuples = rel->rd_rel->reltuples;

	table_close(rel, AccessShareLock);
	return tuples > 0 ? (int64) tuples : 0;
}

DurableState *
durable_open_images(DurableState *ds, const DurableIdentity *id)
{
	DurableState *side = palloc0(sizeof(DurableState));

	Assert(ds->main == NULL && ds->images == NULL);
	Assert(id->ninputs == 1 && id->nspaces == 0);
	side->cxt = ds->cxt;
	side->uid = ds->uid;
	side->had_xid = ds->had_xid;
	side->row_types = ds->row_types;
	side->input_tables = ds->input_tables;
	side->time_type = ds->time_type;
	side->version = ds->version;
	durable_set_layout(side, id);
	side->main = ds;

	side->state_relid = images_relid(ds->state_relid);
	if (!OidIsValid(side->state_relid))
		side->state_relid = durable_create_named_state_table(id, side,
															 durable_images_table_name(ds->state_relid),
															 "rows by primary key");
	durable_check_state_table(id, side);
	side->stored_keys = estimated_keys(side->state_relid);
	ds->images = side;
	return side;
}
