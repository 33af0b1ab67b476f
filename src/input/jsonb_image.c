/*-------------------------------------------------------------------------
 *
 * jsonb_image.c
 *	  Reading a jsonb row image into the target's values, the way
 *	  jsonb_populate_record does, with shortcuts past the text detour.
 *
 * jsonb_populate_record (PostgreSQL 15, populate_scalar) gives a column
 * the NULL of a missing key or a JSON null, the jsonb itself for a jsonb
 * column, and otherwise the column type's input function applied to the
 * value's text: a string's characters, "true"/"false", a number's
 * numeric_out.  The shortcuts below give the same datum without the
 * text: a number is its numeric already (numeric_in of numeric_out is the
 * identity on finite numbers), an integral number of scale 0 that fits is
 * the integer int4in/int8in would read, textin copies the characters, and
 * the strict ISO 8601 form jsonb_build_object writes for timestamptz --
 * YYYY-MM-DDTHH:MM:SS[.ffffff] and a numeric offset or Z -- has one
 * meaning whatever DateStyle and TimeZone say.  Whatever a shortcut does
 * not recognise goes to the input function as populate would, and what
 * needs populate's own machinery (domains and their checks, arrays,
 * composites, json, nested values) makes the caller use populate.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/syscache.h"

#include "input/jsonb_image.h"

typedef enum ColumnKind
{
	COL_DROPPED,
	COL_INPUT,					/* the type's input function, as populate */
	COL_TEXT,
	COL_NUMERIC,				/* numeric without typmod */
	COL_INT2,
	COL_INT4,
	COL_INT8,
	COL_BOOL,
	COL_TIMESTAMPTZ,			/* without typmod */
	COL_JSONB
} ColumnKind;

typedef struct ImageColumnReader
{
	ColumnKind	kind;
	const char *name;
	int			namelen;
	int32		typmod;
	Oid			ioparam;
	FmgrInfo	input;
} ImageColumnReader;

struct JsonbImage
{
	int			natts;
	ImageColumnReader *cols;
};

/* Is the type one populate reads as a plain scalar through its input? */
static bool
plain_scalar(Oid type)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	Form_pg_type t;
	bool		plain;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", type);
	t = (Form_pg_type) GETSTRUCT(tup);
	plain = (t->typtype == TYPTYPE_BASE || t->typtype == TYPTYPE_ENUM ||
			 t->typtype == TYPTYPE_RANGE || t->typtype == TYPTYPE_MULTIRANGE) &&
		!IsTrueArrayType(t) && type != JSONOID;
	ReleaseSysCache(tup);
	return plain;
}

JsonbImage *
jsonb_image_create(TupleDesc target)
{
	JsonbImage *ji = palloc0(sizeof(JsonbImage));
	int			i;

	ji->natts = target->natts;
	ji->cols = palloc0(sizeof(ImageColumnReader) * Max(target->natts, 1));
	for (i = 0; i < target->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(target, i);
		ImageColumnReader *c = &ji->cols[i];
		Oid			infunc;

		if (att->attisdropped)
		{
			c->kind = COL_DROPPED;
			continue;
		}
		if (!plain_scalar(att->atttypid))
		{
			pfree(ji->cols);
			pfree(ji);
			return NULL;
		}
		c->name = NameStr(att->attname);
		c->namelen = strlen(c->name);
		c->typmod = att->atttypmod;
		getTypeInputInfo(att->atttypid, &infunc, &c->ioparam);
		fmgr_info(infunc, &c->input);
		switch (att->atttypid)
		{
			case TEXTOID:
				c->kind = COL_TEXT;
				break;
			case NUMERICOID:
				c->kind = att->atttypmod == -1 ? COL_NUMERIC : COL_INPUT;
				break;
			case INT2OID:
				c->kind = COL_INT2;
				break;
			case INT4OID:
				c->kind = COL_INT4;
				break;
			case INT8OID:
				c->kind = COL_INT8;
				break;
			case BOOLOID:
				c->kind = COL_BOOL;
				break;
			case TIMESTAMPTZOID:
				c->kind = att->atttypmod == -1 ? COL_TIMESTAMPTZ : COL_INPUT;
				break;
			case JSONBOID:
				c->kind = COL_JSONB;
				break;
			default:
				c->kind = COL_INPUT;
		}
	}
	return ji;
}

