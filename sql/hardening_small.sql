-- Hardening, the smaller defects: each case fails with a clear error and
-- its SQLSTATE before any row is read, or gives the right figure.
CREATE SCHEMA hs;
SET search_path = hs, ptf;
SET TIME ZONE 'UTC';

-- runs a statement, returns its SQLSTATE and message
CREATE FUNCTION err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- a volatile function in an input query: a NOTICE means rows were read
CREATE FUNCTION noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'an input row was read'; RETURN true; END $$;

CREATE TABLE mirror (id int PRIMARY KEY, name text);

-- ---- apply_changelog: NULL arguments are errors, not a row of NULLs
SELECT err($$SELECT * FROM apply_changelog(NULL, 'SELECT 1 WHERE hs.noisy()')$$);
SELECT err($$SELECT * FROM apply_changelog('mirror', NULL)$$);

-- ---- apply_changelog: deleted counts rows that were in the table
INSERT INTO mirror VALUES (1, 'there');
-- key 2 is added and retracted in one batch: the table never had it
SELECT inserted, updated, deleted, missing, superseded FROM apply_changelog('mirror', $$VALUES
    ('+I', ROW(2, 'new')::hs.mirror), ('-D', ROW(2, 'new')::hs.mirror)$$);
-- key 1 was there: replaced then deleted in one batch, one row deleted
SELECT inserted, updated, deleted, missing, superseded FROM apply_changelog('mirror', $$VALUES
    ('+I', ROW(1, 'again')::hs.mirror), ('-D', ROW(1, 'again')::hs.mirror)$$);
TABLE mirror;
-- several batches (work_mem 64kB), 1500 keys there before, every key added
-- and retracted: each row the table ever held is deleted once, so deleted
-- = 1500 + inserted (keys whose addition and retraction fell in two
-- batches), and every change is accounted for
INSERT INTO mirror SELECT g, 'old' FROM generate_series(1, 3000, 2) g;
SET work_mem = '64kB';
SELECT inserts + updates_before + updates_after + deletes AS received,
       inserted + updated + deleted + missing + superseded AS accounted,
       deleted = 1500 + inserted AS deleted_rows_there, missing
  FROM apply_changelog('mirror', $$SELECT k, ROW(g, 'v')::hs.mirror FROM generate_series(1, 3000) g,
                                          LATERAL (VALUES ('+I', 1), ('-D', 2)) c(k, o) ORDER BY g, o$$);
RESET work_mem;
SELECT count(*) FROM mirror;

-- ---- input => a row value: only its type is used, so a value is an error
CREATE TABLE ev (k text, ts timestamp, v int);
SELECT err($$SELECT * FROM deduplicate_keep_first(ROW('a', NULL, 1)::hs.ev, partition_by => '{k}',
    query => 'SELECT * FROM hs.ev WHERE hs.noisy()')$$);
SELECT err($$SELECT * FROM to_changelog(ROW('a', NULL, 1)::hs.ev)$$);
SELECT err($$SELECT * FROM tumble(ROW('a', NULL, 1)::hs.ev, 'ts', '1 minute')$$);
SELECT err($$SELECT * FROM window_aggregate(ROW('a', NULL, 1)::hs.ev, NULL::hs.ev, 'TUMBLE', 'ts', '1 minute')$$);
SELECT err($$SELECT * FROM temporal_join(NULL::hs.ev, ROW('a', NULL, 1)::hs.ev, 'ts', 'ts', '{k}')$$);
SELECT err($$SELECT * FROM window_aggregate(NULL::hs.ev, ROW('a', NULL, 1)::hs.ev, 'TUMBLE', 'ts', '1 minute')$$);
SELECT err($$SELECT * FROM from_changelog(ROW('a', NULL, 1)::hs.ev, NULL::hs.ev)$$);
SELECT err($$SELECT * FROM from_changelog(NULL::hs.ev, ROW('a', NULL, 1)::hs.ev)$$);
-- the message says what to write instead
SELECT * FROM to_changelog(ROW('a', NULL, 1)::hs.ev);
-- the typed NULL goes on working, the inlined tumble included
INSERT INTO ev VALUES ('a', '2024-01-01 10:00:30', 1);
SELECT (data).k, window_start FROM tumble(NULL::ev, 'ts', '1 minute');
SELECT k FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}');

