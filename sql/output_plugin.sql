-- The output plugin for outside consumers (pg_recvlogical,
-- pg_logical_slot_get_changes): one JSON object per row kind, or one
-- Debezium-style envelope per change.  LSNs, commit times and xids vary
-- from run to run: they are checked for shape, then left out.

CREATE SCHEMA op;
SET search_path = op, public;
\set SHOW_CONTEXT never
CREATE TABLE items (id int PRIMARY KEY, name text, price numeric, tags jsonb, ok boolean);
CREATE TABLE other (id int PRIMARY KEY);
CREATE TABLE wide (id int PRIMARY KEY, body text);
ALTER TABLE wide ALTER COLUMN body SET STORAGE EXTERNAL;
-- a role that may read items, and nothing else
CREATE ROLE op_reader REPLICATION;
GRANT USAGE ON SCHEMA op TO op_reader;
GRANT SELECT ON items TO op_reader;

SELECT 'init' FROM pg_create_logical_replication_slot('op_slot', 'deduplicate_keep_first');

INSERT INTO items VALUES (1, 'pen', 1.50, '{"color": "blue"}', true),
                         (2, 'ink "black"', 'NaN', NULL, false);
UPDATE items SET price = 2 WHERE id = 1;
ALTER TABLE items REPLICA IDENTITY FULL;
UPDATE items SET name = 'pencil' WHERE id = 1;
DELETE FROM items WHERE id = 2;
INSERT INTO other VALUES (1);
INSERT INTO wide VALUES (1, repeat('x', 5000));
UPDATE wide SET id = 2;
TRUNCATE other;

-- every object carries its position, commit time and transaction
SELECT bool_and(data::jsonb->>'lsn' ~ '^[0-9A-F]+/[0-9A-F]+$') AS lsn_ok,
       bool_and((data::jsonb->>'commit_time')::timestamptz <= now()) AS time_ok,
       bool_and((data::jsonb->>'xid')::bigint > 0) AS xid_ok,
       count(*)
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL);

-- the changelog format (default): an UPDATE is an UPDATE_BEFORE when its old
-- image is logged (REPLICA IDENTITY FULL), then an UPDATE_AFTER; an
-- unchanged TOASTed value is left out and named, never invented
-- (long values shown by their length)
SELECT CASE WHEN length(data::jsonb->'data'->>'body') > 100
            THEN jsonb_set(data::jsonb, '{data,body}', to_jsonb(length(data::jsonb->'data'->>'body')))
            ELSE data::jsonb END - 'lsn' - 'commit_time' - 'xid' AS change
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL);

-- codes of one's own; kinds left out are not written; only chosen tables
SELECT data::jsonb->>'op' AS op, data::jsonb->'data' AS data
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL,
       'op_mapping', '{"INSERT": "+I", "DELETE": "-D"}', 'tables', ' op.items , other ');
-- a truncation too is written with its code, when mapped
SELECT data::jsonb->>'op' AS op, data::jsonb->>'table' AS tbl
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL,
       'op_mapping', '{"INSERT": "+I", "TRUNCATE": "!"}', 'tables', 'other');
SELECT data::jsonb->>'op' AS op,
       coalesce(data::jsonb->>'table', data::jsonb->'source'->>'table') AS tbl
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL,
       'format', 'debezium', 'op_mapping', '{"INSERT": "c", "TRUNCATE": "T"}', 'tables', 'other');

-- Debezium envelopes: before/after per change; an unchanged TOASTed value is Debezium's
-- placeholder for a value it does not have
SELECT data::jsonb->>'op' AS op, data::jsonb->'before' AS before,
       CASE WHEN length(data::jsonb->'after'->>'body') > 100
            THEN jsonb_set(data::jsonb->'after', '{body}', to_jsonb(length(data::jsonb->'after'->>'body')))
            ELSE data::jsonb->'after' END AS after,
       data::jsonb->'source'->>'table' AS tbl,
       data::jsonb->'source'->>'connector' AS connector
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'format', 'debezium');
SELECT bool_and((data::jsonb->>'ts_ms')::bigint > 0 AND data::jsonb->'source' ? 'lsn'
                AND data::jsonb->'source' ? 'txId') AS envelope_ok
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'format', 'debezium');

