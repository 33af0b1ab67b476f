-- Version 1.0 to 1.1: the update script, and 1.0's state tables converted
-- by their uid's first call under 1.1.  The 1.0 tables are made here as
-- the 1.0 library made them (keys, expires_at, event_time, seq, and image
-- of the source's row type).
CREATE DATABASE upgrade_test;
\c upgrade_test
SET client_min_messages = warning;
CREATE EXTENSION deduplicate_keep_first VERSION '1.0';
RESET client_min_messages;
SET search_path = public, ptf;

CREATE TABLE events (user_id text, event text, ts timestamptz);
-- the library needs the 1.1 objects, and says so
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    on_time => 'ts', uid => 'old', query => $$VALUES ('u9', 'x', now())$$);

-- what 1.0 left behind: u1 emitted (seen), u2 pending at 10:04, watermark 10:05
CREATE TABLE ptf.state_1 (user_id text COLLATE "default", expires_at timestamptz,
    event_time timestamptz, seq bigint, image public.events);
INSERT INTO ptf.state_1 VALUES
    ('u1', NULL, NULL, NULL, NULL),
    ('u2', NULL, '2024-01-01 10:04+00', 7, ROW('u2', 'open', '2024-01-01 10:04+00')::events);
INSERT INTO ptf.uid_registry (uid, function, owner, row_type, key_columns, on_time, time_type,
    state_table, max_event_time, watermark, keys, rows_in, rows_out)
VALUES ('old', 'deduplicate_keep_first', current_user::regrole, 'events'::regtype, '{user_id}',
    'ts', 'timestamptz'::regtype, 'ptf.state_1'::regclass,
    (extract(epoch FROM timestamptz '2024-01-01 10:05+00' - timestamptz '2000-01-01 00:00+00') * 1000000)::bigint,
    (extract(epoch FROM timestamptz '2024-01-01 10:05+00' - timestamptz '2000-01-01 00:00+00') * 1000000)::bigint,
    2, 3, 1);
SELECT setval('ptf.state_table_seq', 1);

ALTER EXTENSION deduplicate_keep_first UPDATE TO '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'deduplicate_keep_first';
SELECT uid, layout, row_types FROM uid_registry;

-- the next call converts the table and goes on where 1.0 stopped: u1 is
-- seen, u2's candidate fires when the watermark passes 10:04, u3 is new
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    on_time => 'ts', uid => 'old',
    query => $$VALUES ('u1', 'again', timestamptz '2024-01-01 10:06+00'),
                      ('u3', 'new', timestamptz '2024-01-01 10:07+00'),
                      ('u2', 'later', timestamptz '2024-01-01 10:08+00')$$);
SELECT r.layout, r.row_types, s.keys, s.rows_in, s.rows_out, s.watermark
  FROM state s JOIN uid_registry r USING (uid);
SELECT to_regclass('ptf.state_1') AS old_table_gone;
SELECT state_table AS t FROM uid_registry WHERE uid = 'old' \gset
SELECT user_id, event_time, (state_row(image, NULL::events)).event FROM :t ORDER BY user_id;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
    on_time => 'ts', uid => 'old',
    query => $$VALUES ('u4', 'end', timestamptz '2024-01-01 11:00+00')$$);

-- every function, table, view and sequence explains itself in psql's \df+ and
-- \dv+, after the update as after a fresh install, with the same words
-- (names described under one search_path in both databases)
SET search_path = pg_catalog;
CREATE VIEW public.ext_comments AS
SELECT pg_describe_object(d.classid, d.objid, 0) AS object,
       obj_description(d.objid, d.classid::regclass::text) AS comment
  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND e.extname = 'deduplicate_keep_first'
   AND d.classid IN ('pg_proc'::regclass, 'pg_class'::regclass);
SELECT object FROM public.ext_comments WHERE comment IS NULL;
SELECT md5(string_agg(object || ': ' || comment, E'\n' ORDER BY object)) AS updated_comments,
       count(*) AS updated_objects
  FROM public.ext_comments \gset
DROP VIEW public.ext_comments;

\c contrib_regression
DROP DATABASE upgrade_test;
SET search_path = pg_catalog;
SELECT md5(string_agg(pg_describe_object(d.classid, d.objid, 0) || ': ' ||
                      obj_description(d.objid, d.classid::regclass::text), E'\n'
                      ORDER BY pg_describe_object(d.classid, d.objid, 0))) = :'updated_comments'
           AS same_comments,
       count(*) = :updated_objects AS same_objects
  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND e.extname = 'deduplicate_keep_first'
   AND d.classid IN ('pg_proc'::regclass, 'pg_class'::regclass);
