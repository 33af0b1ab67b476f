-- Late rows and watermarks in window aggregates, checked against Flink's
-- SlicingWindowAggOperatorTest (explicit watermarks; value sums and counts
-- per window) and WindowAggregateTestPrograms (watermark rowtime - 1 s,
-- offsets, a restore in the middle).  Flink's explicit watermarks are
-- played here by heartbeat rows of a key of their own: with a delay of
-- 100 s, a heartbeat at W + 100 s moves the watermark to W.
SET search_path = ptf, public;
SET TimeZone = 'UTC';

CREATE TABLE hv (key text, value int, rowtime bigint);   -- rowtime: epoch ms
CREATE TYPE hv_out AS (key text, s bigint, n bigint, window_start bigint, window_end bigint);
-- a stream: rows in order, heartbeats ('hb') marked by a watermark
CREATE FUNCTION pg_temp.stream(steps text) RETURNS text LANGUAGE sql AS $$
    SELECT 'SELECT key, value, rowtime::bigint FROM (VALUES ' || steps || ') v(ord, key, value, rowtime) ORDER BY ord'
$$;
CREATE FUNCTION pg_temp.wm(ord int, w bigint) RETURNS text LANGUAGE sql AS $$
    SELECT format('(%s, %L, 0, %s)', ord, 'hb', w + 100000)
$$;

-- HOP size 3 s, slide 1 s.  Flink: wm 999 -> key1 [-2000, 1000); wm 1999 -> key1, key2
-- [-1000, 2000); wm 2999 -> key1, key2 [0, 3000); wm 3999 -> key2 [1000, 4000) 5 rows;
-- key2@3500 is late but its last window is not: counted in [2000, 5000); key1@2999 has
-- every window fired: dropped; wm 5999 -> key2 [3000, 6000).
\set hop_rows '(1, ''key2'', 1, 3999), (2, ''key2'', 1, 3000), (3, ''key1'', 1, 20), (4, ''key1'', 1, 0), (5, ''key1'', 1, 999), (6, ''key2'', 1, 1998), (7, ''key2'', 1, 1999), (8, ''key2'', 1, 1000)'
SELECT * FROM window_aggregate(NULL::hv, NULL::hv_out, 'hop', 'rowtime', '3 seconds', '1 second',
    partition_by => '{key}', aggregates => 'sum(value) AS s, count(*) AS n',
    watermark_delay => '100 seconds',
    query => pg_temp.stream(:'hop_rows' || ', ' || pg_temp.wm(10, 999) || ', ' || pg_temp.wm(11, 1999)
        || ', ' || pg_temp.wm(12, 2999) || ', ' || pg_temp.wm(13, 3999) || ', (14, ''key2'', 1, 3500), '
        || pg_temp.wm(15, 4999) || ', (16, ''key1'', 1, 2999), ' || pg_temp.wm(17, 5999) || ', '
        || pg_temp.wm(18, 6999) || ', ' || pg_temp.wm(19, 7999)))
 WHERE key <> 'hb';
SELECT rows_in, rows_late FROM last_call_stats();

-- the same as a stream under a uid, state stored where Flink takes its snapshot
SELECT * FROM window_aggregate(NULL::hv, NULL::hv_out, 'hop', 'rowtime', '3 seconds', '1 second',
    partition_by => '{key}', aggregates => 'sum(value) AS s, count(*) AS n',
    watermark_delay => '100 seconds', uid => 'hop',
    query => pg_temp.stream(:'hop_rows' || ', ' || pg_temp.wm(10, 999) || ', ' || pg_temp.wm(11, 1999)
        || ', ' || pg_temp.wm(12, 2999)))
 WHERE key <> 'hb' ORDER BY window_end, key;
SELECT keys, watermark, rows_in, rows_out, rows_late FROM state WHERE uid = 'hop';
SELECT * FROM window_aggregate(NULL::hv, NULL::hv_out, 'hop', 'rowtime', '3 seconds', '1 second',
    partition_by => '{key}', aggregates => 'sum(value) AS s, count(*) AS n',
    watermark_delay => '100 seconds', uid => 'hop',
    query => pg_temp.stream(pg_temp.wm(13, 3999) || ', (14, ''key2'', 1, 3500), '
        || pg_temp.wm(15, 4999) || ', (16, ''key1'', 1, 2999), ' || pg_temp.wm(17, 5999) || ', '
        || pg_temp.wm(18, 6999) || ', ' || pg_temp.wm(19, 7999)))
 WHERE key <> 'hb' ORDER BY window_end, key;
