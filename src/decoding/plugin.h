/*-------------------------------------------------------------------------
 *
 * plugin.h
 *	  The library is also a logical decoding output plugin
 *	  (_PG_output_plugin_init).  It serves two kinds of consumers:
 *
 *	  - our own change-stream input (input/change_stream.c), which decodes a
 *	    uid's slot inside the calling backend and gets the decoded tuples
 *	    handed over directly, with no text in between;
 *	  - outside consumers (pg_recvlogical, pg_logical_slot_get_changes), who
 *	    get one JSON object per change.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DECODING_PLUGIN_H
#define PTF_DECODING_PLUGIN_H

#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/reorderbuffer.h"
#include "utils/rel.h"

/*
 * An in-process consumer.  A decoding context made with the option
 * PTF_IN_PROCESS_OPTION writes no output: the plugin hands every
 * transaction to the consumer the reader set for its read
 * (ptf_decoding_set_sink).
 */
typedef struct PtfDecodingSink
{
	void		(*begin) (void *arg, ReorderBufferTXN *txn);
	void		(*change) (void *arg, ReorderBufferTXN *txn, Relation rel,
						   ReorderBufferChange *change);
	void		(*truncate) (void *arg, ReorderBufferTXN *txn, int nrelations,
							 Relation *relations, ReorderBufferChange *change);
	void		(*commit) (void *arg, ReorderBufferTXN *txn, XLogRecPtr commit_lsn);
	void	   *arg;
	RepOriginId skip_origin;	/* changes made under it are not ours to read */
} PtfDecodingSink;

#define PTF_IN_PROCESS_OPTION "ptf_in_process"

extern void ptf_decoding_set_sink(LogicalDecodingContext *ctx, PtfDecodingSink *sink);

#endif							/* PTF_DECODING_PLUGIN_H */
