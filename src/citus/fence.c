/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  Before each step of a pipeline: is it a shard pipeline, and may it
 *	  step here and now?
 *
 * A shard pipeline steps only
 *
 *	- once its distributed pipeline is known: a pending one (its stream
 *	  started by a create_pipeline not yet committed) waits for the row in
 *	  ptf_citus.pipelines with its token; one whose distributed pipeline
 *	  is gone -- dropped, or never committed -- is dropped here, slot,
 *	  state, origin and all;
 *	- while that pipeline is not paused;
 *	- holding Citus's metadata lock of its shard group in share mode, as
 *	  Citus's own writers do, until its step commits: a move blocks the
 *	  group's writes by taking that lock exclusively, so a step never runs
 *	  while the group moves -- unless the move asked it to catch up
 *	  (drain.c), which is why the step then passes;
 *	- where the group is: once a move has placed it elsewhere, the
 *	  pipeline here is dropped -- its state went with the move -- and an
 *	  incoming one takes its state (handoff.c) and goes on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"

#include "catalog.h"
#include "citus/citus.h"
#include "citus/drain.h"
#include "citus/handoff.h"
#include "citus/meta.h"
#include "citus/shard.h"


static bool
group_here(const ShardPipeline *sp)
{
	CitusNode	node;

	return citus_placement(sp->shard, &node) && node.groupid == citus_local_group();
}

/* Citus's lock of the group, shared until the step's transaction ends */
static bool
lock_group(const ShardPipeline *sp)
{
	LOCKTAG		tag;

	citus_group_lock_tag(&tag, sp->colocation_id, sp->shard_index);
	return LockAcquire(&tag, ShareLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

static PtfStepFence
gone(const ShardPipeline *sp, bool draining)
{
	if (draining)
		citus_drain_fail(sp->pipeline);
	shard_pipeline_drop(sp);
	return PTF_STEP_GONE;
}

PtfStepFence
ptf_citus_fence(int32 pipeline_id)
{
	ShardPipeline sp;
	DistPipeline d;
	bool		known;
	bool		draining;

	if (!ptf_citus_present() || !shard_pipeline_by_id(pipeline_id, &sp))
		return PTF_STEP_GO;
	draining = citus_drain_begin(pipeline_id);
	known = dist_pipeline(sp.dist_name, &d);

	if (strcmp(sp.status, "incoming") == 0)
	{
		if (!known)
			return gone(&sp, draining);
		return handoff_activate(&sp, &d);
	}
	if (strcmp(sp.status, "pending") == 0)
	{
		if (known && strcmp(d.token, sp.token) == 0)
		{
			shard_pipeline_set_status(pipeline_id, "active");
			ereport(LOG,
					(errmsg("shard pipeline \"%s\" of distributed pipeline \"%s\" starts", sp.name,
							sp.dist_name)));
		}
		else if (known || sp.age_seconds * 1000 > ptf_citus_pending_timeout_ms)
			return gone(&sp, draining); /* its create_pipeline rolled back */
		else
		{
			if (draining)
				citus_drain_fail(pipeline_id);
			return PTF_STEP_WAIT;
		}
	}
	else if (!known)
		return gone(&sp, draining);

	if (d.paused)
	{
		if (draining)
			citus_drain_fail(pipeline_id);
		return PTF_STEP_PAUSED;
	}
	if (!draining && !lock_group(&sp))
		return PTF_STEP_WAIT;	/* a move holds the group */
	if (!group_here(&sp))
		return gone(&sp, draining); /* moved away: its state went along */
	return PTF_STEP_GO;
}

void
ptf_citus_check_slot_lost(const char *uid)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(uid)};

	if (!ptf_citus_present())
		return;
	ptf_spi_exec_as_owner("SELECT c.dist_name, c.shard::pg_catalog.text FROM ptf.citus_shard_pipelines c "
						  "JOIN ptf.pipeline_registry p ON p.id OPERATOR(pg_catalog.=) c.pipeline "
						  "WHERE p.uid OPERATOR(pg_catalog.=) $1",
						  1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the replication slot of shard group %s of distributed pipeline \"%s\" is gone from this node",
					ptf_spi_text(2), ptf_spi_text(1)),
			 errdetail("Its state is here but its slot is not, as on a physical standby promoted after a failure: PostgreSQL 15 does not keep logical slots on standbys, so the changes since the last step cannot be read, and going on would lose or double them."),
			 errhint("Drop the distributed pipeline on the coordinator and create it again (snapshot => true starts it from the tables as they are).")));
}
