/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  Applying a changelog to a table, in batches, through SPI.
 *
 * A batch keeps, per key, the last change seen (earlier ones of the key
 * are superseded and counted); applying it is one DELETE ... USING
 * unnest($1) for the keys whose last change is a retraction, then one
 * INSERT ... SELECT ... FROM unnest($1) ON CONFLICT (key) DO UPDATE for
 * the others.  Keys of the two statements are disjoint, so their order
 * does not change the result; deleting first frees unique values that
 * an upsert may take.  The batch is bounded by rows and by work_mem.
 *
 * The key is not always the only thing that orders changes.  With another
 * unique index, an exclusion constraint or a foreign key into the table
 * itself, applying each key's last change in key order can collide where
 * the changes in their own order do not (an email moved from one row to
 * another, two values swapped through a third).  On such a table every
 * change of a batch is kept, the batch runs in a subtransaction, and if it
 * fails with a unique, exclusion or foreign-key violation it is rolled
 * back and its changes applied again one by one in the order they came:
 * the table ends as the changes in order leave it whenever that order
 * satisfies the constraints, and a sequence that breaks them fails with
 * the constraint's own error.  Tables with the key as their only such
 * constraint pay nothing for it (no subtransaction: a long apply would
 * otherwise overflow the backend's cache of subtransaction ids).
 *
 * The statements are built once from the catalog (column names quoted,
 * key equality by the type's own operator, schema-qualified) and run as
 * the caller, nested inside whatever query produces the changes.
 *
 * A batch holds one entry per key (per change where order matters): a
 * key's later change takes its entry, and its row the entry's room when
 * it fits there.  Rows are packed into large blocks, not palloc'd one by
 * one: a palloc chunk rounds a 70-byte row up to 128 bytes and adds its
 * header, which had a 1M-change backlog of 500k keys take two batches
 * under work_mem = 64MB -- the second updating, through the statement,
 * keys the first had just inserted.  Room a row outgrew stays unused
 * until the batch is applied; it counts towards the batch's memory.
 *
 * Spilling.  A keyed batch that outgrows work_mem is not applied when
 * order does not matter: applying batch after batch writes a key once per
 * batch it appears in (a backlog's updates of keys inserted batches
 * before: an UPDATE each, where one INSERT of the key's last image is all
 * the table needs -- under the default work_mem a 1M-change backlog took
 * 3x the time of a MERGE of the last row per key).  Instead, as MERGE's
 * plan sorts, the batch's entries -- each key's last change -- and every
 * later change of the call go to a sort (tuplesort.c, which spills to
 * temporary files as any sort) by the key and arrival.  At
 * the end, or before a truncation, the sorted changes go through batches
 * as they came in: a key's changes are next to each other in their order,
 * so each key's last change is applied once and counted as with unbounded
 * memory (a full batch is applied before a new key, not inside a key's
 * changes), and the batches hold consecutive keys -- new keys then go in
 * past the index's last one, as in one batch, when the key index has the
 * key types' default order (a primary key has).  Tables where order
 * matters keep every change of a batch and may apply it change by
 * change; they, tables without a key and keys of a type without a
 * default btree order apply batch by batch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/datum.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/tuplesort.h"
#include "utils/relcache.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "input/input.h"
#include "sink/apply.h"
#include "sink/direct_insert.h"
#include "state/keyed_state.h"

#define APPLY_BATCH_ROWS 1000000

/*
 * A spilled change in the sort: the key's columns, then these (their
 * numbers after the key's).
 */
#define SPILL_ACTION	1		/* "char": 'U', 'D' or 'd', as in the batch */
#define SPILL_KIND		2		/* int2: its RowKind */
#define SPILL_SEQ		3		/* int8: its arrival */
#define SPILL_ROW		4		/* its row, a datum of the table's row type */
#define SPILL_EXTRA		4

/* rows are packed into blocks of this size; larger ones are palloc'd */
#define APPLY_BLOCK_SIZE (256 * 1024)
#define APPLY_BLOCK_ROW_MAX (APPLY_BLOCK_SIZE / 16)

struct ApplySink
{
	Oid			relid;
	TupleDesc	rowdesc;
	Oid			rowtype;
	Oid			arraytype;
	KeySpec    *keys;			/* NULL: the table has no key */
	Oid			key_index;
	bool		order_matters;	/* another constraint may make batching fail */
	SPIPlanPtr	upsert_plan;	/* keyed */
	bool		upsert_reports; /* RETURNING whether each row was inserted */
	SPIPlanPtr	delete_plan;
	SPIPlanPtr	insert_plan;	/* keyless */
	SPIPlanPtr	delete_one_plan;
	char	   *delete_one_sql;
	SPIPlanPtr	delete_all_plan;	/* a truncation's */
	char	   *delete_all_sql;
	MemoryContextCallback plans_cb;

	MemoryContext batch_cxt;
	KeyedState *pending;		/* key -> index of its last change */
	Datum	   *rows;
	uint32	   *room;			/* bytes each entry's row may take */
	char	   *block_free;		/* the rest of the current block */
	Size		block_left;
	char	   *action;			/* 'U' upsert, 'D' delete, 'd' delete of a
								 * key added in the batch, 'X' superseded
								 * (kept where order matters) */
	char	   *step;			/* in order (order_matters): 'U' upsert, 'D'
								 * delete, 'B' delete (a -U), 'F' a -U
								 * folded into its +U */
	uint64		batch_superseded;

	/* spilled changes (keyed, order not mattering): NULL when none */
	Tuplesortstate *spill;
	bool		spill_refused;	/* a key type has no default btree order */
	int64		spill_seq;		/* the next change's arrival number */
	Datum		spill_held;		/* a -U waiting for its +U, or 0 */
	MemoryContext spill_cxt;	/* the sort and its slots */
	MemoryContext spill_row_cxt;	/* a change read back, while it is put */
	TupleTableSlot *spill_in;	/* a change into the sort */
	TupleTableSlot *spill_out;	/* and out of it */
	TupleTableSlot *spill_row;	/* its row, for its key */
	ResourceOwner spill_owner;	/* the call's: the sort's tapes outlive its input's portals */

	int			n;
	int			max;			/* room in rows and action */
	ApplyCounts counts;
};

static void free_plans(void *arg);
static void put_keyed(ApplySink *s, TupleTableSlot *row, HeapTuple tuple, RowKind kind,
					  char action);
static void spill_batch(ApplySink *s);
static void spill_change(ApplySink *s, TupleTableSlot *slot, HeapTuple tuple, RowKind kind);
static void spill_apply(ApplySink *s);

/* OPERATOR(schema.=) for a type's default equality */
static char *
equality_operator(Oid type, const char *column)
{
	TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);
	HeapTuple	tup;
	Form_pg_operator op;
	char	   *result;

	if (!OidIsValid(tc->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key column \"%s\" of type %s has no equality operator",
						column, format_type_be(type))));
	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(tc->eq_opr));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", tc->eq_opr);
	op = (Form_pg_operator) GETSTRUCT(tup);
	result = psprintf("OPERATOR(%s.%s)",
					  quote_identifier(get_namespace_name(op->oprnamespace)),
					  NameStr(op->oprname));
	ReleaseSysCache(tup);
	return result;
}

