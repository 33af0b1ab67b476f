-- apply_changelog's fast paths, against the answer a user would get by
-- hand: the last change of each key merged with MERGE.  New keys go into
-- the table directly (multi-insert, index insertion); keys the table has
-- go through INSERT ... ON CONFLICT; jsonb images are read without the
-- text detour where the value's type allows.  Results must not change.

CREATE SCHEMA ad;
SET search_path = ad, ptf;
\set SHOW_CONTEXT never

-- ---- differential: changes with collisions within batches, NULLs,
-- toasted values, keys changing, deletes then inserts of a key, onto a
-- table that has some of the keys, with a second unique constraint
CREATE TABLE t (id int PRIMARY KEY, email text NOT NULL UNIQUE, note text, big text, n numeric);
CREATE FUNCTION big(g int) RETURNS text LANGUAGE sql IMMUTABLE AS
$$ SELECT string_agg(md5((g * 1000 + i)::text), '') FROM generate_series(1, 200) i $$;
CREATE TABLE changes AS
WITH base AS (
    SELECT g AS seq, (hashint4(g) & 2147483647) % 4000 AS id, hashint4(g * 7) & 15 AS r
      FROM generate_series(1, 20000) g)
SELECT seq,
       CASE WHEN r < 9 THEN '+U' WHEN r < 12 THEN '+I' WHEN r < 14 THEN '-D' ELSE '-U' END AS kind,
       ROW(id, 'e' || id || '-' || seq,
           CASE WHEN r % 3 = 0 THEN NULL ELSE 'note ' || seq END,
           CASE WHEN seq % 97 = 0 THEN big(seq) END,
           CASE WHEN r % 5 = 0 THEN NULL ELSE seq / 7.0 END)::ad.t AS data
  FROM base;
-- a key change: an update whose before image has another key
INSERT INTO changes
SELECT 20000 + 2 * g - 1, '-U', ROW(g * 10, 'x', NULL, NULL, NULL)::ad.t FROM generate_series(1, 50) g
UNION ALL
SELECT 20000 + 2 * g, '+U', ROW(5000 + g, 'moved-' || g, 'moved', NULL, g)::ad.t FROM generate_series(1, 50) g;
-- a delete, then an insert of the same key, then nothing else of it
INSERT INTO changes VALUES (30001, '-D', ROW(4001, 'gone', NULL, NULL, NULL)::ad.t),
                           (30002, '+I', ROW(4001, 'back', 'again', big(4001), 1)::ad.t);
CREATE TABLE before_rows AS
SELECT g AS id, 'old-' || g AS email, 'old' AS note, CASE WHEN g % 50 = 0 THEN big(-g) END AS big, 0::numeric AS n
  FROM generate_series(0, 5100, 3) g;

