-- apply_changelog: (kind, data) rows applied to a table.  Upserts and
-- deletes by the table's key, batched by key; in order on tables without
-- a key.  What conflicts do is counted, never silent.

CREATE SCHEMA ac;
SET search_path = ac, ptf;
\set SHOW_CONTEXT never
CREATE FUNCTION noisy() RETURNS SETOF int LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'an input row was read'; RETURN NEXT 1; END $$;

CREATE TABLE mirror (id int PRIMARY KEY, name text, balance int);

-- +I inserts, -U/+U replace, -D deletes
SELECT * FROM apply_changelog('mirror', $$VALUES
    ('+I', ROW(1, 'alice', 10)::ac.mirror), ('+I', ROW(2, 'bob', 20)::ac.mirror),
    ('-U', ROW(1, 'alice', 10)::ac.mirror), ('+U', ROW(1, 'alice', 15)::ac.mirror),
    ('-D', ROW(2, 'bob', 20)::ac.mirror)$$);
TABLE mirror;
-- conflicts: an insert of a key that is there replaces its row (the last
-- image is the truth, as an at-least-once source redelivers); a delete of
-- a row that is not there changes nothing; both are counted
SELECT inserted, updated, deleted, missing FROM apply_changelog('mirror', $$VALUES
    ('+I', ROW(1, 'alice', 99)::ac.mirror), ('-D', ROW(7, NULL, NULL)::ac.mirror)$$);
TABLE mirror;
-- a delete needs only the key; kind names are accepted too
SELECT deleted FROM apply_changelog('mirror', $$VALUES ('DELETE', ROW(1, NULL, NULL)::ac.mirror)$$);
SELECT count(*) FROM mirror;
-- a query of the table's rows is all inserts
SELECT inserts, inserted FROM apply_changelog('mirror', 'SELECT g, $$n$$ || g, g FROM generate_series(1, 3) g');
TABLE mirror;

-- ---- differential: 30,000 random changes over 500 keys (several batches)
-- against the last change of each key, computed in plain SQL
CREATE TABLE changes AS
SELECT g AS seq,
       CASE WHEN (hashint4(g) & 7) < 5 THEN '+U' WHEN (hashint4(g) & 7) < 6 THEN '+I' ELSE '-D' END AS kind,
       ROW((hashint4(g * 31) & 2147483647) % 500, 'v' || g, g)::ac.mirror AS data
  FROM generate_series(1, 30000) g;
TRUNCATE mirror;
INSERT INTO mirror SELECT g, 'old', 0 FROM generate_series(0, 499, 3) g;   -- some keys exist before
CREATE TABLE expected AS
SELECT (data).* FROM (
    SELECT DISTINCT ON ((data).id) kind, data FROM changes ORDER BY (data).id, seq DESC) last
 WHERE kind <> '-D'
UNION ALL
SELECT m.* FROM mirror m WHERE NOT EXISTS (SELECT FROM changes c WHERE (c.data).id = m.id);
SELECT inserts + updates_before + updates_after + deletes AS received,
       inserted + updated + deleted + missing + superseded AS accounted
  FROM apply_changelog('mirror', 'SELECT kind, data FROM ac.changes ORDER BY seq');
SELECT count(*) AS differences FROM (
    (TABLE mirror EXCEPT ALL TABLE expected) UNION ALL (TABLE expected EXCEPT ALL TABLE mirror)) d;
-- with little work_mem the batches are smaller: the same table
TRUNCATE mirror;
INSERT INTO mirror SELECT g, 'old', 0 FROM generate_series(0, 499, 3) g;
SET work_mem = '64kB';
SELECT count(*) > 0 AS applied FROM apply_changelog('mirror', 'SELECT kind, data FROM ac.changes ORDER BY seq');
RESET work_mem;
SELECT count(*) AS differences FROM (
    (TABLE mirror EXCEPT ALL TABLE expected) UNION ALL (TABLE expected EXCEPT ALL TABLE mirror)) d;

