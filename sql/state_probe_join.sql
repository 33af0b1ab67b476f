-- The temporal join under a uid, its state read key by key (ptf.state_load
-- = probe) or whole (full): the same output, call after call.  Probes
-- buffered in one call fire in a later one whose rows are of other keys:
-- their keys are found through the index on the timer field.
CREATE SCHEMA spj;
SET search_path = spj, ptf;
SET TIME ZONE 'UTC';

SELECT setseed(0.3);
-- versions over 3000 keys, probes over 3300 keys (some without versions),
-- both in 8 batches in time order, with some disorder
CREATE TABLE versions AS
SELECT DISTINCT ON (k, ts) k, ts, rate, batch
  FROM (SELECT (random() * 3000)::int AS k,
               timestamptz '2024-01-01' + (i * 20 + (random() * 30)::int) * interval '1 second' AS ts,
               round((random() * 100)::numeric, 2) AS rate,
               i / 2500 AS batch
          FROM generate_series(0, 19999) i) g
 ORDER BY k, ts, rate;
CREATE TABLE probes AS
SELECT i AS id, (random() * 3300)::int AS k,
       timestamptz '2024-01-01' + (i * 5 + (random() * 60)::int) * interval '1 second' AS ts,
       i / 10000 AS batch
  FROM generate_series(0, 79999) i;

CREATE TABLE out_full (n int, r text);
CREATE TABLE out_probe (n int, r text);

