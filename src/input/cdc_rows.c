/*-------------------------------------------------------------------------
 *
 * cdc_rows.c
 *	  CDC rows read as changes of a target row type (FROM_CHANGELOG).
 *
 * The op column's value is looked up in the code mapping; a code meaning
 * 'UPDATE_BEFORE, UPDATE_AFTER' gives two changes.  Additions (+I, +U)
 * take the after image, retractions (-U, -D) the before image, or the
 * after image when there is no before (Maxwell-style deletes carry the
 * deleted row as their data).  Flat rows are their own image, column by
 * column by name; the op column is consumed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "input/cdc_rows.h"
#include "input/input.h"
#include "input/jsonb_image.h"

typedef struct ImageColumn
{
	AttrNumber	attno;			/* 0: not given */
	bool		is_jsonb;		/* else of the target's composite type */
} ImageColumn;

static void decode(CdcRows *d, TupleTableSlot *row, const PtfRowMeta *meta,
				   PtfRowSink sink, void *arg);

struct CdcRows
{
	CdcRowsSpec spec;
	AttrNumber	op_attno;
	Oid			op_type;
	bool		envelope;
	ImageColumn before;
	ImageColumn after;
	AttrNumber *flat_map;		/* target column -> input column, 0: NULL */
	FmgrInfo  **flat_typmod;	/* per target column: its length coercion, or NULL */
	FmgrInfo	populate;		/* jsonb_populate_record(NULL::target, j) */
	JsonbImage *reader;			/* the same, faster; NULL: populate only */
	Datum	   *values;			/* the reader's row */
	bool	   *nulls;
	TupleTableSlot *flat_slot;
	TupleTableSlot *image_slot;
	HeapTupleData image_tuple;	/* the image in image_slot */
	uint64		rowno;
	uint64		skipped;
};

static AttrNumber
find_column(TupleDesc desc, const char *name)
{
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return i + 1;
	}
	return InvalidAttrNumber;
}

static AttrNumber
required_column(TupleDesc desc, const char *name, const char *argname)
{
	AttrNumber	a = find_column(desc, name);

	if (a == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" given as %s is not a column of the input", name, argname)));
	return a;
}

static ImageColumn
image_column(const CdcRowsSpec *spec, const char *name, const char *argname)
{
	ImageColumn c = {0, false};
	Oid			type;

	if (name == NULL)
		return c;
	c.attno = required_column(spec->indesc, name, argname);
	type = TupleDescAttr(spec->indesc, c.attno - 1)->atttypid;
	if (type == JSONBOID)
		c.is_jsonb = true;
	else if (type != spec->target->tdtypeid)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" is of type %s", argname, name, format_type_be(type)),
				 errdetail("An image column is jsonb or of the target's row type, %s.",
						   format_type_be(spec->target->tdtypeid))));
	return c;
}