-- ---- changes that outgrow work_mem are sorted by key and each key's last
-- change is still applied once: the same table and the same counts under
-- 1MB as in one batch under 64MB (applied batch by batch, a key updated
-- batches after its insert would be written twice and counted so).
-- 20,000 keys changed 3 times, with a truncation of the source after the
-- first 30,000 changes: the sort so far is applied before it, and a new
-- one begun after it (DEBUG1 says when).
CREATE TABLE wide (seq int, kind text, data ac.mirror);
INSERT INTO wide
SELECT g, CASE WHEN g % 10 = 0 THEN '-D' WHEN g % 10 = 5 THEN '-U' ELSE '+U' END,
       ROW((hashint4(g) & 2147483647) % 20000, repeat('x', 20) || g, g)::ac.mirror
  FROM generate_series(1, 60000) g;
INSERT INTO wide VALUES (30000, 'TRUNCATE', NULL), (30000, '+I', ROW(-1, 'after', 0)::ac.mirror);
CREATE TABLE wide_expected AS
SELECT (data).* FROM (
    SELECT DISTINCT ON ((data).id) kind, data FROM wide
     WHERE seq > 30000 OR (seq = 30000 AND kind = '+I')
     ORDER BY (data).id, seq DESC) last
 WHERE kind NOT IN ('-D', '-U');
SELECT count(*) AS expected_rows, count(*) FILTER (WHERE id = -1) AS after_truncation
  FROM wide_expected;
TRUNCATE mirror;
SET work_mem = '64MB';
CREATE TEMP TABLE counts_one AS
SELECT * FROM apply_changelog('mirror', $$SELECT kind, data FROM ac.wide ORDER BY seq, CASE kind WHEN 'TRUNCATE' THEN 1 WHEN '+I' THEN 2 ELSE 0 END$$);
SELECT count(*) AS differences FROM (
    (TABLE mirror EXCEPT ALL TABLE wide_expected) UNION ALL (TABLE wide_expected EXCEPT ALL TABLE mirror)) d;
TRUNCATE mirror;
SET work_mem = '1MB';
SET log_temp_files = -1;	-- their names are the server's
SET client_min_messages = debug1;
CREATE TEMP TABLE counts_spilled AS
SELECT * FROM apply_changelog('mirror', $$SELECT kind, data FROM ac.wide ORDER BY seq, CASE kind WHEN 'TRUNCATE' THEN 1 WHEN '+I' THEN 2 ELSE 0 END$$);
RESET client_min_messages;
RESET log_temp_files;
RESET work_mem;
SELECT count(*) AS differences FROM (
    (TABLE mirror EXCEPT ALL TABLE wide_expected) UNION ALL (TABLE wide_expected EXCEPT ALL TABLE mirror)) d;
SELECT o.superseded, o.inserted, o.deleted, (SELECT s FROM counts_spilled s) = o AS same_counts
  FROM counts_one o;
-- spilled, a key of two columns (text first) sorts by the key index's
-- order, and a key's changes are never split between two batches: an
-- update's -U alone would delete a row another table references
CREATE TABLE kv (a text, b int, v text, PRIMARY KEY (a, b));
CREATE TABLE kv_child (a text, b int, FOREIGN KEY (a, b) REFERENCES kv);
INSERT INTO kv SELECT 'k' || (g % 97), g, 'old' FROM generate_series(1, 20000) g;
INSERT INTO kv_child SELECT 'k' || (g % 97), g FROM generate_series(1, 20000, 7) g;
CREATE TABLE kv_changes AS
SELECT g * 2 AS seq, '-U' AS kind, ROW('k' || (g % 97), g, 'old')::ac.kv AS data
  FROM generate_series(1, 20000) g
UNION ALL
SELECT g * 2 + 1, '+U', ROW('k' || (g % 97), g, repeat('n', 30) || g)::ac.kv
  FROM generate_series(1, 20000) g
UNION ALL
SELECT 40001 + g, '+I', ROW('new' || g, g, 'fresh')::ac.kv FROM generate_series(1, 20000) g;
SET work_mem = '1MB';
SELECT updates_before, updates_after, inserted, updated, superseded
  FROM apply_changelog('kv', 'SELECT kind, data FROM ac.kv_changes ORDER BY seq');