-- bad options fail at once, with the slot left where it was
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'format', 'avro');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'colour', 'red');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'op_mapping', '{"UPSERT": "u"}');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'op_mapping', 'not json');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'format', NULL);
-- each option once; a format version this library does not write; booleans
-- as PostgreSQL spells them; a Debezium envelope has no UPDATE_BEFORE
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'format', 'debezium', 'format', 'changelog');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'items', 'tables', 'other');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'format_version', '2');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'include_xid', 'maybe');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'format', 'debezium',
       'op_mapping', '{"UPDATE_BEFORE": "b", "UPDATE_AFTER": "u"}');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'op_mapping', '{"READ": "r"}');
-- table names as SQL writes them: unquoted names fold to lower case
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', '');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'items,,other');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'a.b.c');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', '"items');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'my items');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'items, ""');
-- names that are not identifiers (42602), which would match no table
DO $$ BEGIN
    PERFORM * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', '*');
EXCEPTION WHEN invalid_name THEN
    RAISE NOTICE 'refused with %', SQLSTATE;
END $$;
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'items, a-b');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'public.*');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', '1items');
SELECT * FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'op."items", op.it-ems');
-- quoted, anything goes; identifiers with digits, dollars, underscores, non-ASCII letters
SELECT count(*) FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'tables', '"a-b", "*", _x1$, op."it""ems", prénom');
SELECT count(*) FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL);

-- a role sees through the plugin only what it may SELECT, and nothing
-- while row-level security applies (doc/design.md §5).  Decoding sees the catalog
-- as it was at each change: the privileges that count are those in force
-- when the change was made.
SET ROLE op_reader;
SELECT data::jsonb->>'op' AS op, data::jsonb->'data' AS data
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'tables', 'items');
SELECT count(*) FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL);
SELECT count(*) FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'tables', 'items, wide');
RESET ROLE;
-- SELECT on every column is SELECT on the table, as for a change stream
CREATE TABLE colp (id int, v text);
GRANT SELECT (id, v) ON colp TO op_reader;
INSERT INTO colp VALUES (1, 'seen');
SET ROLE op_reader;
SELECT data::jsonb->'data' AS data
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'tables', 'colp');
RESET ROLE;
DROP TABLE colp;
ALTER TABLE items ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON items USING (name = current_user);
INSERT INTO items VALUES (3, 'op_reader', 0, NULL, true);
SET ROLE op_reader;
SELECT count(*) FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'tables', 'items');
RESET ROLE;
-- the owner is not subject to its policies
SELECT data::jsonb->>'op' AS op, data::jsonb->'data' AS data
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'tables', 'items')
 WHERE (data::jsonb->'data'->>'id')::int = 3;

-- format_version 1 is today's shape; where, when and which transaction
-- can be left out; names fold and quote as in SQL
SELECT data::jsonb - 'data' AS change
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'format_version', '1',
       'include_lsn', 'off', 'include_commit_time', 'false', 'include_xid', 'FALSE',
       'tables', 'OP.Other ,  "wide"');
SELECT data::jsonb - 'after' - 'before' AS change
  FROM pg_logical_slot_peek_changes('op_slot', NULL, NULL, 'format', 'debezium',
       'include_lsn', 'off', 'include_commit_time', 'off', 'include_xid', 'off', 'tables', 'other')
 LIMIT 1;

-- values: integers, domains over them and jsonb bare; text escaped as
-- JSON escapes it; everything else through its output function, as a string
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE "Typed" (i2 int2, i8 int8, d posint, f float8, n numeric, t text,
                      vc varchar(10), c char(4), dt date, arr int[], j json, o oid);
SELECT 'init' FROM pg_create_logical_replication_slot('op_types', 'deduplicate_keep_first');
INSERT INTO "Typed" VALUES (-32768, -9223372036854775808, 7, '-Infinity', 1e-30,
       E'tab\there "quoted" back\\slash\nnew \u00e9 \x01', 'v', 'ab', '2026-11-30',
       '{1,NULL,3}', '[1, {"a": null}]', 4294967295),
       (NULL, 9223372036854775807, 1, 1.5, 'NaN', '', NULL, NULL, NULL, '{}', 'null', 0);
SELECT data FROM pg_logical_slot_peek_changes('op_types', NULL, NULL,
       'include_lsn', 'false', 'include_commit_time', 'false', 'include_xid', 'false');
-- what is written is JSON, and the text comes back as it went in
SELECT (data::jsonb->'data'->>'t') = t AS text_round_trips
  FROM pg_logical_slot_peek_changes('op_types', NULL, NULL), "Typed"
 WHERE (data::jsonb->'data'->>'i8')::int8 = "Typed".i8;

