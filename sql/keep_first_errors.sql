-- Bad input: each case fails with a clear message and its SQLSTATE, before
-- any input row is read (the input query would raise a NOTICE per row).

CREATE SCHEMA kf_err;
SET search_path = kf_err, ptf;

CREATE TABLE events (user_id text, event text, ts timestamptz, n int, p point, j json);
INSERT INTO events VALUES ('u1', 'click', '2024-01-01 10:00+00', 1, '(0,0)', '{}');

-- a volatile function in the input query: a NOTICE means rows were read
CREATE FUNCTION noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'an input row was read'; RETURN true; END $$;

-- runs a statement, returns its SQLSTATE and message
CREATE FUNCTION err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- unknown columns: 42703
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{nope}',
    query => 'SELECT * FROM events WHERE noisy()')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, on_time => 'nope',
    query => 'SELECT * FROM events WHERE noisy()')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, proc_time => 'nope', state_ttl => '1 hour',
    query => 'SELECT * FROM events WHERE noisy()')$$);
-- column names are exact identifiers, not case-folded SQL
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{USER_ID}')$$);
-- a column named twice: 42701
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id,user_id}')$$);

-- time columns must hold time: 42804
SELECT * FROM deduplicate_keep_first(NULL::events, on_time => 'event',
    query => 'SELECT * FROM events WHERE noisy()');
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, on_time => 'n')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, proc_time => 'event')$$);

-- negative intervals: 22023
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, state_ttl => '-1 minute',
    query => 'SELECT * FROM events WHERE noisy()')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, on_time => 'ts',
    watermark_delay => '-1 second')$$);
-- a watermark without event time: 22023
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, watermark_delay => '1 second')$$);

-- the input must be a table's row type: 42804
SELECT err($$SELECT * FROM deduplicate_keep_first(1)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::text)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(ROW(1, 'a'))$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL)$$);
-- a composite type with no table behind it needs a query: 22023
CREATE TYPE pair AS (k int, v text);
SELECT * FROM deduplicate_keep_first(NULL::pair);

-- a query whose result is not the input row type: 42804, before it runs
SELECT * FROM deduplicate_keep_first(NULL::events,
    query => 'SELECT user_id, event FROM events WHERE noisy()');
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events,
    query => 'SELECT user_id, event, ts, n::bigint, p, j FROM events WHERE noisy()')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events,
    query => 'SELECT *, 1 FROM events WHERE noisy()')$$);
-- a query must be one statement returning rows: 22023, or the parser's own error
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events,
    query => 'SELECT * FROM events; SELECT * FROM events')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events,
    query => 'CREATE TABLE oops (a int)')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, query => 'SELEC 1')$$);
SELECT to_regclass('oops');

-- key types need hash equality: 42883
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{p}',
    query => 'SELECT * FROM events WHERE noisy()');
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id,j}')$$);

-- NULL where a value is required: 22004
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, reset_ttl_on_duplicate => NULL)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, changes => NULL)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => ARRAY['user_id', NULL])$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{{user_id}}')$$);
-- NULL event or processing time in a row: 22004 (found when the row is read)
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, on_time => 'ts',
    query => $q$SELECT 'u1', 'x', NULL::timestamptz, 1, NULL::point, NULL::json$q$)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, proc_time => 'ts', state_ttl => '1 day',
    query => $q$SELECT 'u1', 'x', NULL::timestamptz, 1, NULL::point, NULL::json$q$)$$);

-- uid must not be empty: 22023
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, uid => '')$$);
SELECT err($$SELECT drop_state('')$$);
SELECT drop_state(NULL);

-- on_time with an updating input (a query returning (kind, data)): 0A000
SELECT * FROM deduplicate_keep_first(NULL::events, on_time => 'ts',
    query => $$SELECT '+I', e FROM events e WHERE noisy()$$);
-- bad kinds in a (kind, data) input: 22023 and 22004
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    query => $q$SELECT 'UPSERT', e FROM events e$q$)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    query => $q$SELECT NULL::text, e FROM events e$q$)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    query => $q$SELECT '+I', NULL::events$q$)$$);

-- a change stream is read from where a uid left it, from a table, not a query
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, changes => true)$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, changes => true, uid => 'x',
    query => 'SELECT * FROM events')$$);
SELECT err($$SELECT * FROM deduplicate_keep_first(NULL::events, changes => NULL)$$);

-- ptf.set_watermark checks its arguments
SELECT err($$SELECT set_watermark('events', 'nope', '1 minute')$$);
SELECT err($$SELECT set_watermark('events', 'event', '1 minute')$$);
SELECT err($$SELECT set_watermark('events', 'ts', '-1 minute')$$);
SELECT err($$SELECT set_watermark('events', 'ts', NULL)$$);

-- nothing was left behind by the failed calls
SELECT count(*) FROM uid_registry;