SELECT watermark, rows_in, rows_late FROM state WHERE uid = 'hop';

-- CUMULATE size 3 s, step 1 s.  Flink: wm 999 -> key1 [0, 1000); wm 1999 -> key1, key2
-- [0, 2000); key2@1000 late, counted from [0, 3000) on; wm 1999 again -> nothing; wm 2999
-- -> key1 [0, 3000) 3, key2 [0, 3000) 5; wm 3999 -> key2 [3000, 4000); key1 value 2
-- @3500 late: key1 gets [3000, 5000) and [3000, 6000) but never [3000, 4000); key1@2999
-- dropped; wm 4999 and 5999 -> key1, key2 [3000, 5000) and [3000, 6000).
\set cum_rows '(1, ''key2'', 1, 2999), (2, ''key2'', 1, 3000), (3, ''key1'', 1, 20), (4, ''key1'', 1, 0), (5, ''key1'', 1, 999), (6, ''key2'', 1, 1998), (7, ''key2'', 1, 1999), (8, ''key2'', 1, 1000)'
SELECT * FROM window_aggregate(NULL::hv, NULL::hv_out, 'cumulate', 'rowtime', '3 seconds', '1 second',
    partition_by => '{key}', aggregates => 'sum(value) AS s, count(*) AS n',
    watermark_delay => '100 seconds', uid => 'cumulate',
    query => pg_temp.stream(:'cum_rows' || ', ' || pg_temp.wm(10, 999) || ', ' || pg_temp.wm(11, 1999)))
 WHERE key <> 'hb' ORDER BY window_end, key;
SELECT * FROM window_aggregate(NULL::hv, NULL::hv_out, 'cumulate', 'rowtime', '3 seconds', '1 second',
    partition_by => '{key}', aggregates => 'sum(value) AS s, count(*) AS n',
    watermark_delay => '100 seconds', uid => 'cumulate',
    query => pg_temp.stream('(12, ''key2'', 1, 1000), ' || pg_temp.wm(13, 1999) || ', '
        || pg_temp.wm(14, 2999) || ', ' || pg_temp.wm(15, 3999) || ', (16, ''key1'', 2, 3500), '
        || pg_temp.wm(17, 4999) || ', (18, ''key1'', 1, 2999), ' || pg_temp.wm(19, 5999)))
 WHERE key <> 'hb' ORDER BY window_end, key;
SELECT rows_late FROM state WHERE uid = 'cumulate';

-- TUMBLE 3 s (the HOP rows).  Flink: wm 999, 1999 -> nothing; wm 2999 -> key1, key2
-- [0, 3000); wm 3999 -> nothing; key1@2500 and, after wm 4999, key2@2999 are late:
-- dropped; wm 5999 -> key2 [3000, 6000) 2 rows.
SELECT * FROM window_aggregate(NULL::hv, NULL::hv_out, 'tumble', 'rowtime', '3 seconds',
    partition_by => '{key}', aggregates => 'sum(value) AS s, count(*) AS n',
    watermark_delay => '100 seconds',
    query => pg_temp.stream(:'hop_rows' || ', ' || pg_temp.wm(10, 999) || ', ' || pg_temp.wm(11, 1999)
        || ', ' || pg_temp.wm(12, 2999) || ', ' || pg_temp.wm(13, 3999) || ', (14, ''key1'', 1, 2500), '
        || pg_temp.wm(15, 4999) || ', (16, ''key2'', 1, 2999), ' || pg_temp.wm(17, 5999)))
 WHERE key <> 'hb' ORDER BY window_end, key;
SELECT rows_late FROM last_call_stats();

