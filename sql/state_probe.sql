-- Reading a uid's state a key at a time (ptf.state_load, engine/state_load.c):
-- every call gives what it gives with the state loaded whole.  Each case runs
-- the same calls under two uids, one read whole ('full'), one key by key
-- ('probe', with memory for a few thousand keys, so that keys are evicted
-- and read again within a call), and compares every call's output; then
-- the rule of 'auto'.

CREATE SCHEMA sp;
SET search_path = sp, ptf;
SET TIME ZONE 'UTC';

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

-- a uid's stored key count is its table's
CREATE FUNCTION keys_agree(u text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    stored bigint;
    counted bigint;
BEGIN
    SELECT keys INTO stored FROM ptf.state WHERE uid = u;
    EXECUTE format('SELECT count(*) FROM %s WHERE %s', (SELECT state_table FROM ptf.state WHERE uid = u),
                   CASE WHEN EXISTS (SELECT FROM pg_attribute WHERE attrelid = (SELECT state_table FROM ptf.state WHERE uid = u)
                                     AND attname = 'ns' AND NOT attisdropped) THEN 'ns IS NULL' ELSE 'true' END)
        INTO counted;
    RETURN stored = counted;
END $$;

-- 60,000 events of 20,000 keys (some NULL) in 6 batches, with ties in time
CREATE TABLE ev AS
SELECT i AS seq, (i - 1) / 10000 AS batch,
       CASE WHEN i % 97 = 0 THEN NULL ELSE (i * 7919) % 20000 END AS k,
       (i * 31) % 3 AS k2,
       timestamptz '2024-01-01' + ((i / 6) + (i * 13) % 40) * interval '1 second' AS ts,
       timestamptz '2024-01-01' + (i / 6) * interval '1 second' AS arrived,
       md5(i::text) AS payload
FROM generate_series(1, 60000) i;

CREATE TABLE out_full (n int, r text);
CREATE TABLE out_probe (n int, r text);

-- one call of function sql (a format() with %1$s the uid, %2$s the batch) per batch, per mode
CREATE FUNCTION run_both(sql text, batches int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE out_full, out_probe;
    FOR b IN 0 .. batches - 1 LOOP
        SET LOCAL ptf.state_load = full;
        EXECUTE format('INSERT INTO sp.out_full SELECT %s, x::text FROM (%s) x', b, format(sql, 'full', b));
        SET LOCAL ptf.state_load = probe;
        -- and memory for a few thousand keys: most are evicted and read again
        SET LOCAL ptf.state_memory_limit = '64kB';
        EXECUTE format('INSERT INTO sp.out_probe SELECT %s, x::text FROM (%s) x', b, format(sql, 'probe', b));
    END LOOP;
END $$;

-- keep-first by arrival, one key (the inline layout) and two keys (records)
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.ev, partition_by => '{k}',
    uid => 'arr-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT * FROM compare('SELECT r FROM out_probe', $$SELECT x::text FROM (SELECT DISTINCT ON (k) * FROM ev ORDER BY k, batch, seq) x$$);
SELECT keys_agree('arr-probe'), keys_agree('arr-full');
-- the last call read only what its rows touched, and evicted as it went
SELECT state_load, keys_probed, keys_loaded, keys_evicted > 0 AS evicted FROM last_call_stats();

SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.ev, partition_by => '{k2,k}',
    uid => 'arr2-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT keys_agree('arr2-probe');

-- by event time: candidates stay pending across calls, and their timers fire
-- in later calls whose rows are of other keys (found through the timer index)
SELECT set_watermark('ev', 'ts', interval '30 seconds');
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.ev, partition_by => '{k}',
    on_time => 'ts', uid => 'evt-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s AND seq %% 1000 < 400 ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
-- calls without rows of a pending key emit it as the watermark passes it
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.ev, partition_by => '{k}',
    on_time => 'ts', uid => 'evt-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s AND seq %% 1000 >= 400 AND k < 500 ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT count(*) > 0 AS emitted_by_timers FROM out_probe;
SELECT keys_agree('evt-probe');
SELECT drop_watermark('ev');

-- with a TTL: expired keys come back; expired keys not touched are deleted unread
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.ev, partition_by => '{k}',
    state_ttl => interval '2 hours', proc_time => 'arrived',
    uid => 'ttl-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
-- ptf.state: keys expired (at the clock's time) and not removed yet
SET ptf.debug_clock = '2024-01-01 03:30+00';
SELECT uid, keys, expired_keys, expired_bytes > 0 AS has_bytes FROM state WHERE uid LIKE 'ttl-%' ORDER BY uid;
RESET ptf.debug_clock;
-- of others' uids, nothing
SELECT state_table AS ttl_table FROM state WHERE uid = 'ttl-probe' \gset
CREATE ROLE sp_other;
SET ROLE sp_other;
SELECT ptf._state_expired(:'ttl_table', false) AS others_expired;
RESET ROLE;
DROP ROLE sp_other;
CREATE TABLE late AS SELECT 1000000 + i AS seq, 0 AS batch, i AS k, 0 AS k2,
    timestamptz '2024-01-02' AS ts, timestamptz '2024-01-02' AS arrived, 'late' AS payload
    FROM generate_series(1, 3) i;
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.ev, partition_by => '{k}',
    state_ttl => interval '2 hours', proc_time => 'arrived',
    uid => 'ttl-%1$s', query => 'SELECT * FROM sp.late')$$, 1);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
-- a day later every key but the three has expired: both tables hold three
SELECT uid, keys FROM state WHERE uid LIKE 'ttl-%' ORDER BY uid;
SELECT keys_agree('ttl-probe');

-- to_changelog and from_changelog keep row images: over change streams and
-- changelog queries, in several transactions
CREATE TABLE acct (id int PRIMARY KEY, owner text, balance int);
SELECT count(*) FROM to_changelog(NULL::acct, partition_by => '{id}', changes => true, uid => 'tc-full');
SELECT count(*) FROM to_changelog(NULL::acct, partition_by => '{id}', changes => true, uid => 'tc-probe');
CREATE TABLE tc_out (mode text, n int, r text);
CREATE PROCEDURE tc_batches() LANGUAGE plpgsql AS $$
BEGIN
    FOR b IN 0 .. 4 LOOP
        INSERT INTO sp.acct SELECT i, 'o' || i, b FROM generate_series(b * 1000, b * 1000 + 2999) i
            ON CONFLICT (id) DO UPDATE SET balance = excluded.balance + 100;
        COMMIT;
        DELETE FROM sp.acct WHERE id % 7 = b;
        COMMIT;
        UPDATE sp.acct SET owner = owner || '+' WHERE id % 5 = b;
        COMMIT;
        SET ptf.state_load = full;
        INSERT INTO sp.tc_out SELECT 'full', b, x::text FROM (SELECT op, data FROM ptf.to_changelog(NULL::sp.acct,
            partition_by => '{id}', changes => true, uid => 'tc-full')) x;
        SET ptf.state_load = probe;
        INSERT INTO sp.tc_out SELECT 'probe', b, x::text FROM (SELECT op, data FROM ptf.to_changelog(NULL::sp.acct,
            partition_by => '{id}', changes => true, uid => 'tc-probe')) x;
        COMMIT;
    END LOOP;
    RESET ptf.state_load;
END $$;
CALL tc_batches();
SELECT count(*) > 10000 AS many_changes FROM tc_out WHERE mode = 'probe';
SELECT * FROM compare($$SELECT n, r FROM tc_out WHERE mode = 'probe'$$, $$SELECT n, r FROM tc_out WHERE mode = 'full'$$);
SELECT keys_agree('tc-probe');
-- changes waiting from before the state's indexes were made (by the call
-- that reads them) are read key by key too: while a change is decoded the
-- catalog is that of its time, which has no index yet
SET ptf.state_load = full;
SELECT count(*) FROM to_changelog(NULL::acct, partition_by => '{id}', changes => true, uid => 'tc-late');
INSERT INTO acct SELECT i, 'late', 1 FROM generate_series(100000, 101999) i;
UPDATE acct SET balance = balance + 1 WHERE id BETWEEN 100000 AND 100999;
DELETE FROM acct WHERE id BETWEEN 101000 AND 101499;
SET ptf.state_load = probe;
SELECT op, count(*) FROM to_changelog(NULL::acct, partition_by => '{id}', changes => true, uid => 'tc-late')
 GROUP BY op ORDER BY op;
