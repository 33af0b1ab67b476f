/*-------------------------------------------------------------------------
 *
 * plugin.c
 *	  The logical decoding output plugin: hands changes to our in-process
 *	  change-stream input, or writes one JSON object per change for outside
 *	  consumers (pg_recvlogical, pg_logical_slot_get_changes).
 *
 * Options for outside consumers, parsed once at startup; an unknown,
 * repeated or conflicting option is an error before any change is read:
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
 *	  format_version  the shape of the objects a consumer was written for;
 *	              1, the only one so far (and the default).  A later shape
 *	              gets a new number, so that consumers that name theirs keep
 *	              getting it or fail at once.
 *	  op_mapping  a JSON object of kind names to codes, as TO_CHANGELOG's;
 *	              kinds left out are not written.  Default: the kind names
 *	              (changelog), c/u/d (debezium, which has no UPDATE_BEFORE).
 *	  tables      a comma-separated list of table names, qualified or not,
 *	              as SQL writes identifiers (unquoted names fold to lower
 *	              case); default every table.
 *	  include_lsn, include_commit_time, include_xid
 *	              booleans, default true: whether objects say where, when
 *	              and in which transaction a change was made.
 *
 * A consumer sees the rows of a table only with SELECT on it, and not at
 * all while row-level security applies to it: a replication connection
 * must not be a way around privileges (doc/design.md §5).
 *
 * What the writers need of a table -- whether the consumer wants it, the
 * verdict on its privileges, its quoted names, its replica identity and
 * the layout of its rows -- is worked out at its first change and kept in
 * a per-relation cache, as pgoutput's RelationSyncCache does.  Decoding
 * replays the catalog's invalidations where they happened in the WAL, so a
 * relcache callback drops an entry exactly when the table was altered,
 * renamed, granted or revoked; a role's membership or attributes changing,
 * or a schema's name, drops them all.  Entries dropped are swept away
 * between transactions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlogdefs.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "decoding/json_writer.h"
#include "decoding/old_key.h"
#include "decoding/plugin.h"
#include "base/op_mapping.h"

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/* a name of the tables option: schema NULL matches any schema */
typedef struct TableName
{
	char	   *schema;
	char	   *relname;
} TableName;

/* may the consumer read a table's rows? */
typedef enum ReadVerdict
{
	READ_OK,
	READ_NO_SELECT,
	READ_RLS
} ReadVerdict;

/* An entry of the per-relation cache. */
typedef struct PluginRelation
{
	Oid			relid;			/* hash key */
	bool		valid;			/* false: rebuild at its next change */
	bool		built;			/* the last build finished */
	bool		wanted;			/* named by the tables option */
	ReadVerdict verdict;
	bool		identity_only;	/* old images carry the identity's columns */
	MemoryContext cxt;			/* the table's names and layout */
	JsonTable	table;
} PluginRelation;

typedef struct JsonPlugin
{
	MemoryContext cxt;			/* reset after every change */
	bool		in_process;		/* for our change streams: no output */
	PtfDecodingSink *sink;		/* their consumer of the moment */
	JsonFormat	format;
	List	   *tables;			/* of TableName; NIL: all */
	JsonTxn		txn;			/* the transaction being written */
	HTAB	   *relations;		/* Oid -> PluginRelation */
	bool		stale_entries;	/* some were invalidated: sweep at commit */
	MemoryContext cache_cxt;	/* the cache, and everything in it */
	struct JsonPlugin *next;	/* in live_plugins */
} JsonPlugin;

/*
 * The plugins of this backend with a cache, for the invalidation
 * callbacks, which PostgreSQL cannot unregister: a plugin leaves the list
 * when its cache's memory goes, by FreeDecodingContext or by an error's
 * cleanup alike.
 */
static JsonPlugin *live_plugins = NULL;
static bool callbacks_registered = false;

/* ---- options ---- */

/*
 * The tables option: names split at commas outside double quotes, each
 * then parsed as a possibly qualified identifier.
 */
