-- Flink's SQL as written (doc/design.md §8): a window TVF + GROUP BY is planned as the
-- sliced window aggregate, row_number() over its windows as Window Top-N.  The
-- answers are Flink's documented ones, checked by hand, and equal to PostgreSQL's
-- plain evaluation of the same SQL (ptf.plan_window_sql = off).
SET search_path = ptf, public;
SET TimeZone = 'UTC';
SET IntervalStyle = 'iso_8601';
SET DateStyle = 'ISO, YMD';

-- Flink's Bid table of window-agg.md
CREATE TABLE bid (bidtime timestamp, price numeric(10,2), item text, supplier_id text);
INSERT INTO bid VALUES
 ('2020-04-15 08:05', 4.00, 'C', 'supplier1'),
 ('2020-04-15 08:07', 2.00, 'A', 'supplier1'),
 ('2020-04-15 08:09', 5.00, 'D', 'supplier2'),
 ('2020-04-15 08:11', 3.00, 'B', 'supplier2'),
 ('2020-04-15 08:13', 1.00, 'E', 'supplier1'),
 ('2020-04-15 08:17', 6.00, 'F', 'supplier2');

-- same(query): the query planned by the rules and PostgreSQL's own answer, as multisets
CREATE FUNCTION same(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    planned bigint;
    plain bigint;
    diff bigint;
BEGIN
    SET LOCAL ptf.plan_window_sql = on;
    EXECUTE format('CREATE TEMP TABLE planned_rows AS %s', query);
    SET LOCAL ptf.plan_window_sql = off;
    EXECUTE format('CREATE TEMP TABLE plain_rows AS %s', query);
    SELECT count(*) INTO planned FROM planned_rows;
    SELECT count(*) INTO plain FROM plain_rows;
    SELECT count(*) INTO diff FROM ((TABLE planned_rows EXCEPT ALL TABLE plain_rows)
                                    UNION ALL (TABLE plain_rows EXCEPT ALL TABLE planned_rows)) d;
    DROP TABLE planned_rows, plain_rows;
    RETURN format('%s rows, %s', planned, CASE WHEN diff = 0 AND planned = plain THEN 'same'
                                              ELSE format('DIFFERENT (%s plain, %s differ)', plain, diff) END);
END $$;

-- plan(query): the top node of its plan and what a window rule planned
CREATE FUNCTION plan(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        RETURN NEXT line;
    END LOOP;
END $$;

---------------------------------------------------------------------------
-- Window aggregation (window-agg.md): TUMBLE, HOP, CUMULATE
---------------------------------------------------------------------------
EXPLAIN (COSTS OFF)
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end;
-- Flink: [08:00, 08:10) 11.00, [08:10, 08:20) 10.00
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end ORDER BY 1;

EXPLAIN (COSTS OFF)
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes')
 GROUP BY window_start, window_end;
-- Flink: 08:00 11.00, 08:05 15.00, 08:10 10.00, 08:15 6.00
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes')
 GROUP BY window_start, window_end ORDER BY 1;

EXPLAIN (COSTS OFF)
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes')
 GROUP BY window_start, window_end;
-- Flink: 08:06 4.00, 08:08 6.00, 08:10 11.00, 08:12 3.00, 08:14 4.00, 08:16 4.00, 08:18 10.00, 08:20 10.00
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes')
 GROUP BY window_start, window_end ORDER BY 1, 2;

-- per supplier, with window_time (Flink's cascading form), positions and aliases
SELECT window_start AS ws, window_end, window_time, (data).supplier_id AS supplier,
       sum((data).price) AS total, count(*)
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY ws, 2, window_time, supplier ORDER BY 1, 4;
SELECT same($$SELECT window_start AS ws, window_end, window_time, (data).supplier_id AS supplier,
       sum((data).price) AS total, count(*)
  FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY ws, 2, window_time, supplier$$);

-- what the select list, HAVING, ORDER BY and LIMIT do stays PostgreSQL's, over the
-- window aggregate's rows; the WHERE on data is applied to input rows, the WHERE on
-- window columns to the result
EXPLAIN (COSTS OFF)
SELECT window_end, (data).supplier_id, round(avg((data).price), 3) AS avg, max((data).item) || '!' AS top
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes')
 WHERE (data).price > 1 AND window_start >= '2020-04-15 08:05'
 GROUP BY window_start, window_end, (data).supplier_id
HAVING count(*) > 1 ORDER BY sum((data).price) DESC LIMIT 2;
SELECT window_end, (data).supplier_id, round(avg((data).price), 3) AS avg, max((data).item) || '!' AS top
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes')
 WHERE (data).price > 1 AND window_start >= '2020-04-15 08:05'
 GROUP BY window_start, window_end, (data).supplier_id
HAVING count(*) > 1 ORDER BY sum((data).price) DESC LIMIT 2;
SELECT same($$SELECT window_end, (data).supplier_id, round(avg((data).price), 3) AS avg, max((data).item) || '!' AS top
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes')
 WHERE (data).price > 1 AND window_start >= '2020-04-15 08:05'
 GROUP BY window_start, window_end, (data).supplier_id HAVING count(*) > 1$$);

-- DISTINCT, FILTER and ORDER BY in aggregates; the whole row; window_end alone
SELECT same($$SELECT window_end, count(DISTINCT (data).supplier_id) AS suppliers,
       string_agg((data).item, ',' ORDER BY (data).price DESC) AS items,
       sum((data).price) FILTER (WHERE (data).item < 'D') AS cheap,
       count(data) AS n, array_agg(data ORDER BY (data).bidtime) AS all_rows
  FROM cumulate(NULL::bid, 'bidtime', '4 minutes', '12 minutes', "offset" => '-3 minutes')
 GROUP BY window_end$$);
SELECT window_end, count(DISTINCT (data).supplier_id) AS suppliers,
       string_agg((data).item, ',' ORDER BY (data).price DESC) AS items,
       sum((data).price) FILTER (WHERE (data).item < 'D') AS cheap
  FROM cumulate(NULL::bid, 'bidtime', '4 minutes', '12 minutes', "offset" => '-3 minutes')
 GROUP BY window_end ORDER BY 1;

-- a GROUP BY without aggregates; an aggregate above the grouping (a subquery)
SELECT same($$SELECT window_start, window_end, (data).item FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1, 2, 3$$);
SELECT count(*), sum(total) FROM (SELECT window_start, sum((data).price) AS total
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') GROUP BY 1) s;

-- NULL keys group together, NULL values are skipped as PostgreSQL skips them;
-- numeric scale and the column's collation are the column's
CREATE TABLE odd (ts timestamptz, k text COLLATE "C", n numeric(8,3), f float8);
INSERT INTO odd VALUES
 ('2024-01-01 00:01+00', 'a', 1.5, 1), ('2024-01-01 00:02+00', NULL, 2.25, NULL),
 ('2024-01-01 00:03+00', NULL, NULL, 2), ('2024-01-01 00:04+00', 'B', 0.125, 4),
 ('2024-01-01 00:05+00', 'b', 10, 8), ('2024-01-01 01:00+00', 'a', NULL, NULL);
SELECT window_start, (data).k, sum((data).n), avg((data).n), count((data).n), max((data).k), min((data).f)
  FROM tumble(NULL::odd, 'ts', '1 hour') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT same($$SELECT window_start, (data).k, sum((data).n), avg((data).n), count((data).n),
       max((data).k), min((data).f) FROM tumble(NULL::odd, 'ts', '1 hour') GROUP BY 1, 2$$);
-- no rows: no windows
SELECT window_start, count(*) FROM tumble(NULL::odd, 'ts', '1 hour') WHERE (data).k = 'zzz' GROUP BY 1;

-- A timestamp column is windowed on its own clock, its bounds shown as timestamptz:
-- a bound in a daylight saving gap (02:00-03:00 on 2024-03-10 in New York) shows as
-- the hour after it, and PostgreSQL's GROUP BY takes two such windows for one.  The
-- scan then gives PostgreSQL's answer, from PostgreSQL's plan of the grouping.
CREATE TABLE dst (ts timestamp, v int);
INSERT INTO dst SELECT timestamp '2024-03-10 01:00' + g * interval '10 minutes', g FROM generate_series(0, 17) g;
SET TimeZone = 'America/New_York';
SELECT window_start, window_end, count(*), sum((data).v) FROM tumble(NULL::dst, 'ts', '30 minutes') GROUP BY 1, 2 ORDER BY 1, 2;
SELECT same($$SELECT window_start, window_end, count(*), sum((data).v) FROM tumble(NULL::dst, 'ts', '30 minutes') GROUP BY 1, 2$$);
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT window_start, window_end, count(*) FROM tumble(NULL::dst, 'ts', '30 minutes') GROUP BY 1, 2;
-- windows of whole days have no bound in the gap: the operator's answer
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT window_start, window_end, count(*) FROM tumble(NULL::dst, 'ts', '1 day') GROUP BY 1, 2;
SELECT same($$SELECT window_start, (data).v, count(*) FROM hop(NULL::dst, 'ts', '1 day', '2 days') GROUP BY 1, 2$$);
SET TimeZone = 'UTC';
DROP TABLE dst;

---------------------------------------------------------------------------
-- Near misses: not planned, and PostgreSQL's answer
---------------------------------------------------------------------------
-- a grouping expression that is not a column: the TVF is planned as a scan
SELECT plan($$SELECT window_start, window_end, lower((data).item), count(*)
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') GROUP BY 1, 2, 3$$);
-- grouping sets
SELECT plan($$SELECT window_start, window_end, (data).supplier_id, sum((data).price)
  FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY window_start, window_end, ROLLUP ((data).supplier_id)$$);
-- a volatile predicate, a qual reading the row and the window, window_start of CUMULATE
SELECT plan($$SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes')
  WHERE random() >= 0 GROUP BY 1$$);
SELECT plan($$SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes')
  WHERE (data).bidtime > window_start + interval '1 minute' GROUP BY 1$$);
SELECT plan($$SELECT window_start, count(*) FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes') GROUP BY 1$$);
-- an ordered-set aggregate; an aggregate of a window column
SELECT plan($$SELECT window_start, percentile_disc(0.5) WITHIN GROUP (ORDER BY (data).price)
  FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1$$);
SELECT plan($$SELECT window_start, max(window_time) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1$$);
SELECT same($$SELECT window_start, max(window_time) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1$$);
-- the setting
SET ptf.plan_window_sql = off;
EXPLAIN (COSTS OFF) SELECT window_start, window_end, sum((data).price)
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') GROUP BY 1, 2;
RESET ptf.plan_window_sql;

---------------------------------------------------------------------------
-- Window Top-N and window deduplication (window-topn.md, window-deduplication.md)
---------------------------------------------------------------------------
-- the Bid table of those pages
CREATE TABLE bid2 (bidtime timestamp, price numeric(10,2), item text, supplier_id text);
INSERT INTO bid2 VALUES
 ('2020-04-15 08:05', 4.00, 'A', 'supplier1'),
 ('2020-04-15 08:06', 4.00, 'C', 'supplier2'),
 ('2020-04-15 08:07', 2.00, 'G', 'supplier1'),
 ('2020-04-15 08:08', 2.00, 'B', 'supplier3'),
 ('2020-04-15 08:09', 5.00, 'D', 'supplier4'),
 ('2020-04-15 08:11', 2.00, 'B', 'supplier3'),
 ('2020-04-15 08:13', 1.00, 'E', 'supplier1'),
 ('2020-04-15 08:15', 3.00, 'H', 'supplier2'),
 ('2020-04-15 08:17', 6.00, 'F', 'supplier5');

-- Window Top-N after window aggregation: the top 3 suppliers of every window
EXPLAIN (COSTS OFF)
SELECT * FROM (
  SELECT *, row_number() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
    FROM (SELECT window_start, window_end, (data).supplier_id, sum((data).price) AS price, count(*) AS cnt
            FROM tumble(NULL::bid2, 'bidtime', '10 minutes')
           GROUP BY window_start, window_end, (data).supplier_id) agg
) ranked WHERE rownum <= 3;
-- Flink: 08:00 supplier1 6.00 2 (1), supplier4 5.00 1 (2), supplier2 4.00 1 (3);
--        08:10 supplier5 6.00 1 (1), supplier2 3.00 1 (2), supplier3 2.00 1 (3)
SELECT * FROM (
  SELECT *, row_number() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
    FROM (SELECT window_start, window_end, (data).supplier_id, sum((data).price) AS price, count(*) AS cnt
            FROM tumble(NULL::bid2, 'bidtime', '10 minutes')
           GROUP BY window_start, window_end, (data).supplier_id) agg
) ranked WHERE rownum <= 3 ORDER BY window_start, rownum;

-- Window Top-N on a TVF's rows: the top 3 items of every window
EXPLAIN (COSTS OFF)
SELECT * FROM (
  SELECT (data).bidtime, (data).price, (data).item, (data).supplier_id, window_start, window_end,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price DESC) AS rownum
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')
) t WHERE rownum <= 3;
-- Flink: 08:00 D 5.00 (1), A 4.00 (2), C 4.00 (3) -- equal prices in arrival order;
--        08:10 F 6.00 (1), H 3.00 (2), B 2.00 (3)
SELECT * FROM (
  SELECT (data).bidtime, (data).price, (data).item, (data).supplier_id, window_start, window_end,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price DESC) AS rownum
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')
) t WHERE rownum <= 3 ORDER BY window_start, rownum;

-- window deduplication: the last row of every window (ORDER BY the time DESC)
EXPLAIN (COSTS OFF)
SELECT * FROM (
  SELECT (data).*, window_start, window_end,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).bidtime DESC) AS rownum
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')
) t WHERE rownum <= 1;
-- Flink: 08:09 D supplier4 in [08:00, 08:10), 08:17 F supplier5 in [08:10, 08:20)
SELECT * FROM (
  SELECT (data).*, window_start, window_end,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).bidtime DESC) AS rownum
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')
) t WHERE rownum <= 1 ORDER BY window_start;
-- the first row per window and supplier: = 1 and < 2 are the same
SELECT same($$SELECT * FROM (SELECT (data).item, (data).supplier_id, window_start, window_end,
         row_number() OVER (PARTITION BY window_start, window_end, (data).supplier_id ORDER BY (data).bidtime) AS rownum
    FROM hop(NULL::bid2, 'bidtime', '5 minutes', '10 minutes')) t WHERE rownum = 1$$);
