/*-------------------------------------------------------------------------
 *
 * meta.h
 *	  Inside the Citus room: Citus's metadata as its catalogs show it on
 *	  every node (pg_dist_partition, pg_dist_shard, pg_dist_placement,
 *	  pg_dist_node), commands run on other nodes through Citus's own
 *	  connections (master_run_on_worker), the lock Citus takes on a shard
 *	  group's metadata, and the catalog of distributed pipelines.
 *
 * Everything goes through SQL (SPI, which callers have connected), so no
 * symbol of Citus is linked.  The catalogs are Citus's documented ones;
 * the lock tag is read off Citus's resource_lock.h (13.x) and checked by
 * the tests against lock_shard_metadata().
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CITUS_META_H
#define PTF_CITUS_META_H

#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"
#include "storage/lock.h"

typedef enum CitusTableKind
{
	CITUS_NOT,					/* not a Citus table */
	CITUS_HASH,					/* hash-distributed */
	CITUS_REFERENCE,			/* one shard, a copy on every node */
	CITUS_OTHER					/* Citus local, single shard, append: not for pipelines */
} CitusTableKind;

typedef struct CitusTable
{
	Oid			relid;
	CitusTableKind kind;
	char	   *dist_column;	/* CITUS_HASH */
	int			colocation_id;
} CitusTable;

extern void citus_table(Oid relid, CitusTable *out);

/* a shard of a table: its hash range, and its index among the table's shards */
typedef struct CitusShard
{
	int64		shardid;
	int32		lo;
	int32		hi;
	int			index;
} CitusShard;

extern List *citus_shards(Oid relid);	/* of CitusShard, by range */
extern bool citus_shard_of(Oid relid, int64 shardid, CitusShard *out);
extern bool citus_shard_at(Oid relid, int index, CitusShard *out);
extern Oid	citus_shard_table(int64 shardid);	/* the shard's table here, or InvalidOid */
extern Oid	citus_shard_owner_table(int64 shardid); /* the Citus table a shard is of */

typedef struct CitusNode
{
	char	   *host;
	int			port;
	int			nodeid;
	int			groupid;
} CitusNode;

extern bool citus_placement(int64 shardid, CitusNode *node);
extern bool citus_node_by_id(int nodeid, CitusNode *node);
extern bool citus_node_by_name(const char *host, int port, CitusNode *node);
extern int	citus_local_group(void);
extern List *citus_nodes(void); /* of CitusNode: active primaries */

/* a command for a node, and what came of it */
typedef struct CitusCommand
{
	CitusNode	node;
	char	   *sql;
	bool		ok;
	char	   *result;			/* the first value, or the error's message */
} CitusCommand;

/* each in its own connection and transaction, as the current user */
extern void citus_run(List *commands, bool parallel);
extern char *citus_run_one(const CitusNode *node, const char *sql);	/* ERROR unless ok */

/* the lock Citus's writers (shared) and moves (exclusive) take of a group */
extern void citus_group_lock_tag(LOCKTAG *tag, int colocation_id, int shard_index);

/* ---- the query of a pipeline ---- */

/* the call of a pipeline's query, its arguments by name */
typedef struct PipelineCall
{
	Query	   *query;
	FuncExpr   *call;
	char	   *function;
	int			nargs;
	char	  **argnames;
	Node	  **args;			/* the expressions (inside NamedArgExpr, if named) */
} PipelineCall;

extern void pipeline_call(const char *query, PipelineCall *pc);
extern Node *pipeline_call_arg(PipelineCall *pc, const char *name);
extern Oid	pipeline_call_relid(PipelineCall *pc, const char *name); /* NULL::t's table */
extern List *pipeline_call_text_array(PipelineCall *pc, const char *name);

/* ---- the distributed catalog: ptf_citus.pipelines, ptf_citus.handoffs ---- */

typedef struct DistPipeline
{
	char	   *name;
	char	   *owner;			/* a role name: OIDs differ from node to node */
	char	   *query;			/* bound on the coordinator */
	char	   *sink;			/* qualified */
	char	   *sink_mode;
	char	   *function;
	char	   *uid;
	char	   *source;			/* qualified */
	int			colocation_id;
	bool		paused;
	char	   *token;
} DistPipeline;

extern bool dist_catalog_exists(void);
extern void dist_catalog_ensure(void);
extern bool dist_pipeline(const char *name, DistPipeline *out);
extern List *dist_pipelines_of_colocation(int colocation_id);	/* of DistPipeline */

/* a copy of s that outlives SPI_finish (in the caller's memory) */
extern char *citus_keep(const char *s);

/* a text[] of C strings */
extern Datum citus_text_array(List *items);

/* a random token naming one create_pipeline or move */
extern char *citus_new_token(void);

/*
 * A token argument of the nodes' internal functions: what citus_new_token
 * makes (16 hex digits), or '' where allowed.  Anything else is refused:
 * tokens name tables made as the extension's owner.
 */
extern char *citus_token_arg(FunctionCallInfo fcinfo, int argno, bool empty_ok);

#endif							/* PTF_CITUS_META_H */