RESET work_mem;
SELECT count(*) AS rows, count(*) FILTER (WHERE v = repeat('n', 30) || b) AS updated,
       count(*) FILTER (WHERE v = 'fresh') AS fresh
  FROM kv;

-- ---- a table without a key: additions insert, retractions delete one
-- row equal in every column (NULLs included), in order
CREATE TABLE bag (v int, w text);
SELECT inserted, deleted, missing FROM apply_changelog('bag', $$VALUES
    ('+I', ROW(1, 'a')::ac.bag), ('+I', ROW(1, 'a')::ac.bag), ('+I', ROW(2, NULL)::ac.bag),
    ('-D', ROW(1, 'a')::ac.bag), ('-D', ROW(2, NULL)::ac.bag), ('-D', ROW(3, 'x')::ac.bag),
    ('+I', ROW(3, 'x')::ac.bag)$$);
SELECT * FROM bag ORDER BY v;
-- rows bigger than a memory block, deleted in order after being added
SELECT inserted, deleted FROM apply_changelog('bag', $$
    SELECT k, ROW(9, repeat('w', 20000))::ac.bag FROM unnest(ARRAY['+I', '-D']) k$$);
-- a partitioned table without key: a row is its partition and place
CREATE TABLE parts (k int, v text) PARTITION BY LIST (k);
CREATE TABLE parts1 PARTITION OF parts FOR VALUES IN (1);
CREATE TABLE parts2 PARTITION OF parts FOR VALUES IN (2);
INSERT INTO parts VALUES (1, 'a'), (2, 'b');
SELECT deleted FROM apply_changelog('parts', $$VALUES ('-D', ROW(1, 'a')::ac.parts)$$);
TABLE parts;
-- a column without equality is fine until a row must be found by it
CREATE TABLE notes (doc json);
SELECT inserted FROM apply_changelog('notes', $$VALUES ('+I', ROW('{"a": 1}')::ac.notes)$$);
SELECT * FROM apply_changelog('notes', $$VALUES ('-D', ROW('{"a": 1}')::ac.notes)$$);

-- ---- keys: composite, a replica identity index when there is no primary key
CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b));
SELECT inserted, updated FROM apply_changelog('pairs', $$VALUES
    ('+I', ROW(1, 'x', 1)::ac.pairs), ('+I', ROW(1, 'y', 2)::ac.pairs), ('+U', ROW(1, 'x', 3)::ac.pairs)$$);
SELECT * FROM pairs ORDER BY a, b;
CREATE TABLE by_index (code text NOT NULL, v int);
CREATE UNIQUE INDEX by_index_code ON by_index (code);
ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_code;
SELECT inserted, updated, deleted FROM apply_changelog('by_index', $$VALUES
    ('+I', ROW('a', 1)::ac.by_index), ('+U', ROW('a', 2)::ac.by_index), ('+I', ROW('b', 1)::ac.by_index),
    ('-D', ROW('b', NULL)::ac.by_index)$$);
TABLE by_index;

-- ---- generated and identity columns are the table's to fill
CREATE TABLE computed (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, price int,
                       with_tax int GENERATED ALWAYS AS (price * 2) STORED);
SELECT inserted, updated FROM apply_changelog('computed', $$VALUES
    ('+I', ROW(5, 10, NULL)::ac.computed), ('+U', ROW(5, 11, NULL)::ac.computed)$$);
TABLE computed;
-- an identity column that is not the key keeps its value
CREATE TABLE numbered (code text PRIMARY KEY, n int GENERATED ALWAYS AS IDENTITY, v int);
SELECT inserted, updated FROM apply_changelog('numbered', $$VALUES
    ('+I', ROW('a', 7, 1)::ac.numbered), ('+U', ROW('a', 8, 2)::ac.numbered)$$);
SELECT inserted, updated FROM apply_changelog('numbered', $$VALUES ('+U', ROW('a', 9, 3)::ac.numbered)$$);
TABLE numbered;

