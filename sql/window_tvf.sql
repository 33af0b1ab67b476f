-- Window table-valued functions: each row with its windows (doc/design.md §2.5),
-- checked against Flink's documented answers (window-tvf.md, window-agg.md).
SET search_path = ptf, public;
SET TimeZone = 'UTC';

-- Flink's Bid table (bidtime TIMESTAMP(3), price DECIMAL(10, 2))
CREATE TABLE bid (bidtime timestamp, price numeric(10,2), item text, supplier_id text);
INSERT INTO bid VALUES
 ('2020-04-15 08:05', 4.00, 'C', 'supplier1'),
 ('2020-04-15 08:07', 2.00, 'A', 'supplier1'),
 ('2020-04-15 08:09', 5.00, 'D', 'supplier2'),
 ('2020-04-15 08:11', 3.00, 'B', 'supplier2'),
 ('2020-04-15 08:13', 1.00, 'E', 'supplier1'),
 ('2020-04-15 08:17', 6.00, 'F', 'supplier2');

-- TUMBLE(10 min): each row its one window; window_time = end - 1 ms
SELECT (data).bidtime, (data).price, (data).item, window_start, window_end, window_time
  FROM tumble(NULL::bid, 'bidtime', '10 minutes');
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1, 2 ORDER BY 1;

-- HOP(slide 5 min, size 10 min): each row in two windows, ascending
SELECT (data).item, window_start, window_end FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes');
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') GROUP BY 1, 2 ORDER BY 1;

-- CUMULATE(step 2 min, size 10 min): every cumulative end after the row's step
SELECT (data).item, window_start, window_end FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes');
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes') GROUP BY 1, 2 ORDER BY 1, 2;

-- offset: TUMBLE(10 min, offset 1 min)
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes', "offset" => '1 minute') GROUP BY 1, 2 ORDER BY 1;
-- offsets matter modulo the size: -16, -6 and +4 minutes are one window; so are -4, +6, +16
CREATE TABLE one_row (ts timestamp);
INSERT INTO one_row VALUES ('2021-06-30 00:00:04');
SELECT o AS "offset", window_start, window_end
  FROM unnest(ARRAY[interval '-16 min', '-6 min', '-4 min', '0', '4 min', '6 min', '16 min']) AS o,
       LATERAL tumble(NULL::one_row, 'ts', '10 minutes', "offset" => o);
-- HOP and CUMULATE with an offset
SELECT window_start, window_end, sum((data).price)
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes', "offset" => '1 minute') GROUP BY 1, 2 ORDER BY 1;
SELECT window_start, window_end, sum((data).price)
  FROM cumulate(NULL::bid, 'bidtime', '4 minutes', '12 minutes', "offset" => '-3 minutes') GROUP BY 1, 2 ORDER BY 1, 2;

-- GROUPING SETS, ROLLUP and CUBE over the TVF are plain PostgreSQL
SELECT window_start, window_end, (data).supplier_id, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end, GROUPING SETS (((data).supplier_id), ())
 ORDER BY 1, 3 NULLS FIRST;
SELECT window_start, window_end, (data).supplier_id, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end, ROLLUP ((data).supplier_id)
 ORDER BY 1, 3 NULLS FIRST;
SELECT window_start, window_end, (data).supplier_id, (data).item, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end, CUBE ((data).supplier_id, (data).item)
 ORDER BY 1, 3 NULLS FIRST, 4 NULLS FIRST;

-- HOP windows need not be a multiple of the slide: size 10 min, slide 4 min
SELECT (data).item, window_start, window_end
  FROM hop(NULL::bid, 'bidtime', '4 minutes', '10 minutes') WHERE (data).item IN ('C', 'F');

-- timestamptz is windowed in absolute time; window columns are timestamptz
CREATE TABLE bid_tz (bidtime timestamptz, price numeric(10,2));
INSERT INTO bid_tz SELECT bidtime AT TIME ZONE 'UTC', price FROM bid;
SET TimeZone = 'Asia/Kolkata';
SELECT window_start, window_end, sum((data).price)
  FROM tumble(NULL::bid_tz, 'bidtime', '1 hour') GROUP BY 1, 2;
