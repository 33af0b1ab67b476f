/*-------------------------------------------------------------------------
 *
 * temporal_join.h
 *	  The event-time temporal join's operator (temporal_join.c): Flink's
 *	  TemporalRowTimeJoinOperator over two inputs of the frame.
 *
 * Input 0 is the build side (the versioned changelog), input 1 the probe
 * side: a bounded call reads the build side first, so that order is the
 * inputs' order.  The residual condition is the function's: the operator
 * only calls it, with the probe row and the chosen version.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_TEMPORAL_JOIN_H
#define PTF_TEMPORAL_JOIN_H

#include "operators/operator.h"

#define TJ_INPUT_BUILD	0
#define TJ_INPUT_PROBE	1

/* The residual condition: true when the probe row and the version join. */
typedef bool (*TjConditionFn) (void *arg, TupleTableSlot *probe, TupleTableSlot *build);

typedef struct TemporalJoinOptions
{
	TupleDesc	build_desc;
	TupleDesc	probe_desc;
	TupleDesc	out_desc;		/* (probe, build): two composite columns */
	KeySpec    *keys;			/* the build side's: they pack the state's keys */
	bool		left;			/* LEFT: unmatched probe rows with a NULL build */

	/*
	 * live: the watermark may move before the end of the input (a uid, a
	 * watermark delay, a TTL); otherwise a bounded call's watermark only
	 * jumps to +infinity at its end, after every version has been read.
	 */
	bool		live;
	int64		retention_us;	/* TTL: min retention, 0 or <= 1 ms: none */
	TjConditionFn condition;	/* NULL: none */
	void	   *condition_arg;

	/*
	 * The build side is an upsert source whose primary key is the build
	 * key: its deletes carry only the key (partial rows, with no time), and
	 * a delete is a deletion at the time of the key's last row written,
	 * kept per key (as Flink's ChangelogNormalize keeps the last row).
	 */
	bool		upsert_build;
} TemporalJoinOptions;

/* what durable state holds: per key, per version, per buffered probe time */
extern const StateLayout temporal_join_layout;
/* the same, and per key the time of its last row written (upsert_build) */
extern const StateLayout temporal_join_upsert_layout;

/* an upsert build side's deletes of keys with no row written (passed over) */
extern uint64 temporal_join_unknown_deletes(PtfOperator *op);

#define TJ_NSPACES 3

extern PtfOperator *temporal_join_create(const TemporalJoinOptions *opts,
										 const PtfOperatorEnv *env);

#endif							/* PTF_TEMPORAL_JOIN_H */
