-- DEDUPLICATE_KEEP_FIRST by arrival: FLIP-614 §4.1.3.1, 4.1.3.2, 4.1.3.4 and keys.
-- Arrival order is the order of the input: SELECT * FROM t for a table
-- (insertion order here), or the query's order.

CREATE SCHEMA kf_basic;
SET search_path = kf_basic, ptf;

-- FLIP-614 §4.1.3.1: unkeyed, one global partition -> exactly the first row
CREATE TABLE user_events_1 (id int, name text);
INSERT INTO user_events_1 VALUES (1, 'Vas'), (1, 'Bob');
SELECT * FROM deduplicate_keep_first(NULL::user_events_1);
-- an empty partition_by is the same global partition
SELECT * FROM deduplicate_keep_first(NULL::user_events_1, partition_by => '{}');

-- FLIP-614 §4.1.3.2: keyed by user_name
CREATE TABLE user_events (user_name text, event text);
INSERT INTO user_events VALUES ('Vas', 'login'), ('Vas', 'click');
SELECT * FROM deduplicate_keep_first(NULL::user_events, partition_by => '{user_name}');

-- FLIP-614 §4.1.3.4: whole row as key, exact duplicates collapse
CREATE TABLE trades_with_dups (trade_id text, ticker text, quantity int, price numeric);
INSERT INTO trades_with_dups VALUES ('t1', 'AAPL', 1, 10), ('t1', 'AAPL', 1, 10);
SELECT * FROM deduplicate_keep_first(NULL::trades_with_dups,
    partition_by => '{trade_id,ticker,quantity,price}');
-- one column differs: two distinct rows
INSERT INTO trades_with_dups VALUES ('t1', 'AAPL', 2, 10);
SELECT * FROM deduplicate_keep_first(NULL::trades_with_dups,
    partition_by => '{trade_id,ticker,quantity,price}');

-- interleaved keys: the first row of each key, in arrival order
CREATE TABLE clicks (seq int, user_id text, page text);
INSERT INTO clicks VALUES
    (1, 'a', 'home'), (2, 'b', 'home'), (3, 'a', 'cart'), (4, 'c', 'home'),
    (5, 'b', 'cart'), (6, 'c', 'cart'), (7, 'a', 'pay'), (8, 'd', 'home');
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => ARRAY['user_id']);
-- a query input decides the arrival order
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    query => 'SELECT * FROM clicks ORDER BY seq DESC');

-- multi-column keys: (user_id, page) pairs
INSERT INTO clicks VALUES (9, 'a', 'home'), (10, 'b', 'home');
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id,page}')
ORDER BY seq;
-- key order in partition_by does not change which rows are kept
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{page,user_id}')
ORDER BY seq;

-- NULL keys are one group (GROUP BY semantics), separate from every value
CREATE TABLE nullkeys (seq int, k1 int, k2 text);
INSERT INTO nullkeys VALUES
    (1, NULL, 'x'), (2, 1, NULL), (3, NULL, 'x'), (4, NULL, NULL),
    (5, 1, NULL), (6, NULL, NULL), (7, 1, 'x'), (8, 2, NULL);
SELECT * FROM deduplicate_keep_first(NULL::nullkeys, partition_by => '{k1}');
SELECT * FROM deduplicate_keep_first(NULL::nullkeys, partition_by => '{k1,k2}');
-- same as GROUP BY's groups
SELECT count(*) FROM (SELECT DISTINCT k1, k2 FROM nullkeys) g;

-- key equality is the type's own: numeric 1.0 = 1.00, float -0 = 0
CREATE TABLE amounts (seq int, amount numeric, f float8);
INSERT INTO amounts VALUES (1, 1.0, 0), (2, 1.00, -0.0::float8), (3, 1.000, 1), (4, 2, 'NaN'), (5, 2.0, 'NaN');
SELECT * FROM deduplicate_keep_first(NULL::amounts, partition_by => '{amount}');
SELECT * FROM deduplicate_keep_first(NULL::amounts, partition_by => '{f}');

-- text keys compare under their collation: a case-insensitive ICU collation
CREATE COLLATION case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE names (seq int, name text COLLATE case_insensitive);
INSERT INTO names VALUES (1, 'alice'), (2, 'ALICE'), (3, 'Bob'), (4, 'bob'), (5, 'Alice');
SELECT * FROM deduplicate_keep_first(NULL::names, partition_by => '{name}');
-- under a deterministic collation every spelling is its own key
CREATE TABLE names_c (seq int, name text COLLATE "C");
INSERT INTO names_c SELECT * FROM names;
SELECT * FROM deduplicate_keep_first(NULL::names_c, partition_by => '{name}');

