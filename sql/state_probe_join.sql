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

SELECT count(*) FILTER (WHERE drop_state(uid)) AS dropped FROM state;
DROP SCHEMA spj CASCADE;