SELECT same($$SELECT * FROM (SELECT (data).item, window_end,
         row_number() OVER (PARTITION BY window_end ORDER BY (data).bidtime) AS rownum
    FROM cumulate(NULL::bid2, 'bidtime', '5 minutes', '10 minutes')) t WHERE rownum < 2$$);

-- the function form: the same answers
SELECT (data).item, (data).price, window_start, rownum
  FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', order_by => 'price DESC', top_n => 3)
 ORDER BY window_start, rownum;
SELECT (data).item, (data).bidtime, window_start, rownum
  FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', order_by => 'bidtime DESC')
 ORDER BY window_start;
SELECT (data).supplier_id, (data).item, window_start, window_end
  FROM window_top_n(NULL::bid2, 'hop', 'bidtime', '10 minutes', '5 minutes', partition_by => '{supplier_id}')
 ORDER BY window_start, 1;
-- its arguments
SELECT * FROM window_top_n(NULL::bid2, 'session', 'bidtime', '10 minutes');
SELECT * FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', top_n => 0);
SELECT * FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', order_by => 'lower(item)');
SELECT * FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', order_by => 'price; DROP TABLE bid2');
SELECT * FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', order_by => 'price LIMIT 1');
SELECT * FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes', order_by => 'price, nope DESC');
SELECT * FROM window_top_n(NULL::bid2, 'tumble', 'bidtime', '10 minutes',
    query => $$SELECT '+I'::text AS kind, b AS data FROM bid2 b$$);