/*
 * Is every unquoted part of a name (parts split by dots outside quotes)
 * an identifier as SQL's scanner reads one -- a letter, underscore or
 * non-ASCII byte, then those, digits or dollar signs?  SplitIdentifierString
 * takes any run of characters, so that '*' or 'a-b' would be names that
 * match no table, silently.
 */
static bool
unquoted_parts_are_identifiers(const char *s)
{
	const char *p = s;

	for (;;)
	{
		while (scanner_isspace(*p))
			p++;
		if (*p == '"')
		{
			/* quoted: anything, a doubled quote standing for one */
			for (p++; *p != '\0'; p++)
				if (*p == '"' && *++p != '"')
					break;
		}
		else
		{
			unsigned char c = (unsigned char) *p;

			if (!(isalpha(c) || c == '_' || IS_HIGHBIT_SET(c)))
				return false;
			for (p++;; p++)
			{
				c = (unsigned char) *p;
				if (!(isalnum(c) || c == '_' || c == '$' || IS_HIGHBIT_SET(c)))
					break;
			}
		}
		while (scanner_isspace(*p))
			p++;
		if (*p == '\0')
			return true;
		if (*p != '.')
			return false;
		p++;
	}
}

static List *
parse_table_names(const char *value)
{
	List	   *names = NIL;
	char	   *copy = pstrdup(value);
	char	   *start = copy;
	bool		quoted = false;
	bool		done = false;
	char	   *p;

	for (p = copy; !done; p++)
	{
		List	   *parts;
		TableName  *name;
		char	   *given;

		if (*p == '"')
			quoted = !quoted;	/* a doubled quote toggles twice */
		if (*p == '\0')
		{
			if (quoted)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_NAME),
						 errmsg("unterminated quoted name in option \"tables\"")));
			done = true;
		}
		else if (*p != ',' || quoted)
			continue;
		*p = '\0';
		/* SplitIdentifierString writes into its input: keep it for errors */
		given = pstrdup(start);
		if (!unquoted_parts_are_identifiers(given) ||
			!SplitIdentifierString(start, '.', &parts) ||
			list_length(parts) < 1 || list_length(parts) > 2 ||
			strlen(linitial(parts)) == 0 || strlen(llast(parts)) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid table name \"%s\" in option \"tables\"", given),
					 errhint("Name tables as SQL does, separated by commas: orders, public.\"Line Items\".")));
		name = palloc0(sizeof(TableName));
		if (list_length(parts) == 2)
			name->schema = linitial(parts);
		name->relname = llast(parts);
		names = lappend(names, name);
		start = p + 1;
	}
	return names;
}

static char *
json_string(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	json_append_string(&buf, s, strlen(s));
	return buf.data;
}

/* Once per option: a second occurrence is refused, as PostgreSQL does. */
static void
option_once(bool *seen, DefElem *elem)
{
	if (*seen)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("conflicting or redundant options"),
				 errdetail("Option \"%s\" is given more than once.", elem->defname)));
	*seen = true;
}

