-- row_number() OVER (PARTITION BY k ORDER BY ...) filtered to its first rows, over a
-- table (doc/design.md §8, doc/flink-semantics.md §5): ordered by a time column that cannot be NULL,
-- = 1, it is keep-first by event time (deduplicate_keep_first's operator); any
-- other order, DESC, or <= N, the Top-N operator per key.  Each planned query
-- equals PostgreSQL's plain evaluation (ptf.plan_window_sql = off).
SET search_path = ptf, public;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';

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

-- the keep-first seed's example: the first order per user, by order time
CREATE TABLE orders (order_id int, user_id text, amount numeric(8,2), order_time timestamptz NOT NULL,
                     note text);
INSERT INTO orders VALUES
 (1, 'ann', 10.00, '2024-01-01 10:05', 'b'), (2, 'bob', 20.00, '2024-01-01 10:01', 'a'),
 (3, 'ann', 30.00, '2024-01-01 10:02', 'c'), (4, NULL, 40.00, '2024-01-01 10:04', NULL),
 (5, 'bob', 50.00, '2024-01-01 10:09', 'd'), (6, NULL, 60.00, '2024-01-01 10:03', 'e'),
 (7, 'cid', 70.00, '-infinity', 'f');
EXPLAIN (COSTS OFF)
SELECT order_id, user_id, amount FROM (
  SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t
 WHERE rn = 1;
SELECT order_id, user_id, amount FROM (
  SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t
 WHERE rn = 1 ORDER BY user_id;
-- <= 1 and < 2 are the same; ptf.deduplicate_keep_first gives the same rows
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t WHERE rn <= 1$$);
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t WHERE rn < 2$$);
SELECT order_id FROM deduplicate_keep_first(NULL::orders, partition_by => '{user_id}', on_time => 'order_time')
EXCEPT
SELECT order_id FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t WHERE rn = 1;
-- a watermark declared on the table is not the query's: every row counts
SELECT set_watermark('orders', 'order_time', '1 minute');
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t WHERE rn = 1$$);
SELECT drop_watermark('orders');

-- DESC keeps the last row per key: the Top-N operator, one window per key
EXPLAIN (COSTS OFF)
SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time DESC) AS rn FROM orders) t WHERE rn = 1;
SELECT order_id, user_id FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time DESC) AS rn FROM orders) t
 WHERE rn = 1 ORDER BY user_id;
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time DESC) AS rn FROM orders) t WHERE rn = 1$$);
-- the first two per key by another order, with a WHERE; no PARTITION BY: the first rows of all
SELECT same($$SELECT * FROM (SELECT order_id, note, row_number() OVER (PARTITION BY user_id ORDER BY note DESC NULLS FIRST, order_id) AS rn
  FROM orders WHERE amount > 15) t WHERE rn <= 2$$);
SELECT same($$SELECT * FROM (SELECT order_id, row_number() OVER (ORDER BY amount DESC) AS rn FROM orders) t WHERE rn <= 3$$);
-- a time column that may be NULL: NULLs sort last, as PostgreSQL sorts them (Top-N)
CREATE TABLE maybe (k int, ts timestamp, v int);
INSERT INTO maybe VALUES (1, NULL, 1), (1, '2024-01-01', 2), (2, NULL, 3), (2, NULL, 4), (3, '2024-01-02', 5);
EXPLAIN (COSTS OFF) SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts, v) AS rn FROM maybe) t WHERE rn = 1;
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts, v) AS rn FROM maybe) t WHERE rn = 1$$);

-- near misses: another window function, a partition by an expression, a frame clause,
-- no filter (a view over the table is its table and a WHERE: planned)
SELECT same($$SELECT * FROM (SELECT *, rank() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY lower(user_id) ORDER BY order_time) AS rn FROM orders) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS rn FROM orders) t WHERE rn = 1$$);
CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 20;
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM big_orders) t WHERE rn = 1$$);
SELECT same($$SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders$$);

-- rights: a role that may read only some columns gets PostgreSQL's plan's answer;
-- row level security holds
CREATE ROLE first_rows_reader;
GRANT SELECT (order_id, user_id, order_time) ON orders TO first_rows_reader;
SET ROLE first_rows_reader;
EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT order_id FROM (SELECT order_id, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t WHERE rn = 1;
SELECT order_id FROM (SELECT order_id, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t
 WHERE rn = 1 ORDER BY 1;
RESET ROLE;
GRANT SELECT ON orders TO first_rows_reader;
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY small ON orders FOR SELECT TO first_rows_reader USING (amount < 35);
SET ROLE first_rows_reader;
SELECT order_id, user_id FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY order_time) AS rn FROM orders) t
 WHERE rn = 1 ORDER BY user_id;
