/*-------------------------------------------------------------------------
 *
 * json_writer.h
 *	  The JSON the output plugin writes for outside consumers: rows, the
 *	  changelog objects and Debezium envelopes around them, truncations.
 *
 * The writers know nothing of decoding: they get what a change is made of
 * (a table's cached layout, tuples, a position, its transaction) and append
 * one object to a StringInfo.  Everything that can be worked out once per
 * table -- which columns, their keys already escaped, how each value is
 * written, the output functions -- is in a JsonRowLayout, which the plugin
 * caches per relation and rebuilds when the relation changes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DECODING_JSON_WRITER_H
#define PTF_DECODING_JSON_WRITER_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "access/xlogdefs.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/bitmapset.h"
#include "nodes/pg_list.h"
#include "datatype/timestamp.h"
#include "utils/datetime.h"

#include "base/base.h"

/* the current (and so far only) shape of the objects, see plugin.c */
#define PTF_JSON_FORMAT_VERSION 1

/* how a column's values are written */
typedef enum JsonValueKind
{
	JSON_VALUE_BOOL,			/* true / false */
	JSON_VALUE_INT4,			/* int2, int4: bare, printed here */
	JSON_VALUE_INT8,			/* int8: bare, printed here */
	JSON_VALUE_NUMBER,			/* float, numeric, oid: bare unless NaN/Inf */
	JSON_VALUE_TEXT,			/* text, varchar, bpchar: escaped bytes */
	JSON_VALUE_JSON,			/* json, jsonb: embedded */
	JSON_VALUE_STRING			/* anything else: its text, escaped */
} JsonValueKind;

typedef struct JsonColumn
{
	int			index;			/* in the deformed tuple */
	JsonValueKind kind;
	bool		in_identity;	/* in a key-only old image */
	bool		varlena;
	const char *name;			/* for "unchanged_toast" */
	char	   *key;			/* "name": escaped, colon included */
	int			key_len;
	FmgrInfo	output;			/* unused for BOOL, INT4, INT8, TEXT */
} JsonColumn;

typedef struct JsonRowLayout
{
	int			natts;			/* of the descriptor it was built from */
	int			ncolumns;		/* not dropped */
	JsonColumn *columns;
	Datum	   *values;			/* deform scratch, natts long */
	bool	   *nulls;
} JsonRowLayout;

/* A table as the writers show it: names escaped once, and its layout. */
typedef struct JsonTable
{
	char	   *qualified;		/* "schema.table" as a JSON string */
	char	   *schema;			/* JSON strings, for Debezium's source */
	char	   *name;
	JsonRowLayout *layout;
	TupleDesc	desc;			/* the relation's, set for each change */
} JsonTable;

/* The choices of a consumer, fixed at startup. */
typedef struct JsonFormat
{
	bool		debezium;
	bool		include_lsn;
	bool		include_commit_time;
	bool		include_xid;
	char	   *code[ROWKIND_COUNT];	/* JSON strings; NULL: not written */
	char	   *truncate_code;	/* JSON string of a truncation; NULL: not written */
	char	   *database;		/* JSON string, for Debezium's source */
} JsonFormat;

/* What the objects of one transaction share. */
typedef struct JsonTxn
{
	TransactionId xid;
	int64		ts_ms;			/* commit time, Unix epoch milliseconds */
	char		commit_time[MAXDATELEN + 3];	/* JSON string */
} JsonTxn;

extern JsonRowLayout *json_row_layout(TupleDesc desc, Bitmapset *identity,
									  MemoryContext cxt);
extern void json_txn_start(JsonTxn *jt, TransactionId xid, TimestampTz commit_time);

extern void json_append_string(StringInfo out, const char *s, int len);
extern void json_append_row(StringInfo out, JsonRowLayout *layout, TupleDesc desc,
							HeapTuple tuple, bool key_only, List **unchanged_toast);

extern void json_write_changelog_row(StringInfo out, const JsonFormat *fmt,
									 const JsonTxn *jt, const JsonTable *table,
									 RowKind kind, HeapTuple tuple, bool key_only,
									 XLogRecPtr lsn);
extern void json_write_debezium(StringInfo out, const JsonFormat *fmt,
								const JsonTxn *jt, const JsonTable *table,
								RowKind kind, HeapTuple before, bool key_only,
								HeapTuple after, XLogRecPtr lsn);
extern void json_write_truncate(StringInfo out, const JsonFormat *fmt,
								const JsonTxn *jt, const JsonTable *table,
								XLogRecPtr lsn);

#endif							/* PTF_DECODING_JSON_WRITER_H */