/* sql of one parameter of type argtype, or of none (InvalidOid) */
static SPIPlanPtr
prepare(const char *sql, Oid argtype)
{
	SPIPlanPtr	plan = SPI_prepare(sql, OidIsValid(argtype) ? 1 : 0, &argtype);

	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	return plan;
}

/*
 * A deferrable primary key is no key to PostgreSQL's ON CONFLICT, nor to
 * the relcache: the table would be applied to as one without a key (in
 * order, deletes of whole equal rows), which its key makes wrong.
 */
static void
refuse_deferrable_key(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		bool		deferrable_pk;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		deferrable_pk = ((Form_pg_index) GETSTRUCT(tup))->indisprimary &&
			!((Form_pg_index) GETSTRUCT(tup))->indimmediate;
		ReleaseSysCache(tup);
		if (deferrable_pk)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot apply a changelog to table %s by its deferrable primary key",
							RelationGetRelationName(rel)),
					 errdetail("Changes are upserted by the key with INSERT ... ON CONFLICT, which a deferrable constraint cannot decide."),
					 errhint("ALTER TABLE ... ALTER CONSTRAINT ... NOT DEFERRABLE, or give the table a replica identity index that is not deferrable.")));
	}
	list_free(indexes);
}

/* The table's key: its primary key, else its replica identity index. */
static KeySpec *
table_key(Relation rel, TupleDesc rowdesc, Oid *key_index)
{
	Oid			indexoid = RelationGetPrimaryKeyIndex(rel);
	Relation	idx;
	AttrNumber *attnos;
	int			n;
	int			i;
	KeySpec    *keys;

	if (!OidIsValid(indexoid))
		indexoid = RelationGetReplicaIndex(rel);
	*key_index = indexoid;
	if (!OidIsValid(indexoid))
	{
		refuse_deferrable_key(rel);
		return NULL;
	}
	idx = index_open(indexoid, AccessShareLock);
	n = idx->rd_index->indnkeyatts;
	attnos = palloc(sizeof(AttrNumber) * n);
	for (i = 0; i < n; i++)
		attnos[i] = idx->rd_index->indkey.values[i];
	keys = key_spec_from_attnos(rowdesc, n, attnos);
	index_close(idx, AccessShareLock);
	return keys;
}

/* the key's index, or a partition's index attached to it */
static bool
is_key_index(Oid indexoid, Oid key_index)
{
	return indexoid == key_index ||
		list_member_oid(get_partition_ancestors(indexoid), key_index);
}

/*
 * Can applying each key's last change in key order break a constraint
 * that the changes in their own order keep?  Only through a unique or
 * exclusion index besides the key's, or a foreign key of the table to
 * itself (a deleted parent, a child moved first); any of them in any
 * partition counts.
 */
static bool
batch_order_matters(Oid relid, Oid key_index)
{
	List	   *rels = find_all_inheritors(relid, AccessShareLock, NULL);
	ListCell   *lc;

	foreach(lc, rels)
	{
		Relation	rel = relation_open(lfirst_oid(lc), NoLock);
		List	   *indexes = RelationGetIndexList(rel);
		List	   *fkeys = RelationGetFKeyList(rel);
		bool		matters = false;
		ListCell   *ic;

		foreach(ic, indexes)
		{
			Oid			indexoid = lfirst_oid(ic);
			HeapTuple	tup;
			Form_pg_index idx;
			bool		constrains;

			tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
			if (!HeapTupleIsValid(tup))
				elog(ERROR, "cache lookup failed for index %u", indexoid);
			idx = (Form_pg_index) GETSTRUCT(tup);
			constrains = idx->indisunique || idx->indisexclusion;
			ReleaseSysCache(tup);
			/* cached first: the key test may scan pg_inherits */
			matters |= constrains && !is_key_index(indexoid, key_index);
		}
		foreach(ic, fkeys)
			matters |= list_member_oid(rels, ((ForeignKeyCacheInfo *) lfirst(ic))->confrelid);
		relation_close(rel, NoLock);
		if (matters)
			return true;
	}
	return false;
}

