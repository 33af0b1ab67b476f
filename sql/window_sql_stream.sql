-- Flink's SQL as written over a change stream (doc/design.md §8): a TVF + GROUP BY with
-- changes => true and a uid is the window aggregate of that uid -- each window
-- once, whole, when the watermark passes its end, across calls, exactly once, late
-- rows counted, updates and deletes retracted -- equal to ptf.window_aggregate
-- over the same stream; Window Top-N emits each window's first rows once.
SET search_path = ptf, public;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';

CREATE TABLE clicks (id int PRIMARY KEY, user_id int, url text, ts timestamp, ms int);
ALTER TABLE clicks REPLICA IDENTITY FULL;
CREATE TYPE per_user AS (window_start timestamptz, window_end timestamptz, user_id int,
                         n bigint, total bigint, urls text[]);

-- one step of both streams: the SQL form's rows, and whether window_aggregate's are the same
CREATE FUNCTION pg_temp.step() RETURNS TABLE (window_start timestamptz, window_end timestamptz,
    user_id int, n bigint, total bigint, urls text[], same_as_function boolean)
LANGUAGE plpgsql AS $$
BEGIN
    CREATE TEMP TABLE planned AS
    SELECT h.window_start, h.window_end, (h.data).user_id, count(*) AS n, sum((h.data).ms) AS total,
           array_agg((h.data).url ORDER BY (h.data).url) AS urls
      FROM ptf.hop(NULL::clicks, 'ts', '5 minutes', '10 minutes', uid => 'sql', changes => true) h
     GROUP BY 1, 2, 3;
    CREATE TEMP TABLE fn AS
    SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::per_user, 'hop', 'ts', '10 minutes', '5 minutes',
        partition_by => '{user_id}', uid => 'fn', changes => true,
        aggregates => 'count(*) AS n, sum(ms) AS total, array_agg(url ORDER BY url) AS urls');
    RETURN QUERY SELECT p.*, NOT EXISTS ((TABLE planned EXCEPT ALL TABLE fn) UNION ALL (TABLE fn EXCEPT ALL TABLE planned))
      FROM planned p ORDER BY 2, 3;
    DROP TABLE planned, fn;
END $$;

EXPLAIN (COSTS OFF)
SELECT window_start, window_end, (data).user_id, count(*)
  FROM hop(NULL::clicks, 'ts', '5 minutes', '10 minutes', uid => 'sql', changes => true) GROUP BY 1, 2, 3;

-- the first call of a uid starts its stream (in a transaction that has not written)
SELECT window_start, window_end, (data).user_id, count(*), sum((data).ms), array_agg((data).url ORDER BY (data).url)
  FROM hop(NULL::clicks, 'ts', '5 minutes', '10 minutes', uid => 'sql', changes => true) GROUP BY 1, 2, 3;
SELECT * FROM window_aggregate(NULL::clicks, NULL::per_user, 'hop', 'ts', '10 minutes', '5 minutes',
    partition_by => '{user_id}', uid => 'fn', changes => true,
    aggregates => 'count(*) AS n, sum(ms) AS total, array_agg(url ORDER BY url) AS urls');
INSERT INTO clicks VALUES (1, 1, 'a', '2024-01-01 10:01', 10), (2, 1, 'b', '2024-01-01 10:02', 20),
                          (3, 2, 'a', '2024-01-01 10:04', 30);
-- no window has ended yet (the watermark is the greatest time: no delay declared)
SELECT * FROM pg_temp.step();
INSERT INTO clicks VALUES (4, 1, 'c', '2024-01-01 10:06', 40), (5, 2, 'a', '2024-01-01 10:08', 50);
-- [09:55, 10:05) fires, whole: rows of two calls
SELECT * FROM pg_temp.step();
INSERT INTO clicks VALUES (6, 3, 'z', '2024-01-01 10:16', 60);
-- a step that rolls back emits nothing for good: the next one emits the same
BEGIN;
SELECT * FROM pg_temp.step();
ROLLBACK;
SELECT * FROM pg_temp.step();
SELECT * FROM pg_temp.step();
-- late: every window holding 10:03 has fired; 10:12 still goes to [10:10, 10:20)
INSERT INTO clicks VALUES (7, 1, 'late', '2024-01-01 10:03', 70), (8, 1, 'd', '2024-01-01 10:12', 80);
SELECT * FROM pg_temp.step();
SELECT uid, function, rows_in, rows_out, rows_late FROM state WHERE uid IN ('sql', 'fn') ORDER BY uid;
-- updates and deletes take their rows out of windows not fired yet
UPDATE clicks SET ms = 800, url = 'e' WHERE id = 8;
DELETE FROM clicks WHERE id = 6;
INSERT INTO clicks VALUES (9, 2, 'f', '2024-01-01 10:31', 90);
SELECT * FROM pg_temp.step();

