/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  What the rest of the extension asks of its Citus room: pipelines over
 *	  distributed tables, run per shard group on the node that holds it.
 *
 * Citus (github citusdata/citus) splits a hash-distributed table into
 * shards -- ordinary tables such as events_102008 on the worker nodes --
 * and keeps the shards of tables distributed alike ("co-located") on the
 * same node: a shard group is what Flink calls a key group.  A pipeline
 * made on the coordinator over a distributed table becomes one ordinary
 * pipeline per shard group, on the node of the group, reading the shard's
 * changes and writing the co-located sink shard: state, position and sink
 * rows commit in one local transaction, exactly once per shard.  Moves of
 * a group take its pipeline along (move.c, handoff.c).
 *
 * Citus is found at run time, by its catalogs and SQL functions: nothing
 * here links with it, and without it every function below does nothing
 * (or says there is nothing distributed).  The rooms below this one call
 * it through their hooks, which ptf_citus_init sets (ptf_pipeline_hooks,
 * ptf_step_hooks, ptf_stream_table_hook, ptf_stream_lost_hook): nothing
 * of theirs includes this header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CITUS_H
#define PTF_CITUS_H

#include "nodes/nodes.h"
#include "worker/worker.h"

/* Is the citus extension installed in this database? */
extern bool ptf_citus_present(void);

/*
 * ptf.create_pipeline over a Citus table, on the coordinator: checked,
 * made on every shard group's node; true when it was (the caller's work is
 * done), false when the pipeline is not distributed (no Citus table read).
 * bound is the query as create_pipeline bound it.
 */
extern bool ptf_citus_create_pipeline(const char *name, const char *bound, Oid sink,
									  const char *sink_mode);

/* drop_pipeline, pause_pipeline, resume_pipeline of a distributed pipeline */
extern bool ptf_citus_drop_pipeline(const char *name, bool *dropped);
extern bool ptf_citus_set_paused(const char *name, bool paused);

/* changes => true over a Citus table reads nothing on this node: refused */
extern void ptf_citus_check_stream_table(Oid relid);

/*
 * Before a pipeline step, in its transaction: may a shard pipeline step
 * now?  Not while Citus holds its group's metadata lock (a move), nor
 * where its group no longer is; one whose distributed pipeline is gone is
 * dropped here.  Pipelines that are not shard pipelines always go.
 */
extern PtfStepFence ptf_citus_fence(int32 pipeline_id);

/* Does a move wait for this pipeline to catch up (a step is due at once)? */
extern bool ptf_citus_drain_wanted(int32 pipeline_id);

/* After each step: committed or not, and whether it read all there was */
extern void ptf_citus_step_done(int32 pipeline_id, bool committed, bool reached_end);

/* A shard pipeline's slot is gone (a promoted standby): a clear error */
extern void ptf_citus_check_slot_lost(const char *uid);

/* DROP EXTENSION on the coordinator: the distributed catalog goes too */
extern void ptf_citus_drop_extension(void);

/* the commands room's utility check: DDL that would strand a distributed pipeline (ddl.c) */
extern void citus_check_utility(Node *stmt);

/* from _PG_init: the planner hook, and when preloading shared memory */
extern void ptf_citus_init(void);

#endif							/* PTF_CITUS_H */
