-- Spilling: past work_mem, a call gives the same rows as in memory.  Each
-- case is run with a tiny work_mem and a large one and the results compared
-- both ways; the tiny run must have spilled.

CREATE SCHEMA kf_spill;
SET search_path = kf_spill, ptf;
SET TIME ZONE 'UTC';

-- runs a query with a small work_mem (64kB) and 64MB: rows only in one, and
-- whether the small run spilled
CREATE FUNCTION spill_vs_memory(q text, small_work_mem text DEFAULT '64kB')
RETURNS TABLE (rows bigint, only_spilled bigint, only_in_memory bigint, spilled boolean)
LANGUAGE plpgsql AS $$
DECLARE
    did_spill boolean;
BEGIN
    PERFORM set_config('work_mem', small_work_mem, true);
    EXECUTE format('CREATE TEMP TABLE s AS %s', q);
    SELECT rows_spilled > 0 INTO did_spill FROM ptf.last_call_stats();
    SET LOCAL work_mem = '64MB';
    EXECUTE format('CREATE TEMP TABLE m AS %s', q);
    RETURN QUERY SELECT (SELECT count(*) FROM m),
        (SELECT count(*) FROM (TABLE s EXCEPT ALL TABLE m) x),
        (SELECT count(*) FROM (TABLE m EXCEPT ALL TABLE s) x), did_spill;
    DROP TABLE s, m;
END $$;

-- 3000 filler keys first fill the memory; the keys under test come after
CREATE TABLE ev (k text, t bigint, p timestamptz, payload text);
INSERT INTO ev SELECT 'filler' || i, i, timestamptz '2024-01-01 09:00' + i * interval '1 ms', 'f'
  FROM generate_series(1, 3000) i;

-- a key spilled once never comes back into memory, even when memory is freed
-- meanwhile: a 3 MB candidate fills the memory, "late" spills, the 3 MB row
-- is replaced by a small one, and "late" arrives again
CREATE TABLE big (k text, t bigint, payload text);
SELECT * FROM spill_vs_memory($$SELECT k, t FROM ptf.deduplicate_keep_first(NULL::kf_spill.big,
    partition_by => '{k}', on_time => 't',
    query => 'VALUES (''big'', 100::bigint, repeat(''x'', 3000000)), (''late'', 100, ''b''),
                     (''big'', 50, ''a''), (''late'', 10, ''b2'')')$$, '1MB');
SELECT k, t FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', on_time => 't',
    query => $$VALUES ('big', 100::bigint, repeat('x', 3000000)), ('late', 100, 'b'),
                      ('big', 50, 'a'), ('late', 10, 'b2')$$) ORDER BY k;

-- the same with the keys under test after the fillers
INSERT INTO ev VALUES ('big', 100, '2024-01-01 10:00', repeat('x', 3000000)),
                      ('late', 100, '2024-01-01 10:00', 'b'),
                      ('big', 50, '2024-01-01 10:00', 'a'),
                      ('late', 10, '2024-01-01 10:00', 'b2');
SELECT * FROM spill_vs_memory($$SELECT k, t FROM ptf.deduplicate_keep_first(NULL::kf_spill.ev,
    partition_by => '{k}', on_time => 't', query => 'SELECT * FROM kf_spill.ev ORDER BY p')$$);
SELECT k, t FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', on_time => 't',
    query => 'SELECT * FROM ev ORDER BY p') WHERE k NOT LIKE 'filler%' ORDER BY k;

-- rows replayed from spill files are proper tuples: sorting them works
UPDATE ev SET t = t + 5000 WHERE k NOT LIKE 'filler%';
SET work_mem = '64kB';
SELECT k, t FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', on_time => 't',
    watermark_delay => '0', query => 'SELECT * FROM ev ORDER BY p')
 WHERE k NOT LIKE 'filler%' ORDER BY t, k;
SELECT rows_spilled > 0 AS spilled FROM last_call_stats();
RESET work_mem;

-- TTL starts when the watermark emits a candidate, at the processing time
-- the watermark moved at, also for keys replayed from spill files: K's
-- first row is emitted at 10:00, expires 10:05, K comes again at 10:06
DELETE FROM ev WHERE k NOT LIKE 'filler%';
INSERT INTO ev VALUES ('Z', 5000, '2024-01-01 10:00', ''), ('K', 5010, '2024-01-01 10:00', ''),
                      ('X', 5020, '2024-01-01 10:01', ''), ('K', 5025, '2024-01-01 10:06', '');
SELECT * FROM spill_vs_memory($$SELECT k, t FROM ptf.deduplicate_keep_first(NULL::kf_spill.ev,
    partition_by => '{k}', on_time => 't', watermark_delay => '0', state_ttl => '5 min',
    proc_time => 'p', query => 'SELECT * FROM kf_spill.ev ORDER BY p, t')$$);
SELECT k, t FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', on_time => 't',
    watermark_delay => '0', state_ttl => '5 min', proc_time => 'p',
    query => 'SELECT * FROM ev ORDER BY p, t') WHERE k NOT LIKE 'filler%' ORDER BY t;

-- a retraction of a key that lives in a spill partition goes there too:
-- with reset_ttl_on_duplicate it keeps K alive (10:00 -> 10:04 -> 10:09)
CREATE TABLE cl (k text, p timestamptz);
CREATE TABLE clog (seq int, kind text, data cl);
INSERT INTO clog SELECT i, '+I', ROW('filler' || i, timestamptz '2024-01-01 09:00')::cl
  FROM generate_series(1, 3000) i;
INSERT INTO clog VALUES (3001, '+I', ('Z', '2024-01-01 10:00')), (3002, '+I', ('K', '2024-01-01 10:00')),
                        (3003, '-U', ('K', '2024-01-01 10:04')), (3004, '+U', ('K', '2024-01-01 10:08'));
SELECT * FROM spill_vs_memory($$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_spill.cl,
    partition_by => '{k}', state_ttl => '5 min', proc_time => 'p',
    query => 'SELECT kind, data FROM kf_spill.clog ORDER BY seq')$$);
SELECT * FROM deduplicate_keep_first(NULL::cl, partition_by => '{k}', state_ttl => '5 min',
    proc_time => 'p', query => 'SELECT kind, data FROM clog ORDER BY seq')
 WHERE k NOT LIKE 'filler%';

-- numeric keys (their functions allocate per call): replay frees as it goes
CREATE TABLE nums AS SELECT (i % 20000)::numeric AS k, i AS v FROM generate_series(1, 60000) i;
SELECT * FROM spill_vs_memory($$SELECT * FROM ptf.deduplicate_keep_first(NULL::kf_spill.nums,
    partition_by => '{k}')$$);
SET work_mem = '64kB';
SELECT count(*) FROM deduplicate_keep_first(NULL::nums, partition_by => '{k}');
SELECT keys, state_bytes < 2 * 2 * 64 * 1024 AS within_twice_hash_mem FROM last_call_stats();
