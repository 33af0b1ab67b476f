-- Differential test on generated data: ptf.temporal_join equals its
-- plain-SQL formulation, a LATERAL subquery taking the newest version at or
-- below the probe's time, INNER and LEFT, with NULL keys, keys without
-- versions and probes before any version; in memory, spilled to disk, and
-- with live watermarks (buffering, firing and version cleanup as it goes).
CREATE SCHEMA tj_diff;
SET search_path = tj_diff, ptf;

SELECT setseed(0.7);
-- versions: 30k over 2000 keys, one per (key, time)
CREATE TABLE versions AS
SELECT DISTINCT ON (k, ts) k, ts, rate
  FROM (SELECT (random() * 2000)::int AS k,
               timestamptz '2024-01-01 00:00+00' + (random() * 1000000)::int * interval '1 second' AS ts,
               round((random() * 100)::numeric, 2) AS rate
          FROM generate_series(1, 30000)) g
 ORDER BY k, ts, rate;
CREATE INDEX ON versions (k, ts);
-- probes: 120k in time order, keys 0..2100 (some without versions), 5% NULL
CREATE TABLE probes AS
SELECT i AS id,
       CASE WHEN random() < 0.05 THEN NULL ELSE (random() * 2100)::int END AS k,
       timestamptz '2024-01-01 00:00+00' + (i * 8 + (random() * 7)::int) * interval '1 second' AS ts,
       md5(i::text) AS payload
  FROM generate_series(1, 120000) i;
ANALYZE versions, probes;

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

CREATE VIEW inner_sql AS
SELECT p.id, p.k, p.ts, p.payload, v.k AS vk, v.ts AS vts, v.rate
  FROM probes p
  JOIN LATERAL (SELECT * FROM versions v WHERE v.k = p.k AND v.ts <= p.ts
                 ORDER BY v.ts DESC LIMIT 1) v ON true;
CREATE VIEW left_sql AS
SELECT p.id, p.k, p.ts, p.payload, v.k AS vk, v.ts AS vts, v.rate
  FROM probes p
  LEFT JOIN LATERAL (SELECT * FROM versions v WHERE v.k = p.k AND v.ts <= p.ts
                      ORDER BY v.ts DESC LIMIT 1) v ON true;

CREATE FUNCTION tj(join_type text, delay interval DEFAULT NULL, condition text DEFAULT NULL)
RETURNS TABLE (id int, k int, ts timestamptz, payload text, vk int, vts timestamptz, rate numeric)
LANGUAGE sql AS $$
    SELECT (probe).id, (probe).k, (probe).ts, (probe).payload, (build).k, (build).ts, (build).rate
      FROM ptf.temporal_join(NULL::tj_diff.probes, NULL::tj_diff.versions, 'ts', 'ts', '{k}',
                             join_type => join_type, watermark_delay => delay, condition => condition,
                             probe_query => 'SELECT * FROM tj_diff.probes ORDER BY id')
$$;

-- every version applies to some probe, most probes match
SELECT count(*) AS inner_rows, count(*) FILTER (WHERE rate IS NOT NULL) AS matched FROM left_sql;

-- in memory: the watermark only moves at the end, probes join on arrival
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''inner'')', 'SELECT * FROM tj_diff.inner_sql');
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''left'')', 'SELECT * FROM tj_diff.left_sql');
SELECT rows_in, rows_out, rows_late, rows_spilled FROM last_call_stats();

-- a residual condition on the chosen version only: LATERAL ... ON cond
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''left'', condition => ''build.rate < 50 OR probe.id % 3 = 0'')',
    $$SELECT p.id, p.k, p.ts, p.payload, v.k AS vk, v.ts AS vts, v.rate
        FROM tj_diff.probes p
        LEFT JOIN LATERAL (SELECT * FROM tj_diff.versions v WHERE v.k = p.k AND v.ts <= p.ts
                            ORDER BY v.ts DESC LIMIT 1) v ON v.rate < 50 OR p.id % 3 = 0$$);

-- live watermarks (1 minute behind each side): probes buffered per key and
-- fired as the probe side's watermark passes them, versions cleaned up as
-- it goes; probes come in time order with gaps of 8 s or less, so none is late
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''inner'', ''1 minute'')', 'SELECT * FROM tj_diff.inner_sql');
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''left'', ''1 minute'')', 'SELECT * FROM tj_diff.left_sql');
SELECT rows_in, rows_out, rows_late, rows_spilled FROM last_call_stats();

-- spilled: keys that do not fit in work_mem go to disk with all their rows
SET work_mem = '64kB';
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''inner'')', 'SELECT * FROM tj_diff.inner_sql');
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''left'')', 'SELECT * FROM tj_diff.left_sql');
SELECT rows_in, rows_out, rows_late, rows_spilled > 0 AS spilled, spill_partitions > 0 AS partitions
  FROM last_call_stats();
SELECT * FROM compare('SELECT * FROM tj_diff.tj(''left'', ''1 minute'')', 'SELECT * FROM tj_diff.left_sql');
SELECT rows_in, rows_out, rows_late, rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

DROP SCHEMA tj_diff CASCADE;
