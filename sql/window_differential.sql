-- Differential tests on generated data: ptf.window_aggregate equals its
-- plain-SQL formulation -- GROUP BY date_bin for TUMBLE, a join of each row
-- to its windows for HOP and CUMULATE, gaps and islands for SESSION -- with
-- several aggregates (count, sum, avg, max, DISTINCT, FILTER), NULL keys
-- and out-of-order rows; in memory, spilled to disk (work_mem 64kB), and
-- incrementally with a uid.  The window TVFs equal the same joins.

CREATE SCHEMA win_diff;
SET search_path = win_diff, ptf;

SELECT setseed(0.31);
-- 100k rows over two days, 200 keys (5% NULL), in random order (seq)
CREATE TABLE gen AS
SELECT row_number() OVER (ORDER BY random()) AS seq, k, ts, v, price, tag
  FROM (SELECT CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 200)::int END AS k,
               timestamp '2024-03-01 00:00' + (random() * 172800)::int * interval '1 second' AS ts,
               CASE WHEN random() < 0.03 THEN NULL ELSE (random() * 100)::int END AS v,
               round((random() * 50)::numeric, 2) AS price,
               (ARRAY['a', 'b', 'c', 'd', 'e'])[1 + (random() * 4)::int] AS tag
          FROM generate_series(1, 100000)) g;
ANALYZE gen;

CREATE TYPE agg_row AS (k int, window_start timestamp, window_end timestamp,
    n bigint, s bigint, a numeric, mx int, d bigint, f bigint);

-- compares got with expected: both counts and both differences
CREATE FUNCTION compare(got_sql text, expected_sql text)
RETURNS TABLE (got bigint, expected bigint, missing bigint, extra bigint)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TEMP TABLE g AS %s', got_sql);
    EXECUTE format('CREATE TEMP TABLE e AS %s', expected_sql);
    RETURN QUERY SELECT (SELECT count(*) FROM g), (SELECT count(*) FROM e),
        (SELECT count(*) FROM (TABLE e EXCEPT ALL TABLE g) x),
        (SELECT count(*) FROM (TABLE g EXCEPT ALL TABLE e) x);
    DROP TABLE g, e;
END $$;

-- window_aggregate over gen in arrival (seq) order
CREATE FUNCTION ours(win text, size interval, step interval DEFAULT NULL,
                     "offset" interval DEFAULT '0')
RETURNS SETOF agg_row LANGUAGE sql AS $$
    SELECT * FROM ptf.window_aggregate(NULL::win_diff.gen, NULL::win_diff.agg_row, win, 'ts',
        size, step, "offset", partition_by => '{k}',
        aggregates => 'count(*) AS n, sum(v) AS s, avg(price) AS a, max(v) AS mx,
                       count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f',
        query => 'SELECT * FROM win_diff.gen ORDER BY seq')
$$;

-- the same aggregates over rows joined to their windows (ws, we)
CREATE FUNCTION plain(windows text) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT k, ws, we, count(*) AS n, sum(v) AS s, avg(price) AS a, max(v) AS mx,
                          count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f
                     FROM win_diff.gen, LATERAL (%s) w(ws, we) GROUP BY k, ws, we$q$, windows)
$$;

-- HOP 1 hour / 5 minutes: a row's 12 windows (ws, we), for plain() and dense_plain()
CREATE FUNCTION hop_1h_5m() RETURNS text LANGUAGE sql AS $$
    SELECT $w$SELECT date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes',
                     date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes' + interval '1 hour'
                FROM generate_series(0, 11) i$w$
$$;

-- TUMBLE: GROUP BY date_bin
SELECT * FROM compare($$SELECT * FROM win_diff.ours('tumble', '1 hour')$$,
    $$SELECT k, date_bin('1 hour', ts, '2000-01-01') AS ws, date_bin('1 hour', ts, '2000-01-01') + interval '1 hour' AS we,
             count(*) AS n, sum(v) AS s, avg(price) AS a, max(v) AS mx, count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f
        FROM win_diff.gen GROUP BY 1, 2, 3$$);