SELECT state_load, keys_probed > 0 AS probed FROM last_call_stats();
RESET ptf.state_load;

CREATE TABLE landing (seq int, batch int, op text, after acct);
INSERT INTO landing
SELECT i, i / 2000, CASE WHEN i % 11 = 0 THEN 'd' WHEN i < 3000 THEN 'c' ELSE 'u' END,
       ROW(i % 3000, 'o' || i, i)::acct
FROM generate_series(0, 9999) i;
SELECT run_both($$SELECT * FROM ptf.from_changelog(NULL::sp.landing, NULL::sp.acct, after => 'after',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_AFTER", "d": "DELETE"}', partition_by => '{id}',
    consume_full_deletes => false,
    uid => 'fc-%1$s', query => 'SELECT * FROM sp.landing WHERE batch = %2$s ORDER BY seq')$$, 5);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT keys_agree('fc-probe'), keys > 2000 AS kept_images FROM state WHERE uid = 'fc-probe';

-- a candidate pending at exactly the stored watermark (a row at the
-- watermark is not late) fires in a later call without rows of its key
CREATE TABLE ties (k int, t timestamptz, b int);
INSERT INTO ties VALUES (1, '2024-01-01 00:00:10', 0), (2, '2024-01-01 00:00:10', 0),
                        (3, '2024-01-01 00:00:20', 1);