-- the per-relation cache follows the catalog as the WAL changed it, even
-- within one read: a new column, a new name, a revoked privilege
INSERT INTO "Typed" (i2) VALUES (1);
ALTER TABLE "Typed" ADD COLUMN extra text DEFAULT 'x';
INSERT INTO "Typed" (i2) VALUES (2);
ALTER TABLE "Typed" RENAME TO typed_renamed;
INSERT INTO typed_renamed (i2) VALUES (3);
SELECT data::jsonb->>'table' AS tbl, data::jsonb->'data'->>'i2' AS i2,
       data::jsonb->'data' ? 'extra' AS has_extra
  FROM pg_logical_slot_get_changes('op_types', NULL, NULL, 'tables', '"Typed", typed_renamed')
 WHERE data::jsonb->'data'->>'i2' IN ('1', '2', '3');
-- a schema renamed renames its tables, with no invalidation of theirs
CREATE SCHEMA sa CREATE TABLE r (id int);
INSERT INTO sa.r VALUES (1);
ALTER SCHEMA sa RENAME TO sb;
INSERT INTO sb.r VALUES (2);
SELECT data::jsonb->>'table' AS tbl, data::jsonb->'data'->>'id' AS id
  FROM pg_logical_slot_peek_changes('op_types', NULL, NULL, 'tables', 'sa.r, sb.r');
SELECT data::jsonb->'data'->>'id' AS id
  FROM pg_logical_slot_peek_changes('op_types', NULL, NULL, 'tables', 'sb.r');
SELECT data::jsonb->'source'->>'schema' AS schema, data::jsonb->'after'->>'id' AS id
  FROM pg_logical_slot_get_changes('op_types', NULL, NULL, 'tables', 'r', 'format', 'debezium');
DROP SCHEMA sb CASCADE;
GRANT SELECT ON typed_renamed TO op_reader;
INSERT INTO typed_renamed (i2) VALUES (4);
REVOKE SELECT ON typed_renamed FROM op_reader;
INSERT INTO typed_renamed (i2) VALUES (5);
SET ROLE op_reader;
-- i2 = 4 was readable when it was made, i2 = 5 not: the read stops there
SELECT data::jsonb->'data'->>'i2' AS i2
  FROM pg_logical_slot_peek_changes('op_types', NULL, NULL, 'tables', 'typed_renamed');
SELECT data::jsonb->'data'->>'i2' AS i2
  FROM pg_logical_slot_peek_changes('op_types', NULL, 1, 'tables', 'typed_renamed');
RESET ROLE;
SELECT pg_drop_replication_slot('op_types');
DROP TABLE typed_renamed;
DROP DOMAIN posint;

-- consuming moves the slot on
SELECT count(*) FROM pg_logical_slot_get_changes('op_slot', NULL, NULL);
SELECT count(*) FROM pg_logical_slot_get_changes('op_slot', NULL, NULL);
-- a json value's newlines would break one object a line (pg_recvlogical): left out,
-- with those in its strings kept escaped
CREATE TABLE js (id int PRIMARY KEY, j json);
INSERT INTO js VALUES (1, E'{\n  "a": 1,\r\n  "b": [2, "x\\ny z"]\n}');
SELECT data::jsonb->'data' AS data, strpos(data, E'\n') = 0 AND strpos(data, E'\r') = 0 AS one_line
  FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'js');
DROP TABLE js;
-- a key stored out of line: PostgreSQL logs the old key of every update
-- then, changed or not.  An update that keeps it is an UPDATE_AFTER with the
-- key (taken from the old key, never from the table's TOAST), as for a
-- short key; a new key is an UPDATE_BEFORE of the old key, then the row
CREATE TABLE lk (id text PRIMARY KEY, bal int);
INSERT INTO lk VALUES ((SELECT string_agg(md5(j::text), '') FROM generate_series(1, 60) j), 1);
UPDATE lk SET bal = 2;
UPDATE lk SET id = 'short', bal = 3;
SELECT data::jsonb->>'op' AS op, length(data::jsonb->'data'->>'id') AS id_length,
       data::jsonb->'data'->'bal' AS bal, data::jsonb->'unchanged_toast' AS unchanged
  FROM pg_logical_slot_get_changes('op_slot', NULL, NULL, 'tables', 'lk');
DROP TABLE lk;
SELECT pg_drop_replication_slot('op_slot');
DROP POLICY mine ON items;
DROP OWNED BY op_reader;
DROP ROLE op_reader;