-- with an offset
SELECT * FROM compare($$SELECT * FROM win_diff.ours('tumble', '1 hour', "offset" => '-20 minutes')$$,
    win_diff.plain($$SELECT date_bin('1 hour', ts, '2000-01-01 00:40'),
                            date_bin('1 hour', ts, '2000-01-01 00:40') + interval '1 hour'$$));
-- HOP, size = 12 slides
SELECT * FROM compare($$SELECT * FROM win_diff.ours('hop', '1 hour', '5 minutes')$$,
    win_diff.plain(win_diff.hop_1h_5m()));
-- HOP whose size is not a multiple of its slide (windows every 20 min, 50 min long)
SELECT * FROM compare($$SELECT * FROM win_diff.ours('hop', '50 minutes', '20 minutes')$$,
    win_diff.plain($$SELECT ws, ws + interval '50 minutes'
                       FROM generate_series(0, 2) i,
                            LATERAL (SELECT date_bin('20 minutes', ts, '2000-01-01') - i * interval '20 minutes') s(ws)
                      WHERE ts < ws + interval '50 minutes'$$));
-- CUMULATE: step 10 minutes, size 1 hour, offset 5 minutes
SELECT * FROM compare($$SELECT * FROM win_diff.ours('cumulate', '1 hour', '10 minutes', '5 minutes')$$,
    win_diff.plain($$SELECT date_bin('1 hour', ts, '2000-01-01 00:05'),
                            date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes'
                       FROM generate_series(1, 6) j
                      WHERE date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes' > ts$$));
-- SESSION, gap 20 minutes: a row starts a session unless the key's previous row is at
-- most 20 minutes before it (sessions that touch merge)
SELECT * FROM compare($$SELECT * FROM win_diff.ours('session', '20 minutes')$$,
    $$WITH marked AS (
          SELECT *, CASE WHEN ts - lag(ts) OVER w <= interval '20 minutes' THEN 0 ELSE 1 END AS starts
            FROM win_diff.gen WINDOW w AS (PARTITION BY k ORDER BY ts, seq)),
      numbered AS (SELECT *, sum(starts) OVER (PARTITION BY k ORDER BY ts, seq) AS sess FROM marked)
      SELECT k, min(ts) AS ws, max(ts) + interval '20 minutes' AS we, count(*) AS n, sum(v) AS s,
             avg(price) AS a, max(v) AS mx,
             count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f
        FROM numbered GROUP BY k, sess$$);
SELECT keys, rows_spilled FROM last_call_stats();

-- spilled: keys beyond work_mem go to disk, and the answers stay
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM win_diff.ours('tumble', '1 hour')$$,
    $$SELECT k, date_bin('1 hour', ts, '2000-01-01') AS ws, date_bin('1 hour', ts, '2000-01-01') + interval '1 hour' AS we,
             count(*) AS n, sum(v) AS s, avg(price) AS a, max(v) AS mx, count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f
        FROM win_diff.gen GROUP BY 1, 2, 3$$);
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
SELECT * FROM compare($$SELECT * FROM win_diff.ours('hop', '1 hour', '5 minutes')$$,
    win_diff.plain(win_diff.hop_1h_5m()));
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
SELECT * FROM compare($$SELECT * FROM win_diff.ours('cumulate', '1 hour', '10 minutes', '5 minutes')$$,
    win_diff.plain($$SELECT date_bin('1 hour', ts, '2000-01-01 00:05'),
                            date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes'
                       FROM generate_series(1, 6) j
                      WHERE date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes' > ts$$));
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
SELECT * FROM compare($$SELECT * FROM win_diff.ours('session', '20 minutes')$$,
    $$WITH marked AS (
          SELECT *, CASE WHEN ts - lag(ts) OVER w <= interval '20 minutes' THEN 0 ELSE 1 END AS starts
            FROM win_diff.gen WINDOW w AS (PARTITION BY k ORDER BY ts, seq)),
      numbered AS (SELECT *, sum(starts) OVER (PARTITION BY k ORDER BY ts, seq) AS sess FROM marked)
      SELECT k, min(ts) AS ws, max(ts) + interval '20 minutes' AS we, count(*) AS n, sum(v) AS s,
             avg(price) AS a, max(v) AS mx,
             count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f
        FROM numbered GROUP BY k, sess$$);
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- Two keys over 20k minutes, one row a minute in no order: each key holds
-- 10k slices until the input ends, most of them added out of order.  They
-- wait in a sorted tail as long as the square root of the others before
-- merging (a tail of 8 made every eighth new slice move them all).
CREATE TABLE long_span AS
SELECT row_number() OVER (ORDER BY random()) AS seq, i % 2 AS k,
       timestamp '2024-03-01' + i * interval '1 minute' + (random() * 59)::int * interval '1 second' AS ts,
       i % 100 AS v
  FROM generate_series(1, 20000) i;
CREATE TYPE span_row AS (k int, window_start timestamp, window_end timestamp, n bigint, s bigint);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::win_diff.long_span, NULL::win_diff.span_row,
                          'tumble', 'ts', '1 minute', partition_by => '{k}',
                          aggregates => 'count(*) AS n, sum(v) AS s',
                          query => 'SELECT * FROM win_diff.long_span ORDER BY seq')$$,
    $$SELECT k, date_bin('1 minute', ts, '2000-01-01'), date_bin('1 minute', ts, '2000-01-01') + interval '1 minute',
             count(*), sum(v) FROM win_diff.long_span GROUP BY 1, 2, 3$$);

-- Dense slice sets (state/keyed_state.c): a key's slices lie on the grid of
-- the slice and are kept one entry per grid point, holes between, found by
-- arithmetic.  Key 1 arrives in descending time (each new slice extends its
-- set at the front); key 2 in ascending time, then a row 30 days later (too
-- sparse: sorted again), then rows between; key 3 first at both ends of a
-- day (sorted), then the day's slices in no order, twice (dense once they
-- fill a quarter of its span).  In memory and spilled.
CREATE TABLE dense AS
SELECT 1 AS k, 1000000 - i AS seq, timestamp '2024-03-01' + i * interval '5 minutes' AS ts, i % 13 AS v
  FROM generate_series(0, 575) i
