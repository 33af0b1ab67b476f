/*-------------------------------------------------------------------------
 *
 * plugin.c
 *	  The logical decoding output plugin: hands changes to our in-process
 *	  change-stream input, or writes one JSON object per change for outside
 *	  consumers (pg_recvlogical, pg_logical_slot_get_changes).
 *
 * Options for outside consumers:
 *	  format      'changelog' (default): {"op", "table", "data", "lsn",
 *	              "commit_time", "xid"}, one object per row kind (an UPDATE
 *	              gives UPDATE_BEFORE when the old image is logged, then
 *	              UPDATE_AFTER); 'debezium': {"op": "c|u|d", "before",
 *	              "after", "source": {...}, "ts_ms"}, one object per change.
 *	              An old image logged with the replica identity's columns
 *	              only shows just those ("key_only": true in changelog
 *	              objects); unchanged TOASTed values of a new image are left
 *	              out (and listed in "unchanged_toast").  A TRUNCATE is an
 *	              object of its own: {"op": "TRUNCATE" (or "t"), "table"}.
 *	  op_mapping  a JSON object of kind names to codes, as TO_CHANGELOG's;
 *	              kinds left out are not written.  Default: the kind names
 *	              (changelog), c/u/d (debezium).
 *	  tables      comma-separated table names (schema-qualified or not);
 *	              default all.
 *
 * A consumer sees the rows of a table only with SELECT on it, and not at
 * all while row-level security applies to it: a replication connection
 * must not be a way around privileges (DESIGN 5).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/xlogdefs.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/rls.h"
#include "utils/timestamp.h"

#include "decoding/plugin.h"
#include "base/op_mapping.h"

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

PtfDecodingSink *ptf_decoding_sink = NULL;

typedef struct JsonPlugin
{
	MemoryContext cxt;			/* reset after every change */
	bool		in_process;		/* for our change streams: no output */
	bool		debezium;
	OpMapping	mapping;
	List	   *tables;			/* names to emit; NIL: all */
	char		commit_time[MAXDATELEN + 1];	/* of the transaction being written */
} JsonPlugin;

static void
plugin_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	JsonPlugin *p = palloc0(sizeof(JsonPlugin));
	ListCell   *lc;
	bool		mapping_given = false;

	p->cxt = AllocSetContextCreate(ctx->context, "ptf decoding",
								   ALLOCSET_DEFAULT_SIZES);
	ctx->output_plugin_private = p;

	if (ptf_decoding_sink != NULL)
	{
		/* our own input: nothing is written, tuples are handed over */
		p->in_process = true;
		opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
		return;
	}

	opt->output_type = OUTPUT_PLUGIN_TEXTUAL_OUTPUT;
	foreach(lc, ctx->output_plugin_options)
	{
		DefElem    *elem = (DefElem *) lfirst(lc);
		char	   *val = elem->arg ? strVal(elem->arg) : NULL;

		if (val == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" needs a value", elem->defname)));
		if (strcmp(elem->defname, "format") == 0)
		{
			if (strcmp(val, "debezium") == 0)
				p->debezium = true;
			else if (strcmp(val, "changelog") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("format must be \"changelog\" or \"debezium\", not \"%s\"", val)));
		}
		else if (strcmp(elem->defname, "op_mapping") == 0)
		{
			Jsonb	   *j = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															   CStringGetDatum(val)));

			op_mapping_from_jsonb(j, &p->mapping, "op_mapping");
			mapping_given = true;
		}
		else if (strcmp(elem->defname, "tables") == 0)
		{
			char	   *copy = pstrdup(val);
			char	   *tok;

			for (tok = strtok(copy, ","); tok != NULL; tok = strtok(NULL, ","))
			{
				char	   *end;

				while (*tok == ' ')
					tok++;
				end = tok + strlen(tok);
				while (end > tok && end[-1] == ' ')
					*--end = '\0';
				if (*tok != '\0')
					p->tables = lappend(p->tables, pstrdup(tok));
			}
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" is unknown", elem->defname),
					 errhint("Options are format, op_mapping and tables.")));
	}
	if (!mapping_given)
	{
		op_mapping_identity(&p->mapping);
		if (p->debezium)
		{
			p->mapping.code[ROWKIND_INSERT] = "c";
			p->mapping.code[ROWKIND_UPDATE_AFTER] = "u";
			p->mapping.code[ROWKIND_DELETE] = "d";
		}
	}
}

