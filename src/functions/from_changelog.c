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

#include "frame.h"
#include "functions/call.h"
#include "functions/common.h"
#include "input/cdc_rows.h"
#include "operators/op_mapping.h"
#include "operators/operator.h"

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
	ARG_CHANGES
};

typedef struct FromChangelogCall
{
	PtfInputArg input;
	TupleDesc	target;
	CodeMapping mapping;
	KeySpec    *keys;
	NormalizeMode mode;
	int64		ttl_us;
	CdcRows    *cdc;
	PtfFrame   *frame;
	PtfOutput	out;
	Datum		kind_text[ROWKIND_COUNT];
	uint64		cleanup;		/* deletes of landing rows passed over */
	MemoryContext cxt;
} FromChangelogCall;

static void
emit_change(void *arg, RowKind kind, TupleTableSlot *row)
{
	FromChangelogCall *call = (FromChangelogCall *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = call->kind_text[kind];
	values[1] = ExecFetchSlotHeapTupleDatum(row);
	tuplestore_putvalues(call->out.store, call->out.desc, values, nulls);
	call->out.rows++;
}

static PtfOperator *
make_operator(void *arg, bool unbounded)
{
	FromChangelogCall *call = (FromChangelogCall *) arg;
	KeyedState *ks = keyed_state_create(call->keys, normalize_value_size(), 0,
										call->ttl_us,
										unbounded ? 0 : get_hash_memory_limit(),
										KEYED_STATE_REMOVABLE, call->cxt);

	return normalize_create(call->target, call->mode, ks, emit_change, call);
}

/* The operator of a uid, over its durable state. */
static PtfOperator *
build_operator(void *arg, KeyedState *ks, TupleDesc rowdesc)
{
	FromChangelogCall *call = (FromChangelogCall *) arg;

	return normalize_create(rowdesc, call->mode, ks, emit_change, call);
}

/* a relation's or query's row: a change record */
static void
cdc_row(void *arg, RowKind kind, TupleTableSlot *row)
{
	FromChangelogCall *call = (FromChangelogCall *) arg;

	cdc_rows_decode(call->cdc, row, NULL, frame_push_meta, call->frame);
}

/* a landing table's change: its inserts are the change records */
static void
cdc_change(void *arg, RowKind kind, TupleTableSlot *row, const PtfRowMeta *meta)
{
	FromChangelogCall *call = (FromChangelogCall *) arg;

	if (kind == ROWKIND_INSERT)
		cdc_rows_decode(call->cdc, row, meta, frame_push_meta, call->frame);
	else if (kind == ROWKIND_UPDATE_AFTER)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a row of %s was updated, and from_changelog reads append-only input",
						get_rel_name(call->input.relid)),
				 errdetail("The update is at %X/%X.", LSN_FORMAT_ARGS(meta->lsn)),
				 errhint("Change records are inserted once; deleting them when done is fine.")));
	else
		call->cleanup++;
}

static TupleDesc
target_arg(FunctionCallInfo fcinfo)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, ARG_TARGET);

	if (!OidIsValid(type) || get_typtype(type) != TYPTYPE_COMPOSITE || type == RECORDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target must be a row type, such as NULL::tablename, not %s",
						OidIsValid(type) ? format_type_be(type) : "unknown")));
	return lookup_rowtype_tupdesc_copy(type, -1);
}

