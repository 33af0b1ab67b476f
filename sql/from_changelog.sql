-- FROM_CHANGELOG: CDC rows with an operation code turned back into
-- changes, (kind, data) rows of a target row type.  Flink's FROM_CHANGELOG
-- test programs, then Debezium and Maxwell rows as those tools write them.

CREATE SCHEMA fc;
SET search_path = fc, ptf;
\set SHOW_CONTEXT never

CREATE TABLE accounts (id int PRIMARY KEY, name text, balance int);

-- ---- default mapping: the kind names, so to_changelog's output reads back
CREATE TABLE cdc (seq int, op text, id int, name text, balance int);
INSERT INTO cdc VALUES (1, 'INSERT', 1, 'alice', 10), (2, 'INSERT', 2, 'bob', 20),
                       (3, 'UPDATE_BEFORE', 1, 'alice', 10), (4, 'UPDATE_AFTER', 1, 'alice', 15),
                       (5, 'DELETE', 2, 'bob', 20);
SELECT kind, data FROM from_changelog(NULL::cdc, NULL::accounts,
    query => 'SELECT * FROM fc.cdc ORDER BY seq');
-- the op column is consumed; other columns map onto the target by name
-- (extra ones, like seq, are not wanted; missing ones are NULL)
CREATE TABLE accounts_plus (id int, name text, balance int, note text);
SELECT kind, data FROM from_changelog(NULL::cdc, NULL::accounts_plus,
    query => 'SELECT * FROM fc.cdc ORDER BY seq') LIMIT 2;

-- ---- custom mapping: several codes for one kind, an update in one row
CREATE TABLE cdc_codes (seq int, op text, id int, name text, balance int);
INSERT INTO cdc_codes VALUES (1, 'c', 1, 'alice', 10), (2, 'r', 2, 'bob', 20),
                             (3, 'ub', 1, 'alice', 10), (4, 'ua', 1, 'alice', 15), (5, 'd', 2, 'bob', 20);
SELECT kind, data FROM from_changelog(NULL::cdc_codes, NULL::accounts,
    op_mapping => '{"c, r": "INSERT", "ub": "UPDATE_BEFORE", "ua": "UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.cdc_codes ORDER BY seq');
-- codes are matched exactly: 'C' is not 'c'
INSERT INTO cdc_codes VALUES (6, 'C', 3, 'carol', 1);
SELECT kind, data FROM from_changelog(NULL::cdc_codes, NULL::accounts,
    op_mapping => '{"c, r": "INSERT", "ub": "UPDATE_BEFORE", "ua": "UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.cdc_codes ORDER BY seq');

-- ---- invalid_op_handling: SKIP drops NULL and unmapped codes, and says so
INSERT INTO cdc_codes VALUES (7, NULL, 4, 'dave', 1), (8, 'x', 5, 'erin', 1);
SELECT kind, data FROM from_changelog(NULL::cdc_codes, NULL::accounts,
    op_mapping => '{"c, r": "INSERT", "ub": "UPDATE_BEFORE", "ua": "UPDATE_AFTER", "d": "DELETE"}',
    invalid_op_handling => 'SKIP', query => 'SELECT * FROM fc.cdc_codes ORDER BY seq');
-- FAIL (the default) names the code, or NULL, and the row
SELECT kind, data FROM from_changelog(NULL::cdc_codes, NULL::accounts,
    op_mapping => '{"c, r, C": "INSERT", "ub": "UPDATE_BEFORE", "ua": "UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.cdc_codes WHERE seq <> 7 ORDER BY seq');
SELECT kind, data FROM from_changelog(NULL::cdc_codes, NULL::accounts,
    op_mapping => '{"c, r, C": "INSERT", "ub": "UPDATE_BEFORE", "ua": "UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.cdc_codes ORDER BY seq');