/*
 * The in-process consumer of the moment.  A decoding context may outlive
 * one read (a pipeline keeps it between steps), so the consumer is looked
 * up for every callback rather than remembered at startup.
 */
static PtfDecodingSink *
current_sink(JsonPlugin *p)
{
	if (!p->in_process)
		return NULL;
	if (ptf_decoding_sink == NULL)
		elog(ERROR, "in-process decoding without a consumer");
	return ptf_decoding_sink;
}

/* A pipeline's own writes (its replication origin) never come back to it. */
static bool
plugin_filter_origin(LogicalDecodingContext *ctx, RepOriginId origin_id)
{
	JsonPlugin *p = ctx->output_plugin_private;
	PtfDecodingSink *sink = current_sink(p);

	return sink != NULL && sink->skip_origin != InvalidRepOriginId &&
		origin_id == sink->skip_origin;
}

static void
plugin_shutdown(LogicalDecodingContext *ctx)
{
	JsonPlugin *p = ctx->output_plugin_private;

	MemoryContextDelete(p->cxt);
}

static void
plugin_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	JsonPlugin *p = ctx->output_plugin_private;
	PtfDecodingSink *sink = current_sink(p);

	if (sink)
		sink->begin(sink->arg, txn);
	else
		strlcpy(p->commit_time, timestamptz_to_str(txn->xact_time.commit_time),
				sizeof(p->commit_time));
}

static void
plugin_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  XLogRecPtr commit_lsn)
{
	JsonPlugin *p = ctx->output_plugin_private;
	PtfDecodingSink *sink = current_sink(p);

	if (sink)
		sink->commit(sink->arg, txn, commit_lsn);
}

/* ---- JSON for outside consumers ---- */

static bool
json_number_type(Oid typid)
{
	return typid == INT2OID || typid == INT4OID || typid == INT8OID ||
		typid == OIDOID || typid == FLOAT4OID || typid == FLOAT8OID ||
		typid == NUMERICOID;
}

/* A value as JSON: numbers and booleans bare, json as is, the rest strings. */
static void
append_value_json(StringInfo out, Oid typid, Datum value)
{
	Oid			outfunc;
	bool		isvarlena;
	char	   *s;

	if (typid == BOOLOID)
	{
		appendStringInfoString(out, DatumGetBool(value) ? "true" : "false");
		return;
	}
	getTypeOutputInfo(typid, &outfunc, &isvarlena);
	s = OidOutputFunctionCall(outfunc, value);
	if (typid == JSONOID || typid == JSONBOID)
		appendStringInfoString(out, s);
	else if (json_number_type(typid) &&
			 strcmp(s, "NaN") != 0 && strcmp(s, "Infinity") != 0 &&
			 strcmp(s, "-Infinity") != 0)
		appendStringInfoString(out, s);
	else
		escape_json(out, s);
}

/*
 * A row as a JSON object of its columns.  Unchanged TOASTed values of an
 * UPDATE's new image are not in the WAL: they are left out and named in
 * *unchanged_toast, never printed as placeholders.  An old image logged
 * with the replica identity's columns only has just those (key_only, the
 * identity's attribute numbers offset by FirstLowInvalidHeapAttributeNumber):
 * the NULLs of the others are not values.
 */
static void
append_row_json(StringInfo out, TupleDesc desc, HeapTuple tuple,
				Bitmapset *key_only, List **unchanged_toast)
{
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);
	bool		first = true;
	int			i;

	heap_deform_tuple(tuple, desc, values, nulls);
	appendStringInfoChar(out, '{');
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (key_only != NULL &&
			!bms_is_member(att->attnum - FirstLowInvalidHeapAttributeNumber, key_only))
			continue;
		if (!nulls[i] && att->attlen == -1 &&
			VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(values[i])))
		{
			if (unchanged_toast)
				*unchanged_toast = lappend(*unchanged_toast, NameStr(att->attname));
			continue;
		}
		if (!first)
			appendStringInfoChar(out, ',');
		first = false;
		escape_json(out, NameStr(att->attname));
		appendStringInfoChar(out, ':');
		if (nulls[i])
			appendStringInfoString(out, "null");
		else
			append_value_json(out, att->atttypid, values[i]);
	}
	appendStringInfoChar(out, '}');
}

static bool
table_wanted(JsonPlugin *p, Relation rel, const char *qualified)
{
	ListCell   *lc;

	if (p->tables == NIL)
		return true;
	foreach(lc, p->tables)
	{
		const char *name = lfirst(lc);

		if (strcmp(name, qualified) == 0 ||
			strcmp(name, RelationGetRelationName(rel)) == 0)
			return true;
	}
	return false;
}