static bool
is_key_column(KeySpec *keys, AttrNumber attno)
{
	int			i;

	for (i = 0; keys != NULL && i < keys->ncols; i++)
		if (keys->cols[i].attno == attno)
			return true;
	return false;
}

static void
check_privileges(Oid relid)
{
	static const struct
	{
		AclMode		mode;
		const char *name;
	}			needed[] = {{ACL_INSERT, "INSERT"}, {ACL_UPDATE, "UPDATE"}, {ACL_DELETE, "DELETE"}};
	int			i;

	for (i = 0; i < (int) lengthof(needed); i++)
		if (pg_class_aclcheck(relid, GetUserId(), needed[i].mode) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", get_rel_name(relid)),
					 errdetail("Applying a changelog inserts, updates and deletes rows; %s is not granted.",
							   needed[i].name)));
}

ApplySink *
apply_sink_create(Oid relid)
{
	ApplySink  *s = palloc0(sizeof(ApplySink));
	Relation	rel;
	char	   *name;
	StringInfoData cols;
	StringInfoData sets;
	StringInfoData keycols;
	StringInfoData keyeq;
	StringInfoData roweq;
	StringInfoData sql;
	bool		overriding = false;
	bool		partitioned;
	const char *only;
	StringInfoData keysame;
	StringInfoData tkeycols;
	Oid			key_index;
	int			i;

	rel = relation_open(relid, AccessShareLock);
	partitioned = rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE;

	/*
	 * An INSERT goes to the table named, not to its inheritance children:
	 * so do the deletes (a partitioned table's rows are its partitions').
	 */
	only = partitioned ? "" : "ONLY ";
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("A changelog is applied to a table.")));
	check_privileges(relid);

	s->relid = relid;
	/* the copy loses generated and identity markings: the SQL is built from rel */
	s->rowdesc = CreateTupleDescCopy(RelationGetDescr(rel));
	s->rowtype = rel->rd_rel->reltype;
	s->rowdesc->tdtypeid = s->rowtype;
	s->arraytype = get_array_type(s->rowtype);
	s->keys = table_key(rel, s->rowdesc, &key_index);
	s->key_index = key_index;
	s->order_matters = s->keys != NULL && batch_order_matters(relid, key_index);
	name = ptf_relation_sql_name(relid);

	initStringInfo(&cols);
	initStringInfo(&sets);
	initStringInfo(&keycols);
	initStringInfo(&keyeq);
	initStringInfo(&keysame);
	initStringInfo(&tkeycols);
	initStringInfo(&roweq);
	for (i = 0; i < s->rowdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);
		const char *col = quote_identifier(NameStr(att->attname));

		if (att->attisdropped)
			continue;
		/* whole-row equality (tables without key) is on every column */
		appendStringInfo(&roweq, "%ss.%s IS NOT DISTINCT FROM ($1).%s",
						 roweq.len ? " AND " : "", col, col);
		if (att->attgenerated)
			continue;
		if (att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
			overriding = true;
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", col);
		if (is_key_column(s->keys, i + 1))
		{
			const char *eq = equality_operator(att->atttypid, NameStr(att->attname));

			appendStringInfo(&keycols, "%s%s", keycols.len ? ", " : "", col);
			appendStringInfo(&keyeq, "%st.%s %s d.%s", keyeq.len ? " AND " : "", col, eq, col);
			appendStringInfo(&tkeycols, "%st.%s", tkeycols.len ? ", " : "", col);
			appendStringInfo(&keysame, "%sp.%s %s i.%s", keysame.len ? " AND " : "", col, eq, col);
		}
		else if (att->attidentity != ATTRIBUTE_IDENTITY_ALWAYS)
			appendStringInfo(&sets, "%s%s = EXCLUDED.%s", sets.len ? ", " : "", col, col);
	}
	relation_close(rel, AccessShareLock);

	initStringInfo(&sql);
	if (s->keys != NULL)
	{
		appendStringInfo(&sql,
						 "INSERT INTO %s AS t (%s)%s SELECT %s FROM pg_catalog.unnest($1) AS d "
						 "ORDER BY %s ON CONFLICT (%s) ",
						 name, cols.data, overriding ? " OVERRIDING SYSTEM VALUE" : "",
						 cols.data, keycols.data, keycols.data);
		s->upsert_reports = (sets.len > 0);
		if (s->upsert_reports && !partitioned)
			appendStringInfo(&sql, "DO UPDATE SET %s "
							 "RETURNING t.xmax::text OPERATOR(pg_catalog.=) '0'", sets.data);
		else if (s->upsert_reports)
		{
			/*
			 * A partitioned table returns no system column: a row is new when
			 * its key was not there before the statement (its snapshot).
			 */
			char	   *upsert = pstrdup(sql.data);

			resetStringInfo(&sql);
			appendStringInfo(&sql, "WITH i AS (%sDO UPDATE SET %s RETURNING %s), "
							 "p AS (SELECT %s FROM %s AS t, pg_catalog.unnest($1) AS d WHERE %s) "
							 "SELECT NOT EXISTS (SELECT FROM p WHERE %s) FROM i",
							 upsert, sets.data, keycols.data, tkeycols.data,
							 name, keyeq.data, keysame.data);
		}
		else
			appendStringInfoString(&sql, "DO NOTHING");
		s->upsert_plan = prepare(sql.data, s->arraytype);

		resetStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s%s AS t USING pg_catalog.unnest($1) AS d WHERE %s",
						 only, name, keyeq.data);
		s->delete_plan = prepare(sql.data, s->arraytype);
	}
	else
	{
		appendStringInfo(&sql, "INSERT INTO %s (%s)%s SELECT %s FROM pg_catalog.unnest($1)",
						 name, cols.data, overriding ? " OVERRIDING SYSTEM VALUE" : "",
						 cols.data);
		s->insert_plan = prepare(sql.data, s->arraytype);

		/*
		 * One row equal in every column; a row is its table and ctid
		 * (partitions have ctids of their own).  Prepared at the first
		 * retraction: a column without equality fails only then.
		 */
		s->delete_one_sql = psprintf("DELETE FROM %s%s AS t USING "
									 "(SELECT s.tableoid AS toid, s.ctid AS tid FROM %s%s AS s "
									 "WHERE %s LIMIT 1) AS one "
									 "WHERE t.tableoid OPERATOR(pg_catalog.=) one.toid "
									 "AND t.ctid OPERATOR(pg_catalog.=) one.tid",
									 only, name, only, name, roweq.data);
	}

	s->delete_all_sql = psprintf("DELETE FROM %s%s", only, name);

	s->plans_cb.func = free_plans;
	s->plans_cb.arg = s;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &s->plans_cb);

	s->spill_owner = CurrentResourceOwner;
	s->batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf apply batch",
										 ALLOCSET_DEFAULT_SIZES);
	s->max = 1024;
	s->rows = palloc(sizeof(Datum) * s->max);
	s->room = palloc(sizeof(uint32) * s->max);
	s->action = palloc(s->max);
	s->step = palloc(s->max);
	return s;
}

