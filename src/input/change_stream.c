/*-------------------------------------------------------------------------
 *
 * change_stream.c
 *	  A table's changes read through logical decoding, in the calling
 *	  backend, handed to the frame as rows of kinds +I -U +U -D.
 *
 * The decoding loop is pg_logical_slot_peek_changes' (logicalfuncs.c),
 * with our own output plugin (decoding/plugin.c) in its in-process mode:
 * it gives us each change's heap tuples, which are recorded with no text
 * in between.  Only the changes of the stream's tables are looked at; a
 * stream of several tables (a temporal join's two sides) records each
 * table's changes for its own sink, in commit order.
 *
 * Decoding, then running.  The plugin's callbacks run inside decoding's
 * machinery -- a historic catalog snapshot, and a subtransaction rolled
 * back after every transaction replayed -- where nothing of the operators
 * (user aggregates, conditions, the state loader's index scans) belongs.
 * So a read decodes a bounded batch of whole transactions into a buffer
 * (input/change_buffer.c: in memory up to logical_decoding_work_mem, in a
 * temporary file past it), lets go of the slot, and only then hands the
 * buffered rows to the tables' sinks, in the order decoded.
 *
 * Exactly once: a transaction is read whole or not at all; the position
 * stored with the uid's state is the end LSN of the last transaction
 * read; transactions ending at or before the stored position are skipped;
 * the slot is confirmed only up to a position known to be committed (at
 * the start of the next call), so it never passes the stored progress,
 * and a call rolled back leaves the next one to read the same changes.
 *
 * Kinds: INSERT is +I; UPDATE is -U (the old image, when logged) then +U;
 * DELETE is -D.  Under REPLICA IDENTITY FULL old images are whole rows;
 * under DEFAULT an old image has only the key columns (marked partial) and
 * an UPDATE that keeps its key has no -U -- PostgreSQL logs its old key
 * too when the key is stored out of line, which is then passed over.
 * Unchanged TOASTed values of an UPDATE's new image are not in the WAL:
 * under FULL they are taken from the old image, and those of the key from
 * the old key under any identity; otherwise the row is marked incomplete,
 * and whoever would emit or keep it must complete it from state or fail
 * (never a placeholder, never a fetch from the table's TOAST).
 *
 * Rights: the reader must be able to read every row of a table when the
 * stream starts, and again as of each change read (the historic catalog
 * decoding replays), as the output plugin asks: a change made while the
 * reader could not read its table ends the stream there.  These checks,
 * and the table's columns, are the only things asked of the catalog while
 * decoding, and they must be asked then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/detoast.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "base/kept.h"
#include "decoding/old_key.h"
#include "decoding/plugin.h"
#include "input/change_buffer.h"
#include "input/change_stream.h"
#include "input/stream_slot.h"

int			ptf_max_changes_per_call = 1000000;

/* A table of the stream, while it is read. */
typedef struct StreamTable
{
	ChangeStreamTable t;
	TupleDesc	checked_desc;	/* the historic descriptor last found compatible */
	bool		rights_checked; /* the reader's rights, as of the changes read */
	TupleTableSlot *slot;		/* its buffered rows, handed to its sink */
	HeapTupleData tuple;		/* ... over this */
} StreamTable;

struct PtfChangeStream
{
	char	   *slot_name;
	int			ntables;
	StreamTable *tables;

	/* set by change_stream_run */
	bool		ran;
	XLogRecPtr	resume_after;
	XLogRecPtr	end_of_wal;		/* read up to here at most */
	XLogRecPtr	position;		/* end of the last transaction read */
	uint64		rows;
	uint64		skipped;		/* truncations passed over */
	bool		stop;
	TimestampTz last_commit_time;
	bool		txn_handed_over;	/* the transaction being read gave rows */
	XLogRecPtr	last_productive;	/* end of the last transaction that did */
	ChangeBuffer *buffer;		/* what was decoded, until it is handed over */
	MemoryContext row_cxt;		/* a change's, while its sink runs */

	/* the transaction being read */
	bool		skip_txn;
	bool		in_snapshot;	/* skipped: the initial snapshot had it */
	bool		skip_asked;		/* skipped: ptf.skip_transaction named it */
	PtfRowMeta	meta;
	PtfChangeContext decoding;	/* names it while its changes are decoded */

	/* ptf.skip_transaction: the commit record of a transaction to pass over */
	XLogRecPtr	skip_lsn;
	bool		skip_lsn_passed;	/* skipped, or passed without finding it */
	TransactionId skipped_xid;
	uint64		skipped_asked;	/* changes of the stream's tables it had */

	/* the initial snapshot read (change_stream_skip_snapshot), if any */
	bool		has_snapshot;
	TransactionId snap_xmin;
	TransactionId snap_xmax;
	int			snap_nxip;
	TransactionId *snap_xip;

	/* owners before REASSIGN OWNED (change_stream_handovers) */
	int			nhandovers;
	Oid		   *handover_roles;
	TransactionId *handover_xids;
	int			handovers_passed;
	Oid			reader;			/* whose rights: InvalidOid, the caller's */