RESET ROLE;
DROP POLICY small ON orders;
ALTER TABLE orders DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON orders FROM first_rows_reader;
DROP ROLE first_rows_reader;

-- generated rows: 120k, 5000 keys with NULLs, in random time order; in memory and spilled
SELECT setseed(0.5);
CREATE TABLE gen (id int, k int, g text, ts timestamptz NOT NULL, t2 timestamp, v int,
                  uts timestamp NOT NULL);
INSERT INTO gen
SELECT i, CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 5000)::int END,
       (ARRAY['a', 'B', 'b', NULL])[1 + (random() * 3)::int],
       timestamptz '2024-01-01' + (random() * 1000000)::int * interval '1 second',
       CASE WHEN random() < 0.1 THEN NULL ELSE timestamp '2024-01-01' + i * interval '1 second' END,
       (random() * 1000)::int,
       timestamp '2024-01-01' + (i * 7919 % 1000003) * interval '1 second'   -- unique
  FROM generate_series(1, 120000) i;
-- ties of ts are broken by id so that every answer is one answer
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts, id) AS rn FROM gen) t WHERE rn = 1$$);
SELECT same($$SELECT id, k FROM (SELECT id, k, row_number() OVER (PARTITION BY k, g ORDER BY ts DESC, id) AS rn FROM gen) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT id, v, row_number() OVER (PARTITION BY g ORDER BY v DESC, id) AS rn FROM gen WHERE v % 3 = 0) t WHERE rn <= 5$$);
SELECT same($$SELECT * FROM (SELECT id, row_number() OVER (PARTITION BY k ORDER BY t2 NULLS FIRST, id) AS rn FROM gen) t WHERE rn <= 2$$);
-- keep-first, over unique times: one answer
SELECT same($$SELECT id, k FROM (SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY uts) AS rn FROM gen) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY g ORDER BY uts) AS rn FROM gen WHERE v < 500) t WHERE rn = 1$$);
SET work_mem = '64kB';
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts, id) AS rn FROM gen) t WHERE rn = 1$$);
SELECT same($$SELECT id, k FROM (SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY uts) AS rn FROM gen) t WHERE rn = 1$$);
SELECT count(*) FROM (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY id ORDER BY uts) AS rn FROM gen) t WHERE rn = 1) x;
SELECT function, rows_in, rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- the parallel query settings: same()'s CREATE TABLE AS runs a plan that holds the scan
-- without parallel mode (the call's SPI cannot advance the command counter there)
SET max_parallel_workers_per_gather = 2;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SELECT same($$SELECT id, k FROM (SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY uts) AS rn FROM gen) t WHERE rn = 1$$);
CREATE TABLE firsts AS SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY g ORDER BY uts) AS rn FROM gen) t WHERE rn = 1;
SELECT count(*) FROM firsts;
DROP TABLE firsts;
RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;

-- what the scan's rows do not carry, the whole row or a system column, read in the
-- select list or a WHERE: PostgreSQL's plan
CREATE TABLE ids (id bigint NOT NULL, user_id int, amount int, t timestamptz NOT NULL);
INSERT INTO ids VALUES (1790000000000000002, 1, 10, '2024-01-01 10:00'),
 (1790000000000000001, 1, 20, '2024-01-01 09:00'), (1790000000000000003, 2, 30, '2024-01-01 11:00');
SELECT same($$SELECT * FROM (SELECT i, row_number() OVER (PARTITION BY user_id ORDER BY t) AS rn FROM ids i) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT ctid, user_id, row_number() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM ids) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT user_id, t, row_number() OVER (PARTITION BY user_id ORDER BY t) AS rn FROM ids WHERE ctid <> '(0,1)') t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT user_id, t, row_number() OVER (PARTITION BY user_id ORDER BY t) AS rn FROM ids WHERE tableoid = 'ids'::regclass) t WHERE rn = 1$$);
SELECT same($$SELECT * FROM (SELECT user_id, t, row_number() OVER (PARTITION BY user_id ORDER BY t) AS rn FROM ids f WHERE f::text LIKE '%10:00%') t WHERE rn = 1$$);
-- ordered by a bigint (an id as often as milliseconds): Top-N, compared as bigints
EXPLAIN (COSTS OFF) SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY id) AS rn FROM ids) t WHERE rn = 1;
SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY id) AS rn FROM ids) t WHERE rn = 1 ORDER BY user_id;
SELECT same($$SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY id) AS rn FROM ids) t WHERE rn = 1$$);

DROP VIEW big_orders;
DROP TABLE orders, maybe, gen, ids;
DROP FUNCTION same(text);
