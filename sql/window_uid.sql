-- Window aggregates as streams (uid): state carried across calls and
-- rolled back with the caller's transaction; updating input retracted with
-- the aggregates' inverse functions; the idle rule.
SET search_path = ptf, public;
SET TimeZone = 'UTC';

CREATE TABLE clicks (user_id int, url text, ts timestamp, ms int);
CREATE TYPE per_user AS (user_id int, window_start timestamp, window_end timestamp,
    n bigint, avg_ms numeric, urls text[], distinct_urls bigint, sd numeric);
CREATE FUNCTION pg_temp.run(uid text, rows text) RETURNS SETOF per_user LANGUAGE sql AS $$
    SELECT * FROM window_aggregate(NULL::clicks, NULL::per_user, 'hop', 'ts', '10 minutes', '5 minutes',
        partition_by => '{user_id}', uid => uid, query => rows,
        aggregates => $a$count(*) AS n, avg(ms) AS avg_ms, array_agg(url ORDER BY url) AS urls,
            count(DISTINCT url) AS distinct_urls, round(stddev(ms), 2) AS sd$a$)
     ORDER BY window_end, user_id
$$;

-- slices, aggregate states of every kind (internal avg and stddev states through their
-- serial functions, kept rows for array_agg and DISTINCT) carry over between calls
SELECT * FROM pg_temp.run('clicks', $$VALUES (1, 'a', timestamp '2024-01-01 10:01', 10),
    (1, 'b', timestamp '2024-01-01 10:02', 20), (2, 'a', timestamp '2024-01-01 10:03', 30)$$);
SELECT keys, watermark, rows_in, rows_out FROM state WHERE uid = 'clicks';
SELECT state_table AS clicks_table FROM state WHERE uid = 'clicks' \gset
SELECT user_id, ns_space, ns IS NOT NULL AS has_ns, nrows, states IS NOT NULL AS states,
       inputs IS NOT NULL AS inputs
  FROM :clicks_table ORDER BY 1, 2 NULLS FIRST, ns;
SELECT * FROM pg_temp.run('clicks', $$VALUES (1, 'a', timestamp '2024-01-01 10:06', 30),
    (2, 'c', timestamp '2024-01-01 10:07', 50)$$);
SELECT * FROM pg_temp.run('clicks', $$VALUES (1, 'z', timestamp '2024-01-01 10:16', 1)$$);
-- the same without a uid, all at once, for comparison (the end of input fires all)
SELECT * FROM window_aggregate(NULL::clicks, NULL::per_user, 'hop', 'ts', '10 minutes', '5 minutes',
    partition_by => '{user_id}',
    query => $$VALUES (1, 'a', timestamp '2024-01-01 10:01', 10), (1, 'b', timestamp '2024-01-01 10:02', 20),
        (2, 'a', timestamp '2024-01-01 10:03', 30), (1, 'a', timestamp '2024-01-01 10:06', 30),
        (2, 'c', timestamp '2024-01-01 10:07', 50), (1, 'z', timestamp '2024-01-01 10:16', 1)$$,
    aggregates => $a$count(*) AS n, avg(ms) AS avg_ms, array_agg(url ORDER BY url) AS urls,
        count(DISTINCT url) AS distinct_urls, round(stddev(ms), 2) AS sd$a$)
 WHERE window_end <= '2024-01-01 10:15' ORDER BY window_end, user_id;

-- a call that rolls back leaves the state as it was: its windows fire again
BEGIN;
SELECT * FROM pg_temp.run('clicks', $$VALUES (3, 'x', timestamp '2024-01-01 10:30', 1)$$);
ROLLBACK;
SELECT * FROM pg_temp.run('clicks', $$VALUES (3, 'x', timestamp '2024-01-01 10:30', 1)$$);
SELECT keys, watermark, rows_in, rows_out FROM state WHERE uid = 'clicks';

-- sessions merge across calls: the row of the second call bridges two sessions
CREATE TYPE sess AS (user_id int, window_start timestamp, window_end timestamp, n bigint, total bigint);
CREATE FUNCTION pg_temp.sess(rows text) RETURNS SETOF sess LANGUAGE sql AS $$
    SELECT * FROM window_aggregate(NULL::clicks, NULL::sess, 'session', 'ts', '10 minutes',
        partition_by => '{user_id}', uid => 'sessions', watermark_delay => '30 minutes',
        aggregates => 'count(*) AS n, sum(ms) AS total', query => rows)