-- the planned query's uid belongs to it: another query, or the TVF alone, is refused
SELECT window_start, count(*)
  FROM hop(NULL::clicks, 'ts', '5 minutes', '10 minutes', uid => 'sql', changes => true) GROUP BY 1;
SELECT count(*) FROM hop(NULL::clicks, 'ts', '5 minutes', '10 minutes', uid => 'sql', changes => true);

-- a declared watermark, or one given on the TVF, holds windows open longer
SELECT window_start, window_end, count(*)
  FROM tumble(NULL::clicks, 'ts', '10 minutes', uid => 'delayed', changes => true,
              watermark_delay => '15 minutes') GROUP BY 1, 2;
INSERT INTO clicks VALUES (10, 4, 'g', '2024-01-01 10:41', 1), (11, 4, 'h', '2024-01-01 10:52', 1);
-- the watermark is 10:37: [10:30, 10:40) has not ended, nor any later
SELECT window_start, window_end, count(*)
  FROM tumble(NULL::clicks, 'ts', '10 minutes', uid => 'delayed', changes => true,
              watermark_delay => '15 minutes') GROUP BY 1, 2 ORDER BY 1;
INSERT INTO clicks VALUES (12, 4, 'i', '2024-01-01 11:06', 1);
-- 10:51: [10:40, 10:50) has ended (the stream started after the earlier rows)
SELECT window_start, window_end, count(*)
  FROM tumble(NULL::clicks, 'ts', '10 minutes', uid => 'delayed', changes => true,
              watermark_delay => '15 minutes') GROUP BY 1, 2 ORDER BY 1;

---------------------------------------------------------------------------
-- Window Top-N over the stream: each window's first rows, once, when it fires
---------------------------------------------------------------------------
CREATE FUNCTION pg_temp.top() RETURNS TABLE (id int, window_start timestamptz, rownum bigint, same_as_function boolean)
LANGUAGE plpgsql AS $$
BEGIN
    CREATE TEMP TABLE planned AS
    SELECT (t.data).id, t.window_start, t.rownum FROM (
        SELECT data, h.window_start, row_number() OVER (PARTITION BY h.window_start, h.window_end
                                                        ORDER BY (data).ms DESC) AS rownum
          FROM ptf.tumble(NULL::clicks, 'ts', '10 minutes', uid => 'top', changes => true) h) t
     WHERE t.rownum <= 2;
    CREATE TEMP TABLE fn AS
    SELECT (f.data).id, f.window_start, f.rownum
      FROM ptf.window_top_n(NULL::clicks, 'tumble', 'ts', '10 minutes', order_by => 'ms DESC', top_n => 2,
                            uid => 'top_fn', changes => true) f;
    RETURN QUERY SELECT p.*, NOT EXISTS ((TABLE planned EXCEPT ALL TABLE fn) UNION ALL (TABLE fn EXCEPT ALL TABLE planned))
      FROM planned p ORDER BY 2, 3;
    DROP TABLE planned, fn;
END $$;
SELECT * FROM (SELECT (data).id, window_start, row_number() OVER (PARTITION BY window_start, window_end
                                                              ORDER BY (data).ms DESC) AS rownum
  FROM tumble(NULL::clicks, 'ts', '10 minutes', uid => 'top', changes => true)) t WHERE rownum <= 2;
SELECT (data).id, window_start, rownum
  FROM window_top_n(NULL::clicks, 'tumble', 'ts', '10 minutes', order_by => 'ms DESC', top_n => 2,
                    uid => 'top_fn', changes => true);
