/*-------------------------------------------------------------------------
 *
 * from_changelog.c
 *	  SQL entry point of ptf.from_changelog(): CDC rows (an op code column,
 *	  flat or with before/after images) turned back into changes of a
 *	  target row type, (kind, data) rows.
 *
 * The input is append-only: a table of change records, a query, or the
 * change stream of a landing table (its inserts; deletes of landing rows
 * are clean-up and pass over).  Rows become changes in input/cdc_rows.c;
 * with consume_full_deletes => false the images of retractions come from
 * the last image kept per partition_by key (operators/normalize.c).
 *
 * Called from SQL, the changes are the function's materialized result.
 * apply_changelog over a bare call of it takes them as they come instead
 * (from_changelog_run_into): a backlog's result would spill to a
 * temporary file only to be read back row by row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"

#include "base/op_mapping.h"
#include "engine/call.h"
#include "functions/common.h"
#include "functions/from_changelog.h"
#include "input/cdc_rows.h"
#include "operators/normalize.h"

PG_FUNCTION_INFO_V1(ptf_from_changelog);

enum
{
	ARG_INPUT,
	ARG_TARGET,
	ARG_OP,
	ARG_OP_MAPPING,
	ARG_INVALID_OP_HANDLING,
	ARG_BEFORE,
	ARG_AFTER,
	ARG_PARTITION_BY,
	ARG_FULL_DELETES,
	ARG_STATE_TTL,
	ARG_UID,
	ARG_QUERY,
	ARG_CHANGES,
	ARG_SNAPSHOT
};

typedef struct FromChangelogCall
{
	PtfCall		call;
	PtfInputArg input;
	TupleDesc	target;
	CodeMapping mapping;
	NormalizeMode mode;
	CdcRows    *cdc;
	PtfOutput	out;
	Datum		kind_text[ROWKIND_COUNT];
	PtfRowSink	put;			/* from_changelog_run_into: the changes' sink */
	void	   *put_arg;
	uint64		cleanup;		/* deletes of landing rows passed over */
	uint64		updated;		/* updates of landing rows passed over */
	bool		skip_invalid;	/* invalid_op_handling => 'SKIP' */
} FromChangelogCall;

static void
emit_change(void *arg, RowKind kind, TupleTableSlot *row)
{
	FromChangelogCall *fc = (FromChangelogCall *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = fc->kind_text[kind];
	values[1] = ExecFetchSlotHeapTupleDatum(row);
	tuplestore_putvalues(fc->out.store, fc->out.desc, values, nulls);
	fc->out.rows++;
}

/* the changes as they come, to the caller's sink */
static void
put_change(void *arg, RowKind kind, TupleTableSlot *row)
{
	FromChangelogCall *fc = (FromChangelogCall *) arg;

	fc->put(fc->put_arg, kind, row, NULL);
	fc->out.rows++;
}

static PtfOperator *
build_operator(PtfCall *call, const PtfOperatorEnv *env, const PtfCallBuild *b)
{
	FromChangelogCall *fc = (FromChangelogCall *) call;
	NormalizeOptions opts;

	memset(&opts, 0, sizeof(opts));
	opts.rowdesc = b->rowdescs[0];
	opts.keys = b->keys[0];
	opts.mode = fc->mode;
	opts.ttl_us = call->ttl_us;
	return normalize_create(&opts, env);
}

/* After the run: what was passed over, said once. */
static void
from_changelog_finished(PtfCall *call)
{
	FromChangelogCall *fc = (FromChangelogCall *) call;

	if (fc->skip_invalid && cdc_rows_skipped(fc->cdc) > 0)
		ereport(NOTICE,
				(errmsg_plural("from_changelog skipped " UINT64_FORMAT " row with a NULL or unmapped op code",
							   "from_changelog skipped " UINT64_FORMAT " rows with a NULL or unmapped op code",
							   cdc_rows_skipped(fc->cdc), cdc_rows_skipped(fc->cdc))));
	if (fc->updated > 0)
		ereport(NOTICE,
				(errmsg_plural("from_changelog passed over " UINT64_FORMAT " update of a record of %s",
							   "from_changelog passed over " UINT64_FORMAT " updates of records of %s",
							   fc->updated, fc->updated, get_rel_name(fc->input.relid)),
				 errdetail("A record is read once, as it was inserted.")));
}

static uint64
from_changelog_skipped(PtfCall *call, PtfOperator *op)
{
	FromChangelogCall *fc = (FromChangelogCall *) call;

	return cdc_rows_skipped(fc->cdc) + normalize_dropped(op) + fc->cleanup + fc->updated;
}

/*
 * A change record: a row of the relation or query, or a landing table's
 * insert.  A landing table's records are read once, as inserted: deleting
 * them is clean-up, and so is updating them (marking them done, say) --
 * the insert was read already, or came before the stream and is not
 * wanted.  Neither stops the stream; updates are said (a NOTICE).
 */
static void
cdc_row(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	FromChangelogCall *fc = (FromChangelogCall *) arg;

	if (meta == NULL || kind == ROWKIND_INSERT)
		cdc_rows_decode(fc->cdc, row, meta, frame_push, fc->call.inputs[0].handle);
	else if (kind == ROWKIND_UPDATE_AFTER)
		fc->updated++;
	else if (kind != ROWKIND_UPDATE_BEFORE)
		fc->cleanup++;
}

/* The input is planned: a changelog query is no CDC record. */
static void
from_changelog_prepared(PtfCall *call)
{
	if (call->inputs[0].sql.changelog)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("from_changelog reads append-only input"),
				 errdetail("The query returns (kind, data) rows, a changelog already.")));
	/* the frame's rows are the target's, of any kind */
	call->inputs[0].frame.changelog = true;
}
static TupleDesc
target_arg(FunctionCallInfo fcinfo)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, ARG_TARGET);

	ptf_check_row_type_exists(fcinfo, type);
	if (!OidIsValid(type) || get_typtype(type) != TYPTYPE_COMPOSITE || type == RECORDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target must be a row type, such as NULL::tablename, not %s",
						OidIsValid(type) ? format_type_be(type) : "unknown")));
	ptf_type_only_arg(fcinfo, ARG_TARGET, "target");
	return lookup_rowtype_tupdesc_copy(type, -1);
}