-- the row as a record literal: a NULL first column, a value quoted
SELECT * FROM from_changelog(NULL::accounts, NULL::accounts, op => 'name',
    query => $$SELECT NULL::int AS id, NULL::text AS name, 1 AS balance$$);
SELECT * FROM from_changelog(NULL::accounts, NULL::accounts, op => 'name',
    query => $$SELECT NULL::int AS id, 'a, "b"' AS name, NULL::int AS balance$$);
SELECT * FROM from_changelog(NULL::cdc_codes, NULL::accounts, invalid_op_handling => 'skip');
SELECT * FROM from_changelog(NULL::cdc_codes, NULL::accounts, invalid_op_handling => 'LOG');
SELECT * FROM from_changelog(NULL::cdc_codes, NULL::accounts, invalid_op_handling => NULL);

-- ---- a custom op column
CREATE TABLE cdc_custom (operation varchar(10), id int, name text, balance int);
INSERT INTO cdc_custom VALUES ('INSERT', 1, 'alice', 10), ('DELETE', 1, 'alice', 10);
SELECT kind, data FROM from_changelog(NULL::cdc_custom, NULL::accounts, op => 'operation');
SELECT * FROM from_changelog(NULL::cdc_custom, NULL::accounts);

-- ---- upsert output: UPDATE_AFTER without UPDATE_BEFORE, keyed by partition_by
CREATE TABLE upserts (seq int, op text, id int, name text, balance int);
INSERT INTO upserts VALUES (1, 'I', 1, 'alice', 10), (2, 'U', 1, 'alice', 11),
                           (3, 'U', 2, 'bob', 5), (4, 'D', 1, 'alice', 11);
SELECT kind, data FROM from_changelog(NULL::upserts, NULL::accounts, partition_by => '{id}',
    op_mapping => '{"I": "INSERT", "U": "UPDATE_AFTER", "D": "DELETE"}',
    query => 'SELECT * FROM fc.upserts ORDER BY seq');
SELECT * FROM from_changelog(NULL::upserts, NULL::accounts,
    op_mapping => '{"I": "INSERT", "U": "UPDATE_AFTER", "D": "DELETE"}');

-- ---- a deletion flag: a boolean column, its codes 'true' and 'false'
CREATE TABLE flags (id int, name text, balance int, deleted boolean);
INSERT INTO flags VALUES (1, 'alice', 10, false), (1, 'alice', 12, false), (1, 'alice', 12, true);
SELECT kind, data FROM from_changelog(NULL::flags, NULL::accounts, op => 'deleted',
    partition_by => '{id}', op_mapping => '{"false": "UPDATE_AFTER", "true": "DELETE"}');

-- ---- partial deletes: consume_full_deletes => false takes the deleted row
-- from the last image kept per key; a delete of a key never seen is dropped
CREATE TABLE keyed_deletes (seq int, op text, id int, name text, balance int);
INSERT INTO keyed_deletes VALUES (1, 'INSERT', 1, 'alice', 10), (2, 'UPDATE_AFTER', 1, 'alice', 12),
                                 (3, 'DELETE', 1, NULL, NULL), (4, 'DELETE', 9, NULL, NULL);
SELECT kind, data FROM from_changelog(NULL::keyed_deletes, NULL::accounts, partition_by => '{id}',
    consume_full_deletes => false, query => 'SELECT * FROM fc.keyed_deletes ORDER BY seq');
SELECT kind, data FROM from_changelog(NULL::keyed_deletes, NULL::accounts, partition_by => '{id}',
    query => 'SELECT * FROM fc.keyed_deletes ORDER BY seq');
SELECT * FROM from_changelog(NULL::keyed_deletes, NULL::accounts, consume_full_deletes => false);

