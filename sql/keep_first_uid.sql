-- Durable state (uid): incremental calls, transactions, identity checks,
-- watermark and pending candidates carried across calls, ptf.state, drop_state.

CREATE SCHEMA kf_uid;
SET search_path = kf_uid, ptf;
SET TIME ZONE 'UTC';

CREATE TABLE events (batch int, user_id text, amount numeric, ts timestamptz);
INSERT INTO events VALUES
    (1, 'alice', 1.0, '2024-01-01 10:00'), (1, 'bob', 2, '2024-01-01 10:01'),
    (1, 'alice', 3, '2024-01-01 10:02'),
    (2, 'bob', 4, '2024-01-01 10:03'), (2, 'carol', 5, '2024-01-01 10:04'),
    (2, NULL, 6, '2024-01-01 10:05'), (2, 'carol', 7, '2024-01-01 10:06'),
    (3, NULL, 8, '2024-01-01 10:07'), (3, 'dave', 9, '2024-01-01 10:08'),
    (3, 'alice', 10, '2024-01-01 10:09');

-- each call is one step of the stream: only keys not seen before come out
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 1');
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 2');
SELECT uid, function, partition_by, on_time, keys, bytes > 0 AS has_bytes, watermark,
       rows_in, rows_out, rows_late
  FROM state;

-- state changes in the caller's transaction: ROLLBACK undoes them
BEGIN;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 3');
SELECT keys, rows_in FROM state WHERE uid = 'users';
ROLLBACK;
SELECT keys, rows_in FROM state WHERE uid = 'users';
-- a savepoint rolled back too
BEGIN;
SAVEPOINT s;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 3');
ROLLBACK TO SAVEPOINT s;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 3');
-- a second call in the same transaction sees the first one's state
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 3');
COMMIT;
SELECT keys, rows_in, rows_out FROM state WHERE uid = 'users';

-- the kept keys are plain rows of the uid's state table
SELECT state_table AS users_table FROM state WHERE uid = 'users' \gset
SELECT user_id, expires_at FROM :users_table ORDER BY user_id NULLS FIRST;

-- key equality in durable state is the type's own, as in memory: 1.0 = 1.00
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{amount}',
    uid => 'amounts', query => 'SELECT * FROM events WHERE amount = 1');
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{amount}',
    uid => 'amounts', query => $$SELECT 9, 'x', 1.000, now()$$);

-- a uid is bound to its function, keys, on_time and row type
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{batch}',
    uid => 'users', query => 'SELECT * FROM events WHERE false');
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    on_time => 'ts', uid => 'users', query => 'SELECT * FROM events WHERE false');
CREATE TABLE other_events (batch int, user_id text, amount numeric, ts timestamptz);
SELECT * FROM deduplicate_keep_first(NULL::other_events, partition_by => '{user_id}',
    uid => 'users');

-- a uid of another function is refused too (the registry is edited by hand
-- here only because no other function exists yet)
UPDATE uid_registry SET function = 'to_changelog' WHERE uid = 'amounts';
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{amount}',
    uid => 'amounts', query => 'SELECT * FROM events WHERE false');
UPDATE uid_registry SET function = 'deduplicate_keep_first' WHERE uid = 'amounts';

-- unkeyed with a uid: one row ever
SELECT * FROM deduplicate_keep_first(NULL::events, uid => 'first-ever',
    query => 'SELECT * FROM events WHERE batch = 2');
SELECT * FROM deduplicate_keep_first(NULL::events, uid => 'first-ever',
    query => 'SELECT * FROM events WHERE batch = 1');

-- TTL across calls, processing time from a column
CREATE TABLE logins (user_name text, arrived timestamptz);
INSERT INTO logins VALUES ('Vas', '2024-01-01 10:00'), ('Vas', '2024-01-01 10:03');
SELECT * FROM deduplicate_keep_first(NULL::logins, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived', uid => 'logins');
SELECT * FROM deduplicate_keep_first(NULL::logins, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived', uid => 'logins',
    query => $$SELECT 'Vas', timestamptz '2024-01-01 10:04'$$);
SELECT * FROM deduplicate_keep_first(NULL::logins, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived', uid => 'logins',
    query => $$SELECT 'Vas', timestamptz '2024-01-01 10:07'$$);

-- state_ttl may change between calls; without a TTL, kept keys never expire
SELECT * FROM deduplicate_keep_first(NULL::logins, partition_by => '{user_name}',
    proc_time => 'arrived', uid => 'logins',
    query => $$SELECT 'Vas', timestamptz '2024-02-01 10:00'$$);
SELECT * FROM deduplicate_keep_first(NULL::logins, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', proc_time => 'arrived', uid => 'logins',
    query => $$SELECT 'Vas', timestamptz '2024-02-01 10:00'$$);

-- event time across calls: FLIP-614 §4.1.2.2.1 fed one row per call; the
-- watermark and the pending candidate carry over
CREATE TABLE user_events (user_id text, event text, rowtime timestamptz);
SELECT set_watermark('user_events', 'rowtime', interval '5 minutes');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', uid => 'seed',
    query => $$VALUES ('u1', 'click', timestamptz '2024-01-01 10:02')$$);
SELECT keys, watermark FROM state WHERE uid = 'seed';
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', uid => 'seed',
    query => $$VALUES ('u1', 'view', timestamptz '2024-01-01 10:01')$$);
SELECT state_table AS seed_table FROM state WHERE uid = 'seed' \gset
SELECT user_id, event_time, (ptf.state_row(image, NULL::user_events)).event FROM :seed_table;
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', uid => 'seed',
    query => $$VALUES ('u1', 'scroll', timestamptz '2024-01-01 10:06')$$);
