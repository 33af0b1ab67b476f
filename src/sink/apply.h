/*-------------------------------------------------------------------------
 *
 * apply.h
 *	  Applying a changelog to a table: the sink of ptf.apply_changelog()
 *	  (and of pipelines).
 *
 * On a table with a key (its primary key, else its replica identity
 * index) +I and +U upsert by the key and -U and -D delete by it.  Changes
 * are gathered in batches in which only the last change of each key is
 * applied -- the table ends as the changes in order would leave it -- by
 * one DELETE and one INSERT ... ON CONFLICT DO UPDATE per batch (where
 * order does not matter, changes that outgrow work_mem are sorted by key
 * first, and each key's last change applied once); on a
 * table with other unique or exclusion constraints, a batch whose key
 * order collides is applied again change by change, in order.  On a
 * table without a key, changes are applied in order: additions inserted,
 * retractions deleting one row equal in every column.
 *
 * Statements run through SPI as the caller: privileges, row-level
 * security, constraints and triggers apply as to the caller's own SQL.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_SINK_APPLY_H
#define PTF_SINK_APPLY_H

#include "executor/tuptable.h"

#include "base/base.h"

typedef struct ApplyCounts
{
	uint64		received[ROWKIND_COUNT];	/* changes read, per kind */
	uint64		inserted;		/* rows of the table inserted */
	uint64		updated;		/* rows of the table replaced */
	uint64		deleted;		/* rows of the table deleted */
	uint64		missing;		/* retractions whose row was not there */
	uint64		superseded;		/* changes overtaken by a later change of
								 * their key in the same batch */
} ApplyCounts;

typedef struct ApplySink ApplySink;

/*
 * Plan the statements for the table, whose row type rows have.  Checks
 * privileges first (INSERT, UPDATE and DELETE).  SPI must be connected.
 */
extern ApplySink *apply_sink_create(Oid relid);

/* the table's row type */
extern TupleDesc apply_sink_rowdesc(ApplySink *s);

/*
 * The columns of the row type a retraction is applied by (its key: they
 * alone are read of it), per column; NULL when the table has no key (a
 * retraction deletes a row equal in every column).
 */
extern const bool *apply_sink_key_columns(ApplySink *s);

/* One change; may apply a batch (through a nested SPI connection). */
extern void apply_sink_put(ApplySink *s, RowKind kind, TupleTableSlot *row);

/* Apply what is left; the counts. */
extern void apply_sink_finish(ApplySink *s, ApplyCounts *counts);

#endif							/* PTF_SINK_APPLY_H */