	ResourceOwner outer_owner;	/* the caller's, not decoding's subtransaction's */
	MemoryContext outer_cxt;
	MemoryContext rowcxt;
};

/* ---- decoding contexts kept between calls (pipeline workers) ---- */

/*
 * A pipeline worker reads its streams a step at a time.  Creating a
 * decoding context reads the WAL again from the slot's restart_lsn, which
 * may lag many seconds behind; so the worker keeps each stream's context
 * between steps and goes on reading where it stopped -- as long as no
 * transaction it handed over since was lost with a rolled-back step, and
 * nobody else moved the slot.
 */
typedef struct KeptDecoder
{
	LogicalDecodingContext *ctx;
	ReplicationSlot *slot;
	XLogRecPtr	last_productive;	/* transactions up to here gave rows */
	XLogRecPtr	confirmed;		/* the slot's confirmed_flush, as we left it */
} KeptDecoder;

/* its WAL segment file is the reader's own descriptor */
static void
release_decoder(PtfKept *k)
{
	KeptDecoder *kd = (KeptDecoder *) k->data;

	if (kd != NULL && kd->ctx != NULL && kd->ctx->reader->seg.ws_file >= 0)
		wal_segment_close(kd->ctx->reader);
}

static KeptDecoder *
kept_decoder(PtfKept *k)
{
	return (KeptDecoder *) k->data;
}

/*
 * The kept context for the slot just acquired, if it can go on from
 * resume_after; one that cannot is let go.
 */
static PtfKept *
usable_kept(PtfKeptSet *set, const char *slot_name, XLogRecPtr resume_after)
{
	PtfKept    *k = ptf_kept_find(set, PTF_KEPT_DECODER, slot_name);
	KeptDecoder *kd;

	if (k == NULL)
		return NULL;
	kd = kept_decoder(k);
	if (kd->ctx != NULL && kd->slot == MyReplicationSlot &&
		kd->confirmed == MyReplicationSlot->data.confirmed_flush &&
		kd->last_productive <= resume_after)
		return k;
	ptf_kept_forget(set, k);
	return NULL;
}

/* Does the reorder buffer hold transactions spilled to disk? */
static bool
has_spilled(ReorderBuffer *rb)
{
	dlist_iter	iter;

	dlist_foreach(iter, &rb->toplevel_by_lsn)
	{
		ReorderBufferTXN *txn = dlist_container(ReorderBufferTXN, node, iter.cur);

		if (rbtxn_is_serialized(txn))
			return true;
	}
	return false;
}

static PtfKept *
new_kept(PtfKeptSet *set, const char *slot_name)
{
	PtfKept    *k = ptf_kept_new(set, PTF_KEPT_DECODER, slot_name);

	if (k == NULL)
		return NULL;
	k->data = MemoryContextAllocZero(k->cxt, sizeof(KeptDecoder));
	k->release = release_decoder;
	return k;
}

void
change_stream_confirm(const char *slot_name, XLogRecPtr lsn, PtfKeptSet *kept)
{
	ReplicationSlotAcquire(slot_name, true);
	PG_TRY();
	{
		PtfKept    *k = ptf_kept_find(kept, PTF_KEPT_DECODER, slot_name);

		if (MyReplicationSlot->data.confirmed_flush < lsn)
		{
			LogicalConfirmReceivedLocation(lsn);
			ReplicationSlotMarkDirty();
		}
		/* the kept context goes on only while nobody else moved the slot */
		if (k != NULL && kept_decoder(k)->slot == MyReplicationSlot)
			kept_decoder(k)->confirmed = MyReplicationSlot->data.confirmed_flush;
	}
	PG_FINALLY();
	{
		ReplicationSlotRelease();
	}
	PG_END_TRY();
}


PtfChangeStream *
change_stream_create(const char *slot_name, const ChangeStreamTable *tables, int ntables)
{
	PtfChangeStream *cs = palloc0(sizeof(PtfChangeStream));
	int			i;

	cs->slot_name = pstrdup(slot_name);
	cs->ntables = ntables;
	cs->tables = palloc0(sizeof(StreamTable) * ntables);
	for (i = 0; i < ntables; i++)
	{
		cs->tables[i].t = tables[i];
		cs->tables[i].slot = MakeSingleTupleTableSlot(tables[i].rowdesc, &TTSOpsHeapTuple);
		ItemPointerSetInvalid(&cs->tables[i].tuple.t_self);
		cs->tables[i].tuple.t_tableOid = tables[i].relid;
	}
	cs->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ptf change row",
									   ALLOCSET_DEFAULT_SIZES);
	return cs;
}

/* the stream's table of a decoded relation, or NULL */
static StreamTable *
stream_table(PtfChangeStream *cs, Oid relid)
{
	int			i;

	for (i = 0; i < cs->ntables; i++)
		if (cs->tables[i].t.relid == relid)
			return &cs->tables[i];
	return NULL;
}

XLogRecPtr
change_stream_position(PtfChangeStream *cs)
{
	return cs->position;
}

