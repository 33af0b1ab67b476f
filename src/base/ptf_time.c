/*-------------------------------------------------------------------------
 *
 * ptf_time.c
 *	  Time values of columns and intervals, in microseconds.
 *
 * PtfTime is TimestampTz's representation, so timestamp and timestamptz
 * columns convert by identity; bigint columns hold milliseconds since
 * 1970-01-01 (Flink's epoch-millis time attributes) and are shifted and
 * scaled, with an error rather than a wrap when out of range.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "base/ptf_time.h"

static char *debug_clock_string = NULL;
static PtfTime debug_clock = 0;		/* 0: the real clock */

PtfTime
ptf_now(void)
{
	return debug_clock != 0 ? debug_clock : GetCurrentTimestamp();
}

/*
 * A timestamptz literal, parsed as timestamptz_in does but by the parsing
 * routines that report errors as codes rather than raise them: a GUC check
 * hook must not raise (and PostgreSQL 15 has no soft input errors).
 */
bool
ptf_parse_timestamptz(const char *str, PtfTime *result)
{
	char		workbuf[MAXDATELEN + MAXDATEFIELDS];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	struct pg_tm tt;
	fsec_t		fsec;
	int			tz;
	TimestampTz t;

	if (strlen(str) >= MAXDATELEN ||
		ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf) != 0 ||
		DecodeDateTime(field, ftype, nf, &dtype, &tt, &fsec, &tz) != 0 ||
		dtype != DTK_DATE || tm2timestamp(&tt, fsec, &tz, &t) != 0 || !IS_VALID_TIMESTAMP(t))
		return false;
	*result = t;
	return true;
}

/* An interval literal in microseconds (a day is 24 h, a month 30 days), likewise. */
bool
ptf_parse_interval_us(const char *str, int64 *result)
{
	char		workbuf[256];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			dterr;
	struct pg_itm_in itm;
	Interval	iv;
	int64		days_us;

	memset(&itm, 0, sizeof(itm));
	if (strlen(str) >= sizeof(workbuf))
		return false;
	dterr = ParseDateTime(str, workbuf, sizeof(workbuf), field, ftype, MAXDATEFIELDS, &nf);
	if (dterr == 0)
		dterr = DecodeInterval(field, ftype, nf, INTERVAL_FULL_RANGE, &dtype, &itm);
	/* as interval_in: what is not PostgreSQL's format may be ISO 8601's */
	if (dterr == DTERR_BAD_FORMAT)
	{
		strlcpy(workbuf, str, sizeof(workbuf));
		dterr = DecodeISO8601Interval(workbuf, &dtype, &itm);
	}
	if (dterr != 0 || dtype != DTK_DELTA || itmin2interval(&itm, &iv) != 0)
		return false;
	if (pg_mul_s64_overflow((int64) iv.month * DAYS_PER_MONTH + iv.day, USECS_PER_DAY, &days_us) ||
		pg_add_s64_overflow(iv.time, days_us, result))
		return false;
	return true;
}

static bool
check_debug_clock(char **newval, void **extra, GucSource source)
{
	PtfTime		t = 0;
	PtfTime    *parsed;

	if (*newval != NULL && (*newval)[0] != '\0' && !ptf_parse_timestamptz(*newval, &t))
	{
		GUC_check_errmsg("invalid value for ptf.debug_clock: \"%s\"", *newval);
		GUC_check_errhint("A timestamptz, such as '2024-01-01 10:00+00'; empty for the clock.");
		return false;
	}
	/* GUC extra data is malloc'd: guc.c frees it with free() */
	parsed = malloc(sizeof(PtfTime));
	if (parsed == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		return false;
	}
	*parsed = t;
	*extra = parsed;
	return true;
}

static void
assign_debug_clock(const char *newval, void *extra)
{
	debug_clock = extra ? *(PtfTime *) extra : 0;
}

void
ptf_time_define_gucs(void)
{
	DefineCustomStringVariable("ptf.debug_clock",
							   "Tests only: the processing time (a timestamptz) instead of the clock.",
							   "Empty: the clock.",
							   &debug_clock_string,
							   "",
							   PGC_USERSET, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							   check_debug_clock, assign_debug_clock, NULL);
}

#define UNIX_EPOCH_US_FROM_PG_EPOCH \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

bool
ptf_is_time_type(Oid typid)
{
	return typid == TIMESTAMPOID || typid == TIMESTAMPTZOID || typid == INT8OID;
}

PtfTime
ptf_time_from_datum(Datum d, Oid typid)
{
	int64		ms;
	int64		us;

	if (typid != INT8OID)
		return DatumGetInt64(d);

	/* bigint: milliseconds since 1970-01-01 */
	ms = DatumGetInt64(d);
	/* the epoch first: the whole timestamp range fits, to 294276 AD */
	if (pg_sub_s64_overflow(ms, UNIX_EPOCH_US_FROM_PG_EPOCH / 1000, &us) ||
		pg_mul_s64_overflow(us, 1000, &us))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("epoch milliseconds value %lld is out of range",
						(long long) ms)));
	return us;
}

