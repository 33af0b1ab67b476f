/*-------------------------------------------------------------------------
 *
 * ptf.h
 *	  Vocabulary shared by every room of the extension: row kinds, time,
 *	  GUCs and the one-line helpers the rooms agree on.
 *
 * "PTF" is Flink's name for a process table function: a table function
 * with state, keys, time and a changelog on its input and output.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_H
#define PTF_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"

/* Flink's RowKind: what a row of a changelog means. */
typedef enum RowKind
{
	ROWKIND_INSERT = 0,			/* +I */
	ROWKIND_UPDATE_BEFORE,		/* -U */
	ROWKIND_UPDATE_AFTER,		/* +U */
	ROWKIND_DELETE				/* -D */
} RowKind;

#define ROWKIND_COUNT 4

/* true for +I and +U: the row is an image that now exists */
#define ROWKIND_IS_ADDITION(k) ((k) == ROWKIND_INSERT || (k) == ROWKIND_UPDATE_AFTER)

extern const char *rowkind_short_name(RowKind kind);	/* "+I" */
extern const char *rowkind_long_name(RowKind kind);	/* "INSERT" */
extern bool rowkind_parse(const char *s, RowKind *kind);

/*
 * Time, event or processing, is microseconds since 2000-01-01 like
 * TimestampTz, so timestamp and timestamptz columns need no conversion.
 * -infinity and +infinity are the smallest and largest values.
 */
typedef int64 PtfTime;

#define PTF_TIME_MIN PG_INT64_MIN
#define PTF_TIME_MAX PG_INT64_MAX

extern PtfTime ptf_time_sub(PtfTime t, int64 delta);
extern PtfTime ptf_time_add(PtfTime t, int64 delta);

/*
 * What a row knows about where it came from.  Rows of relations and queries
 * have none of it; rows of a change stream carry the change's LSN, their
 * transaction's commit time and xid, and two warnings: a partial row has
 * only its key columns (an old image under REPLICA IDENTITY DEFAULT), an
 * incomplete one holds unchanged TOAST values the WAL did not carry.
 */
typedef struct PtfRowMeta
{
	XLogRecPtr	lsn;
	TimestampTz commit_time;
	TransactionId xid;
	bool		partial;
	bool		incomplete;
} PtfRowMeta;

struct TupleTableSlot;

typedef void (*PtfMetaRowSink) (void *arg, RowKind kind,
								struct TupleTableSlot *row,
								const PtfRowMeta *meta);

/* GUCs (ptf.c) */
extern int64 ptf_state_ttl_us;	/* ptf.state_ttl, 0 = keep forever */
extern bool ptf_loaded_at_startup;	/* in shared_preload_libraries */
extern bool ptf_in_pipeline_worker; /* this backend runs pipelines */

#endif							/* PTF_H */
