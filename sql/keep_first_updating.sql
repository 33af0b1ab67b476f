-- Updating input: FLIP-614 §4.1.3.7.  A query returning (kind, data) hands a
-- changelog to the function; kinds are +I -U +U -D (or their long names).

CREATE SCHEMA kf_upd;
SET search_path = kf_upd, ptf;

CREATE TABLE user_events (user_name text, event text);

-- FLIP-614 §4.1.3.7 exactly:
--   -D[Vas, logout]  key not seen yet -> ignored, not marked
--   +I[Vas, login]   first +I/+U -> emitted
--   +I[Vas, login]   swallowed
--   -U[Vas, login]   swallowed
--   +U[Vas, click]   swallowed
--   -D[Vas, click]   swallowed
CREATE TABLE changelog (seq int, kind text, data user_events);
INSERT INTO changelog VALUES
    (1, '-D', ROW('Vas', 'logout')),
    (2, '+I', ROW('Vas', 'login')),
    (3, '+I', ROW('Vas', 'login')),
    (4, '-U', ROW('Vas', 'login')),
    (5, '+U', ROW('Vas', 'click')),
    (6, '-D', ROW('Vas', 'click'));
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    query => 'SELECT kind, data FROM changelog ORDER BY seq');

-- a -U/+U pair whose +U is the key's first row: the +U is emitted (as an insert)
CREATE TABLE changelog2 (seq int, kind text, data user_events);
INSERT INTO changelog2 VALUES
    (1, 'UPDATE_BEFORE', ROW('Bob', 'old')),
    (2, 'UPDATE_AFTER',  ROW('Bob', 'new')),
    (3, 'UPDATE_AFTER',  ROW('Bob', 'newer')),
    (4, 'DELETE',        ROW('Ann', 'gone')),
    (5, 'INSERT',        ROW('Ann', 'back'));
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    query => 'SELECT kind, data FROM changelog2 ORDER BY seq');

-- retractions of an unseen key do not mark it, also across calls with a uid
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    uid => 'upd', query => $$VALUES ('-D', ROW('Eve', 'x')::user_events), ('-U', ROW('Eve', 'y')::user_events)$$);
SELECT keys FROM state WHERE uid = 'upd';
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    uid => 'upd', query => $$VALUES ('+U', ROW('Eve', 'z')::user_events), ('-D', ROW('Eve', 'z')::user_events)$$);
SELECT keys FROM state WHERE uid = 'upd';
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    uid => 'upd', query => $$VALUES ('+I', ROW('Eve', 'again')::user_events)$$);

-- with TTL, every swallowed change of a seen key is an occurrence that
-- refreshes it when reset_ttl_on_duplicate (a retraction too)
CREATE TABLE timed (kind text, data user_events, at timestamptz);
INSERT INTO timed VALUES
    ('+I', ROW('Vas', 'a'), '2024-01-01 10:00+00'),
    ('-D', ROW('Vas', 'a'), '2024-01-01 10:04+00'),
    ('+I', ROW('Vas', 'b'), '2024-01-01 10:08+00');
CREATE TYPE timed_row AS (user_name text, event text, at timestamptz);
SELECT user_name, event FROM deduplicate_keep_first(NULL::timed_row, partition_by => '{user_name}',
    state_ttl => '5 minutes', proc_time => 'at',
    query => $$SELECT kind, ROW((data).user_name, (data).event, at)::timed_row FROM timed$$);
SELECT user_name, event FROM deduplicate_keep_first(NULL::timed_row, partition_by => '{user_name}',
    state_ttl => '5 minutes', proc_time => 'at', reset_ttl_on_duplicate => false,
    query => $$SELECT kind, ROW((data).user_name, (data).event, at)::timed_row FROM timed$$);
SELECT drop_state('upd');
