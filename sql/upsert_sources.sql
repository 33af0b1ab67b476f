-- Upsert sources: tables under REPLICA IDENTITY DEFAULT (the default),
-- whose updates log no old row and whose deletes log only the key.
-- window_aggregate keeps the last row of each primary key (Flink's
-- ChangelogNormalize) so that updates and deletes retract whole rows;
-- temporal_join, whose build key is the build table's primary key, keeps
-- the time of each key's last row, at which a delete deletes.  Each is
-- checked against the same changes under REPLICA IDENTITY FULL.
CREATE SCHEMA ups;
SET search_path = ups, ptf, public;
SET TimeZone = 'UTC';

-- ---- window_aggregate ----

CREATE TABLE up_clicks (id int PRIMARY KEY, user_id int, ts timestamp, v int, note text);
-- long notes out of line, uncompressed: an update that keeps one logs no value for it
ALTER TABLE up_clicks ALTER note SET STORAGE EXTERNAL;
CREATE TABLE full_clicks (LIKE up_clicks INCLUDING ALL);
ALTER TABLE full_clicks REPLICA IDENTITY FULL;
CREATE TYPE per_minute AS (user_id int, window_start timestamp, window_end timestamp,
                           n bigint, total bigint, biggest int, notes bigint);
-- one call of each uid: the windows it closed, in order
CREATE FUNCTION pg_temp.windows(tbl regclass, uid text) RETURNS SETOF per_minute LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
        SELECT * FROM window_aggregate(NULL::%s, NULL::per_minute, 'tumble', 'ts', '1 minute',
            partition_by => '{user_id}', changes => true, uid => %L,
            watermark_delay => '10 minutes',
            aggregates => 'count(*) AS n, sum(v) AS total, max(v) AS biggest,
                           sum(length(note)) AS notes')
         ORDER BY window_start, user_id$q$, tbl, uid);
