/*-------------------------------------------------------------------------
 *
 * key.c
 *	  Partition keys: resolution of key columns, hashing, equality and the
 *	  packed form kept in state.
 *
 * A packed key is the key columns in heap-tuple data layout (aligned
 * datums, short varlena headers), preceded by a null bitmap only when the
 * key has a NULL.  It is a few bytes for common keys, where a MinimalTuple
 * would add a 16-byte header to every key in state.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/tupmacs.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "state/key.h"

static bool
type_equality_is_bitwise(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case BOOLOID:
		case CHAROID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case UUIDOID:
			return true;
		default:
			return false;
	}
}

AttrNumber
ptf_column_attno(TupleDesc desc, const char *colname, const char *argname)
{
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), colname) == 0)
			return att->attnum;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" named in %s does not exist in the input row type %s",
					colname, argname, format_type_be(desc->tdtypeid))));
	return InvalidAttrNumber;	/* keep compiler quiet */
}

static void
key_column_init(KeyColumn *col, TupleDesc rowdesc, AttrNumber attno)
{
	Form_pg_attribute att = TupleDescAttr(rowdesc, attno - 1);
	TypeCacheEntry *tce;

	col->attno = attno;
	col->typid = att->atttypid;
	col->collation = att->attcollation;
	col->typlen = att->attlen;
	col->typbyval = att->attbyval;
	col->typalign = att->attalign;
	col->typstorage = att->attstorage;

	tce = lookup_type_cache(col->typid,
							TYPECACHE_HASH_PROC_FINFO | TYPECACHE_EQ_OPR);
	if (!OidIsValid(tce->hash_proc) || !OidIsValid(tce->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key column \"%s\" has type %s, which has no hash equality",
						NameStr(att->attname), format_type_be(col->typid)),
				 errhint("Key columns need a type with a default hash operator class, as GROUP BY with hashing does.")));

	fmgr_info(get_opcode(tce->eq_opr), &col->eq);
	fmgr_info_copy(&col->hash, &tce->hash_proc_finfo, CurrentMemoryContext);
	col->bitwise_eq = type_equality_is_bitwise(col->typid);
	col->int_hash = tce->hash_proc == F_HASHINT8 ? '8' :
		tce->hash_proc == F_HASHINT4 ? '4' :
		tce->hash_proc == F_HASHINT2 ? '2' : 0;
}

static KeySpec *
key_spec_alloc(TupleDesc rowdesc, int ncols)
{
	KeySpec    *spec = palloc0(sizeof(KeySpec));

	spec->ncols = ncols;
	spec->cols = palloc0(sizeof(KeyColumn) * Max(ncols, 1));
	spec->probe_values = palloc0(sizeof(Datum) * Max(ncols, 1));
	spec->probe_nulls = palloc0(sizeof(bool) * Max(ncols, 1));
	spec->desc = CreateTemplateTupleDesc(ncols);
	return spec;
}

/*
 * A key of one integer column is the commonest: its probe, hash and
 * comparison go without the loops over columns and their layout (a third
 * of a window aggregate's key work per row).  By value and compared by its
 * bits: not int8 where a Datum is 4 bytes, nor xid or cid, whose hash is
 * hashint4's but whose equality is not the Datum's.
 */
static void
key_spec_finish(KeySpec *spec, TupleDesc rowdesc)
{
	int			i;

	for (i = 0; i < spec->ncols; i++)
		TupleDescCopyEntry(spec->desc, i + 1, rowdesc, spec->cols[i].attno);
	spec->one_int = (spec->ncols == 1 && spec->cols[0].int_hash != 0 &&
					 spec->cols[0].typbyval && spec->cols[0].bitwise_eq);
}

KeySpec *
key_spec_from_attnos(TupleDesc rowdesc, int ncols, const AttrNumber *attnos)
{
	KeySpec    *spec = key_spec_alloc(rowdesc, ncols);
	int			i;

	for (i = 0; i < ncols; i++)
		key_column_init(&spec->cols[i], rowdesc, attnos[i]);
	key_spec_finish(spec, rowdesc);
	return spec;
}

