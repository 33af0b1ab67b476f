/*-------------------------------------------------------------------------
 *
 * to_changelog.c
 *	  SQL entry point of ptf.to_changelog(): every change of the input as
 *	  an append-only row (op, data, lsn, commit_time, xid).
 *
 * op is the change's kind mapped through op_mapping (kinds left out are
 * dropped); data is the row image: the old image for -U and -D, the new
 * one for +I and +U.  Over a change stream under REPLICA IDENTITY DEFAULT
 * (an upsert stream) the rows are first normalized from the last image
 * kept per key (operators/normalize.c) when UPDATE_BEFORE rows or whole
 * deletes are asked for, as Flink inserts ChangelogNormalize only then.
 * With produces_full_deletes => false a delete keeps only its key columns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/transam.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "catalog.h"
#include "frame.h"
#include "functions/call.h"
#include "functions/common.h"
#include "input/change_stream.h"
#include "input/input.h"
#include "operators/op_mapping.h"
#include "operators/operator.h"
#include "state/durable.h"

PG_FUNCTION_INFO_V1(ptf_to_changelog);

enum
{
	ARG_INPUT,
	ARG_PARTITION_BY,
	ARG_OP_MAPPING,
	ARG_FULL_DELETES,
	ARG_STATE_TTL,
	ARG_UID,
	ARG_QUERY,
	ARG_CHANGES
};

typedef struct ToChangelogCall
{
	PtfInputArg input;
	OpMapping	mapping;
	bool		full_deletes;
	KeySpec    *keys;			/* state: the table's replica identity */
	KeySpec    *delete_keys;	/* what a partial delete keeps */
	bool		normalize;
	int64		ttl_us;
	char	   *uid;
	PtfOutput	out;
	uint64		unmapped;
	TransactionId last_xid;		/* the last decoded transaction, widened */
	FullTransactionId last_fxid;
	Datum	   *values;
	bool	   *nulls;
	MemoryContext cxt;
} ToChangelogCall;

/* A 32-bit xid of a decoded (so recent) transaction as xid8. */
static FullTransactionId
widen_xid(TransactionId xid)
{
	FullTransactionId next = ReadNextFullTransactionId();
	uint32		epoch = EpochFromFullTransactionId(next);

	if (xid > XidFromFullTransactionId(next))
		epoch--;
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

/* The row image as data: whole, or, for a partial delete, its keys alone. */
static Datum
row_datum(ToChangelogCall *call, RowKind kind, TupleTableSlot *row)
{
	TupleDesc	desc = call->input.rowdesc;
	int			i;

	if (kind != ROWKIND_DELETE || call->full_deletes)
		return ExecFetchSlotHeapTupleDatum(row);

	slot_getallattrs(row);
	for (i = 0; i < desc->natts; i++)
		call->nulls[i] = true;
	for (i = 0; i < call->delete_keys->ncols; i++)
	{
		AttrNumber	a = call->delete_keys->cols[i].attno;

		call->values[a - 1] = row->tts_values[a - 1];
		call->nulls[a - 1] = row->tts_isnull[a - 1];
	}
	return HeapTupleGetDatum(heap_form_tuple(desc, call->values, call->nulls));
}

static void
emit_change(void *arg, RowKind kind, TupleTableSlot *row)
{
	ToChangelogCall *call = (ToChangelogCall *) arg;
	const PtfRowMeta *meta = frame_current_meta(call->out.frame);
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	if (!call->mapping.mapped[kind])
	{
		call->unmapped++;
		return;
	}
	ptf_check_row_complete(call->out.frame, row);

	values[0] = CStringGetTextDatum(call->mapping.code[kind]);
	values[1] = row_datum(call, kind, row);
	if (XLogRecPtrIsInvalid(meta->lsn))
		nulls[2] = nulls[3] = nulls[4] = true;
	else
	{
		/* once per transaction: widening takes a lock */
		if (meta->xid != call->last_xid || !FullTransactionIdIsValid(call->last_fxid))
		{
			call->last_xid = meta->xid;
			call->last_fxid = widen_xid(meta->xid);
		}
		values[2] = LSNGetDatum(meta->lsn);
		values[3] = TimestampTzGetDatum(meta->commit_time);
		values[4] = FullTransactionIdGetDatum(call->last_fxid);
	}
	tuplestore_putvalues(call->out.store, call->out.desc, values, nulls);
	call->out.rows++;
}

/*
 * The key of a table's rows: its replica identity index, or under
 * REPLICA IDENTITY FULL its primary key; NULL when it logs none.
 */
static KeySpec *
replica_identity_keys(Oid relid, TupleDesc rowdesc, char *replident)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	Oid			indexoid = RelationGetReplicaIndex(rel);
	KeySpec    *keys = NULL;

	/*
	 * Only FULL logs whole rows whatever the key; under NOTHING, or an
	 * identity index that is gone, no key is logged at all.
	 */
	*replident = rel->rd_rel->relreplident;
	if (!OidIsValid(indexoid) && *replident == REPLICA_IDENTITY_FULL)
		indexoid = RelationGetPrimaryKeyIndex(rel);

	if (OidIsValid(indexoid))
	{
		Relation	idx = index_open(indexoid, AccessShareLock);
		int			n = idx->rd_index->indnkeyatts;
		AttrNumber *attnos = palloc(sizeof(AttrNumber) * Max(n, 1));
		int			i;

		for (i = 0; i < n; i++)
			attnos[i] = idx->rd_index->indkey.values[i];
		keys = key_spec_from_attnos(rowdesc, n, attnos);
		index_close(idx, AccessShareLock);
	}
	relation_close(rel, AccessShareLock);
	return keys;
}