/* The statements are the call's: freed with its memory, error or not. */
static void
free_plans(void *arg)
{
	ApplySink  *s = (ApplySink *) arg;
	SPIPlanPtr *plans[] = {&s->upsert_plan, &s->delete_plan, &s->insert_plan, &s->delete_one_plan,
	&s->delete_all_plan};
	int			i;

	for (i = 0; i < (int) lengthof(plans); i++)
	{
		if (*plans[i] != NULL)
			SPI_freeplan(*plans[i]);
		*plans[i] = NULL;
	}
}

TupleDesc
apply_sink_rowdesc(ApplySink *s)
{
	return s->rowdesc;
}

const bool *
apply_sink_key_columns(ApplySink *s)
{
	bool	   *cols;
	int			i;

	if (s->keys == NULL)
		return NULL;
	cols = palloc0(sizeof(bool) * s->rowdesc->natts);
	for (i = 0; i < s->keys->ncols; i++)
		cols[s->keys->cols[i].attno - 1] = true;
	return cols;
}

/* Run a kept plan on one array or row, in a nested SPI connection. */
static uint64
execute(SPIPlanPtr plan, Datum arg, uint64 *inserted)
{
	uint64		processed;
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute_plan(plan, &arg, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "applying changes failed: %s", SPI_result_code_string(rc));
	processed = SPI_processed;
	if (inserted != NULL && SPI_tuptable != NULL)
	{
		uint64		i;

		for (i = 0; i < processed; i++)
		{
			bool		isnull;

			if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
										   1, &isnull)))
				(*inserted)++;
		}
	}
	SPI_finish();
	return processed;
}

static Datum
batch_array(ApplySink *s, char action, int *count)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(s->n, 1));
	int			n = 0;
	int			i;

	for (i = 0; i < s->n; i++)
		if (s->action[i] == action)
			elems[n++] = s->rows[i];
	*count = n;
	if (n == 0)
		return (Datum) 0;
	return PointerGetDatum(construct_array(elems, n, s->rowtype, -1, false, TYPALIGN_DOUBLE));
}

/* INSERT ... ON CONFLICT of n rows, counted */
static void
upsert_rows(ApplySink *s, Datum *rows, int n)
{
	Datum		arr;
	uint64		inserted = 0;
	uint64		processed;

	if (n == 0)
		return;
	arr = PointerGetDatum(construct_array(rows, n, s->rowtype, -1, false, TYPALIGN_DOUBLE));
	processed = execute(s->upsert_plan, arr, s->upsert_reports ? &inserted : NULL);
	if (!s->upsert_reports)
		inserted = processed;	/* DO NOTHING: conflicts are not returned */
	s->counts.inserted += inserted;
	/* the rest; a row a BEFORE trigger skipped too, so that every change is counted */
	s->counts.updated += n - inserted;
}

/*
 * The batch's additions: keys the table lacks inserted directly where the
 * table allows it (sink/direct_insert.c), in key order; the others, and
 * every key on other tables, upserted by the statement.
 */
static void
upsert_batch(ApplySink *s)
{
	Datum	   *rows = palloc(sizeof(Datum) * Max(s->n, 1));
	int			n = 0;
	int			present = 0;
	DirectInsert *di;
	int			i;

	for (i = 0; i < s->n; i++)
		if (s->action[i] == 'U')
			rows[n++] = s->rows[i];
	if (n == 0)
		return;
	di = direct_insert_open(s->relid, s->key_index, s->rowdesc);
	if (di == NULL)
	{
		upsert_rows(s, rows, n);
		return;
	}
	direct_insert_sort(di, rows, n);
	/* the present keys move to the front, in order, for the statement */
	for (i = 0; i < n; i++)
	{
		if (direct_insert_key_exists(di, rows[i]))
			rows[present++] = rows[i];
		else
			direct_insert_add(di, rows[i]);
	}
	s->counts.inserted += direct_insert_close(di);
	upsert_rows(s, rows, present);
}

