/*-------------------------------------------------------------------------
 *
 * dedup.h
 *	  DEDUPLICATE_KEEP_FIRST's operator (dedup.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DEDUP_H
#define PTF_DEDUP_H

#include "operators/operator.h"

typedef struct DedupOptions
{
	TupleDesc	rowdesc;
	KeySpec    *keys;
	bool		event_time;		/* on_time given */
	bool		live_timers;	/* the watermark may move before the end */
	bool		reset_ttl_on_duplicate;
	int64		ttl_us;
} DedupOptions;

/* what durable state holds per key: the pending candidate, if any */
extern const StateLayout dedup_layout;

extern PtfOperator *dedup_create(const DedupOptions *opts, const PtfOperatorEnv *env);

#endif							/* PTF_DEDUP_H */
