/*-------------------------------------------------------------------------
 *
 * key.h
 *	  Partition keys: which columns of a row form the key, how they hash,
 *	  how they compare, and how a key is packed into state.
 *
 * Equality and hashing are the column types' own (the default hash
 * opclass, with the column's collation), so numeric 1.0 equals 1.00 and
 * text compares under its collation, exactly as GROUP BY would.  NULLs
 * are equal to each other (GROUP BY semantics).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_KEY_H
#define PTF_KEY_H

#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "fmgr.h"

typedef struct KeyColumn
{
	AttrNumber	attno;			/* in the input row type */
	Oid			typid;
	Oid			collation;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	char		typstorage;		/* 'p': its functions want 4-byte headers */
	bool		bitwise_eq;		/* equality is equality of the datum bits */
	char		int_hash;		/* hashint2/4/8 called directly: '2', '4', '8'; else 0 */
	FmgrInfo	eq;
	FmgrInfo	hash;
} KeyColumn;

typedef struct KeySpec
{
	int			ncols;			/* 0: one global partition */
	KeyColumn  *cols;
	TupleDesc	desc;			/* the key columns as a row of their own */

	/*
	 * one int2/int4/int8 column, by value and equal by its bits: probed,
	 * hashed and compared without the loops over columns (key.c)
	 */
	bool		one_int;

	/* the key of the row being looked up, filled by key_probe() */
	Datum	   *probe_values;
	bool	   *probe_nulls;
	bool		probe_has_nulls;
} KeySpec;

/*
 * Resolve column names against a row type.  Errors (before any row is
 * read): unknown column, a column named twice, a type with no hash
 * equality.  argname names the argument in messages ("partition_by").
 */
extern KeySpec *key_spec_build(TupleDesc rowdesc, Datum names_array,
							   const char *argname);
extern KeySpec *key_spec_from_attnos(TupleDesc rowdesc, int ncols,
									 const AttrNumber *attnos);

/* The same key columns, built anew (in the current memory context) over rowdesc. */
extern KeySpec *key_spec_copy(const KeySpec *keys, TupleDesc rowdesc);

/*
 * The keys' hash and equality may run in a parallel worker: their own
 * functions, and those they call for the parts of a key of a composite,
 * array or range type.
 */
extern bool key_spec_parallel_safe(const KeySpec *keys);

/* Extract the key of a row into the probe, return its hash. */
extern uint32 key_probe(KeySpec *spec, TupleTableSlot *row);
/* The same without the hash, for a row whose hash is known. */
extern void key_probe_fill(KeySpec *spec, TupleTableSlot *row);

/* Packed keys: the key columns in heap data layout, after a null bitmap. */
extern Size key_packed_size(KeySpec *spec);
extern void key_pack(KeySpec *spec, char *dst);
extern bool key_packed_equals_probe(KeySpec *spec, const char *packed,
									bool has_nulls);
extern void key_unpack(KeySpec *spec, const char *packed, bool has_nulls,
					   Datum *values, bool *nulls);

/* Hash of unpacked key values (loading state) */
extern uint32 key_hash_values(KeySpec *spec, Datum *values, bool *nulls);
extern void key_probe_values(KeySpec *spec, Datum *values, bool *nulls);

/* Look up a column by name, with the argument's name in the error. */
extern AttrNumber ptf_column_attno(TupleDesc desc, const char *colname,
								   const char *argname);

#endif							/* PTF_KEY_H */
