-- State TTL (processing time): FLIP-614 §4.1.3.3 and §4.1.3.6, exactly.
-- proc_time names the column holding each row's processing time, so the
-- examples' arrival times (@ 10:00, ...) replay without a clock.

CREATE SCHEMA kf_ttl;
SET search_path = kf_ttl, ptf;
SET TIME ZONE 'UTC';

CREATE TABLE user_events (user_name text, event text, arrived timestamptz);

-- FLIP-614 §4.1.3.3: state_ttl 5 minutes, reset_ttl_on_duplicate defaults to true.
-- 10:00 emitted; 10:03 dropped and refreshes the TTL to 10:08; 10:10 comes
-- after 10:08, a new period: emitted.
INSERT INTO user_events VALUES
    ('Vas', 'login', '2024-01-01 10:00'),
    ('Vas', 'login', '2024-01-01 10:03'),
    ('Vas', 'login', '2024-01-01 10:10');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', proc_time => 'arrived');

-- FLIP-614 §4.1.3.6: arrivals 10:00, 10:03, 10:07, 10:10
TRUNCATE user_events;
INSERT INTO user_events VALUES
    ('Vas', 'login', '2024-01-01 10:00'),
    ('Vas', 'login', '2024-01-01 10:03'),
    ('Vas', 'login', '2024-01-01 10:07'),
    ('Vas', 'login', '2024-01-01 10:10');
-- true: each duplicate refreshes the TTL (10:05 -> 10:08 -> 10:12 -> 10:15),
-- the key never expires, only 10:00 is emitted
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => true,
    proc_time => 'arrived');
-- false: TTL fixed from the first record, expires 10:05; 10:07 starts a new
-- period (expires 10:12), 10:10 is dropped
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived');

-- the boundary: a key is expired from the instant last access + TTL is
-- reached (Flink: expired when ttl timestamp <= now)
TRUNCATE user_events;
INSERT INTO user_events VALUES
    ('Vas', 'first', '2024-01-01 10:00'),
    ('Vas', 'at 10:05 sharp', '2024-01-01 10:05');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', proc_time => 'arrived');
-- one microsecond earlier is still a duplicate; with reset the duplicate
-- moves expiry to 10:09:59.999999, which c hits exactly
TRUNCATE user_events;
INSERT INTO user_events VALUES
    ('Vas', 'a', '2024-01-01 10:00'),
    ('Vas', 'b', '2024-01-01 10:04:59.999999'),
    ('Vas', 'c', '2024-01-01 10:09:59.999999'),
    ('Vas', 'd', '2024-01-01 10:14:59.999998');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => true,
    proc_time => 'arrived');

-- state_ttl => '0' keeps state forever: one row however far apart
TRUNCATE user_events;
INSERT INTO user_events VALUES
    ('Vas', 'login', '2024-01-01 10:00'),
    ('Vas', 'login', '2024-06-01 10:00'),
    ('Vas', 'login', '2030-01-01 10:00');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '0', proc_time => 'arrived');

-- without state_ttl the GUC ptf.state_ttl applies; its default '0' keeps forever
SHOW ptf.state_ttl;
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    proc_time => 'arrived');
SET ptf.state_ttl = '30 days';
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    proc_time => 'arrived');
-- an explicit state_ttl overrides the GUC, '0' included
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => '0', proc_time => 'arrived');
SET ptf.state_ttl = '1 day 2 hours';
SHOW ptf.state_ttl;
RESET ptf.state_ttl;
-- bad GUC values are refused
SET ptf.state_ttl = 'soon';
SET ptf.state_ttl = '-5 minutes';

-- keys expire independently
TRUNCATE user_events;
INSERT INTO user_events VALUES
    ('Vas', 'v1', '2024-01-01 10:00'),
    ('Bob', 'b1', '2024-01-01 10:02'),
    ('Vas', 'v2', '2024-01-01 10:04'),
    ('Bob', 'b2', '2024-01-01 10:06'),
    ('Vas', 'v3', '2024-01-01 10:06'),
    ('Bob', 'b3', '2024-01-01 10:08');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}',
    state_ttl => interval '5 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived');

-- the clock is the default processing time: a long TTL keeps one row per key
SELECT user_name, event FROM deduplicate_keep_first(NULL::user_events,
    partition_by => '{user_name}', state_ttl => interval '1 hour');

-- an unkeyed call with TTL: one global key expiring
SELECT * FROM deduplicate_keep_first(NULL::user_events,
    state_ttl => interval '3 minutes', reset_ttl_on_duplicate => false,
    proc_time => 'arrived');
