/*-------------------------------------------------------------------------
 *
 * old_key.c
 *	  An UPDATE's logged old key against its new row: for every consumer of
 *	  decoded changes (the JSON output, input/change_stream.c).
 *
 * Under a replica identity other than FULL, PostgreSQL logs an UPDATE's old
 * key when the key changed, and also when a value of the key is stored out
 * of line, changed or not.  The two must not be told apart by whether an
 * old key is there: such an update keeps its key as much as one of a short
 * key, and its new row holds the unchanged value as a pointer into the
 * table's TOAST, which decoding must never read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "decoding/old_key.h"

/*
 * Under a replica identity other than FULL, PostgreSQL logs an UPDATE's
 * old key not only when the key changed but also when a value of the key
 * is stored out of line, changed or not (heap_update's key_changed ||
 * id_has_external).  Such a value left unchanged is an on-disk TOAST
 * pointer in the new image, with no chunks in the transaction: fetching
 * it would read the table's TOAST as it is now, where the row may be gone
 * (deleted and pruned since), and the stream would fail there for good.
 * The old key is logged flattened, its values inline; the same pointer is
 * the same value, so the old key's replaces it.  Returns the new image so
 * completed, and whether the key's values changed: only then is the update
 * a move to another key, for which the old key goes on as a -U; one that
 * keeps its key is a bare +U, as when its key is short and logs no old key.
 */
HeapTuple
ptf_update_key_from_old(Relation rel, HeapTuple newtup, HeapTuple oldtup,
						XLogRecPtr lsn, bool *key_changed)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Bitmapset  *idattrs = RelationGetIdentityKeyBitmap(rel);
	Datum	   *nv;
	bool	   *nn;
	Datum	   *ov;
	bool	   *on;
	bool		replaced = false;
	int			member = -1;

	/* an old key logged without an identity: as before, a move */
	*key_changed = true;
	if (idattrs == NULL)
		return newtup;
	*key_changed = false;
	nv = palloc(sizeof(Datum) * desc->natts);
	nn = palloc(sizeof(bool) * desc->natts);
	ov = palloc(sizeof(Datum) * desc->natts);
	on = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(newtup, desc, nv, nn);
	heap_deform_tuple(oldtup, desc, ov, on);
	while ((member = bms_next_member(idattrs, member)) >= 0)
	{
		int			i = member + FirstLowInvalidHeapAttributeNumber - 1;
		Form_pg_attribute att;

		if (i < 0 || i >= desc->natts)
			continue;
		att = TupleDescAttr(desc, i);
		if (!nn[i] && att->attlen == -1 &&
			VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(nv[i])))
		{
			/* never fetched from the table: the old key must hold it */
			if (on[i] || VARATT_IS_EXTERNAL(DatumGetPointer(ov[i])))
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg_internal("the old key of an update of table %s lacks the value of column %s",
										 RelationGetRelationName(rel),
										 NameStr(att->attname)),
						 errdetail_internal("The update at %X/%X left the column's TOASTed value unchanged.",
											LSN_FORMAT_ARGS(lsn))));
			nv[i] = ov[i];
			replaced = true;
		}
		else if (nn[i] != on[i] ||
				 (!nn[i] && !datum_image_eq(nv[i], ov[i], att->attbyval, att->attlen)))
			*key_changed = true;
	}
	return replaced ? heap_form_tuple(desc, nv, nn) : newtup;
}
