/*-------------------------------------------------------------------------
 *
 * unlogged.h
 *	  ALTER TABLE ... SET UNLOGGED refused on a table a change stream reads
 *	  (unlogged.c), from the utility hook (commands/drops.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_UNLOGGED_H
#define PTF_UNLOGGED_H

#include "nodes/parsenodes.h"

extern void ptf_refuse_unlogging_streamed(AlterTableStmt *stmt);

#endif							/* PTF_UNLOGGED_H */