$$;
SELECT * FROM pg_temp.sess($$VALUES (1, 'a', timestamp '2024-01-01 10:00', 1), (1, 'b', timestamp '2024-01-01 10:18', 2)$$);
-- [10:08, 10:18) touches [10:00, 10:10) and [10:18, 10:28): one session [10:00, 10:28)
SELECT * FROM pg_temp.sess($$VALUES (1, 'c', timestamp '2024-01-01 10:08', 4)$$);
SELECT * FROM pg_temp.sess($$VALUES (2, 'd', timestamp '2024-01-01 11:30', 8)$$);

-- updating input: a change stream's updates and deletes retract rows with the
-- aggregates' inverse transition functions; windows whose rows all went are not emitted
CREATE TABLE orders (id int PRIMARY KEY, shop text, amount numeric, ts timestamp);
ALTER TABLE orders REPLICA IDENTITY FULL;
CREATE TYPE shop_total AS (shop text, window_start timestamp, window_end timestamp, n bigint,
    total numeric, avg_amount numeric);
CREATE FUNCTION pg_temp.shops() RETURNS SETOF shop_total LANGUAGE sql AS $$
    SELECT * FROM window_aggregate(NULL::orders, NULL::shop_total, 'tumble', 'ts', '1 hour',
        partition_by => '{shop}', uid => 'shops', changes => true, watermark_delay => '1 hour',
        aggregates => 'count(*) AS n, sum(amount) AS total, avg(amount) AS avg_amount')
     ORDER BY window_end, shop
$$;
SELECT * FROM pg_temp.shops();
INSERT INTO orders VALUES (1, 'x', 10.50, '2024-01-01 10:10'), (2, 'x', 1.25, '2024-01-01 10:20'),
    (3, 'y', 7, '2024-01-01 10:30'), (4, 'z', 2, '2024-01-01 10:40');
UPDATE orders SET amount = 11 WHERE id = 1;        -- -U 10.50, +U 11
DELETE FROM orders WHERE id = 2;                   -- 1.25 goes (numeric's inverse cannot take
                                                   -- it back alone: the window is recomputed)
DELETE FROM orders WHERE id = 4;                   -- z's only row: its window is empty
UPDATE orders SET ts = '2024-01-01 11:05' WHERE id = 3;   -- moves to the next window
SELECT * FROM pg_temp.shops();
INSERT INTO orders VALUES (5, 'x', 100, '2024-01-01 12:30');
SELECT * FROM pg_temp.shops();
INSERT INTO orders VALUES (6, 'y', 1, '2024-01-01 13:30');
SELECT * FROM pg_temp.shops();
SELECT rows_in, rows_out, rows_late, rows_skipped FROM state WHERE uid = 'shops';
-- the same changes as a (kind, data) query, one-shot
SELECT * FROM window_aggregate(NULL::orders, NULL::shop_total, 'tumble', 'ts', '1 hour',
    partition_by => '{shop}', aggregates => 'count(*) AS n, sum(amount) AS total, avg(amount) AS avg_amount',
    query => $$SELECT k, o FROM (VALUES (1, '+I', ROW(1, 'x', 10.50, '2024-01-01 10:10')::orders),
        (2, '+I', ROW(2, 'x', 1.25, '2024-01-01 10:20')::orders), (3, '-U', ROW(1, 'x', 10.50, '2024-01-01 10:10')::orders),
        (4, '+U', ROW(1, 'x', 11, '2024-01-01 10:10')::orders), (5, '-D', ROW(2, 'x', 1.25, '2024-01-01 10:20')::orders),
        (6, '-D', ROW(9, 'x', 5, '2024-01-01 10:20')::orders)) v(o_, k, o) ORDER BY o_$$);
-- (the -D of id 9, a row never added, takes nothing out)
SELECT rows_in, rows_out FROM last_call_stats();

-- a change stream's updates and deletes need whole old rows: REPLICA IDENTITY FULL,
-- or a key to find the last row by (sql/upsert_sources.sql), asked for before
-- anything is read (no slot is made)
CREATE TABLE plain_orders (id int, shop text, amount numeric, ts timestamp);
\set VERBOSITY default
SELECT * FROM window_aggregate(NULL::plain_orders, NULL::shop_total, 'tumble', 'ts', '1 hour',
    partition_by => '{shop}', uid => 'plain', changes => true,
    aggregates => 'count(*) AS n, sum(amount) AS total, avg(amount) AS avg_amount');