-- ---- triggers see the net change of each key in a batch
CREATE TABLE audit (op text, id int);
CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ac.audit VALUES (TG_OP, coalesce(NEW.id, OLD.id));
    RETURN NULL;
END $$;
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON mirror FOR EACH ROW EXECUTE FUNCTION audit();
TRUNCATE mirror;
SELECT superseded FROM apply_changelog('mirror', $$VALUES
    ('+I', ROW(1, 'a', 1)::ac.mirror), ('-U', ROW(1, 'a', 1)::ac.mirror), ('+U', ROW(1, 'a', 2)::ac.mirror),
    ('+I', ROW(2, 'b', 1)::ac.mirror), ('-D', ROW(2, 'b', 1)::ac.mirror)$$);
SELECT * FROM audit ORDER BY id, op;
SELECT * FROM mirror;
DROP TRIGGER audit ON mirror;

-- ---- other unique constraints: each key's last change in key order may
-- collide where the changes in their own order do not; such a batch is
-- applied again change by change, in order
CREATE TABLE people (id int PRIMARY KEY, email text UNIQUE);
INSERT INTO people VALUES (2, 'a');
-- id 2's email a -> b, then id 1 takes a
SELECT * FROM apply_changelog('people', $$VALUES
    ('-U', ROW(2, 'a')::ac.people), ('+U', ROW(2, 'b')::ac.people), ('+I', ROW(1, 'a')::ac.people)$$);
SELECT * FROM people ORDER BY id;
-- two values swapped through a third
SELECT inserted, updated, deleted, missing, superseded FROM apply_changelog('people', $$VALUES
    ('-U', ROW(1, 'a')::ac.people), ('+U', ROW(1, 'tmp')::ac.people),
    ('-U', ROW(2, 'b')::ac.people), ('+U', ROW(2, 'a')::ac.people),
    ('-U', ROW(1, 'tmp')::ac.people), ('+U', ROW(1, 'b')::ac.people)$$);
SELECT * FROM people ORDER BY id;
-- truly invalid: b is taken and never freed; the constraint's own error,
-- and nothing of the call is left
SELECT * FROM apply_changelog('people', $$VALUES
    ('-U', ROW(2, 'a')::ac.people), ('+U', ROW(2, 'c')::ac.people), ('+I', ROW(3, 'b')::ac.people)$$);
SELECT * FROM people ORDER BY id;
-- a rotation of 500 emails through a spare value, in batches (little
-- work_mem): the table ends as the changes in order leave it
TRUNCATE people;
INSERT INTO people SELECT g, 'r' || g FROM generate_series(1, 500) g;
CREATE TABLE rotation AS
SELECT 1 AS seq, '-U' AS kind, ROW(1, 'r1')::ac.people AS data
UNION ALL SELECT 2, '+U', ROW(1, 'spare')::ac.people
UNION ALL
SELECT 3 + 2 * k + (kind = '+U')::int, kind,
       ROW(500 - k, 'r' || CASE kind WHEN '-U' THEN 500 - k ELSE (500 - k) % 500 + 1 END)::ac.people
  FROM generate_series(0, 498) k, unnest(ARRAY['-U', '+U']) kind
UNION ALL SELECT 1001, '-U', ROW(1, 'spare')::ac.people
UNION ALL SELECT 1002, '+U', ROW(1, 'r2')::ac.people;
SET work_mem = '64kB';
SELECT inserted, updated, deleted, missing, superseded
  FROM apply_changelog('people', 'SELECT kind, data FROM ac.rotation ORDER BY seq');
RESET work_mem;
SELECT count(*) FILTER (WHERE email = 'r' || (id % 500 + 1)) AS rotated, count(*) FROM people;
-- a foreign key into the table itself: a child moved off its parent, then
-- the parent deleted (in key order the delete would come first)
CREATE TABLE tree (id int PRIMARY KEY, parent int REFERENCES tree);
INSERT INTO tree VALUES (1, NULL), (2, 1);
SELECT updated, deleted FROM apply_changelog('tree', $$VALUES
    ('-U', ROW(2, 1)::ac.tree), ('+U', ROW(2, NULL)::ac.tree), ('-D', ROW(1, NULL)::ac.tree)$$);
