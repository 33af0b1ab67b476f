-- Differential tests on generated data: keep-first equals its plain-SQL
-- formulation (DISTINCT ON), by arrival and by event time, with NULL keys and
-- ties; in memory, spilled to disk, and incrementally with a uid.

CREATE SCHEMA kf_diff;
SET search_path = kf_diff, ptf;

SELECT setseed(0.42);
CREATE TABLE gen AS
SELECT i AS seq,
       CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 20000)::int END AS k,
       CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 3)::int END AS k2,
       timestamptz '2024-01-01 00:00+00' + (random() * 200)::int * interval '1 minute' AS ts,
       md5(i::text) AS payload
FROM generate_series(1, 100000) i;
-- plenty of ties in event time
SELECT count(*) - count(DISTINCT (k, ts)) > 500 AS has_ties FROM gen;

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

-- by arrival, one key
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.gen ORDER BY k, seq$$);
-- by arrival, two keys
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k2,k}',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k, k2) * FROM kf_diff.gen ORDER BY k, k2, seq$$);
-- by event time, ties by arrival
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}', on_time => 'ts',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.gen ORDER BY k, ts, seq$$);
-- ROW_NUMBER() = 1 is the same thing
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k,k2}', on_time => 'ts',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$SELECT seq, k, k2, ts, payload FROM (
        SELECT *, row_number() OVER (PARTITION BY k, k2 ORDER BY ts, seq) AS rn FROM kf_diff.gen) r
      WHERE rn = 1$$);

-- in memory: the state's size per key
SELECT count(*) FROM deduplicate_keep_first(NULL::gen, partition_by => '{k}');
SELECT keys, rows_spilled, state_bytes / keys < 64 AS under_64_bytes_a_key FROM last_call_stats();

-- keys beyond work_mem spill to disk and give the same results
SET work_mem = '64kB';
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.gen ORDER BY k, seq$$);
SELECT keys, rows_spilled > 0 AS spilled,
       state_bytes <= 2 * 128 * 1024 AS within_hash_mem FROM last_call_stats();
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}', on_time => 'ts',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.gen ORDER BY k, ts, seq$$);
SELECT keys, rows_spilled > 0 AS spilled FROM last_call_stats();
-- whole-row keys (the record layout), spilled, partitions spilled again
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen,
        partition_by => '{seq,k,k2,ts,payload}')$$,
    $$SELECT * FROM kf_diff.gen$$);
SELECT keys, rows_spilled > 100000 AS spilled_twice, spill_partitions > 16 AS partitions_split
  FROM last_call_stats();
-- updating input, spilled: each row's kind travels with it
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}',
        query => 'SELECT CASE WHEN seq % 3 = 0 THEN ''-D'' ELSE ''+I'' END, g FROM kf_diff.gen g ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.gen WHERE seq % 3 <> 0 ORDER BY k, seq$$);
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
-- watermarks and TTL replay identically from spill files: same as in memory
RESET work_mem;
CREATE TABLE wm_mem AS SELECT * FROM deduplicate_keep_first(NULL::gen, partition_by => '{k}',
    on_time => 'ts', watermark_delay => '2 hours', state_ttl => '1 hour', proc_time => 'ts',
    query => 'SELECT * FROM kf_diff.gen ORDER BY seq');
-- late rows and expired keys make it differ from the plain DISTINCT ON
SELECT count(*) AS rows, count(DISTINCT k) < count(*) AS keys_reemitted FROM wm_mem;
SET work_mem = '64kB';
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}',
        on_time => 'ts', watermark_delay => '2 hours', state_ttl => '1 hour', proc_time => 'ts',
        query => 'SELECT * FROM kf_diff.gen ORDER BY seq')$$,
    $$TABLE kf_diff.wm_mem$$);
SELECT rows_spilled > 0 AS spilled, rows_late > 0 AS late FROM last_call_stats();
RESET work_mem;

-- by arrival through ten incremental calls with a uid: the union of their
-- outputs is the one-shot result
CREATE TABLE incremental (LIKE gen);
DO $$
BEGIN
    FOR b IN 0..9 LOOP
        INSERT INTO kf_diff.incremental
        SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.gen, partition_by => '{k}',
            uid => 'diff-arrival',
            query => format('SELECT * FROM kf_diff.gen WHERE seq %% 10 = %s ORDER BY seq', b));
    END LOOP;
END $$;
SELECT * FROM compare($$TABLE kf_diff.incremental$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.gen ORDER BY k, seq % 10, seq$$);
SELECT keys, rows_in FROM state WHERE uid = 'diff-arrival';
SELECT drop_state('diff-arrival');

-- many keys by event time, rows in no order: the state outgrows the caches,
-- so rows come in batches whose keys and earlier candidates are prefetched
-- (the candidate a row replaces, before it is overwritten)
CREATE TABLE many AS
SELECT i AS seq, hashint4(i) & 65535 AS k,
       timestamptz '2024-01-01 00:00+00' + (hashint4(i * 7) & 1023) * interval '1 minute' AS ts,
       md5(i::text) AS payload
  FROM generate_series(1, 300000) i;