INSERT INTO clicks VALUES (20, 1, 'x', '2024-01-01 11:01', 5), (21, 1, 'y', '2024-01-01 11:02', 7);
SELECT * FROM pg_temp.top();
-- the window [11:00, 11:10) spans two calls: its top 2 of all its rows, once
INSERT INTO clicks VALUES (22, 1, 'z', '2024-01-01 11:03', 6), (23, 1, 'w', '2024-01-01 11:04', 1),
                          (24, 1, 'v', '2024-01-01 11:12', 9);
SELECT * FROM pg_temp.top();
-- updates and deletes are passed over, as the TVF passes them over; late rows counted
UPDATE clicks SET ms = 100 WHERE id = 24;
INSERT INTO clicks VALUES (25, 1, 'late', '2024-01-01 11:05', 99), (26, 1, 'u', '2024-01-01 11:25', 2);
SELECT * FROM pg_temp.top();
SELECT uid, function, rows_in, rows_out, rows_late, rows_skipped FROM state WHERE uid IN ('top', 'top_fn') ORDER BY uid;

-- over a table whose updates log no key, the aggregate is refused as window_aggregate refuses it
CREATE TABLE nokey_clicks (id int, ts timestamp);
SELECT window_start, count(*) FROM tumble(NULL::nokey_clicks, 'ts', '1 hour', uid => 'nokey', changes => true) GROUP BY 1;
-- over one whose updates log the primary key (an upsert source) the last row of each key is kept:
-- an update moves its row between windows, a delete takes it out, as window_aggregate does
CREATE TABLE plain_clicks (id int PRIMARY KEY, ts timestamp);
CREATE FUNCTION pg_temp.plain() RETURNS TABLE (window_start timestamptz, count bigint, max int) LANGUAGE sql AS $$
  SELECT window_start, count(*), max((data).id) FROM tumble(NULL::plain_clicks, 'ts', '1 hour', uid => 'plain', changes => true,
                                                       watermark_delay => '1 hour') GROUP BY 1 ORDER BY 1 $$;
SELECT * FROM pg_temp.plain();
INSERT INTO plain_clicks VALUES (1, '2024-01-01 10:05'), (2, '2024-01-01 10:10'), (3, '2024-01-01 10:20');
UPDATE plain_clicks SET ts = '2024-01-01 11:30' WHERE id = 2;
DELETE FROM plain_clicks WHERE id = 3;
INSERT INTO plain_clicks VALUES (4, '2024-01-01 12:00');
SELECT * FROM pg_temp.plain();
-- the plain evaluation of the windows the watermark (11:00) has passed; nothing was late
SELECT date_bin('1 hour', ts, 'epoch') AS window_start, count(*), max(id) FROM plain_clicks
 WHERE date_bin('1 hour', ts, 'epoch') + '1 hour' <= '2024-01-01 11:00' GROUP BY 1 ORDER BY 1;
SELECT rows_in, rows_late, rows_skipped FROM state WHERE uid = 'plain';
-- a WHERE on data sees the whole rows: an update out of it and a key-only delete retract
CREATE TABLE where_clicks (id int PRIMARY KEY, ts timestamp, v int);
CREATE FUNCTION pg_temp.wh() RETURNS TABLE (window_start timestamptz, count bigint, max int) LANGUAGE sql AS $$
  SELECT window_start, count(*), max((data).id) FROM tumble(NULL::where_clicks, 'ts', '1 hour', uid => 'wh',
         changes => true, watermark_delay => '1 hour') WHERE (data).v >= 3 GROUP BY 1 ORDER BY 1 $$;
SELECT * FROM pg_temp.wh();
INSERT INTO where_clicks VALUES (1, '2024-01-01 10:05', 1), (2, '2024-01-01 10:10', 5),
                                (3, '2024-01-01 10:20', 3), (5, '2024-01-01 10:30', 4);
UPDATE where_clicks SET v = 0 WHERE id = 2;
DELETE FROM where_clicks WHERE id = 3;
INSERT INTO where_clicks VALUES (4, '2024-01-01 12:00', 9);
SELECT * FROM pg_temp.wh();
SELECT date_bin('1 hour', ts, 'epoch') AS window_start, count(*), max(id) FROM where_clicks
 WHERE v >= 3 AND date_bin('1 hour', ts, 'epoch') + '1 hour' <= '2024-01-01 11:00' GROUP BY 1 ORDER BY 1;