KeySpec *
key_spec_copy(const KeySpec *keys, TupleDesc rowdesc)
{
	AttrNumber *attnos = palloc(sizeof(AttrNumber) * Max(keys->ncols, 1));
	int			i;

	for (i = 0; i < keys->ncols; i++)
		attnos[i] = keys->cols[i].attno;
	return key_spec_from_attnos(rowdesc, keys->ncols, attnos);
}

KeySpec *
key_spec_build(TupleDesc rowdesc, Datum names_array, const char *argname)
{
	ArrayType  *arr = DatumGetArrayTypeP(names_array);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	AttrNumber *attnos;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array of column names", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);

	attnos = palloc(sizeof(AttrNumber) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		char	   *name;
		int			j;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain NULL", argname)));
		name = TextDatumGetCString(elems[i]);
		attnos[i] = ptf_column_attno(rowdesc, name, argname);
		for (j = 0; j < i; j++)
			if (attnos[j] == attnos[i])
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" is named twice in %s", name, argname)));
	}
	return key_spec_from_attnos(rowdesc, n, attnos);
}

/*
 * A value's hash by its type's hash function; the integer types' done
 * here as hashint2/4/8 do (hashfunc.c), without a function call through
 * fmgr per row: an integer key's hash took a third of key hashing's
 * instructions in a temporal join.  Assert builds check it against the
 * function's.
 */
static inline uint32
key_hash_int(KeyColumn *col, Datum value)
{
	switch (col->int_hash)
	{
		case '8':
			{
				int64		val = DatumGetInt64(value);
				uint32		lohalf = (uint32) val;
				uint32		hihalf = (uint32) (val >> 32);

				lohalf ^= (val >= 0) ? hihalf : ~hihalf;
				return hash_bytes_uint32(lohalf);
			}
		case '4':
			return hash_bytes_uint32((uint32) DatumGetInt32(value));
		default:
			Assert(col->int_hash == '2');
			return hash_bytes_uint32((uint32) (int32) DatumGetInt16(value));
	}
}

static inline uint32
key_hash_one(KeyColumn *col, Datum value)
{
	if (col->int_hash != 0)
	{
		uint32		h = key_hash_int(col, value);

		Assert(h == DatumGetUInt32(FunctionCall1Coll(&col->hash, col->collation, value)));
		return h;
	}
	return DatumGetUInt32(FunctionCall1Coll(&col->hash, col->collation, value));
}

/* Same combination as execGrouping.c, so NULL contributes nothing. */
uint32
key_hash_values(KeySpec *spec, Datum *values, bool *nulls)
{
	uint32		hashkey = 0;
	int			i;

	for (i = 0; i < spec->ncols; i++)
	{
		hashkey = pg_rotate_left32(hashkey, 1);
		if (!nulls[i])
			hashkey ^= key_hash_one(&spec->cols[i], values[i]);
	}
	return murmurhash32(hashkey);
}

void
key_probe_values(KeySpec *spec, Datum *values, bool *nulls)
{
	int			i;

	spec->probe_has_nulls = false;
	for (i = 0; i < spec->ncols; i++)
	{
		spec->probe_values[i] = values[i];
		spec->probe_nulls[i] = nulls[i];
		if (nulls[i])
			spec->probe_has_nulls = true;
	}
}

void
key_probe_fill(KeySpec *spec, TupleTableSlot *row)
{
	int			i;

	spec->probe_has_nulls = false;
	for (i = 0; i < spec->ncols; i++)
	{
		spec->probe_values[i] = slot_getattr(row, spec->cols[i].attno,
											 &spec->probe_nulls[i]);
		if (spec->probe_nulls[i])
			spec->probe_has_nulls = true;
	}
}

uint32
key_probe(KeySpec *spec, TupleTableSlot *row)
{
	if (spec->one_int)
	{
		KeyColumn  *col = &spec->cols[0];
		Datum		v = slot_getattr(row, col->attno, &spec->probe_nulls[0]);

		spec->probe_values[0] = v;
		spec->probe_has_nulls = spec->probe_nulls[0];
		/* key_hash_values over one column: a NULL contributes 0 */
		return murmurhash32(spec->probe_has_nulls ? 0 : key_hash_one(col, v));
	}
	key_probe_fill(spec, row);
	return key_hash_values(spec, spec->probe_values, spec->probe_nulls);
}