-- long keys are detoasted and compared by value
CREATE TABLE docs (seq int, body text);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO docs SELECT i, repeat(chr(97 + i % 2), 5000) FROM generate_series(1, 6) i;
SELECT seq, length(body), left(body, 3) FROM deduplicate_keep_first(NULL::docs, partition_by => '{body}');

-- compressed inline keys too
CREATE TABLE docs_c (seq int, body text);
ALTER TABLE docs_c ALTER COLUMN body SET STORAGE MAIN;
INSERT INTO docs_c SELECT i, repeat(chr(97 + i % 2), 5000) FROM generate_series(1, 6) i;
SELECT seq, length(body), left(body, 3) FROM deduplicate_keep_first(NULL::docs_c, partition_by => '{body}');

-- varlena types stored plain (oidvector) keep their 4-byte headers in state
CREATE TABLE ov (k oidvector, v int);
INSERT INTO ov VALUES ('1 2 3', 1), ('1 2 3', 2), ('4 5', 3), ('4 5', 4);
SELECT * FROM deduplicate_keep_first(NULL::ov, partition_by => '{k}');
SELECT * FROM deduplicate_keep_first(NULL::ov, partition_by => '{k}', uid => 'oidvector');
SELECT * FROM deduplicate_keep_first(NULL::ov, partition_by => '{k}', uid => 'oidvector');
SELECT drop_state('oidvector');

-- a column named like a time attribute is just data without on_time/proc_time
CREATE TABLE timey (rowtime timestamptz, proctime timestamptz, k int);
INSERT INTO timey VALUES ('2024-01-01 10:05+00', '2024-01-01 12:00+00', 1),
                         ('2024-01-01 10:01+00', '2024-01-01 12:01+00', 1);
SET TIME ZONE 'UTC';
SELECT * FROM deduplicate_keep_first(NULL::timey, partition_by => '{k}');
RESET TIME ZONE;

-- dropped columns: output keeps the table's row type
CREATE TABLE evolving (a int, dropme text, b text);
INSERT INTO evolving VALUES (1, 'x', 'first'), (1, 'y', 'second'), (2, 'z', 'third');
ALTER TABLE evolving DROP COLUMN dropme;
INSERT INTO evolving VALUES (3, 'fourth');
SELECT * FROM deduplicate_keep_first(NULL::evolving, partition_by => '{a}');
SELECT e.b FROM deduplicate_keep_first(NULL::evolving, partition_by => '{a}') e WHERE e.a = 3;

-- views and partitioned tables are inputs too
CREATE VIEW clicks_view AS SELECT * FROM clicks WHERE page <> 'home';
SELECT * FROM deduplicate_keep_first(NULL::clicks_view, partition_by => '{user_id}');
CREATE TABLE parted (k int, v text) PARTITION BY LIST (k);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES IN (1);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES IN (2);
INSERT INTO parted VALUES (1, 'one'), (2, 'two'), (1, 'uno');
SELECT * FROM deduplicate_keep_first(NULL::parted, partition_by => '{k}') ORDER BY k;

-- an empty input gives no rows
CREATE TABLE empty_events (k int);
SELECT * FROM deduplicate_keep_first(NULL::empty_events, partition_by => '{k}');

-- a composite type that is not a table needs a query
CREATE TYPE pair AS (k int, v text);
SELECT * FROM deduplicate_keep_first(NULL::pair, partition_by => '{k}',
    query => $$VALUES (1, 'a'), (2, 'b'), (1, 'c')$$);

-- output is the input row type: usable in joins and further calls
SELECT d.user_id, c.page
  FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}') d
  JOIN clicks c USING (seq) ORDER BY 1;

-- a key whose hash is hashint4's but whose equality is not the Datum's bits
-- (xid): equal values made by xidin and read from a stored key are one key
CREATE TYPE xid_row AS (x xid, n int);
SELECT x, n FROM deduplicate_keep_first(NULL::xid_row, partition_by => '{x}',
    query => $$SELECT (CASE WHEN g % 2 = 0 THEN '3000000000' ELSE '5' END)::xid, g
                 FROM generate_series(1, 6) g$$) ORDER BY n;