static void
parse_options(JsonPlugin *p, List *options)
{
	bool		format_seen = false,
				version_seen = false,
				mapping_seen = false,
				tables_seen = false,
				lsn_seen = false,
				time_seen = false,
				xid_seen = false;
	OpMapping	mapping;
	ListCell   *lc;
	int			k;

	p->format.include_lsn = true;
	p->format.include_commit_time = true;
	p->format.include_xid = true;
	foreach(lc, options)
	{
		DefElem    *elem = lfirst(lc);

		if (strcmp(elem->defname, "format") == 0)
		{
			char	   *val = defGetString(elem);

			option_once(&format_seen, elem);
			if (strcmp(val, "debezium") == 0)
				p->format.debezium = true;
			else if (strcmp(val, "changelog") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("format must be \"changelog\" or \"debezium\", not \"%s\"", val)));
		}
		else if (strcmp(elem->defname, "format_version") == 0)
		{
			char	   *val = defGetString(elem);

			option_once(&version_seen, elem);
			if (strcmp(val, "1") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("format_version \"%s\" is not supported", val),
						 errhint("This version of deduplicate_keep_first writes format_version %d.",
								 PTF_JSON_FORMAT_VERSION)));
		}
		else if (strcmp(elem->defname, "op_mapping") == 0)
		{
			char	   *val = defGetString(elem);

			option_once(&mapping_seen, elem);
			op_mapping_from_jsonb(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																	 CStringGetDatum(val))),
								  &mapping, "op_mapping");
		}
		else if (strcmp(elem->defname, "tables") == 0)
		{
			option_once(&tables_seen, elem);
			p->tables = parse_table_names(defGetString(elem));
		}
		else if (strcmp(elem->defname, "include_lsn") == 0)
		{
			option_once(&lsn_seen, elem);
			p->format.include_lsn = defGetBoolean(elem);
		}
		else if (strcmp(elem->defname, "include_commit_time") == 0)
		{
			option_once(&time_seen, elem);
			p->format.include_commit_time = defGetBoolean(elem);
		}
		else if (strcmp(elem->defname, "include_xid") == 0)
		{
			option_once(&xid_seen, elem);
			p->format.include_xid = defGetBoolean(elem);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" is unknown", elem->defname),
					 errhint("Options are format, format_version, op_mapping, tables, include_lsn, include_commit_time and include_xid.")));
	}

	if (!mapping_seen)
	{
		op_mapping_identity(&mapping);
		if (p->format.debezium)
		{
			mapping.mapped[ROWKIND_UPDATE_BEFORE] = false;
			mapping.code[ROWKIND_INSERT] = "c";
			mapping.code[ROWKIND_UPDATE_AFTER] = "u";
			mapping.code[ROWKIND_DELETE] = "d";
			mapping.truncate_code = "t";
		}
	}
	else if (mapping.read_code != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("op_mapping maps READ, which the output plugin does not write"),
				 errdetail("The plugin writes changes decoded from the WAL; rows read from a table are to_changelog's (snapshot => true)."),
				 errhint("Leave READ out of the plugin's op_mapping.")));
	else if (p->format.debezium && mapping.mapped[ROWKIND_UPDATE_BEFORE])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("op_mapping maps UPDATE_BEFORE, which format \"debezium\" does not write"),
				 errdetail("A Debezium envelope holds an update's old and new images together."),
				 errhint("Map UPDATE_AFTER to the code of updates, or use format \"changelog\".")));
	for (k = 0; k < ROWKIND_COUNT; k++)
		p->format.code[k] = mapping.mapped[k] ? json_string(mapping.code[k]) : NULL;
	/* a mapping that leaves TRUNCATE out writes no truncation, as for any kind */
	p->format.truncate_code = mapping.truncate_code ? json_string(mapping.truncate_code) : NULL;
}

/* ---- the per-relation cache ---- */

static void
invalidate_all(JsonPlugin *p)
{
	HASH_SEQ_STATUS seq;
	PluginRelation *entry;

	hash_seq_init(&seq, p->relations);
	while ((entry = hash_seq_search(&seq)) != NULL)
		entry->valid = false;
	p->stale_entries = true;
}

/*
 * Entries invalidated since the last sweep go: a table dropped, or one
 * seen once, must not hold memory for as long as a walsender runs.  Only
 * between transactions, when no entry is in use.
 */
static void
sweep_stale_entries(JsonPlugin *p)
{
	HASH_SEQ_STATUS seq;
	PluginRelation *entry;

	if (!p->stale_entries)
		return;
	hash_seq_init(&seq, p->relations);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		if (entry->valid)
			continue;
		if (entry->cxt != NULL)
			MemoryContextDelete(entry->cxt);
		hash_search(p->relations, &entry->relid, HASH_REMOVE, NULL);
	}
	p->stale_entries = false;
}