UNION ALL
SELECT 2, 2000000 + i, timestamp '2024-03-01 00:01' + i * interval '5 minutes', i % 7
  FROM generate_series(0, 287) i
UNION ALL SELECT 2, 2001000, timestamp '2024-03-31', 5
UNION ALL
SELECT 2, 2002000 + i, timestamp '2024-03-01 00:02' + (i * 37 % 8640) * interval '5 minutes', i % 5
  FROM generate_series(0, 99) i
UNION ALL SELECT 3, 3000000, timestamp '2024-03-02 00:00', 1
UNION ALL SELECT 3, 3000001, timestamp '2024-03-02 23:55', 2
UNION ALL
SELECT 3, 3000002 + i, timestamp '2024-03-02' + (i * 97 % 288) * interval '5 minutes' + interval '3 minutes', i % 11
  FROM generate_series(0, 575) i;
CREATE FUNCTION dense_ours(win text, size interval, step interval DEFAULT NULL)
RETURNS SETOF win_diff.span_row LANGUAGE sql AS $$
    SELECT * FROM ptf.window_aggregate(NULL::win_diff.dense, NULL::win_diff.span_row, win, 'ts',
        size, step, partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s',
        query => 'SELECT * FROM win_diff.dense ORDER BY seq')
$$;
CREATE FUNCTION dense_plain(windows text) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT k, ws, we, count(*), sum(v) FROM win_diff.dense, LATERAL (%s) w(ws, we)
                     GROUP BY k, ws, we$q$, windows)
