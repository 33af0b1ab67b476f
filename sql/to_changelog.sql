-- TO_CHANGELOG: every change as an append-only row (op, data, lsn,
-- commit_time, xid).  Flink's TO_CHANGELOG test programs, over relations,
-- queries and change streams.

CREATE SCHEMA tc;
SET search_path = tc, ptf;
\set SHOW_CONTEXT never

CREATE TABLE accounts (id int PRIMARY KEY, name text, balance int);
INSERT INTO accounts VALUES (1, 'alice', 10), (2, 'bob', 20);

-- a relation is insert-only: every row is an INSERT, with no decoding metadata
SELECT op, data, lsn, commit_time, xid FROM to_changelog(NULL::accounts) ORDER BY (data).id;
-- Flink's flat layout: (op, (data).*)
SELECT op, (data).* FROM to_changelog(NULL::accounts) ORDER BY id;

-- a query may return (kind, data): a retract stream passes through
SELECT op, data FROM to_changelog(NULL::accounts, query => $$
    VALUES ('+I', ROW(1, 'alice', 10)::tc.accounts), ('-U', ROW(1, 'alice', 10)::tc.accounts),
           ('+U', ROW(1, 'alice', 15)::tc.accounts), ('-D', ROW(1, 'alice', 15)::tc.accounts)$$);

-- custom codes; kinds left out of the mapping are dropped
SELECT op, data FROM to_changelog(NULL::accounts,
    op_mapping => '{"INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}', query => $$
    VALUES ('+I', ROW(1, 'alice', 10)::tc.accounts), ('-U', ROW(1, 'alice', 10)::tc.accounts),
           ('+U', ROW(1, 'alice', 15)::tc.accounts), ('-D', ROW(1, 'alice', 15)::tc.accounts)$$);
-- a deletion flag: several kinds to one code
SELECT op AS deleted, data FROM to_changelog(NULL::accounts,
    op_mapping => '{"INSERT, UPDATE_AFTER": "false", "DELETE": "true"}', query => $$
    VALUES ('+I', ROW(1, 'alice', 10)::tc.accounts), ('-U', ROW(1, 'alice', 10)::tc.accounts),
           ('+U', ROW(1, 'alice', 15)::tc.accounts), ('-D', ROW(1, 'alice', 15)::tc.accounts)$$);
-- partial deletes keep the key columns only (partition_by), the rest NULL
SELECT op, data FROM to_changelog(NULL::accounts, partition_by => '{id}',
    produces_full_deletes => false, query => $$
    VALUES ('+I', ROW(1, 'alice', 10)::tc.accounts), ('-D', ROW(1, 'alice', 10)::tc.accounts)$$);

-- invalid mappings fail before any row is read
CREATE FUNCTION noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'an input row was read'; RETURN true; END $$;
SELECT * FROM to_changelog(NULL::accounts, op_mapping => '{"INVALID_KIND": "x"}',
    query => 'SELECT * FROM tc.accounts WHERE tc.noisy()');
SELECT * FROM to_changelog(NULL::accounts, op_mapping => '{"INSERT, DELETE": "a", "DELETE": "b"}',
    query => 'SELECT * FROM tc.accounts WHERE tc.noisy()');
SELECT * FROM to_changelog(NULL::accounts, op_mapping => '["INSERT", "x"]');
SELECT * FROM to_changelog(NULL::accounts, op_mapping => '{"INSERT": 1}');
SELECT * FROM to_changelog(NULL::accounts, op_mapping => '{"insert": "i"}');
SELECT * FROM to_changelog(NULL::accounts, produces_full_deletes => NULL);
-- partial deletes keep partition_by, else the table's primary key; without either, an error
SELECT op, data FROM to_changelog(NULL::accounts, produces_full_deletes => false, query => $$
    VALUES ('+I', ROW(1, 'alice', 10)::tc.accounts), ('-D', ROW(1, 'alice', 10)::tc.accounts)$$);
CREATE TABLE no_key (id int, v text);
SELECT * FROM to_changelog(NULL::no_key, produces_full_deletes => false);

-- ---- change streams ----

