-- Change streams (changes => true): a table's changes read through logical
-- decoding, incrementally under a uid, exactly once.  Keep-first over them.

CREATE SCHEMA cs;
SET search_path = cs, ptf;
-- decoding's error context names slots and LSNs, which vary
\set SHOW_CONTEXT never

-- FLIP-614 §4.1.3.7 with real changes.  The table has no key: REPLICA IDENTITY
-- FULL logs whole old images.  Vas/logout exists before the stream starts.
CREATE TABLE user_events (user_name text, event text);
ALTER TABLE user_events REPLICA IDENTITY FULL;
INSERT INTO user_events VALUES ('Vas', 'logout');
-- the first call creates the uid's slot: the stream starts here
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    changes => true, uid => 'seed');
SELECT slot_name IS NOT NULL AS has_slot, lsn IS NULL AS no_position_yet FROM state WHERE uid = 'seed';

DELETE FROM user_events;                                        -- -D[Vas, logout]: ignored
INSERT INTO user_events VALUES ('Vas', 'login');                -- +I: emitted
INSERT INTO user_events VALUES ('Vas', 'login');                -- +I: swallowed
UPDATE user_events SET event = 'click'
 WHERE ctid = (SELECT min(ctid) FROM user_events);              -- -U login, +U click: swallowed
DELETE FROM user_events WHERE event = 'click';                  -- -D click: swallowed
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    changes => true, uid => 'seed');
SELECT keys, rows_in, rows_out FROM state WHERE uid = 'seed';
-- nothing new, nothing out
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    changes => true, uid => 'seed');

-- a -U/+U pair whose +U is the key's first row: the +U is emitted
CREATE TABLE accounts (id int, status text);
ALTER TABLE accounts REPLICA IDENTITY FULL;
INSERT INTO accounts VALUES (1, 'old');
SELECT * FROM deduplicate_keep_first(NULL::accounts, partition_by => '{id}',
    changes => true, uid => 'accounts');
UPDATE accounts SET status = 'new' WHERE id = 1;
UPDATE accounts SET status = 'newer' WHERE id = 1;
SELECT * FROM deduplicate_keep_first(NULL::accounts, partition_by => '{id}',
    changes => true, uid => 'accounts');

-- REPLICA IDENTITY DEFAULT: an update that keeps its key logs no old image,
-- a delete only the key; keep-first needs neither
CREATE TABLE profiles (id int PRIMARY KEY, name text);
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
INSERT INTO profiles VALUES (1, 'a');
UPDATE profiles SET name = 'b';
DELETE FROM profiles;
INSERT INTO profiles VALUES (1, 'c'), (2, 'd');
UPDATE profiles SET name = 'e' WHERE id = 2;
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles') ORDER BY id;
SELECT rows_in, rows_out FROM state WHERE uid = 'profiles';

-- changes of other tables are not rows of this stream
CREATE TABLE other (x int);
INSERT INTO other VALUES (1), (2);
INSERT INTO profiles VALUES (3, 'f');
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
SELECT rows_in FROM state WHERE uid = 'profiles';

-- a rolled-back call leaves the next call to read the same changes
INSERT INTO profiles VALUES (4, 'g');
BEGIN;
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
ROLLBACK;
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
-- a second call in the same transaction goes on from the first
INSERT INTO profiles VALUES (5, 'h');
BEGIN;
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
COMMIT;

-- the slot follows the stored position, never passes it
SELECT s.confirmed_flush_lsn <= st.lsn AS slot_not_ahead, st.retained_wal_bytes > 0 AS retains_wal
  FROM state st JOIN pg_replication_slots s USING (slot_name) WHERE st.uid = 'profiles';

-- a call reads a bounded batch, whole transactions, and the next goes on
INSERT INTO profiles VALUES (10, 'x');
INSERT INTO profiles VALUES (11, 'x'), (12, 'x');
INSERT INTO profiles VALUES (13, 'x');
SET ptf.max_changes_per_call = 2;
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
RESET ptf.max_changes_per_call;

-- TRUNCATE: deletions never change keep-first's output; noted and counted
TRUNCATE profiles;
INSERT INTO profiles VALUES (1, 'again'), (20, 'new');
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
SELECT rows_skipped FROM state WHERE uid = 'profiles';

