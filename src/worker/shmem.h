/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  What the background workers share with everyone: which databases want
 *	  pipeline workers (up to ptf.max_workers_per_database each, one entry
 *	  per worker, all of a database's entries carrying its OID), and each
 *	  pipeline's live status.
 *
 * Shared memory is a cache of what the workers are doing, never state: it
 * is rebuilt (empty) after every restart; the truth is in tables.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_WORKER_SHMEM_H
#define PTF_WORKER_SHMEM_H

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "storage/latch.h"

#define PTF_MAX_ERROR_LEN 512

typedef enum PipelineState
{
	PIPELINE_WAITING = 0,		/* no worker has taken it up yet */
	PIPELINE_RUNNING,
	PIPELINE_PAUSED,
	PIPELINE_FAILING			/* its last step failed; retried later */
} PipelineState;

/* A pipeline as its worker last saw it. */
typedef struct PipelineStatus
{
	Oid			dboid;			/* InvalidOid: free */
	int32		id;				/* in ptf.pipeline_registry */
	PipelineState state;
	int			pid;			/* the worker it is assigned to, 0: none */
	uint64		rows_in;
	uint64		rows_out;
	uint64		rows_late;
	uint64		rows_skipped;
	XLogRecPtr	position;		/* end of the last transaction it processed */
	XLogRecPtr	read_upto;		/* its last step read the WAL up to here */
	TimestampTz read_at;		/* ... and began then */
	TimestampTz last_change_at; /* commit time of the newest change it processed */
	TimestampTz last_step_at;
	bool		caught_up;		/* its last step read all that had committed */
	TimestampTz wake_at;		/* its uid has more to do then without new
								 * changes (the idle rule), 0: nothing */
	int			failures;		/* steps failed in a row */
	TimestampTz retry_at;
	char		last_error[PTF_MAX_ERROR_LEN];
} PipelineStatus;

/*
 * One pipeline worker of a database that has (or may have) pipelines.  A
 * database has one entry per worker, told apart by index: worker 0 is the
 * one the launcher starts, the others are asked for by the running ones.
 */
typedef struct DatabaseWorker
{
	Oid			dboid;			/* InvalidOid: free */
	int			index;			/* 0 .. ptf.max_workers_per_database - 1 */
	bool		wanted;			/* the launcher should keep a worker there */
	int			pid;			/* 0: none running */
	Latch	   *latch;			/* the worker's, to wake it */
	uint64		generation;		/* bumped whenever its pipelines change */
	bool		left_cleanly;	/* its last worker found nothing to run */
	TimestampTz retry_at;		/* after a worker failed to start or died */
	bool		start_failed;	/* no background worker could be had for it */
	int32		stepping;		/* the pipeline whose step runs now, 0: none */
} DatabaseWorker;

/* a database's workers, at most; the bits of a worker set below */
#define PTF_MAX_WORKERS_PER_DATABASE 64

extern int	ptf_max_workers;	/* GUCs, fixed at server start */
extern int	ptf_max_pipelines;

extern void ptf_shmem_init(void);	/* from _PG_init, when preloading */
extern bool ptf_shmem_available(void);

/* The shared lock around everything below. */
extern void ptf_shmem_lock(bool exclusive);
extern void ptf_shmem_unlock(void);

/* launcher */
extern void ptf_shmem_set_launcher(Latch *latch);
extern void ptf_wake_launcher(void);
extern bool ptf_take_probe_all(void);	/* look at every database again? */
extern void ptf_forget_database(Oid dboid); /* dropped: its statuses go (under the lock) */

/* databases' workers (under the lock) */
extern DatabaseWorker *ptf_database_worker(Oid dboid, int index, bool create);
extern DatabaseWorker *ptf_database_worker_at(int i);
extern DatabaseWorker *ptf_database_worker_of_pid(Oid dboid, int pid);

/*
 * Workers 0 .. n-1 of a database wanted (those a place can be found for);
 * returns the set (bit i: worker i) of those the database's pipelines are
 * shared out over.  *added: the launcher has a worker to start.
 */
extern uint64 ptf_database_workers_want(Oid dboid, int n, bool *added);

/* ask for a worker in a database, and wake its workers (pipelines changed) */
extern void ptf_request_worker(Oid dboid);

/* pipelines' status (under the lock) */
extern PipelineStatus *ptf_pipeline_status(Oid dboid, int32 id, bool create);
extern PipelineStatus *ptf_pipeline_status_at(int i);
extern void ptf_pipeline_status_forget(Oid dboid, int32 id);

#endif							/* PTF_WORKER_SHMEM_H */