/*
 * Lay the probe out at dst, or only measure it when dst is NULL.  dst must
 * be MAXALIGNed and zeroed, so padding bytes read as pad bytes.
 */
static Size
key_layout(KeySpec *spec, char *dst)
{
	Size		off = 0;
	int			i;

	if (spec->probe_has_nulls)
		off = (spec->ncols + 7) / 8;

	for (i = 0; i < spec->ncols; i++)
	{
		KeyColumn  *col = &spec->cols[i];
		Datum		v = spec->probe_values[i];

		if (spec->probe_nulls[i])
		{
			if (dst)
				dst[i / 8] |= (1 << (i % 8));
			continue;
		}
		if (col->typlen == -1)
		{
			struct varlena *p = (struct varlena *) DatumGetPointer(v);

			/* state outlives the row: no toast pointers, no compression */
			if (VARATT_IS_EXTERNAL(p) || VARATT_IS_COMPRESSED(p))
			{
				p = detoast_attr(p);
				spec->probe_values[i] = PointerGetDatum(p);
			}
			if (VARATT_IS_SHORT(p))
			{
				if (dst)
					memcpy(dst + off, p, VARSIZE_SHORT(p));
				off += VARSIZE_SHORT(p);
			}
			/* as heap_fill_tuple: plain-storage types keep their 4-byte header */
			else if (col->typstorage != TYPSTORAGE_PLAIN && VARATT_CAN_MAKE_SHORT(p))
			{
				Size		sz = VARATT_CONVERTED_SHORT_SIZE(p);

				if (dst)
				{
					SET_VARSIZE_SHORT(dst + off, sz);
					memcpy(dst + off + 1, VARDATA(p), sz - 1);
				}
				off += sz;
			}
			else
			{
				off = att_align_nominal(off, col->typalign);
				if (dst)
					memcpy(dst + off, p, VARSIZE(p));
				off += VARSIZE(p);
			}
		}
		else if (col->typlen == -2)
		{
			Size		sz = strlen(DatumGetCString(v)) + 1;

			if (dst)
				memcpy(dst + off, DatumGetPointer(v), sz);
			off += sz;
		}
		else
		{
			off = att_align_nominal(off, col->typalign);
			if (dst)
			{
				if (col->typbyval)
					store_att_byval(dst + off, v, col->typlen);
				else
					memcpy(dst + off, DatumGetPointer(v), col->typlen);
			}
			off += col->typlen;
		}
	}
	return off;
}

Size
key_packed_size(KeySpec *spec)
{
	return key_layout(spec, NULL);
}

void
key_pack(KeySpec *spec, char *dst)
{
	key_layout(spec, dst);
}

/*
 * Read a packed key back into datums pointing into it.  has_nulls says
 * whether the packed key starts with a null bitmap (the record keeps it).
 */
void
key_unpack(KeySpec *spec, const char *packed, bool has_nulls,
		   Datum *values, bool *nulls)
{
	Size		off = has_nulls ? (spec->ncols + 7) / 8 : 0;
	int			i;

	for (i = 0; i < spec->ncols; i++)
	{
		KeyColumn  *col = &spec->cols[i];
		const char *p;

		if (has_nulls && (packed[i / 8] & (1 << (i % 8))))
		{
			values[i] = (Datum) 0;
			nulls[i] = true;
			continue;
		}
		nulls[i] = false;
		if (col->typlen == -1)
			off = att_align_pointer(off, col->typalign, -1, packed + off);
		else if (col->typlen > 0)
			off = att_align_nominal(off, col->typalign);
		p = packed + off;
		values[i] = fetch_att(p, col->typbyval, col->typlen);
		off = att_addlength_pointer(off, col->typlen, p);
	}
}

/*
 * Does the packed key equal the probe?  NULL equals NULL.
 */
