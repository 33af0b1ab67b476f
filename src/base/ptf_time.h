/*-------------------------------------------------------------------------
 *
 * ptf_time.h
 *	  Time values: columns of timestamp, timestamptz or bigint epoch
 *	  milliseconds as PtfTime, intervals as microseconds, and saturating
 *	  arithmetic that keeps -infinity and +infinity where they are.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PTF_TIME_H
#define PTF_TIME_H

#include "base/base.h"

/*
 * Processing time now: the clock, or, when the test setting
 * ptf.debug_clock is set, its value (tests move time without sleeping).
 */
extern PtfTime ptf_now(void);
extern void ptf_time_define_gucs(void);

/* t - delta and t + delta, saturating; the infinities stay */
extern PtfTime ptf_time_sub(PtfTime t, int64 delta);
extern PtfTime ptf_time_add(PtfTime t, int64 delta);

/* time values of columns: timestamp, timestamptz, or bigint epoch ms */
extern bool ptf_is_time_type(Oid typid);
extern PtfTime ptf_time_from_datum(Datum d, Oid typid);
extern Datum ptf_time_to_datum(PtfTime t, Oid typid);

/*
 * A time of a column of type from as a value of type to: the same type
 * as it is; between timestamp and timestamptz as SQL's casts do (the
 * session's time zone); to or from bigint as epoch milliseconds of the
 * time taken as UTC.  A wall-clock time the session's clock skips (a
 * daylight-saving gap) has no timestamptz: PostgreSQL's cast moves it,
 * and bounds either side of the gap may come out equal.  Where gap_warned
 * is given, the first such time of a call is warned of (01000) and
 * *gap_warned set.
 */
extern Datum ptf_time_to_datum_as(PtfTime t, Oid from, Oid to, bool *gap_warned);

/*
 * The last conversions of one column of window bounds, for operators that
 * convert per row: a timestamp's to timestamptz costs time zone lookups
 * (two with the gap check), and rows share few windows.  Direct-mapped by
 * the bound over period (the windows' spacing); zeroed is empty.
 */
#define PTF_TIME_CACHE_SLOTS 64

typedef struct PtfTimeCache
{
	PtfTime		bound[PTF_TIME_CACHE_SLOTS];
	Datum		converted[PTF_TIME_CACHE_SLOTS];
	bool		valid[PTF_TIME_CACHE_SLOTS];
} PtfTimeCache;

/* ptf_time_to_datum_as through cache (period > 0) */
extern Datum ptf_time_to_datum_cached(PtfTimeCache *cache, int64 period, PtfTime t,
									  Oid from, Oid to, bool *gap_warned);

/*
 * An interval in microseconds; errors (argname in the message) when it is
 * negative or out of range.  A month counts 30 days.
 */
extern int64 ptf_interval_to_us(Datum interval, const char *argname);

/* Does the interval have a month part (whose length depends on the date)? */
extern bool ptf_interval_has_months(Datum interval);

/*
 * Literals parsed without raising an error (GUC check hooks): false when
 * str is no timestamptz, or no interval / one out of range.
 */
extern bool ptf_parse_timestamptz(const char *str, PtfTime *result);
extern bool ptf_parse_interval_us(const char *str, int64 *result);

#endif							/* PTF_TIME_H */