-- a timestamp column is windowed on its own clock: the bounds keep its wall clock
SELECT window_start, window_end, window_start::timestamp AS wall_start, sum((data).price)
  FROM tumble(NULL::bid, 'bidtime', '1 hour') GROUP BY 1, 2;
SET TimeZone = 'UTC';
-- bigint is milliseconds since 1970
CREATE TABLE bid_ms (bidtime bigint, price numeric(10,2));
INSERT INTO bid_ms SELECT (extract(epoch FROM bidtime) * 1000)::bigint, price FROM bid;
SELECT window_start, window_end, sum((data).price)
  FROM tumble(NULL::bid_ms, 'bidtime', '10 minutes') GROUP BY 1, 2 ORDER BY 1;
-- times before 1970 and weeks: windows align to 1970-01-01 (a Thursday)
SELECT window_start, window_end FROM tumble(NULL::one_row, 'ts', '7 days',
    query => $$VALUES (timestamp '1969-12-31 23:00'), (timestamp '2024-01-01')$$);

-- the input may be a query; the TVF composes with plain SQL
SELECT (data).item, window_start
  FROM tumble(NULL::bid, 'bidtime', '10 minutes',
              query => $$SELECT * FROM bid WHERE price > 3$$) ORDER BY 1;

-- A TVF over a table is planned as a scan of it (ptf.inline_window_tvfs), with
-- the function's answer: compared here with the function run as such.  (GROUP BY
-- window columns and data columns is planned as the window aggregate:
-- window_sql.sql; a grouping by an expression is not.)
EXPLAIN (COSTS OFF) SELECT date_trunc('hour', window_start), count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1;
EXPLAIN (COSTS OFF) SELECT date_trunc('hour', window_start), count(*) FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') GROUP BY 1;
EXPLAIN (COSTS OFF) SELECT (data).item, window_end FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes') WHERE (data).price > 4;
SET ptf.inline_window_tvfs = off;
EXPLAIN (COSTS OFF) SELECT date_trunc('hour', window_start), count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1;
RESET ptf.inline_window_tvfs;
-- odd rows: infinite times are skipped, a dropped column, a view, every time type,
-- offsets, windows of days in another time zone
CREATE TABLE odd (a int, dropme int, ts timestamp, tz timestamptz, ms bigint);
ALTER TABLE odd DROP COLUMN dropme;
INSERT INTO odd SELECT g, timestamp '2024-03-09 20:00' + g * interval '37 minutes',
                       timestamptz '2024-03-09 20:00+00' + g * interval '37 minutes',
                       1710014400000 + g * 2220000
  FROM generate_series(1, 200) g;
INSERT INTO odd VALUES (0, 'infinity', 'infinity', 0), (-1, '-infinity', '-infinity', 0);
CREATE VIEW odd_view AS SELECT * FROM odd WHERE a % 2 = 0;
CREATE FUNCTION pg_temp.both_ways(q text) RETURNS TABLE (inlined bigint, function bigint, differ bigint)
LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL ptf.inline_window_tvfs = on;
    EXECUTE 'CREATE TEMP TABLE i AS ' || q;
    SET LOCAL ptf.inline_window_tvfs = off;
    EXECUTE 'CREATE TEMP TABLE f AS ' || q;
    RETURN QUERY SELECT (SELECT count(*) FROM i), (SELECT count(*) FROM f),
        (SELECT count(*) FROM ((TABLE i EXCEPT ALL TABLE f) UNION ALL (TABLE f EXCEPT ALL TABLE i)) d);
    DROP TABLE i, f;
END $$;
SET TimeZone = 'America/New_York';   -- 2024-03-10: a daylight saving change
SELECT * FROM pg_temp.both_ways($$SELECT (data).a, window_start, window_end, window_time
                                    FROM ptf.tumble(NULL::odd, 'ts', '1 hour')$$);
SELECT * FROM pg_temp.both_ways($$SELECT (data).a, window_start, window_end, window_time
                                    FROM ptf.tumble(NULL::odd, 'ts', '1 day', "offset" => '-5 hours')$$);
SELECT * FROM pg_temp.both_ways($$SELECT data, window_start, window_end
                                    FROM ptf.tumble(NULL::odd, 'tz', '45 minutes', '10 minutes')$$);
