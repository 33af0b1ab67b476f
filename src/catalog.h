/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The extension's own SQL catalogs (schema ptf), reached through SPI as
 *	  the extension's owner: callers have no rights on them and see them
 *	  only through our functions and views (doc/design.md §5).  Also the locks the
 *	  extension serializes on, and relation names for SQL text.
 *
 * Registry rows are read column by column through the Anum_ constants
 * below (as pg_cron reads its job table), never by position in an ad hoc
 * select list: a query built from the *_COLUMNS list returns the columns
 * in exactly the Anum_ order.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CATALOG_H
#define PTF_CATALOG_H

#include "storage/lockdefs.h"

/* ---- ptf.uid_registry: one row per uid of durable state ---- */
typedef enum
{
	Anum_uid_registry_uid = 1,
	Anum_uid_registry_function,
	Anum_uid_registry_owner,
	Anum_uid_registry_row_type,
	Anum_uid_registry_key_columns,
	Anum_uid_registry_on_time,
	Anum_uid_registry_time_type,
	Anum_uid_registry_state_table,
	Anum_uid_registry_max_event_time,
	Anum_uid_registry_watermark,
	Anum_uid_registry_slot_name,
	Anum_uid_registry_options,
	Anum_uid_registry_last_lsn,
	Anum_uid_registry_version,
	Anum_uid_registry_keys,
	Anum_uid_registry_rows_in,
	Anum_uid_registry_rows_out,
	Anum_uid_registry_rows_late,
	Anum_uid_registry_rows_skipped,
	Anum_uid_registry_created_at,
	Anum_uid_registry_updated_at,
	/* 1.1 */
	Anum_uid_registry_layout,
	Anum_uid_registry_row_types,
	Anum_uid_registry_input_times,
	Anum_uid_registry_stream_snapshot,
	Anum_uid_registry_input_tables,
	/* 1.2 */
	Anum_uid_registry_handover_roles,
	Anum_uid_registry_handover_xids,
	Anum_uid_registry_skip_lsn,
	Anum_uid_registry_xmin,		/* the system column, last in the list */
	Natts_uid_registry_select = Anum_uid_registry_xmin
} UidRegistryColumn;

/* every column above, in order, for "SELECT " UID_REGISTRY_COLUMNS " FROM ptf.uid_registry" */
#define UID_REGISTRY_COLUMNS \
	"uid, function, owner, row_type, key_columns, on_time, time_type, state_table, " \
	"max_event_time, watermark, slot_name, options, last_lsn, version, keys, " \
	"rows_in, rows_out, rows_late, rows_skipped, created_at, updated_at, " \
	"layout, row_types, input_times, stream_snapshot, input_tables, " \
	"handover_roles, handover_xids, skip_lsn, xmin"

/* ---- ptf.pipeline_registry: one row per pipeline ---- */
typedef enum
{
	Anum_pipeline_registry_id = 1,
	Anum_pipeline_registry_name,
	Anum_pipeline_registry_owner,
	Anum_pipeline_registry_query,
	Anum_pipeline_registry_sink,
	Anum_pipeline_registry_sink_mode,
	Anum_pipeline_registry_function,
	Anum_pipeline_registry_uid,
	Anum_pipeline_registry_paused,
	Anum_pipeline_registry_search_path,
	Anum_pipeline_registry_created_at,
	Anum_pipeline_registry_sink_name,	/* 1.1 */
	Natts_pipeline_registry = Anum_pipeline_registry_sink_name
} PipelineRegistryColumn;

#define PIPELINE_REGISTRY_COLUMNS_1_0 \
	"id, name, owner, query, sink, sink_mode, function, uid, paused, search_path, created_at"
#define PIPELINE_REGISTRY_COLUMNS PIPELINE_REGISTRY_COLUMNS_1_0 ", sink_name"

/* The version of the extension's SQL objects this library needs. */
#define PTF_SQL_VERSION "1.2"

/*
 * The extension's SQL objects must be of PTF_SQL_VERSION: after the
 * library was updated, ALTER EXTENSION ... UPDATE must follow before the
 * catalogs are used.  SPI must be connected.
 */
extern void ptf_check_sql_version(void);

/* Run one statement as the owner of schema ptf; elog unless rc == expected. */
extern int	ptf_spi_exec_as_owner(const char *sql, int nargs, Oid *argtypes,
								  Datum *values, const char *nulls, int expected);

/* A logical slot of our output plugin, made as the extension's owner. */
extern void ptf_create_logical_slot(const char *name);

/* Columns of the first row SPI returned, by number (Anum_ constants). */
extern bool ptf_spi_isnull(int col);
extern Datum ptf_spi_datum(int col);
extern char *ptf_spi_text(int col);	/* NULL when NULL */
extern int64 ptf_spi_int64(int col, int64 if_null);

/* ptf.watermarks: the delay declared for relid's on_time column, or -1 */
extern int64 ptf_declared_watermark_delay(Oid relid, const char *on_time);

/* Name of a relation for messages and SQL text, schema-qualified, quoted. */
extern char *ptf_relation_sql_name(Oid relid);

/*
 * The extension's locks.  They are advisory locks of a kind no SQL
 * function takes (pg_advisory_lock can neither take nor squat them), one
 * class per thing serialized, an id within it.
 */
typedef enum PtfLockClass
{
	PTF_LOCK_UID = 1,			/* calls of one uid: ptf_lock_uid() */
	PTF_LOCK_PIPELINE = 2,		/* a pipeline's changes vs its steps (id) */
	PTF_LOCK_WORKER = 3,		/* the one pipeline worker of a database */
	PTF_LOCK_ROLE_STREAMS = 4,	/* first calls of one role (id: role OID) */
	PTF_LOCK_SLOT = 5			/* a slot made, until its registry row commits */
} PtfLockClass;

/*
 * The lock of one uid's calls: its tag holds 63 bits of the name's hash,
 * so that no role can find a uid of its own whose lock is another's.
 */
extern bool ptf_lock_uid(const char *uid, LOCKMODE mode, bool session, bool wait);

/*
 * The lock of a slot of ours by name: its maker holds it from before the
 * slot exists to the end of its transaction, which writes what refers to
 * the slot (ptf_create_logical_slot); the drop of orphaned slots takes it
 * to know the maker's transaction has ended.
 */
extern bool ptf_lock_slot(const char *name, bool wait);

/* false only when wait is false and someone else holds it */
extern bool ptf_lock(PtfLockClass cls, uint32 id, LOCKMODE mode, bool session,
					 bool wait);

#endif							/* PTF_CATALOG_H */