TABLE tree;
-- and still refused when the changes in order break it
SELECT * FROM apply_changelog('tree', $$VALUES
    ('-D', ROW(2, NULL)::ac.tree), ('+I', ROW(3, 2)::ac.tree)$$);
TABLE tree;
-- an exclusion constraint, as a unique index
CREATE TABLE bookings (id int PRIMARY KEY, during int4range, EXCLUDE USING gist (during WITH &&));
INSERT INTO bookings VALUES (2, '[10,20)');
SELECT inserted, updated FROM apply_changelog('bookings', $$VALUES
    ('-U', ROW(2, '[10,20)')::ac.bookings), ('+U', ROW(2, '[20,30)')::ac.bookings),
    ('+I', ROW(1, '[15,18)')::ac.bookings)$$);
SELECT * FROM bookings ORDER BY id;

-- ---- privileges and row-level security hold as for the caller's own SQL
CREATE ROLE regress_ptf_apply;
GRANT USAGE ON SCHEMA ac TO regress_ptf_apply;
GRANT SELECT, INSERT, UPDATE ON mirror TO regress_ptf_apply;
SET ROLE regress_ptf_apply;
SELECT * FROM apply_changelog('ac.mirror', $$SELECT '+I', ROW(9, 'z', 1)::ac.mirror FROM ac.noisy()$$);
RESET ROLE;
GRANT DELETE ON mirror TO regress_ptf_apply;
ALTER TABLE mirror ENABLE ROW LEVEL SECURITY;
CREATE POLICY small ON mirror USING (balance < 100) WITH CHECK (balance < 100);
SET ROLE regress_ptf_apply;
SELECT inserted FROM apply_changelog('ac.mirror', $$VALUES ('+I', ROW(9, 'z', 1)::ac.mirror)$$);
SELECT inserted FROM apply_changelog('ac.mirror', $$VALUES ('+I', ROW(10, 'big', 500)::ac.mirror)$$);
RESET ROLE;
SELECT * FROM mirror ORDER BY id;
ALTER TABLE mirror DISABLE ROW LEVEL SECURITY;
DROP POLICY small ON mirror;

-- ---- errors
CREATE VIEW mirror_view AS SELECT * FROM mirror;
SELECT * FROM apply_changelog('mirror_view', $$VALUES ('+I', ROW(1, 'a', 1)::ac.mirror)$$);
SELECT * FROM apply_changelog('mirror', 'SELECT 1');
SELECT * FROM apply_changelog('mirror', $$VALUES ('+X', ROW(1, 'a', 1)::ac.mirror)$$);
SELECT * FROM apply_changelog('mirror', $$VALUES (NULL, ROW(1, 'a', 1)::ac.mirror)$$);
-- an error in a batch leaves nothing of the call behind
SELECT count(*) FROM mirror;
SELECT * FROM apply_changelog('mirror', $$VALUES ('+I', ROW(50, 'a', 1)::ac.mirror), ('+I', ROW(NULL, 'b', 1)::ac.mirror)$$);
SELECT count(*) FROM mirror;

-- ---- end to end: Debezium rows land in several transactions; an
-- incremental from_changelog under a uid feeds apply_changelog; the mirror
-- ends equal to the source
CREATE TABLE source (id int PRIMARY KEY, name text, balance int);
CREATE TABLE landing (seq bigserial, op text, before jsonb, after jsonb, ts_ms bigint);
-- what Debezium writes for REPLICA IDENTITY DEFAULT: no before on updates
-- that keep the key, only the key in a delete's before
CREATE FUNCTION to_landing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ac.landing (op, after, ts_ms) VALUES ('c', to_jsonb(NEW), 0);
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO ac.landing (op, before, after, ts_ms)
        VALUES ('u', CASE WHEN OLD.id <> NEW.id THEN jsonb_build_object('id', OLD.id) END, to_jsonb(NEW), 0);
    ELSE
        INSERT INTO ac.landing (op, before, ts_ms) VALUES ('d', jsonb_build_object('id', OLD.id), 0);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER to_landing AFTER INSERT OR UPDATE OR DELETE ON source
    FOR EACH ROW EXECUTE FUNCTION to_landing();