SELECT * FROM pg_temp.both_ways($$SELECT (data).*, window_start
                                    FROM ptf.tumble(NULL::odd, 'ms', '2 hours')$$);
SELECT * FROM pg_temp.both_ways($$SELECT (data).a, window_end FROM ptf.tumble(NULL::odd_view, 'ts', '3 hours')$$);
-- HOP and CUMULATE: each row in several windows
SELECT * FROM pg_temp.both_ways($$SELECT (data).a, window_start, window_end, window_time
                                    FROM ptf.hop(NULL::odd, 'ts', '20 minutes', '1 hour')$$);
SELECT * FROM pg_temp.both_ways($$SELECT (data).a, window_start, window_end, window_time
                                    FROM ptf.hop(NULL::odd, 'tz', '25 minutes', '1 hour', "offset" => '7 minutes')$$);
SELECT * FROM pg_temp.both_ways($$SELECT data, window_start, window_end
                                    FROM ptf.cumulate(NULL::odd, 'ts', '2 hours', '1 day', "offset" => '-5 hours')$$);
SELECT * FROM pg_temp.both_ways($$SELECT (data).a, window_start, window_end
                                    FROM ptf.cumulate(NULL::odd_view, 'ms', '30 minutes', '2 hours') WHERE (data).a > 100$$);
SET TimeZone = 'UTC';
-- a NULL time is the same error
\set VERBOSITY terse
INSERT INTO odd VALUES (99, NULL, NULL, NULL);
SELECT count(*) FROM tumble(NULL::odd, 'ts', '1 hour');
SELECT count(*) FROM hop(NULL::odd, 'ts', '30 minutes', '1 hour');
SET ptf.inline_window_tvfs = off;
SELECT count(*) FROM tumble(NULL::odd, 'ts', '1 hour');
SELECT count(*) FROM hop(NULL::odd, 'ts', '30 minutes', '1 hour');
RESET ptf.inline_window_tvfs;
\set VERBOSITY default
DELETE FROM odd WHERE a = 99;
-- and the caller's rights: row level security and privileges hold
CREATE ROLE regress_ptf_tvf;
GRANT USAGE ON SCHEMA ptf TO regress_ptf_tvf;
GRANT SELECT ON odd TO regress_ptf_tvf;
ALTER TABLE odd ENABLE ROW LEVEL SECURITY;
CREATE POLICY small ON odd FOR SELECT TO regress_ptf_tvf USING (a < 10);
SET ROLE regress_ptf_tvf;
SELECT count(*) FROM ptf.tumble(NULL::ptf.odd, 'ts', '1 hour');
SET ptf.inline_window_tvfs = off;
SELECT count(*) FROM ptf.tumble(NULL::ptf.odd, 'ts', '1 hour');
RESET ptf.inline_window_tvfs;
RESET ROLE;
-- a plan made under one role's policies is not used for another's
CREATE ROLE regress_ptf_tvf2;
GRANT USAGE ON SCHEMA ptf TO regress_ptf_tvf2;
GRANT SELECT ON odd TO regress_ptf_tvf2;
CREATE POLICY bigger ON odd FOR SELECT TO regress_ptf_tvf2 USING (a < 100);
SET ROLE regress_ptf_tvf;
PREPARE by_role AS SELECT count(*) FROM ptf.tumble(NULL::ptf.odd, 'ts', '1 hour');
EXECUTE by_role;
SET ROLE regress_ptf_tvf2;
EXECUTE by_role;
RESET ROLE;
DEALLOCATE by_role;
DROP POLICY bigger ON odd;
REVOKE ALL ON odd FROM regress_ptf_tvf2;
REVOKE USAGE ON SCHEMA ptf FROM regress_ptf_tvf2;
DROP ROLE regress_ptf_tvf2;
REVOKE SELECT ON odd FROM regress_ptf_tvf;
SET ROLE regress_ptf_tvf;
SELECT count(*) FROM ptf.tumble(NULL::ptf.odd, 'ts', '1 hour');
RESET ROLE;
DROP POLICY small ON odd;
REVOKE USAGE ON SCHEMA ptf FROM regress_ptf_tvf;
DROP ROLE regress_ptf_tvf;
-- a view's definition keeps the call: the plan is chosen when it is planned
-- (here the window aggregate)
CREATE VIEW hourly AS SELECT window_start, count(*) FROM ptf.tumble(NULL::odd, 'ts', '1 hour') GROUP BY 1;
SELECT pg_get_viewdef('hourly') LIKE '%FROM tumble(NULL::odd%' AS keeps_the_call;
EXPLAIN (COSTS OFF) SELECT * FROM hourly;
DROP VIEW hourly, odd_view;
DROP TABLE odd;