uint64
change_stream_skipped(PtfChangeStream *cs)
{
	return cs->skipped;
}

void
change_stream_report(PtfChangeStream *cs, ChangeStreamReport *report)
{
	memset(report, 0, sizeof(ChangeStreamReport));
	report->reached_end = true;
	if (!cs->ran)
		return;
	report->end_of_wal = cs->end_of_wal;
	report->position = cs->position;
	report->last_commit_time = cs->last_commit_time;
	report->reached_end = !cs->stop;
}

/* ---- the initial snapshot ---- */

/* Did the snapshot see xid committed?  (Only committed transactions are decoded.) */
static bool
snapshot_had(PtfChangeStream *cs, TransactionId xid)
{
	int			i;

	if (TransactionIdPrecedes(xid, cs->snap_xmin))
		return true;
	if (!TransactionIdPrecedes(xid, cs->snap_xmax))
		return false;
	for (i = 0; i < cs->snap_nxip; i++)
		if (TransactionIdEquals(cs->snap_xip[i], xid))
			return false;
	return true;
}

void
change_stream_skip_snapshot(PtfChangeStream *cs, TransactionId xmin, TransactionId xmax,
							const TransactionId *xip, int nxip)
{
	cs->has_snapshot = true;
	cs->snap_xmin = xmin;
	cs->snap_xmax = xmax;
	cs->snap_nxip = nxip;
	cs->snap_xip = palloc(sizeof(TransactionId) * Max(nxip, 1));
	memcpy(cs->snap_xip, xip, sizeof(TransactionId) * nxip);
}

/* ---- REASSIGN OWNED: whose rights a change is read with ---- */

void
change_stream_handovers(PtfChangeStream *cs, const Oid *roles, const TransactionId *xids,
						int n)
{
	cs->nhandovers = n;
	cs->handover_roles = palloc(sizeof(Oid) * Max(n, 1));
	cs->handover_xids = palloc(sizeof(TransactionId) * Max(n, 1));
	memcpy(cs->handover_roles, roles, sizeof(Oid) * n);
	memcpy(cs->handover_xids, xids, sizeof(TransactionId) * n);
	cs->handovers_passed = 0;
}

int
change_stream_handovers_passed(PtfChangeStream *cs)
{
	return cs->handovers_passed;
}

static void forget_rights(PtfChangeStream *cs, Oid relid);

/*
 * A transaction committed before the REASSIGN OWNED that handed the stream
 * over is read with the rights of the owner the stream had then (who read
 * it); the first after it, with the caller's.  Rights are asked again when
 * the reader changes.
 */
static void
choose_reader(PtfChangeStream *cs)
{
	Oid			reader = cs->handovers_passed < cs->nhandovers ?
		cs->handover_roles[cs->handovers_passed] : InvalidOid;

	if (reader != cs->reader)
	{
		cs->reader = reader;
		forget_rights(cs, InvalidOid);
	}
}

/* The commit of the transaction that handed the stream over: passed. */
static void
note_handover(PtfChangeStream *cs, TransactionId xid)
{
	if (cs->handovers_passed < cs->nhandovers &&
		TransactionIdEquals(xid, cs->handover_xids[cs->handovers_passed]))
		cs->handovers_passed++;
}

/* ---- what the plugin hands over while decoding: recorded ---- */

static void
cs_begin(void *arg, ReorderBufferTXN *txn)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;

	/* read before, by a call whose state is stored: skip it whole */
	cs->skip_txn = (!XLogRecPtrIsInvalid(cs->resume_after) &&
					txn->end_lsn <= cs->resume_after);
	/* committed before the initial snapshot: its rows are in it */
	cs->in_snapshot = (!cs->skip_txn && cs->has_snapshot && snapshot_had(cs, txn->xid));
	if (cs->in_snapshot)
		cs->skip_txn = true;
	/* ptf.skip_transaction: this one, or none if the stream is past it */
	cs->skip_asked = false;
	if (!cs->skip_txn && !XLogRecPtrIsInvalid(cs->skip_lsn) && !cs->skip_lsn_passed &&
		txn->final_lsn >= cs->skip_lsn)
	{
		cs->skip_lsn_passed = true;
		if (txn->final_lsn == cs->skip_lsn)
		{
			cs->skip_txn = cs->skip_asked = true;
			cs->skipped_xid = txn->xid;
		}
	}
	cs->meta.commit_time = txn->xact_time.commit_time;
	cs->meta.xid = txn->xid;
	cs->meta.final_lsn = txn->final_lsn;
	cs->decoding.meta = &cs->meta;
	choose_reader(cs);
}

static void
cs_commit(void *arg, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;

	/* read or not, the changes after it are read with the new owner's rights */
	note_handover(cs, txn->xid);
	cs->decoding.meta = NULL;
	if (cs->skip_txn && !cs->in_snapshot && !cs->skip_asked)
		return;
	cs->position = txn->end_lsn;
	cs->last_commit_time = txn->xact_time.commit_time;
	if (cs->txn_handed_over)
		cs->last_productive = txn->end_lsn;
	cs->txn_handed_over = false;
	if (ptf_max_changes_per_call > 0 && cs->rows >= (uint64) ptf_max_changes_per_call)
		cs->stop = true;
}