SELECT run_both($$SELECT k FROM ptf.deduplicate_keep_first(NULL::sp.ties, partition_by => '{k}',
    on_time => 't', watermark_delay => interval '0',
    uid => 'ties-%1$s', query => 'SELECT * FROM sp.ties WHERE b = %2$s')$$, 2);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT n, r FROM out_probe ORDER BY n, r;

-- keys of domains, enums and arrays are looked up through their operator
-- classes' types; array keys one by one
CREATE DOMAIN dkey AS int CHECK (VALUE >= 0);
CREATE TYPE color AS ENUM ('red', 'green', 'blue');
CREATE TABLE odd (d dkey, c color, a int[], v int);
INSERT INTO odd SELECT i % 50, (ARRAY['red', 'green', 'blue'])[1 + i % 3]::color, ARRAY[i % 7, i % 2], i
  FROM generate_series(1, 600) i;
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.odd, partition_by => '{d}',
    uid => 'dom-%1$s', query => 'SELECT * FROM sp.odd WHERE v %% 3 = %2$s ORDER BY v')$$, 3);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.odd, partition_by => '{c}',
    uid => 'enum-%1$s', query => 'SELECT * FROM sp.odd WHERE v %% 3 = %2$s ORDER BY v')$$, 3);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.odd, partition_by => '{a}',
    uid => 'arr-key-%1$s', query => 'SELECT * FROM sp.odd WHERE v %% 3 = %2$s ORDER BY v')$$, 3);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT count(*) AS array_key_rows FROM out_probe;

-- window_aggregate: its timers are found through fires_at (a key's next
-- window, a session's end), so the windows of keys absent from a call's rows
-- fire in it; keys read in the middle of a call are armed as they come.  A
-- key's events are about 3300 s apart, a call's rows about 1700 s: windows
-- fire in later calls than their rows', and rows come up to 40 s late
CREATE TYPE wsum AS (k int, window_start timestamptz, window_end timestamptz, n bigint,
    total bigint, pl text);
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'tumble', 'ts',
    '5 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'tw-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT state_load, keys_probed > 0 AS probed, keys_loaded < 20000 AS partial FROM last_call_stats();
SELECT keys_agree('tw-probe');
SELECT (SELECT rows_late FROM state WHERE uid = 'tw-probe') = (SELECT rows_late FROM state WHERE uid = 'tw-full')
    AS same_late, (SELECT rows_late FROM state WHERE uid = 'tw-probe') > 0 AS some_late;
-- calls with the rows of a few keys only: the others' windows fire all the same
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'tumble', 'ts',
    '5 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'tf-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s AND (batch < 3 OR k < 100) ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT count(*) > 100 AS fired_by_timers FROM out_probe WHERE n = 3 AND (r::sp.wsum).k >= 100;
-- HOP (slices of the gcd: size no multiple of the slide), CUMULATE (with
-- emit_only_on_update), SESSION (sessions merging across calls)
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'hop', 'ts',
    '10 minutes', '4 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'hw-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT keys_agree('hw-probe');
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'cumulate', 'ts',
    '15 minutes', '5 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl', emit_only_on_update => true,
    uid => 'cw-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'session', 'ts',
    '1 hour', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'sw-%1$s', query => 'SELECT * FROM sp.ev WHERE batch = %2$s ORDER BY seq')$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT count(*) > 0 AS merged_across_calls FROM out_probe WHERE (r::sp.wsum).n > 1;