-- errors, before any row is read: SQLSTATE and message
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT pg_temp.try(q) FROM (VALUES
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '1 month')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '1 year 2 days')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '0')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '-5 minutes')$$),
    ($$SELECT * FROM hop(NULL::bid, 'bidtime', '0', '10 minutes')$$),
    ($$SELECT * FROM hop(NULL::bid, 'bidtime', '5 minutes', '-10 minutes')$$),
    ($$SELECT * FROM cumulate(NULL::bid, 'bidtime', '3 minutes', '10 minutes')$$),
    ($$SELECT * FROM cumulate(NULL::bid, 'bidtime', '1 minute', '10 minutes', "offset" => '1 month')$$),
    -- a row in 2^31 windows or more crashed the server (the count wrapped);
    -- more than a million is refused (54000), inlined or not
    ($$SELECT count(*) FROM hop(NULL::bid, 'bidtime', '1 microsecond', '36 minutes')$$),
    ($$SELECT count(*) FROM cumulate(NULL::bid, 'bidtime', '1 microsecond', '36 minutes')$$),
    ($$SELECT count(*) FROM window_top_n(NULL::bid, 'hop', 'bidtime', '36 minutes', '1 microsecond', order_by => 'bidtime')$$),
    ($$SELECT count(*) FROM hop(NULL::bid, 'bidtime', '1 millisecond', '1001 seconds')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'nope', '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'price', '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, NULL, '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', NULL)$$),
    ($$SELECT * FROM tumble(NULL::int, 'bidtime', '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '10 minutes', changes => true)$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '10 minutes', query => $q$SELECT '+I', b FROM bid b$q$)$$),
    -- a NULL event time is an error when its row is read
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '10 minutes',
        query => $q$VALUES (NULL::timestamp, 1.00::numeric(10,2), 'x', 'y')$q$)$$)
) AS t(q);
DROP TABLE bid, one_row, bid_tz, bid_ms;

-- a finite time whose window ends past the timestamp range is skipped (and counted, with a
-- uid) as a row of infinite time is: timestamp and bigint columns alike, inlined or not
SET TimeZone = 'UTC';
CREATE TABLE far (id int, ts timestamp, ms bigint);
INSERT INTO far VALUES (1, '294276-12-31 23:59:59', 9224318015999000), (2, '2024-01-01', 1704067200000),
    (3, '294250-06-15 12:00', 9223480238400000);
SELECT (data).id, window_start FROM ptf.tumble(NULL::far, 'ts', '1 day');
SELECT (data).id, window_start FROM ptf.tumble(NULL::far, 'ms', '1 day');
SET ptf.inline_window_tvfs = off;
SELECT (data).id, window_start FROM ptf.tumble(NULL::far, 'ts', '1 day');
SELECT (data).id, window_start FROM ptf.tumble(NULL::far, 'ms', '1 day');
RESET ptf.inline_window_tvfs;
SELECT (data).id FROM ptf.tumble(NULL::far, 'ts', '1 day', uid => 'far_ts');
SELECT (data).id FROM ptf.tumble(NULL::far, 'ms', '1 day', uid => 'far_ms');
SELECT uid, rows_in, rows_out, rows_skipped FROM ptf.state WHERE uid LIKE 'far%' ORDER BY uid;
SELECT ptf.drop_state('far_ts'), ptf.drop_state('far_ms');
-- times in the last 30 years of the range have their windows (the window arithmetic counts
-- from 1970, and must not overflow there): to the last millisecond whose window ends within
-- the range; a number of no time at all is an error (22008)
SELECT (data).id, window_start, window_end FROM ptf.tumble(NULL::far, 'ms', '1 millisecond',
    query => 'VALUES (3, NULL::timestamp, 9224318015999998), (4, NULL, 9224318015999999)');