/* n decimal digits at s, or -1 */
static int
digits(const char *s, int n)
{
	int			v = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/*
 * YYYY-MM-DD[T ]HH:MM:SS[.f{1,6}](Z|[+-]HH[:MM]) exactly, years 1 to 9999,
 * seconds below 60 (a leap second rolls over: the input function's);
 * false for anything else.
 */
static bool
iso_timestamptz(const char *s, int len, TimestampTz *result)
{
	int			year,
				month,
				day,
				hour,
				minute,
				second;
	int64		usec = 0;
	int			offset = 0;		/* seconds east of UTC */
	int			p = 19;

	if (len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') ||
		s[13] != ':' || s[16] != ':')
		return false;
	year = digits(s, 4);
	month = digits(s + 5, 2);
	day = digits(s + 8, 2);
	hour = digits(s + 11, 2);
	minute = digits(s + 14, 2);
	second = digits(s + 17, 2);
	if (year < 1 || month < 1 || month > 12 || day < 1 ||
		day > day_tab[isleap(year)][month - 1] ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59)
		return false;
	if (s[p] == '.')
	{
		int			n = 0;

		for (p++; p < len && s[p] >= '0' && s[p] <= '9'; p++, n++)
			usec = usec * 10 + (s[p] - '0');
		if (n < 1 || n > 6)		/* more digits round: the input function's */
			return false;
		for (; n < 6; n++)
			usec *= 10;
	}
	if (p == len - 1 && s[p] == 'Z')
		offset = 0;
	else if (p < len && (s[p] == '+' || s[p] == '-') && (len - p == 3 || len - p == 6))
	{
		int			oh = digits(s + p + 1, 2);
		int			om = 0;

		if (len - p == 6 && (s[p + 3] != ':' || (om = digits(s + p + 4, 2)) < 0))
			return false;
		if (oh < 0 || oh > 15 || om > 59)
			return false;
		offset = (oh * 60 + om) * 60 * (s[p] == '-' ? -1 : 1);
	}
	else
		return false;

	*result = (int64) (date2j(year, month, day) - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY +
		((int64) ((hour * 60 + minute) * 60 + second - offset)) * USECS_PER_SEC + usec;
	return IS_VALID_TIMESTAMP(*result);
}

/* the input function on the value's text, as populate_scalar does */
static Datum
from_text(ImageColumnReader *c, char *str)
{
	return InputFunctionCall(&c->input, str, c->ioparam, c->typmod);
}

/* An integral number of scale 0 that fits int4, else false. */
static bool
small_integer(Numeric n, int32 *value)
{
	bool		error = false;

	if (numeric_is_nan(n) || numeric_is_inf(n) ||
		DatumGetInt32(DirectFunctionCall1(numeric_scale, NumericGetDatum(n))) != 0)
		return false;
	*value = numeric_int4_opt_error(n, &error);
	return !error;
}

static bool
read_number(ImageColumnReader *c, Numeric n, Datum *value)
{
	int32		i;

	switch (c->kind)
	{
		case COL_NUMERIC:
			*value = NumericGetDatum(n);
			return true;
		case COL_INT2:
			if (small_integer(n, &i) && i >= PG_INT16_MIN && i <= PG_INT16_MAX)
			{
				*value = Int16GetDatum((int16) i);
				return true;
			}
			break;
		case COL_INT4:
			if (small_integer(n, &i))
			{
				*value = Int32GetDatum(i);
				return true;
			}
			break;
		case COL_INT8:
			if (small_integer(n, &i))
			{
				*value = Int64GetDatum((int64) i);
				return true;
			}
			break;
		default:
			break;
	}
	*value = from_text(c, DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n))));
	return true;
}

static bool
read_value(ImageColumnReader *c, JsonbValue *v, Datum *value)
{
	if (c->kind == COL_JSONB)
	{
		*value = JsonbPGetDatum(JsonbValueToJsonb(v));
		return true;
	}
	switch (v->type)
	{
		case jbvString:
			if (c->kind == COL_TEXT)
				*value = PointerGetDatum(cstring_to_text_with_len(v->val.string.val,
																  v->val.string.len));
			else
			{
				TimestampTz ts;

				if (c->kind == COL_TIMESTAMPTZ &&
					iso_timestamptz(v->val.string.val, v->val.string.len, &ts))
					*value = TimestampTzGetDatum(ts);
				else
					*value = from_text(c, pnstrdup(v->val.string.val, v->val.string.len));
			}
			return true;
		case jbvNumeric:
			return read_number(c, v->val.numeric, value);
		case jbvBool:
			if (c->kind == COL_BOOL)
				*value = BoolGetDatum(v->val.boolean);
			else
				*value = from_text(c, pstrdup(v->val.boolean ? "true" : "false"));
			return true;
		default:
			/* nested objects and arrays: populate's own reading */
			return false;
	}
}

bool
jsonb_image_read(JsonbImage *ji, Jsonb *image, const bool *only, Datum *values, bool *nulls)
{
	int			i;

	if (JB_ROOT_IS_SCALAR(image) || !JB_ROOT_IS_OBJECT(image))
		return false;
	for (i = 0; i < ji->natts; i++)
	{
		ImageColumnReader *c = &ji->cols[i];
		JsonbValue	buf;
		JsonbValue *v;

		nulls[i] = true;
		values[i] = (Datum) 0;
		if (c->kind == COL_DROPPED || (only != NULL && !only[i]))
			continue;
		v = getKeyJsonValueFromContainer(&image->root, c->name, c->namelen, &buf);
		if (v == NULL || v->type == jbvNull)
			continue;
		if (!read_value(c, v, &values[i]))
			return false;
		nulls[i] = false;
	}
	return true;
}