static void
relcache_callback(Datum arg, Oid relid)
{
	JsonPlugin *p;

	for (p = live_plugins; p != NULL; p = p->next)
	{
		if (OidIsValid(relid))
		{
			PluginRelation *entry = hash_search(p->relations, &relid, HASH_FIND, NULL);

			if (entry != NULL)
			{
				entry->valid = false;
				p->stale_entries = true;
			}
		}
		else
			invalidate_all(p);
	}
}

/*
 * Roles: a membership or BYPASSRLS changed, and with it verdicts.
 * Schemas: a renamed schema renames its tables without a relcache
 * invalidation of any of them.
 */
static void
catalog_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	JsonPlugin *p;

	for (p = live_plugins; p != NULL; p = p->next)
		invalidate_all(p);
}

static void
unlink_plugin(void *arg)
{
	JsonPlugin *gone = arg;
	JsonPlugin **link;

	for (link = &live_plugins; *link != NULL; link = &(*link)->next)
	{
		if (*link == gone)
		{
			*link = gone->next;
			return;
		}
	}
}

static void
cache_create(JsonPlugin *p, MemoryContext parent)
{
	HASHCTL		hctl;
	MemoryContextCallback *cb;

	if (!callbacks_registered)
	{
		CacheRegisterRelcacheCallback(relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, catalog_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, catalog_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, catalog_callback, (Datum) 0);
		callbacks_registered = true;
	}
	p->cache_cxt = AllocSetContextCreate(parent, "ptf decoding relations",
										 ALLOCSET_DEFAULT_SIZES);
	hctl.keysize = sizeof(Oid);
	hctl.entrysize = sizeof(PluginRelation);
	hctl.hcxt = p->cache_cxt;
	p->relations = hash_create("ptf decoding relations", 64, &hctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	cb = MemoryContextAlloc(p->cache_cxt, sizeof(MemoryContextCallback));
	cb->func = unlink_plugin;
	cb->arg = p;
	MemoryContextRegisterResetCallback(p->cache_cxt, cb);
	p->next = live_plugins;
	live_plugins = p;
}

static bool
table_wanted(JsonPlugin *p, const char *schema, const char *relname)
{
	ListCell   *lc;

	if (p->tables == NIL)
		return true;
	foreach(lc, p->tables)
	{
		TableName  *name = lfirst(lc);

		if (strcmp(name->relname, relname) == 0 &&
			(name->schema == NULL || strcmp(name->schema, schema) == 0))
			return true;
	}
	return false;
}

/* As the catalog was when the change was made: decoding's snapshot. */
static ReadVerdict
read_verdict(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);

	/* SELECT on the table, or on every column, as a change stream asks */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ALL) != ACLCHECK_OK)
		return READ_NO_SELECT;
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		return READ_RLS;
	return READ_OK;
}

static void
build_entry(JsonPlugin *p, PluginRelation *entry, Relation rel)
{
	char	   *schema = get_namespace_name(RelationGetNamespace(rel));
	const char *relname = RelationGetRelationName(rel);
	MemoryContext old;
	Bitmapset  *identity = NULL;

	if (entry->cxt != NULL)
		MemoryContextReset(entry->cxt);
	else
		entry->cxt = AllocSetContextCreate(p->cache_cxt, "ptf decoding relation",
										   ALLOCSET_SMALL_SIZES);
	memset(&entry->table, 0, sizeof(JsonTable));
	entry->built = false;
	/* an invalidation that arrives while this builds wins */
	entry->valid = true;
	entry->wanted = table_wanted(p, schema, relname);
	if (!entry->wanted)
	{
		entry->built = true;
		return;
	}
	entry->verdict = read_verdict(rel);
	if (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL)
		identity = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY);
	entry->identity_only = !bms_is_empty(identity);

	/*
	 * The database's name too is looked up here, with the first table: a
	 * walsender starts the plugin outside any transaction, where the
	 * catalogs cannot be read.
	 */
	if (p->format.database == NULL)
		p->format.database = MemoryContextStrdup(p->cache_cxt,
												 json_string(get_database_name(MyDatabaseId)));

	old = MemoryContextSwitchTo(entry->cxt);
	entry->table.qualified = json_string(quote_qualified_identifier(schema, relname));
	entry->table.schema = json_string(schema);
	entry->table.name = json_string(relname);
	MemoryContextSwitchTo(old);
	entry->table.layout = json_row_layout(RelationGetDescr(rel), identity, entry->cxt);
	entry->built = true;
}

