-- Parallel one-shot calls (engine/parallel.c): keep-first by arrival and by
-- event time, window_aggregate and the temporal join give the serial call's
-- answer with parallel workers, on generated data with NULL keys, ties,
-- collations, numeric scales, and spills in workers and leader; fewer
-- workers than planned, none, errors in workers, privileges and row-level
-- security as for the serial call; what stays serial.

CREATE SCHEMA par;
SET search_path = par, ptf;
-- small tables go parallel: PostgreSQL's own rule, with its threshold at zero
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;

SELECT setseed(0.17);
CREATE TABLE gen AS
SELECT i AS seq,
       CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 3000)::int END AS k,
       CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 3)::int END AS k2,
       -- the same number at other scales: equal keys, distinct rows
       round((random() * 500)::numeric, 0) * CASE WHEN random() < 0.5 THEN 1.0 ELSE 1.00 END AS nk,
       (ARRAY['a', 'A', 'b', 'B', 'é', 'E', 'e'])[1 + (random() * 6)::int] || (random() * 20)::int AS tk,
       timestamptz '2024-01-01 00:00+00' + (random() * 300)::int * interval '1 minute' AS ts,
       (random() * 1000)::numeric(10,2) AS v,
       md5(i::text) AS payload
FROM generate_series(1, 60000) i;
-- plenty of ties in event time; blocks enough for many chunks
SELECT count(*) - count(DISTINCT (k, ts)) > 500 AS has_ties,
       pg_relation_size('gen') / 8192 > 200 AS many_blocks FROM gen;

-- got (parallel) against expected (the same call serial): both counts, both differences,
-- and the workers it got: 'none' planned, 'all' planned, or 'L of P'.  (Not how many:
-- a call of partial states plans one worker fewer than the CPUs when the workers would
-- take them all, so that its leader reads -- a machine's number.)
CREATE FUNCTION compare(sql text, workers int DEFAULT 2)
RETURNS TABLE (got bigint, expected bigint, missing bigint, extra bigint, workers_got text)
LANGUAGE plpgsql AS $$
DECLARE
    planned int;
    launched int;
BEGIN
    SET LOCAL max_parallel_workers_per_gather = 0;
    EXECUTE format('CREATE TEMP TABLE e AS %s', sql);
    EXECUTE format('SET LOCAL max_parallel_workers_per_gather = %s', workers);
    EXECUTE format('CREATE TEMP TABLE g AS %s', sql);
    SELECT workers_planned, workers_launched INTO planned, launched FROM ptf.last_call_stats();
    RETURN QUERY SELECT (SELECT count(*) FROM g), (SELECT count(*) FROM e),
        (SELECT count(*) FROM (TABLE e EXCEPT ALL TABLE g) x),
        (SELECT count(*) FROM (TABLE g EXCEPT ALL TABLE e) x),
        CASE WHEN planned = 0 THEN 'none' WHEN launched = planned THEN 'all'
             ELSE format('%s of %s', launched, planned) END;
    DROP TABLE g, e;
END $$;

-- keep-first by arrival: one key, two keys, numeric scales, text under collations
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k2,k}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{nk}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{tk}')$$);
CREATE COLLATION par_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE gen_ci AS SELECT seq, tk COLLATE par_ci AS tk, ts, payload FROM gen;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen_ci, partition_by => '{tk}')$$);
-- the first row per key is the serial call's: by scan position, not by value
SELECT count(*) AS scale_kept_as_first_seen
  FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{nk}') f
  JOIN (SELECT DISTINCT ON (nk) * FROM par.gen ORDER BY nk, ctid) d USING (seq)
 WHERE f.nk::text = d.nk::text;
SELECT count(DISTINCT nk) AS keys FROM gen;

-- keep-first by event time: ties kept by arrival, as the serial call
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', on_time => 'ts')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k2}', on_time => 'ts')$$);

-- spills: a small work_mem in workers (they pass rows on) and leader (it spills)
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{seq}')$$);
SELECT rows_spilled > 0 AS leader_spilled FROM ptf.last_call_stats();
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{seq}', on_time => 'ts')$$);
SELECT rows_spilled > 0 AS leader_spilled FROM ptf.last_call_stats();
RESET work_mem;