-- a retract stream: REPLICA IDENTITY FULL logs whole old images, passed through
CREATE TABLE ledger (id int PRIMARY KEY, amount int);
ALTER TABLE ledger REPLICA IDENTITY FULL;
SELECT * FROM to_changelog(NULL::ledger, changes => true, uid => 'ledger');
BEGIN;
INSERT INTO ledger VALUES (1, 100), (2, 200);
SELECT pg_current_xact_id() AS writer \gset
COMMIT;
UPDATE ledger SET amount = 150 WHERE id = 1;
DELETE FROM ledger WHERE id = 2;
CREATE TABLE ledger_log AS
SELECT row_number() OVER () AS n, * FROM to_changelog(NULL::ledger, changes => true, uid => 'ledger');
SELECT n, op, data FROM ledger_log ORDER BY n;
-- the metadata: the change's LSN (rows of one change share it), the commit
-- time and the transaction id of the writer
SELECT bool_and(lsn IS NOT NULL AND commit_time IS NOT NULL) AS all_there,
       count(DISTINCT lsn) AS changes,
       (SELECT xid FROM ledger_log WHERE n = 1) = :'writer'::xid8 AS xid_is_writers,
       bool_and(commit_time <= now()) AS committed_before
  FROM ledger_log;
SELECT a.n, a.lsn < b.lsn AS in_order FROM ledger_log a JOIN ledger_log b ON b.n = a.n + 1
 WHERE a.lsn <> b.lsn ORDER BY a.n;