/*
 * The historic descriptor of the table at the change must be the one we
 * read rows with, but for columns added since (read as their defaults).
 */
static void
check_descriptor(PtfChangeStream *cs, StreamTable *st, Relation rel)
{
	TupleDesc	hist = RelationGetDescr(rel);
	TupleDesc	rowdesc = st->t.rowdesc;
	int			i;

	if (hist == st->checked_desc)
		return;
	if (hist->natts > rowdesc->natts)
		goto incompatible;
	for (i = 0; i < hist->natts; i++)
	{
		Form_pg_attribute h = TupleDescAttr(hist, i);
		Form_pg_attribute r = TupleDescAttr(rowdesc, i);

		if (h->attisdropped != r->attisdropped && !r->attisdropped)
			goto incompatible;
		if (!h->attisdropped && !r->attisdropped &&
			(h->atttypid != r->atttypid || h->attlen != r->attlen))
			goto incompatible;
	}
	st->checked_desc = hist;
	return;

incompatible:
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the columns of table %s changed while its changes were being read",
					RelationGetRelationName(rel)),
			 errdetail("A change at %X/%X has columns of other types than the table has now.",
					   LSN_FORMAT_ARGS(cs->meta.lsn)),
			 errhint("ptf.skip_transaction() passes over the transactions of such changes, one at a time (the CONTEXT names this one); or ptf.drop_state() forgets the uid (a pipeline's: ptf.drop_pipeline()) to start over from now.")));
}

/* Does a new image hold unchanged TOASTed values (on-disk pointers)? */
static bool
has_unchanged_toast(TupleDesc desc, HeapTuple tup)
{
	int			i;

	if (!HeapTupleHasExternal(tup))
		return false;
	for (i = 0; i < desc->natts && i < HeapTupleHeaderGetNatts(tup->t_data); i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		bool		isnull;
		Datum		d;

		if (att->attlen != -1 || att->attisdropped)
			continue;
		d = heap_getattr(tup, i + 1, desc, &isnull);
		if (!isnull && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)))
			return true;
	}
	return false;
}

/* Under REPLICA IDENTITY FULL the old image has what the new one lacks. */
static HeapTuple
complete_from_old(TupleDesc desc, HeapTuple newtup, HeapTuple oldtup)
{
	Datum	   *nv = palloc(sizeof(Datum) * desc->natts);
	bool	   *nn = palloc(sizeof(bool) * desc->natts);
	Datum	   *ov = palloc(sizeof(Datum) * desc->natts);
	bool	   *on = palloc(sizeof(bool) * desc->natts);
	int			i;

	heap_deform_tuple(newtup, desc, nv, nn);
	heap_deform_tuple(oldtup, desc, ov, on);
	for (i = 0; i < desc->natts; i++)
	{
		if (!nn[i] && TupleDescAttr(desc, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(nv[i])))
		{
			nv[i] = ov[i];
			nn[i] = on[i];
		}
	}
	return heap_form_tuple(desc, nv, nn);
}


/*
 * Decoding hands over TOASTed values it reassembled as indirect pointers
 * into its own memory, which is gone after the change: a row kept past it
 * (an image, a candidate) must hold the values themselves.  Unchanged
 * on-disk pointers stay; they are marked incomplete and never fetched.
 */
static HeapTuple
flatten_indirect(TupleDesc desc, HeapTuple tup)
{
	int			natts = Min(desc->natts, HeapTupleHeaderGetNatts(tup->t_data));
	Datum	   *values;
	bool	   *nulls;
	bool		any = false;
	int			i;

	if (!HeapTupleHasExternal(tup))
		return tup;
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(tup, desc, values, nulls);
	for (i = 0; i < natts; i++)
	{
		if (!nulls[i] && TupleDescAttr(desc, i)->attlen == -1 &&
			VARATT_IS_EXTERNAL_INDIRECT(DatumGetPointer(values[i])))
		{
			values[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
															  DatumGetPointer(values[i])));
			any = true;
		}
	}
	return any ? heap_form_tuple(desc, values, nulls) : tup;
}

/*
 * Record a change of st for its sink, which gets it once decoding is
 * over.  A row kept past the change must hold its values itself
 * (flatten_indirect).
 */
static void
record_change(PtfChangeStream *cs, StreamTable *st, RowKind kind, HeapTuple tup,
			  bool partial, bool incomplete)
{
	cs->meta.partial = partial;
	cs->meta.incomplete = incomplete;
	change_buffer_put(cs->buffer, (int) (st - cs->tables), kind, &cs->meta,
					  tup != NULL ? flatten_indirect(st->t.rowdesc, tup) : NULL);
	cs->rows++;
	cs->txn_handed_over = true;
}