END $$;
-- the same changes to both tables
CREATE FUNCTION pg_temp.both(sql text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(sql, '@T', 'up_clicks');
    EXECUTE replace(sql, '@T', 'full_clicks');
END $$;

-- a row there before the stream begins (no snapshot): the stream never saw it
SELECT pg_temp.both($$INSERT INTO @T VALUES (100, 9, '2024-01-01 09:00', 1, 'old')$$);
SELECT * FROM pg_temp.windows('up_clicks', 'up');
SELECT * FROM pg_temp.windows('full_clicks', 'full');
SELECT pg_temp.both($$INSERT INTO @T
    SELECT g, g % 3, timestamp '2024-01-01 10:00' + g * interval '7 seconds', g, 'note ' || g
      FROM generate_series(1, 30) g$$);
-- updates of values, of the group, of the time (into another window), of the key;
-- deletes; the delete of the row the stream never saw
SELECT pg_temp.both($$UPDATE @T SET v = v * 100 WHERE id % 5 = 0 AND id < 100$$);
SELECT pg_temp.both($$UPDATE @T SET user_id = 7 WHERE id IN (3, 4)$$);
SELECT pg_temp.both($$UPDATE @T SET ts = ts + interval '2 minutes' WHERE id = 6$$);
SELECT pg_temp.both($$UPDATE @T SET id = id + 2000 WHERE id = 8$$);
SELECT pg_temp.both($$DELETE FROM @T WHERE id % 7 = 0 OR id = 100$$);
-- a TOASTed note an update leaves unchanged: completed from the kept row
SELECT pg_temp.both($$UPDATE @T SET note = repeat('x', 5000) WHERE id = 11$$);
SELECT pg_temp.both($$UPDATE @T SET v = -1 WHERE id = 11$$);
-- an update to the very same values changes nothing
SELECT pg_temp.both($$UPDATE @T SET v = v WHERE id = 12$$);
-- a later row closes the windows up to 10:04 (no change above was late)
SELECT pg_temp.both($$INSERT INTO @T VALUES (500, 1, '2024-01-01 10:14', 0, '')$$);

-- the windows closed, as under FULL, and as GROUP BY over the rows says
CREATE TEMP TABLE up_out AS SELECT * FROM pg_temp.windows('up_clicks', 'up');
CREATE TEMP TABLE full_out AS SELECT * FROM pg_temp.windows('full_clicks', 'full');
SELECT * FROM up_out ORDER BY window_start, user_id;
SELECT count(*) AS differ FROM ((TABLE up_out EXCEPT ALL TABLE full_out)
                                UNION ALL (TABLE full_out EXCEPT ALL TABLE up_out)) d;
SELECT count(*) AS differ FROM (
    (SELECT user_id, date_bin('1 minute', ts, '2024-01-01') AS ws,
            date_bin('1 minute', ts, '2024-01-01') + interval '1 minute' AS we,
            count(*), sum(v), max(v), sum(length(note))
       FROM up_clicks WHERE ts < '2024-01-01 10:04' GROUP BY 1, 2
     EXCEPT ALL TABLE up_out)
    UNION ALL
    (TABLE up_out EXCEPT ALL
     SELECT user_id, date_bin('1 minute', ts, '2024-01-01'),
            date_bin('1 minute', ts, '2024-01-01') + interval '1 minute',
            count(*), sum(v), max(v), sum(length(note))
       FROM up_clicks WHERE ts < '2024-01-01 10:04' GROUP BY 1, 2)) d;
-- the delete of the row never seen is passed over and counted, as is the
-- update that changed nothing (under FULL it retracts and adds back)
SELECT uid, rows_in, rows_out, rows_late, rows_skipped FROM state WHERE uid IN ('up', 'full') ORDER BY uid;
-- the kept rows are a state table of their own, named after the uid's
SELECT state_table AS up_table, state_table || '_images' AS up_images FROM state WHERE uid = 'up' \gset
SELECT count(*) AS kept_rows, count(*) FILTER (WHERE id = 2008) AS moved_key
  FROM (SELECT (state_row(image, NULL::up_clicks)).* FROM :up_images) r;
SELECT bytes > pg_total_relation_size(:'up_table') AS bytes_count_the_kept_rows FROM state WHERE uid = 'up';

-- a truncation forgets the kept rows; the windows keep what was truncated
-- (row 600), as under FULL, and a key inserted again (1) is new
SELECT pg_temp.both($$INSERT INTO @T VALUES (600, 1, '2024-01-01 10:05:30', 7, 'gone')$$);
SELECT pg_temp.both($$TRUNCATE @T$$);
SELECT pg_temp.both($$INSERT INTO @T VALUES (1, 1, '2024-01-01 10:05', 5, 'again'),
                                           (2, 2, '2024-01-01 10:05', 6, 'again')$$);
SELECT pg_temp.both($$UPDATE @T SET v = 50 WHERE id = 1$$);
SELECT pg_temp.both($$INSERT INTO @T VALUES (501, 1, '2024-01-01 10:19', 0, '')$$);
SELECT * FROM pg_temp.windows('up_clicks', 'up');
SELECT * FROM pg_temp.windows('full_clicks', 'full');

-- snapshot => true fills the kept rows from the table: its rows' updates
-- and deletes retract them
CREATE TABLE snap_clicks (id int PRIMARY KEY, user_id int, ts timestamp, v int, note text);
INSERT INTO snap_clicks SELECT g, g % 2, timestamp '2024-01-01 10:00' + g * interval '10 seconds', g, 'n'
  FROM generate_series(1, 12) g;
CREATE FUNCTION pg_temp.snap() RETURNS SETOF per_minute LANGUAGE sql AS $$
    SELECT * FROM window_aggregate(NULL::snap_clicks, NULL::per_minute, 'tumble', 'ts', '1 minute',
        partition_by => '{user_id}', changes => true, uid => 'snap', snapshot => true,
        watermark_delay => '10 minutes',
        aggregates => 'count(*) AS n, sum(v) AS total, max(v) AS biggest, sum(length(note)) AS notes')
     ORDER BY window_start, user_id
$$;
SELECT * FROM pg_temp.snap();
UPDATE snap_clicks SET v = 1000 WHERE id = 2;
UPDATE snap_clicks SET user_id = 5 WHERE id = 9;
DELETE FROM snap_clicks WHERE id IN (3, 4);
INSERT INTO snap_clicks VALUES (99, 0, '2024-01-01 11:00', 0, '');
-- the kept rows read key by key, and evicted past the memory limit, as any state
SET ptf.state_load = probe;
SET ptf.state_memory_limit = '64kB';
SELECT * FROM pg_temp.snap();
SELECT state_load, keys_probed > 0 AS probed FROM ptf.last_call_stats();
RESET ptf.state_load;
RESET ptf.state_memory_limit;
SELECT user_id, date_bin('1 minute', ts, '2024-01-01') AS window_start, count(*), sum(v), max(v)
  FROM snap_clicks WHERE id < 99 GROUP BY 1, 2 ORDER BY 2, 1;
SELECT rows_skipped FROM state WHERE uid = 'snap';

-- a uid reads its source one way: the choice is part of its state
ALTER TABLE snap_clicks REPLICA IDENTITY FULL;
\set VERBOSITY default
SELECT * FROM window_aggregate(NULL::snap_clicks, NULL::per_minute, 'tumble', 'ts', '1 minute',
    partition_by => '{user_id}', changes => true, uid => 'snap',
    aggregates => 'count(*) AS n, sum(v) AS total, max(v) AS biggest, sum(length(note)) AS notes');
-- a table that logs no key is refused before anything is read (no slot is made)
CREATE TABLE keyless (user_id int, ts timestamp, v int, note text, id int);
SELECT * FROM window_aggregate(NULL::keyless, NULL::per_minute, 'tumble', 'ts', '1 minute',
    partition_by => '{user_id}', changes => true, uid => 'keyless',
    aggregates => 'count(*) AS n, sum(v) AS total, max(v) AS biggest, sum(length(note)) AS notes');
\set VERBOSITY terse
SELECT count(*) FROM state WHERE uid = 'keyless';

-- dropping the uid drops its kept rows with its state
SELECT drop_state('up');
SELECT to_regclass(:'up_images') IS NULL AS images_gone;

-- ---- temporal_join ----

CREATE TABLE orders (id int PRIMARY KEY, cur text, ts timestamp);
CREATE TABLE up_rates (cur text PRIMARY KEY, rate int, ts timestamp);
CREATE TABLE full_rates (LIKE up_rates INCLUDING ALL);
ALTER TABLE full_rates REPLICA IDENTITY FULL;
CREATE FUNCTION pg_temp.joined(tbl regclass, uid text)
    RETURNS TABLE (id int, ts timestamp, cur text, rate int, rate_ts timestamp) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
        SELECT (probe).id, (probe).ts, (build).cur, (build).rate, (build).ts
          FROM temporal_join(NULL::orders, NULL::%s, 'ts', 'ts', '{cur}', join_type => 'left',
                             watermark_delay => '1 hour', changes => true, uid => %L)
         ORDER BY 1$q$, tbl, uid);