SELECT keys_agree('sw-probe');
-- updating input: each call first takes back rows of the call before (of keys
-- read from the table; some of their windows have fired: late), then adds its
-- rows and takes some of them back
CREATE FUNCTION upd(b int) RETURNS text LANGUAGE sql AS $f$
    SELECT format($q$SELECT kind, d FROM (
        SELECT seq - 0.5 AS o, '-D' AS kind, e AS d FROM sp.ev e
         WHERE batch = %1$s - 1 AND seq %% 10000 >= 7000 AND seq %% 4 = 0
        UNION ALL SELECT seq, '+I', e FROM sp.ev e WHERE batch = %1$s
        UNION ALL SELECT seq + 100.5, '-D', e FROM sp.ev e WHERE batch = %1$s AND seq %% 7 = 0) x
    ORDER BY o$q$, b)
$f$;
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'tumble', 'ts',
    '10 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'tu-%1$s', query => sp.upd(%2$s))$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT keys_agree('tu-probe');
SELECT rows_late > 0 AS some_late, rows_skipped > 0 AS some_skipped FROM state WHERE uid = 'tu-probe';
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'hop', 'ts',
    '20 minutes', '5 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'hu-%1$s', query => sp.upd(%2$s))$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'cumulate', 'ts',
    '15 minutes', '5 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'cu-%1$s', query => sp.upd(%2$s))$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT run_both($$SELECT * FROM ptf.window_aggregate(NULL::sp.ev, NULL::sp.wsum, 'session', 'ts',
    '30 minutes', partition_by => '{k}', watermark_delay => '10 seconds',
    aggregates => 'count(*) AS n, sum(seq) AS total, min(payload) AS pl',
    uid => 'su-%1$s', query => sp.upd(%2$s))$$, 6);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT keys_agree('su-probe');

-- auto: a small state is read whole; a large one key by key, until a call
-- asks for more than an eighth of its keys (or the keys of its first buffers,
-- projected over the rows the planner expects, would): then the rest is read
-- by a scan; a call expected to read as many rows as the state has keys
-- reads it whole from the start
RESET ptf.state_load;
CREATE TABLE big AS SELECT i AS k, i AS v FROM generate_series(1, 200000) i;
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'auto',
    query => 'SELECT * FROM sp.big');
SELECT state_load, keys_probed FROM last_call_stats();
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'auto',
    query => 'SELECT k + 199990, v FROM sp.big WHERE k <= 100');
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();
-- 60000 rows expected, each a stored key: the switch after the first buffer
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'auto',
    query => 'SELECT k + 100000, v FROM sp.big WHERE k <= 60000');
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();
-- a misestimate (the planner expects 1000 rows of 100000): once an eighth is probed
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'auto',
    query => 'SELECT k + 10, v FROM sp.big WHERE k % 2 = 0');
SELECT state_load, keys_probed >= 25000 AS probed_an_eighth, keys_loaded FROM last_call_stats();
-- as many rows expected as stored keys: a scan from the start, nothing probed
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'auto',
    query => 'SELECT k + 7, v FROM sp.big, (VALUES (1), (2)) twice(n)');
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();
SELECT keys_agree('auto');
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'small',
    query => 'SELECT * FROM sp.big WHERE k <= 10');
SELECT count(*) FROM deduplicate_keep_first(NULL::big, partition_by => '{k}', uid => 'small',
    query => 'SELECT * FROM sp.big WHERE k <= 20');