$$;
SELECT * FROM compare($$SELECT * FROM win_diff.dense_ours('tumble', '5 minutes')$$,
    win_diff.dense_plain($$SELECT date_bin('5 minutes', ts, '2000-01-01'),
                                  date_bin('5 minutes', ts, '2000-01-01') + interval '5 minutes'$$));
SELECT * FROM compare($$SELECT * FROM win_diff.dense_ours('hop', '1 hour', '5 minutes')$$,
    win_diff.dense_plain(win_diff.hop_1h_5m()));
SELECT * FROM compare($$SELECT * FROM win_diff.dense_ours('cumulate', '1 hour', '5 minutes')$$,
    win_diff.dense_plain($$SELECT date_bin('1 hour', ts, '2000-01-01'),
                                  date_bin('1 hour', ts, '2000-01-01') + j * interval '5 minutes'
                             FROM generate_series(1, 12) j
                            WHERE date_bin('1 hour', ts, '2000-01-01') + j * interval '5 minutes' > ts$$));
-- two slice ends of one key 2^63 - 1 microseconds apart, on a grid of one
-- microsecond: too far for a dense set, whose span's arithmetic overflowed
-- (memory was overwritten: "could not find block containing chunk"), and a
-- third slice next to the first
CREATE TABLE far AS
SELECT * FROM (VALUES (1, 1, timestamp '4714-11-24 00:00:00 BC', 1),
                      (1, 2, timestamp '287564-12-03 04:00:54.775807', 2),
                      (1, 3, timestamp '4714-11-24 00:00:00.000002 BC', 3)) v(k, seq, ts, v);
SELECT * FROM ptf.window_aggregate(NULL::win_diff.far, NULL::win_diff.span_row, 'tumble', 'ts',
    '1 microsecond', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s',
    query => 'SELECT * FROM win_diff.far ORDER BY seq') ORDER BY window_start;
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM win_diff.dense_ours('hop', '1 hour', '5 minutes')$$,
    win_diff.dense_plain(win_diff.hop_1h_5m()));
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- SESSION with array_agg over 3000 keys: each session's states have a
-- memory context of their own, and the state's memory is measured for
-- fewer of the new keys (keyed_state.c, over_budget); in memory and
-- spilled, the sessions are those of gaps and islands
CREATE TABLE sess AS
SELECT row_number() OVER (ORDER BY random()) AS seq, k, ts
  FROM (SELECT (random() * 3000)::int AS k,
               timestamp '2024-03-01' + (random() * 172800)::int * interval '1 second' AS ts
          FROM generate_series(1, 60000)) g;
CREATE TYPE sess_row AS (k int, window_start timestamp, window_end timestamp, n bigint, seqs bigint[]);
CREATE FUNCTION sess_ours() RETURNS TABLE (k int, ws timestamp, we timestamp, n bigint, seqs bigint[])
LANGUAGE sql AS $$
    SELECT k, window_start, window_end, n, (SELECT array_agg(x ORDER BY x) FROM unnest(seqs) x)
      FROM ptf.window_aggregate(NULL::win_diff.sess, NULL::win_diff.sess_row, 'session', 'ts',
          '20 minutes', partition_by => '{k}', aggregates => 'count(*) AS n, array_agg(seq) AS seqs',
          query => 'SELECT * FROM win_diff.sess ORDER BY seq')
$$;
CREATE VIEW sess_plain AS
WITH marked AS (
    SELECT *, CASE WHEN ts - lag(ts) OVER w <= interval '20 minutes' THEN 0 ELSE 1 END AS starts
      FROM win_diff.sess WINDOW w AS (PARTITION BY k ORDER BY ts, seq)),
