/*-------------------------------------------------------------------------
 *
 * layout.h
 *	  Declared state layouts: what an operator stores per key and per
 *	  namespace, field by field, and the codec that turns its values into
 *	  those fields and back.
 *
 * Durable state tables are made from the declaration (state/state_table.c):
 * a row per key and a row per (key, namespace), with the key columns in
 * their own types, the namespace, the key's expiry, then one column per
 * field -- NULL where a row has no such field.  Row images are stored as
 * bytes (bytea) rather than as the source's composite type, so a state
 * table depends on no user type: the source can be altered or dropped.
 * The row types the images are rows of are recorded with the uid and
 * checked whenever its state is loaded.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_LAYOUT_H
#define PTF_LAYOUT_H

#include "access/htup.h"

#include "state/keyed_state.h"

/* The version of the state table layout this code writes. */
#define STATE_LAYOUT_VERSION 2

typedef enum StateFieldType
{
	SF_INT8,					/* bigint */
	SF_TIME,					/* the uid's time type (PtfTime in and out) */
	SF_BOOL,
	SF_BYTEA,					/* the operator's own bytes (bytea in and out) */
	SF_IMAGE,					/* a row of an input: MinimalTuple in and out */
	SF_IMAGES					/* rows of an input: StateImages in and out */
} StateFieldType;

typedef struct StateField
{
	const char *name;			/* the column's name in the state table */
	StateFieldType type;
	int			input;			/* SF_IMAGE(S): rows of which input */
} StateField;

/*
 * timer_field: an SF_TIME field that holds, in every row with a pending
 * event-time timer, a time no later than that timer and later than the
 * watermark the row was written under (NULL in rows with none): a key
 * with a pending timer has at least one such row.  State read a key at a
 * time finds the keys whose timers come due through it -- the rows whose
 * field lies between the stored watermark and the watermark the call's
 * rows reach -- so a row must not claim a time its timer has passed.  A
 * layout without one (NULL) is read whole when it has timers.
 */
typedef struct StateLayout
{
	int			nfields;
	const StateField *fields;
	const char *timer_field;
} StateLayout;

/* Several rows in one field. */
typedef struct StateImages
{
	int			n;
	MinimalTuple *tuples;
} StateImages;

/*
 * Rows of desc as bytes: MinimalTuples with TOASTed values inlined, and
 * back (every value checked to lie within its row).  What SF_IMAGES fields
 * hold; operators may use it for rows in their own SF_BYTEA fields.
 */
extern bytea *state_images_to_bytea(const StateImages *imgs, TupleDesc desc);
extern StateImages *state_images_from_bytea(bytea *b, TupleDesc desc);

/* The space of a key's own value (not a namespace). */
#define STATE_KEY_SPACE (-1)

/*
 * An operator's values as fields.  save fills values/nulls (one per field
 * of the layout; nulls start all true) for the key's own value (space
 * STATE_KEY_SPACE, ns_value NULL) or one namespace's value; restore gets
 * them back, valid only during the call (the operator copies what it
 * keeps) and re-registers the timers the value implies.  loaded
 * (optional): a load into state already in use (read a key at a time)
 * brought in the key of ref, all of its rows restored -- for timers that
 * depend on several of a key's rows, as restore sees one at a time.
 */
typedef struct StateCodec
{
	const StateLayout *layout;
	void	   *arg;
	void		(*save) (void *arg, const StateRef *ref, int space, int64 ns,
						 void *ns_value, Datum *values, bool *nulls);
	void		(*restore) (void *arg, const StateRef *ref, int space, int64 ns,
							void *ns_value, Datum *values, bool *nulls);
	void		(*loaded) (void *arg, const StateRef *ref);
} StateCodec;

#endif							/* PTF_LAYOUT_H */