-- an upsert stream: under REPLICA IDENTITY DEFAULT the rows are normalized
-- from the last image kept per key (Flink's ChangelogNormalize)
CREATE TABLE users (id int PRIMARY KEY, name text, email text);
INSERT INTO users VALUES (9, 'before', 'b@x');      -- exists before the stream
SELECT * FROM to_changelog(NULL::users, changes => true, uid => 'users');
INSERT INTO users VALUES (1, 'ann', 'a@x');
UPDATE users SET email = 'ann@x' WHERE id = 1;     -- no old image logged: -U from state
UPDATE users SET name = 'b4' WHERE id = 9;         -- no image kept: +U becomes +I
UPDATE users SET id = 2 WHERE id = 1;              -- key change: old key's image, new key +I
DELETE FROM users WHERE id = 2;                    -- key only logged: whole -D from state
DELETE FROM users WHERE id = 9;                    -- image kept since the +I above
SELECT op, data FROM to_changelog(NULL::users, changes => true, uid => 'users');
SELECT keys, rows_in, rows_out, rows_skipped FROM state WHERE uid = 'users';
-- a delete of a key whose image was never kept is dropped and counted
INSERT INTO users VALUES (3, 'c', 'c@x');
SELECT op, data FROM to_changelog(NULL::users, changes => true, uid => 'users');
SELECT ptf.drop_state('users-late');
SELECT * FROM to_changelog(NULL::users, changes => true, uid => 'users-late');
DELETE FROM users WHERE id = 3;
SELECT op, data FROM to_changelog(NULL::users, changes => true, uid => 'users-late');
SELECT rows_in, rows_out, rows_skipped FROM state WHERE uid = 'users-late';

-- no UPDATE_BEFORE and partial deletes asked: no normalization, no state
-- (FLINK-39258); updates are bare UPDATE_AFTERs, deletes keep the key
SELECT * FROM to_changelog(NULL::users, changes => true, uid => 'users-upsert',
    op_mapping => '{"INSERT": "i", "UPDATE_AFTER": "u", "DELETE": "d"}',
    produces_full_deletes => false);
INSERT INTO users VALUES (4, 'd', 'd@x');
UPDATE users SET name = 'dd' WHERE id = 4;
DELETE FROM users WHERE id = 4;
SELECT op, data FROM to_changelog(NULL::users, changes => true, uid => 'users-upsert',
    op_mapping => '{"INSERT": "i", "UPDATE_AFTER": "u", "DELETE": "d"}',
    produces_full_deletes => false);
SELECT keys FROM state WHERE uid = 'users-upsert';
-- the uid cannot switch to normalization later: its images would be missing
SELECT * FROM to_changelog(NULL::users, changes => true, uid => 'users-upsert');

-- unchanged TOASTed values of a new image are completed from the kept image
CREATE TABLE docs (id int PRIMARY KEY, body text, rev int);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
SELECT * FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
INSERT INTO docs VALUES (1, repeat('abc', 3000), 1);
UPDATE docs SET rev = 2;
-- a new key: -D of the old row, +I completed from it
UPDATE docs SET id = 7;
SELECT op, (data).id, length((data).body), md5((data).body) = md5(repeat('abc', 3000)) AS same, (data).rev
  FROM to_changelog(NULL::docs, changes => true, uid => 'docs');

-- an update to the same values says nothing (Flink drops it when no state
-- TTL is set) ...
UPDATE docs SET rev = rev;
SELECT op, (data).id FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
SELECT rows_in, rows_out, rows_skipped FROM state WHERE uid = 'docs';
-- ... but renews the key's TTL when one is
SELECT * FROM to_changelog(NULL::docs, changes => true, uid => 'docs-ttl', state_ttl => '1 day');
INSERT INTO docs VALUES (8, 'short', 1);
UPDATE docs SET rev = rev WHERE id = 8;
SELECT op, data FROM to_changelog(NULL::docs, changes => true, uid => 'docs-ttl', state_ttl => '1 day');

-- the stream can be written straight into a table
CREATE TABLE docs_log (op text, id int, rev int);
UPDATE docs SET rev = 3 WHERE id = 8;
INSERT INTO docs_log SELECT op, (data).id, (data).rev
  FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
TABLE docs_log;

-- a key stored out of line: PostgreSQL logs the old key of every update
-- then, changed or not, and the new row holds the unchanged key as a TOAST
-- pointer.  An update that keeps its key is -U/+U, as for a short key (the
-- key taken from the old key); a new key is -D and +I.
CREATE TABLE longkey (id text PRIMARY KEY, bal int, pad text);
SELECT count(*) FROM to_changelog(NULL::longkey, changes => true, uid => 'longkey');
INSERT INTO longkey VALUES ('short', 1, NULL),
  ((SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j), 1, md5('x')||md5('y')||md5('z')||md5('w'));
SELECT op, length((data).id) FROM to_changelog(NULL::longkey, changes => true, uid => 'longkey');
UPDATE longkey SET bal = 2;
INSERT INTO longkey VALUES ((SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j), 3, NULL)
  ON CONFLICT (id) DO UPDATE SET bal = EXCLUDED.bal;
UPDATE longkey SET id = id || 'x', bal = 4 WHERE bal = 3;
SELECT op, length((data).id), (data).id = (SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j) AS same_key,
       (data).bal, length((data).pad)
  FROM to_changelog(NULL::longkey, changes => true, uid => 'longkey');
-- a key of two columns, one out of line and unchanged: the other's change is a new key
CREATE TABLE longkey2 (k text, n int, v int, pad text, PRIMARY KEY (k, n));
SELECT count(*) FROM to_changelog(NULL::longkey2, changes => true, uid => 'longkey2');
INSERT INTO longkey2 VALUES ((SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j), 1, 1,
                             md5('x')||md5('y')||md5('z')||md5('w'));
UPDATE longkey2 SET v = 2;
UPDATE longkey2 SET n = 2;
DELETE FROM longkey2;
SELECT op, length((data).k), (data).n, (data).v
  FROM to_changelog(NULL::longkey2, changes => true, uid => 'longkey2');

-- rows whose keys are out of line (the 1920-byte ones) updated, then
-- deleted, before the stream reads them: nothing is read from the table's
-- TOAST, where their keys are gone, and the stream goes on.  Three rounds
-- of 3000 upserts and some deletes, one of them with the state read key
-- by key.
CREATE TABLE toastkeys (id text PRIMARY KEY, n int, bal int, pad text);
SELECT count(*) FROM to_changelog(NULL::toastkeys, changes => true, uid => 'toastkeys');
INSERT INTO toastkeys
  SELECT (SELECT string_agg(md5(i::text || j), '') FROM generate_series(1, 1 + i % 60) j), i, 0,
         repeat(md5(i::text), 100)
    FROM generate_series(0, 2999) i;
SELECT op, count(*) FROM to_changelog(NULL::toastkeys, changes => true, uid => 'toastkeys') GROUP BY op;
INSERT INTO toastkeys SELECT id, n, 1, pad FROM toastkeys ON CONFLICT (id) DO UPDATE SET bal = EXCLUDED.bal;
DELETE FROM toastkeys WHERE n % 60 = 59 AND n < 1000;
SELECT op, count(*), sum((data).bal), count(*) FILTER (WHERE length((data).id) = 1920) AS long_keys
  FROM to_changelog(NULL::toastkeys, changes => true, uid => 'toastkeys') GROUP BY op ORDER BY op;
SELECT count(*) FROM to_changelog(NULL::toastkeys, changes => true, uid => 'toastkeys');
INSERT INTO toastkeys SELECT id, n, 2, pad FROM toastkeys ON CONFLICT (id) DO UPDATE SET bal = EXCLUDED.bal;
DELETE FROM toastkeys WHERE n % 60 = 59 AND n < 2000;
SET ptf.state_load = probe;
SELECT op, count(*), sum((data).bal), count(*) FILTER (WHERE length((data).id) = 1920) AS long_keys
  FROM to_changelog(NULL::toastkeys, changes => true, uid => 'toastkeys') GROUP BY op ORDER BY op;
RESET ptf.state_load;
UPDATE toastkeys SET bal = 3;
DELETE FROM toastkeys WHERE n % 60 = 59;
SELECT op, count(*), sum((data).bal), count(*) FILTER (WHERE length((data).id) = 1920) AS long_keys
  FROM to_changelog(NULL::toastkeys, changes => true, uid => 'toastkeys') GROUP BY op ORDER BY op;
SELECT keys, rows_skipped FROM state WHERE uid = 'toastkeys';
SELECT drop_state('longkey'), drop_state('longkey2'), drop_state('toastkeys');
DROP TABLE longkey, longkey2, toastkeys;

-- TRUNCATE.  Without kept images the WAL names no row it removed: an
-- op_mapping that leaves it out cannot say it -- a clear error, and the way
-- out: map it and call again (the stream waits at the truncation)
CREATE TABLE tt (id int PRIMARY KEY);
ALTER TABLE tt REPLICA IDENTITY FULL;
SELECT * FROM to_changelog(NULL::tt, op_mapping => '{"INSERT": "c", "DELETE": "d"}',
    changes => true, uid => 'tt');
INSERT INTO tt VALUES (1);
TRUNCATE tt;
INSERT INTO tt VALUES (2);
-- (the detail names the truncation's LSN, which varies: shown without it)
DO $$
DECLARE st text; msg text; hint text;
BEGIN
    PERFORM * FROM ptf.to_changelog(NULL::tc.tt, op_mapping => '{"INSERT": "c", "DELETE": "d"}',
        changes => true, uid => 'tt');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RAISE NOTICE '% %; hint: %', st, msg, hint;
END $$;
-- mapped (Debezium's 't'), it is a row of its own, with no data: nothing is
-- lost or doubled around it
SELECT op, data FROM to_changelog(NULL::tt,
    op_mapping => '{"INSERT": "c", "DELETE": "d", "TRUNCATE": "t"}', changes => true, uid => 'tt');
-- a pipeline's query cannot change: one that leaves TRUNCATE out is refused
-- when it is made (22023), before a truncation could stop it for good
CREATE TABLE tt_sink (op text, id int);
SELECT create_pipeline('tt-pipe', $$SELECT op, (data).id FROM ptf.to_changelog(NULL::tc.tt,
    op_mapping => '{"INSERT": "c", "DELETE": "d"}', changes => true, uid => 'tt-pipe')$$,
    'tt_sink');
SELECT count(*) AS pipelines FROM pipeline_status WHERE name = 'tt-pipe';
SELECT create_pipeline('tt-pipe', $$SELECT op, (data).id FROM ptf.to_changelog(NULL::tc.tt,
    op_mapping => '{"INSERT": "c", "DELETE": "d", "TRUNCATE": "t"}', changes => true,
    uid => 'tt-pipe')$$, 'tt_sink');
SELECT drop_pipeline('tt-pipe');
-- the default mapping names it TRUNCATE
TRUNCATE tt;
INSERT INTO tt VALUES (3);
SELECT op, data FROM to_changelog(NULL::tt, changes => true, uid => 'tt');
SELECT * FROM to_changelog(NULL::tt, op_mapping => '{"TRUNCATE, DELETE": "d", "TRUNCATE": "t"}');
-- with images kept (an upsert stream, whole deletes asked for) a truncation
-- deletes each row it removed, then is a row of its own if mapped
CREATE TABLE tk (id int PRIMARY KEY, v text);
SELECT * FROM to_changelog(NULL::tk, changes => true, uid => 'tk',
    op_mapping => '{"INSERT": "c", "UPDATE_BEFORE": "b", "UPDATE_AFTER": "u", "DELETE": "d"}');
INSERT INTO tk VALUES (1, 'a'), (2, 'b'), (3, 'c');
UPDATE tk SET v = 'cc' WHERE id = 3;
DELETE FROM tk WHERE id = 2;
TRUNCATE tk;
INSERT INTO tk VALUES (4, 'd');
SELECT op, data FROM to_changelog(NULL::tk, changes => true, uid => 'tk',
    op_mapping => '{"INSERT": "c", "UPDATE_BEFORE": "b", "UPDATE_AFTER": "u", "DELETE": "d"}')
 ORDER BY lsn, op = 'u', (data).id;
SELECT keys FROM state WHERE uid = 'tk';

-- a table logging no key cannot be normalized
CREATE TABLE nokey (v int);
SELECT * FROM to_changelog(NULL::nokey, changes => true, uid => 'nokey');
CREATE TABLE nothing (id int PRIMARY KEY, v int);
ALTER TABLE nothing REPLICA IDENTITY NOTHING;
SELECT * FROM to_changelog(NULL::nothing, changes => true, uid => 'nothing');
ALTER TABLE nokey REPLICA IDENTITY FULL;
SELECT * FROM to_changelog(NULL::nokey, changes => true, uid => 'nokey');
INSERT INTO nokey VALUES (1);
UPDATE nokey SET v = 2;
SELECT op, data FROM to_changelog(NULL::nokey, changes => true, uid => 'nokey');

-- the replica identity switched and back between two calls: the changes made meanwhile hold
-- less than the stream reads -- an error at them, not rows of NULLs or a lost delete
CREATE TABLE ri (id int PRIMARY KEY, v text, n int);
ALTER TABLE ri REPLICA IDENTITY FULL;
SELECT * FROM to_changelog(NULL::ri, changes => true, uid => 'ri-full');
INSERT INTO ri VALUES (1, 'one', 10), (2, 'two', 20);
SELECT op, data FROM to_changelog(NULL::ri, changes => true, uid => 'ri-full');
ALTER TABLE ri REPLICA IDENTITY DEFAULT;
DELETE FROM ri WHERE id = 2;
ALTER TABLE ri REPLICA IDENTITY FULL;
\set VERBOSITY terse
SELECT op, data FROM to_changelog(NULL::ri, changes => true, uid => 'ri-full');
SELECT op, data FROM to_changelog(NULL::ri, changes => true, uid => 'ri-full');
\set VERBOSITY default
SELECT drop_state('ri-full');
ALTER TABLE ri REPLICA IDENTITY DEFAULT;
SELECT * FROM to_changelog(NULL::ri, changes => true, uid => 'ri-norm');
UPDATE ri SET n = 11 WHERE id = 1;
SELECT op, data FROM to_changelog(NULL::ri, changes => true, uid => 'ri-norm');
ALTER TABLE ri REPLICA IDENTITY NOTHING;
DELETE FROM ri WHERE id = 1;
ALTER TABLE ri REPLICA IDENTITY DEFAULT;
\set VERBOSITY terse
SELECT op, data FROM to_changelog(NULL::ri, changes => true, uid => 'ri-norm');
\set VERBOSITY default
-- a stream that asks for neither -U rows nor whole deletes reads what the WAL has
SELECT drop_state('ri-norm');
INSERT INTO ri VALUES (3, 'three', 30);
SELECT * FROM to_changelog(NULL::ri, changes => true, uid => 'ri-keys', produces_full_deletes => false,
                           op_mapping => '{"INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}');
ALTER TABLE ri REPLICA IDENTITY NOTHING;
UPDATE ri SET n = 31 WHERE id = 3;
ALTER TABLE ri REPLICA IDENTITY DEFAULT;
DELETE FROM ri WHERE id = 3;
SELECT op, data FROM to_changelog(NULL::ri, changes => true, uid => 'ri-keys', produces_full_deletes => false,
                                  op_mapping => '{"INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}');

-- a drop_state that rolls back leaves the stream whole: its slot goes only at commit
CREATE TABLE keep (id int PRIMARY KEY);
ALTER TABLE keep REPLICA IDENTITY FULL;
SELECT * FROM to_changelog(NULL::keep, changes => true, uid => 'keep');
INSERT INTO keep VALUES (1);
BEGIN;
SELECT drop_state('keep');
ROLLBACK;
INSERT INTO keep VALUES (2);
SELECT op, data FROM to_changelog(NULL::keep, changes => true, uid => 'keep');
SELECT drop_state('keep');
DROP TABLE keep;

-- an unlogged or temporary table's changes are not in the WAL: no stream over one, and a
-- streamed table stays logged
CREATE UNLOGGED TABLE ul (id int PRIMARY KEY, v text);
SELECT * FROM to_changelog(NULL::ul, changes => true, uid => 'ul');
CREATE TEMP TABLE tmp (id int PRIMARY KEY, v text);
SELECT * FROM to_changelog(NULL::tmp, changes => true, uid => 'tmp');
ALTER TABLE ul SET LOGGED;
SELECT * FROM to_changelog(NULL::ul, changes => true, uid => 'ul');
ALTER TABLE ul SET UNLOGGED;
ALTER TABLE ul ADD COLUMN w int, SET UNLOGGED;
INSERT INTO ul VALUES (1, 'a');
SELECT op, data FROM to_changelog(NULL::ul, changes => true, uid => 'ul');
SELECT drop_state('ul');
ALTER TABLE ul SET UNLOGGED;
DROP TABLE ul, tmp;

SELECT drop_state(uid) FROM state ORDER BY uid;
SELECT count(*) AS slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%';
