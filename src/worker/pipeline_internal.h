/*-------------------------------------------------------------------------
 *
 * pipeline_internal.h
 *	  What the files of a pipeline worker share: the pipelines it loaded,
 *	  the worker itself, and the entry points of the step (step.c) and of
 *	  the assignment of owners to workers (assign.c).  Only worker/
 *	  includes it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_PIPELINE_INTERNAL_H
#define PTF_PIPELINE_INTERNAL_H

#include "base/kept.h"
#include "nodes/pg_list.h"
#include "utils/timestamp.h"

#include "worker/shmem.h"

/* A pipeline as the worker loaded it from ptf.pipeline_registry. */
typedef struct Pipeline
{
	int32		id;
	char	   *name;
	Oid			owner;
	char	   *query;
	Oid			sink;
	char	   *sink_name;		/* the sink's name when it was dropped, or NULL */
	bool		changelog;		/* sink_mode 'changelog' */
	char	   *uid;
	bool		paused;
	char	   *slot_name;		/* its stream's, NULL before its first step */
	char	   *search_path;	/* as it was when the pipeline was made */
	Oid		   *sources;		/* the tables its uid reads, whose commits */
	int			nsources;		/* wake the worker; -1: not known yet */
	bool		has_origin;		/* its replication origin exists here */
} Pipeline;

/* This pipeline worker. */
typedef struct PipelineWorker
{
	int			index;			/* which of the database's workers it is */
	DatabaseWorker *shm;		/* its place in shared memory */
	PtfKeptSet *kept;			/* operators and decoders kept between steps */
	MemoryContext cxt;			/* lives as long as the worker */
} PipelineWorker;

/* step.c: one step of one pipeline, and what comes with it */
extern void pipeline_step_setup(PipelineWorker *w);
extern bool pipeline_run_step(PipelineWorker *w, Pipeline *p, bool *reload);
extern bool pipeline_step_due(Pipeline *p, TimestampTz now, TimestampTz *wake_at);
/* recheck_at: when to look again at a pause not in the registry (Citus), or 0 */
extern void pipeline_record_paused(Pipeline *p, TimestampTz recheck_at);
extern void pipeline_make_origins(List *pipelines);
extern bool pipeline_take_worker_lock(PipelineWorker *w);

/* pipeline.c: a pipeline's uid's slot and tables, as its last step read them */
extern void pipeline_set_slot_name(Pipeline *p, const char *slot_name);
extern void pipeline_set_sources(Pipeline *p, Datum tables, bool isnull);

/* assign.c: which pipelines this worker runs */
extern List *pipeline_assigned(PipelineWorker *w, List *pipelines);
extern void pipeline_forget_dropped(List *pipelines);

#endif							/* PTF_PIPELINE_INTERNAL_H */
