-- Differential tests of the window rules (planner/) on generated data: each
-- query planned as the window aggregate or Window Top-N equals PostgreSQL's
-- plain evaluation of the same SQL (ptf.plan_window_sql = off), as multisets,
-- in memory and spilled to disk (work_mem 64kB).  120k rows in random time
-- order over four days, 3000 keys, NULL keys and values, every window kind,
-- offsets, DISTINCT, FILTER and ORDER BY aggregates, HAVING, quals on data and
-- on windows.

CREATE SCHEMA sql_diff;
SET search_path = sql_diff, ptf;
-- UTC: no daylight saving gap merges windows of the timestamp column (window_sql.sql)
SET TimeZone = 'UTC';

SELECT setseed(0.27);
CREATE TABLE ev AS
SELECT i AS id,
       timestamp '2024-03-08 00:00' + (random() * 345600)::int * interval '1 second' AS ts,
       CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 3000)::int END AS k,
       CASE WHEN random() < 0.04 THEN NULL
            ELSE (ARRAY['a', 'B', 'b', 'c', 'A', 'd'])[1 + (random() * 5)::int] END AS g,
       CASE WHEN random() < 0.03 THEN NULL ELSE (random() * 100)::int END AS v,
       round((random() * 50)::numeric, 2) AS price,
       md5(i::text) AS s
  FROM generate_series(1, 120000) i;
ANALYZE ev;

-- same(query): planned and plain, as multisets of rows; and whether a rule planned it
CREATE FUNCTION same(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    planned bigint;
    plain bigint;
    diff bigint;
    line text;
    ours boolean := false;
BEGIN
    SET LOCAL ptf.plan_window_sql = on;
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        ours := ours OR line LIKE '%PtfWindowScan%';
    END LOOP;
    EXECUTE format('CREATE TEMP TABLE planned_rows AS SELECT q::text AS r FROM (%s) q', query);
    SET LOCAL ptf.plan_window_sql = off;
    EXECUTE format('CREATE TEMP TABLE plain_rows AS SELECT q::text AS r FROM (%s) q', query);
    SELECT count(*) INTO planned FROM planned_rows;
    SELECT count(*) INTO plain FROM plain_rows;
    SELECT count(*) INTO diff FROM ((TABLE planned_rows EXCEPT ALL TABLE plain_rows)
                                    UNION ALL (TABLE plain_rows EXCEPT ALL TABLE planned_rows)) d;
    DROP TABLE planned_rows, plain_rows;
    RETURN format('%s, %s rows, %s', CASE WHEN ours THEN 'planned' ELSE 'NOT PLANNED' END, planned,
                  CASE WHEN diff = 0 AND planned = plain THEN 'same'
                       ELSE format('DIFFERENT (%s plain, %s differ)', plain, diff) END);
END $$;

CREATE TABLE queries (n int, q text);
INSERT INTO queries VALUES
-- TUMBLE by key: counts, sums, averages (numeric scale), min/max of text, NULL keys
(1, $$SELECT window_start, window_end, (data).k, count(*), count((data).v), sum((data).v),
             avg((data).price), min((data).s), max((data).g)
        FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '1 hour') GROUP BY 1, 2, 3$$),
-- TUMBLE with an offset, window_time, two keys, HAVING, expressions over aggregates
(2, $$SELECT window_time, (data).g, (data).v, count(*), sum((data).price) / count(*)
        FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '90 minutes', "offset" => '-13 minutes')
       GROUP BY window_start, window_end, window_time, (data).g, 3 HAVING count(*) > 3$$),
-- HOP 1 h every 15 min, offset: DISTINCT, ORDER BY and FILTER aggregates
(3, $$SELECT window_start, window_end, (data).g, count(DISTINCT (data).k) AS keys,
             string_agg((data).s, ',' ORDER BY (data).id) FILTER (WHERE (data).v > 97) AS top,
             sum((data).price) FILTER (WHERE (data).v > 50) AS rich
        FROM ptf.hop(NULL::sql_diff.ev, 'ts', '15 minutes', '1 hour', "offset" => '7 minutes')
       GROUP BY 1, 2, 3$$),
-- HOP whose size is not a multiple of its slide, by key, with a WHERE on data and on the window
(4, $$SELECT window_start, window_end, (data).k, count(*), max((data).v), bool_and((data).v > 3)
        FROM ptf.hop(NULL::sql_diff.ev, 'ts', '40 minutes', '1 hour')
       WHERE (data).price BETWEEN 5 AND 45 AND window_end > '2024-03-09'
       GROUP BY 1, 2, 3$$),
