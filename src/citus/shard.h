/*-------------------------------------------------------------------------
 *
 * shard.h
 *	  Inside the Citus room: the pipelines of shard groups on a node
 *	  (ptf.citus_shard_pipelines), and what the room's files share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CITUS_SHARD_H
#define PTF_CITUS_SHARD_H

#include "access/xlogdefs.h"
#include "storage/lockdefs.h"

/* a row of ptf.citus_shard_pipelines, with its pipeline's name and uid */
typedef struct ShardPipeline
{
	int32		pipeline;
	char	   *name;			/* the local pipeline's: dist_name/shard */
	char	   *uid;
	char	   *dist_name;
	char	   *token;
	int64		shard;
	int64	   *shards;
	int			nshards;
	int			colocation_id;
	int			shard_index;
	char	   *status;			/* pending, active, incoming */
	Oid			handoff_table;
	double		age_seconds;	/* since it was made */
	char	   *slot_name;		/* its uid's, or NULL */
} ShardPipeline;

extern bool shard_pipeline_by_id(int32 pipeline, ShardPipeline *sp);
extern bool shard_pipeline_by_name(const char *dist_name, int64 shard, ShardPipeline *sp);
extern List *shard_pipelines_of_shards(const int64 *shards, int nshards);	/* active ones */
extern void shard_pipeline_set_status(int32 pipeline, const char *status);
extern void shard_pipeline_drop(const ShardPipeline *sp);

/* the query of the shard pipeline of dist_query's pipeline for a shard here */
extern char *shard_query(const char *dist_query, const char *sink, const char *sink_mode,
						 int64 shard, Oid *sink_shard, int64 **shards, int *nshards);

/* create.c: the lock moves of a colocation group take */
extern void citus_lock_colocation(int colocation_id, LOCKMODE mode);

/* drain.c: have the pipeline catch up with all that committed, and wait */
extern void citus_drain(const ShardPipeline *sp);

#endif							/* PTF_CITUS_SHARD_H */