SET work_mem = '64MB';
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.many, partition_by => '{k}', on_time => 'ts',
        query => 'SELECT * FROM kf_diff.many ORDER BY seq')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.many ORDER BY k, ts, seq$$);
SELECT keys, rows_spilled, state_bytes > 4 * 1024 * 1024 AS beyond_the_caches FROM last_call_stats();
RESET work_mem;

-- integer keys the statistics say fill a range densely: a one-shot call
-- over the table marks the range's keys in a bitmap (by event time with a
-- slot each for the candidate).  Keys outside what ANALYZE saw (written
-- after it, below and above) and NULL go to the map; int2, int4 and int8;
-- in memory and with the map spilled.  Arrival is the order of the table's
-- scan
CREATE TABLE dense (seq int, k4 int, k2 smallint, k8 bigint, ts timestamptz, payload text);
INSERT INTO dense
SELECT i, (hashint4(i) & 8191) % 5001, (hashint4(i + 1) & 8191) % 301,
       1000000000000 + (hashint4(i + 2) & 8191) % 5001,
       timestamptz '2024-01-01 00:00+00' + (hashint4(i + 3) & 1023) * interval '1 minute',
       md5(i::text)
  FROM generate_series(1, 50000) i;
ANALYZE dense;
INSERT INTO dense
SELECT 50000 + i, k, k::smallint, 1000000000000 + k,
       timestamptz '2024-01-01 00:00+00' + (hashint4(i + 3) & 1023) * interval '1 minute',
       md5(i::text)
  FROM (SELECT i, CASE WHEN i % 10 = 0 THEN NULL
                       WHEN i % 2 = 0 THEN -1 - (hashint4(i) & 16383)
                       ELSE 5001 + (hashint4(i) & 16383) END AS k
          FROM generate_series(1, 40000) i) s;
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k4}')$$,
    $$SELECT DISTINCT ON (k4) * FROM kf_diff.dense ORDER BY k4, ctid$$);
SELECT keys, rows_spilled FROM last_call_stats();
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k2}')$$,
    $$SELECT DISTINCT ON (k2) * FROM kf_diff.dense ORDER BY k2, ctid$$);
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k8}')$$,
    $$SELECT DISTINCT ON (k8) * FROM kf_diff.dense ORDER BY k8, ctid$$);
SET work_mem = '64kB';
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k4}')$$,
    $$SELECT DISTINCT ON (k4) * FROM kf_diff.dense ORDER BY k4, ctid$$);
SELECT keys, rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;
-- by event time, ties by arrival: in memory; and at 256kB, where the
-- candidates outgrow the budget while the range's keys still come, the
-- later ones go to the map, which spills
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k4}', on_time => 'ts')$$,
    $$SELECT DISTINCT ON (k4) * FROM kf_diff.dense ORDER BY k4, ts, ctid$$);
SELECT keys, rows_spilled FROM last_call_stats();
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k8}', on_time => 'ts')$$,
    $$SELECT DISTINCT ON (k8) * FROM kf_diff.dense ORDER BY k8, ts, ctid$$);
SET work_mem = '256kB';
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense, partition_by => '{k4}', on_time => 'ts')$$,
    $$SELECT DISTINCT ON (k4) * FROM kf_diff.dense ORDER BY k4, ts, ctid$$);
SELECT keys, rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;
-- a bit a key: 50k keys in a few kB beside the map's 17 bytes or so a key
-- (the same rows, never analyzed)
CREATE TABLE dense_big AS
SELECT i AS seq, (hashint4(i) & 65535) % 50000 AS k FROM generate_series(1, 200000) i;
ANALYZE dense_big;
CREATE TABLE dense_big_unanalyzed WITH (autovacuum_enabled = off) AS TABLE dense_big;
SELECT count(*) FROM deduplicate_keep_first(NULL::dense_big, partition_by => '{k}');
SELECT keys, state_bytes < 64 * 1024 AS under_64kb FROM last_call_stats();
SELECT count(*) FROM deduplicate_keep_first(NULL::dense_big_unanalyzed, partition_by => '{k}');
SELECT keys, state_bytes > 512 * 1024 AS over_512kb FROM last_call_stats();
-- rows batched for prefetching (a range whose slots outgrow the caches, a map
-- of keys outside it as large): the first prefetch stage tells on_row where a
-- row's key is
CREATE TABLE dense_batched AS
SELECT i AS seq, (hashint4(i) & 131071) % 100000 AS k,
       timestamptz '2024-01-01 00:00+00' + (hashint4(i + 7) & 4095) * interval '1 minute' AS ts
  FROM generate_series(1, 200000) i;
ANALYZE dense_batched;
INSERT INTO dense_batched
SELECT 200000 + i, 100000 + (i * 7) % 150000,
       timestamptz '2024-01-01 00:00+00' + (hashint4(i + 7) & 4095) * interval '1 minute'
  FROM generate_series(1, 200000) i;
SET work_mem = '64MB';
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense_batched, partition_by => '{k}')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.dense_batched ORDER BY k, ctid$$);
SELECT * FROM compare(
    $$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_diff.dense_batched, partition_by => '{k}', on_time => 'ts')$$,
    $$SELECT DISTINCT ON (k) * FROM kf_diff.dense_batched ORDER BY k, ts, ctid$$);
RESET work_mem;