bool
key_packed_equals_probe(KeySpec *spec, const char *packed, bool has_nulls)
{
	Size		off;
	int			i;

	if (has_nulls != spec->probe_has_nulls)
		return false;
	if (spec->one_int)
	{
		/* NULL equals NULL; else the value, by value, at the start */
		return has_nulls ||
			fetch_att(packed, true, spec->cols[0].typlen) == spec->probe_values[0];
	}
	off = has_nulls ? (spec->ncols + 7) / 8 : 0;

	for (i = 0; i < spec->ncols; i++)
	{
		KeyColumn  *col = &spec->cols[i];
		const char *p;
		Datum		stored;

		if (has_nulls)
		{
			bool		stored_null = (packed[i / 8] & (1 << (i % 8))) != 0;

			if (stored_null != spec->probe_nulls[i])
				return false;
			if (stored_null)
				continue;
		}
		if (col->typlen == -1)
			off = att_align_pointer(off, col->typalign, -1, packed + off);
		else if (col->typlen > 0)
			off = att_align_nominal(off, col->typalign);
		p = packed + off;
		stored = fetch_att(p, col->typbyval, col->typlen);
		off = att_addlength_pointer(off, col->typlen, p);

		if (col->bitwise_eq)
		{
			if (col->typbyval)
			{
				if (stored != spec->probe_values[i])
					return false;
			}
			else if (memcmp(DatumGetPointer(stored),
							DatumGetPointer(spec->probe_values[i]),
							col->typlen) != 0)
				return false;
		}
		else if (!DatumGetBool(FunctionCall2Coll(&col->eq, col->collation,
												 spec->probe_values[i], stored)))
			return false;
	}
	return true;
}

/* ---- parallel safety ---- */

static bool parts_parallel_safe(Oid typid, int depth);

/* a type's default hash and equality, and its parts' */
static bool
type_parallel_safe(Oid typid, int depth)
{
	TypeCacheEntry *tc = lookup_type_cache(typid, TYPECACHE_HASH_PROC | TYPECACHE_EQ_OPR);

	if (OidIsValid(tc->hash_proc) && func_parallel(tc->hash_proc) != PROPARALLEL_SAFE)
		return false;
	if (OidIsValid(tc->eq_opr) && func_parallel(get_opcode(tc->eq_opr)) != PROPARALLEL_SAFE)
		return false;
	return parts_parallel_safe(typid, depth + 1);
}

/*
 * hash_record and record_eq call each field type's own, hash_array and
 * array_eq the element type's, a range's its subtype's hash and
 * comparison: functions the key column's own do not show (PostgreSQL's
 * parallel GROUP BY does not look at them either).  Nesting past a few
 * levels is taken as unsafe rather than walked.
 */
static bool
parts_parallel_safe(Oid typid, int depth)
{
	Oid			elem;

	check_stack_depth();
	if (depth > 8)
		return false;
	typid = getBaseType(typid);
	elem = get_element_type(typid);
	if (OidIsValid(elem))
		return type_parallel_safe(elem, depth);
	switch (get_typtype(typid))
	{
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	desc;
				bool		safe = true;
				int			i;

				if (typid == RECORDOID)
					return false;
				desc = lookup_rowtype_tupdesc(typid, -1);
				for (i = 0; i < desc->natts && safe; i++)
				{
					Form_pg_attribute att = TupleDescAttr(desc, i);

					if (!att->attisdropped)
						safe = type_parallel_safe(att->atttypid, depth);
				}
				ReleaseTupleDesc(desc);
				return safe;
			}
		case TYPTYPE_RANGE:
			{
				TypeCacheEntry *tc = lookup_type_cache(typid, TYPECACHE_RANGE_INFO);

				return func_parallel(tc->rng_cmp_proc_finfo.fn_oid) == PROPARALLEL_SAFE &&
					type_parallel_safe(tc->rngelemtype->type_id, depth);
			}
		case TYPTYPE_MULTIRANGE:
			{
				TypeCacheEntry *tc = lookup_type_cache(typid, TYPECACHE_MULTIRANGE_INFO);

				return parts_parallel_safe(tc->rngtype->type_id, depth + 1);
			}
		default:
			return true;
	}
}

bool
key_spec_parallel_safe(const KeySpec *keys)
{
	int			i;

	for (i = 0; i < keys->ncols; i++)
	{
		const KeyColumn *col = &keys->cols[i];

		if (func_parallel(col->eq.fn_oid) != PROPARALLEL_SAFE ||
			func_parallel(col->hash.fn_oid) != PROPARALLEL_SAFE ||
			!parts_parallel_safe(col->typid, 0))
			return false;
	}
	return true;
}