-- columns added during the stream: earlier rows read with the default
ALTER TABLE profiles ADD COLUMN tier int DEFAULT 0;
INSERT INTO profiles VALUES (21, 'n', 5);
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
-- a column whose type changes makes older changes unreadable
INSERT INTO profiles VALUES (22, 'm', 1);
ALTER TABLE profiles ALTER COLUMN tier TYPE bigint;
\set VERBOSITY terse
SELECT * FROM deduplicate_keep_first(NULL::profiles, partition_by => '{id}',
    changes => true, uid => 'profiles');
\set VERBOSITY default

-- event time over a change stream: inserts, watermark carried across calls
CREATE TABLE readings (sensor int, ts timestamptz, v int);
SELECT ptf.set_watermark('readings', 'ts', interval '1 minute');
SELECT * FROM deduplicate_keep_first(NULL::readings, partition_by => '{sensor}', on_time => 'ts',
    changes => true, uid => 'readings');
INSERT INTO readings VALUES (1, '2024-01-01 10:00+00', 1), (1, '2024-01-01 09:59:30+00', 2),
                            (2, '2024-01-01 10:00:30+00', 3);
SELECT sensor, v FROM deduplicate_keep_first(NULL::readings, partition_by => '{sensor}',
    on_time => 'ts', changes => true, uid => 'readings');
INSERT INTO readings VALUES (3, '2024-01-01 10:05+00', 4);
SELECT sensor, v FROM deduplicate_keep_first(NULL::readings, partition_by => '{sensor}',
    on_time => 'ts', changes => true, uid => 'readings') ORDER BY sensor;
-- an UPDATE arriving is an error: a watermark cannot take back what it finalized
UPDATE readings SET v = 9 WHERE sensor = 3;
SELECT sensor, v FROM deduplicate_keep_first(NULL::readings, partition_by => '{sensor}',
    on_time => 'ts', changes => true, uid => 'readings');

-- unchanged TOASTed values: under FULL taken from the old image ...
CREATE TABLE docs (id int PRIMARY KEY, body text, rev int);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE docs REPLICA IDENTITY FULL;
INSERT INTO docs VALUES (1, repeat('abc', 3000), 1);
SELECT * FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}', changes => true, uid => 'docs');
UPDATE docs SET rev = 2;
SELECT id, length(body), rev FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}',
    changes => true, uid => 'docs');
-- ... under DEFAULT they are not in the WAL: a clear error when such a row
-- is to be emitted, never a placeholder
ALTER TABLE docs REPLICA IDENTITY DEFAULT;
INSERT INTO docs VALUES (2, repeat('xyz', 3000), 1);
SELECT * FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}', changes => true,
    uid => 'docs-default');
-- a key seen first: its later update is swallowed, nothing to complete
INSERT INTO docs VALUES (3, repeat('uvw', 3000), 1);
UPDATE docs SET rev = 2 WHERE id = 3;
SELECT id, length(body), rev FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}',
    changes => true, uid => 'docs-default');
-- an update of a row from before the stream: its +U would be emitted
UPDATE docs SET rev = 3 WHERE id = 2;
\set VERBOSITY terse
SELECT id, length(body), rev FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}',
    changes => true, uid => 'docs-default');
\set VERBOSITY default
-- the way out: the uid starts again from the table's rows, which the stream
-- then has seen whole (to_changelog keeps their images and completes updates
-- from them)
SELECT drop_state('docs-default');
SELECT id, length(body), rev FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}',
    changes => true, uid => 'docs-default', snapshot => true) ORDER BY id;
SELECT count(*) FROM to_changelog(NULL::docs, changes => true, uid => 'docs-log', snapshot => true);
UPDATE docs SET rev = 4 WHERE id = 2;
SELECT id, length(body), rev FROM deduplicate_keep_first(NULL::docs, partition_by => '{id}',
    changes => true, uid => 'docs-default');
SELECT op, (data).id, length((data).body), (data).rev
  FROM to_changelog(NULL::docs, changes => true, uid => 'docs-log');