Datum
ptf_time_to_datum(PtfTime t, Oid typid)
{
	if (typid != INT8OID)
		return Int64GetDatum(t);
	if (t == PTF_TIME_MIN || t == PTF_TIME_MAX)
		return Int64GetDatum(t);
	/* floor: a time in the middle of a millisecond belongs to it */
	t = t >= 0 ? t / 1000 : -((-t + 999) / 1000);
	return Int64GetDatum(t + UNIX_EPOCH_US_FROM_PG_EPOCH / 1000);
}

/*
 * The session's zone's offset from UTC (seconds east), when it has only
 * one (UTC, fixed offsets): casts between timestamp and timestamptz are
 * then a shift, with no gap, instead of a calendar computation per value.
 * Zones are cached for the life of the backend, so their address is
 * theirs.
 */
static bool
session_fixed_offset(long *gmtoff)
{
	static const pg_tz *zone = NULL;
	static bool fixed = false;
	static long offset = 0;

	if (session_timezone != zone)
	{
		fixed = pg_get_timezone_offset(session_timezone, &offset);
		zone = session_timezone;
	}
	*gmtoff = offset;
	return fixed;
}

Datum
ptf_time_to_datum_as(PtfTime t, Oid from, Oid to, bool *gap_warned)
{
	long		gmtoff;

	if ((from == TIMESTAMPOID && to == TIMESTAMPTZOID) ||
		(from == TIMESTAMPTZOID && to == TIMESTAMPOID))
	{
		/* as timestamp2timestamptz / timestamptz2timestamp, in a fixed zone */
		if (!TIMESTAMP_NOT_FINITE(t) && session_fixed_offset(&gmtoff))
		{
			int64		shift = (int64) gmtoff * USECS_PER_SEC;
			PtfTime		r = from == TIMESTAMPOID ? t - shift : t + shift;

			if (IS_VALID_TIMESTAMP(r))
				return TimestampGetDatum(r);
		}
	}
	if (from == TIMESTAMPOID && to == TIMESTAMPTZOID)
	{
		Datum		tz = DirectFunctionCall1(timestamp_timestamptz, TimestampGetDatum(t));

		if (gap_warned != NULL && !*gap_warned &&
			DatumGetTimestamp(DirectFunctionCall1(timestamptz_timestamp, tz)) != t)
		{
			*gap_warned = true;
			ereport(WARNING,
					(errcode(ERRCODE_WARNING),
					 errmsg("window bound %s does not exist in time zone \"%s\"",
							DatumGetCString(DirectFunctionCall1(timestamp_out, TimestampGetDatum(t))),
							pg_get_timezone_name(session_timezone)),
					 errdetail("The window columns are timestamptz, and the clock skips this time of the timestamp column: PostgreSQL moves it, and windows either side of it may share a bound."),
					 errhint("Run the query with SET TimeZone = 'UTC' (or any zone without daylight saving), use a timestamptz column, or window_aggregate with timestamp target columns.")));
		}
		return tz;
	}
	if (from == TIMESTAMPTZOID && to == TIMESTAMPOID)
		return DirectFunctionCall1(timestamptz_timestamp, TimestampTzGetDatum(t));
	return ptf_time_to_datum(t, to);
}

Datum
ptf_time_to_datum_cached(PtfTimeCache *cache, int64 period, PtfTime t, Oid from, Oid to,
						 bool *gap_warned)
{
	int			slot;

	Assert(period > 0);
	/* only the zone's conversion is worth keeping (and its result is by value) */
	if (from != TIMESTAMPOID || to != TIMESTAMPTZOID)
		return ptf_time_to_datum_as(t, from, to, gap_warned);
	slot = (int) ((uint64) (t / period) % PTF_TIME_CACHE_SLOTS);
	if (!cache->valid[slot] || cache->bound[slot] != t)
	{
		cache->converted[slot] = ptf_time_to_datum_as(t, from, to, gap_warned);
		cache->bound[slot] = t;
		cache->valid[slot] = true;
	}
	return cache->converted[slot];
}

int64
ptf_interval_to_us(Datum d, const char *argname)
{
	Interval   *iv = DatumGetIntervalP(d);
	int64		us;
	int64		days_us;

	if (pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH + iv->day,
							USECS_PER_DAY, &days_us) ||
		pg_add_s64_overflow(iv->time, days_us, &us))
		ereport(ERROR,
				(errcode(ERRCODE_INTERVAL_FIELD_OVERFLOW),
				 errmsg("%s is out of range", argname)));
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", argname)));
	return us;
}

bool
ptf_interval_has_months(Datum d)
{
	return DatumGetIntervalP(d)->month != 0;
}

PtfTime
ptf_time_sub(PtfTime t, int64 delta)
{
	PtfTime		r;

	if (t == PTF_TIME_MIN || t == PTF_TIME_MAX)
		return t;
	if (pg_sub_s64_overflow(t, delta, &r))
		return delta > 0 ? PTF_TIME_MIN : PTF_TIME_MAX;
	return r;
}

PtfTime
ptf_time_add(PtfTime t, int64 delta)
{
	PtfTime		r;

	if (t == PTF_TIME_MIN || t == PTF_TIME_MAX)
		return t;
	if (pg_add_s64_overflow(t, delta, &r))
		return delta > 0 ? PTF_TIME_MAX : PTF_TIME_MIN;
	return r;
}