-- fewer workers than planned: one, and none (the leader reads every chunk)
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}')$$, 1);
SET max_parallel_workers = 0;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', on_time => 'ts')$$);
RESET max_parallel_workers;

-- rows read counted as the serial call counts them
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}');
SELECT rows_in, rows_out, keys, workers_planned FROM ptf.last_call_stats();

-- window_aggregate: partial slice states combined (numeric sum and avg, count, min)
CREATE TYPE wa_out AS (k2 int, window_start timestamptz, window_end timestamptz,
                       n bigint, s numeric, a numeric, lo numeric);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out, 'tumble', 'ts', '1 hour',
    partition_by => '{k2}', aggregates => 'count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo')$$);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out, 'hop', 'ts', '1 hour', '20 minutes',
    partition_by => '{k2}', aggregates => 'count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo')$$);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out, 'cumulate', 'ts', '1 hour', '15 minutes',
    partition_by => '{k2}', aggregates => 'count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo')$$);
-- one worker: the leader reads chunks besides (so it does with a worker fewer
-- than the CPUs, which such a call plans when the workers would take them all)
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out, 'hop', 'ts', '1 hour', '20 minutes',
    partition_by => '{k2}', aggregates => 'count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo')$$, 1);
-- the leader only combines and fires (as with a worker on every CPU)
SET parallel_leader_participation = off;
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out, 'tumble', 'ts', '1 hour',
    partition_by => '{k2}', aggregates => 'count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo')$$);
RESET parallel_leader_participation;
CREATE TYPE wa_out2 AS (k int, window_start timestamptz, window_end timestamptz, n bigint, s numeric);
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$);
SELECT rows_spilled > 0 AS leader_spilled FROM ptf.last_call_stats();
RESET work_mem;
-- as many (key, slice) groups as rows, by the statistics: partial states do
-- not pay; each worker computes the windows of a share of the keys, reading
-- the whole table (BY_KEY)
ANALYZE gen;
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$);
SELECT rows_in = (SELECT count(*) FROM par.gen) AS rows_in_counts_each_once,
       rows_out = (SELECT count(*) FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour',
           '30 minutes', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')) AS rows_out_all
  FROM ptf.last_call_stats();
-- its state is the workers' (and the leader's, when it takes a share): the
-- call's memory sums theirs, as large as the serial call's -- each sized
-- for its share of the keys
SET max_parallel_workers_per_gather = 0;
SELECT count(*) > 0 AS ran FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s');
SELECT state_bytes AS serial_bytes FROM ptf.last_call_stats() \gset
SET max_parallel_workers_per_gather = 2;
SELECT count(*) > 0 AS ran FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s');
SELECT workers_launched, state_bytes > :serial_bytes / 2 AS workers_state_counted FROM ptf.last_call_stats();
-- as many keys as rows: the state is mostly its table of keys, sized for a
-- share of them in each worker and for none in the leader (when each was
-- sized for them all, the call held 1.05x the serial call's bytes); the
-- leader without a share of its own (it takes one when a CPU is left for
-- it, and three tables of a third are more than two of a half)
CREATE TABLE uniq AS
SELECT i AS k, timestamptz '2024-01-01 00:00+00' + (i % 1000) * interval '1 minute' AS ts
  FROM generate_series(1, 100000) i;
ANALYZE uniq;
CREATE TYPE uniq_out AS (k int, window_start timestamptz, window_end timestamptz, n bigint);
SET work_mem = '256MB';
SET max_parallel_workers_per_gather = 0;
SELECT count(*) AS windows FROM ptf.window_aggregate(NULL::par.uniq, NULL::par.uniq_out, 'tumble', 'ts', '1 hour',
    partition_by => '{k}', aggregates => 'count(*) AS n');
SELECT state_bytes AS serial_bytes FROM ptf.last_call_stats() \gset
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
SELECT count(*) AS windows FROM ptf.window_aggregate(NULL::par.uniq, NULL::par.uniq_out, 'tumble', 'ts', '1 hour',
    partition_by => '{k}', aggregates => 'count(*) AS n');
SELECT workers_launched, rows_spilled, state_bytes BETWEEN :serial_bytes * 0.9 AND :serial_bytes * 1.02 AS sized_once
  FROM ptf.last_call_stats();
RESET parallel_leader_participation;
RESET work_mem;
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'cumulate', 'ts', '1 hour', '10 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$);
-- text under a nondeterministic collation: keys equal but unlike in one share
ANALYZE gen_ci;
CREATE TYPE wa_out3 AS (tk text, window_start timestamptz, window_end timestamptz, n bigint, s bigint);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen_ci, NULL::par.wa_out3, 'tumble', 'ts', '1 minute',
    partition_by => '{tk}', aggregates => 'count(*) AS n, sum(seq) AS s')$$);
