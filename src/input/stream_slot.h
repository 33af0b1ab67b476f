/*-------------------------------------------------------------------------
 *
 * stream_slot.h
 *	  The replication slot of a uid's change stream: who may make one,
 *	  how it is named, made, started again, moved on and dropped.
 *
 * The uid's slot is created by its first call, before the call writes
 * anything (a slot cannot be created in a transaction that has).  It is
 * not transactional: a first call that rolls back drops the slot it made,
 * and a slot of a stream dropped by a transaction that may still fail
 * (DROP OWNED, DROP EXTENSION) goes only once it has committed.  It is
 * moved forward only to a committed position (change_stream_confirm).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_STREAM_SLOT_H
#define PTF_STREAM_SLOT_H

#include "access/xlogdefs.h"

/* Roles that may start change streams besides superusers and REPLICATION ones. */
#define PTF_STREAM_ROLE "ptf_stream"

extern int	ptf_max_streams_per_role;	/* GUC; -1: no limit */

/*
 * Checks the tables (plain tables the caller may read entirely, without
 * row-level security), then makes sure the uid has a slot, creating it if
 * this is the uid's first call -- which needs superuser, REPLICATION or
 * the privileges of PTF_STREAM_ROLE, and a role under its
 * ptf.max_streams_per_role.  Must run before the call writes anything.
 * Returns the slot name, for the uid's registry row.
 */
extern char *change_stream_prepare(const char *uid, const Oid *relids, int nrelids);

/*
 * Drop this database's slots of ours that a server process made and died
 * before its transaction ended (nothing names them); how many went.  In a
 * transaction, SPI connected.
 */
extern int	change_stream_drop_orphan_slots(void);

/*
 * The uid's slot is there and this database's, or an error that says
 * what happened to it (resume_after: the uid's position, for the message).
 */
extern void stream_slot_check_usable(const char *slot_name, XLogRecPtr resume_after);

/* May the caller (or role: InvalidOid for the caller) read every row of the table? */
extern bool stream_may_read_every_row(Oid relid);
extern bool stream_role_may_read_every_row(Oid relid, Oid role);

/*
 * A dropped stream's slot goes once the transaction commits (if it is this
 * database's): a drop that fails or rolls back leaves the stream whole
 * (drop_state, drop_pipeline, DROP OWNED, DROP EXTENSION).
 */
extern void change_stream_drop_slot_at_commit(const char *slot_name);

/* GUCs of slots (ptf.max_streams_per_role), from _PG_init */
extern void stream_slot_define_gucs(void);

#endif							/* PTF_STREAM_SLOT_H */
