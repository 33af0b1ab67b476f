-- Version 1.0 to the current one: the update scripts, and 1.0's state
-- tables converted by their uid's first call under 1.1 or later.  The 1.0 tables are made here as
-- the 1.0 library made them (keys, expires_at, event_time, seq, and image
-- of the source's row type).
CREATE DATABASE upgrade_test;
\c upgrade_test
SET client_min_messages = warning;
CREATE EXTENSION deduplicate_keep_first VERSION '1.0';
RESET client_min_messages;
SET search_path = public, ptf;

CREATE TABLE events (user_id text, event text, ts timestamptz);
-- the library needs the current version's objects, and says so
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

ALTER EXTENSION deduplicate_keep_first UPDATE;
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
-- \dv+; and what the updates made of a 1.0 database holding state is what a
-- fresh install makes: every definition, default, volatility, strictness,
-- grant, comment, column, constraint, index, policy and trigger
SET search_path = pg_catalog;
CREATE VIEW public.ext_objects AS
WITH ext AS (
    SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND e.extname = 'deduplicate_keep_first'),
rels AS (SELECT c.* FROM pg_class c JOIN ext ON ext.classid = 'pg_class'::regclass AND ext.objid = c.oid)
SELECT 'function ' || p.oid::regprocedure::text AS object,
       obj_description(p.oid, 'pg_proc') AS comment,
       pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '-') AS definition
  FROM pg_proc p JOIN ext ON ext.classid = 'pg_proc'::regclass AND ext.objid = p.oid
UNION ALL
SELECT 'relation ' || c.oid::regclass::text, obj_description(c.oid, 'pg_class'),
       'kind=' || c.relkind::text || ' acl=' || coalesce(c.relacl::text, '-') || ' rls=' || c.relrowsecurity ||
       coalesce(' view=' || pg_get_viewdef(c.oid), '')
  FROM rels c
UNION ALL
SELECT 'column ' || c.oid::regclass::text || '.' || a.attname, NULL,
       format_type(a.atttypid, a.atttypmod) || ' #' || a.attnum || ' notnull=' || a.attnotnull ||
       ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') || ' acl=' || coalesce(a.attacl::text, '-')
  FROM rels c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
UNION ALL
SELECT 'constraint ' || con.conrelid::regclass::text || ' ' || con.conname, NULL, pg_get_constraintdef(con.oid)
  FROM pg_constraint con JOIN rels c ON c.oid = con.conrelid
UNION ALL
SELECT 'index ' || i.indexrelid::regclass::text, NULL, pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN rels c ON c.oid = i.indrelid
UNION ALL
SELECT 'policy ' || pol.polrelid::regclass::text || ' ' || pol.polname, NULL,
       pol.polcmd::text || ' ' || coalesce(pg_get_expr(pol.polqual, pol.polrelid), '-')
  FROM pg_policy pol JOIN rels c ON c.oid = pol.polrelid
UNION ALL
SELECT 'trigger ' || t.tgrelid::regclass::text || ' ' || t.tgname, NULL, pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN rels c ON c.oid = t.tgrelid
 WHERE NOT t.tgisinternal  -- a foreign key's, named by OID: its constraint is compared
UNION ALL
SELECT 'event trigger ' || t.evtname, NULL, t.evtevent || ' ' || t.evtfoid::regproc::text || ' ' || coalesce(t.evttags::text, '-')
  FROM pg_event_trigger t JOIN ext ON ext.classid = 'pg_event_trigger'::regclass AND ext.objid = t.oid;
SELECT object FROM public.ext_objects
 WHERE comment IS NULL AND (object LIKE 'function %' OR object LIKE 'relation %');
SELECT md5(string_agg(object || ': ' || coalesce(comment, '') || ': ' || definition, E'\n' ORDER BY object))
           AS updated_objects_md5,
       count(*) AS updated_objects
  FROM public.ext_objects \gset
DROP VIEW public.ext_objects;

\c contrib_regression
DROP DATABASE upgrade_test;
SET search_path = pg_catalog;
CREATE VIEW public.ext_objects AS
WITH ext AS (
    SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND e.extname = 'deduplicate_keep_first'),
rels AS (SELECT c.* FROM pg_class c JOIN ext ON ext.classid = 'pg_class'::regclass AND ext.objid = c.oid)
SELECT 'function ' || p.oid::regprocedure::text AS object,
       obj_description(p.oid, 'pg_proc') AS comment,
       pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '-') AS definition
  FROM pg_proc p JOIN ext ON ext.classid = 'pg_proc'::regclass AND ext.objid = p.oid
UNION ALL
SELECT 'relation ' || c.oid::regclass::text, obj_description(c.oid, 'pg_class'),
       'kind=' || c.relkind::text || ' acl=' || coalesce(c.relacl::text, '-') || ' rls=' || c.relrowsecurity ||
       coalesce(' view=' || pg_get_viewdef(c.oid), '')
  FROM rels c
UNION ALL
SELECT 'column ' || c.oid::regclass::text || '.' || a.attname, NULL,
       format_type(a.atttypid, a.atttypmod) || ' #' || a.attnum || ' notnull=' || a.attnotnull ||
       ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') || ' acl=' || coalesce(a.attacl::text, '-')
  FROM rels c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
UNION ALL
SELECT 'constraint ' || con.conrelid::regclass::text || ' ' || con.conname, NULL, pg_get_constraintdef(con.oid)
  FROM pg_constraint con JOIN rels c ON c.oid = con.conrelid
UNION ALL
SELECT 'index ' || i.indexrelid::regclass::text, NULL, pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN rels c ON c.oid = i.indrelid
UNION ALL
SELECT 'policy ' || pol.polrelid::regclass::text || ' ' || pol.polname, NULL,
       pol.polcmd::text || ' ' || coalesce(pg_get_expr(pol.polqual, pol.polrelid), '-')
  FROM pg_policy pol JOIN rels c ON c.oid = pol.polrelid
UNION ALL
SELECT 'trigger ' || t.tgrelid::regclass::text || ' ' || t.tgname, NULL, pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN rels c ON c.oid = t.tgrelid
 WHERE NOT t.tgisinternal  -- a foreign key's, named by OID: its constraint is compared
UNION ALL
SELECT 'event trigger ' || t.evtname, NULL, t.evtevent || ' ' || t.evtfoid::regproc::text || ' ' || coalesce(t.evttags::text, '-')
  FROM pg_event_trigger t JOIN ext ON ext.classid = 'pg_event_trigger'::regclass AND ext.objid = t.oid;
SELECT md5(string_agg(object || ': ' || coalesce(comment, '') || ': ' || definition, E'\n' ORDER BY object))
           = :'updated_objects_md5' AS same_definitions,
       count(*) = :updated_objects AS same_objects,
       count(*) > 100 AS many_objects
  FROM public.ext_objects;
DROP VIEW public.ext_objects;