-- sessions, which partial states cannot split, go by key too
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'session', 'ts', '3 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$);
-- spilling in the workers; one worker (one share); none (the leader reads every share)
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$);
RESET work_mem;
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$, 1);
SET max_parallel_workers = 0;
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'hop', 'ts', '1 hour', '30 minutes',
    partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')$$);
RESET max_parallel_workers;
-- few groups: parallel
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out, 'tumble', 'ts', '1 hour',
    partition_by => '{k2}', aggregates => 'count(*) AS n, sum(v) AS s, avg(v) AS a, min(v) AS lo')$$);
-- keep-first the same way: as many keys as rows, by the statistics (workers would
-- pass on every row), serial, by arrival and by event time; 3000 keys: parallel by
-- arrival (20 rows a key, 6.7 a participant: four needed), serial by event time (a
-- worker passes on each new least time of a key, about ln r + 0.58 of its r rows:
-- twelve needed); the statistics saying 500 keys, parallel by event time too
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{seq}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{seq}', on_time => 'ts')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', on_time => 'ts')$$);
ALTER TABLE gen ALTER COLUMN k SET (n_distinct = 500);
ANALYZE gen;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', on_time => 'ts')$$);
-- an integer key filling the range the statistics give: workers filter it with
-- a bitmap (by event time the least times beside it), as the leader keeps it;
-- keys written after ANALYZE below and above the range, and NULL, go to the
-- map, and rows of the range at earlier times come in later chunks
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}')$$);
-- (its statistics stay those of before the INSERT: no autovacuum's ANALYZE)
CREATE TABLE gen_dense WITH (autovacuum_enabled = off) AS SELECT * FROM gen;
ALTER TABLE gen_dense ALTER COLUMN k SET (n_distinct = 500);
ANALYZE gen_dense;
INSERT INTO gen_dense
SELECT seq + 60000,
       CASE WHEN seq % 10 = 0 THEN -1 - k WHEN seq % 10 = 3 THEN k + 5000 ELSE k END,
       k2, nk, tk, ts - interval '1 day', v, payload
  FROM gen WHERE seq % 3 = 0;
SELECT count(*) FILTER (WHERE k < 0) > 0 AS below, count(*) FILTER (WHERE k > 3000) > 0 AS above,
       count(*) FILTER (WHERE k IS NULL) > 0 AS nulls FROM gen_dense;
-- the workers read every range (the leader only combines): their filters decide
SET parallel_leader_participation = off;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen_dense, partition_by => '{k}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen_dense, partition_by => '{k}', on_time => 'ts')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', on_time => 'ts')$$);
RESET parallel_leader_participation;
-- the leader reads ranges too (which, timing decides)
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen_dense, partition_by => '{k}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen_dense, partition_by => '{k}', on_time => 'ts')$$);
ALTER TABLE gen ALTER COLUMN k RESET (n_distinct);
ANALYZE gen;
-- an aggregate without a combine function: by key (over 3000 keys; over 3
-- and NULL, serial: by their hash a share could hold every row); a
-- parallel-unsafe one: serial
CREATE TYPE wa_arr AS (k int, window_start timestamptz, window_end timestamptz, a numeric[]);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_arr, 'tumble', 'ts', '1 hour',
    partition_by => '{k}', aggregates => 'array_agg(v ORDER BY seq) AS a')$$);