-- CUMULATE 6 h by 1 h, offset, by key: HAVING on an aggregate, window_end alone
(5, $$SELECT window_end, (data).k, count(*), sum((data).v), array_agg((data).id ORDER BY (data).id)
        FROM ptf.cumulate(NULL::sql_diff.ev, 'ts', '1 hour', '6 hours', "offset" => '2 hours')
       GROUP BY window_end, (data).k HAVING sum((data).v) > 100$$),
-- many keys, few rows each
(6, $$SELECT window_start, window_end, (data).id, count(*), min((data).ts)
        FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '1 day') GROUP BY 1, 2, 3$$),
(7, $$SELECT window_start, window_end, (data).s, count(*)
        FROM ptf.hop(NULL::sql_diff.ev, 'ts', '12 hours', '1 day') WHERE (data).id % 4 = 0 GROUP BY 1, 2, 3$$),
-- Window Top-N: the first 3 by value (ties broken by id) per window and group
(8, $$SELECT * FROM (SELECT (data).id, (data).v, (data).g, window_start, window_end,
             row_number() OVER (PARTITION BY window_start, window_end, (data).g
                                ORDER BY (data).v DESC NULLS LAST, (data).id) AS rownum
        FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '2 hours')) t WHERE rownum <= 3$$),
-- window deduplication on HOP: the first row per window and key
(9, $$SELECT * FROM (SELECT data, window_start, window_end,
             row_number() OVER (PARTITION BY window_start, window_end, (data).k ORDER BY (data).ts, (data).id) AS rownum
        FROM ptf.hop(NULL::sql_diff.ev, 'ts', '1 hour', '2 hours') WHERE (data).k < 1000) t WHERE rownum = 1$$),
-- the last row per CUMULATE window, and the 5 cheapest per window with a WHERE
(10, $$SELECT * FROM (SELECT (data).id, window_end,
             row_number() OVER (PARTITION BY window_end ORDER BY (data).ts DESC, (data).id DESC) AS rownum
        FROM ptf.cumulate(NULL::sql_diff.ev, 'ts', '1 hour', '4 hours')) t WHERE rownum < 2$$),
(11, $$SELECT * FROM (SELECT (data).id, (data).price, window_start,
             row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price, (data).id DESC) AS rownum
        FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '3 hours') WHERE (data).g IN ('a', 'b')) t WHERE rownum <= 5$$),
-- Top-N of the window aggregate's groups
(12, $$SELECT * FROM (SELECT window_start, window_end, (data).k, sum((data).v) AS total,
             row_number() OVER (PARTITION BY window_start, window_end ORDER BY sum((data).v) DESC NULLS LAST, (data).k) AS rownum
        FROM ptf.hop(NULL::sql_diff.ev, 'ts', '1 hour', '3 hours') GROUP BY 1, 2, 3) t WHERE rownum <= 3$$),
-- the aggregates whose support functions run inline (count, sum of int2/int4, min/max of
-- int4/int8), NULL inputs among them, combined across HOP's slices
(13, $$SELECT window_start, window_end, (data).k, count((data).v), sum((data).v::int2), sum((data).v),
             min((data).v), max((data).v), min((data).id::bigint * 1000000007),
             max((data).v::bigint - (data).id)
        FROM ptf.hop(NULL::sql_diff.ev, 'ts', '10 minutes', '1 hour') WHERE (data).k < 300
       GROUP BY 1, 2, 3$$);

SELECT n, same(q) FROM queries ORDER BY n;

-- spilled: a work_mem of 64kB holds a few hundred keys
SET work_mem = '64kB';
SELECT n, same(q) FROM queries WHERE n IN (1, 3, 5, 6, 8, 9, 13) ORDER BY n;
-- the window aggregate did spill
SELECT count(*) > 0 AS rows FROM (SELECT window_start, (data).k, count(*)
  FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '1 hour') GROUP BY 1, 2) x;
SELECT function, rows_in, rows_spilled > 0 AS spilled, spill_partitions > 0 AS partitioned
  FROM ptf.last_call_stats();
SELECT count(*) > 0 AS rows FROM (SELECT * FROM (SELECT (data).id, row_number() OVER (
    PARTITION BY window_start, window_end, (data).k ORDER BY (data).v) AS rownum
  FROM ptf.tumble(NULL::sql_diff.ev, 'ts', '1 hour')) t WHERE rownum <= 2) x;
SELECT function, rows_in, rows_spilled > 0 AS spilled, spill_partitions > 0 AS partitioned
  FROM ptf.last_call_stats();
RESET work_mem;

DROP SCHEMA sql_diff CASCADE;