CdcRows *
cdc_rows_create(const CdcRowsSpec *spec)
{
	CdcRows    *d = palloc0(sizeof(CdcRows));
	TupleDesc	target = spec->target;
	int			i;

	d->spec = *spec;
	d->op_attno = required_column(spec->indesc, spec->op_column, "op");
	d->op_type = getBaseType(TupleDescAttr(spec->indesc, d->op_attno - 1)->atttypid);
	if (d->op_type != TEXTOID && d->op_type != VARCHAROID && d->op_type != BPCHAROID &&
		d->op_type != BOOLOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("op column \"%s\" is of type %s", spec->op_column,
						format_type_be(d->op_type)),
				 errdetail("The op column holds text codes (or a boolean flag, whose codes are 'true' and 'false').")));

	d->envelope = (spec->before != NULL || spec->after != NULL);
	if (d->envelope)
	{
		if (spec->after == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("before needs after"),
					 errdetail("Inserts and updates take their row from the after image.")));
		d->before = image_column(spec, spec->before, "before");
		d->after = image_column(spec, spec->after, "after");
		if (d->before.is_jsonb || d->after.is_jsonb)
		{
			FuncExpr   *call;

			/* its record type comes from the first argument's type, as in SQL */
			call = makeFuncExpr(F_JSONB_POPULATE_RECORD, target->tdtypeid,
								list_make2(makeNullConst(target->tdtypeid, -1, InvalidOid),
										   makeNullConst(JSONBOID, -1, InvalidOid)),
								InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
			fmgr_info(F_JSONB_POPULATE_RECORD, &d->populate);
			fmgr_info_set_expr((Node *) call, &d->populate);
			d->reader = jsonb_image_create(target);
			d->values = palloc(sizeof(Datum) * Max(target->natts, 1));
			d->nulls = palloc(sizeof(bool) * Max(target->natts, 1));
		}
		d->image_slot = MakeSingleTupleTableSlot(target, &TTSOpsHeapTuple);
	}
	else
	{
		for (i = 0; i < spec->mapping->ncodes; i++)
			if (spec->mapping->update_pair[i])
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("code \"%s\" means an update's two images, and flat rows have one",
								spec->mapping->codes[i]),
						 errhint("Name the image columns with before and after.")));

		/* flat: target columns by name; extra input columns are not wanted */
		d->flat_map = palloc0(sizeof(AttrNumber) * Max(target->natts, 1));
		d->flat_typmod = palloc0(sizeof(FmgrInfo *) * Max(target->natts, 1));
		for (i = 0; i < target->natts; i++)
		{
			Form_pg_attribute t = TupleDescAttr(target, i);
			AttrNumber	a;
			Form_pg_attribute s;

			if (t->attisdropped)
				continue;
			a = find_column(spec->indesc, NameStr(t->attname));
			if (a == InvalidAttrNumber || a == d->op_attno)
				continue;
			s = TupleDescAttr(spec->indesc, a - 1);
			if (s->atttypid != t->atttypid)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" is of type %s in the input and %s in the target",
								NameStr(t->attname), format_type_be(s->atttypid),
								format_type_be(t->atttypid)),
						 errhint("Give a query that casts it.")));
			d->flat_map[i] = a;

			/*
			 * The target's length or precision (varchar(3), numeric(5,1)) is
			 * applied as an assignment would: the value is cut or refused.
			 */
			if (t->atttypmod >= 0 && s->atttypmod != t->atttypmod)
			{
				Oid			funcid;

				if (find_typmod_coercion_function(t->atttypid, &funcid) == COERCION_PATH_FUNC)
				{
					d->flat_typmod[i] = palloc(sizeof(FmgrInfo));
					fmgr_info(funcid, d->flat_typmod[i]);
				}
			}
		}
		d->flat_slot = MakeSingleTupleTableSlot(target, &TTSOpsVirtual);
	}
	return d;
}

/* ---- reading a row ---- */

/* The row as a record literal (record_out's quoting), for messages; long ones cut. */
static char *
row_text(TupleTableSlot *row)
{
	TupleDesc	desc = row->tts_tupleDescriptor;
	StringInfoData buf;
	bool		first = true;
	int			i;

	slot_getallattrs(row);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (i = 0; i < desc->natts && buf.len < 500; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Oid			outfunc;
		bool		varlena;
		char	   *value;
		const char *c;
		bool		quote;

		if (att->attisdropped)
			continue;
		if (!first)
			appendStringInfoChar(&buf, ',');
		first = false;
		if (row->tts_isnull[i])
			continue;			/* a NULL is nothing between its commas */
		getTypeOutputInfo(att->atttypid, &outfunc, &varlena);
		value = OidOutputFunctionCall(outfunc, row->tts_values[i]);
		quote = (value[0] == '\0');
		for (c = value; *c && !quote; c++)
			quote = (*c == '"' || *c == '\\' || *c == '(' || *c == ')' || *c == ',' ||
					 isspace((unsigned char) *c));
		if (!quote)
		{
			appendStringInfoString(&buf, value);
			continue;
		}
		appendStringInfoChar(&buf, '"');
		for (c = value; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&buf, *c);
			appendStringInfoChar(&buf, *c);
		}
		appendStringInfoChar(&buf, '"');
	}
	if (buf.len > 500)
	{
		buf.len = pg_mbcliplen(buf.data, buf.len, 500);
		buf.data[buf.len] = '\0';
		appendStringInfoString(&buf, "...");
	}
	else
		appendStringInfoChar(&buf, ')');
	return buf.data;
}