CREATE TYPE wa_arr2 AS (k2 int, window_start timestamptz, window_end timestamptz, a numeric[]);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_arr2, 'tumble', 'ts', '1 hour',
    partition_by => '{k2}', aggregates => 'array_agg(v ORDER BY seq) AS a')$$);
CREATE FUNCTION unsafe_sum(numeric, numeric) RETURNS numeric LANGUAGE sql PARALLEL UNSAFE
    AS 'SELECT $1 + $2';
CREATE AGGREGATE unsafe_total(numeric) (sfunc = unsafe_sum, stype = numeric, combinefunc = unsafe_sum,
    parallel = unsafe);
SELECT * FROM compare($$SELECT * FROM ptf.window_aggregate(NULL::par.gen, NULL::par.wa_out2, 'tumble', 'ts', '1 hour',
    partition_by => '{k}', aggregates => 'count(*) AS n, unsafe_total(v) AS s')$$);

-- temporal join: probes split, versions read by every participant
CREATE TABLE versions AS
SELECT DISTINCT ON (k2, ts) k2, ts, (random() * 100)::numeric(6,2) AS rate
  FROM (SELECT CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 3)::int END AS k2,
               timestamptz '2024-01-01 00:00+00' + (random() * 300)::int * interval '1 minute' AS ts
          FROM generate_series(1, 500)) g ORDER BY k2, ts;
SELECT * FROM compare($$SELECT * FROM ptf.temporal_join(NULL::par.gen, NULL::par.versions, 'ts', 'ts', '{k2}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.temporal_join(NULL::par.gen, NULL::par.versions, 'ts', 'ts', '{k2}',
    join_type => 'left', condition => 'build.rate < probe.v')$$);
-- one worker
SELECT * FROM compare($$SELECT * FROM ptf.temporal_join(NULL::par.gen, NULL::par.versions, 'ts', 'ts', '{k2}')$$, 1);
SET work_mem = '64kB';
SELECT * FROM compare($$SELECT * FROM ptf.temporal_join(NULL::par.gen, NULL::par.versions, 'ts', 'ts', '{k2}', join_type => 'left')$$);
RESET work_mem;
-- the leader only emitting: rows_in counts the probes and the versions once, as serially
SET parallel_leader_participation = off;
SELECT count(*) > 0 AS joined FROM ptf.temporal_join(NULL::par.gen, NULL::par.versions, 'ts', 'ts', '{k2}');
SELECT rows_in = (SELECT count(*) FROM par.gen) + (SELECT count(*) FROM par.versions) AS rows_in_counts_each_once
  FROM ptf.last_call_stats();
RESET parallel_leader_participation;

-- what stays serial: a query input, a uid, a TTL, a watermark delay
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', query => 'SELECT * FROM par.gen')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', state_ttl => '1 hour')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', on_time => 'ts',
    watermark_delay => '10 minutes')$$);
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}', uid => 'par_uid');
SELECT workers_planned FROM ptf.last_call_stats();
SELECT ptf.drop_state('par_uid');
-- too small for PostgreSQL's rule
RESET min_parallel_table_scan_size;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}')$$);
SET min_parallel_table_scan_size = 0;
-- the table's own parallel_workers
ALTER TABLE gen SET (parallel_workers = 0);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}')$$);
ALTER TABLE gen RESET (parallel_workers);
-- keys whose hash and equality call functions that are not parallel safe for their parts
-- (hash_record a field's, hash_array an element's): serial, as the key's own would make it
CREATE FUNCTION pt_eq(point, point) RETURNS bool LANGUAGE sql IMMUTABLE
    AS 'SELECT $1[0] = $2[0] AND $1[1] = $2[1]';
CREATE FUNCTION pt_hash(point) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL UNSAFE
    AS 'SELECT hashfloat8($1[0]) # hashfloat8($1[1])';
CREATE OPERATOR = (leftarg = point, rightarg = point, function = pt_eq, hashes);
CREATE OPERATOR CLASS point_hash_ops DEFAULT FOR TYPE point USING hash AS
    OPERATOR 1 = (point, point), FUNCTION 1 pt_hash(point);
