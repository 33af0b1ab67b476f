/*-------------------------------------------------------------------------
 *
 * json_writer.c
 *	  The JSON of the output plugin: values, rows, and the objects around
 *	  them (see json_writer.h and, for the shapes, plugin.c).
 *
 * This is the plugin's hot path: every decoded row of every table passes
 * through json_append_row.  So the work that depends only on the table is
 * done once, in json_row_layout -- keys escaped, output functions looked
 * up -- and the commonest types are written without an output function:
 * integers printed straight into the buffer, text escaped from its bytes.
 * Strings are escaped a run of plain bytes at a time, not byte by byte.
 * The output is byte for byte what escape_json() and the types' output
 * functions give.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "decoding/json_writer.h"

/* a string literal, its length known at compile time */
#define append_literal(out, lit) appendBinaryStringInfo((out), (lit), sizeof(lit) - 1)

/* Unix epoch minus PostgreSQL's, in milliseconds */
#define UNIX_EPOCH_MS ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

/* Debezium's value of a column it does not have (an unchanged TOASTed one) */
#define DEBEZIUM_UNAVAILABLE_VALUE "__debezium_unavailable_value"

static JsonValueKind
json_value_kind(Oid typid)
{
	switch (getBaseType(typid))
	{
		case BOOLOID:
			return JSON_VALUE_BOOL;
		case INT2OID:
		case INT4OID:
			return JSON_VALUE_INT4;
		case INT8OID:
			return JSON_VALUE_INT8;
		case OIDOID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			return JSON_VALUE_NUMBER;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return JSON_VALUE_TEXT;
		case JSONOID:
		case JSONBOID:
			return JSON_VALUE_JSON;
		default:
			return JSON_VALUE_STRING;
	}
}

/*
 * How the rows of a descriptor are written.  identity: the replica
 * identity's columns (attribute numbers offset by
 * FirstLowInvalidHeapAttributeNumber), the only ones of a key-only old
 * image.
 */
JsonRowLayout *
json_row_layout(TupleDesc desc, Bitmapset *identity, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	JsonRowLayout *layout = palloc0(sizeof(JsonRowLayout));
	int			i;

	layout->natts = desc->natts;
	layout->columns = palloc0(sizeof(JsonColumn) * Max(desc->natts, 1));
	layout->values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	layout->nulls = palloc(sizeof(bool) * Max(desc->natts, 1));
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		JsonColumn *col;
		StringInfoData key;

		if (att->attisdropped)
			continue;
		col = &layout->columns[layout->ncolumns++];
		col->index = i;
		col->kind = json_value_kind(att->atttypid);
		col->in_identity = bms_is_member(att->attnum - FirstLowInvalidHeapAttributeNumber,
										 identity);
		col->varlena = att->attlen == -1;
		col->name = pstrdup(NameStr(att->attname));
		initStringInfo(&key);
		escape_json(&key, col->name);
		appendStringInfoChar(&key, ':');
		col->key = key.data;
		col->key_len = key.len;
		if (col->kind == JSON_VALUE_NUMBER || col->kind == JSON_VALUE_JSON ||
			col->kind == JSON_VALUE_STRING)
		{
			Oid			outfunc;
			bool		isvarlena;

			getTypeOutputInfo(att->atttypid, &outfunc, &isvarlena);
			fmgr_info_cxt(outfunc, &col->output, cxt);
		}
	}
	MemoryContextSwitchTo(old);
	return layout;
}

void
json_txn_start(JsonTxn *jt, TransactionId xid, TimestampTz commit_time)
{
	StringInfoData s;

	jt->xid = xid;
	jt->ts_ms = commit_time / 1000 + UNIX_EPOCH_MS;
	/* the session's DateStyle and TimeZone, as psql would show it */
	initStringInfo(&s);
	escape_json(&s, timestamptz_to_str(commit_time));
	strlcpy(jt->commit_time, s.data, sizeof(jt->commit_time));
	pfree(s.data);
}

/*
 * s[0..len) as a JSON string, as escape_json() writes it.  Runs of bytes
 * that need no escape are copied whole.
 */
void
json_append_string(StringInfo out, const char *s, int len)
{
	const char *end = s + len;
	const char *run = s;
	const char *p;

	enlargeStringInfo(out, len + 2);
	out->data[out->len++] = '"';
	for (p = s; p < end; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (likely(c >= 0x20 && c != '"' && c != '\\'))
			continue;
		if (p > run)
			appendBinaryStringInfo(out, run, p - run);
		run = p + 1;
		switch (c)
		{
			case '\b':
				append_literal(out, "\\b");
				break;
			case '\f':
				append_literal(out, "\\f");
				break;
			case '\n':
				append_literal(out, "\\n");
				break;
			case '\r':
				append_literal(out, "\\r");
				break;
			case '\t':
				append_literal(out, "\\t");
				break;
			case '"':
				append_literal(out, "\\\"");
				break;
			case '\\':
				append_literal(out, "\\\\");
				break;
			default:
				appendStringInfo(out, "\\u%04x", c);
				break;
		}
	}
	if (p > run)
		appendBinaryStringInfo(out, run, p - run);
	appendStringInfoCharMacro(out, '"');
}

