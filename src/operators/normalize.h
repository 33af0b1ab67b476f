/*-------------------------------------------------------------------------
 *
 * normalize.h
 *	  The last image kept per key (normalize.c): Flink's ChangelogNormalize,
 *	  partial retractions made whole, or nothing kept at all.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_NORMALIZE_H
#define PTF_NORMALIZE_H

#include "operators/operator.h"

typedef enum NormalizeMode
{
	NORMALIZE_PASSTHROUGH,		/* nothing kept: rows go on as they came */
	NORMALIZE_UPSERT,			/* upsert -> retract (Flink's ChangelogNormalize) */
	NORMALIZE_RETRACTIONS		/* -U/-D take the kept image (partial deletes) */
} NormalizeMode;

typedef struct NormalizeOptions
{
	TupleDesc	rowdesc;
	KeySpec    *keys;
	NormalizeMode mode;
	int64		ttl_us;

	/*
	 * A truncation forgets every image without deleting it: for an
	 * operator that passes truncations over (a window aggregate keeps what
	 * was truncated, as it does under REPLICA IDENTITY FULL), so that a key
	 * inserted again is new.
	 */
	bool		truncate_forgets;
} NormalizeOptions;

/* what durable state holds per key: its last image */
extern const StateLayout normalize_layout;

extern PtfOperator *normalize_create(const NormalizeOptions *opts, const PtfOperatorEnv *env);

/* rows passed over: retractions of keys with no image, updates that changed nothing */
extern uint64 normalize_dropped(PtfOperator *op);
extern uint64 normalize_unchanged(PtfOperator *op);

#endif							/* PTF_NORMALIZE_H */