Datum
ptf_from_changelog(PG_FUNCTION_ARGS)
{
	FromChangelogCall call;
	CdcRowsSpec spec;
	char	   *query;
	char	   *uid;
	char	   *handling;
	bool		changes;
	bool		full_deletes;
	PtfSqlInput in;
	PtfCallSinks sinks;
	PtfChangeStream *cs;
	char	   *slot_name;
	PtfOperator *op;
	PtfFrameTimeSpec time;
	DurableState *ds = NULL;
	DurableProgress progress;
	int			k;

	memset(&call, 0, sizeof(call));
	memset(&spec, 0, sizeof(spec));
	memset(&time, 0, sizeof(time));
	memset(&progress, 0, sizeof(progress));

	/* ---- arguments, before anything is read ---- */
	ptf_input_arg(fcinfo, ARG_INPUT, &call.input);
	call.target = target_arg(fcinfo);
	if (PG_ARGISNULL(ARG_OP))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("op must not be NULL")));
	if (PG_ARGISNULL(ARG_OP_MAPPING))
		code_mapping_identity(&call.mapping);
	else
		code_mapping_from_jsonb(PG_GETARG_JSONB_P(ARG_OP_MAPPING), &call.mapping,
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
	call.keys = ptf_keys_arg(fcinfo, ARG_PARTITION_BY, call.target, "partition_by");
	full_deletes = ptf_bool_arg(fcinfo, ARG_FULL_DELETES, "consume_full_deletes");
	call.ttl_us = ptf_state_ttl_arg(fcinfo, ARG_STATE_TTL);
	uid = ptf_uid_arg(fcinfo, ARG_UID);
	query = ptf_text_arg(fcinfo, ARG_QUERY);
	changes = ptf_bool_arg(fcinfo, ARG_CHANGES, "changes");
	ptf_check_input_choice(&call.input, query, changes, uid);

	/* an upsert mapping (updates without their before half) needs its key */
	if (call.mapping.mapped[ROWKIND_UPDATE_AFTER] &&
		!call.mapping.mapped[ROWKIND_UPDATE_BEFORE] && call.keys->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("op_mapping maps UPDATE_AFTER without UPDATE_BEFORE, which needs partition_by"),
				 errdetail("Such a changelog is an upsert stream: its rows are related by a key."),
				 errhint("Give partition_by with the key columns of the target.")));
	if (!full_deletes && call.keys->ncols == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("consume_full_deletes => false needs partition_by"),
				 errdetail("Deletes that carry only their key take the row from the last image kept per key.")));
	call.mode = full_deletes ? NORMALIZE_PASSTHROUGH : NORMALIZE_RETRACTIONS;
	time.need_proc_time = !full_deletes && call.ttl_us > 0;

	spec.indesc = call.input.rowdesc;
	spec.target = call.target;
	spec.op_column = text_to_cstring(PG_GETARG_TEXT_PP(ARG_OP));
	spec.before = ptf_text_arg(fcinfo, ARG_BEFORE);
	spec.after = ptf_text_arg(fcinfo, ARG_AFTER);
	spec.mapping = &call.mapping;
	spec.skip_invalid = (strcmp(handling, "SKIP") == 0);
	spec.retractions_from_state = !full_deletes;
	call.cdc = cdc_rows_create(&spec);

	ptf_output_init(fcinfo, &call.out);
	for (k = 0; k < ROWKIND_COUNT; k++)
		call.kind_text[k] = CStringGetTextDatum(rowkind_short_name((RowKind) k));
	call.cxt = AllocSetContextCreate(CurrentMemoryContext, "ptf from_changelog",
									 ALLOCSET_DEFAULT_SIZES);

	slot_name = ptf_call_prepare(&in, call.input.relid, call.input.rowdesc, query,
								 changes, uid);
	if (in.changelog)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("from_changelog reads append-only input"),
				 errdetail("The query returns (kind, data) rows, a changelog already.")));

	/* ---- state and operator ---- */
	if (uid != NULL)
	{
		DurableIdentity id;
		PtfStateSpec spec;

		memset(&id, 0, sizeof(id));
		id.uid = uid;
		id.function = "from_changelog";
		id.rowdesc = call.target;
		id.keys = call.keys;
		id.keeps_images = !full_deletes;
		id.slot_name = slot_name;
		/* the records read, and whether images are kept, are the uid's */
		id.options = psprintf("records of %s%s",
							  format_type_extended(call.input.rowtype, -1,
												   FORMAT_TYPE_FORCE_QUALIFY),
							  full_deletes ? "" : ", an image kept per key");
		ds = durable_open(&id, &progress);

		spec.keys = call.keys;
		spec.rowdesc = call.target;
		spec.hot = normalize_value_size();
		spec.cold = 0;
		spec.ttl_us = call.ttl_us;
		spec.flags = KEYED_STATE_REMOVABLE;
		op = ptf_call_durable_operator(ds, &spec, call.cxt, build_operator, &call, &call);
	}
	else
		op = make_operator(&call, false);

	call.frame = frame_create(op, call.target, &time, true, make_operator, &call);
	call.out.frame = call.frame;

	/* ---- run ---- */
	sinks.rows = cdc_row;
	sinks.changes = cdc_change;
	sinks.arg = &call;
	/* truncating the landing table is clean-up too */
	cs = ptf_call_run(&in, call.input.relid, call.input.rowdesc, slot_name, TRUNCATE_SKIP,
					  &progress, &sinks, call.frame, uid == NULL);
	if (spec.skip_invalid && cdc_rows_skipped(call.cdc) > 0)
		ereport(NOTICE,
				(errmsg_plural("from_changelog skipped " UINT64_FORMAT " row with a NULL or unmapped op code",
							   "from_changelog skipped " UINT64_FORMAT " rows with a NULL or unmapped op code",
							   cdc_rows_skipped(call.cdc), cdc_rows_skipped(call.cdc))));
	if (ds != NULL)
		ptf_call_store(ds, op, call.frame, cs, &progress, call.out.rows,
					   cdc_rows_skipped(call.cdc) + normalize_dropped(op) + call.cleanup,
					   call.ttl_us);
	ptf_record_call_stats("from_changelog", call.frame, call.out.rows);

	SPI_finish();
	MemoryContextDelete(call.cxt);
	return (Datum) 0;
}