CREATE FUNCTION reset_table(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('TRUNCATE %s', tbl);
    EXECUTE format('INSERT INTO %s SELECT * FROM ad.before_rows', tbl);
END $$;
-- the answer: each key's last change, merged
CREATE TABLE expected (LIKE t);
SELECT reset_table('expected');
MERGE INTO expected e
USING (SELECT DISTINCT ON ((data).id) kind, (data).* FROM changes ORDER BY (data).id, seq DESC) c
   ON e.id = c.id
 WHEN MATCHED AND c.kind IN ('-D', '-U') THEN DELETE
 WHEN MATCHED THEN UPDATE SET email = c.email, note = c.note, big = c.big, n = c.n
 WHEN NOT MATCHED AND c.kind IN ('+I', '+U') THEN INSERT VALUES (c.id, c.email, c.note, c.big, c.n);
CREATE FUNCTION differences(tbl regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM ((TABLE %1$s EXCEPT ALL TABLE ad.expected)
                    UNION ALL (TABLE ad.expected EXCEPT ALL TABLE %1$s)) d', tbl) INTO n;
    RETURN n;
END $$;

SELECT reset_table('t');
SELECT inserts + updates_before + updates_after + deletes AS received,
       inserted + updated + deleted + missing + superseded AS accounted
  FROM apply_changelog('t', 'SELECT kind, data FROM ad.changes ORDER BY seq');
SELECT differences('t');
-- toasted values arrived whole
SELECT count(*) AS big_rows, bool_and(big = big(id) OR big = big(-id) OR length(big) = 6400) AS whole
  FROM t WHERE big IS NOT NULL;
-- spilled into many batches: the same table
SELECT reset_table('t');
SET work_mem = '64kB';
SELECT count(*) AS calls FROM apply_changelog('t', 'SELECT kind, data FROM ad.changes ORDER BY seq');
RESET work_mem;
SELECT differences('t');
-- onto an empty table: every key new (in the first batch)
TRUNCATE t;
SELECT inserted > 0 AS inserted FROM apply_changelog('t', 'SELECT kind, data FROM ad.changes ORDER BY seq');
CREATE TABLE expected_before AS TABLE expected;
TRUNCATE expected;
MERGE INTO expected e
USING (SELECT DISTINCT ON ((data).id) kind, (data).* FROM changes ORDER BY (data).id, seq DESC) c
   ON e.id = c.id
 WHEN NOT MATCHED AND c.kind IN ('+I', '+U') THEN INSERT VALUES (c.id, c.email, c.note, c.big, c.n);
SELECT differences('t');

TRUNCATE expected;
INSERT INTO expected SELECT * FROM expected_before;
-- ---- the same on a table the direct path must leave alone (an insert
-- trigger): the statement's way, the same result
CREATE TABLE t_trig (LIKE t INCLUDING ALL);
CREATE FUNCTION count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RETURN NEW; END $$;
CREATE TRIGGER t_trig_ins BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION count_insert();
SELECT reset_table('t_trig');
SELECT count(*) AS calls FROM apply_changelog('t_trig', 'SELECT kind, ROW((data).*)::ad.t_trig FROM ad.changes ORDER BY seq');
SELECT differences('t_trig');

-- ---- a new key takes the email of a row that gives it up in the same
-- batch: inserted first, it collides; the batch goes again in order
TRUNCATE t;
INSERT INTO t VALUES (1, 'shared', NULL, NULL, NULL);
SELECT inserted, updated FROM apply_changelog('t', $$VALUES
    ('-U', ROW(1, 'shared', NULL, NULL, NULL)::ad.t), ('+U', ROW(1, 'other', NULL, NULL, NULL)::ad.t),
    ('+I', ROW(2, 'shared', NULL, NULL, NULL)::ad.t)$$);
TABLE t ORDER BY id;
-- and when the order of the changes breaks it too, the constraint's error
SELECT inserted FROM apply_changelog('t', $$VALUES ('+I', ROW(3, 'shared', NULL, NULL, NULL)::ad.t)$$);

-- ---- constraints of the direct path are an INSERT's: NOT NULL, CHECK
CREATE TABLE c (id int PRIMARY KEY, v int NOT NULL CHECK (v > 0), w text);
SELECT inserted FROM apply_changelog('c', $$VALUES ('+I', ROW(1, 1, 'a')::ad.c), ('+I', ROW(2, 0, 'b')::ad.c)$$);
SELECT inserted FROM apply_changelog('c', $$VALUES ('+I', ROW(1, NULL, 'a')::ad.c)$$);
SELECT inserted FROM apply_changelog('c', $$VALUES ('+I', ROW(NULL, 1, 'a')::ad.c)$$);
SELECT count(*) FROM c;
-- keys after the table's last and between its keys, descending and text
CREATE TABLE d (a text, b int, v int, PRIMARY KEY (a, b));
CREATE UNIQUE INDEX d_desc ON d (b DESC, a);
INSERT INTO d SELECT 'k' || (g % 10), g, 0 FROM generate_series(0, 99, 2) g;
SELECT inserted, updated FROM apply_changelog('d', 'SELECT ''+I'', ROW(''k'' || (g % 10), g, 1)::ad.d FROM generate_series(0, 199) g');
SELECT count(*), sum(v), count(DISTINCT (a, b)) FROM d;

-- ---- jsonb images: the shortcuts read what jsonb_populate_record reads
SET TimeZone = 'America/New_York';
CREATE TYPE mood AS ENUM ('sad', 'ok');
CREATE TABLE img (i2 int2, i4 int4, i8 int8, num numeric, num2 numeric(6, 2), t text, vc varchar(3),
                  b bool, ts timestamptz, tsn timestamp, d date, j jsonb, m mood, arr int[]);
CREATE TABLE img_noarr (i2 int2, i4 int4, i8 int8, num numeric, num2 numeric(6, 2), t text, vc varchar(3),
                        b bool, ts timestamptz, tsn timestamp, d date, j jsonb, m mood);
CREATE TABLE images (op text, after jsonb);
INSERT INTO images SELECT 'c', v::jsonb FROM (VALUES
    ('{"i2": 1, "i4": -5, "i8": 9000000000, "num": 1.50, "num2": 3.14159, "t": "x", "vc": "ab", "b": true}'),
    ('{"i2": "7", "i4": "8", "i8": 12, "num": "2.0", "t": 5, "b": "t", "j": {"a": [1, 2]}}'),
    ('{"t": true, "num": 1e3, "i8": -1, "i4": 2147483647, "i2": -32768, "m": "ok", "d": "2024-02-29", "j": "s"}'),
    ('{"ts": "2024-01-01T00:00:01+00:00", "tsn": "2024-01-01T10:20:30", "arr": [1, 2]}'),
    ('{"ts": "2024-02-29 23:59:59.5-08", "tsn": "2024-01-01 10:20:30.123456", "arr": "{3,4}"}'),
    ('{"ts": "2024-06-30T12:00:00.1234567Z"}'),
    ('{"ts": "0001-01-01T00:00:00+05:30"}'),
    ('{"ts": "2024-03-10T02:30:00"}'),
    ('{"ts": "2024-03-10T02:30:00 EST"}'),
    ('{"ts": "9999-12-31T23:59:59.999999-15:59"}'),
    ('{"ts": "2000-01-01T23:59:60Z"}'),
    ('{"ts": "1999-12-31T19:00:00-05"}'),
    ('{"ts": "epoch"}'),
    ('{"i4": null, "t": null, "ts": null, "other": 1}'),
    ('{}'),
    ('{"t": {"nested": 1}, "i2": 0}'),
    ('{"t": [1, "a"], "num": -0.000}')) v(v);
CREATE FUNCTION image_differences(target regtype) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format($q$
        WITH ours AS (SELECT (data).* FROM ptf.from_changelog(NULL::ad.images, NULL::%1$s,
                          after => 'after', op_mapping => '{"c": "INSERT"}')),
             theirs AS (SELECT (jsonb_populate_record(NULL::%1$s, after)).* FROM ad.images)
        SELECT count(*) FROM ((TABLE ours EXCEPT ALL TABLE theirs)
                              UNION ALL (TABLE theirs EXCEPT ALL TABLE ours)) d$q$, target) INTO n;
    RETURN n;
END $$;
SELECT image_differences('img_noarr') AS shortcuts, image_differences('img') AS populate;
SELECT count(*) AS images, count((data).ts) AS timestamps FROM from_changelog(NULL::images,
    NULL::img_noarr, after => 'after', op_mapping => '{"c": "INSERT"}');
-- a value populate refuses is refused with its error
CREATE TABLE bad (op text, after jsonb);
CREATE FUNCTION bad_image(image text) RETURNS SETOF img_noarr LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE ad.bad;
    INSERT INTO ad.bad VALUES ('c', image::jsonb);
    RETURN QUERY SELECT (data).* FROM ptf.from_changelog(NULL::ad.bad, NULL::ad.img_noarr,
        after => 'after', op_mapping => '{"c": "INSERT"}');
END $$;
SELECT * FROM bad_image('{"i4": 1.5}');
SELECT * FROM jsonb_populate_record(NULL::img_noarr, '{"i4": 1.5}');
SELECT * FROM bad_image('{"i2": 70000}');
SELECT * FROM jsonb_populate_record(NULL::img_noarr, '{"i2": 70000}');
SELECT * FROM bad_image('{"ts": "2023-02-29T00:00:00Z"}');
SELECT * FROM jsonb_populate_record(NULL::img_noarr, '{"ts": "2023-02-29T00:00:00Z"}');
SELECT * FROM bad_image('{"vc": "abcd"}');
SELECT * FROM jsonb_populate_record(NULL::img_noarr, '{"vc": "abcd"}');
RESET TimeZone;
