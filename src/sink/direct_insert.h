/*-------------------------------------------------------------------------
 *
 * direct_insert.h
 *	  The keys of a batch that the table does not have, inserted as COPY
 *	  inserts rows: table_multi_insert and index insertion, no statement.
 *
 * apply_changelog's batches upsert each key's last row.  Most keys of a
 * backlog are new to the table; for them INSERT ... ON CONFLICT pays a
 * conflict pre-check, a speculative insertion and its confirmation per
 * row.  On a table where nothing watches inserts -- a plain table, not a
 * partition, without insert triggers (foreign keys and deferred
 * constraints are triggers), row-level security or stored generated
 * columns -- the sink probes the key index itself and inserts the rows
 * whose key is absent directly, checking NOT NULL and CHECK constraints
 * and every unique and exclusion index as an INSERT would.  The rows
 * whose key is there (or being written by another transaction) go to
 * the statement as before.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_SINK_DIRECT_INSERT_H
#define PTF_SINK_DIRECT_INSERT_H

#include "access/tupdesc.h"
#include "executor/tuptable.h"

typedef struct DirectInsert DirectInsert;

/* Could rows go into the table directly (as direct_insert_open checks)? */
extern bool direct_insert_possible(Oid relid);

/*
 * Open the table for one batch; NULL when its inserts must go through SQL
 * (whatever would watch them is checked anew each batch).  rowdesc is
 * the table's row type, as the batch's rows are formed (NULL: the
 * relation's).  Without a key index (InvalidOid) rows are only inserted:
 * direct_insert_sort and direct_insert_key_exists are not for it.
 */
extern DirectInsert *direct_insert_open(Oid relid, Oid key_index, TupleDesc rowdesc);

/*
 * Sort rows (composite datums of the table's row type) in the key index's
 * order, in place: index insertions then touch pages in order.
 */
extern void direct_insert_sort(DirectInsert *di, Datum *rows, int n);

/* Has the table a row of this row's key, or one being written? */
extern bool direct_insert_key_exists(DirectInsert *di, Datum row);

/* Insert a row (whose key is absent); buffered. */
extern void direct_insert_add(DirectInsert *di, Datum row);

/* The same for a row in a slot of the table's row type. */
extern void direct_insert_add_slot(DirectInsert *di, TupleTableSlot *row);

/* Insert what is buffered, close everything; the rows inserted. */
extern uint64 direct_insert_close(DirectInsert *di);

#endif							/* PTF_SINK_DIRECT_INSERT_H */