static PtfOperator *
make_passthrough(void *arg, bool unbounded)
{
	ToChangelogCall *call = (ToChangelogCall *) arg;
	KeyedState *ks = keyed_state_create(call->keys, normalize_value_size(), 0,
										call->ttl_us, 0, 0, call->cxt);

	return normalize_create(call->input.rowdesc, NORMALIZE_PASSTHROUGH, ks, emit_change, call);
}

/* The operator of a uid, over its durable state. */
static PtfOperator *
build_normalize(void *arg, KeyedState *ks, TupleDesc rowdesc)
{
	ToChangelogCall *call = (ToChangelogCall *) arg;

	return normalize_create(rowdesc, call->normalize ? NORMALIZE_UPSERT : NORMALIZE_PASSTHROUGH,
							ks, emit_change, call);
}

Datum
ptf_to_changelog(PG_FUNCTION_ARGS)
{
	ToChangelogCall call;
	char	   *query;
	bool		changes;
	KeySpec    *partition_by;
	PtfSqlInput in;
	PtfChangeStream *cs = NULL;
	char	   *slot_name = NULL;
	PtfOperator *op;
	PtfFrame   *frame;
	PtfFrameTimeSpec time;
	DurableState *ds = NULL;
	DurableProgress progress;
	char		replident = REPLICA_IDENTITY_FULL;
	KeySpec    *ri_keys = NULL;

	memset(&call, 0, sizeof(call));
	memset(&time, 0, sizeof(time));

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_INPUT, &call.input);
	partition_by = ptf_keys_arg(fcinfo, ARG_PARTITION_BY, call.input.rowdesc,
								"partition_by");
	if (PG_ARGISNULL(ARG_OP_MAPPING))
		op_mapping_identity(&call.mapping);
	else
		op_mapping_from_jsonb(PG_GETARG_JSONB_P(ARG_OP_MAPPING), &call.mapping,
							  "op_mapping");
	call.full_deletes = ptf_bool_arg(fcinfo, ARG_FULL_DELETES, "produces_full_deletes");
	call.ttl_us = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	call.uid = ptf_uid_arg(fcinfo, ARG_UID);
	query = ptf_text_arg(fcinfo, ARG_QUERY);
	changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&call.input, query, changes, call.uid);

	if (changes)
		ri_keys = replica_identity_keys(call.input.relid, call.input.rowdesc, &replident);

	/* what a partial delete keeps: partition_by, else the replica identity */
	call.delete_keys = partition_by->ncols > 0 ? partition_by : ri_keys;
	if (!call.full_deletes && (call.delete_keys == NULL || call.delete_keys->ncols == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("produces_full_deletes => false needs key columns to keep"),
				 errhint("Give partition_by, or read the changes of a table with a primary key.")));

	/*
	 * An upsert stream (old images of the key only, none for most updates)
	 * is normalized when -U rows or whole deletes are asked for.
	 */
	call.normalize = (changes && replident != REPLICA_IDENTITY_FULL &&
					  (call.mapping.mapped[ROWKIND_UPDATE_BEFORE] ||
					   (call.mapping.mapped[ROWKIND_DELETE] && call.full_deletes)));
	if (call.normalize && ri_keys == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s logs no key for its updates and deletes",
						get_rel_name(call.input.relid)),
				 errdetail("Its replica identity is %s; UPDATE_BEFORE rows and whole deletes need old images.",
						   replident == REPLICA_IDENTITY_NOTHING ? "NOTHING" : "DEFAULT without a primary key"),
				 errhint("ALTER TABLE ... REPLICA IDENTITY FULL, or DEFAULT with a primary key.")));
	call.keys = ri_keys != NULL ? ri_keys : partition_by;
	time.need_proc_time = call.normalize && call.ttl_us > 0;

	ptf_output_init(fcinfo, &call.out);
	call.values = palloc(sizeof(Datum) * Max(call.input.rowdesc->natts, 1));
	call.nulls = palloc(sizeof(bool) * Max(call.input.rowdesc->natts, 1));
	call.cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf to_changelog",
									 ALLOCSET_DEFAULT_SIZES);

	slot_name = ptf_call_prepare(&in, call.input.relid, call.input.rowdesc, query,
								 changes, call.uid);

	/* ---- state and operator ---- */
	if (call.uid != NULL)
	{
		DurableIdentity id;
		PtfStateSpec spec;

		memset(&id, 0, sizeof(id));
		id.uid = call.uid;
		id.function = "to_changelog";
		id.rowdesc = call.input.rowdesc;
		id.keys = call.keys;
		id.keeps_images = true;
		id.slot_name = slot_name;
		/* images kept or not: a uid cannot switch, its images would be stale */
		id.options = call.normalize ? "normalizing (an image kept per key)" : NULL;
		ds = durable_open(&id, &progress);

		spec.keys = call.keys;
		spec.rowdesc = call.input.rowdesc;
		spec.hot = normalize_value_size();
		spec.cold = 0;
		spec.ttl_us = call.ttl_us;
		spec.flags = KEYED_STATE_REMOVABLE;
		op = ptf_call_durable_operator(ds, &spec, call.cxt, build_normalize, &call, &call);
	}
	else
		op = make_passthrough(&call, false);

	frame = frame_create(op, call.input.rowdesc, &time, in.changelog || changes,
						 make_passthrough, &call);
	call.out.frame = frame;

	/* ---- run ---- */
	cs = ptf_call_run(&in, call.input.relid, call.input.rowdesc, slot_name, TRUNCATE_ERROR,
					  &progress, NULL, frame, call.uid == NULL);
	if (ds != NULL)
		ptf_call_store(ds, op, frame, cs, &progress, call.out.rows,
					   call.unmapped + normalize_dropped(op) + normalize_unchanged(op),
					   call.ttl_us);
	ptf_record_call_stats("to_changelog", frame, call.out.rows);

	SPI_finish();
	MemoryContextDelete(call.cxt);
	return (Datum) 0;
}