-- ---- round trip: from_changelog(to_changelog(t)) gives t's changes back
CREATE TABLE accounts_log (op text, data accounts);
SELECT kind, data FROM from_changelog(NULL::accounts_log, NULL::accounts,
    before => 'data', after => 'data', query => $$
    SELECT op, data FROM ptf.to_changelog(NULL::fc.accounts, query => 'VALUES
        (''+I'', ROW(1, ''alice'', 10)::fc.accounts), (''-U'', ROW(1, ''alice'', 10)::fc.accounts),
        (''+U'', ROW(1, ''alice'', 15)::fc.accounts), (''-D'', ROW(1, ''alice'', 15)::fc.accounts)')$$);
-- flat: (op, (data).*)
SELECT kind, data FROM from_changelog(NULL::cdc, NULL::accounts, query => $$
    SELECT 0, op, (data).* FROM ptf.to_changelog(NULL::fc.accounts, query => 'VALUES
        (''+I'', ROW(2, ''bob'', 20)::fc.accounts), (''-D'', ROW(2, ''bob'', 20)::fc.accounts)')$$);

-- ---- invalid mappings and arguments: errors before any row is read
CREATE FUNCTION noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'an input row was read'; RETURN true; END $$;
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"a": "INSERT", "b": "INSERT"}',
    query => 'SELECT * FROM fc.cdc WHERE fc.noisy()');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"a": "UPSERT"}',
    query => 'SELECT * FROM fc.cdc WHERE fc.noisy()');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"a": "INSERT, DELETE"}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"a, a": "INSERT"}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"a": "INSERT", "a, b": "DELETE"}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '["INSERT"]');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"a": ["INSERT"]}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op_mapping => '{"u": "UPDATE_BEFORE, UPDATE_AFTER"}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op => 'kind');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op => 'id');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, op => NULL);
CREATE TABLE cdc_badtype (op text, id bigint);
SELECT * FROM from_changelog(NULL::cdc_badtype, NULL::accounts);
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, before => 'name', after => 'name');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, before => 'name');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, after => 'nope');
SELECT * FROM from_changelog(NULL::cdc, 1);
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, partition_by => '{nope}');
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, consume_full_deletes => NULL);
-- the input is append-only: a changelog query is not change records
SELECT * FROM from_changelog(NULL::cdc, NULL::cdc, query => $$VALUES ('+I', ROW(1, 'op', 1, 'a', 1)::fc.cdc)$$);

-- ---- Debezium, as its PostgreSQL connector writes rows: op c/r/u/d, before
-- NULL on inserts; under REPLICA IDENTITY DEFAULT no before on updates and
-- only the key in a delete's before
CREATE TABLE debezium_landing (seq bigserial, op text, before jsonb, after jsonb, source jsonb, ts_ms bigint);
INSERT INTO debezium_landing (op, before, after, source, ts_ms) VALUES
 ('r', NULL, '{"id": 1, "name": "alice", "balance": 10}', '{"table": "accounts", "snapshot": "true"}', 1700000000000),
 ('c', NULL, '{"id": 2, "name": "bob", "balance": 20}', '{"table": "accounts"}', 1700000001000),
 ('u', NULL, '{"id": 1, "name": "alice", "balance": 15}', '{"table": "accounts"}', 1700000002000),
 ('d', '{"id": 2, "name": null, "balance": null}', NULL, '{"table": "accounts"}', 1700000003000);