SELECT drop_state('docs-log');

-- errors, before anything is read
SELECT * FROM deduplicate_keep_first(NULL::profiles, changes => true);
SELECT * FROM deduplicate_keep_first(NULL::profiles, changes => true, uid => 'x',
    query => 'SELECT * FROM cs.profiles');
CREATE VIEW profile_view AS SELECT * FROM profiles;
SELECT * FROM deduplicate_keep_first(NULL::profile_view, changes => true, uid => 'x');
CREATE TABLE parted (k int) PARTITION BY RANGE (k);
SELECT * FROM deduplicate_keep_first(NULL::parted, changes => true, uid => 'x');
-- a uid made for a relation input is not a change stream's
SELECT * FROM deduplicate_keep_first(NULL::other, uid => 'rel-uid');
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'rel-uid');
-- the first call creates a slot: not in a transaction that already wrote
BEGIN;
INSERT INTO other VALUES (3);
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'late-first');
ROLLBACK;
-- a first call rolled back takes its slot with it: none is left holding WAL
SELECT count(*) AS slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%' \gset before_
BEGIN;
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'rolled-back');
SELECT count(*) - :before_slots AS new_slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%';
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'rolled-back');
ROLLBACK TO SAVEPOINT s;
COMMIT;
-- and so does one that failed after its slot was made (a volatile aggregate input is
-- refused when the operator is built)
CREATE TABLE ticks (ts timestamp, v int);
ALTER TABLE ticks REPLICA IDENTITY FULL;
CREATE TYPE tick_sum AS (s float8);
SELECT * FROM window_aggregate(NULL::ticks, NULL::tick_sum, 'tumble', 'ts', '1 second',
    aggregates => 'sum(v * random()) AS s', changes => true, uid => 'failed-first');
SELECT count(*) - :before_slots AS new_slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%';
SELECT count(*) FROM state WHERE uid IN ('rolled-back', 'failed-first');
-- snapshot => true: a stream's first call starts with the rows its tables have, as
-- inserts (no lsn: they come from the table, not the WAL), then goes on with changes
CREATE TABLE snap_src (id int PRIMARY KEY, v text);
INSERT INTO snap_src SELECT g, 'v' || g FROM generate_series(1, 4) g;
SELECT op, (data).id, (data).v, lsn IS NULL AS from_the_table
  FROM to_changelog(NULL::snap_src, changes => true, uid => 'snap', snapshot => true) ORDER BY 2;
SELECT stream_snapshot ~ '^[0-9A-F]+/[0-9A-F]+ [0-9]+ [0-9]+' AS snapshot_kept
  FROM uid_registry WHERE uid = 'snap';
-- REPLICA IDENTITY DEFAULT: the update's old row comes from the images the snapshot gave
UPDATE snap_src SET v = 'changed' WHERE id = 2;
DELETE FROM snap_src WHERE id = 3;
SELECT op, (data).id, (data).v FROM to_changelog(NULL::snap_src, changes => true, uid => 'snap',
    snapshot => true);
-- passed: the snapshot is forgotten, and no later call reads one again
SELECT stream_snapshot IS NULL AS forgotten FROM uid_registry WHERE uid = 'snap';
SELECT count(*) FROM to_changelog(NULL::snap_src, changes => true, uid => 'snap', snapshot => true);
SELECT drop_state('snap');
-- Debezium's codes, the snapshot's rows as reads ('r'): op_mapping's READ
INSERT INTO snap_src VALUES (3, 'v3');
SELECT op, (data).id, (data).v FROM to_changelog(NULL::snap_src, changes => true,
    uid => 'snap-dbz', snapshot => true,
    op_mapping => '{"READ": "r", "INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}') ORDER BY 2;
INSERT INTO snap_src VALUES (5, 'v5');
DELETE FROM snap_src WHERE id = 1;
SELECT op, (data).id, (data).v FROM to_changelog(NULL::snap_src, changes => true,
    uid => 'snap-dbz', snapshot => true,
    op_mapping => '{"READ": "r", "INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}');
