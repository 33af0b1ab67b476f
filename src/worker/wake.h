/*-------------------------------------------------------------------------
 *
 * wake.h
 *	  Pipeline workers woken at commit: a worker publishes the tables its
 *	  pipelines read, and every backend's commit that wrote one of them sets
 *	  the worker's latch, so a fresh change is read at once instead of after
 *	  the worker's nap (ptf.pipeline_idle_time, which stays as a fallback).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_WORKER_WAKE_H
#define PTF_WORKER_WAKE_H

extern bool ptf_pipeline_wake_at_commit;	/* GUC */

/* from ptf_worker_init: the GUC; when preloading, shared memory and the callback */
extern void ptf_wake_init(bool preloading);

/*
 * A pipeline worker: the tables whose commits wake it, replacing those it
 * gave before (n == 0: none; n < 0: it does not know them, so any commit
 * that wrote something in its database wakes it).  Cheap when unchanged.
 */
extern void ptf_wake_watch(const Oid *relids, int n);

/*
 * A pipeline worker, before it looks for work: commits that woke it but
 * were not flushed yet (synchronous_commit = off) are flushed, so that
 * logical decoding can read them now rather than after the WAL writer's
 * next round.
 */
extern void ptf_wake_flush_commits(void);

/*
 * Did a live part of this transaction write the table (xact_writes.c)?
 * *known: false when it cannot be told (track_counts off, no table).
 */
extern bool ptf_xact_wrote_table(Oid relid, bool *known);

#endif							/* PTF_WORKER_WAKE_H */