/*
 * The reader's rights as of each change, the output plugin's rule: what
 * check_stream_table() asked when the stream started is asked again under
 * decoding's historic catalog, so that a change made while the reader
 * could not read its table -- SELECT revoked, or row-level security in
 * force, and later undone -- is never delivered.  A verdict holds until an
 * invalidation replayed with the changes says that the table or a role
 * changed; a stream that meets such a change ends there, every time, until
 * its state is dropped.
 */
static PtfChangeStream *decoding_stream;	/* the stream being decoded */
static bool rights_callbacks;	/* registered, once per backend */

static void
forget_rights(PtfChangeStream *cs, Oid relid)
{
	int			i;

	for (i = 0; i < cs->ntables; i++)
		if (!OidIsValid(relid) || cs->tables[i].t.relid == relid)
			cs->tables[i].rights_checked = false;
}

static void
rights_relcache_callback(Datum arg, Oid relid)
{
	if (decoding_stream != NULL)
		forget_rights(decoding_stream, relid);
}

/* memberships and BYPASSRLS */
static void
rights_role_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (decoding_stream != NULL)
		forget_rights(decoding_stream, InvalidOid);
}

static void
check_rights_then(PtfChangeStream *cs, StreamTable *st, Relation rel)
{
	Oid			relid = RelationGetRelid(rel);

	if (st->rights_checked)
		return;
	if (!stream_role_may_read_every_row(relid, cs->reader))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s when one of its changes was made",
						RelationGetRelationName(rel)),
				 errdetail("The reader%s could not SELECT every row of it when its change at %X/%X was made. A change stream delivers only changes its reader could read when they were made, as the output plugin does.",
						   OidIsValid(cs->reader) ?
						   psprintf(" (%s, the stream's owner before REASSIGN OWNED)",
									GetUserNameFromId(cs->reader, true) ?
									GetUserNameFromId(cs->reader, true) : "a role dropped since") : "",
						   LSN_FORMAT_ARGS(cs->meta.lsn)),
				 errhint("The stream cannot go on past this change: ptf.drop_state() forgets the uid (a pipeline's: ptf.drop_pipeline()), and a first call with snapshot => true starts it again from the table's rows.")));
	if (check_enable_rls(relid, cs->reader, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s had row-level security in force for this reader when one of its changes was made",
						RelationGetRelationName(rel)),
				 errdetail("The change is at %X/%X. A change stream cannot apply row-level security, and delivers no change made under it.",
						   LSN_FORMAT_ARGS(cs->meta.lsn)),
				 errhint("The stream cannot go on past this change: ptf.drop_state() forgets the uid (a pipeline's: ptf.drop_pipeline()), and a first call with snapshot => true starts it again from the table's rows.")));
	st->rights_checked = true;
}

static const char *
replica_identity_name(char ident)
{
	switch (ident)
	{
		case REPLICA_IDENTITY_FULL:
			return "FULL";
		case REPLICA_IDENTITY_INDEX:
			return "USING INDEX";
		case REPLICA_IDENTITY_NOTHING:
			return "NOTHING";
		default:
			return "DEFAULT";
	}
}

/*
 * An update or delete of rel (the relation as it was when the change was
 * made) holds the old row its reader needs.  The function chose how to
 * read the stream from the replica identity when it was called; one
 * switched and back between two calls left changes with less in the WAL
 * -- a key only, or nothing -- which would read as rows of NULLs or be
 * lost.
 */
static void
check_old_rows(PtfChangeStream *cs, StreamTable *st, Relation rel)
{
	char		ident = rel->rd_rel->relreplident;

	if (st->t.old_rows == OLD_ROWS_ANY || ident == REPLICA_IDENTITY_FULL)
		return;
	if (st->t.old_rows == OLD_ROWS_KEY &&
		(ident == REPLICA_IDENTITY_INDEX ||
		 (ident == REPLICA_IDENTITY_DEFAULT && OidIsValid(RelationGetReplicaIndex(rel)))))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("a change of table %s was made under REPLICA IDENTITY %s%s, which this stream cannot read",
					RelationGetRelationName(rel), replica_identity_name(ident),
					ident == REPLICA_IDENTITY_DEFAULT &&
					!OidIsValid(RelationGetReplicaIndex(rel)) ? " without a primary key" : ""),
			 errdetail("The change is at %X/%X. The stream needs the %s of updated and deleted rows, which the WAL holds only under %s; the table's replica identity changed while the stream ran.",
					   LSN_FORMAT_ARGS(cs->meta.lsn),
					   st->t.old_rows == OLD_ROWS_FULL ? "whole old images" : "keys",
					   st->t.old_rows == OLD_ROWS_FULL ? "REPLICA IDENTITY FULL" :
					   "REPLICA IDENTITY FULL, or a key"),
			 errhint("The stream cannot go on past this change: ptf.drop_state() forgets the uid (a pipeline's: ptf.drop_pipeline()), and a first call with snapshot => true starts it again from the table's rows.")));
}