numbered AS (SELECT *, sum(starts) OVER (PARTITION BY k ORDER BY ts, seq) AS sess FROM marked)
SELECT k, min(ts) AS ws, max(ts) + interval '20 minutes' AS we, count(*) AS n,
       array_agg(seq ORDER BY seq) AS seqs
  FROM numbered GROUP BY k, sess;
SET work_mem = '64MB';
SELECT * FROM compare('SELECT * FROM win_diff.sess_ours()', 'SELECT * FROM win_diff.sess_plain');
SELECT rows_spilled FROM last_call_stats();
SET work_mem = '256kB';
SELECT * FROM compare('SELECT * FROM win_diff.sess_ours()', 'SELECT * FROM win_diff.sess_plain');
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- HOP with counts and integer sums alone: at the end of the input each
-- window is made from the key's previous one (the slices that enter and
-- leave), not from all of its slices; sums of NULLs alone stay NULL.  Keys
-- divisible by 7 have NULL v in every even hour, so some windows count rows
-- but sum nothing.  Assert-enabled builds also combine every such window
-- slice by slice and compare.
CREATE TYPE sums_row AS (k int, window_start timestamp, window_end timestamp,
    n bigint, s bigint, c bigint, s2 bigint);
CREATE TABLE sparse AS
SELECT seq, k, ts, CASE WHEN k % 7 = 0 AND extract(hour FROM ts)::int % 2 = 0 THEN NULL ELSE v END AS v
  FROM gen WHERE seq % 4 = 0;
CREATE FUNCTION ours_sums(size interval, step interval, "offset" interval DEFAULT '0')
RETURNS SETOF sums_row LANGUAGE sql AS $$
    SELECT * FROM ptf.window_aggregate(NULL::win_diff.sparse, NULL::win_diff.sums_row, 'hop', 'ts',
        size, step, "offset", partition_by => '{k}',
        aggregates => 'count(*) AS n, sum(v) AS s, count(v) AS c, sum(v::smallint) AS s2',
        query => 'SELECT * FROM win_diff.sparse ORDER BY seq')
$$;
CREATE FUNCTION plain_sums(windows text) RETURNS text LANGUAGE sql AS $$
    SELECT format($q$SELECT k, ws, we, count(*) AS n, sum(v) AS s, count(v) AS c, sum(v::smallint) AS s2
                     FROM win_diff.sparse, LATERAL (%s) w(ws, we) GROUP BY k, ws, we$q$, windows)
$$;
SELECT count(*) FILTER (WHERE s IS NULL) > 0 AS some_sum_null,
       count(*) FILTER (WHERE s IS NULL AND n > 0) > 0 AS counted_but_null
  FROM win_diff.ours_sums('1 hour', '5 minutes');
SELECT * FROM compare($$SELECT * FROM win_diff.ours_sums('1 hour', '5 minutes')$$,
    win_diff.plain_sums($$SELECT date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes',
                                 date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes' + interval '1 hour'
                            FROM generate_series(0, 11) i$$));
SELECT * FROM compare($$SELECT * FROM win_diff.ours_sums('50 minutes', '20 minutes', '3 minutes')$$,
    win_diff.plain_sums($$SELECT ws, ws + interval '50 minutes'
                            FROM generate_series(0, 2) i,
                                 LATERAL (SELECT date_bin('20 minutes', ts, '2000-01-01 00:03') - i * interval '20 minutes') s(ws)
                           WHERE ts < ws + interval '50 minutes'$$));
