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

#include "base/op_mapping.h"
#include "catalog.h"
#include "engine/call.h"
#include "engine/step.h"
#include "functions/common.h"
#include "operators/normalize.h"

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
	ARG_CHANGES,
	ARG_SNAPSHOT
};

typedef struct ToChangelogCall
{
	PtfCall		call;
	PtfInputArg input;
	OpMapping	mapping;
	/* the mapping's codes as text, made once: each output row points at one */
	Datum		code_text[ROWKIND_COUNT];
	Datum		read_text;
	Datum		truncate_text;
	bool		full_deletes;
	KeySpec    *keys;			/* state: the table's replica identity */
	KeySpec    *delete_keys;	/* what a partial delete keeps */
	bool		normalize;
	PtfOutput	out;
	uint64		unmapped;
	TransactionId last_xid;		/* the last decoded transaction, widened */
	FullTransactionId last_fxid;
	Datum	   *values;
	bool	   *nulls;
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
row_datum(ToChangelogCall *tc, RowKind kind, TupleTableSlot *row)
{
	TupleDesc	desc = tc->input.rowdesc;
	int			i;

	if (kind != ROWKIND_DELETE || tc->full_deletes)
		return ExecFetchSlotHeapTupleDatum(row);

	slot_getallattrs(row);
	for (i = 0; i < desc->natts; i++)
		tc->nulls[i] = true;
	for (i = 0; i < tc->delete_keys->ncols; i++)
	{
		AttrNumber	a = tc->delete_keys->cols[i].attno;

		tc->values[a - 1] = row->tts_values[a - 1];
		tc->nulls[a - 1] = row->tts_isnull[a - 1];
	}
	return HeapTupleGetDatum(heap_form_tuple(desc, tc->values, tc->nulls));
}

static void
emit_change(void *arg, RowKind kind, TupleTableSlot *row)
{
	ToChangelogCall *tc = (ToChangelogCall *) arg;
	const PtfRowMeta *meta = frame_current_meta(tc->out.frame);
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	Datum		code;

	/* an insert read from a table (a snapshot's row) has no WAL position */
	if (kind == ROWKIND_TRUNCATE)
	{
		if (tc->mapping.truncate_code == NULL)
			return;				/* its rows' deletes were emitted, if any */
		code = tc->truncate_text;
	}
	else if (kind == ROWKIND_INSERT && tc->mapping.read_code != NULL &&
			 XLogRecPtrIsInvalid(meta->lsn))
		code = tc->read_text;
	else if (tc->mapping.mapped[kind])
		code = tc->code_text[kind];
	else
	{
		tc->unmapped++;
		return;
	}
	values[0] = code;
	if (kind == ROWKIND_TRUNCATE)
		nulls[1] = true;		/* no row: the whole table */
	else
	{
		ptf_check_row_complete(tc->out.frame, row);
		values[1] = row_datum(tc, kind, row);
	}
	if (XLogRecPtrIsInvalid(meta->lsn))
		nulls[2] = nulls[3] = nulls[4] = true;
	else
	{
		/* once per transaction: widening takes a lock */
		if (meta->xid != tc->last_xid || !FullTransactionIdIsValid(tc->last_fxid))
		{
			tc->last_xid = meta->xid;
			tc->last_fxid = widen_xid(meta->xid);
		}
		values[2] = LSNGetDatum(meta->lsn);
		values[3] = TimestampTzGetDatum(meta->commit_time);
		values[4] = FullTransactionIdGetDatum(tc->last_fxid);
	}
	ptf_output_put_values(&tc->out, values, nulls);
	tc->out.rows++;
}

/* passthrough over memory state, or images kept per key over a uid's */
static PtfOperator *
build_normalize(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	ToChangelogCall *tc = (ToChangelogCall *) call;
	NormalizeOptions opts;

	memset(&opts, 0, sizeof(opts));
	opts.rowdesc = b->rowdescs[0];
	opts.keys = b->keys[0];
	opts.mode = (env->durable && tc->normalize) ? NORMALIZE_UPSERT : NORMALIZE_PASSTHROUGH;
	opts.ttl_us = call->ttl_us;
	return normalize_create(&opts, env);
}

static uint64
to_changelog_skipped(PtfCall *call, PtfOperator *op)
{
	ToChangelogCall *tc = (ToChangelogCall *) call;

	return tc->unmapped + normalize_dropped(op) + normalize_unchanged(op);
}

Datum
ptf_to_changelog(PG_FUNCTION_ARGS)
{
	ToChangelogCall tc;
	PtfCall    *call = &tc.call;
	PtfCallInput *in;
	char	   *query;
	KeySpec    *partition_by;
	char		replident = REPLICA_IDENTITY_FULL;
	KeySpec    *ri_keys = NULL;
	int			i;

	memset(&tc, 0, sizeof(tc));
	ptf_call_init(call, "to_changelog");

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_INPUT, "input", &tc.input);
	partition_by = ptf_keys_arg(fcinfo, ARG_PARTITION_BY, tc.input.rowdesc,
								"partition_by");
	if (PG_ARGISNULL(ARG_OP_MAPPING))
		op_mapping_identity(&tc.mapping);
	else
		op_mapping_from_jsonb(PG_GETARG_JSONB_P(ARG_OP_MAPPING), &tc.mapping,
							  "op_mapping");
	for (i = 0; i < ROWKIND_COUNT; i++)
		if (tc.mapping.mapped[i])
			tc.code_text[i] = CStringGetTextDatum(tc.mapping.code[i]);
	if (tc.mapping.read_code != NULL)
		tc.read_text = CStringGetTextDatum(tc.mapping.read_code);
	if (tc.mapping.truncate_code != NULL)
		tc.truncate_text = CStringGetTextDatum(tc.mapping.truncate_code);
	tc.full_deletes = ptf_bool_arg(fcinfo, ARG_FULL_DELETES, "produces_full_deletes");
	call->ttl_us = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	call->uid = ptf_uid_arg(fcinfo, ARG_UID);
	query = ptf_text_arg(fcinfo, ARG_QUERY);
	call->changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&tc.input, query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, ARG_SNAPSHOT, call->changes, call->uid);

	/*
	 * A stream's deletes carry its replica identity; the deletes of a
	 * (kind, data) query are taken to, the table's being their row type.
	 */
	if (call->changes || (!tc.full_deletes && partition_by->ncols == 0))
		ri_keys = ptf_replica_identity_keys(tc.input.relid, tc.input.rowdesc, &replident);

	/* what a partial delete keeps: partition_by, else the replica identity */
	tc.delete_keys = partition_by->ncols > 0 ? partition_by : ri_keys;
	if (!tc.full_deletes && (tc.delete_keys == NULL || tc.delete_keys->ncols == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("produces_full_deletes => false needs key columns to keep"),
				 errhint("Give partition_by, or read a table with a primary key or a replica identity index.")));

	/*
	 * An upsert stream (old images of the key only, none for most updates)
	 * is normalized when -U rows or whole deletes are asked for.
	 */
	tc.normalize = (call->changes && replident != REPLICA_IDENTITY_FULL &&
					(tc.mapping.mapped[ROWKIND_UPDATE_BEFORE] ||
					 (tc.mapping.mapped[ROWKIND_DELETE] && tc.full_deletes)));
	if (tc.normalize && ri_keys == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s logs no key for its updates and deletes",
						get_rel_name(tc.input.relid)),
				 errdetail("Its replica identity is %s; UPDATE_BEFORE rows and whole deletes need old images.",
						   replident == REPLICA_IDENTITY_NOTHING ? "NOTHING" : "DEFAULT without a primary key"),
				 errhint("ALTER TABLE ... REPLICA IDENTITY FULL, or DEFAULT with a primary key.")));
	tc.keys = ri_keys != NULL ? ri_keys : partition_by;

	in = ptf_call_add_input(call, "input", &tc.input, query);
	in->frame.keys = tc.keys;
	/*
	 * A truncation deletes every kept image, and is a row of its own when
	 * mapped; a stream with neither cannot say what it removed.
	 */
	in->on_truncate = (tc.normalize || tc.mapping.truncate_code != NULL) ?
		TRUNCATE_PASS : TRUNCATE_ERROR;

	/*
	 * A pipeline's query cannot change: a truncation would stop each of its
	 * steps for good.  Refused when the pipeline is made (its first call),
	 * before it could meet one; pipelines made earlier go on as they were.
	 */
	if (in->on_truncate == TRUNCATE_ERROR && call->changes &&
		ptf_step_current() != NULL && ptf_step_current()->start_only)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a to_changelog pipeline must map \"TRUNCATE\" in op_mapping"),
				 errdetail("The stream keeps no rows of table %s, so a truncation can only be a row of its own; unmapped, it would stop every step of the pipeline, whose query cannot change.",
						   ptf_relation_sql_name(tc.input.relid)),
				 errhint("Add \"TRUNCATE\" with a code of your choice to op_mapping.")));
	/* normalizing finds old rows by their key; -U rows and whole deletes as they come need FULL */
	if (tc.normalize)
		in->old_rows = OLD_ROWS_KEY;
	else if (call->changes && (tc.mapping.mapped[ROWKIND_UPDATE_BEFORE] ||
							   (tc.mapping.mapped[ROWKIND_DELETE] && tc.full_deletes)))
		in->old_rows = OLD_ROWS_FULL;
	call->need_proc_time = tc.normalize && call->ttl_us > 0;
	/* no processing-time timers; event-time ones are found by time */
	call->probe_ok = true;
	call->layout = &normalize_layout;
	call->keeps_images = tc.normalize;
	/* images kept or not: a uid cannot switch, its images would be stale */
	call->options = tc.normalize ? "normalizing (an image kept per key)" : NULL;
	call->build = build_normalize;
	call->skipped = to_changelog_skipped;

	ptf_call_output(call, fcinfo, &tc.out, emit_change, &tc);
	tc.values = palloc(sizeof(Datum) * Max(tc.input.rowdesc->natts, 1));
	tc.nulls = palloc(sizeof(bool) * Max(tc.input.rowdesc->natts, 1));
	return ptf_call_return(call);
}
