-- DEDUPLICATE_KEEP_FIRST by event time: FLIP-614 §4.1.2.2.1 and §4.1.3.5, watermarks,
-- ties, late rows, and the bounded-input flush.

CREATE SCHEMA kf_event;
SET search_path = kf_event, ptf;
SET TIME ZONE 'UTC';

CREATE TABLE user_events (user_id text, event text, rowtime timestamp, arrived timestamp);

-- FLIP-614 §4.1.2.2.1 / §4.1.3.5, watermark = max(rowtime) - 5 minutes:
--   click  10:02 @12:00  watermark -> 09:57
--   view   10:01 @12:01  on time, earlier event time -> candidate
--   scroll 10:06 @12:02  watermark -> 10:01; view is final and emitted
--   signup 10:00 @12:05  below the watermark 10:01 -> late, dropped
INSERT INTO user_events VALUES
    ('u1', 'click',  '2024-01-01 10:02', '2024-01-01 12:00'),
    ('u1', 'view',   '2024-01-01 10:01', '2024-01-01 12:01'),
    ('u1', 'scroll', '2024-01-01 10:06', '2024-01-01 12:02'),
    ('u1', 'signup', '2024-01-01 10:00', '2024-01-01 12:05');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', watermark_delay => interval '5 minutes');
-- with state_ttl (FLIP-614 §4.1.3.5 proper) the result is the same
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', watermark_delay => interval '5 minutes',
    state_ttl => interval '5 minutes', proc_time => 'arrived');

-- without a watermark the whole bounded input decides: the earliest event
-- time wins, even the row that arrived last
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime');

-- the watermark declared on the table applies when no watermark_delay is given
SELECT set_watermark('user_events', 'rowtime', interval '5 minutes');
SELECT relid, on_time, delay FROM watermarks;
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime');
-- watermark_delay overrides the declaration: with 10 minutes signup is on time
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', watermark_delay => interval '10 minutes');
-- a declaration for another column does not apply
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'arrived');
-- it applies to query inputs of the table's row type too
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_id}',
    on_time => 'rowtime', query => 'SELECT * FROM user_events ORDER BY arrived');
SELECT drop_watermark('user_events');
SELECT drop_watermark('user_events');

-- ties keep the first arrival
CREATE TABLE ties (k int, v text, ts timestamptz);
INSERT INTO ties VALUES
    (1, 'first',  '2024-01-01 10:00'), (1, 'second', '2024-01-01 10:00'),
    (2, 'later',  '2024-01-01 10:05'), (2, 'tie-a',  '2024-01-01 10:01'),
    (2, 'tie-b',  '2024-01-01 10:01');
SELECT * FROM deduplicate_keep_first(NULL::ties, partition_by => '{k}', on_time => 'ts');
SELECT * FROM deduplicate_keep_first(NULL::ties, partition_by => '{k}', on_time => 'ts',
    watermark_delay => interval '1 hour');

-- a late row does not mark its key: k2's 10:00 is late (watermark 10:05),
-- its on-time 10:06 row is still kept
CREATE TABLE late (k text, ts timestamptz, note text);
INSERT INTO late VALUES
    ('k1', '2024-01-01 10:10', 'sets the watermark to 10:05'),
    ('k2', '2024-01-01 10:00', 'late, dropped'),
    ('k2', '2024-01-01 10:06', 'on time, kept'),
    ('k1', '2024-01-01 10:05', 'equal to the watermark: on time, earlier, kept');
SELECT * FROM deduplicate_keep_first(NULL::late, partition_by => '{k}', on_time => 'ts',
    watermark_delay => interval '5 minutes');

-- the watermark finalizes a key: a later row with an earlier (but on-time)
-- event time is a duplicate once the candidate was emitted
CREATE TABLE finalized (k text, ts timestamptz, note text);
INSERT INTO finalized VALUES
    ('a', '2024-01-01 10:00', 'candidate'),
    ('b', '2024-01-01 10:20', 'watermark -> 10:10: a emitted'),
    ('a', '2024-01-01 10:12', 'a is seen: duplicate'),
    ('b', '2024-01-01 10:11', 'earlier than b''s candidate: replaces it');
SELECT * FROM deduplicate_keep_first(NULL::finalized, partition_by => '{k}', on_time => 'ts',
    watermark_delay => interval '10 minutes');

-- at the end of a bounded input the watermark jumps to +infinity: pending
-- candidates are emitted, in event-time order
CREATE TABLE pending (k int, ts timestamptz);
INSERT INTO pending VALUES (3, '2024-01-01 10:30'), (1, '2024-01-01 10:10'),
                           (2, '2024-01-01 10:20'), (1, '2024-01-01 10:05');
SELECT * FROM deduplicate_keep_first(NULL::pending, partition_by => '{k}', on_time => 'ts',
    watermark_delay => interval '1 day');

-- unkeyed event time: the single earliest row
SELECT * FROM deduplicate_keep_first(NULL::pending, on_time => 'ts');

-- bigint epoch milliseconds as event time
CREATE TABLE ms_events (k int, ts_ms bigint, v text);
INSERT INTO ms_events VALUES (1, 1704103320000, 'b'), (1, 1704103260000, 'a'), (1, 1704103680000, 'c'),
                             (1, 1704103200000, 'late');
SELECT * FROM deduplicate_keep_first(NULL::ms_events, partition_by => '{k}', on_time => 'ts_ms',
    watermark_delay => interval '5 minutes');

-- infinite timestamps order like any other
CREATE TABLE inf (k int, ts timestamp);
INSERT INTO inf VALUES (1, 'infinity'), (1, '2024-01-01'), (2, '-infinity'), (2, '2024-01-01');
SELECT * FROM deduplicate_keep_first(NULL::inf, partition_by => '{k}', on_time => 'ts');

-- without a watermark, event-time keep-first is DISTINCT ON (keys) ORDER BY
-- keys, on_time, with ties broken by arrival
CREATE TABLE gen AS
SELECT i AS seq, (i * 7919) % 13 AS k,
       timestamptz '2024-01-01' + ((i * 104729) % 50) * interval '1 minute' AS ts
FROM generate_series(1, 500) i;
CREATE TABLE expected AS SELECT DISTINCT ON (k) * FROM gen ORDER BY k, ts, seq;
CREATE TABLE got AS SELECT * FROM deduplicate_keep_first(NULL::gen, partition_by => '{k}',
    on_time => 'ts', query => 'SELECT * FROM gen ORDER BY seq');
SELECT (SELECT count(*) FROM expected) AS expected,
       (SELECT count(*) FROM got) AS got,
       (SELECT count(*) FROM (TABLE expected EXCEPT TABLE got) d) AS missing,
       (SELECT count(*) FROM (TABLE got EXCEPT TABLE expected) d) AS extra;