SELECT (data).id FROM ptf.tumble(NULL::far, 'ms', '1 day',
    query => 'SELECT 5, NULL::timestamp, 9300000000000000');
-- the helper of inlined calls refuses a bound it does not have
SELECT ptf._tumble_bound(now(), 1000000, 0, 99, 'ts');
DROP TABLE far;
-- a row whose first window ends within the range has every window that does, and none
-- that does not: HOP 10 min / 5 min, rows at 23:47 and 23:52 of the range's last day --
-- [23:45, 23:55) holds both, [23:50, 00:00) would end at its end; CUMULATE 20 min / 5 min
-- likewise up to 23:55. Inlined or not, timestamp and bigint columns, TVF + GROUP BY and
-- Window Top-N as planned, and a uid call counting nothing skipped
CREATE TABLE near_end (id int, ts timestamp, ms bigint);
INSERT INTO near_end VALUES (1, '294276-12-31 23:47', 9224318015220000),
    (2, '294276-12-31 23:52', 9224318015520000);
SELECT (data).id, window_start, window_end FROM ptf.hop(NULL::near_end, 'ts', '5 minutes', '10 minutes')
 ORDER BY 2, 1;
SELECT (data).id, window_start, window_end FROM ptf.cumulate(NULL::near_end, 'ms', '5 minutes', '20 minutes')
 ORDER BY 3, 1;
SET ptf.inline_window_tvfs = off;
SELECT (data).id, window_start, window_end FROM ptf.hop(NULL::near_end, 'ms', '5 minutes', '10 minutes')
 ORDER BY 2, 1;
SELECT (data).id, window_start, window_end FROM ptf.cumulate(NULL::near_end, 'ts', '5 minutes', '20 minutes')
 ORDER BY 3, 1;
RESET ptf.inline_window_tvfs;
SELECT window_start, window_end, count(*), array_agg((data).id ORDER BY (data).id)
  FROM ptf.hop(NULL::near_end, 'ts', '5 minutes', '10 minutes') GROUP BY 1, 2 ORDER BY 1;
SELECT window_start, window_end, count(*)
  FROM ptf.cumulate(NULL::near_end, 'ts', '5 minutes', '20 minutes') GROUP BY 1, 2 ORDER BY 2;
SELECT * FROM (SELECT (data).id, window_start, window_end,
                      row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).id DESC) AS rn
                 FROM ptf.hop(NULL::near_end, 'ts', '5 minutes', '10 minutes')) t
 WHERE rn = 1 ORDER BY 2;
SELECT count(*) FROM ptf.hop(NULL::near_end, 'ts', '5 minutes', '10 minutes', uid => 'near_end');
SELECT rows_in, rows_out, rows_skipped FROM ptf.state WHERE uid = 'near_end';
SELECT ptf.drop_state('near_end');
DROP TABLE near_end;
-- a window must start within the range too (it begins 4714-11-24 BC): TUMBLE 7 days, whose
-- grid from 1970 has [11-20, 11-27) BC, passes the first two rows over; HOP 2 days / 1 day
-- keeps their [11-24, 11-26) and leaves out [11-23, 11-25) (timestamp errors, 22008, before)
CREATE TABLE near_start (id int, ts timestamp);
INSERT INTO near_start VALUES (1, '4714-11-24 00:00:00 BC'), (2, '4714-11-24 05:00:00 BC'),
    (3, '4714-11-30 00:00:00 BC');
SELECT (data).id, window_start, window_end FROM ptf.tumble(NULL::near_start, 'ts', '7 days');
SELECT (data).id, window_start, window_end FROM ptf.hop(NULL::near_start, 'ts', '1 day', '2 days')
 ORDER BY 2, 1;
SET ptf.inline_window_tvfs = off;
SELECT (data).id, window_start, window_end FROM ptf.tumble(NULL::near_start, 'ts', '7 days');
RESET ptf.inline_window_tvfs;
SELECT window_start, window_end, count(*)
  FROM ptf.hop(NULL::near_start, 'ts', '1 day', '2 days') GROUP BY 1, 2 ORDER BY 1;
