-- Pipeline workers are woken at commit by the transactions that wrote their
-- tables, told by PostgreSQL's pending statistics entries, an internal
-- layout (src/worker/xact_writes.c).  If a release of PostgreSQL moves it,
-- these answers go wrong here first.
CREATE TABLE xw_a (i int);
CREATE TABLE xw_b (i int);
BEGIN;
SELECT ptf._xact_wrote_table('xw_a') AS a_before, ptf._xact_wrote_table('xw_b') AS b_before;
INSERT INTO xw_a VALUES (1);
SELECT ptf._xact_wrote_table('xw_a') AS a_inserted, ptf._xact_wrote_table('xw_b') AS b_untouched;
SAVEPOINT s;
UPDATE xw_b SET i = 2;       -- no row: not a write
SELECT ptf._xact_wrote_table('xw_b') AS b_updated_nothing;
INSERT INTO xw_b VALUES (1);
SELECT ptf._xact_wrote_table('xw_b') AS b_in_savepoint;
ROLLBACK TO s;
SELECT ptf._xact_wrote_table('xw_b') AS b_rolled_back, ptf._xact_wrote_table('xw_a') AS a_kept;
DELETE FROM xw_a;
TRUNCATE xw_b;
SELECT ptf._xact_wrote_table('xw_b') AS b_truncated;
COMMIT;
-- a new transaction has written nothing yet
SELECT ptf._xact_wrote_table('xw_a') AS a_after_commit;
-- it cannot tell without track_counts
SET track_counts = off;
SELECT ptf._xact_wrote_table('xw_a') IS NULL AS unknown_without_counts;
RESET track_counts;
-- not for everybody
CREATE ROLE regress_ptf_xw;
SET ROLE regress_ptf_xw;
SELECT ptf._xact_wrote_table('xw_a');
RESET ROLE;
DROP ROLE regress_ptf_xw;
DROP TABLE xw_a, xw_b;
