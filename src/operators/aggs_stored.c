/*-------------------------------------------------------------------------
 *
 * aggs_stored.c
 *	  Aggregate states in durable state: a uid's slices and sessions keep
 *	  their SLICED states as bytes, and the input rows of REPLAY and MOVING
 *	  aggregates as row images.
 *
 * A state is written as PostgreSQL writes a parallel worker's partial
 * aggregate: an internal state through its serialization function, any
 * other as datumSerialize writes it.  Internal states' formats are the
 * server's, so the bytes carry its major version; what cannot be read
 * back is damaged state (XX001), never misread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "lib/stringinfo.h"
#include "utils/datum.h"
#include "utils/memutils.h"

#include "operators/aggs_internal.h"
#include "state/layout.h"

#define AGGS_SERIAL_MAGIC 0x50544641	/* "PTFA" */

/*
 * SLICED states as bytes: a header with the server's major version
 * (internal states' formats are the server's), then per state its flags
 * and its value: an internal state through its serialization function,
 * any other as datumSerialize writes it (TOASTed values inlined).
 */
bytea *
aggs_serialize_sliced(AggSet *set, const AggAcc *accs)
{
	StringInfoData buf;
	uint32		header[2] = {AGGS_SERIAL_MAGIC, PG_VERSION_NUM / 100};
	int			i;

	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	appendBinaryStringInfo(&buf, (char *) header, sizeof(header));
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		const AggAcc *acc;
		char		flags;
		Datum		v;
		bool		isnull;

		if (d->mode != AGG_SLICED)
			continue;
		acc = &accs[d->slot];
		flags = (acc->isnull ? 1 : 0) | (acc->notrans ? 2 : 0);
		appendBinaryStringInfo(&buf, &flags, 1);
		if (acc->isnull)
			continue;
		v = acc->value;
		isnull = false;
		if (d->transtype == INTERNALOID)
		{
			FunctionCallInfo fc = d->serialfn.fcinfo;

			set->aggstate->curaggcontext = set->aggstate->tmpcontext;
			set->aggstate->curpertrans = &d->pertrans;
			fc->args[0].value = v;
			fc->args[0].isnull = false;
			fc->isnull = false;
			v = FunctionCallInvoke(fc);
			isnull = fc->isnull;
			set->aggstate->curpertrans = NULL;
			/* a bytea */
			{
				bytea	   *b = isnull ? NULL : DatumGetByteaPP(v);
				int32		len = isnull ? -1 : (int32) VARSIZE_ANY_EXHDR(b);

				appendBinaryStringInfo(&buf, (char *) &len, sizeof(len));
				if (b)
					appendBinaryStringInfo(&buf, VARDATA_ANY(b), len);
			}
			continue;
		}
		if (d->translen == -1)
			v = PointerGetDatum(PG_DETOAST_DATUM(v));
		{
			Size		sz = datumEstimateSpace(v, false, d->transbyval, d->translen);
			char	   *p;

			enlargeStringInfo(&buf, sz);
			p = buf.data + buf.len;
			datumSerialize(v, false, d->transbyval, d->translen, &p);
			buf.len += sz;
		}
	}
	SET_VARSIZE(buf.data, buf.len);
	return (bytea *) buf.data;
}

static void
stored_states_corrupted(void)
{
	ptf_state_corrupted("aggregate states that cannot be read");
}

void
aggs_deserialize_sliced(AggSet *set, bytea *b, AggAcc *accs, AggMemory *mem)
{
	char	   *p = VARDATA_ANY(b);
	char	   *end = p + VARSIZE_ANY_EXHDR(b);
	uint32		header[2];
	int			i;

	if (end - p < (ptrdiff_t) sizeof(header))
		stored_states_corrupted();
	memcpy(header, p, sizeof(header));
	p += sizeof(header);
	if (header[0] != AGGS_SERIAL_MAGIC)
		stored_states_corrupted();
	if (header[1] != PG_VERSION_NUM / 100)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("aggregate states were stored by PostgreSQL %u, this server is %d",
						header[1] / 100, PG_VERSION_NUM / 10000),
				 errhint("Forget the uid's state with ptf.drop_state() and start it anew.")));
	for (i = 0; i < set->naggs; i++)
	{
		AggDef	   *d = &set->aggs[i];
		AggAcc	   *acc;
		char		flags;

		if (d->mode != AGG_SLICED)
			continue;
		acc = &accs[d->slot];
		if (p >= end)
			stored_states_corrupted();
		flags = *p++;
		acc->isnull = (flags & 1) != 0;
		acc->notrans = (flags & 2) != 0;
		acc->value = (Datum) 0;
		if (acc->isnull)
			continue;
		if (d->transtype == INTERNALOID)
		{
			int32		len;
			FunctionCallInfo fc = d->deserialfn.fcinfo;
			bytea	   *v;
			MemoryContext old;

			if (end - p < (ptrdiff_t) sizeof(len))
				stored_states_corrupted();
			memcpy(&len, p, sizeof(len));
			p += sizeof(len);
			if (len < 0 || end - p < len)
				stored_states_corrupted();
			v = palloc(len + VARHDRSZ);
			SET_VARSIZE(v, len + VARHDRSZ);
			memcpy(VARDATA(v), p, len);
			p += len;
			/* internal states allocate, and keep allocating, where they are made */
			set->aggstate->curaggcontext = &mem->econtext;
			set->aggstate->curpertrans = &d->pertrans;
			old = MemoryContextSwitchTo(mem->cxt);
			fc->args[0].value = PointerGetDatum(v);
			fc->args[0].isnull = false;
			fc->args[1].value = (Datum) 0;
			fc->args[1].isnull = false;
			fc->isnull = false;
			acc->value = FunctionCallInvoke(fc);
			acc->isnull = fc->isnull;
			MemoryContextSwitchTo(old);
			set->aggstate->curpertrans = NULL;
			continue;
		}
		{
			MemoryContext old;
			bool		isnull;
			int			header;

			/* datumSerialize's layout: a header word saying what follows */
			if (end - p < (ptrdiff_t) sizeof(int))
				stored_states_corrupted();
			memcpy(&header, p, sizeof(int));
			{
				ptrdiff_t	need = header == -1 ? (ptrdiff_t) sizeof(Datum) :
					header == -2 ? 0 : (ptrdiff_t) header;

				if (header < -2 || end - p - (ptrdiff_t) sizeof(int) < need ||
					(header >= 0) == d->transbyval)
					stored_states_corrupted();
			}
			old = MemoryContextSwitchTo(mem->cxt);
			acc->value = datumRestore(&p, &isnull);
			acc->isnull = isnull;
			MemoryContextSwitchTo(old);
		}
	}
}

bytea *
aggs_serialize_rows(AggSet *set, const AggRows *rows)
{
	StateImages imgs;

	imgs.n = rows->n;
	imgs.tuples = rows->rows;
	return state_images_to_bytea(&imgs, set->inputs_desc);
}

void
aggs_deserialize_rows(AggSet *set, bytea *b, AggRows *rows, AggMemory *mem)
{
	StateImages *imgs = state_images_from_bytea(b, set->inputs_desc);
	MemoryContext old = MemoryContextSwitchTo(mem->cxt);
	int			i;

	rows->n = rows->cap = imgs->n;
	rows->rows = palloc(sizeof(MinimalTuple) * Max(imgs->n, 1));
	for (i = 0; i < imgs->n; i++)
		rows->rows[i] = heap_copy_minimal_tuple(imgs->tuples[i]);
	MemoryContextSwitchTo(old);
}