DROP TABLE near_start;
-- against a model: the windows of 300 times in the last 40 days of the range (and at
-- 23:59:59.999 and 23:53 of its last day) and of 300 in its first 40 days (from
-- 4714-11-24 BC) and three between (2000, 1 AD, 100000 AD), HOP and CUMULATE of several
-- sizes (up to weeks, past the range's ends; HOP with gaps between its windows, and of
-- 250k and 290k years),
-- as bigint milliseconds (the range is [-210866803200000, 9224318016000000) ms after 1970);
-- both ways, rows and counts
CREATE TABLE near_gen AS
SELECT i AS id, 9224318016000000 - 1 - (hashint4(i) & 2147483647)::bigint % (40::bigint * 86400000) AS ms
  FROM generate_series(1, 300) i
 UNION ALL VALUES (301, 9224318016000000 - 1), (302, 9224318016000000 - 420000)
 UNION ALL
SELECT i, -210866803200000 + (hashint4(i) & 2147483647)::bigint % (40::bigint * 86400000)
  FROM generate_series(303, 602) i
 UNION ALL VALUES (603, 946684800000), (604, -62135596800000), (605, 3093527980800000);
CREATE FUNCTION near_model(kind text, step bigint, size bigint, off bigint)
RETURNS TABLE (id int, window_start bigint, window_end bigint) LANGUAGE sql AS $$
    SELECT g.id, w.s, w.e
      FROM near_gen g,
           LATERAL (SELECT st AS s, st + size AS e
                      FROM generate_series((floor((g.ms - size - off)::numeric / step)::bigint + 1)
                                           * step + off, g.ms, step) st
                     WHERE kind = 'hop'
                    UNION ALL
                    SELECT ps, ps + j * step
                      FROM (SELECT floor((g.ms - off)::numeric / size)::bigint * size + off AS ps) p,
                           generate_series((g.ms - ps) / step + 1, size / step) j
                     WHERE kind = 'cumulate') w
     WHERE w.s >= -210866803200000 AND w.e < 9224318016000000
$$;
-- the TVF's windows (inlined or not), window_aggregate's counts, and TVF + GROUP BY as planned
CREATE FUNCTION near_tvf(kind text, step bigint, size bigint, off bigint, inline boolean)
RETURNS TABLE (id int, window_start bigint, window_end bigint) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('ptf.inline_window_tvfs', inline::text, true);
    RETURN QUERY EXECUTE format(
        'SELECT (data).id, (extract(epoch FROM window_start) * 1000)::bigint,
                (extract(epoch FROM window_end) * 1000)::bigint
           FROM ptf.%s(NULL::near_gen, ''ms'', %L, %L, "offset" => %L)',
        kind, step || ' ms', size || ' ms', off || ' ms');
END $$;
CREATE TYPE near_n AS (window_start timestamptz, window_end timestamptz, n bigint);
CREATE FUNCTION near_counts(kind text, step bigint, size bigint, off bigint, planned boolean)
RETURNS TABLE (window_start bigint, window_end bigint, n bigint) LANGUAGE plpgsql AS $$
BEGIN
    IF planned THEN
        RETURN QUERY EXECUTE format(
            'SELECT (extract(epoch FROM window_start) * 1000)::bigint,
                    (extract(epoch FROM window_end) * 1000)::bigint, count(*)
               FROM ptf.%s(NULL::near_gen, ''ms'', %L, %L, "offset" => %L) GROUP BY 1, 2',
            kind, step || ' ms', size || ' ms', off || ' ms');
    ELSE
        RETURN QUERY SELECT (extract(epoch FROM w.window_start) * 1000)::bigint,
                            (extract(epoch FROM w.window_end) * 1000)::bigint, w.n
          FROM ptf.window_aggregate(NULL::near_gen, NULL::near_n, kind, 'ms', (size || ' ms')::interval,
                                    (step || ' ms')::interval, "offset" => (off || ' ms')::interval,
                                    aggregates => 'count(*) AS n') w;
    END IF;