-- windows shorter than their slide: rows between windows make slices no window holds
SELECT * FROM compare($$SELECT * FROM win_diff.ours_sums('5 minutes', '10 minutes')$$,
    win_diff.plain_sums($$SELECT ws, ws + interval '5 minutes'
                            FROM (SELECT date_bin('10 minutes', ts, '2000-01-01')) s(ws)
                           WHERE ts < ws + interval '5 minutes'$$));
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM win_diff.ours_sums('1 hour', '5 minutes')$$,
    win_diff.plain_sums($$SELECT date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes',
                                 date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes' + interval '1 hour'
                            FROM generate_series(0, 11) i$$));
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- Rows batched for prefetching: a state past the frame's threshold (2 MB)
-- of 16k keys over 8 hours in no order, and aggregates of plain columns
-- only, so that each row's inputs are copied from it (not projected), its
-- transitions all run inline, its key's hash and its slice come from the
-- prefetch's first stage and the later stages run over whole batches.
CREATE TYPE many_row AS (k int, window_start timestamp, window_end timestamp,
    n bigint, s bigint, c bigint, lo int);
CREATE TABLE many AS
SELECT i AS seq, CASE WHEN i % 101 = 0 THEN NULL ELSE hashint4(i) & 16383 END AS k,
       timestamp '2024-03-01' + ((hashint4(i * 7) & 1048575) % 28800) * interval '1 second' AS ts,
       CASE WHEN i % 13 = 0 THEN NULL ELSE hashint4(i * 3) % 1000 END AS v
  FROM generate_series(1, 150000) i;
CREATE FUNCTION ours_many(win text, size interval, step interval DEFAULT NULL)
RETURNS SETOF many_row LANGUAGE sql AS $$
    SELECT * FROM ptf.window_aggregate(NULL::win_diff.many, NULL::win_diff.many_row, win, 'ts',
        size, step, partition_by => '{k}',
        aggregates => 'count(*) AS n, sum(v) AS s, count(v) AS c, min(v) AS lo',
        query => 'SELECT * FROM win_diff.many ORDER BY seq')
$$;
SELECT * FROM compare($$SELECT * FROM win_diff.ours_many('tumble', '1 hour')$$,
    $$SELECT k, date_bin('1 hour', ts, '2000-01-01') AS ws, date_bin('1 hour', ts, '2000-01-01') + interval '1 hour' AS we,
             count(*) AS n, sum(v) AS s, count(v) AS c, min(v) AS lo
        FROM win_diff.many GROUP BY 1, 2, 3$$);
SELECT state_bytes > 4 * 1024 * 1024 AS batched FROM last_call_stats();
SELECT * FROM compare($$SELECT * FROM win_diff.ours_many('hop', '1 hour', '10 minutes')$$,
    $$SELECT k, ws, ws + interval '1 hour', count(*) AS n, sum(v) AS s, count(v) AS c, min(v) AS lo
        FROM win_diff.many,
             LATERAL (SELECT date_bin('10 minutes', ts, '2000-01-01') - i * interval '10 minutes'
                        FROM generate_series(0, 5) i) w(ws)
       GROUP BY 1, 2, 3$$);
-- the state spills past 3 MB, after its rows were batched
SET work_mem = '3MB';
SELECT * FROM compare($$SELECT * FROM win_diff.ours_many('tumble', '1 hour')$$,
    $$SELECT k, date_bin('1 hour', ts, '2000-01-01') AS ws, date_bin('1 hour', ts, '2000-01-01') + interval '1 hour' AS we,
             count(*) AS n, sum(v) AS s, count(v) AS c, min(v) AS lo
        FROM win_diff.many GROUP BY 1, 2, 3$$);
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- the TVFs: each row once per window, as the same joins
SELECT * FROM compare(
    $$SELECT (data).seq, window_start::timestamp, window_end::timestamp
        FROM ptf.hop(NULL::win_diff.gen, 'ts', '5 minutes', '1 hour',
                     query => 'SELECT * FROM win_diff.gen WHERE seq <= 25000')$$,
    $$SELECT seq, date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes' AS ws,
             date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes' + interval '1 hour' AS we
        FROM win_diff.gen, generate_series(0, 11) i WHERE seq <= 25000$$);