SELECT drop_state('snap-dbz');
-- a table read once is all reads; READ alone keeps only them
SELECT op, count(*) FROM to_changelog(NULL::snap_src, op_mapping => '{"READ": "r"}') GROUP BY op;
SELECT * FROM to_changelog(NULL::snap_src, op_mapping => '{"READ": "r", "READ, DELETE": "x"}');
-- only for a change stream
SELECT * FROM to_changelog(NULL::snap_src, snapshot => true);
SELECT * FROM to_changelog(NULL::snap_src, changes => true, snapshot => true);
-- the uid's slot consumed by another tool: refused, changes would be lost
INSERT INTO other VALUES (4);
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'stolen');
INSERT INTO other VALUES (5);
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'stolen');
INSERT INTO other VALUES (6);
SELECT count(*) > 0 AS consumed FROM state s,
       pg_logical_slot_get_changes(s.slot_name, NULL, NULL) c WHERE s.uid = 'stolen';
\set VERBOSITY terse
SELECT * FROM deduplicate_keep_first(NULL::other, changes => true, uid => 'stolen');
\set VERBOSITY default

-- privileges: reading a change stream needs SELECT on every column and no
-- row-level security that would hide rows
CREATE ROLE regress_ptf_cs;
GRANT USAGE ON SCHEMA cs TO regress_ptf_cs;
SET ROLE regress_ptf_cs;
SELECT * FROM deduplicate_keep_first(NULL::profiles, changes => true, uid => 'cs-role');
RESET ROLE;
GRANT SELECT ON profiles TO regress_ptf_cs;
ALTER TABLE profiles ENABLE ROW LEVEL SECURITY;
SET ROLE regress_ptf_cs;
SELECT * FROM deduplicate_keep_first(NULL::profiles, changes => true, uid => 'cs-role');
RESET ROLE;
ALTER TABLE profiles DISABLE ROW LEVEL SECURITY;