\set VERBOSITY terse
SELECT count(*) FROM state WHERE uid = 'plain';

-- SESSION over updating input: sessions keep their rows; a row taken back leaves its
-- session regrouped -- split in two, shortened, or gone
CREATE TABLE visits (id int PRIMARY KEY, usr text, ts timestamp);
ALTER TABLE visits REPLICA IDENTITY FULL;
CREATE TYPE visit_session AS (usr text, window_start timestamp, window_end timestamp, n bigint,
    ids text);
CREATE FUNCTION pg_temp.visits() RETURNS SETOF visit_session LANGUAGE sql AS $$
    SELECT * FROM window_aggregate(NULL::visits, NULL::visit_session, 'session', 'ts', '10 minutes',
        partition_by => '{usr}', uid => 'visits', changes => true, watermark_delay => '1 hour',
        aggregates => $a$count(*) AS n, string_agg(id::text, ',' ORDER BY id) AS ids$a$)
     ORDER BY usr, window_start
$$;
SELECT * FROM pg_temp.visits();
-- a: 10:00, 10:08, 10:16 -- one session while 10:08 bridges; b: 10:00, 10:05
INSERT INTO visits VALUES (1, 'a', '2024-01-01 10:00'), (2, 'a', '2024-01-01 10:08'),
    (3, 'a', '2024-01-01 10:16'), (4, 'b', '2024-01-01 10:00'), (5, 'b', '2024-01-01 10:05');
DELETE FROM visits WHERE id = 2;                          -- a splits: [10:00, 10:10), [10:16, 10:26)
UPDATE visits SET ts = '2024-01-01 09:58' WHERE id = 5;   -- b: [09:58, 10:10) from 09:58 and 10:00
INSERT INTO visits VALUES (6, 'c', '2024-01-01 10:30');
DELETE FROM visits WHERE id = 6;                          -- c: its only row gone, no session
INSERT INTO visits VALUES (9, 'z', '2024-01-01 12:00');   -- the watermark moves to 11:00
SELECT * FROM pg_temp.visits();
SELECT rows_in, rows_out, rows_late, rows_skipped FROM state WHERE uid = 'visits';
-- the same changes one-shot, as a (kind, data) query
SELECT * FROM window_aggregate(NULL::visits, NULL::visit_session, 'session', 'ts', '10 minutes',
    partition_by => '{usr}', aggregates => $a$count(*) AS n, string_agg(id::text, ',' ORDER BY id) AS ids$a$,
    query => $$SELECT k, v FROM (VALUES
        (1, '+I', ROW(1, 'a', '2024-01-01 10:00')::visits), (2, '+I', ROW(2, 'a', '2024-01-01 10:08')::visits),
        (3, '+I', ROW(3, 'a', '2024-01-01 10:16')::visits), (4, '-D', ROW(2, 'a', '2024-01-01 10:08')::visits),
        (5, '-D', ROW(7, 'a', '2024-01-01 10:03')::visits)) x(o, k, v) ORDER BY o$$)
 ORDER BY usr, window_start;

-- what a uid's states are depends on whether its input is updating: the other kind is refused
SELECT count(*) FROM window_aggregate(NULL::orders, NULL::shop_total, 'tumble', 'ts', '1 hour',
    partition_by => '{shop}', uid => 'mode', aggregates => 'count(*) AS n, sum(amount) AS total, avg(amount) AS avg_amount',
    query => $$VALUES (1, 'x', 1.0, timestamp '2024-01-01 10:00')$$);
SELECT count(*) FROM window_aggregate(NULL::orders, NULL::shop_total, 'tumble', 'ts', '1 hour',
    partition_by => '{shop}', uid => 'mode', aggregates => 'count(*) AS n, sum(amount) AS total, avg(amount) AS avg_amount',
    query => $$SELECT '+I', ROW(2, 'x', 2.0, timestamp '2024-01-01 10:10')::orders$$);