static void
cs_change(void *arg, ReorderBufferTXN *txn, Relation rel, ReorderBufferChange *change)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;
	MemoryContext old;
	HeapTuple	newtup;
	HeapTuple	oldtup;
	bool		full;
	StreamTable *st;

	if (cs->skip_txn || (st = stream_table(cs, RelationGetRelid(rel))) == NULL)
	{
		if (cs->skip_asked && stream_table(cs, RelationGetRelid(rel)) != NULL)
			cs->skipped_asked++;
		return;
	}

	MemoryContextReset(cs->rowcxt);
	old = MemoryContextSwitchTo(cs->rowcxt);
	cs->meta.lsn = change->lsn;
	check_descriptor(cs, st, rel);
	check_rights_then(cs, st, rel);
	full = (rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL);
	if (change->action == REORDER_BUFFER_CHANGE_UPDATE ||
		change->action == REORDER_BUFFER_CHANGE_DELETE)
		check_old_rows(cs, st, rel);
	newtup = change->data.tp.newtuple ? &change->data.tp.newtuple->tuple : NULL;
	oldtup = change->data.tp.oldtuple ? &change->data.tp.oldtuple->tuple : NULL;

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			record_change(cs, st, ROWKIND_INSERT, newtup, false, false);
			break;

		case REORDER_BUFFER_CHANGE_UPDATE:
			{
				bool		incomplete;

				if (oldtup && !full)
				{
					bool		key_changed;

					newtup = ptf_update_key_from_old(rel, newtup, oldtup, change->lsn, &key_changed);
					if (!key_changed)
						oldtup = NULL;
				}
				incomplete = has_unchanged_toast(RelationGetDescr(rel), newtup);
				if (incomplete && full && oldtup)
				{
					newtup = complete_from_old(RelationGetDescr(rel), newtup, oldtup);
					incomplete = false;
				}
				if (oldtup)
					record_change(cs, st, ROWKIND_UPDATE_BEFORE, oldtup, !full, false);
				record_change(cs, st, ROWKIND_UPDATE_AFTER, newtup, false, incomplete);
			}
			break;

		case REORDER_BUFFER_CHANGE_DELETE:
			/* REPLICA IDENTITY NOTHING logs no old image: no key, nothing to say */
			if (oldtup)
				record_change(cs, st, ROWKIND_DELETE, oldtup, !full, false);
			else
				cs->skipped++;
			break;

		default:
			break;
	}
	MemoryContextSwitchTo(old);
}

static void
cs_truncate(void *arg, ReorderBufferTXN *txn, int nrelations, Relation *relations,
			ReorderBufferChange *change)
{
	PtfChangeStream *cs = (PtfChangeStream *) arg;
	int			i;

	if (cs->skip_txn)
		return;
	for (i = 0; i < nrelations; i++)
	{
		StreamTable *st = stream_table(cs, RelationGetRelid(relations[i]));

		if (st == NULL)
			continue;
		if (st->t.on_truncate == TRUNCATE_ERROR)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table %s was truncated, which a changelog without kept images cannot represent",
							RelationGetRelationName(relations[i])),
					 errdetail("The truncation is at %X/%X; the WAL names no row it removed.",
							   LSN_FORMAT_ARGS(change->lsn)),
					 errhint("Map \"TRUNCATE\" in op_mapping to read it as a row of its own, then call again; ptf.drop_state() forgets the uid and starts a new stream (a pipeline, whose query cannot change: ptf.drop_pipeline(), and a new one that maps it).")));
		if (st->t.on_truncate == TRUNCATE_PASS)
		{
			cs->meta.lsn = change->lsn;
			record_change(cs, st, ROWKIND_TRUNCATE, NULL, false, false);
			continue;
		}
		ereport(NOTICE,
				(errmsg("table %s was truncated; the deletions of its rows change nothing here",
						RelationGetRelationName(relations[i]))));
		cs->skipped++;
		cs->txn_handed_over = true;
	}
}

bool
change_stream_images_may_be_incomplete(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		may = false;
	int			i;

	if (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL)
		for (i = 0; i < desc->natts && !may; i++)
		{
			Form_pg_attribute a = TupleDescAttr(desc, i);

			may = !a->attisdropped && a->attlen == -1 && a->attstorage != TYPSTORAGE_PLAIN;
		}
	relation_close(rel, AccessShareLock);
	return may;
}

/* ---- the decoding loop ---- */

static void
write_refused(LogicalDecodingContext *ctx, XLogRecPtr lsn, TransactionId xid,
			  bool last_write)
{
	elog(ERROR, "in-process decoding does not write output");
}

/*
 * A long read is handed over in rounds of about this much decoded memory,
 * between WAL records -- at transaction boundaries, as decoding replays a
 * transaction whole within one record -- rather than all at the end: a
 * buffer of the whole read would take new memory (and pages) for every
 * change, or go to a temporary file.  Round by round the buffer's memory
 * is used again.
 */
#define ROUND_BYTES ((Size) 8 * 1024 * 1024)

static void hand_over(PtfChangeStream *cs);
static void hand_over_round(PtfChangeStream *cs);

/*
 * Decode the slot into the buffer: every transaction ending after
 * resume_after, up to about ptf.max_changes_per_call rows, stopping at a
 * transaction's end; handed over in rounds on the way (ROUND_BYTES).
 */