static char *
position_text(CdcRows *d, const PtfRowMeta *meta)
{
	if (meta != NULL && !XLogRecPtrIsInvalid(meta->lsn))
		return psprintf("the change at %X/%X", LSN_FORMAT_ARGS(meta->lsn));
	return psprintf("input row " UINT64_FORMAT, d->rowno);
}

static void
invalid_code(CdcRows *d, TupleTableSlot *row, const PtfRowMeta *meta, const char *code,
			 int len)
{
	if (code == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("NULL op code in %s", position_text(d, meta)),
				 errdetail("The row is %s.", row_text(row)),
				 errhint("invalid_op_handling => 'SKIP' skips rows whose op code is NULL or not mapped.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid op code \"%.*s\" in %s", len, code, position_text(d, meta)),
			 errdetail("The row is %s.", row_text(row)),
			 errhint("Map the code in op_mapping, or skip such rows with invalid_op_handling => 'SKIP'.")));
}

/* An image column's value; a JSON null is no image either. */
static Datum
image_value(TupleTableSlot *row, ImageColumn *col, bool *isnull)
{
	Datum		v = slot_getattr(row, col->attno, isnull);

	if (!*isnull && col->is_jsonb)
	{
		Jsonb	   *j = DatumGetJsonbP(v);
		JsonbValue	s;

		if (JB_ROOT_IS_SCALAR(j) && JsonbExtractScalar(&j->root, &s) && s.type == jbvNull)
			*isnull = true;
	}
	return v;
}

/*
 * The row's image for kind, in the image slot; false when it has none.
 * A retraction takes the before image, else the after one -- but the -U
 * of an update row only when its image will come from state and the
 * after image need only give the key.
 */
static bool
envelope_image(CdcRows *d, TupleTableSlot *row, RowKind kind, bool pair)
{
	ImageColumn *col = &d->after;
	bool		isnull = true;
	Datum		v = (Datum) 0;

	if (!ROWKIND_IS_ADDITION(kind) && d->before.attno != 0)
	{
		v = image_value(row, &d->before, &isnull);
		if (!isnull)
			col = &d->before;
		else if (pair && !d->spec.retractions_from_state)
			return false;
	}
	if (col == &d->after)
		v = image_value(row, &d->after, &isnull);
	if (isnull)
		return false;

	if (col->is_jsonb && d->reader != NULL &&
		jsonb_image_read(d->reader, DatumGetJsonbP(v),
						 ROWKIND_IS_ADDITION(kind) ? NULL : d->spec.retraction_columns,
						 d->values, d->nulls))
	{
		/* a formed tuple carries the composite datum's header fields */
		v = PointerGetDatum(heap_form_tuple(d->spec.target, d->values, d->nulls)->t_data);
	}
	else if (col->is_jsonb)
	{
		LOCAL_FCINFO(fcinfo, 2);

		InitFunctionCallInfoData(*fcinfo, &d->populate, 2, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = (Datum) 0;
		fcinfo->args[0].isnull = true;
		fcinfo->args[1].value = v;
		fcinfo->args[1].isnull = false;
		v = FunctionCallInvoke(fcinfo);
		if (fcinfo->isnull)
			return false;
	}
	ptf_slot_store_composite(d->image_slot, v, &d->image_tuple);
	return true;
}

static void
hand_over(CdcRows *d, TupleTableSlot *row, RowKind kind, bool pair, const PtfRowMeta *meta,
		  PtfRowSink sink, void *arg)
{
	if (!d->envelope)
	{
		TupleTableSlot *out = d->flat_slot;
		int			i;

		slot_getallattrs(row);
		ExecClearTuple(out);
		for (i = 0; i < out->tts_tupleDescriptor->natts; i++)
		{
			AttrNumber	a = d->flat_map[i];

			out->tts_values[i] = a ? row->tts_values[a - 1] : (Datum) 0;
			out->tts_isnull[i] = a ? row->tts_isnull[a - 1] : true;
			if (d->flat_typmod[i] != NULL && !out->tts_isnull[i])
				out->tts_values[i] =
					FunctionCall3(d->flat_typmod[i], out->tts_values[i],
								  Int32GetDatum(TupleDescAttr(out->tts_tupleDescriptor, i)->atttypmod),
								  BoolGetDatum(false));
		}
		ExecStoreVirtualTuple(out);
		sink(arg, kind, out, meta);
		return;
	}
	if (!envelope_image(d, row, kind, pair))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the %s in %s has no row image", rowkind_long_name(kind),
						position_text(d, meta)),
				 (ROWKIND_IS_ADDITION(kind) || d->before.attno == 0) ?
				 errdetail("Column %s is NULL; the row is %s.", d->spec.after, row_text(row)) :
				 pair ?
				 errdetail("Column %s is NULL; the row is %s.", d->spec.before, row_text(row)) :
				 errdetail("Columns %s and %s are NULL; the row is %s.",
						   d->spec.before, d->spec.after, row_text(row)),
				 pair ?
				 errhint("Updates logged without their old row take it from the last image kept per key: consume_full_deletes => false with partition_by.") : 0));
	sink(arg, kind, d->image_slot, meta);
	ExecClearTuple(d->image_slot);
}

