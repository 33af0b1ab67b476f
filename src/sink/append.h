/*-------------------------------------------------------------------------
 *
 * append.h
 *	  A pipeline's rows appended to its sink without INSERT's per-row
 *	  work: the query run into a receiver that multi-inserts them
 *	  (sink/direct_insert.c), when the sink and the rows allow it.
 *
 * An 'append' pipeline's step is INSERT INTO sink SELECT * FROM (query).
 * On a sink whose inserts nothing watches (see direct_insert.h) and whose
 * columns are the query's, in order, of the same types -- so that INSERT
 * would neither coerce a value nor fill a default -- the rows go in by
 * table_multi_insert instead, in the same transaction; otherwise the
 * caller runs the statement.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_SINK_APPEND_H
#define PTF_SINK_APPEND_H

/*
 * Run query (a SELECT) and insert its rows into relid; false, having done
 * nothing, when INSERT INTO relid SELECT * FROM (query) must do it.  SPI
 * must be connected.
 */
extern bool append_rows_direct(Oid relid, const char *query);

#endif							/* PTF_SINK_APPEND_H */