static void
decode(PtfChangeStream *cs, XLogRecPtr resume_after, bool resume_committed,
	   PtfKeptSet *kept)
{
	PtfDecodingSink dsink;
	LogicalDecodingContext *volatile ctx = NULL;
	PtfKept    *volatile kd = NULL;

	dsink.begin = cs_begin;
	dsink.change = cs_change;
	dsink.truncate = cs_truncate;
	dsink.commit = cs_commit;
	dsink.arg = cs;
	/* a pipeline's own writes carry its origin: never read them back */
	dsink.skip_origin = replorigin_session_origin;

	CheckLogicalDecodingRequirements();
	stream_slot_check_usable(cs->slot_name, resume_after);
	if (!rights_callbacks)
	{
		CacheRegisterRelcacheCallback(rights_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, rights_role_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, rights_role_callback, (Datum) 0);
		rights_callbacks = true;
	}
	forget_rights(cs, InvalidOid);
	cs->end_of_wal = GetFlushRecPtr(NULL);
	ReplicationSlotAcquire(cs->slot_name, true);

	PG_TRY();
	{
		XLogRecPtr	confirmed = MyReplicationSlot->data.confirmed_flush;

		if (!XLogRecPtrIsInvalid(resume_after) && confirmed > resume_after)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the uid's replication slot was moved past the uid's stored position"),
					 errdetail("Slot %s is at %X/%X, the uid's state at %X/%X: changes in between are lost.",
							   cs->slot_name, LSN_FORMAT_ARGS(confirmed),
							   LSN_FORMAT_ARGS(resume_after)),
					 errhint("Do not consume the slot of a uid with other tools; ptf.drop_state() starts the uid over.")));

		kd = usable_kept(kept, cs->slot_name, resume_after);

		/* what is committed can be let go of: WAL before it is released */
		if (resume_committed && !XLogRecPtrIsInvalid(resume_after) && resume_after > confirmed)
		{
			LogicalConfirmReceivedLocation(resume_after);
			ReplicationSlotMarkDirty();
		}

		decoding_stream = cs;
		if (kd != NULL)
			ctx = kept_decoder(kd)->ctx;
		else
		{
			MemoryContext old = CurrentMemoryContext;

			if ((kd = new_kept(kept, cs->slot_name)) != NULL)
				MemoryContextSwitchTo(kd->cxt);
			ctx = CreateDecodingContext(InvalidXLogRecPtr,
										list_make1(makeDefElem(PTF_IN_PROCESS_OPTION,
															   (Node *) makeString("on"), -1)),
										false,
										XL_ROUTINE(.page_read = read_local_xlog_page,
												   .segment_open = wal_segment_open,
												   .segment_close = wal_segment_close),
										NULL, write_refused, NULL);
			MemoryContextSwitchTo(old);
			if (kd != NULL)
				kept_decoder(kd)->ctx = ctx;
			XLogBeginRead(ctx->reader, MyReplicationSlot->data.restart_lsn);
		}
		ptf_decoding_set_sink(ctx, &dsink);

		/*
		 * The catalog caches may hold entries of the present (this
		 * transaction's, or made between a kept context's reads), which the
		 * historic lookups of decoding must not find.
		 */
		InvalidateSystemCaches();

		while (ctx->reader->EndRecPtr < cs->end_of_wal && !cs->stop)
		{
			XLogRecord *record;
			char	   *errm = NULL;

			/* what the reader keeps between records lives as long as it does */
			MemoryContextSwitchTo(ctx->context);
			record = XLogReadRecord(ctx->reader, &errm);
			if (errm)
				elog(ERROR, "could not find record for logical decoding: %s", errm);
			if (record != NULL)
				LogicalDecodingProcessRecord(ctx, ctx->reader);
			/* decoding's transaction management leaves its own owner and context behind */
			CurrentResourceOwner = cs->outer_owner;
			MemoryContextSwitchTo(cs->outer_cxt);
			CHECK_FOR_INTERRUPTS();
			if (change_buffer_bytes(cs->buffer) >= ROUND_BYTES)
				hand_over_round(cs);
		}
		ptf_decoding_set_sink(ctx, NULL);

		if (kd != NULL && has_spilled(ctx->reorder))
		{
			/*
			 * Whoever decodes the slot next deletes its spill files: a
			 * context holding spilled transactions is not kept.
			 */
			ptf_kept_forget(kept, kd);
			kd = NULL;
			ctx = NULL;
		}
		if (kd != NULL)
		{
			KeptDecoder *d = kept_decoder(kd);

			if (!XLogRecPtrIsInvalid(cs->last_productive))
				d->last_productive = cs->last_productive;
			d->slot = MyReplicationSlot;
			d->confirmed = MyReplicationSlot->data.confirmed_flush;
		}
		else if (ctx != NULL)
			FreeDecodingContext(ctx);
		decoding_stream = NULL;
		ReplicationSlotRelease();
		/* no entry of the past is left for the operators to find (logicalfuncs.c) */
		InvalidateSystemCaches();
	}
	PG_CATCH();
	{
		CurrentResourceOwner = cs->outer_owner;
		MemoryContextSwitchTo(cs->outer_cxt);
		decoding_stream = NULL;
		/* a context that failed midway is not to be trusted again */
		if (kd != NULL)
			ptf_kept_forget(kept, kd);
		InvalidateSystemCaches();
		/* an error caught by a savepoint must not leave the slot ours */
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		PG_RE_THROW();
	}
	PG_END_TRY();
}