-- near misses: another window function, a frame clause, no filter, an expression order
SELECT plan($$SELECT * FROM (SELECT (data).item, rank() OVER (PARTITION BY window_start, window_end ORDER BY (data).price) AS r
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')) t WHERE r <= 1$$);
SELECT plan($$SELECT * FROM (SELECT (data).item, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS r FROM tumble(NULL::bid2, 'bidtime', '10 minutes')) t WHERE r <= 1$$);
SELECT plan($$SELECT (data).item, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price) AS r
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')$$);
SELECT plan($$SELECT * FROM (SELECT (data).item, row_number() OVER (PARTITION BY window_start, window_end ORDER BY -(data).price) AS r
    FROM tumble(NULL::bid2, 'bidtime', '10 minutes')) t WHERE r <= 1$$);

---------------------------------------------------------------------------
-- Plans: prepared statements (custom and generic plans), invalidation
---------------------------------------------------------------------------
PREPARE agg(numeric, interval) AS
SELECT window_start, (data).supplier_id, sum((data).price * $1) AS total
  FROM hop(NULL::bid, 'bidtime', $2, '10 minutes')
 WHERE (data).price > $1 GROUP BY 1, 2 HAVING sum((data).price) > $1 ORDER BY 1, 2;
EXECUTE agg(1, '5 minutes');
EXECUTE agg(1, '5 minutes');
EXECUTE agg(1, '5 minutes');
EXECUTE agg(1, '5 minutes');
EXECUTE agg(1, '5 minutes');
SET plan_cache_mode = force_generic_plan;
EXECUTE agg(2, '10 minutes');
EXPLAIN (COSTS OFF) EXECUTE agg(2, '10 minutes');
RESET plan_cache_mode;
-- a column added: the plan is made again
ALTER TABLE bid ADD COLUMN note text;
EXECUTE agg(2, '10 minutes');
ALTER TABLE bid DROP COLUMN note;
EXECUTE agg(2, '10 minutes');
DEALLOCATE agg;

---------------------------------------------------------------------------
-- Privileges and row level security hold as for the plain query
---------------------------------------------------------------------------
CREATE ROLE window_sql_reader;
GRANT USAGE ON SCHEMA public TO window_sql_reader;
SET ROLE window_sql_reader;
SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1;
RESET ROLE;
GRANT SELECT ON bid TO window_sql_reader;
ALTER TABLE bid ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_supplier1 ON bid FOR SELECT TO window_sql_reader USING (supplier_id = 'supplier1');
SET ROLE window_sql_reader;
SELECT window_start, count(*), sum((data).price) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1 ORDER BY 1;
SELECT same($$SELECT window_start, count(*), sum((data).price) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1$$);
PREPARE rls AS SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1 ORDER BY 1;
EXECUTE rls;
RESET ROLE;
EXECUTE rls;
DEALLOCATE rls;
DROP POLICY only_supplier1 ON bid;
ALTER TABLE bid DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON bid FROM window_sql_reader;
REVOKE ALL ON SCHEMA public FROM window_sql_reader;
DROP ROLE window_sql_reader;

-- argument errors are the TVF's own, planned or not
SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '-10 minutes') GROUP BY 1;
SELECT window_start, count(*) FROM hop(NULL::bid, 'nope', '5 minutes', '10 minutes') GROUP BY 1;
SELECT window_end, count(*) FROM cumulate(NULL::bid, 'bidtime', '3 minutes', '10 minutes') GROUP BY 1;
INSERT INTO bid VALUES (NULL, 1, 'N', 'supplier9');
SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1;
-- a WHERE on data leaves the row out before its time is looked at, as PostgreSQL's plan does
SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') WHERE (data).bidtime IS NOT NULL GROUP BY 1 ORDER BY 1;
SELECT same($$SELECT window_start, count(*) FROM tumble(NULL::bid, 'bidtime', '10 minutes') WHERE (data).bidtime IS NOT NULL GROUP BY 1$$);
SELECT same($$SELECT * FROM (SELECT (data).item, window_start, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price DESC) AS rn FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') WHERE (data).supplier_id <> 'supplier9') t WHERE rn <= 2$$);
DELETE FROM bid WHERE bidtime IS NULL;

-- the whole TVF row read above a Window Top-N: PostgreSQL's plan (the scan does not carry it)
SELECT count(*) AS window_scans FROM plan($$SELECT * FROM (SELECT f, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price DESC) AS rn FROM tumble(NULL::bid, 'bidtime', '10 minutes') f) t WHERE rn <= 1$$) p WHERE p LIKE '%PtfWindowScan%';
SELECT same($$SELECT * FROM (SELECT f::text AS f, row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price DESC, (data).item) AS rn FROM tumble(NULL::bid, 'bidtime', '10 minutes') f) t WHERE rn <= 1$$);

DROP FUNCTION same(text), plan(text);
DROP TABLE bid, bid2, odd;