-- the update's -U and the delete's whole row come from the images kept per key
SELECT kind, data FROM from_changelog(NULL::debezium_landing, NULL::accounts,
    before => 'before', after => 'after', partition_by => '{id}', consume_full_deletes => false,
    op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.debezium_landing ORDER BY seq');
-- under REPLICA IDENTITY FULL Debezium writes whole before images
INSERT INTO debezium_landing (op, before, after, ts_ms) VALUES
 ('u', '{"id": 1, "name": "alice", "balance": 15}', '{"id": 1, "name": "alice", "balance": 16}', 1700000004000),
 ('d', '{"id": 1, "name": "alice", "balance": 16}', NULL, 1700000005000);
SELECT kind, data FROM from_changelog(NULL::debezium_landing, NULL::accounts,
    before => 'before', after => 'after',
    op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.debezium_landing WHERE seq > 4 ORDER BY seq');
-- without state the image-less update's -U cannot be made
SELECT kind, data FROM from_changelog(NULL::debezium_landing, NULL::accounts,
    before => 'before', after => 'after',
    op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.debezium_landing ORDER BY seq');
-- jsonb values are read with the columns' types, as jsonb_populate_record does
INSERT INTO debezium_landing (op, after) VALUES ('c', '{"id": "x"}');
SELECT kind, data FROM from_changelog(NULL::debezium_landing, NULL::accounts,
    before => 'before', after => 'after',
    op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    query => 'SELECT * FROM fc.debezium_landing WHERE seq = 7');

-- ---- Maxwell: {"type": "insert|update|delete", "data": {...}}; a delete's
-- data is the deleted row, so the retraction takes it when there is no before
CREATE TABLE maxwell_landing (seq int, type text, data jsonb, old jsonb);
INSERT INTO maxwell_landing VALUES
 (1, 'insert', '{"id": 1, "name": "alice", "balance": 10}', NULL),
 (2, 'update', '{"id": 1, "name": "alice", "balance": 12}', '{"balance": 10}'),
 (3, 'delete', '{"id": 1, "name": "alice", "balance": 12}', NULL);
SELECT kind, data FROM from_changelog(NULL::maxwell_landing, NULL::accounts, op => 'type',
    after => 'data', partition_by => '{id}',
    op_mapping => '{"insert": "INSERT", "update": "UPDATE_AFTER", "delete": "DELETE"}',
    query => 'SELECT * FROM fc.maxwell_landing ORDER BY seq');

-- ---- a landing table's change stream, incrementally under a uid
CREATE TABLE landing (op text, before jsonb, after jsonb);
SELECT * FROM from_changelog(NULL::landing, NULL::accounts, before => 'before', after => 'after',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    changes => true, uid => 'landing');
INSERT INTO landing VALUES ('c', NULL, '{"id": 1, "name": "alice", "balance": 1}'),
                           ('c', NULL, '{"id": 2, "name": "bob", "balance": 2}');
INSERT INTO landing VALUES ('u', '{"id": 1, "name": "alice", "balance": 1}', '{"id": 1, "name": "alice", "balance": 5}');
SELECT kind, data FROM from_changelog(NULL::landing, NULL::accounts, before => 'before', after => 'after',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    changes => true, uid => 'landing');
-- deleting processed records is clean-up, not a change; new ones come next
DELETE FROM landing;
INSERT INTO landing VALUES ('d', '{"id": 2, "name": "bob", "balance": 2}', NULL), ('?', NULL, NULL);
SELECT kind, data FROM from_changelog(NULL::landing, NULL::accounts, before => 'before', after => 'after',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    invalid_op_handling => 'SKIP', changes => true, uid => 'landing');
SELECT rows_in, rows_out, rows_skipped FROM state WHERE uid = 'landing';
-- a record is read once, as inserted: updating records (marking them done,
-- say) is clean-up too, passed over and said, and the stream goes on
INSERT INTO landing VALUES ('c', NULL, '{"id": 3, "name": "carol", "balance": 3}');
UPDATE landing SET op = 'c' WHERE op = '?';
UPDATE landing SET op = 'd' WHERE op = 'c';
INSERT INTO landing VALUES ('c', NULL, '{"id": 4, "name": "dave", "balance": 4}');
SELECT kind, data FROM from_changelog(NULL::landing, NULL::accounts, before => 'before', after => 'after',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
    changes => true, uid => 'landing');
SELECT rows_in, rows_out, rows_skipped FROM state WHERE uid = 'landing';
-- a uid is bound to the records it reads
SELECT * FROM from_changelog(NULL::cdc, NULL::accounts, uid => 'landing');
SELECT drop_state('landing');