/* A keyed batch: each key's last change, by two statements. */
static void
apply_batched(ApplySink *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->batch_cxt);
	int			n;
	Datum		arr;

	arr = batch_array(s, 'D', &n);
	if (n > 0)
	{
		uint64		deleted = execute(s->delete_plan, arr, NULL);

		s->counts.deleted += deleted;
		s->counts.missing += n - deleted;
	}
	/*
	 * Keys added earlier in the batch: the addition was never written, so
	 * only a row the table had before is deleted.  A retraction that merely
	 * cancels the addition changed no row of the table: it is folded with it
	 * (superseded), not counted as a deletion.
	 */
	arr = batch_array(s, 'd', &n);
	if (n > 0)
	{
		uint64		deleted = execute(s->delete_plan, arr, NULL);

		s->counts.deleted += deleted;
		s->counts.superseded += n - deleted;
	}
	upsert_batch(s);
	MemoryContextSwitchTo(old);
}

/* A one-row array of the table's row type, in the batch's memory. */
static Datum
one_row(ApplySink *s, Datum row)
{
	return PointerGetDatum(construct_array(&row, 1, s->rowtype, -1, false, TYPALIGN_DOUBLE));
}

/*
 * A keyed batch change by change, in the order the changes came, each
 * counted for itself.  An update's -U is folded into its +U, as in a
 * batch: the row is replaced, not deleted and inserted again (which a
 * foreign key into the table would refuse).
 */
static void
apply_in_order(ApplySink *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->batch_cxt);
	int			i;

	for (i = 0; i < s->n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (s->step[i] == 'F')
			s->counts.superseded++;
		else if (s->step[i] == 'D' || s->step[i] == 'B')
		{
			uint64		deleted = execute(s->delete_plan, one_row(s, s->rows[i]), NULL);

			s->counts.deleted += deleted;
			s->counts.missing += 1 - deleted;
		}
		else
		{
			uint64		inserted = 0;
			uint64		processed = execute(s->upsert_plan, one_row(s, s->rows[i]),
											s->upsert_reports ? &inserted : NULL);

			if (!s->upsert_reports)
				inserted = processed;
			s->counts.inserted += inserted;
			s->counts.updated += 1 - inserted;
		}
	}
	MemoryContextSwitchTo(old);
}

/* what applying a batch in key order can run into, and in order not */
static bool
order_dependent_error(int sqlerrcode)
{
	return sqlerrcode == ERRCODE_UNIQUE_VIOLATION ||
		sqlerrcode == ERRCODE_EXCLUSION_VIOLATION ||
		sqlerrcode == ERRCODE_FOREIGN_KEY_VIOLATION;
}

static void
apply_batched_work(void *arg)
{
	apply_batched((ApplySink *) arg);
}

/*
 * The batch as a batch, in a subtransaction; if the order of its keys
 * broke a constraint, nothing of it is left and it is applied in order.
 */
static void
apply_batched_or_in_order(ApplySink *s)
{
	ApplyCounts before = s->counts;
	ErrorData  *edata = ptf_try_in_subtransaction(apply_batched_work, s);

	if (edata == NULL)
		return;
	if (!order_dependent_error(edata->sqlerrcode))
		ReThrowError(edata);
	FreeErrorData(edata);

	/* counted afresh, change by change */
	s->counts = before;
	s->counts.superseded -= s->batch_superseded;
	apply_in_order(s);
}

/* An empty batch: what it held is applied, or spilled. */
static void
batch_reset(ApplySink *s)
{
	MemoryContextReset(s->batch_cxt);
	s->block_free = NULL;
	s->block_left = 0;
	s->pending = NULL;
	s->n = 0;
	s->batch_superseded = 0;
}

static void
flush(ApplySink *s)
{
	if (s->keys == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(s->batch_cxt);
		int			n;
		Datum		arr = batch_array(s, 'U', &n);

		if (n > 0)
			s->counts.inserted += execute(s->insert_plan, arr, NULL);
		MemoryContextSwitchTo(old);
	}
	else if (s->order_matters)
		apply_batched_or_in_order(s);
	else
		apply_batched(s);
	batch_reset(s);
}

/*
 * Room for a row of len bytes in the batch's memory, rounded up so that a
 * key's next change, often a little longer, fits where its last one was.
 */
static char *
batch_room(ApplySink *s, Size len, uint32 *room)
{
	Size		need = TYPEALIGN(16, len);
	char	   *p;

	/* a large row has a chunk of its own, of its size */
	if (need > APPLY_BLOCK_ROW_MAX)
	{
		*room = (uint32) len;
		return MemoryContextAlloc(s->batch_cxt, len);
	}
	if (need > s->block_left)
	{
		s->block_free = MemoryContextAlloc(s->batch_cxt, APPLY_BLOCK_SIZE);
		s->block_left = APPLY_BLOCK_SIZE;
	}
	p = s->block_free;
	s->block_free += need;
	s->block_left -= need;
	*room = (uint32) need;
	Assert(p == (char *) MAXALIGN(p));
	return p;
}

/*
 * The row as a datum of the table's row type, in entry i's room if it fits
 * there (i >= 0), else in new room whose size goes to *room.  PostgreSQL
 * makes the datum (its header, toasted values fetched: the row outlives
 * the input's snapshot) in a chunk reused row after row; it is copied in.
 */
static Datum
batch_row(ApplySink *s, HeapTuple tuple, int i, uint32 *room)
{
	MemoryContext old = MemoryContextSwitchTo(s->batch_cxt);
	Datum		made = heap_copy_tuple_as_datum(tuple, s->rowdesc);
	Size		len = VARSIZE(DatumGetPointer(made));
	char	   *dst;

	MemoryContextSwitchTo(old);
	if (i >= 0 && len <= s->room[i])
		dst = DatumGetPointer(s->rows[i]);
	else
	{
		/* room outgrown stays unused, unless it was a chunk of its own */
		if (i >= 0 && TYPEALIGN(16, s->room[i]) > APPLY_BLOCK_ROW_MAX)
			pfree(DatumGetPointer(s->rows[i]));
		dst = batch_room(s, len, room);
	}
	memcpy(dst, DatumGetPointer(made), len);
	pfree(DatumGetPointer(made));
	return PointerGetDatum(dst);
}