SELECT drop_state('mode');
-- sessions over retractions spill like the rest: 20000 users' rows in and out again, at
-- work_mem 64kB, leave no session
SET work_mem = '64kB';
SELECT count(*) FROM window_aggregate(NULL::visits, NULL::visit_session, 'session', 'ts', '10 minutes',
    partition_by => '{usr}', aggregates => $a$count(*) AS n, string_agg(id::text, ',' ORDER BY id) AS ids$a$,
    query => $$SELECT k, ROW(g, 'u' || g, timestamp '2024-01-01 10:00' + g * interval '1 second')::visits
                 FROM generate_series(1, 20000) g, (VALUES (1, '+I'), (2, '-D')) x(o, k) ORDER BY o, g$$);
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- the idle rule: with idle_timeout, a quiet source's watermark moves on with
-- processing time (here ptf.debug_clock), so its last windows close
CREATE TABLE readings (sensor int, ts timestamp, v int, pt timestamptz);
CREATE TYPE per_sensor AS (sensor int, window_end timestamp, n bigint);
CREATE FUNCTION pg_temp.idle(rows text) RETURNS SETOF per_sensor LANGUAGE sql AS $$
    SELECT * FROM window_aggregate(NULL::readings, NULL::per_sensor, 'tumble', 'ts', '1 minute',
        partition_by => '{sensor}', uid => 'idle', watermark_delay => '10 seconds',
        idle_timeout => '30 seconds', aggregates => 'count(*) AS n', query => rows)
$$;
SET ptf.debug_clock = '2024-01-01 12:00:00+00';
SELECT * FROM pg_temp.idle($$VALUES (1, timestamp '2024-01-01 10:00:05', 1, NULL::timestamptz),
    (1, timestamp '2024-01-01 10:00:40', 1, NULL)$$);
-- 20 s later, nothing new: not idle long enough
SET ptf.debug_clock = '2024-01-01 12:00:20+00';
SELECT * FROM pg_temp.idle($$SELECT * FROM readings WHERE false$$);
-- 60 s after the last row: the watermark is 10:00:30 + (60 - 30) s = 10:01:00, the
-- window [10:00, 10:01) closes
SET ptf.debug_clock = '2024-01-01 12:01:00+00';
SELECT * FROM pg_temp.idle($$SELECT * FROM readings WHERE false$$);
SELECT watermark FROM state WHERE uid = 'idle';
RESET ptf.debug_clock;

-- the aggregates' states are of the source's column types: a column that changed type
-- is refused (a sum(int4)'s int8 read as float8 came out as 2.5e-323); one added is not
CREATE TABLE typed (id int PRIMARY KEY, ts timestamp, v int);
ALTER TABLE typed REPLICA IDENTITY FULL;
CREATE TYPE typed_out AS (window_start timestamp, window_end timestamp, total float8);
SELECT * FROM window_aggregate(NULL::typed, NULL::typed_out, 'tumble', 'ts', '10 minutes',
    aggregates => 'sum(v)::float8 AS total', changes => true, uid => 'typed');
INSERT INTO typed VALUES (1, '2024-01-01 00:01', 5);
SELECT * FROM window_aggregate(NULL::typed, NULL::typed_out, 'tumble', 'ts', '10 minutes',
    aggregates => 'sum(v)::float8 AS total', changes => true, uid => 'typed');
ALTER TABLE typed ADD COLUMN note text;
ALTER TABLE typed ALTER COLUMN v TYPE float8;
INSERT INTO typed VALUES (2, '2024-01-01 00:20', 7);
\set VERBOSITY terse
SELECT * FROM window_aggregate(NULL::typed, NULL::typed_out, 'tumble', 'ts', '10 minutes',
    aggregates => 'sum(v)::float8 AS total', changes => true, uid => 'typed');
\set VERBOSITY default
SELECT drop_state('typed');
DROP TABLE typed;
DROP TYPE typed_out;

-- last_call_stats() shows a call to the role that made it: a pipeline worker runs steps
-- of several owners, whose arguments may call it
SELECT count(*) FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}');
SELECT function, rows_in FROM last_call_stats();
CREATE ROLE regress_ptf_stats_other;
SET ROLE regress_ptf_stats_other;
SELECT function, rows_in FROM ptf.last_call_stats();
RESET ROLE;
SELECT function, rows_in FROM last_call_stats();
DROP ROLE regress_ptf_stats_other;

SELECT count(drop_state(uid)) FROM state;
DROP TABLE clicks, orders, readings, plain_orders, visits;