-- Top-N ranks inserts: it has no such need
SELECT * FROM (SELECT (data).id, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).ts) AS rownum
  FROM tumble(NULL::plain_clicks, 'ts', '1 hour', uid => 'plain_top', changes => true)) t WHERE rownum = 1;

-- a row the WHERE leaves out still moves the watermark, as Flink's watermark
-- is the source's and the filter comes after it: the WHERE only removes rows
-- from windows, the same as FILTER (row 3 is late in both, counted in rows_late)
CREATE TABLE wf (id int, v int, ts timestamptz);
ALTER TABLE wf REPLICA IDENTITY FULL;
CREATE VIEW wf_where AS SELECT window_start, count(*) FROM tumble(NULL::wf, 'ts', '10 minutes',
    changes => true, uid => 'wf_where') WHERE (data).v > 0 GROUP BY 1;
CREATE VIEW wf_filter AS SELECT window_start, count(*) FILTER (WHERE (data).v > 0)
  FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_filter') GROUP BY 1;
CREATE VIEW wf_top AS SELECT id, window_start FROM (SELECT (data).id, window_start,
    row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).v DESC) AS rownum
  FROM tumble(NULL::wf, 'ts', '10 minutes', uid => 'wf_top', changes => true) WHERE (data).id <> 2) t
 WHERE rownum = 1;
TABLE wf_where;
TABLE wf_filter;
TABLE wf_top;
INSERT INTO wf VALUES (1, 1, '2024-01-01 10:01'), (2, 0, '2024-01-01 10:30');
TABLE wf_where;
TABLE wf_filter;
TABLE wf_top;
INSERT INTO wf VALUES (3, 9, '2024-01-01 10:05'), (4, 1, '2024-01-01 10:40');
TABLE wf_where;
SELECT rows_in, rows_late FROM last_call_stats();
TABLE wf_filter;
SELECT rows_in, rows_late FROM last_call_stats();
-- Window Top-N: the late row 3 (v = 9) does not take [10:00, 10:10) from row 1
TABLE wf_top;
SELECT rows_in, rows_late FROM last_call_stats();
DROP VIEW wf_where, wf_filter, wf_top;

-- a grouping or ranking of a stream the rules do not plan is refused before
-- any row is read (PostgreSQL would group each call's rows apart: a window
-- in parts, once per call, before the watermark); the rows of a call, not
-- grouped by windows, may be counted; with the rules off, as written
SELECT window_start, percentile_cont(0.5) WITHIN GROUP (ORDER BY (data).v)
  FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_pct') GROUP BY 1;
SELECT window_start, (data).v % 2, count(*)
  FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_expr') GROUP BY 1, 2;
SELECT * FROM (SELECT (data).id, rank() OVER (PARTITION BY window_start ORDER BY (data).v) AS r
  FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_rank')) t WHERE r <= 2;
SELECT ws, n FROM (SELECT window_start AS ws, count(*) AS n FROM tumble(NULL::wf, 'ts', '10 minutes',
    changes => true, uid => 'wf_sub') GROUP BY 1, (data).v % 2) s;
-- the same through a CTE kept apart (its scan is what the query groups)
WITH s AS MATERIALIZED (SELECT * FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_cte'))
SELECT window_start, count(*) FROM s GROUP BY 1;
SELECT count(*) FROM state WHERE uid LIKE 'wf\_%' AND uid NOT IN ('wf_where', 'wf_filter', 'wf_top');
SELECT count(*) FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_count');
SET ptf.plan_window_sql = off;
SELECT window_start, percentile_cont(0.5) WITHIN GROUP (ORDER BY (data).v)
  FROM tumble(NULL::wf, 'ts', '10 minutes', changes => true, uid => 'wf_off') GROUP BY 1;
RESET ptf.plan_window_sql;

-- Top-N ranks a stream's inserts and passes its updates over: no update can
-- stop it, and its first call does not warn that one could (a table with a
-- TOASTable column under REPLICA IDENTITY DEFAULT)
CREATE TABLE tt (id int PRIMARY KEY, big text, v int, ts timestamptz);
SELECT * FROM (SELECT (data).id, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).v) AS rn
  FROM tumble(NULL::tt, 'ts', '1 hour', changes => true, uid => 'tt_top')) t WHERE rn = 1;
