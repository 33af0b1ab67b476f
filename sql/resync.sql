-- ptf.resync(uid): a change stream that stopped at a change it cannot
-- complete goes on from its tables as they are, keeping its state: its
-- next call reads their rows, says the net effect on the state (the
-- changes in between are not read one by one), then goes on with the
-- changes after them -- nothing lost, nothing twice.
CREATE SCHEMA rs;
SET search_path = rs, ptf;

-- to_changelog keeping an image per key (REPLICA IDENTITY DEFAULT): an
-- update that leaves a TOASTed value unchanged, of a row the stream never
-- saw, cannot be completed, and the stream stops there
CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO docs VALUES (1, 'a', repeat('x', 5000)), (2, 'b', 'short');
SELECT count(*) FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
INSERT INTO docs VALUES (4, 'd', 'seen');
SELECT op, (data).id, (data).title FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
UPDATE docs SET title = 'a2' WHERE id = 1;
INSERT INTO docs VALUES (3, 'c', 'new');
DELETE FROM docs WHERE id = 4;
UPDATE docs SET title = 'b2' WHERE id = 2;
\set VERBOSITY terse
SELECT op, (data).id FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
SELECT op, (data).id FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
\set VERBOSITY default
-- the way on
SELECT resync('docs');
-- the net effect: rows 1, 2 and 3 as they are (new keys: inserts, read from
-- the table, so without lsn), row 4 deleted (it was kept, and is gone)
SELECT op, (data).id, (data).title, length((data).body) AS body, lsn IS NULL AS from_table
  FROM to_changelog(NULL::docs, changes => true, uid => 'docs')
 ORDER BY (data).id;
-- then the stream goes on: the images are kept now, updates complete
UPDATE docs SET title = 'a3' WHERE id = 1;
DELETE FROM docs WHERE id = 3;
SELECT op, (data).id, (data).title, length((data).body) AS body
  FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
-- resync again with nothing changed: nothing to say
SELECT resync('docs');
SELECT count(*) FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
-- ... and with changes both before and after the rows are read
SELECT resync('docs');
UPDATE docs SET title = 'b3' WHERE id = 2;
INSERT INTO docs VALUES (5, 'e', 'five');
SELECT op, (data).id, (data).title FROM to_changelog(NULL::docs, changes => true, uid => 'docs')
 ORDER BY (data).id, op = 'UPDATE_AFTER';
UPDATE docs SET title = 'e2' WHERE id = 5;
SELECT op, (data).id, (data).title FROM to_changelog(NULL::docs, changes => true, uid => 'docs');
SELECT keys FROM state WHERE uid = 'docs';

-- keep-first by arrival: a key first seen in an update that cannot be
-- completed; resynchronized, its row as it is is its first row
CREATE TABLE posts (id int PRIMARY KEY, title text, body text);
ALTER TABLE posts ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO posts VALUES (1, 'p', repeat('y', 5000));
SELECT count(*) FROM deduplicate_keep_first(NULL::posts, partition_by => '{id}', changes => true, uid => 'posts');
UPDATE posts SET title = 'p2' WHERE id = 1;
INSERT INTO posts VALUES (2, 'q', 'short');
\set VERBOSITY terse
SELECT id FROM deduplicate_keep_first(NULL::posts, partition_by => '{id}', changes => true, uid => 'posts');
\set VERBOSITY default
SELECT resync('posts');
SELECT id, title, length(body) AS body FROM deduplicate_keep_first(NULL::posts, partition_by => '{id}',
    changes => true, uid => 'posts') ORDER BY id;
UPDATE posts SET title = 'p3' WHERE id = 1;
INSERT INTO posts VALUES (3, 'r', 'x');
SELECT id FROM deduplicate_keep_first(NULL::posts, partition_by => '{id}', changes => true, uid => 'posts');

-- what cannot be resynchronized says so, naming the way out
SELECT resync('nobody');
SELECT resync(NULL);
SELECT count(*) FROM deduplicate_keep_first(NULL::posts, partition_by => '{id}', uid => 'no-stream');
SELECT resync('no-stream');
CREATE TABLE ev (id int PRIMARY KEY, ts timestamptz);
SELECT count(*) FROM deduplicate_keep_first(NULL::ev, partition_by => '{id}', on_time => 'ts',
    watermark_delay => interval '1 minute', changes => true, uid => 'by-time');
SELECT resync('by-time');
-- to_changelog keeping no images (no update-before rows, no whole deletes asked for)
SELECT count(*) FROM to_changelog(NULL::ev, op_mapping => '{"INSERT": "c", "UPDATE_AFTER": "u"}',
    changes => true, uid => 'no-images');
SELECT resync('no-images');
-- another role's uid: refused, naming nothing of it
CREATE ROLE rs_other;
SET ROLE rs_other;
SELECT ptf.resync('docs');
RESET ROLE;
DROP ROLE rs_other;

SELECT count(*) FILTER (WHERE drop_state(uid)) AS dropped FROM state;
DROP SCHEMA rs CASCADE;
