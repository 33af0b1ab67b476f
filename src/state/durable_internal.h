/*-------------------------------------------------------------------------
 *
 * durable_internal.h
 *	  What the files of durable state share: the state of one call of a
 *	  uid (DurableState), and the functions they call of one another.
 *	  Only state/registry.c, state/state_table.c and state/state_io.c
 *	  include it; everyone else uses state/durable.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_DURABLE_INTERNAL_H
#define PTF_DURABLE_INTERNAL_H

#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#include "state/durable.h"

/* One call of a uid: its identity, where its state table is, what was read. */
struct DurableState
{
	char	   *uid;
	KeyedState *ks;				/* memory, as attached (durable_attach) */
	const StateCodec *codec;
	Oid			state_relid;
	int64		version;		/* the registry's, changed by every write */
	Oid			state_filenode; /* the state table's storage, for TIDs */
	bool		must_write;		/* the table was converted by this call */
	bool		had_xid;		/* the transaction had an xid when it began */
	int			nkeys;
	int			nspaces;
	Oid			time_type;		/* of SF_TIME fields */
	const StateLayout *layout;
	int			ninputs;
	TupleDesc	rowdescs[DURABLE_MAX_INPUTS];
	char	   *row_types;		/* their fingerprint, written with every commit */
	Datum		input_tables;	/* oid[] of their tables, written likewise */
	/* state table layout: keys 1..nkeys, then these */
	AttrNumber	att_ns_space;	/* 0: no namespaces */
	AttrNumber	att_ns;
	AttrNumber	att_expires;
	AttrNumber	att_fields;		/* the first field's */
	int			natts;

	/* loading part of the state */
	int64		stored_keys;	/* in the table when the call began */
	uint64		memory_keys;	/* in memory when the call began */
	uint64		loaded_keys;	/* read from the table by this call */
	uint64		evicted_keys;	/* dropped from memory by this call */
	Oid			key_index;		/* InvalidOid: not looked for yet */
	bool		key_index_hashed;	/* it holds a hash of the key (state_table.c) */
	struct KeyHasher *key_hasher;	/* its expression, ready (state_io.c) */
	Oid			timer_index;
	Oid			expiry_index;
	bool		has_indexes;	/* writes must keep indexes */

	/* the dead TIDs of memory as a set, added to as they come, in cxt */
	MemoryContext cxt;			/* the call's, where this lives */
	HTAB	   *dead_set;
	int			dead_in_set;

	/*
	 * What the call reads the table under: one snapshot, taken when memory
	 * is attached, whose command id moves on with each write-back
	 * (durable_flush), so that a key evicted and read again is read as it
	 * was written.
	 */
	Snapshot	snapshot;
	uint64		probes;			/* keys asked for, this call */
	bool		expires;		/* keys have a TTL */

	/*
	 * A uid with a second state table (state/images_table.c): the main
	 * state's points at it, written back with it; the images' at the main
	 * one, whose registry row and version it shares.
	 */
	DurableState *images;
	DurableState *main;
};

/* registry.c: the uid's registry row and lock */
extern char *durable_row_types_fingerprint(const DurableIdentity *id);
extern void durable_set_layout(DurableState *ds, const DurableIdentity *id);
extern void durable_set_state_table(const char *uid, Oid relid, const char *row_types);
extern void durable_note_xid_writer(DurableState *ds);
extern void durable_leave_uid(const char *uid);
extern void durable_write_progress(DurableState *ds, KeyedState *ks,
								   const DurableProgress *progress);

/* state_table.c: the table made from a layout, its indexes, layout 1 */
extern Oid	durable_create_state_table(const DurableIdentity *id, DurableState *ds);
extern Oid	durable_create_named_state_table(const DurableIdentity *id, DurableState *ds,
											 const char *relname, const char *what);
extern void durable_check_state_table(const DurableIdentity *id, DurableState *ds);
extern void durable_convert_layout_1(const DurableIdentity *id, DurableState *ds,
									 Oid old_relid);
extern bool durable_keys_indexable(DurableState *ds, Relation rel);
extern Oid	durable_ensure_index(DurableState *ds, AttrNumber first, int ncols,
								 bool not_null_only);
extern Oid	durable_ensure_key_index(DurableState *ds);

/* state_io.c */
extern void durable_release_snapshot(DurableState *ds);

/* images_table.c: the name of a state table's images table, and dropping it */
extern char *durable_images_table_name(Oid state_relid);
extern void durable_drop_images_table(Oid state_relid);

#endif							/* PTF_DURABLE_INTERNAL_H */