static inline void
append_raw(StringInfo out, const char *s)
{
	appendBinaryStringInfo(out, s, strlen(s));
}

/*
 * A json value as its output function gave it, without the whitespace
 * between its tokens: json keeps its input's, newlines included, which
 * would break the one object a line that pg_recvlogical writes.  The text
 * is valid JSON, so no string holds a raw control character; whitespace
 * inside strings stays.
 */
static void
append_json_compact(StringInfo out, const char *s)
{
	bool		in_string = false;

	for (; *s != '\0'; s++)
	{
		if (in_string)
		{
			if (*s == '\\' && s[1] != '\0')
				appendStringInfoChar(out, *s++);
			else if (*s == '"')
				in_string = false;
		}
		else if (*s == '"')
			in_string = true;
		else if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
			continue;
		appendStringInfoChar(out, *s);
	}
}

/* What an output function gave, as a JSON number where JSON has one. */
static void
append_number(StringInfo out, const char *s)
{
	if (strcmp(s, "NaN") == 0 || strcmp(s, "Infinity") == 0 ||
		strcmp(s, "-Infinity") == 0)
		json_append_string(out, s, strlen(s));
	else
		append_raw(out, s);
}

static void
append_value(StringInfo out, JsonColumn *col, Datum value)
{
	char	   *s;

	switch (col->kind)
	{
		case JSON_VALUE_BOOL:
			if (DatumGetBool(value))
				append_literal(out, "true");
			else
				append_literal(out, "false");
			return;
		case JSON_VALUE_INT4:
			/* int2 Datums are sign-extended: read as int32 either way */
			enlargeStringInfo(out, 12);
			out->len += pg_ltoa(DatumGetInt32(value), out->data + out->len);
			return;
		case JSON_VALUE_INT8:
			enlargeStringInfo(out, MAXINT8LEN + 1);
			out->len += pg_lltoa(DatumGetInt64(value), out->data + out->len);
			return;
		case JSON_VALUE_TEXT:
			{
				struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));

				json_append_string(out, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
				return;
			}
		case JSON_VALUE_NUMBER:
			append_number(out, OutputFunctionCall(&col->output, value));
			return;
		case JSON_VALUE_JSON:
			s = OutputFunctionCall(&col->output, value);
			/* jsonb's text has no newline; a json's may */
			if (strpbrk(s, "\n\r") != NULL)
				append_json_compact(out, s);
			else
				append_raw(out, s);
			return;
		case JSON_VALUE_STRING:
			s = OutputFunctionCall(&col->output, value);
			json_append_string(out, s, strlen(s));
			return;
	}
	pg_unreachable();
}

/*
 * A row as a JSON object of its columns.  Unchanged TOASTed values of an
 * UPDATE's new image are not in the WAL: they are left out and named in
 * *unchanged_toast (the changelog format), or, without it, written as
 * Debezium's placeholder for a value it does not have (a column simply
 * missing would read as a row without it).  A key-only old image has just
 * the replica identity's columns: the NULLs of the others are not values.
 */
void
json_append_row(StringInfo out, JsonRowLayout *layout, TupleDesc desc,
				HeapTuple tuple, bool key_only, List **unchanged_toast)
{
	bool		first = true;
	int			i;

	Assert(desc->natts == layout->natts);
	heap_deform_tuple(tuple, desc, layout->values, layout->nulls);
	appendStringInfoCharMacro(out, '{');
	for (i = 0; i < layout->ncolumns; i++)
	{
		JsonColumn *col = &layout->columns[i];
		Datum		value = layout->values[col->index];
		bool		isnull = layout->nulls[col->index];
		bool		unchanged;

		if (key_only && !col->in_identity)
			continue;
		unchanged = !isnull && col->varlena && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(value));
		if (unchanged && unchanged_toast)
		{
			*unchanged_toast = lappend(*unchanged_toast, (char *) col->name);
			continue;
		}
		if (!first)
			appendStringInfoCharMacro(out, ',');
		first = false;
		appendBinaryStringInfo(out, col->key, col->key_len);
		if (unchanged)
			append_literal(out, "\"" DEBEZIUM_UNAVAILABLE_VALUE "\"");
		else if (isnull)
			append_literal(out, "null");
		else
			append_value(out, col, value);
	}
	appendStringInfoCharMacro(out, '}');
}