/*
 * The operators run between two WAL records as they run after decoding
 * (hand_over), with the caches cleared of what decoding's historic
 * lookups left in them, and cleared again of the present before decoding
 * goes on (as before the first record).
 */
static void
hand_over_round(PtfChangeStream *cs)
{
	InvalidateSystemCaches();
	hand_over(cs);
	change_buffer_reset(cs->buffer);
	InvalidateSystemCaches();
}

/* Hand what was decoded to the tables' sinks, in the order decoded. */
static void
hand_over(PtfChangeStream *cs)
{
	TupleTableSlot **slots = palloc(sizeof(TupleTableSlot *) * cs->ntables);
	HeapTupleData *tuples = palloc(sizeof(HeapTupleData) * cs->ntables);
	int			table;
	RowKind		kind;
	int			i;
	PtfChangeContext cc;

	for (i = 0; i < cs->ntables; i++)
	{
		slots[i] = cs->tables[i].slot;
		tuples[i] = cs->tables[i].tuple;
	}
	/* the change handed over: an adapter's error is of it (the frame names a batched one) */
	ptf_change_context_push(&cc, &cs->meta);
	while (change_buffer_next(cs->buffer, slots, tuples, &table, &kind, &cs->meta))
	{
		StreamTable *st = &cs->tables[table];
		MemoryContext old = MemoryContextSwitchTo(cs->row_cxt);

		/* what a change leaves behind goes with it, as decoding's own memory did */
		st->t.sink(st->t.sink_arg, kind, st->slot, &cs->meta);
		MemoryContextSwitchTo(old);
		MemoryContextReset(cs->row_cxt);
		ExecClearTuple(st->slot);
		CHECK_FOR_INTERRUPTS();
	}
	ptf_change_context_pop(&cc);
}

/* What became of ptf.skip_transaction's transaction, once the stream passed it. */
static void
report_skip(PtfChangeStream *cs)
{
	if (TransactionIdIsValid(cs->skipped_xid))
	{
		cs->skipped += cs->skipped_asked;
		ereport(NOTICE,
				(errmsg("transaction %u, finished at %X/%X, was passed over as ptf.skip_transaction asked",
						cs->skipped_xid, LSN_FORMAT_ARGS(cs->skip_lsn)),
				 errdetail("Its " UINT64_FORMAT " changes of the stream's tables were not read.",
						   cs->skipped_asked)));
	}
	else
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no transaction of the stream finished at %X/%X: nothing was skipped",
						LSN_FORMAT_ARGS(cs->skip_lsn)),
				 errdetail("The stream read past that position; ptf.skip_transaction's request is forgotten."),
				 errhint("Give ptf.skip_transaction the LSN the CONTEXT of the error names (\"finished at\").")));
}

void
change_stream_skip_transaction(PtfChangeStream *cs, XLogRecPtr final_lsn)
{
	Assert(!cs->ran);
	cs->skip_lsn = final_lsn;
}

bool
change_stream_skip_lsn_passed(PtfChangeStream *cs)
{
	return cs->skip_lsn_passed;
}

void
change_stream_run(PtfChangeStream *cs, XLogRecPtr resume_after, bool resume_committed,
				  PtfKeptSet *kept)
{
	Assert(!cs->ran);
	cs->ran = true;
	cs->outer_owner = CurrentResourceOwner;
	cs->outer_cxt = CurrentMemoryContext;
	cs->resume_after = resume_after;
	cs->position = resume_after;
	cs->last_productive = InvalidXLogRecPtr;
	cs->buffer = change_buffer_create((Size) logical_decoding_work_mem * 1024,
									  CurrentResourceOwner);
	cs->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf change",
										ALLOCSET_DEFAULT_SIZES);

	/* an error names the change's transaction: ptf.skip_transaction takes its LSN */
	ptf_change_context_push(&cs->decoding, NULL);
	decode(cs, resume_after, resume_committed, kept);
	ptf_change_context_pop(&cs->decoding);
	hand_over(cs);
	if (cs->skip_lsn_passed)
		report_skip(cs);
	change_buffer_free(cs->buffer);
	cs->buffer = NULL;
	MemoryContextDelete(cs->row_cxt);
	cs->row_cxt = NULL;
}

void
change_stream_define_gucs(void)
{
	DefineCustomIntVariable("ptf.max_changes_per_call",
							"Rows a call reads from a change stream, at most.",
							"A call stops at the end of the transaction that reaches it; the next "
							"call continues there. 0: no limit.",
							&ptf_max_changes_per_call,
							1000000, 0, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
}