CREATE TABLE mirror2 (id int PRIMARY KEY, name text, balance int);
CREATE FUNCTION sync() RETURNS TABLE (inserted bigint, updated bigint, deleted bigint, missing bigint)
LANGUAGE sql AS $$
    SELECT inserted, updated, deleted, missing FROM ptf.apply_changelog('ac.mirror2', $q$
        SELECT kind, data FROM ptf.from_changelog(NULL::ac.landing, NULL::ac.mirror2,
            before => 'before', after => 'after', partition_by => '{id}',
            consume_full_deletes => false,
            op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
            changes => true, uid => 'mirror2')$q$)
$$;
SELECT * FROM sync();                      -- starts the stream
INSERT INTO source SELECT g, 'n' || g, g FROM generate_series(1, 100) g;
UPDATE source SET balance = balance + 1 WHERE id % 2 = 0;
SELECT * FROM sync();
DELETE FROM source WHERE id % 5 = 0;
UPDATE source SET id = id + 1000 WHERE id % 7 = 0;     -- key changes
BEGIN;
UPDATE source SET name = 'x' WHERE id < 10;
SELECT * FROM sync();                      -- a sync in the writer's transaction sees what committed
COMMIT;
SELECT * FROM sync();
SELECT count(*) AS differences FROM (
    (TABLE source EXCEPT ALL TABLE mirror2) UNION ALL (TABLE mirror2 EXCEPT ALL TABLE source)) d;
-- a rolled-back sync is read again
UPDATE source SET balance = 0 WHERE id = 1;
BEGIN;
SELECT * FROM sync();
ROLLBACK;
SELECT * FROM sync();
SELECT balance FROM mirror2 WHERE id = 1;
SELECT drop_state('mirror2');

-- ---- a bare call of from_changelog gives its changes straight to the
-- table (said at DEBUG1), not through its materialized result; any other
-- query around it runs as a query.  Both ways leave the same table and
-- counts, over many small batches too.  Creates of 60 keys, updates with
-- whole before images, deletes, some of keys never created
CREATE TABLE cdc (seq int, op text, before jsonb, after jsonb);
INSERT INTO cdc
SELECT g, op,
       CASE WHEN op <> 'c' THEN jsonb_build_object('id', k, 'name', 'n' || k, 'balance', g - 1) END,
       CASE WHEN op <> 'd' THEN jsonb_build_object('id', k, 'name', 'n' || k, 'balance', g) END
  FROM (SELECT g, CASE WHEN g <= 60 THEN 'c' WHEN g % 7 = 0 THEN 'd' ELSE 'u' END AS op,
               CASE WHEN g <= 60 THEN g ELSE (g * 37) % 70 + 1 END AS k
          FROM generate_series(1, 400) g) s;
CREATE TABLE mirror_bare (id int PRIMARY KEY, name text, balance int);
CREATE TABLE mirror_query (id int PRIMARY KEY, name text, balance int);
CREATE TABLE mirror_scratch (id int PRIMARY KEY, name text, balance int);
SET work_mem = '64kB';
SET client_min_messages = debug1;
SELECT * FROM apply_changelog('mirror_bare', $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc, NULL::ac.mirror_bare,
    before => 'before', after => 'after', query => 'SELECT * FROM ac.cdc ORDER BY seq',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}')$$);
SELECT * FROM apply_changelog('mirror_query', $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc, NULL::ac.mirror_query,
    before => 'before', after => 'after', query => 'SELECT * FROM ac.cdc ORDER BY seq',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}') WHERE kind IS NOT NULL$$);
SELECT count(*) AS rows, count(*) FILTER (WHERE m IS DISTINCT FROM q) AS differences
  FROM mirror_bare m FULL JOIN mirror_query q USING (id);
