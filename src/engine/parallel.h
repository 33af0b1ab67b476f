/*-------------------------------------------------------------------------
 *
 * parallel.h
 *	  Bounded one-shot calls over a relation, run partly in parallel
 *	  workers (parallel.c says how and when).
 *
 * engine/call.c asks ptf_parallel_begin() once the inputs are planned; a
 * call that qualifies gets its workers started, and its rows then come
 * through ptf_parallel_run() -- its own share of the relation and what the
 * workers pass on -- instead of one scan.  In a worker, the same SQL
 * function is called again with the leader's arguments, and ptf_call_run()
 * hands it to ptf_parallel_worker_run().
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_ENGINE_PARALLEL_H
#define PTF_ENGINE_PARALLEL_H

#include "storage/dsm.h"
#include "storage/shm_toc.h"

#include "engine/call.h"

typedef struct PtfParallel PtfParallel;

/* What a parallel call did, for ptf.last_call_stats() */
typedef struct PtfParallelStats
{
	int			workers_planned;
	int			workers_launched;
	uint64		rows_from_workers;	/* rows the leader's frame got from workers */
	uint64		worker_rows;	/* rows of the split input the workers read */
	/* split by key: the workers' states, whose keys are the call's */
	bool		by_key;
	PtfFrameStats workers_state;	/* keys, state_bytes, rows_spilled, spill_partitions summed */
} PtfParallelStats;

/*
 * Leader: start workers for call if it qualifies (inputs planned, frame
 * not yet made); NULL: the call runs serially.  Errors only where the
 * serial call would fail too.
 */
extern PtfParallel *ptf_parallel_begin(PtfCall *call);

/* Leader: the frame's inputs of the workers' partial rows, after the call's (PARTIAL) */
extern void ptf_parallel_add_inputs(PtfParallel *par, PtfFrame *frame);

/* Leader: every input row through the frame (started), workers' output emitted. */
extern void ptf_parallel_run(PtfParallel *par);

/* Leader: after frame_finish; workers gone, parallel mode left. */
extern void ptf_parallel_end(PtfParallel *par, PtfParallelStats *stats);

/* May expr (planned; a function's condition) be evaluated in a parallel worker? */
extern bool ptf_parallel_expr_safe(Node *expr);

/* In a parallel worker of a call: its share, run instead of the serial call. */
extern bool ptf_parallel_in_worker(void);
/* In a worker: how its leader splits the call */
extern PtfParallelMode ptf_parallel_leader_mode(void);
extern void ptf_parallel_worker_run(PtfCall *call);

/* the parallel workers' entry point (CreateParallelContext) */
extern PGDLLEXPORT void ptf_parallel_main(dsm_segment *seg, shm_toc *toc);

#endif							/* PTF_ENGINE_PARALLEL_H */