-- and as of each change: what was changed while the reader could not read
-- the table is never delivered, even once the right is back (the output
-- plugin's rule); changes before are.  (Terse: the detail names an LSN.)
GRANT ptf_stream TO regress_ptf_cs;
SET ROLE regress_ptf_cs;
SELECT * FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-revoked');
RESET ROLE;
INSERT INTO profiles VALUES (100, 'seen');
SET ROLE regress_ptf_cs;
SELECT op, (data).id, (data).name FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-revoked');
RESET ROLE;
REVOKE SELECT ON profiles FROM regress_ptf_cs;
INSERT INTO profiles VALUES (101, 'hidden');
DELETE FROM profiles WHERE id = 101;
GRANT SELECT ON profiles TO regress_ptf_cs;
INSERT INTO profiles VALUES (102, 'after');
SET ROLE regress_ptf_cs;
\set VERBOSITY terse
SELECT op, (data).id, (data).name FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-revoked');
-- and again: the stream ends there
SELECT op, (data).id, (data).name FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-revoked');
\set VERBOSITY default
SELECT * FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-rls');
RESET ROLE;
ALTER TABLE profiles ENABLE ROW LEVEL SECURITY;
INSERT INTO profiles VALUES (103, 'under rls');
ALTER TABLE profiles DISABLE ROW LEVEL SECURITY;
SET ROLE regress_ptf_cs;
\set VERBOSITY terse
SELECT op, (data).id, (data).name FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-rls');
\set VERBOSITY default
RESET ROLE;
-- a stream of the owner, who never lost the right, goes on
SELECT op, (data).id, (data).name FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-owner')
 WHERE (data).id >= 100;
INSERT INTO profiles VALUES (104, 'owner');
SELECT op, (data).id, (data).name FROM to_changelog(NULL::profiles, changes => true, uid => 'cs-owner');
DELETE FROM profiles WHERE id >= 100;
SELECT drop_state('cs-revoked'), drop_state('cs-rls'), drop_state('cs-owner');
REVOKE ptf_stream FROM regress_ptf_cs;
-- a dropped table: the streams that read it (or whose rows they keep) are
-- warned of, with the way out; a call planned before the drop says what
-- happened (it was XX000 "cache lookup failed for type")
CREATE TABLE gone (id int PRIMARY KEY, v text);
CREATE TABLE gone_cdc (op text, id int, v text);
SELECT * FROM to_changelog(NULL::gone, changes => true, uid => 'gone');
SELECT * FROM from_changelog(NULL::gone_cdc, NULL::gone, op_mapping => '{"c": "INSERT"}',
    changes => true, uid => 'gone-cdc');
SELECT * FROM deduplicate_keep_first(NULL::gone, query => 'SELECT 1, $$a$$', uid => 'gone-rows');
INSERT INTO gone VALUES (1, 'a');
DROP TABLE gone_cdc;
BEGIN;
DECLARE planned CURSOR FOR SELECT op, data FROM to_changelog(NULL::cs.gone, changes => true, uid => 'gone');
DROP TABLE gone;
FETCH planned;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
DROP TABLE gone;
SELECT drop_state('gone'), drop_state('gone-cdc'), drop_state('gone-rows');

-- a change a stream cannot read stops it at every call (a NULL event time:
-- 22004); the error's context names its transaction and where its commit
-- record is ("finished at"), which ptf.skip_transaction takes, as ALTER
-- SUBSCRIPTION ... SKIP does: that transaction is passed over, unread, and
-- the stream goes on with the next
CREATE TABLE pe (id int, k int, ts timestamp);
ALTER TABLE pe REPLICA IDENTITY FULL;
CREATE FUNCTION first_by_time() RETURNS SETOF int LANGUAGE sql AS $$
    SELECT (f).id FROM ptf.deduplicate_keep_first(NULL::cs.pe, partition_by => '{k}',
        on_time => 'ts', changes => true, uid => 'poison', watermark_delay => '0') f ORDER BY 1
$$;
-- the LSN the context of the error names, and its SQLSTATE
CREATE FUNCTION stopped_at() RETURNS pg_lsn LANGUAGE plpgsql AS $$
DECLARE ctx text; st text; msg text;
BEGIN
    PERFORM cs.first_by_time();
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT, st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
    RAISE NOTICE '%: %', st, msg;
    RETURN substring(ctx from 'change of transaction [0-9]+, finished at ([0-9A-F]+/[0-9A-F]+)')::pg_lsn;
END $$;
SELECT * FROM first_by_time();
INSERT INTO pe VALUES (1, 1, '2024-01-01 10:00');
SELECT pg_current_wal_insert_lsn() AS before_poison \gset
INSERT INTO pe VALUES (2, 2, NULL);
SELECT pg_current_wal_insert_lsn() AS after_poison \gset
INSERT INTO pe VALUES (3, 3, '2024-01-01 11:00'), (4, 1, '2024-01-01 09:00');
SELECT stopped_at() AS poison \gset
SELECT stopped_at() = :'poison' AS stops_there_again,
       :'poison'::pg_lsn > :'before_poison' AND :'poison'::pg_lsn < :'after_poison' AS its_commit;
-- a position read already, a NULL one, a uid without a stream, or another
-- role's uid are refused
\set VERBOSITY terse
SELECT skip_transaction('poison', '0/1');
\set VERBOSITY default
SELECT skip_transaction('poison', NULL);
SELECT skip_transaction('no such uid', :'poison');
SELECT count(*) FROM deduplicate_keep_first(NULL::pe, partition_by => '{k}', uid => 'pe-rows');
SELECT skip_transaction('pe-rows', :'poison');
SET ROLE regress_ptf_cs;
SELECT skip_transaction('poison', :'poison');
RESET ROLE;
SELECT skip_transaction('poison', :'poison');
SELECT skip_lsn = :'poison' AS asked FROM state WHERE uid = 'poison';
-- passed over (a NOTICE names it): keys 3, then 1 by its earlier time
SET client_min_messages = warning;
SELECT * FROM first_by_time();
RESET client_min_messages;
SELECT skip_lsn IS NULL AS request_gone, rows_skipped FROM state WHERE uid = 'poison';
INSERT INTO pe VALUES (5, 5, '2024-01-01 12:00');
SELECT * FROM first_by_time();
-- an LSN where no transaction of the stream committed: nothing is skipped, a
-- WARNING says so once the stream is past it, and the request goes
INSERT INTO pe VALUES (6, 6, '2024-01-01 13:00');
SELECT skip_transaction('poison', pg_current_wal_insert_lsn() - 1);
INSERT INTO pe VALUES (7, 7, '2024-01-01 14:00');
\set VERBOSITY sqlstate
SELECT * FROM first_by_time();
\set VERBOSITY default
SELECT skip_lsn IS NULL AS request_gone FROM state WHERE uid = 'poison';
SELECT drop_state('pe-rows');
-- a pipeline stopped there says so in last_error, which ends with the
-- change's transaction; skipped, its next step goes on
CREATE TABLE pe_firsts (id int);
SELECT create_pipeline('pe-pipe', $$SELECT (f).id FROM ptf.deduplicate_keep_first(NULL::cs.pe,
    partition_by => '{k}', on_time => 'ts', changes => true, uid => 'pe-pipe',
    watermark_delay => '0') f$$, 'pe_firsts');
INSERT INTO pe VALUES (10, 10, NULL);
INSERT INTO pe VALUES (11, 11, '2024-01-02'), (12, 12, '2024-01-03');
-- a failing pipeline's last error, once it fails
CREATE FUNCTION pipe_error(pipe text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE e text;
BEGIN
    FOR i IN 1..300 LOOP
        SELECT last_error INTO e FROM ptf.pipeline_status WHERE name = pipe AND state = 'failing';
        EXIT WHEN e IS NOT NULL;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN e;
END $$;
SELECT regexp_replace(pipe_error('pe-pipe'), '[0-9]+, finished at [0-9A-F/]+', 'N, finished at X/Y') AS last_error;
SELECT skip_transaction('pe-pipe', substring(pipe_error('pe-pipe') from 'finished at ([0-9A-F]+/[0-9A-F]+)')::pg_lsn);
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN (SELECT count(*) FROM cs.pe_firsts) > 0;
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SELECT * FROM pe_firsts ORDER BY id;
SELECT state <> 'failing' AS goes_on, rows_skipped FROM pipeline_status WHERE name = 'pe-pipe';
SELECT drop_pipeline('pe-pipe');
-- a sink's trigger that drops its own pipeline fails the step, with why
-- (the drop waited for the step's origin, held by the step itself: the
-- worker waited on itself)
CREATE TABLE pe_sink2 (id int);
CREATE FUNCTION drop_me() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM ptf.drop_pipeline('pe-self'); RETURN NULL; END $$;
CREATE TRIGGER drop_me AFTER INSERT ON pe_sink2 FOR EACH STATEMENT EXECUTE FUNCTION drop_me();
SELECT create_pipeline('pe-self', $$SELECT (f).id FROM ptf.deduplicate_keep_first(NULL::cs.pe,
    partition_by => '{k}', changes => true, uid => 'pe-self') f$$, 'pe_sink2');
INSERT INTO pe VALUES (20, 20, '2024-01-05');
SELECT pipe_error('pe-self') AS last_error;
SELECT drop_pipeline('pe-self');
-- nor may it call a uid within the step: it would pass for the step
CREATE OR REPLACE FUNCTION drop_me() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM count(*) FROM ptf.deduplicate_keep_first(NULL::cs.pe, partition_by => '{k}',
    changes => true, uid => 'pe-self'); RETURN NULL; END $$;
SELECT create_pipeline('pe-self', $$SELECT (f).id FROM ptf.deduplicate_keep_first(NULL::cs.pe,
    partition_by => '{k}', changes => true, uid => 'pe-self') f$$, 'pe_sink2');
INSERT INTO pe VALUES (21, 21, '2024-01-06');
SELECT pipe_error('pe-self') AS last_error;
SELECT drop_pipeline('pe-self');

-- drop_state drops the slot with the state
SELECT count(*) AS slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%';
SELECT drop_state(uid) FROM state ORDER BY uid;
SELECT count(*) AS slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%';
SELECT drop_watermark('readings');
REVOKE ALL ON profiles FROM regress_ptf_cs;
REVOKE USAGE ON SCHEMA cs FROM regress_ptf_cs;
DROP ROLE regress_ptf_cs;
DROP TABLE snap_src;
