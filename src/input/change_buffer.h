/*-------------------------------------------------------------------------
 *
 * change_buffer.h
 *	  The changes one read of a change stream decoded, kept until decoding
 *	  is over: (table, kind, origin, row image) in the order decoded, in
 *	  memory up to a limit and in a temporary file past it.
 *
 * Decoding hands each change to a callback of the output plugin, inside
 * logical decoding's machinery: a historic catalog snapshot, a
 * subtransaction that is rolled back after every transaction replayed.
 * Nothing of the operators' (user aggregates, conditions, reads of the
 * state table) may run there, so the stream only records what it decoded
 * here, and hands the records to the operators once decoding has returned
 * -- as a tuplestore would, but for rows of several tables, with what each
 * row knows of its origin.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CHANGE_BUFFER_H
#define PTF_CHANGE_BUFFER_H

#include "access/htup.h"
#include "executor/tuptable.h"
#include "utils/resowner.h"

#include "base/base.h"

typedef struct ChangeBuffer ChangeBuffer;

/*
 * An empty buffer in the current memory context, keeping up to mem_limit
 * bytes in memory; a temporary file past it belongs to owner (the call's
 * resource owner, not decoding's subtransaction's).
 */
extern ChangeBuffer *change_buffer_create(Size mem_limit, ResourceOwner owner);

/*
 * Record a change of the stream's table number `table`: its kind, meta
 * and row (NULL for a row of all NULLs: a truncation).  The row is
 * copied; desc is its layout.
 */
extern void change_buffer_put(ChangeBuffer *b, int table, RowKind kind,
							  const PtfRowMeta *meta, HeapTuple row);

/* How many changes it holds, and whether it went to a file. */
extern uint64 change_buffer_count(ChangeBuffer *b);
extern bool change_buffer_spilled(ChangeBuffer *b);

/*
 * Read the changes in the order they were put, from the first: false at
 * the end.  The row is stored in the heap-tuple slot of its table
 * (slots[table], over tuples[table], whose t_self and t_tableOid the
 * caller set), valid until the next call.  Once reading began nothing more
 * is put.
 */
extern bool change_buffer_next(ChangeBuffer *b, TupleTableSlot **slots,
							   HeapTupleData *tuples, int *table,
							   RowKind *kind, PtfRowMeta *meta);

/* Its file closed and its memory freed. */
/* memory the changes put since the last reset take */
extern Size change_buffer_bytes(ChangeBuffer *b);

/*
 * Empty the buffer after it was read, to be put into again: its memory is
 * kept and used again (a round of a long read costs no new pages).
 */
extern void change_buffer_reset(ChangeBuffer *b);

extern void change_buffer_free(ChangeBuffer *b);

#endif							/* PTF_CHANGE_BUFFER_H */