/* The cache's entry of a relation, current. */
static PluginRelation *
get_relation(JsonPlugin *p, Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	bool		found;
	PluginRelation *entry = hash_search(p->relations, &relid, HASH_ENTER, &found);

	if (!found)
	{
		entry->cxt = NULL;
		entry->valid = false;
		entry->built = false;
	}
	/*
	 * Rebuilt when invalidated, when a build failed half way, and when its
	 * descriptor changed without our noticing.
	 */
	if (!entry->valid || !entry->built ||
		(entry->wanted && entry->table.layout->natts != RelationGetDescr(rel)->natts))
		build_entry(p, entry, rel);
	Assert(entry->built && (!entry->wanted || entry->table.layout != NULL));
	return entry;
}

static void
check_verdict(PluginRelation *entry, Relation rel)
{
	if (entry->verdict == READ_NO_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errdetail("Decoding through deduplicate_keep_first emits a table's rows only to roles that could SELECT them when the change was made."),
				 errhint("Grant SELECT, or leave the table out with the tables option.")));
	if (entry->verdict == READ_RLS)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s has row-level security, which decoding cannot apply",
						RelationGetRelationName(rel)),
				 errhint("Decode as the table's owner or a role that bypasses row-level security, or leave the table out with the tables option.")));
}

/* ---- callbacks ---- */

/* Is this a context of our own change streams (PTF_IN_PROCESS_OPTION given)? */
static bool
in_process_option(List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *elem = lfirst(lc);

		if (strcmp(elem->defname, PTF_IN_PROCESS_OPTION) == 0)
			return true;
	}
	return false;
}

static void
plugin_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	JsonPlugin *p = palloc0(sizeof(JsonPlugin));

	p->cxt = AllocSetContextCreate(ctx->context, "ptf decoding",
								   ALLOCSET_DEFAULT_SIZES);
	ctx->output_plugin_private = p;

	if (in_process_option(ctx->output_plugin_options))
	{
		/* our own input: nothing is written, tuples are handed over */
		p->in_process = true;
		opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
		return;
	}

	opt->output_type = OUTPUT_PLUGIN_TEXTUAL_OUTPUT;
	parse_options(p, ctx->output_plugin_options);
	cache_create(p, ctx->context);
}

/*
 * The in-process consumer of the moment.  A decoding context may outlive
 * one read (a pipeline keeps it between steps): the reader sets its
 * consumer for each read (ptf_decoding_set_sink), and this is asked for it
 * in every callback.
 */
static PtfDecodingSink *
current_sink(JsonPlugin *p)
{
	if (!p->in_process)
		return NULL;
	if (p->sink == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" is for deduplicate_keep_first's own change streams",
						PTF_IN_PROCESS_OPTION),
				 errhint("Leave the option out: the plugin then writes JSON.")));
	return p->sink;
}

void
ptf_decoding_set_sink(LogicalDecodingContext *ctx, PtfDecodingSink *sink)
{
	JsonPlugin *p = ctx->output_plugin_private;

	Assert(p->in_process);
	p->sink = sink;
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

	if (p->cache_cxt != NULL)
		MemoryContextDelete(p->cache_cxt);
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
		json_txn_start(&p->txn, txn->xid, txn->xact_time.commit_time);
}

static void
plugin_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  XLogRecPtr commit_lsn)
{
	JsonPlugin *p = ctx->output_plugin_private;
	PtfDecodingSink *sink = current_sink(p);

	if (sink)
		sink->commit(sink->arg, txn, commit_lsn);
	else
		sweep_stale_entries(p);
}

