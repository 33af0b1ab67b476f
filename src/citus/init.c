/*-------------------------------------------------------------------------
 *
 * init.c
 *	  The Citus room's part of _PG_init: the hooks of the rooms below,
 *	  its settings, the planner hook that stands in for Citus's shard
 *	  operations, and, when preloaded, the shared memory of drains.
 *	  Nothing of it needs Citus to be there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "citus/citus.h"
#include "citus/drain.h"
#include "citus/move.h"
#include "commands/drops.h"
#include "functions/common.h"
#include "functions/pipelines.h"
#include "state/durable.h"
#include "worker/worker.h"

void
ptf_citus_init(void)
{
	/* the rooms below call in through their hooks */
	ptf_pipeline_hooks.create = ptf_citus_create_pipeline;
	ptf_pipeline_hooks.drop = ptf_citus_drop_pipeline;
	ptf_pipeline_hooks.set_paused = ptf_citus_set_paused;
	ptf_pipeline_hooks.drop_extension = ptf_citus_drop_extension;
	ptf_step_hooks.fence = ptf_citus_fence;
	ptf_step_hooks.drain_wanted = ptf_citus_drain_wanted;
	ptf_step_hooks.step_done = ptf_citus_step_done;
	ptf_stream_table_hook = ptf_citus_check_stream_table;
	ptf_stream_lost_hook = ptf_citus_check_slot_lost;
	ptf_utility_check_hook = citus_check_utility;

	citus_drain_define_gucs();
	citus_move_init();
	if (process_shared_preload_libraries_in_progress && !IsBinaryUpgrade)
		citus_drain_shmem_init();
}