SELECT * FROM compare(
    $$SELECT (data).seq, window_start::timestamp, window_end::timestamp
        FROM ptf.cumulate(NULL::win_diff.gen, 'ts', '10 minutes', '1 hour', '5 minutes',
                          query => 'SELECT * FROM win_diff.gen')$$,
    $$SELECT seq, date_bin('1 hour', ts, '2000-01-01 00:05') AS ws,
             date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes' AS we
        FROM win_diff.gen, generate_series(1, 6) j
       WHERE date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes' > ts$$);

-- incrementally: a uid fed the rows in eight calls of six hours each, out of
-- order inside each call (a watermark delay of six hours: no row is late),
-- emits the windows its watermark closed, each once, equal to the plain
-- answer for those windows
CREATE TABLE fired (LIKE agg_row);
CREATE FUNCTION feed(part int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    INSERT INTO win_diff.fired
    SELECT * FROM ptf.window_aggregate(NULL::win_diff.gen, NULL::win_diff.agg_row, 'hop', 'ts',
        '1 hour', '5 minutes', partition_by => '{k}', uid => 'win-diff', watermark_delay => '6 hours',
        aggregates => 'count(*) AS n, sum(v) AS s, avg(price) AS a, max(v) AS mx,
                       count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f',
        query => format('SELECT * FROM win_diff.gen WHERE ts >= %L AND ts < %L ORDER BY seq',
                        timestamp '2024-03-01' + part * interval '6 hours',
                        timestamp '2024-03-01' + (part + 1) * interval '6 hours'));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
-- the first call closes no window yet
SELECT array_agg(feed(p) > 0 ORDER BY p) AS fired_some FROM generate_series(0, 7) p;
SELECT rows_in, rows_late FROM state WHERE uid = 'win-diff';
SELECT * FROM compare($$TABLE win_diff.fired$$,
    format($$SELECT * FROM (%s) p WHERE we <= %L$$,
           win_diff.plain(win_diff.hop_1h_5m()),
           (SELECT watermark::timestamp FROM state WHERE uid = 'win-diff')));
SELECT drop_state('win-diff');
-- CUMULATE the same way: a window's slices merge into the first as it fires, across calls
CREATE TABLE fired_cumulate (LIKE agg_row);
CREATE FUNCTION feed_cumulate(part int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    INSERT INTO win_diff.fired_cumulate
    SELECT * FROM ptf.window_aggregate(NULL::win_diff.gen, NULL::win_diff.agg_row, 'cumulate', 'ts',
        '1 hour', '10 minutes', "offset" => '5 minutes', partition_by => '{k}', uid => 'win-diff-cumulate',
        watermark_delay => '6 hours',
        aggregates => 'count(*) AS n, sum(v) AS s, avg(price) AS a, max(v) AS mx,
                       count(DISTINCT tag) AS d, count(*) FILTER (WHERE v > 50) AS f',
        query => format('SELECT * FROM win_diff.gen WHERE ts >= %L AND ts < %L ORDER BY seq',
                        timestamp '2024-03-01' + part * interval '6 hours',
                        timestamp '2024-03-01' + (part + 1) * interval '6 hours'));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
SELECT array_agg(feed_cumulate(p) > 0 ORDER BY p) AS fired_some FROM generate_series(0, 7) p;
SELECT * FROM compare($$TABLE win_diff.fired_cumulate$$,
    format($$SELECT * FROM (%s) p WHERE we <= %L$$,
           win_diff.plain($$SELECT date_bin('1 hour', ts, '2000-01-01 00:05'),
                                   date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes'
                              FROM generate_series(1, 6) j
                             WHERE date_bin('1 hour', ts, '2000-01-01 00:05') + j * interval '10 minutes' > ts$$),
           (SELECT watermark::timestamp FROM state WHERE uid = 'win-diff-cumulate')));
SELECT drop_state('win-diff-cumulate');

RESET search_path;
DROP SCHEMA win_diff CASCADE;