CREATE TYPE ptk AS (a int, p point);
CREATE TABLE ph AS SELECT g AS id, ROW(g % 5, point(g % 7, 0))::ptk AS k,
    ARRAY[point(g % 9, 1)] AS ka, g % 11 AS n FROM generate_series(1, 100000) g;
ANALYZE ph;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.ph, partition_by => '{k}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.ph, partition_by => '{ka}')$$);
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.ph, partition_by => '{n}')$$);
DROP TABLE ph;
DROP TYPE ptk;
DROP OPERATOR FAMILY point_hash_ops USING hash;
DROP OPERATOR = (point, point);
DROP FUNCTION pt_eq(point, point), pt_hash(point);

-- an error in a worker reaches the caller as the serial call raises it (the
-- context says which statement, and which process, read the row)
\set VERBOSITY terse
CREATE TABLE gen_null AS SELECT * FROM gen;
UPDATE gen_null SET ts = NULL WHERE seq = 45000;
SET max_parallel_workers_per_gather = 0;
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::par.gen_null, partition_by => '{k}', on_time => 'ts');
SET max_parallel_workers_per_gather = 2;
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::par.gen_null, partition_by => '{k}', on_time => 'ts');
\set VERBOSITY default
-- and the session goes on
SELECT count(*) > 0 AS fine FROM ptf.deduplicate_keep_first(NULL::par.gen, partition_by => '{k}');

-- privileges and row-level security hold as for the serial call
CREATE ROLE regress_ptf_par_reader;
GRANT USAGE ON SCHEMA par TO regress_ptf_par_reader;
CREATE TABLE secret AS SELECT * FROM gen;
ALTER TABLE secret ENABLE ROW LEVEL SECURITY;
CREATE POLICY low_keys ON secret FOR SELECT TO regress_ptf_par_reader USING (k < 1000);
SET ROLE regress_ptf_par_reader;
\set VERBOSITY terse
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::par.secret, partition_by => '{k}');
\set VERBOSITY default
RESET ROLE;
GRANT SELECT ON secret TO regress_ptf_par_reader;
GRANT EXECUTE ON FUNCTION compare(text, int) TO regress_ptf_par_reader;
SET ROLE regress_ptf_par_reader;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.secret, partition_by => '{k}')$$);
SELECT count(*) FILTER (WHERE k >= 1000 OR k IS NULL) AS hidden_rows
  FROM ptf.deduplicate_keep_first(NULL::par.secret, partition_by => '{k}');
RESET ROLE;
-- a policy calling a parallel-unsafe function: serial, same answer
CREATE FUNCTION unsafe_low(int) RETURNS boolean LANGUAGE sql PARALLEL UNSAFE AS 'SELECT $1 < 500';
CREATE POLICY unsafe_keys ON secret AS RESTRICTIVE FOR SELECT TO regress_ptf_par_reader USING (unsafe_low(k));
SET ROLE regress_ptf_par_reader;
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.secret, partition_by => '{k}')$$);
RESET ROLE;
-- a policy an index answers: the serial call's statement reads by the index,
-- not in block order, and the call stays serial (same answer)
CREATE TABLE secret_few AS SELECT * FROM gen;
CREATE INDEX ON secret_few (k);
ANALYZE secret_few;
ALTER TABLE secret_few ENABLE ROW LEVEL SECURITY;
CREATE POLICY one_key ON secret_few FOR SELECT TO regress_ptf_par_reader USING (k = 7);
GRANT SELECT ON secret_few TO regress_ptf_par_reader;
CREATE FUNCTION plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS
$$ BEGIN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || q; END $$;
SET ROLE regress_ptf_par_reader;
SELECT count(*) > 0 AS by_index FROM plan_of('SELECT * FROM par.secret_few') line
 WHERE line ~ 'Index|Bitmap';
SELECT * FROM compare($$SELECT * FROM ptf.deduplicate_keep_first(NULL::par.secret_few, partition_by => '{seq}')$$);
RESET ROLE;

RESET max_parallel_workers_per_gather;
RESET min_parallel_table_scan_size;
DROP SCHEMA par CASCADE;
DROP ROLE regress_ptf_par_reader;