-- WindowAggregateTestPrograms: watermark rowtime - 1 s, count(*), sum, count(DISTINCT
-- comment) per name; a restore after the first rows (two uid calls).  The last window
-- fires in Flink at the end of the input; here a row of name 'zz' an hour on moves the
-- watermark past it.  a@4 arrives when the watermark is 7 s: late.
CREATE TABLE src (ts timestamp, a_int int, comment text, name text);
CREATE TYPE src_out AS (name text, window_start time, window_end time, cnt bigint, s bigint, d bigint);
CREATE FUNCTION pg_temp.src_rows(part int) RETURNS text LANGUAGE sql AS $$
    SELECT CASE part WHEN 1 THEN
        $q$SELECT timestamp '2020-10-10' + s * interval '1 second', a, c, n FROM (VALUES
            (1, 1, 1, 'Hi', 'a'), (2, 2, 2, 'Comment#1', 'a'), (3, 3, 2, 'Comment#1', 'a'),
            (4, 4, 5, NULL, 'a'), (5, 7, 3, 'Hello', 'b'), (6, 6, 6, 'Hi', 'b'),
            (7, 8, 3, 'Comment#2', 'a'), (8, 4, 5, 'Hi', 'a'), (9, 16, 4, 'Hi', 'b'),
            (10, 32, 7, NULL, NULL), (11, 34, 1, 'Comment#3', 'b')) v(o, s, a, c, n) ORDER BY o$q$
    ELSE
        $q$SELECT timestamp '2020-10-10' + s * interval '1 second', a, c, n FROM (VALUES
            (1, 40, 10, 'Comment#4', 'a'), (2, 42, 11, 'Comment#5', 'd'), (3, 43, 12, 'Comment#6', 'c'),
            (4, 44, 13, 'Comment#7', 'd'), (5, 3600, 0, NULL, 'zz')) v(o, s, a, c, n) ORDER BY o$q$
    END
$$;
CREATE TYPE src_agg AS (name text, window_start timestamp, window_end timestamp, cnt bigint, s bigint, d bigint);
CREATE FUNCTION pg_temp.programs(w text, size interval, step interval, off interval, part int)
RETURNS SETOF src_out LANGUAGE sql AS $$
    SELECT (r.o).name, (r.o).window_start::time, (r.o).window_end::time, (r.o).cnt, (r.o).s, (r.o).d
      FROM (SELECT window_aggregate(NULL::src, NULL::src_agg, w, 'ts', size, step, off,
                partition_by => '{name}', watermark_delay => '1 second',
                uid => w || off, query => pg_temp.src_rows(part),
                aggregates => 'count(*) AS cnt, sum(a_int) AS s, count(DISTINCT comment) AS d') AS o) r
     WHERE (r.o).name IS DISTINCT FROM 'zz'
$$;
-- TUMBLE 5 s: [a,00:00,00:05,4,10,2] [a,00:05,00:10,1,3,1] [b,00:05,00:10,2,9,2]
-- [b,00:15,00:20,1,4,1]; then [b,00:30,00:35,1,1,1] [null,00:30,00:35,1,7,0]
-- [a,00:40,00:45,1,10,1] [c,00:40,00:45,1,12,1] [d,00:40,00:45,2,24,2]
SELECT * FROM pg_temp.programs('tumble', '5 seconds', NULL, '0', 1);
SELECT * FROM pg_temp.programs('tumble', '5 seconds', NULL, '0', 2);
-- TUMBLE 5 s, offset 1 s
SELECT * FROM pg_temp.programs('tumble', '5 seconds', NULL, '1 second', 1);
SELECT * FROM pg_temp.programs('tumble', '5 seconds', NULL, '1 second', 2);
-- HOP 10 s / 5 s: the late a@4 counts in [00:00, 00:10) (6 rows) but not in the
-- [23:59:55, 00:05) already fired
SELECT * FROM pg_temp.programs('hop', '10 seconds', '5 seconds', '0', 1);
SELECT * FROM pg_temp.programs('hop', '10 seconds', '5 seconds', '0', 2);
SELECT * FROM pg_temp.programs('hop', '10 seconds', '5 seconds', '1 second', 1);
SELECT * FROM pg_temp.programs('hop', '10 seconds', '5 seconds', '1 second', 2);
-- CUMULATE 15 s / 5 s: a@4 counted from [00:00, 00:10) on; b has no [00:00, 00:05)
SELECT * FROM pg_temp.programs('cumulate', '15 seconds', '5 seconds', '0', 1);
SELECT * FROM pg_temp.programs('cumulate', '15 seconds', '5 seconds', '0', 2);
SELECT * FROM pg_temp.programs('cumulate', '15 seconds', '5 seconds', '1 second', 1);
SELECT * FROM pg_temp.programs('cumulate', '15 seconds', '5 seconds', '1 second', 2);
SELECT uid, rows_in, rows_late FROM state WHERE function = 'window_aggregate' ORDER BY uid;
SELECT count(drop_state(uid)) FROM state WHERE function = 'window_aggregate';
DROP TABLE hv, src;