static void
add_change(ApplySink *s, HeapTuple tuple, char action, RowKind kind)
{
	if (s->n == s->max)
	{
		s->max *= 2;
		s->rows = repalloc(s->rows, sizeof(Datum) * s->max);
		s->room = repalloc(s->room, sizeof(uint32) * s->max);
		s->action = repalloc(s->action, s->max);
		s->step = repalloc(s->step, s->max);
	}
	s->rows[s->n] = batch_row(s, tuple, -1, &s->room[s->n]);
	s->step[s->n] = ROWKIND_IS_ADDITION(kind) ? 'U' :
		(kind == ROWKIND_UPDATE_BEFORE ? 'B' : 'D');
	s->action[s->n++] = action;
}

static bool
batch_full(ApplySink *s)
{
	return s->n >= APPLY_BATCH_ROWS ||
		MemoryContextMemAllocated(s->batch_cxt, true) > (Size) work_mem * 1024;
}

/*
 * A change of a keyed table into the batch: the key's entry becomes the
 * change (action 'U' upsert, 'D' delete, 'd' a delete of a key the batch
 * added), or, where order matters, the change is kept after it.
 */
static void
put_keyed(ApplySink *s, TupleTableSlot *row, HeapTuple tuple, RowKind kind, char action)
{
	StateRef	ref;

	if (s->pending == NULL)
	{
		KeyedStateSpec spec;

		memset(&spec, 0, sizeof(spec));
		spec.keys = s->keys;
		spec.hot = sizeof(int32);
		s->pending = keyed_state_create(&spec, s->batch_cxt);
	}
	if (keyed_state_lookup(s->pending, s->keys, row, 0, true, &ref) == KS_FOUND)
	{
		int32		prev = *(int32 *) ref.value;

		Assert(prev >= 0 && prev < s->n);
		if (action != 'U' && s->action[prev] == 'U')
			action = 'd';
		s->counts.superseded++;
		s->batch_superseded++;
		if (!s->order_matters)
		{
			/* the key's entry, and its room if the row fits, now the last change's */
			s->action[prev] = action;
			s->rows[prev] = batch_row(s, tuple, prev, &s->room[prev]);
		}
		else
		{
			s->action[prev] = 'X';
			/* an update's two halves, one after the other */
			if (kind == ROWKIND_UPDATE_AFTER && prev == s->n - 1 && s->step[prev] == 'B')
				s->step[prev] = 'F';
			*(int32 *) ref.value = s->n;
			add_change(s, tuple, action, kind);
		}
	}
	else
	{
		*(int32 *) ref.value = s->n;
		add_change(s, tuple, action, kind);
	}
}

/* ---- spilling (see the header) ---- */

/* Has the batch an entry of row's key? */
static bool
in_batch(ApplySink *s, TupleTableSlot *row)
{
	StateRef	ref;

	return s->pending != NULL &&
		keyed_state_lookup(s->pending, s->keys, row, 0, false, &ref) == KS_FOUND;
}

/*
 * The sort of a spilled call: the key's columns, then the change's
 * action, kind, arrival number and row, ordered by the key and the
 * arrival.  The key is ordered by its types' default btree order under
 * its columns' collations, whose equality is the one the batch matches
 * keys by (key.h): a key's changes then sort next to each other, however
 * the key index orders them (with the table's primary key, in its order).
 * false (nothing made) when a key type has no default btree order: the
 * call then applies batch after batch.
 */
static bool
spill_begin(ApplySink *s)
{
	int			nkeys = s->keys->ncols;
	AttrNumber *attnos;
	Oid		   *ops;
	Oid		   *collations;
	bool	   *nulls_first;
	TupleDesc	desc;
	MemoryContext old;
	int			i;

	for (i = 0; i < nkeys; i++)
		if (!OidIsValid(lookup_type_cache(s->keys->cols[i].typid, TYPECACHE_LT_OPR)->lt_opr))
			return false;
	if (s->spill_cxt == NULL)
	{
		s->spill_cxt = AllocSetContextCreate(MemoryContextGetParent(s->batch_cxt),
											 "ptf apply spill", ALLOCSET_DEFAULT_SIZES);
		s->spill_row_cxt = AllocSetContextCreate(s->spill_cxt, "ptf apply spilled change",
												 ALLOCSET_SMALL_SIZES);
	}
	old = MemoryContextSwitchTo(s->spill_cxt);
	desc = CreateTemplateTupleDesc(nkeys + SPILL_EXTRA);
	attnos = palloc(sizeof(AttrNumber) * (nkeys + 1));
	ops = palloc(sizeof(Oid) * (nkeys + 1));
	collations = palloc(sizeof(Oid) * (nkeys + 1));
	nulls_first = palloc0(sizeof(bool) * (nkeys + 1));
	for (i = 0; i < nkeys; i++)
	{
		KeyColumn  *col = &s->keys->cols[i];

		TupleDescCopyEntry(desc, i + 1, s->rowdesc, col->attno);
		attnos[i] = i + 1;
		ops[i] = lookup_type_cache(col->typid, TYPECACHE_LT_OPR)->lt_opr;
		collations[i] = col->collation;
	}
	attnos[nkeys] = nkeys + SPILL_SEQ;
	ops[nkeys] = Int8LessOperator;
	collations[nkeys] = InvalidOid;
	TupleDescInitEntry(desc, nkeys + SPILL_ACTION, "action", CHAROID, -1, 0);
	TupleDescInitEntry(desc, nkeys + SPILL_KIND, "kind", INT2OID, -1, 0);
	TupleDescInitEntry(desc, nkeys + SPILL_SEQ, "seq", INT8OID, -1, 0);
	TupleDescInitEntry(desc, nkeys + SPILL_ROW, "row", s->rowtype, -1, 0);
	s->spill_in = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	s->spill_out = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	s->spill_row = MakeSingleTupleTableSlot(s->rowdesc, &TTSOpsHeapTuple);

	s->spill = tuplesort_begin_heap(desc, nkeys + 1, attnos, ops, collations, nulls_first,
									work_mem, NULL, TUPLESORT_NONE);
	s->spill_seq = 0;
	MemoryContextSwitchTo(old);
	ereport(DEBUG1,
			(errmsg_internal("apply_changelog sorts the changes that outgrow work_mem")));
	return true;
}