static void
check_table_privileges(JsonPlugin *p, Relation rel)
{
	Oid			relid = RelationGetRelid(rel);

	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errdetail("Decoding through deduplicate_keep_first emits a table's rows only to roles that could SELECT them when the change was made."),
				 errhint("Grant SELECT, or leave the table out with the tables option.")));
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s has row-level security, which decoding cannot apply",
						RelationGetRelationName(rel)),
				 errhint("Decode as the table's owner or a role that bypasses row-level security, or leave the table out with the tables option.")));
}

static void
append_lsn(StringInfo out, XLogRecPtr lsn)
{
	appendStringInfo(out, "\"%X/%X\"", LSN_FORMAT_ARGS(lsn));
}

/* One changelog-format object: a row of one kind. */
static void
write_changelog_row(LogicalDecodingContext *ctx, JsonPlugin *p, ReorderBufferTXN *txn,
					Relation rel, const char *qualified, RowKind kind,
					HeapTuple tuple, Bitmapset *key_only, XLogRecPtr lsn)
{
	StringInfo	out = ctx->out;
	List	   *unchanged = NIL;

	if (!p->mapping.mapped[kind])
		return;
	OutputPluginPrepareWrite(ctx, true);
	appendStringInfoString(out, "{\"op\":");
	escape_json(out, p->mapping.code[kind]);
	appendStringInfoString(out, ",\"table\":");
	escape_json(out, qualified);
	appendStringInfoString(out, ",\"data\":");
	if (tuple)
		append_row_json(out, RelationGetDescr(rel), tuple, key_only, &unchanged);
	else
		appendStringInfoString(out, "null");
	if (key_only != NULL)
		appendStringInfoString(out, ",\"key_only\":true");
	if (unchanged != NIL)
	{
		ListCell   *lc;

		appendStringInfoString(out, ",\"unchanged_toast\":[");
		foreach(lc, unchanged)
		{
			if (lc != list_head(unchanged))
				appendStringInfoChar(out, ',');
			escape_json(out, lfirst(lc));
		}
		appendStringInfoChar(out, ']');
	}
	appendStringInfoString(out, ",\"lsn\":");
	append_lsn(out, lsn);
	appendStringInfoString(out, ",\"commit_time\":");
	escape_json(out, p->commit_time);
	appendStringInfo(out, ",\"xid\":%u}", txn->xid);
	OutputPluginWrite(ctx, true);
}

/* One Debezium-style envelope per change. */
static void
write_debezium(LogicalDecodingContext *ctx, JsonPlugin *p, ReorderBufferTXN *txn,
			   Relation rel, RowKind kind, HeapTuple before, Bitmapset *key_only,
			   HeapTuple after, XLogRecPtr lsn)
{
	StringInfo	out = ctx->out;
	int64		ts_ms = (txn->xact_time.commit_time / 1000) + INT64CONST(946684800000);

	if (!p->mapping.mapped[kind])
		return;
	OutputPluginPrepareWrite(ctx, true);
	appendStringInfoString(out, "{\"op\":");
	escape_json(out, p->mapping.code[kind]);
	appendStringInfoString(out, ",\"before\":");
	if (before)
		append_row_json(out, RelationGetDescr(rel), before, key_only, NULL);
	else
		appendStringInfoString(out, "null");
	appendStringInfoString(out, ",\"after\":");
	if (after)
		append_row_json(out, RelationGetDescr(rel), after, NULL, NULL);
	else
		appendStringInfoString(out, "null");
	appendStringInfoString(out, ",\"source\":{\"connector\":\"deduplicate_keep_first\",\"db\":");
	escape_json(out, get_database_name(MyDatabaseId));
	appendStringInfoString(out, ",\"schema\":");
	escape_json(out, get_namespace_name(RelationGetNamespace(rel)));
	appendStringInfoString(out, ",\"table\":");
	escape_json(out, RelationGetRelationName(rel));
	appendStringInfoString(out, ",\"lsn\":");
	append_lsn(out, lsn);
	appendStringInfo(out, ",\"txId\":%u,\"ts_ms\":" INT64_FORMAT "},\"ts_ms\":" INT64_FORMAT "}",
					 txn->xid, ts_ms, ts_ms);
	OutputPluginWrite(ctx, true);
}