SELECT keys, watermark, rows_out FROM state WHERE uid = 'seed';
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', uid => 'seed',
    query => $$VALUES ('u1', 'signup', timestamptz '2024-01-01 10:00')$$);
SELECT keys, watermark, rows_in, rows_out, rows_late FROM state WHERE uid = 'seed';
-- a uid's input is a stream: its end emits nothing; pending stays pending
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', uid => 'seed',
    query => $$VALUES ('u2', 'open', timestamptz '2024-01-01 10:04')$$);
SELECT user_id, event_time, (ptf.state_row(image, NULL::user_events)).event FROM :seed_table ORDER BY user_id;

-- without any declared or given delay, a uid's watermark is max(event time):
-- rows out of order within the stream are late
CREATE TABLE readings (sensor int, ts timestamptz);
SELECT * FROM deduplicate_keep_first(NULL::readings, partition_by => '{sensor}',
    on_time => 'ts', uid => 'readings',
    query => $$VALUES (1, timestamptz '2024-01-01 10:05'), (2, timestamptz '2024-01-01 10:01'),
                      (2, timestamptz '2024-01-01 10:06')$$);
SELECT keys, watermark, rows_late FROM state WHERE uid = 'readings';

-- a call whose input calls the same uid is refused (it would load the keys
-- before the inner call wrote them)
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}', uid => 'nest',
    query => $$SELECT * FROM events WHERE batch = 1
               UNION ALL
               SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
                   uid => 'nest')$$);
-- and nothing is left over: the uid works afterwards, also after an error
-- caught by a savepoint
SELECT count(*) FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}', uid => 'nest');
DO $$
BEGIN
    PERFORM * FROM ptf.deduplicate_keep_first(NULL::kf_uid.events, partition_by => '{user_id}',
        uid => 'nest', query => 'SELECT * FROM kf_uid.events WHERE 1/0 = 1');
EXCEPTION WHEN division_by_zero THEN
    RAISE NOTICE 'caught';
END $$;
SELECT count(*) FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}', uid => 'nest');

-- with proc_time, expiry is measured in the stream's own processing time: a
-- call with no rows does not expire anything by the wall clock
CREATE TABLE pings (user_name text, arrived timestamptz, batch int);
INSERT INTO pings VALUES ('a', '2024-01-01 10:00', 1), ('b', '2024-01-01 10:01', 1),
                         ('a', '2024-01-01 10:03', 3);
SELECT * FROM deduplicate_keep_first(NULL::pings, partition_by => '{user_name}', state_ttl => '1 hour',
    proc_time => 'arrived', uid => 'pings', query => 'SELECT * FROM pings WHERE batch = 1');
SELECT * FROM deduplicate_keep_first(NULL::pings, partition_by => '{user_name}', state_ttl => '1 hour',
    proc_time => 'arrived', uid => 'pings', query => 'SELECT * FROM pings WHERE batch = 2');
SELECT keys FROM state WHERE uid = 'pings';
SELECT * FROM deduplicate_keep_first(NULL::pings, partition_by => '{user_name}', state_ttl => '1 hour',
    proc_time => 'arrived', uid => 'pings', query => 'SELECT * FROM pings WHERE batch = 3');

-- an infinite event time is kept but moves no watermark
CREATE TABLE inf (k int, ts timestamp);
INSERT INTO inf VALUES (1, 'infinity'), (1, '2024-01-01'), (2, '-infinity'), (3, '2024-01-02');
SELECT * FROM deduplicate_keep_first(NULL::inf, partition_by => '{k}', on_time => 'ts', uid => 'inf');
SELECT keys, watermark, rows_late FROM state WHERE uid = 'inf';

-- a LIMIT over a call with a uid does not stop it early: warned when planned; the state
-- holds every key the call read
CREATE TABLE lim (k int);
INSERT INTO lim SELECT g FROM generate_series(1, 5) g;
SELECT * FROM deduplicate_keep_first(NULL::lim, partition_by => '{k}', uid => 'lim') ORDER BY k LIMIT 2;
SELECT keys FROM state WHERE uid = 'lim';
SELECT * FROM (SELECT * FROM to_changelog(NULL::lim, uid => 'lim_cl') OFFSET 4) t;
-- no warning: no uid, a NULL uid, no LIMIT on the call's own level, OFFSET 0, LIMIT ALL
SELECT * FROM deduplicate_keep_first(NULL::lim, partition_by => '{k}') ORDER BY k LIMIT 1;
SELECT * FROM deduplicate_keep_first(NULL::lim, partition_by => '{k}', uid => NULL) ORDER BY k LIMIT 1;
SELECT count(*) FROM (SELECT * FROM deduplicate_keep_first(NULL::lim, partition_by => '{k}', uid => 'lim2')) t;
SELECT count(*) FROM (SELECT * FROM deduplicate_keep_first(NULL::lim, partition_by => '{k}', uid => 'lim3') OFFSET 0) t;
SELECT count(*) FROM (SELECT * FROM deduplicate_keep_first(NULL::lim, partition_by => '{k}', uid => 'lim4') LIMIT ALL) t;
SELECT drop_state('lim'), drop_state('lim_cl'), drop_state('lim2'), drop_state('lim3'), drop_state('lim4');
DROP TABLE lim;

-- drop_state forgets everything, table included
SELECT drop_state('users');
SELECT drop_state('users');
SELECT to_regclass(:'users_table');
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    uid => 'users', query => 'SELECT * FROM events WHERE batch = 1');

SELECT uid, keys FROM state ORDER BY uid;
SELECT drop_state(uid) FROM state ORDER BY uid;
SELECT count(*) FROM uid_registry;
SELECT drop_watermark('user_events');
