-- bench/apply_changelog.sql: what ptf.apply_changelog's batches cost on a
-- table whose only unique index is its key, and on one with a second
-- unique column (whose batches run in a subtransaction, and are applied
-- again change by change when their key order breaks the constraint).
--
--   psql -X -d <a database with the extension> -f bench/apply_changelog.sql
--
-- 200,000 changes over 50,000 keys: 50,000 inserts, 50,000 updates (a -U
-- and a +U each), 25,000 deletes, 25,000 inserts of new keys.  Emails stay
-- unique in every order ('e<id>-<version>'), so batches never fail:
-- that is the batched path.  The rotation moves every email one row on,
-- through a spare value: in key order the batch collides, so on the table
-- with a unique email it is applied again change by change (before 1.1
-- it failed).  Median of 5 rounds after a warm-up, ms.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS bench_apply CASCADE;
CREATE SCHEMA bench_apply;
SET search_path = bench_apply, ptf;
CREATE TABLE plain (id int PRIMARY KEY, email text NOT NULL, v int);
CREATE TABLE uniq (id int PRIMARY KEY, email text NOT NULL UNIQUE, v int);
CREATE TABLE changes (seq int, kind text, id int, email text, v int);
INSERT INTO changes
SELECT g, '+I', g, 'e' || g || '-0', 0 FROM generate_series(1, 50000) g
UNION ALL
SELECT 50000 + 2 * g - 1, '-U', (g * 7919) % 50000 + 1, NULL, NULL FROM generate_series(1, 50000) g
UNION ALL
SELECT 50000 + 2 * g, '+U', (g * 7919) % 50000 + 1, 'e' || ((g * 7919) % 50000 + 1) || '-' || g, g
  FROM generate_series(1, 50000) g
UNION ALL
SELECT 150000 + g, '-D', g * 2, NULL, NULL FROM generate_series(1, 25000) g
UNION ALL
SELECT 175000 + g, '+I', 50000 + g, 'e' || (50000 + g) || '-0', 0 FROM generate_series(1, 25000) g;
-- a -U carries the row's image before its update
UPDATE changes c SET email = p.email, v = p.v
  FROM (SELECT seq, lag(email) OVER w AS email, lag(v) OVER w AS v
          FROM changes WINDOW w AS (PARTITION BY id ORDER BY seq)) p
 WHERE c.seq = p.seq AND c.kind IN ('-U', '-D');
-- rotation: 2,000 rows, then each row takes the next row's email (the
-- last one the first's), through a spare value, as one transaction of
-- updates would: 4,000 changes
CREATE TABLE rotation_rows (seq int, kind text, id int, email text, v int);
INSERT INTO rotation_rows SELECT g, '+I', g, 'r' || g, 0 FROM generate_series(1, 2000) g;
CREATE TABLE rotation (seq int, kind text, id int, email text, v int);
INSERT INTO rotation VALUES (1, '-U', 1, 'r1', 0), (2, '+U', 1, 'spare', 0);
INSERT INTO rotation
SELECT 3 + 2 * k + (kind = '+U')::int, kind, 2000 - k,
       'r' || CASE kind WHEN '-U' THEN 2000 - k ELSE (2000 - k) % 2000 + 1 END, 0
  FROM generate_series(0, 1998) k, unnest(ARRAY['-U', '+U']) kind;
INSERT INTO rotation VALUES (4001, '-U', 1, 'spare', 0), (4002, '+U', 1, 'r2', 0);
CREATE TABLE timings (what text, ms float8);
CREATE FUNCTION run(what text, tbl text, src text, rounds int, init text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
BEGIN
    FOR i IN 1 .. rounds + 1 LOOP
        EXECUTE format('TRUNCATE %I', tbl);
        IF init IS NOT NULL THEN
            PERFORM * FROM ptf.apply_changelog(format('bench_apply.%I', tbl)::regclass,
                format('SELECT kind, ROW(id, email, v)::bench_apply.%I FROM bench_apply.%I ORDER BY seq', tbl, init));
        END IF;
        t0 := clock_timestamp();
        PERFORM * FROM ptf.apply_changelog(format('bench_apply.%I', tbl)::regclass,
            format('SELECT kind, ROW(id, email, v)::bench_apply.%I FROM bench_apply.%I ORDER BY seq', tbl, src));
        IF i > 1 THEN      -- the first round warms up
            INSERT INTO timings VALUES (what, 1000 * extract(epoch FROM clock_timestamp() - t0));
        END IF;
    END LOOP;
END $$;
SELECT run('200000 changes, key only', 'plain', 'changes', 5);
SELECT run('200000 changes, key + unique email', 'uniq', 'changes', 5);
SELECT run('4002 changes rotating emails, key only', 'plain', 'rotation', 5, 'rotation_rows');
SELECT run('4002 changes rotating emails, key + unique email', 'uniq', 'rotation', 5, 'rotation_rows');
SELECT what, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1) AS median_ms
  FROM timings GROUP BY what ORDER BY min(ctid);
-- both tables end alike
SELECT count(*) AS differences FROM ((TABLE plain EXCEPT TABLE uniq) UNION ALL (TABLE uniq EXCEPT TABLE plain)) d;
DROP SCHEMA bench_apply CASCADE;