SELECT count(*) FROM tumble(NULL::tt, 'ts', '1 hour', changes => true, uid => 'tt_tvf');

-- EXPLAIN of a generic plan whose changes argument is a parameter says so
PREPARE wfq(bool) AS SELECT window_start, count(*) FROM tumble(NULL::wf, 'ts', '10 minutes',
    changes => $1, uid => 'wf_prep') GROUP BY 1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE wfq(true);
RESET plan_cache_mode;
DEALLOCATE wfq;
-- a grouping the rules do not plan, its changes argument a parameter: a generic plan
-- passes the parameter through ptf._refuse_grouped_stream, which refuses true when the
-- statement runs (a custom plan refuses it at planning), before the call reads a row;
-- false runs as written
PREPARE wfg(bool) AS SELECT window_start, (data).v % 2 AS odd, count(*)
  FROM tumble(NULL::wf, 'ts', '10 minutes', changes => $1, uid => 'wf_gen') GROUP BY 1, 2 ORDER BY 2, 1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE wfg(true);
EXECUTE wfg(true);
SELECT count(*) FROM state WHERE uid = 'wf_gen';
EXECUTE wfg(false);
SET plan_cache_mode = force_custom_plan;
EXECUTE wfg(true);
RESET plan_cache_mode;
DEALLOCATE wfg;

SELECT count(drop_state(uid)) FROM state;
-- a planned uid's state is by column numbers: after a column is renamed, the query naming it
-- anew goes on with the same state (as a pipeline's, printed again at the rename, does)
CREATE TABLE rn (id int, ts timestamp, v int);
ALTER TABLE rn REPLICA IDENTITY FULL;
SELECT window_start, sum((data).v) FROM tumble(NULL::rn, 'ts', '1 hour', uid => 'rn', changes => true) GROUP BY 1;
INSERT INTO rn VALUES (1, '2024-01-01 10:05', 1), (2, '2024-01-01 10:10', 2);
ALTER TABLE rn RENAME COLUMN v TO val;
INSERT INTO rn VALUES (3, '2024-01-01 10:50', 4), (4, '2024-01-01 11:00', 8);
SELECT window_start, sum((data).val) FROM tumble(NULL::rn, 'ts', '1 hour', uid => 'rn', changes => true) GROUP BY 1;
-- another aggregate is another state
SELECT window_start, max((data).val) FROM tumble(NULL::rn, 'ts', '1 hour', uid => 'rn', changes => true) GROUP BY 1;
SELECT drop_state('rn');
-- so is a key column renamed: the same key (before, its name was the uid's
-- identity, and the stream, a pipeline's too, stopped at 22023 for good);
-- another column under the old name is another key
CREATE TABLE rk (id int, k text, v int, ts timestamp);
ALTER TABLE rk REPLICA IDENTITY FULL;
SELECT window_start, (data).k, count(*) FROM tumble(NULL::rk, 'ts', '1 hour', uid => 'rk', changes => true) GROUP BY 1, 2;
INSERT INTO rk VALUES (1, 'a', 1, '2024-01-01 10:05'), (2, 'b', 1, '2024-01-01 10:06');
ALTER TABLE rk RENAME COLUMN k TO kk;
INSERT INTO rk VALUES (3, 'a', 1, '2024-01-01 11:05');
SELECT window_start, (data).kk, count(*) FROM tumble(NULL::rk, 'ts', '1 hour', uid => 'rk', changes => true) GROUP BY 1, 2 ORDER BY 2;
SELECT partition_by FROM state WHERE uid = 'rk';
ALTER TABLE rk RENAME COLUMN v TO k;
SELECT window_start, (data).k, count(*) FROM tumble(NULL::rk, 'ts', '1 hour', uid => 'rk', changes => true) GROUP BY 1, 2;
SELECT drop_state('rk');
DROP TABLE clicks, plain_clicks, nokey_clicks, where_clicks, rn, wf, rk, tt;
DROP TYPE per_user;
