/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The background workers that run pipelines: the launcher (one per
 *	  server) and up to ptf.max_workers_per_database pipeline workers per
 *	  database with pipelines, each running the pipelines of its owners.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_WORKER_H
#define PTF_WORKER_H

/* GUCs */
extern int	ptf_pipeline_batch_size;	/* changes per step, at most */
extern int	ptf_pipeline_idle_ms;	/* nap when nothing is new */
extern int	ptf_pipeline_max_backoff_ms;	/* after failures, at most */
extern int	ptf_pipeline_step_timeout_ms;	/* a step is cancelled after it */
extern int	ptf_max_workers_per_database;	/* owners spread over this many */
extern int	ptf_debug_fault_point;	/* tests: where a step stops */

typedef enum PtfFaultPoint
{
	PTF_FAULT_NONE = 0,
	PTF_FAULT_BEFORE_COMMIT,	/* the step's work is done, not committed */
	PTF_FAULT_AFTER_COMMIT		/* committed, the slot not yet moved on */
} PtfFaultPoint;

/* the replication origin a pipeline's writes carry */
/* a pipeline's replication origin: the prefix, then database and id */
#define PTF_PIPELINE_ORIGIN_PREFIX "ptf_pipeline_"
extern char *ptf_pipeline_origin_name(Oid dboid, int32 id);

/* from _PG_init, when preloading */
extern void ptf_register_launcher(void);

/* from _PG_init: the workers' GUCs, and when preloading their shared memory and launcher */
extern void ptf_worker_init(void);

/*
 * Another room may fence some pipelines' steps (src/citus/: a shard group's
 * pipeline steps only where its group is, and not while it moves).  fence
 * is asked in the step's transaction before the owner's query runs;
 * drain_wanted whether a step is due at once whatever its status says;
 * step_done after each step, committed or not.
 */
typedef enum PtfStepFence
{
	PTF_STEP_GO,				/* step */
	PTF_STEP_WAIT,				/* not now: try again later */
	PTF_STEP_PAUSED,			/* paused elsewhere than the registry */
	PTF_STEP_GONE				/* the pipeline was dropped by the fence */
} PtfStepFence;

typedef struct PtfStepHooks
{
	PtfStepFence (*fence) (int32 pipeline_id);
	bool		(*drain_wanted) (int32 pipeline_id);
	void		(*step_done) (int32 pipeline_id, bool committed, bool reached_end);
} PtfStepHooks;

extern PtfStepHooks ptf_step_hooks;

#endif							/* PTF_WORKER_H */