/*
 * The sort's tapes are the call's: made while a put or the sort itself
 * runs, they outlive the portals of the call's input.
 */
static ResourceOwner
spill_owner_enter(ApplySink *s)
{
	ResourceOwner saved = CurrentResourceOwner;

	CurrentResourceOwner = s->spill_owner;
	return saved;
}

/* A change into the sort: its row (a datum of the table's row type). */
static void
spill_put(ApplySink *s, Datum row, RowKind kind, char action)
{
	TupleTableSlot *in = s->spill_in;
	int			nkeys = s->keys->ncols;
	HeapTupleData tmp;
	ResourceOwner saved;
	int			i;

	Assert(action == 'U' || action == 'D' || action == 'd');
	ExecClearTuple(in);
	ptf_slot_store_composite(s->spill_row, row, &tmp);
	for (i = 0; i < nkeys; i++)
		in->tts_values[i] = slot_getattr(s->spill_row, s->keys->cols[i].attno,
										 &in->tts_isnull[i]);
	in->tts_values[nkeys + SPILL_ACTION - 1] = CharGetDatum(action);
	in->tts_values[nkeys + SPILL_KIND - 1] = Int16GetDatum((int16) kind);
	in->tts_values[nkeys + SPILL_SEQ - 1] = Int64GetDatum(s->spill_seq++);
	in->tts_values[nkeys + SPILL_ROW - 1] = row;
	for (i = SPILL_ACTION; i <= SPILL_ROW; i++)
		in->tts_isnull[nkeys + i - 1] = false;
	ExecStoreVirtualTuple(in);
	saved = spill_owner_enter(s);
	tuplesort_puttupleslot(s->spill, in);
	CurrentResourceOwner = saved;
	ExecClearTuple(s->spill_row);
}

/*
 * The batch is full: its entries, each key's last change, go to the sort
 * (begun now), and every later change after them.  Applied instead when
 * the keys cannot be sorted.
 */
static void
spill_batch(ApplySink *s)
{
	int			i;

	Assert(s->spill == NULL && s->keys != NULL && !s->order_matters);
	if (s->spill_refused || !spill_begin(s))
	{
		s->spill_refused = true;
		flush(s);
		return;
	}
	for (i = 0; i < s->n; i++)
		spill_put(s, s->rows[i], s->action[i] == 'U' ? ROWKIND_INSERT : ROWKIND_DELETE,
				  s->action[i]);
	batch_reset(s);
}

/*
 * Has row (a slot of the table's rows) the key of the held -U?  Binary
 * equality: false for keys equal only by their type's equality, which
 * costs a -U its folding here, not its correctness.
 */
static bool
held_key(ApplySink *s, TupleTableSlot *row)
{
	HeapTupleData tmp;
	bool		same = true;
	int			i;

	ptf_slot_store_composite(s->spill_row, s->spill_held, &tmp);
	for (i = 0; i < s->keys->ncols && same; i++)
	{
		KeyColumn  *col = &s->keys->cols[i];
		bool		anull;
		bool		bnull;
		Datum		av = slot_getattr(s->spill_row, col->attno, &anull);
		Datum		bv = slot_getattr(row, col->attno, &bnull);

		same = !anull && !bnull && datumIsEqual(av, bv, col->typbyval, col->typlen);
	}
	ExecClearTuple(s->spill_row);
	return same;
}

/* The -U held back, into the sort. */
static void
spill_release_held(ApplySink *s)
{
	if (s->spill_held == (Datum) 0)
		return;
	spill_put(s, s->spill_held, ROWKIND_UPDATE_BEFORE, 'D');
	pfree(DatumGetPointer(s->spill_held));
	s->spill_held = (Datum) 0;
}

/*
 * A change while spilling: into the sort, after its key's others.  An
 * update's -U waits for the next change: followed by the +U of its key,
 * it is superseded at once, as the batch would supersede it, and the sort
 * takes the +U alone (a Debezium update's two halves are a third of a
 * backlog's changes).
 */
static void
spill_change(ApplySink *s, TupleTableSlot *slot, HeapTuple tuple, RowKind kind)
{
	MemoryContext old = MemoryContextSwitchTo(s->spill_cxt);

	/* toasted values fetched: the row outlives the input's snapshot */
	Datum		row = heap_copy_tuple_as_datum(tuple, s->rowdesc);

	MemoryContextSwitchTo(old);
	if (s->spill_held != (Datum) 0 && kind == ROWKIND_UPDATE_AFTER && held_key(s, slot))
	{
		pfree(DatumGetPointer(s->spill_held));
		s->spill_held = (Datum) 0;
		s->counts.superseded++;
	}
	spill_release_held(s);
	if (kind == ROWKIND_UPDATE_BEFORE)
	{
		s->spill_held = row;
		return;
	}
	spill_put(s, row, kind, ROWKIND_IS_ADDITION(kind) ? 'U' : 'D');
	pfree(DatumGetPointer(row));
}

