/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  The extension's own SQL catalogs (schema ptf), reached through SPI as
 *	  the extension's owner: callers have no rights on them and see them
 *	  only through our functions and views (DESIGN 5).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_CATALOG_H
#define PTF_CATALOG_H

/* Run one statement as the owner of schema ptf; elog unless rc == expected. */
extern int	ptf_spi_exec_as_owner(const char *sql, int nargs, Oid *argtypes,
								  Datum *values, const char *nulls, int expected);

/* ptf.watermarks: the delay declared for relid's on_time column, or -1 */
extern int64 ptf_declared_watermark_delay(Oid relid, const char *on_time);

#endif							/* PTF_CATALOG_H */