-- ---- a first call of a change stream after a call that only read: the
-- error says which call wrote, and the way out
BEGIN;
SELECT count(*) FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', uid => 'hs-reads');
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream');
ROLLBACK;
-- two first calls of change streams in one transaction: the same
BEGIN;
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream');
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream2');
ROLLBACK;
-- the way out: the stream's first call alone; later calls go with others
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream');
BEGIN;
SELECT count(*) FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', uid => 'hs-reads');
INSERT INTO ev VALUES ('b', '2024-01-01 10:01', 2);
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream');
COMMIT;
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream');
SELECT uid FROM state WHERE uid LIKE 'hs-%' ORDER BY uid;
SELECT drop_state('hs-stream'), drop_state('hs-reads');
-- a transaction that wrote by itself gets the plain message
BEGIN;
INSERT INTO ev VALUES ('c', '2024-01-01 10:02', 3);
SELECT * FROM deduplicate_keep_first(NULL::ev, changes => true, uid => 'hs-stream3');
ROLLBACK;

-- ---- set_watermark refuses a delay no call could use
SELECT err($$SELECT set_watermark('ev', 'ts', interval '110000000 days')$$);
-- (the same interval given to a call is refused by the call)
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::hs.ev, partition_by => '{k}', on_time => 'ts',
    watermark_delay => interval '110000000 days')$$);
SELECT err($$SELECT set_watermark('ev', 'ts', interval '300000 years')$$);
SELECT count(*) FROM watermarks WHERE relid = 'ev'::regclass;
-- a long delay that fits is taken, and used
SELECT set_watermark('ev', 'ts', interval '100000 years');
SELECT k FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', on_time => 'ts');
SELECT drop_watermark('ev');

-- ---- watermarks are shown exactly, to the end of the timestamp range
SELECT count(*) FROM deduplicate_keep_first(NULL::ev, partition_by => '{k}', on_time => 'ts',
    uid => 'hs-end', query => $$VALUES ('a', timestamp '294276-12-31 23:59:59.999999', 1)$$);
SELECT watermark FROM state WHERE uid = 'hs-end';
SELECT drop_state('hs-end');
-- 9999-12-31 23:59:59.999999 and 0001-01-01 in each type; epoch
-- milliseconds floored, as the functions floor them (1 µs before 1970 is -1)
SELECT t, _time_text(252455615999999999, t) AS last, _time_text(-63082281600000000, t) AS first
  FROM unnest('{timestamp,timestamptz,bigint}'::regtype[]) t;
SELECT _time_text(-946684800000001, 'bigint') AS before_1970,
       _time_text(9223371331199999999, 'timestamptz') AS end_of_range;
-- timestamptz in the session's zone: 2024-07-01 12:00 UTC, summer time in New York
SET TIME ZONE 'America/New_York';
SELECT _time_text(773150400000000, 'timestamptz');
SET TIME ZONE 'UTC';

-- ---- spilling at work_mem = 64kB: a replayed partition holds many keys,
-- not a few (the first key's memory blocks spent the whole budget, and
-- with event time each partition was split down to one key).  The exact
-- number of partitions depends on the build (assertions add memory).
CREATE TABLE sp (k text, ts timestamptz, v int);
INSERT INTO sp SELECT 'user-' || (hashint4(g) & 2147483647) % 20000,
       timestamptz '2024-01-01' + g * interval '1 ms', g FROM generate_series(1, 60000) g;
SET work_mem = '64kB';
CREATE TABLE sp_first AS
SELECT * FROM deduplicate_keep_first(NULL::sp, partition_by => '{k}', on_time => 'ts');
SELECT keys, rows_spilled > 0 AS spilled, keys / spill_partitions >= 40 AS many_keys_per_partition
  FROM last_call_stats();
SELECT count(*) FROM deduplicate_keep_first(NULL::sp, partition_by => '{k}');
SELECT keys, rows_spilled > 0 AS spilled, keys / spill_partitions >= 40 AS many_keys_per_partition
  FROM last_call_stats();
RESET work_mem;
-- and the result is DISTINCT ON's
CREATE TABLE sp_expected AS SELECT DISTINCT ON (k) * FROM sp ORDER BY k, ts;
SELECT count(*) AS differences FROM (
    (TABLE sp_first EXCEPT ALL TABLE sp_expected) UNION ALL (TABLE sp_expected EXCEPT ALL TABLE sp_first)) d;

DROP SCHEMA hs CASCADE;

-- the nodes' internal functions of distributed pipelines take only tokens they made: a token
-- names a table made as the extension's owner (refused before anything else is looked at)
CREATE ROLE hs_mallory;
SET ROLE hs_mallory;
SELECT ptf._citus_handoff_send('p', 1, 'x; DROP TABLE ptf.uid_registry; --', 'ptf.t', 0);
SELECT ptf._citus_handoff_receive('p', 1, '0123456789ABCDEF', '{}');
SELECT ptf._citus_shard_forget('p', 1, '0123456789abcdef0');
SELECT ptf._citus_shard_prepare('p', 'SELECT 1', 'ptf.s', 'append', 'zz', 1, false);
RESET ROLE;
DROP ROLE hs_mallory;