/*
 * A change in the chosen format: one Debezium envelope (before, after), or
 * changelog objects -- an update with its old image logged is two, its
 * UPDATE_BEFORE first.
 */
static void
write_change(LogicalDecodingContext *ctx, JsonPlugin *p, ReorderBufferTXN *txn,
			 Relation rel, const char *qualified, RowKind kind,
			 HeapTuple before, Bitmapset *key_only, HeapTuple after, XLogRecPtr lsn)
{
	if (p->debezium)
		write_debezium(ctx, p, txn, rel, kind, before, key_only, after, lsn);
	else if (kind == ROWKIND_DELETE)
		write_changelog_row(ctx, p, txn, rel, qualified, kind, before, key_only, lsn);
	else
	{
		if (before != NULL)
			write_changelog_row(ctx, p, txn, rel, qualified, ROWKIND_UPDATE_BEFORE,
								before, key_only, lsn);
		write_changelog_row(ctx, p, txn, rel, qualified, kind, after, NULL, lsn);
	}
}

static void
plugin_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  Relation rel, ReorderBufferChange *change)
{
	JsonPlugin *p = ctx->output_plugin_private;
	MemoryContext old;
	char	   *qualified;
	HeapTuple	newtup;
	HeapTuple	oldtup;
	Bitmapset  *key_only = NULL;

	if (p->in_process)
	{
		PtfDecodingSink *sink = current_sink(p);

		sink->change(sink->arg, txn, rel, change);
		return;
	}

	old = MemoryContextSwitchTo(p->cxt);
	qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										   RelationGetRelationName(rel));
	if (!table_wanted(p, rel, qualified))
	{
		MemoryContextSwitchTo(old);
		MemoryContextReset(p->cxt);
		return;
	}
	check_table_privileges(p, rel);

	newtup = change->data.tp.newtuple ? &change->data.tp.newtuple->tuple : NULL;
	oldtup = change->data.tp.oldtuple ? &change->data.tp.oldtuple->tuple : NULL;
	if (oldtup && rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL)
		key_only = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			write_change(ctx, p, txn, rel, qualified, ROWKIND_INSERT, NULL, NULL, newtup,
						 change->lsn);
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			write_change(ctx, p, txn, rel, qualified, ROWKIND_UPDATE_AFTER, oldtup, key_only,
						 newtup, change->lsn);
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			/* REPLICA IDENTITY NOTHING logs no old image: nothing to say */
			if (oldtup != NULL)
				write_change(ctx, p, txn, rel, qualified, ROWKIND_DELETE, oldtup, key_only,
							 NULL, change->lsn);
			break;
		default:
			break;
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(p->cxt);
}

static void
plugin_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				int nrelations, Relation relations[], ReorderBufferChange *change)
{
	JsonPlugin *p = ctx->output_plugin_private;
	MemoryContext old;
	int			i;

	if (p->in_process)
	{
		PtfDecodingSink *sink = current_sink(p);

		sink->truncate(sink->arg, txn, nrelations, relations, change);
		return;
	}

	old = MemoryContextSwitchTo(p->cxt);
	for (i = 0; i < nrelations; i++)
	{
		Relation	rel = relations[i];
		char	   *qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
														   RelationGetRelationName(rel));

		if (!table_wanted(p, rel, qualified))
			continue;
		check_table_privileges(p, rel);
		/* a table's truncation is no row kind: written as its own event */
		OutputPluginPrepareWrite(ctx, true);
		appendStringInfoString(ctx->out, p->debezium ? "{\"op\":\"t\",\"table\":" :
							   "{\"op\":\"TRUNCATE\",\"table\":");
		escape_json(ctx->out, qualified);
		appendStringInfoString(ctx->out, ",\"lsn\":");
		append_lsn(ctx->out, change->lsn);
		appendStringInfoString(ctx->out, ",\"commit_time\":");
		escape_json(ctx->out, p->commit_time);
		appendStringInfo(ctx->out, ",\"xid\":%u}", txn->xid);
		OutputPluginWrite(ctx, true);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(p->cxt);
}

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	AssertVariableIsOfType(&_PG_output_plugin_init, LogicalOutputPluginInit);

	cb->startup_cb = plugin_startup;
	cb->begin_cb = plugin_begin;
	cb->change_cb = plugin_change;
	cb->truncate_cb = plugin_truncate;
	cb->commit_cb = plugin_commit;
	cb->filter_by_origin_cb = plugin_filter_origin;
	cb->shutdown_cb = plugin_shutdown;
}
