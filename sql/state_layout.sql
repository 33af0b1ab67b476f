-- Durable state tables are made from the operator's declared layout: row
-- images are bytes, so a uid's state no longer depends on its source's
-- row type; the row type is recorded and checked when the state is used.
SET search_path = ptf, public;

CREATE TABLE clicks (user_id int, page text, ts timestamptz);
-- a pending candidate: its image is kept in state
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    on_time => 'ts', uid => 'clicks',
    query => $$VALUES (1, 'home', timestamptz '2024-01-01 10:00')$$);
SELECT state_table AS clicks_table FROM state WHERE uid = 'clicks' \gset
-- the state table's columns: keys, expiry, then the declared fields
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
  FROM pg_attribute a WHERE a.attrelid = :'clicks_table'::regclass AND a.attnum > 0
 ORDER BY a.attnum;
SELECT row_types, layout FROM uid_registry WHERE uid = 'clicks';
-- nothing in pg_depend ties the state table to the source's row type
SELECT count(*) FROM pg_depend
 WHERE objid = :'clicks_table'::regclass AND refobjid = 'clicks'::regtype;

-- columns added at the end: old images read with the new columns NULL
ALTER TABLE clicks ADD COLUMN referrer text;
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    on_time => 'ts', uid => 'clicks',
    query => $$VALUES (2, 'cart', timestamptz '2024-01-01 10:05', 'ad')$$);
-- a dropped column: images keep its bytes and read past them
ALTER TABLE clicks DROP COLUMN referrer;
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    on_time => 'ts', uid => 'clicks',
    query => $$VALUES (3, 'exit', timestamptz '2024-01-01 10:10')$$);
SELECT row_types FROM uid_registry WHERE uid = 'clicks';

-- the owner may change a column's type: nothing in state blocks it ...
ALTER TABLE clicks ALTER COLUMN page TYPE varchar(20);
-- ... and the uid then says what happened and the way out
INSERT INTO clicks VALUES (4, 'x', '2024-01-01 10:20');
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    on_time => 'ts', uid => 'clicks', query => $$SELECT * FROM clicks WHERE user_id = 4$$);

-- a plain DROP TABLE of the source goes through too
DROP TABLE clicks;
CREATE TABLE clicks (user_id int, page text, ts timestamptz);
\set VERBOSITY terse
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    on_time => 'ts', uid => 'clicks',
    query => $$VALUES (4, 'x', timestamptz '2024-01-01 10:20')$$);
\set VERBOSITY default
SELECT drop_state('clicks');
SELECT * FROM deduplicate_keep_first(NULL::clicks, partition_by => '{user_id}',
    on_time => 'ts', uid => 'clicks', watermark_delay => '0',
    query => $$VALUES (4, 'x', timestamptz '2024-01-01 10:20')$$);

-- state without row images (keep-first by arrival) does not care
CREATE TABLE visits (user_id int, page text);
SELECT * FROM deduplicate_keep_first(NULL::visits, partition_by => '{user_id}', uid => 'visits',
    query => $$VALUES (1, 'a')$$);
ALTER TABLE visits ALTER COLUMN page TYPE varchar(10);
INSERT INTO visits VALUES (1, 'b'), (2, 'c');
SELECT * FROM deduplicate_keep_first(NULL::visits, partition_by => '{user_id}', uid => 'visits');

-- key columns named like the state table's own columns, or like each other
CREATE TABLE odd (expires_at int, key_expires_at int, image text, ts timestamptz);
SELECT * FROM deduplicate_keep_first(NULL::odd, partition_by => '{expires_at,key_expires_at,image}',
    on_time => 'ts', uid => 'odd', watermark_delay => '2 years',
    query => $$VALUES (1, 2, 'i', timestamptz '2024-01-01'), (1, 2, 'i', timestamptz '2023-01-01')$$);
SELECT state_table AS odd_table FROM state WHERE uid = 'odd' \gset
SELECT a.attname FROM pg_attribute a
 WHERE a.attrelid = :'odd_table'::regclass AND a.attnum > 0 ORDER BY a.attnum;
SELECT key_key_expires_at, key_expires_at, key_image, expires_at, (state_row(image, NULL::odd)).ts
  FROM :odd_table;

-- a state table changed behind the extension's back is refused, not misread
ALTER TABLE :odd_table ADD COLUMN extra int;
\set VERBOSITY sqlstate
SELECT * FROM deduplicate_keep_first(NULL::odd, partition_by => '{expires_at,key_expires_at,image}',
    on_time => 'ts', uid => 'odd', query => $$SELECT * FROM odd$$);
\set VERBOSITY default
-- and a row image that is not one is refused
SELECT state_row('\x00'::bytea, NULL::odd);
SELECT state_row(('\x' || repeat('ff', 40))::bytea, NULL::odd);
-- a state table damaged by hand is reported as such (XX001), naming the uid
-- whose state it is and the way out, whatever was damaged
CREATE TABLE dmg (k int, ts timestamptz);
SELECT * FROM deduplicate_keep_first(NULL::dmg, partition_by => '{k}', on_time => 'ts',
    uid => 'dmg', watermark_delay => '1 year',
    query => $$VALUES (1, timestamptz '2024-01-01'), (2, timestamptz '2024-01-02')$$);
SELECT state_table AS dmg_table FROM state WHERE uid = 'dmg' \gset
BEGIN;
UPDATE :dmg_table SET image = '\x00'::bytea WHERE k = 1;
SELECT * FROM deduplicate_keep_first(NULL::dmg, partition_by => '{k}', on_time => 'ts',
    uid => 'dmg', query => $$VALUES (3, timestamptz '2024-01-03')$$);
ROLLBACK;
BEGIN;
INSERT INTO :dmg_table SELECT * FROM :dmg_table WHERE k = 2;
\set VERBOSITY sqlstate
SELECT * FROM deduplicate_keep_first(NULL::dmg, partition_by => '{k}', on_time => 'ts',
    uid => 'dmg', query => $$VALUES (3, timestamptz '2024-01-03')$$);
\set VERBOSITY default
ROLLBACK;
-- undamaged, it goes on
SELECT * FROM deduplicate_keep_first(NULL::dmg, partition_by => '{k}', on_time => 'ts',
    uid => 'dmg', query => $$VALUES (3, timestamptz '2024-01-03')$$);
SELECT drop_state('dmg');
DROP TABLE dmg;
SELECT drop_state('odd'), drop_state('visits'), drop_state('clicks');
DROP TABLE clicks, visits, odd;