static void
append_lsn(StringInfo out, XLogRecPtr lsn)
{
	appendStringInfo(out, "\"%X/%X\"", LSN_FORMAT_ARGS(lsn));
}

/* ,"lsn":..,"commit_time":..,"xid":..} : where and when, as chosen */
static void
append_changelog_tail(StringInfo out, const JsonFormat *fmt, const JsonTxn *jt,
					  XLogRecPtr lsn)
{
	if (fmt->include_lsn)
	{
		append_literal(out, ",\"lsn\":");
		append_lsn(out, lsn);
	}
	if (fmt->include_commit_time)
	{
		append_literal(out, ",\"commit_time\":");
		append_raw(out, jt->commit_time);
	}
	if (fmt->include_xid)
		appendStringInfo(out, ",\"xid\":%u", jt->xid);
	appendStringInfoCharMacro(out, '}');
}

/* One changelog object: a row of one kind.  Its kind must be mapped. */
void
json_write_changelog_row(StringInfo out, const JsonFormat *fmt, const JsonTxn *jt,
						 const JsonTable *table, RowKind kind, HeapTuple tuple,
						 bool key_only, XLogRecPtr lsn)
{
	List	   *unchanged = NIL;

	Assert(fmt->code[kind] != NULL && !fmt->debezium);
	append_literal(out, "{\"op\":");
	append_raw(out, fmt->code[kind]);
	append_literal(out, ",\"table\":");
	append_raw(out, table->qualified);
	append_literal(out, ",\"data\":");
	if (tuple)
		json_append_row(out, table->layout, table->desc, tuple, key_only, &unchanged);
	else
		append_literal(out, "null");
	if (key_only)
		appendStringInfoString(out, ",\"key_only\":true");
	if (unchanged != NIL)
	{
		ListCell   *lc;

		appendStringInfoString(out, ",\"unchanged_toast\":[");
		foreach(lc, unchanged)
		{
			const char *name = lfirst(lc);

			if (lc != list_head(unchanged))
				appendStringInfoCharMacro(out, ',');
			json_append_string(out, name, strlen(name));
		}
		appendStringInfoCharMacro(out, ']');
		list_free(unchanged);
	}
	append_changelog_tail(out, fmt, jt, lsn);
}

/*
 * One Debezium-style envelope for a change.  Its kind must be mapped.  An
 * unchanged TOASTed value of the new image is Debezium's placeholder
 * (unavailable.value.placeholder's default).
 */
void
json_write_debezium(StringInfo out, const JsonFormat *fmt, const JsonTxn *jt,
					const JsonTable *table, RowKind kind, HeapTuple before,
					bool key_only, HeapTuple after, XLogRecPtr lsn)
{
	Assert(fmt->code[kind] != NULL && fmt->debezium);
	append_literal(out, "{\"op\":");
	append_raw(out, fmt->code[kind]);
	append_literal(out, ",\"before\":");
	if (before)
		json_append_row(out, table->layout, table->desc, before, key_only, NULL);
	else
		append_literal(out, "null");
	append_literal(out, ",\"after\":");
	if (after)
		json_append_row(out, table->layout, table->desc, after, false, NULL);
	else
		append_literal(out, "null");
	appendStringInfoString(out, ",\"source\":{\"connector\":\"deduplicate_keep_first\",\"db\":");
	append_raw(out, fmt->database);
	append_literal(out, ",\"schema\":");
	append_raw(out, table->schema);
	append_literal(out, ",\"table\":");
	append_raw(out, table->name);
	if (fmt->include_lsn)
	{
		append_literal(out, ",\"lsn\":");
		append_lsn(out, lsn);
	}
	if (fmt->include_xid)
		appendStringInfo(out, ",\"txId\":%u", jt->xid);
	if (fmt->include_commit_time)
		appendStringInfo(out, ",\"ts_ms\":" INT64_FORMAT "},\"ts_ms\":" INT64_FORMAT "}",
						 jt->ts_ms, jt->ts_ms);
	else
		append_literal(out, "}}");
}

/* A table's truncation: no row kind, an object of its own. */
void
json_write_truncate(StringInfo out, const JsonFormat *fmt, const JsonTxn *jt,
					const JsonTable *table, XLogRecPtr lsn)
{
	Assert(fmt->truncate_code != NULL);
	appendStringInfoString(out, "{\"op\":");
	append_raw(out, fmt->truncate_code);
	appendStringInfoString(out, ",\"table\":");
	append_raw(out, table->qualified);
	append_changelog_tail(out, fmt, jt, lsn);
}