-- and the table is the last image of each key not deleted last
CREATE TEMP VIEW cdc_final AS
SELECT (jsonb_populate_record(NULL::ac.mirror_bare, after)).*
  FROM (SELECT DISTINCT ON (coalesce(after, before)->>'id') op, after
          FROM cdc ORDER BY coalesce(after, before)->>'id', seq DESC) l
 WHERE op <> 'd';
SELECT count(*) AS differences FROM (
    (TABLE mirror_bare EXCEPT ALL TABLE cdc_final) UNION ALL (TABLE cdc_final EXCEPT ALL TABLE mirror_bare)) d;
-- arguments computed when the query runs: a query too
SELECT inserted FROM apply_changelog('mirror_scratch', $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc, NULL::ac.mirror_scratch,
    before => 'before', after => 'after', query => 'SELECT * FROM ac.cdc WHERE seq <= ' || (random() * 0 + 1)::int,
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}')$$);
RESET client_min_messages;
RESET work_mem;
-- the bare call reads a retraction's image for its key alone (the table
-- deletes by it; MERGE of the last row per key reads no before image
-- either): a before image whose other values would not convert is applied;
-- run as a query, from_changelog returns whole rows and fails on it
CREATE TABLE cdc_bad (seq int, op text, before jsonb, after jsonb);
INSERT INTO cdc_bad VALUES
    (1, 'c', NULL, '{"id": 1, "name": "a", "balance": 1}'),
    (2, 'c', NULL, '{"id": 2, "name": "b", "balance": 2}'),
    (3, 'u', '{"id": 1, "name": "a", "balance": "one"}', '{"id": 1, "name": "a2", "balance": 3}'),
    (4, 'd', '{"id": 2, "name": "b", "balance": "two"}', NULL);
TRUNCATE mirror_scratch;
SELECT inserted, updated, deleted, superseded FROM apply_changelog('mirror_scratch', $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc_bad, NULL::ac.mirror_scratch,
    before => 'before', after => 'after', query => 'SELECT * FROM ac.cdc_bad ORDER BY seq',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}')$$);
TABLE mirror_scratch;
SELECT count(*) FROM ptf.from_changelog(NULL::ac.cdc_bad, NULL::ac.mirror_scratch,
    before => 'before', after => 'after', query => 'SELECT * FROM ac.cdc_bad ORDER BY seq',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}');
-- the bare call runs as the caller, with the caller's right to execute it
-- (revoked in a transaction rolled back: the function's ACL stays as made)
GRANT SELECT ON cdc TO regress_ptf_apply;
GRANT SELECT, INSERT, UPDATE, DELETE ON mirror_bare TO regress_ptf_apply;
BEGIN;
REVOKE EXECUTE ON FUNCTION ptf.from_changelog FROM PUBLIC;
SET ROLE regress_ptf_apply;
SELECT inserted FROM apply_changelog('ac.mirror_bare', $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc, NULL::ac.mirror_bare,
    before => 'before', after => 'after', query => 'SELECT * FROM ac.cdc ORDER BY seq',
    op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}')$$);
ROLLBACK;
SELECT proacl IS NULL AS default_acl FROM pg_proc WHERE oid = 'ptf.from_changelog'::regproc;

-- a truncation of the changelog's table (to_changelog's TRUNCATE row, data NULL) takes every
-- row of the target, as logical replication truncates a subscriber: keyed and not, after
-- the changes before it and before those after it; counted as a delete of each row
CREATE TABLE tr_src (id int PRIMARY KEY, v text);
ALTER TABLE tr_src REPLICA IDENTITY FULL;
CREATE TABLE tr_keyed (id int PRIMARY KEY, v text);
CREATE TABLE tr_bag (id int, v text);
INSERT INTO tr_keyed VALUES (9, 'there before');
SELECT count(*) FROM ptf.to_changelog(NULL::ac.tr_src, changes => true, uid => 'ac-tr');
INSERT INTO tr_src VALUES (1, 'a'), (2, 'b');
TRUNCATE tr_src;
INSERT INTO tr_src VALUES (3, 'c');
CREATE TABLE tr_changes AS SELECT op, data FROM ptf.to_changelog(NULL::ac.tr_src, changes => true, uid => 'ac-tr');
SELECT op, data FROM tr_changes;
SELECT * FROM apply_changelog('tr_keyed', $$SELECT op, ROW((data).*)::ac.tr_keyed FROM ac.tr_changes$$);
SELECT * FROM tr_keyed;
SELECT * FROM apply_changelog('tr_bag', $$SELECT op, ROW((data).*)::ac.tr_bag FROM ac.tr_changes$$);
SELECT * FROM tr_bag;
SELECT ptf.drop_state('ac-tr');
-- data of another row type: said so, with the cast to make
SELECT * FROM apply_changelog('tr_keyed', $$SELECT op, data FROM ac.tr_changes$$);
SELECT * FROM apply_changelog('tr_keyed', $$SELECT op, ROW((data).*) FROM ac.tr_changes$$);
-- elsewhere a truncation is no kind
SELECT count(*) FROM deduplicate_keep_first(NULL::ac.tr_keyed, partition_by => '{id}',
    query => $$SELECT op, ROW((data).*)::ac.tr_keyed FROM ac.tr_changes$$);

