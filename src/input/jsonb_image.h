/*-------------------------------------------------------------------------
 *
 * jsonb_image.h
 *	  A jsonb row image read into a row of the target type, as
 *	  jsonb_populate_record(NULL::target, image) reads it, without its
 *	  detour through text where the value already has the column's type.
 *
 * jsonb_populate_record turns every value into text and back through the
 * column type's input function: a jsonb number becomes digits and then a
 * numeric again, a string is copied before textin copies it once more,
 * and timestamps go through the general date parser.  Change records
 * carry many images, and most of the cost of from_changelog was there.
 * The reader here takes the same values the same way, with shortcuts for
 * pairs whose result is known without the text: a number into numeric
 * (no typmod) or an integer column, a string into text, a boolean into
 * boolean, ISO 8601 timestamps with a numeric offset into timestamptz.
 * Anything else -- domains, arrays, composites, nested values, other
 * combinations the shortcuts do not cover -- makes the caller use
 * jsonb_populate_record itself, so results and errors stay its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_JSONB_IMAGE_H
#define PTF_JSONB_IMAGE_H

#include "access/tupdesc.h"
#include "utils/jsonb.h"

typedef struct JsonbImage JsonbImage;

/* NULL when some column of target is of a kind only populate reads */
extern JsonbImage *jsonb_image_create(TupleDesc target);

/*
 * The image as the target's values; false when jsonb_populate_record must
 * read it (not an object, or a value the shortcuts do not cover).  only:
 * NULL, or the columns to read (per target column), the others NULL.
 */
extern bool jsonb_image_read(JsonbImage *ji, Jsonb *image, const bool *only, Datum *values,
							 bool *nulls);

#endif							/* PTF_JSONB_IMAGE_H */