END $$;
CREATE FUNCTION pg_temp.rates(sql text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(sql, '@T', 'up_rates');
    EXECUTE replace(sql, '@T', 'full_rates');
END $$;

-- a rate there before the stream begins: its delete is passed over
SELECT pg_temp.rates($$INSERT INTO @T VALUES ('gbp', 9, '2024-01-01 09:00')$$);
SELECT * FROM pg_temp.joined('up_rates', 'tj_up');
SELECT * FROM pg_temp.joined('full_rates', 'tj_full');
SELECT pg_temp.rates($$INSERT INTO @T VALUES ('eur', 1, '2024-01-01 10:00'), ('usd', 5, '2024-01-01 10:00')$$);
SELECT pg_temp.rates($$UPDATE @T SET rate = 2, ts = '2024-01-01 11:00' WHERE cur = 'eur'$$);
-- updated back to an earlier time, then deleted: deleted at that earlier
-- time (the key's last row), not at the newest version's
SELECT pg_temp.rates($$UPDATE @T SET rate = 3, ts = '2024-01-01 10:30' WHERE cur = 'eur'$$);
SELECT pg_temp.rates($$DELETE FROM @T WHERE cur IN ('eur', 'gbp')$$);
SELECT pg_temp.rates($$UPDATE @T SET rate = 6, ts = '2024-01-01 12:00' WHERE cur = 'usd'$$);
SELECT pg_temp.rates($$DELETE FROM @T WHERE cur = 'usd'$$);
SELECT pg_temp.rates($$INSERT INTO @T VALUES ('eur', 7, '2024-01-01 13:00')$$);
INSERT INTO orders VALUES (1, 'eur', '2024-01-01 10:15'), (2, 'eur', '2024-01-01 10:45'),
    (3, 'eur', '2024-01-01 11:15'), (4, 'usd', '2024-01-01 10:20'), (5, 'usd', '2024-01-01 12:30'),
    (6, 'eur', '2024-01-01 13:30'), (7, 'gbp', '2024-01-01 12:10');
-- the rates' watermark moves past the orders
SELECT pg_temp.rates($$INSERT INTO @T VALUES ('chf', 1, '2024-01-01 16:00')$$);
INSERT INTO orders VALUES (8, 'chf', '2024-01-01 16:00');
CREATE TEMP TABLE tj_up_out AS SELECT * FROM pg_temp.joined('up_rates', 'tj_up');
CREATE TEMP TABLE tj_full_out AS SELECT * FROM pg_temp.joined('full_rates', 'tj_full');
SELECT * FROM tj_up_out ORDER BY id;
SELECT count(*) AS differ FROM ((TABLE tj_up_out EXCEPT ALL TABLE tj_full_out)
                                UNION ALL (TABLE tj_full_out EXCEPT ALL TABLE tj_up_out)) d;
SELECT uid, rows_skipped FROM state WHERE uid IN ('tj_up', 'tj_full') ORDER BY uid;

-- snapshot => true: the rates' rows give each key its last row
CREATE TABLE snap_orders (LIKE orders);
CREATE TABLE snap_rates (cur text PRIMARY KEY, rate int, ts timestamp);
INSERT INTO snap_rates VALUES ('eur', 1, '2024-01-01 10:00');
UPDATE snap_rates SET rate = 2, ts = '2024-01-01 09:00';
CREATE FUNCTION pg_temp.snap_join() RETURNS TABLE (id int, rate int) LANGUAGE sql AS $$
    SELECT (probe).id, (build).rate FROM temporal_join(NULL::snap_orders, NULL::snap_rates, 'ts', 'ts',
        '{cur}', join_type => 'left', changes => true, uid => 'tj_snap', snapshot => true,
        watermark_delay => '1 hour') ORDER BY 1
$$;
SELECT * FROM pg_temp.snap_join();
-- deleted at 09:00, the time of the row the snapshot read (a delete of a
-- key never seen would be passed over, leaving rate 2 from 09:00 on)
DELETE FROM snap_rates;
INSERT INTO snap_rates VALUES ('zzz', 0, '2024-01-01 17:00');
INSERT INTO snap_orders VALUES (1, 'eur', '2024-01-01 08:30'), (2, 'eur', '2024-01-01 09:30'),
    (3, 'eur', '2024-01-01 10:30'), (4, 'zzz', '2024-01-01 17:00');
SELECT * FROM pg_temp.snap_join();
SELECT rows_skipped FROM state WHERE uid = 'tj_snap';

-- the build key must be the primary key: another key names no row's time
CREATE TABLE id_rates (id int PRIMARY KEY, cur text, rate int, ts timestamp);
\set VERBOSITY default
SELECT * FROM temporal_join(NULL::orders, NULL::id_rates, 'ts', 'ts', '{cur}',
    changes => true, uid => 'tj_id');
\set VERBOSITY terse
SELECT count(*) FROM state WHERE uid = 'tj_id';

-- ---- keys stored out of line ----
-- PostgreSQL logs the old key of every update of a row whose key is out of
-- line (the 1920-byte ones here), changed or not, and the new row holds the
-- unchanged key as a TOAST pointer: such an update keeps its key, which is
-- taken from the old key, never from the table's TOAST (where the key of a
-- row deleted before the stream reads it is gone).  As under FULL.
CREATE TABLE lk_clicks (id text PRIMARY KEY, user_id int, ts timestamp, v int,
                        note text DEFAULT md5('x') || md5('y') || md5('z') || md5('w'));
CREATE TABLE lk_full (LIKE lk_clicks INCLUDING ALL);
ALTER TABLE lk_full REPLICA IDENTITY FULL;
-- the same statement on a table and on its REPLICA IDENTITY FULL twin (@T)
CREATE FUNCTION pg_temp.on_both(a text, b text, sql text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE replace(sql, '@T', a);
    EXECUTE replace(sql, '@T', b);
END $$;
SELECT count(*) FROM pg_temp.windows('lk_clicks', 'lk');
SELECT count(*) FROM pg_temp.windows('lk_full', 'lk_full');
SELECT pg_temp.on_both('lk_clicks', 'lk_full', $$INSERT INTO @T
    SELECT (SELECT string_agg(md5(g::text || j), '') FROM generate_series(1, 1 + g % 60) j), g % 3,
           timestamp '2024-01-02 10:00' + g * interval '7 seconds', g
      FROM generate_series(0, 239) g$$);
SELECT count(*) FROM pg_temp.windows('lk_clicks', 'lk');
SELECT count(*) FROM pg_temp.windows('lk_full', 'lk_full');
SELECT pg_temp.on_both('lk_clicks', 'lk_full', $$UPDATE @T SET v = v * 100 WHERE v % 5 = 0 OR (v % 60 = 59 AND v > 60)$$);
SELECT pg_temp.on_both('lk_clicks', 'lk_full', $$DELETE FROM @T WHERE v % 7 = 0 OR v IN (2300, 11900, 23900)$$);
SELECT pg_temp.on_both('lk_clicks', 'lk_full', $$UPDATE @T SET id = id || 'x' WHERE v = 59$$);
SELECT pg_temp.on_both('lk_clicks', 'lk_full', $$INSERT INTO @T VALUES ('late', 1, '2024-01-02 11:00', 0)$$);
CREATE TEMP TABLE lk_out AS SELECT * FROM pg_temp.windows('lk_clicks', 'lk');
CREATE TEMP TABLE lk_full_out AS SELECT * FROM pg_temp.windows('lk_full', 'lk_full');
SELECT count(*) AS windows, sum(n) AS n, sum(total) AS total,
       (SELECT count(*) FROM ((TABLE lk_out EXCEPT ALL TABLE lk_full_out)
                              UNION ALL (TABLE lk_full_out EXCEPT ALL TABLE lk_out)) d) AS differ
  FROM lk_out;
SELECT uid, rows_skipped FROM state WHERE uid IN ('lk', 'lk_full') ORDER BY uid;
-- the build side of a temporal join: the new row is whole, its key from the old key
CREATE TABLE lk_rates (cur text PRIMARY KEY, rate int, ts timestamp,
                       pad text DEFAULT md5('x') || md5('y') || md5('z') || md5('w'));
CREATE TABLE lk_rates_full (LIKE lk_rates INCLUDING ALL);
ALTER TABLE lk_rates_full REPLICA IDENTITY FULL;
SELECT count(*) FROM pg_temp.joined('lk_rates', 'tj_lk');
SELECT count(*) FROM pg_temp.joined('lk_rates_full', 'tj_lk_full');
SELECT pg_temp.on_both('lk_rates', 'lk_rates_full', $$INSERT INTO @T VALUES
    ((SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j), 1, '2024-01-02 10:00')$$);
SELECT pg_temp.on_both('lk_rates', 'lk_rates_full', $$UPDATE @T SET rate = 2, ts = '2024-01-02 11:00'$$);
SELECT pg_temp.on_both('lk_rates', 'lk_rates_full', $$UPDATE @T SET rate = 3, ts = '2024-01-02 10:30'$$);
SELECT pg_temp.on_both('lk_rates', 'lk_rates_full', $$DELETE FROM @T$$);
INSERT INTO orders SELECT 100 + i, (SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j), t
  FROM unnest(ARRAY[timestamp '2024-01-02 10:15', '2024-01-02 10:45', '2024-01-02 11:15']) WITH ORDINALITY AS o (t, i);
SELECT pg_temp.on_both('lk_rates', 'lk_rates_full', $$INSERT INTO @T VALUES ('chf', 1, '2024-01-02 16:00')$$);
INSERT INTO orders VALUES (104, 'chf', '2024-01-02 16:00');
SELECT id, length(cur), rate FROM pg_temp.joined('lk_rates', 'tj_lk');
SELECT id, length(cur), rate FROM pg_temp.joined('lk_rates_full', 'tj_lk_full');

SELECT drop_state(uid) FROM state ORDER BY uid;
SET client_min_messages = warning;
DROP SCHEMA ups CASCADE;
RESET client_min_messages;