DROP OWNED BY regress_ptf_apply;
DROP ROLE regress_ptf_apply;

-- ---- targets a red team tried ----
-- a partitioned table with a key: upserted, deleted and counted as any
CREATE TABLE pt (id int PRIMARY KEY, v int) PARTITION BY RANGE (id);
CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (100);
CREATE TABLE pt2 PARTITION OF pt FOR VALUES FROM (100) TO (200);
INSERT INTO pt VALUES (1, 1), (7, 7);
SELECT inserts, deletes, inserted, updated, deleted, missing FROM apply_changelog('pt',
    $$VALUES ('+I', ROW(1, 10)::ac.pt), ('+I', ROW(150, 2)::ac.pt), ('-D', ROW(7, NULL)::ac.pt),
             ('-D', ROW(8, NULL)::ac.pt)$$);
TABLE pt ORDER BY id;
-- a deferrable primary key cannot decide an upsert: refused, not applied
-- as a table without a key
CREATE TABLE dpk (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text);
INSERT INTO dpk VALUES (1, 'a');
SELECT * FROM apply_changelog('dpk', $$VALUES ('-D', ROW(1, NULL)::ac.dpk)$$);
-- a read-only transaction writes nothing (25006), on the direct path too
CREATE TABLE ro (id int PRIMARY KEY, v int);
BEGIN READ ONLY;
SELECT inserted FROM apply_changelog('ro', $$VALUES ('+I', ROW(1, 1)::ac.ro)$$);
ROLLBACK;
SELECT count(*) AS written FROM ro;
-- from_changelog's flat rows take the target's lengths and precisions, as
-- an assignment does
CREATE TABLE cdc_t (op text, id int, code varchar(10), amount numeric(12,4));
INSERT INTO cdc_t VALUES ('INSERT', 1, 'ABC', 1.2345);
CREATE TABLE acct_t (id int PRIMARY KEY, code varchar(3), amount numeric(5,1));
SELECT inserted FROM apply_changelog('acct_t',
    $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc_t, NULL::ac.acct_t)$$);
TABLE acct_t;
INSERT INTO cdc_t VALUES ('INSERT', 2, 'TOOLONG', 1);
SELECT inserted FROM apply_changelog('acct_t',
    $$SELECT kind, data FROM ptf.from_changelog(NULL::ac.cdc_t, NULL::ac.acct_t)$$);
-- an inheritance parent: deletes, as inserts, are of the parent's own rows
CREATE TABLE par (id int PRIMARY KEY, v text);
CREATE TABLE chi () INHERITS (par);
INSERT INTO chi VALUES (1, 'c1');
SELECT deleted, missing FROM apply_changelog('par', $$VALUES ('-D', ROW(1, NULL)::ac.par)$$);
SELECT tableoid::regclass, * FROM par ORDER BY id;
-- a long unknown kind is cut in the message
SELECT * FROM apply_changelog('ro', $$SELECT repeat('x', 1000), ROW(1, 1)::ac.ro$$);
