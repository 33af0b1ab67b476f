/*-------------------------------------------------------------------------
 *
 * drain.h
 *	  Inside the Citus room: shard pipelines made to catch up at once
 *	  (drain.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CITUS_DRAIN_H
#define PTF_CITUS_DRAIN_H

extern int	ptf_citus_drain_timeout_ms; /* GUC ptf.citus_drain_timeout */
extern int	ptf_citus_pending_timeout_ms;	/* GUC ptf.citus_pending_timeout */

/* the pipeline worker: is this step a drain?  (it then passes the fence) */
extern bool citus_drain_begin(int32 pipeline_id);

/* the pipeline worker: the drain asked of this pipeline cannot be done */
extern void citus_drain_fail(int32 pipeline_id);

extern void citus_drain_shmem_init(void);
extern void citus_drain_define_gucs(void);

#endif							/* PTF_CITUS_DRAIN_H */
