/*-------------------------------------------------------------------------
 *
 * cdc_rows.h
 *	  CDC rows read as changes (FROM_CHANGELOG's input side): each row of an
 *	  append-only table of change records, with an operation code column,
 *	  becomes one or two changes of a target row type.
 *
 * Flat rows carry the target's columns themselves (by name); envelope rows
 * carry images in a "before" and an "after" column (jsonb, decoded as
 * jsonb_populate_record does, or of the target's composite type).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CDC_ROWS_H
#define PTF_CDC_ROWS_H

#include "executor/tuptable.h"

#include "base/base.h"
#include "base/op_mapping.h"

typedef struct CdcRowsSpec
{
	TupleDesc	indesc;			/* the CDC rows */
	TupleDesc	target;			/* the rows they are changes of */
	const char *op_column;
	const char *before;			/* envelope columns; both NULL: flat rows */
	const char *after;
	const CodeMapping *mapping;
	bool		skip_invalid;	/* NULL and unmapped codes: skip, not fail */
	bool		retractions_from_state; /* only their keys are needed */

	/*
	 * NULL, or the target columns a retraction's consumer reads (it deletes
	 * by key): a jsonb image of a retraction is read for those alone, the
	 * others left NULL.
	 */
	const bool *retraction_columns;
} CdcRowsSpec;

typedef struct CdcRows CdcRows;

/* Check the columns against the target; errors before any row is read. */
extern CdcRows *cdc_rows_create(const CdcRowsSpec *spec);

/*
 * One CDC row: its changes handed to sink, in order.  meta says where the
 * row came from (a change stream's LSN), for messages.
 */
extern void cdc_rows_decode(CdcRows *d, TupleTableSlot *row, const PtfRowMeta *meta,
							PtfRowSink sink, void *arg);

/* rows skipped for a NULL or unmapped code */
extern uint64 cdc_rows_skipped(CdcRows *d);

#endif							/* PTF_CDC_ROWS_H */