SELECT state_load, keys_loaded FROM last_call_stats();
-- the key index holds a hash of the key: a key type without a btree
-- operator class (xid) is read key by key too
SET ptf.state_load = probe;
CREATE TABLE xids (x xid, v int);
INSERT INTO xids VALUES ('7', 1), ('7', 2), ('8', 3);
SELECT v FROM deduplicate_keep_first(NULL::xids, partition_by => '{x}', uid => 'xids');
SELECT v FROM deduplicate_keep_first(NULL::xids, partition_by => '{x}', uid => 'xids',
    query => $$SELECT '8'::xid, 4 UNION ALL SELECT '9', 5$$);
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();

-- keys longer than a btree entry can hold (3200 bytes of text that does
-- not compress): stored, read back key by key, and every later call too;
-- an index on the key columns refused them (54000) for good
CREATE TABLE longk AS
SELECT i AS seq, (SELECT string_agg(md5(((i - 1) % 300)::text || j), '') FROM generate_series(1, 100) j) AS k,
       i % 2 AS k2, i AS v
FROM generate_series(1, 900) i;
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.longk, partition_by => '{k,k2}',
    uid => 'long-%1$s', query => 'SELECT * FROM sp.longk WHERE seq %% 3 = %2$s ORDER BY seq')$$, 3);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT * FROM compare('SELECT r FROM out_probe',
    $$SELECT x::text FROM (SELECT DISTINCT ON (k, k2) * FROM longk ORDER BY k, k2, seq % 3, seq) x$$);
SELECT count(*), min(length(k)) FROM out_probe, LATERAL (SELECT (r::sp.longk).k) x;
SELECT keys_agree('long-probe');
SELECT state_load, keys_probed > 0 AS probed FROM last_call_stats();

-- keys equal under a nondeterministic collation are one key when read
-- key by key as in memory: their hashes agree
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE cik (seq int, k text COLLATE ci, v int);
INSERT INTO cik SELECT i, CASE WHEN i % 2 = 0 THEN 'Key' || (i % 50) ELSE 'kEY' || (i % 50) END, i
FROM generate_series(1, 300) i;
SELECT run_both($$SELECT * FROM ptf.deduplicate_keep_first(NULL::sp.cik, partition_by => '{k}',
    uid => 'ci-%1$s', query => 'SELECT * FROM sp.cik WHERE seq %% 3 = %2$s ORDER BY seq')$$, 3);
SELECT * FROM compare('TABLE out_probe', 'TABLE out_full');
SELECT count(*) FROM out_probe;

-- keys of fixed-width columns keep an index on the columns (they always
-- fit, and neighbouring keys are probed from neighbouring pages)
SELECT pg_get_indexdef(indexrelid) ~ 'hash_record_extended' AS by_hash, count(*)
  FROM pg_index WHERE indrelid = (SELECT state_table FROM state WHERE uid = 'arr2-probe') GROUP BY 1 ORDER BY 1;

-- a state table of an earlier version, its text keys indexed as they are:
-- the first call that reads key by key puts the hash index in its place
SELECT format('DROP INDEX %s', indexrelid::regclass) AS drop_hash,
       format('CREATE INDEX ON %s (k)', indrelid::regclass) AS make_old
  FROM pg_index WHERE indrelid = (SELECT state_table FROM state WHERE uid = 'ci-probe')
   AND indexprs IS NOT NULL \gset
:drop_hash;
:make_old;
SELECT pg_get_indexdef(indexrelid) ~ 'hash_record_extended' AS by_hash, count(*)
  FROM pg_index WHERE indrelid = (SELECT state_table FROM state WHERE uid = 'ci-probe') GROUP BY 1 ORDER BY 1;
SET ptf.state_load = probe;
SELECT v FROM ptf.deduplicate_keep_first(NULL::sp.cik, partition_by => '{k}',
    uid => 'ci-probe', query => $$SELECT 1000, 'KEY7', 1 UNION ALL SELECT 1001, 'key77', 2$$);
SELECT state_load, keys_probed, keys_loaded FROM last_call_stats();
SELECT pg_get_indexdef(indexrelid) ~ 'hash_record_extended' AS by_hash, count(*)
  FROM pg_index WHERE indrelid = (SELECT state_table FROM state WHERE uid = 'ci-probe') GROUP BY 1 ORDER BY 1;
RESET ptf.state_load;

SELECT count(*) FILTER (WHERE drop_state(uid)) AS dropped FROM state;
DROP SCHEMA sp CASCADE;