/*
 * The target columns a retraction is read for: those its consumer reads
 * and the keys partition_by gives the call's state; NULL (every column)
 * when the consumer needs whole rows or its columns are not the target's.
 */
static const bool *
retraction_keys(TupleDesc target, KeySpec *keys, const bool *consumer, Oid rowtype)
{
	bool	   *cols;
	int			i;

	if (consumer == NULL || rowtype != target->tdtypeid)
		return NULL;
	cols = palloc(sizeof(bool) * target->natts);
	memcpy(cols, consumer, sizeof(bool) * target->natts);
	for (i = 0; i < keys->ncols; i++)
		cols[keys->cols[i].attno - 1] = true;
	return cols;
}

/*
 * The call of the arguments in fcinfo, its output not yet said;
 * retraction_columns as from_changelog_run_into's.
 */
static void
from_changelog_setup(FromChangelogCall *fcp, FunctionCallInfo fcinfo,
					 const bool *retraction_columns, Oid rowtype)
{
	PtfCall    *call = &fcp->call;
	PtfCallInput *in;
	CdcRowsSpec spec;
	char	   *query;
	char	   *handling;
	bool		full_deletes;
	KeySpec    *keys;

	memset(fcp, 0, sizeof(*fcp));
	memset(&spec, 0, sizeof(spec));
	ptf_call_init(call, "from_changelog");

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_INPUT, "input", &fcp->input);
	fcp->target = target_arg(fcinfo);
	if (PG_ARGISNULL(ARG_OP))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("op must not be NULL")));
	if (PG_ARGISNULL(ARG_OP_MAPPING))
		code_mapping_identity(&fcp->mapping);
	else
		code_mapping_from_jsonb(PG_GETARG_JSONB_P(ARG_OP_MAPPING), &fcp->mapping,
								"op_mapping");
	handling = ptf_text_arg(fcinfo, ARG_INVALID_OP_HANDLING);
	if (handling == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("invalid_op_handling must not be NULL")));
	if (strcmp(handling, "FAIL") != 0 && strcmp(handling, "SKIP") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid_op_handling must be 'FAIL' or 'SKIP', not '%s'", handling)));
	keys = ptf_keys_arg(fcinfo, ARG_PARTITION_BY, fcp->target, "partition_by");
	full_deletes = ptf_bool_arg(fcinfo, ARG_FULL_DELETES, "consume_full_deletes");
	call->ttl_us = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	call->uid = ptf_uid_arg(fcinfo, ARG_UID);
	query = ptf_text_arg(fcinfo, ARG_QUERY);
	call->changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&fcp->input, query, call->changes, call->uid);
	call->snapshot = ptf_snapshot_arg(fcinfo, ARG_SNAPSHOT, call->changes, call->uid);

	/* an upsert mapping (updates without their before half) needs its key */
	if (fcp->mapping.mapped[ROWKIND_UPDATE_AFTER] &&
		!fcp->mapping.mapped[ROWKIND_UPDATE_BEFORE] && keys->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("op_mapping maps UPDATE_AFTER without UPDATE_BEFORE, which needs partition_by"),
				 errdetail("Such a changelog is an upsert stream: its rows are related by a key."),
				 errhint("Give partition_by with the key columns of the target.")));
	if (!full_deletes && keys->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("consume_full_deletes => false needs partition_by"),
				 errdetail("Deletes that carry only their key take the row from the last image kept per key.")));
	fcp->mode = full_deletes ? NORMALIZE_PASSTHROUGH : NORMALIZE_RETRACTIONS;
	call->need_proc_time = !full_deletes && call->ttl_us > 0;
	/* no processing-time timers; event-time ones are found by time */
	call->probe_ok = true;

	spec.indesc = fcp->input.rowdesc;
	spec.target = fcp->target;
	spec.op_column = text_to_cstring(PG_GETARG_TEXT_PP(ARG_OP));
	spec.before = ptf_text_arg(fcinfo, ARG_BEFORE);
	spec.after = ptf_text_arg(fcinfo, ARG_AFTER);
	spec.mapping = &fcp->mapping;
	spec.skip_invalid = (strcmp(handling, "SKIP") == 0);
	spec.retractions_from_state = !full_deletes;
	spec.retraction_columns = retraction_keys(fcp->target, keys, retraction_columns, rowtype);
	fcp->cdc = cdc_rows_create(&spec);

	/*
	 * The input is the CDC records; the frame and the state see rows of the
	 * target, keyed by partition_by.
	 */
	in = ptf_call_add_input(call, "input", &fcp->input, query);
	in->frame.rowdesc = fcp->target;
	in->frame.keys = keys;
	in->adapter = cdc_row;
	in->adapter_arg = fcp;
	/* truncating or updating the landing table is clean-up too */
	in->on_truncate = TRUNCATE_SKIP;
	in->inserts_only = true;
	call->layout = &normalize_layout;
	call->keeps_images = !full_deletes;
	/* the records read, and whether images are kept, are the uid's */
	call->options = psprintf("records of %s%s",
							 format_type_extended(fcp->input.rowtype, -1,
												  FORMAT_TYPE_FORCE_QUALIFY),
							 full_deletes ? "" : ", an image kept per key");
	call->prepared = from_changelog_prepared;
	call->build = build_operator;
	call->skipped = from_changelog_skipped;
	call->finished = from_changelog_finished;
	fcp->skip_invalid = spec.skip_invalid;
}

Datum
ptf_from_changelog(PG_FUNCTION_ARGS)
{
	FromChangelogCall fc;
	int			k;

	from_changelog_setup(&fc, fcinfo, NULL, InvalidOid);
	ptf_call_output(&fc.call, fcinfo, &fc.out, emit_change, &fc);
	for (k = 0; k < ROWKIND_COUNT; k++)
		fc.kind_text[k] = CStringGetTextDatum(rowkind_short_name((RowKind) k));
	return ptf_call_return(&fc.call);
}

void
from_changelog_run_into(FunctionCallInfo fcinfo, PtfRowSink put, void *put_arg,
						const bool *retraction_columns, Oid rowtype)
{
	FromChangelogCall fc;

	from_changelog_setup(&fc, fcinfo, retraction_columns, rowtype);
	fc.put = put;
	fc.put_arg = put_arg;
	fc.call.fcinfo = fcinfo;
	fc.call.out = &fc.out;		/* its rows counted; no result to fill */
	fc.call.emit = put_change;
	fc.call.emit_arg = &fc;
	(void) ptf_call_return(&fc.call);
}