CREATE FUNCTION run_both(join_type text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE out_full, out_probe;
    FOR b IN 0 .. 7 LOOP
        SET LOCAL ptf.state_load = full;
        EXECUTE format($q$INSERT INTO spj.out_full SELECT %s, x::text FROM (
            SELECT (probe).id, (build).rate FROM ptf.temporal_join(NULL::spj.probes, NULL::spj.versions,
                'ts', 'ts', '{k}', join_type => %L, watermark_delay => interval '2 minutes',
                uid => %L, probe_query => 'SELECT * FROM spj.probes WHERE batch = %s ORDER BY id',
                build_query => 'SELECT * FROM spj.versions WHERE batch = %s ORDER BY ts')) x$q$,
            b, join_type, 'full-' || join_type, b, b);
        SET LOCAL ptf.state_load = probe;
        -- memory for a few keys: most are evicted and read again
        SET LOCAL ptf.state_memory_limit = '64kB';
        EXECUTE format($q$INSERT INTO spj.out_probe SELECT %s, x::text FROM (
            SELECT (probe).id, (build).rate FROM ptf.temporal_join(NULL::spj.probes, NULL::spj.versions,
                'ts', 'ts', '{k}', join_type => %L, watermark_delay => interval '2 minutes',
                uid => %L, probe_query => 'SELECT * FROM spj.probes WHERE batch = %s ORDER BY id',
                build_query => 'SELECT * FROM spj.versions WHERE batch = %s ORDER BY ts')) x$q$,
            b, join_type, 'probe-' || join_type, b, b);
    END LOOP;
END $$;

SELECT run_both('inner');
SELECT count(*) > 50000 AS many_joined FROM out_probe;
SELECT (SELECT count(*) FROM (TABLE out_full EXCEPT ALL TABLE out_probe) x) AS missing,
       (SELECT count(*) FROM (TABLE out_probe EXCEPT ALL TABLE out_full) x) AS extra;
SELECT state_load FROM last_call_stats();

SELECT run_both('left');
SELECT (SELECT count(*) FROM (TABLE out_full EXCEPT ALL TABLE out_probe) x) AS missing,
       (SELECT count(*) FROM (TABLE out_probe EXCEPT ALL TABLE out_full) x) AS extra;
-- both states hold the same keys
SELECT uid, keys FROM state WHERE uid LIKE '%-left' ORDER BY uid;

-- with a TTL the join has processing-time timers: its state is read whole
SET ptf.state_load = probe;
SELECT count(*) FROM ptf.temporal_join(NULL::probes, NULL::versions, 'ts', 'ts', '{k}',
    state_ttl => interval '1 hour', uid => 'ttl',
    probe_query => 'SELECT * FROM spj.probes WHERE batch = 0', build_query => 'SELECT * FROM spj.versions WHERE batch = 0');
SELECT state_load FROM last_call_stats();
RESET ptf.state_load;

-- a version deleted at a time the watermark had passed gives its key a
-- timer below the stored watermark: a call reading key by key finds it
-- when the watermark next moves, whatever keys its rows are of, as a call
-- holding the state whole does (order 11 with rate 101, in the third call)
CREATE TABLE r1 (cur int, rate_time timestamptz, rate int);
ALTER TABLE r1 REPLICA IDENTITY FULL;
CREATE TABLE o1 (oid int, cur int, order_time timestamptz);
CREATE TABLE tj_out (mode text, step int, oid int, rate int);
SELECT count(*) FROM ptf.temporal_join(NULL::o1, NULL::r1, 'order_time', 'rate_time', '{cur}',
    uid => 'del-full', changes => true);
SELECT count(*) FROM ptf.temporal_join(NULL::o1, NULL::r1, 'order_time', 'rate_time', '{cur}',
    uid => 'del-probe', changes => true);
CREATE FUNCTION tj_step(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL ptf.state_load = full;
    INSERT INTO spj.tj_out SELECT 'full', n, (probe).oid, (build).rate
      FROM ptf.temporal_join(NULL::spj.o1, NULL::spj.r1, 'order_time', 'rate_time', '{cur}',
                             uid => 'del-full', changes => true);
    SET LOCAL ptf.state_load = probe;
    INSERT INTO spj.tj_out SELECT 'probe', n, (probe).oid, (build).rate
      FROM ptf.temporal_join(NULL::spj.o1, NULL::spj.r1, 'order_time', 'rate_time', '{cur}',
                             uid => 'del-probe', changes => true);
END $$;
INSERT INTO r1 VALUES (1, '2024-01-01 01:00', 100), (1, '2024-01-01 02:30', 101), (2, '2024-01-01 01:00', 200);
INSERT INTO o1 VALUES (11, 1, '2024-01-01 03:00'), (12, 2, '2024-01-01 03:00');
SELECT tj_step(1);
INSERT INTO r1 VALUES (2, '2024-01-01 02:45', 201);
DELETE FROM r1 WHERE rate = 100;
SELECT tj_step(2);
INSERT INTO r1 VALUES (2, '2024-01-01 04:00', 202);
INSERT INTO o1 VALUES (13, 2, '2024-01-01 05:00');
SELECT tj_step(3);
SELECT mode, step, oid, rate FROM tj_out ORDER BY mode, step, oid;

-- an index over the key's hash, or its columns, of another kind or
-- operator class than the state's own (made by the table's owner) is not
-- read through: the call makes its own (before, a hash index over the same
-- expression answered nothing, and every stored key came out again)
CREATE TABLE lk AS SELECT i AS seq, (SELECT string_agg(md5((i % 400)::text || j), '') FROM generate_series(1, 60) j) AS k
  FROM generate_series(1, 800) i;
CREATE TABLE ik AS SELECT i AS seq, i % 400 AS k FROM generate_series(1, 800) i;
SET ptf.state_load = probe;
SELECT count(*) FROM deduplicate_keep_first(NULL::lk, partition_by => '{k}', uid => 'lk',
    query => 'SELECT * FROM spj.lk WHERE seq <= 400');
SELECT count(*) FROM deduplicate_keep_first(NULL::ik, partition_by => '{k}', uid => 'ik',
    query => 'SELECT * FROM spj.ik WHERE seq <= 400');
SELECT format('DROP INDEX %s', indexrelid::regclass) AS drop_own,
       format('CREATE INDEX ON %s USING hash (hash_record_extended(ROW(k), 0))', indrelid::regclass) AS make_other
  FROM pg_index WHERE indrelid = (SELECT state_table FROM state WHERE uid = 'lk') AND indexprs IS NOT NULL \gset
:drop_own;
:make_other;
SELECT format('DROP INDEX %s', indexrelid::regclass) AS drop_own,
       format('CREATE INDEX ON %s USING hash (k)', indrelid::regclass) AS make_other
  FROM pg_index WHERE indrelid = (SELECT state_table FROM state WHERE uid = 'ik') AND indkey[0] = 1 \gset
:drop_own;
:make_other;
SELECT count(*) FROM deduplicate_keep_first(NULL::lk, partition_by => '{k}', uid => 'lk',
    query => 'SELECT * FROM spj.lk WHERE seq > 400');
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();
SELECT count(*) FROM deduplicate_keep_first(NULL::ik, partition_by => '{k}', uid => 'ik',
    query => 'SELECT * FROM spj.ik WHERE seq > 400');
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();
SELECT uid, keys FROM state WHERE uid IN ('lk', 'ik') ORDER BY uid;
RESET ptf.state_load;

SELECT count(*) FILTER (WHERE drop_state(uid)) AS dropped FROM state;
DROP SCHEMA spj CASCADE;