typedef struct DecodeContext
{
	CdcRows    *d;
	const PtfRowMeta *meta;
} DecodeContext;

static void
decode_error_context(void *arg)
{
	DecodeContext *c = (DecodeContext *) arg;

	errcontext("from_changelog reading %s", position_text(c->d, c->meta));
}

void
cdc_rows_decode(CdcRows *d, TupleTableSlot *row, const PtfRowMeta *meta,
				PtfRowSink sink, void *arg)
{
	static const PtfRowMeta no_meta;
	DecodeContext c;
	ErrorContextCallback errcb;

	if (meta == NULL)
		meta = &no_meta;
	c.d = d;
	c.meta = meta;

	d->rowno++;
	errcb.callback = decode_error_context;
	errcb.arg = &c;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	decode(d, row, meta, sink, arg);
	error_context_stack = errcb.previous;
}

static void
decode(CdcRows *d, TupleTableSlot *row, const PtfRowMeta *meta,
	   PtfRowSink sink, void *arg)
{
	const CodeMapping *m = d->spec.mapping;
	bool		isnull;
	Datum		v;
	const char *code;
	int			len;
	int			entry;

	v = slot_getattr(row, d->op_attno, &isnull);
	if (isnull)
	{
		if (!d->spec.skip_invalid)
			invalid_code(d, row, meta, NULL, 0);
		d->skipped++;
		return;
	}
	if (d->op_type == BOOLOID)
	{
		code = DatumGetBool(v) ? "true" : "false";
		len = strlen(code);
	}
	else
	{
		text	   *t = DatumGetTextPP(v);

		code = VARDATA_ANY(t);
		len = VARSIZE_ANY_EXHDR(t);
		if (d->op_type == BPCHAROID)
			while (len > 0 && code[len - 1] == ' ')
				len--;
	}

	entry = code_mapping_lookup(m, code, len);
	if (entry < 0)
	{
		if (!d->spec.skip_invalid)
			invalid_code(d, row, meta, code, len);
		d->skipped++;
		return;
	}
	if (m->update_pair[entry])
	{
		hand_over(d, row, ROWKIND_UPDATE_BEFORE, true, meta, sink, arg);
		hand_over(d, row, ROWKIND_UPDATE_AFTER, true, meta, sink, arg);
	}
	else
		hand_over(d, row, m->kind[entry], false, meta, sink, arg);
}

uint64
cdc_rows_skipped(CdcRows *d)
{
	return d->skipped;
}
