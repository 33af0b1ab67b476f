/*-------------------------------------------------------------------------
 *
 * pipelines.h
 *	  What other rooms need of pipelines.c: dropping pipelines when their
 *	  owner or the extension goes (commands/drops.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_FUNCTIONS_PIPELINES_H
#define PTF_FUNCTIONS_PIPELINES_H

/*
 * The pipelines of owner, with their state and origins; their slots go
 * once the transaction commits.  SPI must be connected.
 */
extern void ptf_drop_pipelines_of(Oid owner);

/*
 * The replication origins of every pipeline of this database (DROP
 * EXTENSION: the pipelines go with the extension's tables).  Steps of
 * them are kept away until the transaction ends.  SPI must be connected.
 */
extern void ptf_drop_pipeline_origins(void);

/*
 * Insert a row of ptf.pipeline_registry (sql, as the extension's owner):
 * the only inserts that do not make the pipeline paused (a restore's).
 */
extern void ptf_register_pipeline(const char *sql, int nargs, Oid *argtypes, Datum *values);

/*
 * Another room may make, drop and pause some pipelines itself (src/citus/:
 * pipelines over Citus distributed tables).  Each hook returns true when
 * the pipeline was its own and it did the work; drop_extension runs when
 * DROP EXTENSION drops the pipelines.  bound is the query as
 * create_pipeline bound it.
 */
typedef struct PtfPipelineHooks
{
	bool		(*create) (const char *name, const char *bound, Oid sink, const char *sink_mode);
	bool		(*drop) (const char *name, bool *dropped);
	bool		(*set_paused) (const char *name, bool paused);
	void		(*drop_extension) (void);
} PtfPipelineHooks;

extern PtfPipelineHooks ptf_pipeline_hooks;

#endif							/* PTF_FUNCTIONS_PIPELINES_H */