/*
 * Apply what was spilled: the changes by key, each key's in the order
 * they came, into batches of consecutive keys.
 */
static void
spill_apply(ApplySink *s)
{
	TupleTableSlot *out = s->spill_out;
	int			nkeys = s->keys->ncols;
	ResourceOwner saved;

	if (s->spill == NULL)
		return;
	Assert(s->n == 0);
	spill_release_held(s);
	saved = spill_owner_enter(s);
	tuplesort_performsort(s->spill);
	CurrentResourceOwner = saved;
	/* not copied out of the sort: the batch copies what it keeps */
	while (tuplesort_gettupleslot(s->spill, true, false, out, NULL))
	{
		HeapTupleData tmp;
		RowKind		kind;
		char		action;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(out);
		action = DatumGetChar(out->tts_values[nkeys + SPILL_ACTION - 1]);
		kind = (RowKind) DatumGetInt16(out->tts_values[nkeys + SPILL_KIND - 1]);

		/*
		 * The row (copied when the sort made its header short) and what the
		 * key's functions leave go with the change.
		 */
		old = MemoryContextSwitchTo(s->spill_row_cxt);
		ptf_slot_store_composite(s->spill_row, out->tts_values[nkeys + SPILL_ROW - 1], &tmp);
		/* a full batch is applied before a new key, never inside a key's changes */
		if (s->n > 0 && batch_full(s) && !in_batch(s, s->spill_row))
			flush(s);
		put_keyed(s, s->spill_row, &tmp, kind, action);
		MemoryContextSwitchTo(old);
		ExecClearTuple(s->spill_row);
		MemoryContextReset(s->spill_row_cxt);
	}
	if (s->n > 0)
		flush(s);
	tuplesort_end(s->spill);
	s->spill = NULL;
	ExecDropSingleTupleTableSlot(s->spill_in);
	ExecDropSingleTupleTableSlot(s->spill_out);
	ExecDropSingleTupleTableSlot(s->spill_row);
	MemoryContextReset(s->spill_cxt);
}

/*
 * A truncation of the changelog's table (to_changelog's TRUNCATE row):
 * every row of the target goes, as PostgreSQL's logical replication
 * truncates a subscriber's table -- by DELETE, as the caller, so that its
 * policies and triggers apply as to every other change.  Counted as a
 * delete received and done for each row it removed.
 */
static void
apply_truncate(ApplySink *s)
{
	uint64		n;

	spill_apply(s);
	if (s->n > 0)
		flush(s);
	if (s->delete_all_plan == NULL)
	{
		/* inside the query that feeds us: a connection of its own */
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		s->delete_all_plan = prepare(s->delete_all_sql, InvalidOid);
		SPI_finish();
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_plan(s->delete_all_plan, NULL, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "applying a truncation failed");
	n = SPI_processed;
	SPI_finish();
	s->counts.received[ROWKIND_DELETE] += n;
	s->counts.deleted += n;
}

void
apply_sink_put(ApplySink *s, RowKind kind, TupleTableSlot *row)
{
	HeapTuple	tuple;

	if (kind == ROWKIND_TRUNCATE)
	{
		apply_truncate(s);
		return;
	}
	Assert(kind >= 0 && kind < ROWKIND_COUNT);
	s->counts.received[kind]++;

	/* in order on a keyless table: what was added before may be what goes */
	if (s->keys == NULL && !ROWKIND_IS_ADDITION(kind))
		flush(s);

	/* typed as the table's rows, whatever the slot's descriptor says */
	tuple = ExecFetchSlotHeapTuple(row, false, NULL);

	if (s->keys == NULL)
	{
		if (ROWKIND_IS_ADDITION(kind))
		{
			add_change(s, tuple, 'U', kind);
		}
		else
		{
			MemoryContext old;
			Datum		datum;

			if (s->delete_one_plan == NULL)
			{
				/* inside the query that feeds us: a connection of its own */
				if (SPI_connect() != SPI_OK_CONNECT)
					elog(ERROR, "SPI_connect failed");
				s->delete_one_plan = prepare(s->delete_one_sql, s->rowtype);
				SPI_finish();
			}
			Assert(s->n == 0);
			old = MemoryContextSwitchTo(s->batch_cxt);
			datum = heap_copy_tuple_as_datum(tuple, s->rowdesc);
			MemoryContextSwitchTo(old);
			if (execute(s->delete_one_plan, datum, NULL) > 0)
				s->counts.deleted++;
			else
				s->counts.missing++;
			MemoryContextReset(s->batch_cxt);
			s->block_free = NULL;
			s->block_left = 0;
		}
	}
	else if (s->spill != NULL)
	{
		spill_change(s, row, tuple, kind);
		return;
	}
	else
		put_keyed(s, row, tuple, kind, ROWKIND_IS_ADDITION(kind) ? 'U' : 'D');
	/* an update's halves stay in one batch: the -U alone would delete */
	if (kind != ROWKIND_UPDATE_BEFORE && batch_full(s))
	{
		if (s->keys != NULL && !s->order_matters)
			spill_batch(s);
		else
			flush(s);
	}
}

void
apply_sink_finish(ApplySink *s, ApplyCounts *counts)
{
	spill_apply(s);
	if (s->n > 0)
		flush(s);
	*counts = s->counts;
}
