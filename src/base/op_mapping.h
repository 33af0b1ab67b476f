/*-------------------------------------------------------------------------
 *
 * op_mapping.h
 *	  op_mapping: how row kinds and users' operation codes correspond
 *	  (Flink's MAP['INSERT, UPDATE_AFTER', 'u', ...], here a jsonb object).
 *
 * TO_CHANGELOG maps kinds to codes: keys are kind names (a key may list
 * several, comma-separated), values the codes.  Kinds left out are dropped.
 * The key READ, no kind of Flink's, codes the inserts that were read from a
 * table rather than decoded from the WAL -- a snapshot's rows -- as
 * Debezium's op 'r' does; without it they get INSERT's code.  The key
 * TRUNCATE codes a change stream's truncation of its table, a row of its
 * own (Debezium's op 't'); without it a truncation is not a row.
 *
 * FROM_CHANGELOG maps codes to kinds: keys are codes (a key may list
 * several: 'c, r'), values kind names; 'UPDATE_BEFORE, UPDATE_AFTER' makes
 * one row an update (Debezium's 'u').  Codes are matched exactly.
 *
 * Either way each kind appears once, and an unknown kind name is an error
 * (22023), raised before any row is read.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_OP_MAPPING_H
#define PTF_OP_MAPPING_H

#include "utils/jsonb.h"

#include "base/base.h"

typedef struct OpMapping
{
	bool		mapped[ROWKIND_COUNT];
	char	   *code[ROWKIND_COUNT];	/* the code emitted for each kind */
	char	   *read_code;		/* key READ: the code of inserts read from a
								 * table, not from the WAL (Debezium's 'r');
								 * NULL: INSERT's */
	char	   *truncate_code;	/* key TRUNCATE: the code of a change stream's
								 * truncation, a row of its own (Debezium's
								 * 't'); NULL: not mapped */
} OpMapping;

/* the identity: every kind under its own name (INSERT, UPDATE_BEFORE, ..., TRUNCATE) */
extern void op_mapping_identity(OpMapping *m);

/* kinds -> codes, from a jsonb object */
extern void op_mapping_from_jsonb(Jsonb *j, OpMapping *m, const char *argname);

/* FROM_CHANGELOG's direction: codes -> kinds */
typedef struct CodeMapping
{
	int			ncodes;
	char	  **codes;
	int		   *lens;
	RowKind    *kind;			/* what each code means */
	bool	   *update_pair;	/* ... or -U then +U from one row */
	bool		mapped[ROWKIND_COUNT];	/* kinds some code means */
} CodeMapping;

/* the identity: each kind's name means it */
extern void code_mapping_identity(CodeMapping *m);

/* codes -> kinds, from a jsonb object */
extern void code_mapping_from_jsonb(Jsonb *j, CodeMapping *m, const char *argname);

/* the entry of a code, or -1 */
extern int	code_mapping_lookup(const CodeMapping *m, const char *code, int len);

#endif							/* PTF_OP_MAPPING_H */
