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

#endif							/* PTF_FUNCTIONS_PIPELINES_H */