END $$;
-- the windows tried: slides larger than the size (rows between windows), sizes of 250k and
-- 290k years among them
CREATE TABLE near_specs (kind text, step bigint, size bigint, off bigint);
INSERT INTO near_specs VALUES ('hop', 300000, 600000, 0), ('hop', 240000, 600000, 60000),
    ('cumulate', 300000, 1200000, 0), ('cumulate', 900000, 3600000, 420000),
    ('hop', 604800000, 2592000000, 0), ('cumulate', 345600000, 1728000000, 0),
    ('hop', 864000000, 86400000, 0), ('hop', 1382400000, 432000000, 86400000),
    ('hop', 4000000000000000, 8000000000000000, 0), ('hop', 3600000000000000, 9216000000000000, 0);
SELECT kind, step / 60000 AS step_min, size / 60000 AS size_min, inline,
       (SELECT count(*) FROM near_model(kind, step, size, off)) AS windows,
       (SELECT count(*) FROM (
           (SELECT * FROM near_model(kind, step, size, off)
            EXCEPT ALL
            SELECT * FROM near_tvf(kind, step, size, off, inline))
           UNION ALL
           (SELECT * FROM near_tvf(kind, step, size, off, inline)
            EXCEPT ALL
            SELECT * FROM near_model(kind, step, size, off))) d) AS tvf_differences
  FROM near_specs s,
       (VALUES (true), (false)) i(inline)
 ORDER BY 1, 2, 4;
SELECT kind, step / 60000 AS step_min, size / 60000 AS size_min, planned,
       (SELECT count(*) FROM (
           (SELECT window_start, window_end, count(*) FROM near_model(kind, step, size, off) GROUP BY 1, 2
            EXCEPT ALL
            SELECT * FROM near_counts(kind, step, size, off, planned))
           UNION ALL
           (SELECT * FROM near_counts(kind, step, size, off, planned)
            EXCEPT ALL
            SELECT window_start, window_end, count(*) FROM near_model(kind, step, size, off) GROUP BY 1, 2)) d)
       AS count_differences
  FROM near_specs s,
       (VALUES (false), (true)) p(planned)
 ORDER BY 1, 2, 4;
-- HOP 10 min / 4 min: the last window in range ends at 23:58 (23:53's; 23:59:59.999 has none)
SELECT max(window_end) FROM ptf.window_aggregate(NULL::near_gen, NULL::near_n, 'hop', 'ms', '10 minutes',
    '4 minutes', aggregates => 'count(*) AS n');
DROP FUNCTION near_counts, near_tvf, near_model;
DROP TYPE near_n;
DROP TABLE near_gen, near_specs;
RESET TimeZone;

-- the window columns are timestamptz; a timestamp column's bounds are its wall clock in the
-- session's TimeZone. Where that clock skips a bound (spring forward) PostgreSQL moves it and
-- the call warns; where it repeats an hour (fall back) the bounds are exact; in UTC always.
CREATE TABLE spring (id int, ts timestamp);
INSERT INTO spring VALUES (1, '2021-03-14 01:30'), (2, '2021-03-14 02:30'), (3, '2021-03-14 03:30');
CREATE TABLE fall (id int, ts timestamp);
INSERT INTO fall VALUES (4, '2021-11-07 00:30'), (5, '2021-11-07 01:30'), (6, '2021-11-07 02:30');
SET TimeZone = 'America/Los_Angeles';
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.tumble(NULL::spring, 'ts', '1 hour') ORDER BY 1;
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.hop(NULL::spring, 'ts', '1 hour', '2 hours') WHERE (data).id = 1 ORDER BY 2;
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.tumble(NULL::fall, 'ts', '1 hour') ORDER BY 1;
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.hop(NULL::fall, 'ts', '1 hour', '2 hours') WHERE (data).id = 5 ORDER BY 2;
-- in UTC the bounds are Flink's (SliceAssigner's testDstSaving), as with a timestamp target
SET TimeZone = 'UTC';
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.tumble(NULL::spring, 'ts', '1 hour') ORDER BY 1;
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.hop(NULL::spring, 'ts', '1 hour', '2 hours') WHERE (data).id = 1 ORDER BY 2;
SELECT (data).id, window_start::timestamp, window_end::timestamp
  FROM ptf.cumulate(NULL::spring, 'ts', '1 hour', '3 hours') WHERE (data).id = 2 ORDER BY 3;
RESET TimeZone;
DROP TABLE spring, fall;
