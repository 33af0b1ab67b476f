/*-------------------------------------------------------------------------
 *
 * renames.c
 *	  A pipeline's query follows the renames of what it names -- its
 *	  source table, a schema, a column of the row it picks, a function in
 *	  its WHERE -- as its sink does.
 *
 * A pipeline's query is stored as text, bound when the pipeline was made
 * (every name qualified as its search_path needs: functions/pipelines.c),
 * and each step parses it again: after its source table was renamed every
 * step failed ("type ... does not exist") until the table had its old name
 * back.  So a statement that renames or moves an object has every
 * pipeline's query of the database analyzed before it runs -- its names
 * resolving to the objects as they are -- and printed again after it, the
 * same objects by their names of now, as a view's query follows renames.
 * Queries whose text changed are stored again (the workers load them at
 * their next round, ptf.pipelines shows them).
 *
 * Each query is analyzed and printed as its owner, under the search_path
 * its steps run it with.  One that does not analyze (it was broken
 * already) is left as it is.
 *
 * What the query passes as text -- partition_by, on_time, aggregates, a
 * condition -- is read by the function at each step and does not follow:
 * those name columns, and a column they name renamed is the function's
 * error (README, Troubleshooting).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/ruleutils.h"

#include "base/base.h"
#include "catalog.h"
#include "commands/renames.h"

/* A pipeline's query, analyzed before the statement ran. */
typedef struct PendingQuery
{
	int32		id;
	Oid			owner;
	char	   *search_path;
	char	   *text;			/* as stored */
	Query	   *query;			/* NULL: it did not analyze */
} PendingQuery;

/* Statements that rename or move objects a query can name. */
static bool
renames_objects(Node *stmt)
{
	return IsA(stmt, RenameStmt) || IsA(stmt, AlterObjectSchemaStmt);
}

/* Analyze (or print) as the pipeline's owner, under its search_path. */
typedef struct AsOwner
{
	PendingQuery *pq;
	char	   *printed;		/* print_work's result */
} AsOwner;

static int
enter_owner(PendingQuery *pq, Oid *save_user, int *save_sec)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("search_path", pq->search_path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	GetUserIdAndSecContext(save_user, save_sec);
	SetUserIdAndSecContext(pq->owner, *save_sec | SECURITY_LOCAL_USERID_CHANGE);
	return nest;
}

static void
leave_owner(int nest, Oid save_user, int save_sec)
{
	SetUserIdAndSecContext(save_user, save_sec);
	AtEOXact_GUC(true, nest);
}

static void
analyze_work(void *arg)
{
	PendingQuery *pq = ((AsOwner *) arg)->pq;
	Oid			save_user;
	int			save_sec;
	int			nest = enter_owner(pq, &save_user, &save_sec);
	List	   *raw = pg_parse_query(pq->text);

	if (list_length(raw) == 1)
		pq->query = parse_analyze_fixedparams(linitial_node(RawStmt, raw), pq->text,
											  NULL, 0, NULL);
	leave_owner(nest, save_user, save_sec);
}

static void
print_work(void *arg)
{
	AsOwner    *a = (AsOwner *) arg;
	Oid			save_user;
	int			save_sec;
	int			nest = enter_owner(a->pq, &save_user, &save_sec);

	a->printed = pg_get_querydef(a->pq->query, false);
	leave_owner(nest, save_user, save_sec);
}

void *
ptf_renames_before(Node *stmt)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *pending = NIL;
	ListCell   *lc;
	uint64		i;

	if (!renames_objects(stmt) ||
		!OidIsValid(get_extension_oid("deduplicate_keep_first", true)))
		return NULL;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* pipelines of 1.1 on: their search_path is stored with them */
	ptf_spi_exec_as_owner("SELECT id, owner, query, search_path FROM ptf.pipeline_registry "
						  "WHERE search_path IS NOT NULL ORDER BY id",
						  0, NULL, NULL, NULL, SPI_OK_SELECT);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		PendingQuery *pq = MemoryContextAllocZero(cxt, sizeof(PendingQuery));
		MemoryContext old;
		bool		isnull;

		pq->id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		pq->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		pq->text = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 3));
		pq->search_path = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 4));
		old = MemoryContextSwitchTo(cxt);
		pending = lappend(pending, pq);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();

	foreach(lc, pending)
	{
		AsOwner		a = {lfirst(lc), NULL};
		ErrorData  *edata = ptf_try_in_subtransaction(analyze_work, &a);

		/* broken already: nothing to follow */
		if (edata != NULL)
		{
			a.pq->query = NULL;
			FreeErrorData(edata);
		}
	}
	return pending;
}

void
ptf_renames_after(void *state)
{
	List	   *pending = (List *) state;
	ListCell   *lc;

	if (pending == NIL)
		return;
	/* the names as the statement left them */
	CommandCounterIncrement();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, pending)
	{
		PendingQuery *pq = lfirst(lc);
		AsOwner		a = {pq, NULL};
		ErrorData  *edata;
		Oid			argtypes[2] = {INT4OID, TEXTOID};
		Datum		args[2];

		if (pq->query == NULL)
			continue;
		edata = ptf_try_in_subtransaction(print_work, &a);
		if (edata != NULL)
		{
			FreeErrorData(edata);
			continue;
		}
		if (strcmp(a.printed, pq->text) == 0)
			continue;
		args[0] = Int32GetDatum(pq->id);
		args[1] = CStringGetTextDatum(a.printed);
		ptf_spi_exec_as_owner("UPDATE ptf.pipeline_registry SET query = $2 "
							  "WHERE id OPERATOR(pg_catalog.=) $1",
							  2, argtypes, args, NULL, SPI_OK_UPDATE);
	}
	SPI_finish();
}
