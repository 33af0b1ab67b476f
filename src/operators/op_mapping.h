/*-------------------------------------------------------------------------
 *
 * op_mapping.h
 *	  op_mapping: how row kinds and users' operation codes correspond
 *	  (Flink's MAP['INSERT, UPDATE_AFTER', 'u', ...], here a jsonb object).
 *
 * TO_CHANGELOG maps kinds to codes: keys are kind names (a key may list
 * several, comma-separated), values the codes.  Kinds left out are dropped.
 * Each kind may appear once; an unknown name is an error.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_OP_MAPPING_H
#define PTF_OP_MAPPING_H

#include "utils/jsonb.h"

#include "ptf.h"

typedef struct OpMapping
{
	bool		mapped[ROWKIND_COUNT];
	char	   *code[ROWKIND_COUNT];	/* the code emitted for each kind */
} OpMapping;

/* the identity: every kind under its own name (INSERT, UPDATE_BEFORE, ...) */
extern void op_mapping_identity(OpMapping *m);

/* kinds -> codes, from a jsonb object; errors 22023 before any row is read */
extern void op_mapping_from_jsonb(Jsonb *j, OpMapping *m, const char *argname);

#endif							/* PTF_OP_MAPPING_H */