static void
write_changelog_row(LogicalDecodingContext *ctx, JsonPlugin *p, JsonTable *table,
					RowKind kind, HeapTuple tuple, bool key_only, XLogRecPtr lsn)
{
	if (p->format.code[kind] == NULL)
		return;
	OutputPluginPrepareWrite(ctx, true);
	json_write_changelog_row(ctx->out, &p->format, &p->txn, table, kind, tuple,
							 key_only, lsn);
	OutputPluginWrite(ctx, true);
}

/*
 * A change in the chosen format: one Debezium envelope (before, after), or
 * changelog objects -- an update with its old image logged is two, its
 * UPDATE_BEFORE first.
 */
static void
write_change(LogicalDecodingContext *ctx, JsonPlugin *p, JsonTable *table,
			 RowKind kind, HeapTuple before, bool key_only, HeapTuple after,
			 XLogRecPtr lsn)
{
	if (p->format.debezium)
	{
		if (p->format.code[kind] == NULL)
			return;
		OutputPluginPrepareWrite(ctx, true);
		json_write_debezium(ctx->out, &p->format, &p->txn, table, kind, before,
							key_only, after, lsn);
		OutputPluginWrite(ctx, true);
	}
	else if (kind == ROWKIND_DELETE)
		write_changelog_row(ctx, p, table, kind, before, key_only, lsn);
	else
	{
		if (before != NULL)
			write_changelog_row(ctx, p, table, ROWKIND_UPDATE_BEFORE, before,
								key_only, lsn);
		write_changelog_row(ctx, p, table, kind, after, false, lsn);
	}
}

static void
plugin_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  Relation rel, ReorderBufferChange *change)
{
	JsonPlugin *p = ctx->output_plugin_private;
	PluginRelation *entry;
	MemoryContext old;
	HeapTuple	newtup;
	HeapTuple	oldtup;
	bool		key_only;

	if (p->in_process)
	{
		PtfDecodingSink *sink = current_sink(p);

		sink->change(sink->arg, txn, rel, change);
		return;
	}

	entry = get_relation(p, rel);
	if (!entry->wanted)
		return;
	check_verdict(entry, rel);
	entry->table.desc = RelationGetDescr(rel);

	newtup = change->data.tp.newtuple ? &change->data.tp.newtuple->tuple : NULL;
	oldtup = change->data.tp.oldtuple ? &change->data.tp.oldtuple->tuple : NULL;
	key_only = oldtup != NULL && entry->identity_only;

	old = MemoryContextSwitchTo(p->cxt);
	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			write_change(ctx, p, &entry->table, ROWKIND_INSERT, NULL, false, newtup,
						 change->lsn);
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			if (key_only)
			{
				bool		key_changed;

				/* an old key logged because it is out of line, not changed */
				newtup = ptf_update_key_from_old(rel, newtup, oldtup, change->lsn,
												 &key_changed);
				if (!key_changed)
				{
					oldtup = NULL;
					key_only = false;
				}
			}
			write_change(ctx, p, &entry->table, ROWKIND_UPDATE_AFTER, oldtup, key_only,
						 newtup, change->lsn);
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			/* REPLICA IDENTITY NOTHING logs no old image: nothing to say */
			if (oldtup != NULL)
				write_change(ctx, p, &entry->table, ROWKIND_DELETE, oldtup, key_only,
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
	int			i;

	if (p->in_process)
	{
		PtfDecodingSink *sink = current_sink(p);

		sink->truncate(sink->arg, txn, nrelations, relations, change);
		return;
	}

	if (p->format.truncate_code == NULL)
		return;
	for (i = 0; i < nrelations; i++)
	{
		PluginRelation *entry = get_relation(p, relations[i]);

		if (!entry->wanted)
			continue;
		check_verdict(entry, relations[i]);
		OutputPluginPrepareWrite(ctx, true);
		json_write_truncate(ctx->out, &p->format, &p->txn, &entry->table, change->lsn);
		OutputPluginWrite(ctx, true);
	}
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
