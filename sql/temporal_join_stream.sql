-- ptf.temporal_join over both tables' change streams under one uid: rows
-- of both sides interleaved in commit order, probe rows fired when the
-- join watermark (the least of the two sides') passes them.  The operator
-- test's cases step by step (doc/flink-semantics.md §7.3, §7.4), checked by hand.
--
-- Flink's test harness sets each side's watermark at will.  Here a side's
-- watermark is its greatest event time less 100 ms, the rows of the
-- cases are below 100, and a row of key 'wm' at 100 + W moves a side's
-- watermark to exactly W (its own rows never fire: they wait at 100 + W).

CREATE SCHEMA tjs;
SET search_path = tjs, ptf;

CREATE TABLE l (t bigint, k text, v text);
CREATE TABLE r (t bigint, k text PRIMARY KEY, v text);
-- a deletion of a version carries its time: whole old images
ALTER TABLE r REPLICA IDENTITY FULL;
ALTER TABLE l REPLICA IDENTITY FULL;

CREATE PROCEDURE wm(probe_wm bigint, build_wm bigint) LANGUAGE sql AS $$
    INSERT INTO tjs.l VALUES (100 + probe_wm, 'wm', 'wm');
    INSERT INTO tjs.r VALUES (100 + build_wm, 'wm', 'wm')
        ON CONFLICT (k) DO UPDATE SET t = EXCLUDED.t;
$$;

-- what a step of the uid emits, ordered by probe time
CREATE FUNCTION fire(uid text, join_type text)
RETURNS TABLE (lt bigint, lk text, lv text, rt bigint, rk text, rv text)
LANGUAGE sql AS $$
    SELECT (probe).t, (probe).k, (probe).v, (build).t, (build).k, (build).v
      FROM ptf.temporal_join(NULL::tjs.l, NULL::tjs.r, probe_time => 't', build_time => 't',
                             probe_key => '{k}', join_type => join_type, uid => uid,
                             changes => true, watermark_delay => '100 milliseconds')
     ORDER BY 1, 2
$$;

-- the first calls make the uids' slots
SELECT * FROM fire('inner', 'inner');
SELECT * FROM fire('left', 'left');

-- ---- the main case ----
CALL wm(0, 0);
INSERT INTO l VALUES (1, 'k1', '1a1');
INSERT INTO r VALUES (2, 'k1', '1a2');
CALL wm(2, 2);
-- join watermark 2: L(1) finds no version at or below 1; LEFT pads it
SELECT * FROM fire('inner', 'inner');
SELECT * FROM fire('left', 'left');

INSERT INTO l VALUES (3, 'k1', '1a3');
INSERT INTO r VALUES (4, 'k2', '2a4');
CALL wm(5, 5);
-- join watermark 5: L(3) takes the version at 2
SELECT * FROM fire('inner', 'inner');
SELECT * FROM fire('left', 'left');

INSERT INTO l VALUES (6, 'k2', '2a3');
UPDATE r SET t = 7, v = '2a5' WHERE k = 'k2';   -- -U ignored, +U at 7
CALL wm(8, 9);
-- join watermark 8 (probe 8, build 9): L(6) takes the version at 4; then
-- the versions of k2 at or below 8 but the newest go: 4 is dropped, 7 kept
SELECT * FROM fire('inner', 'inner');
SELECT * FROM fire('left', 'left');

INSERT INTO l VALUES (9, 'k2', '5a11'), (11, 'k2', '5a12');
-- a deletion at 9: the row moves to 9, then goes (the -D replaces the +U at 9)
UPDATE r SET t = 9 WHERE k = 'k2';
DELETE FROM r WHERE k = 'k2';
INSERT INTO r VALUES (10, 'k2', '2a6');
INSERT INTO l VALUES (113, 'wm', 'wm');
-- probe watermark 13, build 9: join watermark 9.  L(9) finds the deletion
-- at 9: absent (LEFT pads it); L(11) waits
SELECT * FROM fire('inner', 'inner');
SELECT * FROM fire('left', 'left');
UPDATE r SET t = 113 WHERE k = 'wm';
-- build watermark 13: L(11) takes the version at 10
SELECT * FROM fire('inner', 'inner');
SELECT * FROM fire('left', 'left');
SELECT uid, rows_in, rows_out, rows_late, rows_skipped FROM state WHERE uid IN ('inner', 'left') ORDER BY uid;
SELECT drop_state('inner'), drop_state('left');

-- ---- late rows (FLINK-39719) ----
TRUNCATE l, r;
SELECT * FROM fire('late', 'left');
CALL wm(1, 1);
INSERT INTO r VALUES (2, 'k1', '2a2');
INSERT INTO l VALUES (3, 'k1', '1a3');
CALL wm(5, 5);
SELECT * FROM fire('late', 'left');
-- at or below the join watermark 5: dropped and counted, even for LEFT
INSERT INTO l VALUES (5, 'k1', '1a5'), (4, 'k1', '1a4'), (1, 'k1', '1a1');
INSERT INTO l VALUES (7, 'k1', '1a7');
CALL wm(8, 8);
SELECT * FROM fire('late', 'left');
INSERT INTO l VALUES (10, 'k2', '1a10');
CALL wm(11, 11);
SELECT * FROM fire('late', 'left');
INSERT INTO l VALUES (13, 'k2', '1a13');
-- a late build row: a version all the same, for rows not emitted yet
INSERT INTO r VALUES (9, 'k2', '2a9');
-- the probe side is insert-only: its deletes and updates are passed over
DELETE FROM l WHERE t = 10;
CALL wm(13, 13);
-- L(13) takes the late version at 9
SELECT * FROM fire('late', 'left');
DELETE FROM l WHERE t = 13;
UPDATE l SET v = 'changed' WHERE t = 7;
CALL wm(15, 15);
SELECT * FROM fire('late', 'left');
-- late: 3 probe rows dropped, 1 build row kept; skipped: 2 deletes, 1 update
SELECT rows_late, rows_skipped, rows_out FROM state WHERE uid = 'late';
SELECT drop_state('late');

-- ---- idle-state TTL, the seed's scheme, on a proc_time column ----
-- retention 4 ms: cleaning on (above 1 ms), deadlines 6 ms after a touch,
-- moved only when a touch comes less than 4 ms before the deadline
CREATE TABLE lp (t bigint, k text, v text, pt bigint);
CREATE TABLE rp (t bigint, k text PRIMARY KEY, v text, pt bigint);
ALTER TABLE rp REPLICA IDENTITY FULL;
CREATE PROCEDURE wmp(probe_wm bigint, build_wm bigint, pt bigint) LANGUAGE sql AS $$
    INSERT INTO tjs.lp VALUES (100 + probe_wm, 'wm', 'wm', pt);
    INSERT INTO tjs.rp VALUES (100 + build_wm, 'wm', 'wm', pt)
        ON CONFLICT (k) DO UPDATE SET t = EXCLUDED.t, pt = EXCLUDED.pt;
$$;
CREATE FUNCTION firep(uid text, ttl interval)
RETURNS TABLE (lt bigint, lk text, lv text, rt bigint, rk text, rv text)
LANGUAGE sql AS $$
    SELECT (probe).t, (probe).k, (probe).v, (build).t, (build).k, (build).v
      FROM ptf.temporal_join(NULL::tjs.lp, NULL::tjs.rp, probe_time => 't', build_time => 't',
                             probe_key => '{k}', join_type => 'left', uid => uid, state_ttl => ttl,
                             changes => true, watermark_delay => '100 milliseconds',
                             proc_time => 'pt')
     WHERE (probe).k <> 'wm'
     ORDER BY 1, 2
$$;
SELECT * FROM firep('ttl', '4 ms');
SELECT * FROM firep('no_ttl', NULL);
INSERT INTO rp VALUES (3, 'k1', '0a3', 3);      -- proc 3: deadline 9
INSERT INTO lp VALUES (6, 'k1', '0a6', 6);      -- proc 6: 6 + 4 > 9, deadline 12
CALL wmp(7, 7, 6);                              -- fires at proc 6: 6 + 4 <= 12, kept
UPDATE rp SET v = '0a5', pt = 6 WHERE k = 'k1'; -- +U at 3 replaces the version at 3 (late, kept)
SELECT * FROM firep('ttl', '4 ms');
INSERT INTO lp VALUES (9, 'k1', '7a9', 9);      -- proc 9: 9 + 4 > 12, deadline 15
CALL wmp(13, 13, 9);                            -- fires at proc 9: 9 + 4 <= 15, kept
SELECT * FROM firep('ttl', '4 ms');
-- proc 15 reaches the deadline before the row is read: k1's versions and
-- probes are dropped silently; L(15) starts the key anew (deadline 21)
INSERT INTO lp VALUES (15, 'k1', '13a15', 15);
CALL wmp(15, 16, 15);
-- join watermark 15: L(15) finds no version any more: padded
SELECT * FROM firep('ttl', '4 ms');
-- without a TTL the version at 3 is still there
SELECT * FROM firep('no_ttl', NULL);
-- k1 is gone once nothing of it is left (no leak of empty keys)
SELECT uid, keys, rows_late FROM state WHERE uid IN ('ttl', 'no_ttl') ORDER BY uid;
SELECT drop_state('ttl'), drop_state('no_ttl');
-- a call that reads no row of the join's tables (a probe delete, passed
-- over) takes no processing time from the clock: its deadlines are in the
-- column's units, none due (the clock's time dropped every key)
CREATE TABLE lq (t bigint, k text, v text, pt bigint);
ALTER TABLE lq REPLICA IDENTITY FULL;
CREATE TABLE rq (t bigint, k text PRIMARY KEY, v text, pt bigint);
ALTER TABLE rq REPLICA IDENTITY FULL;
INSERT INTO lq VALUES (0, 'old', 'old', 0);
CREATE FUNCTION fireq(uid text)
RETURNS TABLE (lt bigint, lk text, rt bigint, rv text)
LANGUAGE sql AS $$
    SELECT (probe).t, (probe).k, (build).t, (build).v
      FROM ptf.temporal_join(NULL::tjs.lq, NULL::tjs.rq, probe_time => 't', build_time => 't',
                             probe_key => '{k}', join_type => 'left', uid => uid,
                             state_ttl => '1 hour', changes => true,
                             watermark_delay => '0', proc_time => 'pt')
$$;
SELECT * FROM fireq('quiet');
INSERT INTO rq VALUES (1, 'k1', 'r1', 1);
INSERT INTO lq VALUES (2, 'k1', 'l2', 1);
SELECT * FROM fireq('quiet');
DELETE FROM lq WHERE k = 'old';
SELECT * FROM fireq('quiet');
INSERT INTO rq VALUES (3, 'k2', 'r3', 2);
SELECT * FROM fireq('quiet');
SELECT drop_state('quiet');

-- ---- what an old image names: deletions and updates that move a row ----
-- A deletion is a version at the deleted row's time; an UPDATE that
-- changes the build key is, for the old key, a deletion at the old row's
-- time (as Debezium emits a key change: a delete, then an insert), for
-- the new key a version.  Under three replica identities of the build
-- side: FULL (rf), an index with key and time (ri: the old image carries
-- both), the primary key that is the build key (ru, an upsert source:
-- only the key, its last row's time kept by the join).
CREATE TABLE lm (t bigint, k text, v text);
ALTER TABLE lm REPLICA IDENTITY FULL;
CREATE TABLE rf (t bigint NOT NULL, k text PRIMARY KEY, v text);
ALTER TABLE rf REPLICA IDENTITY FULL;
CREATE TABLE ri (t bigint NOT NULL, k text NOT NULL, v text);
CREATE UNIQUE INDEX ri_kt ON ri (k, t);
ALTER TABLE ri REPLICA IDENTITY USING INDEX ri_kt;
CREATE TABLE ru (t bigint NOT NULL, k text PRIMARY KEY, v text);
CREATE FUNCTION firem(uid text, build text)
RETURNS TABLE (lt bigint, lk text, lv text, rt bigint, rk text, rv text)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT (probe).t, (probe).k, (probe).v, (build).t, (build).k, (build).v
           FROM ptf.temporal_join(NULL::tjs.lm, NULL::tjs.%I, probe_time => ''t'',
                                  build_time => ''t'', probe_key => ''{k}'', join_type => ''left'',
                                  uid => $1, changes => true,
                                  watermark_delay => ''100 milliseconds'')
          WHERE (probe).k <> ''wm'' ORDER BY 1, 2', build) USING uid;
END $$;
CREATE PROCEDURE moves(build text) LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('INSERT INTO tjs.%I VALUES (100, ''wm'', ''wm'')', build);
    EXECUTE format('INSERT INTO tjs.%I VALUES (2, ''a'', ''a2''), (3, ''b'', ''b3''), (4, ''s'', ''s4'')', build);
    EXECUTE format('DELETE FROM tjs.%I WHERE k = ''b''', build);
    EXECUTE format('UPDATE tjs.%I SET k = ''c'', t = 6, v = ''c6'' WHERE k = ''a''', build);
    EXECUTE format('UPDATE tjs.%I SET t = 5, v = ''s5'' WHERE k = ''s''', build);
    EXECUTE format('UPDATE tjs.%I SET t = 110 WHERE k = ''wm''', build);
END $$;
SELECT * FROM firem('moves_full', 'rf');
SELECT * FROM firem('moves_index', 'ri');
SELECT * FROM firem('moves_upsert', 'ru');
CALL moves('rf');
CALL moves('ri');
CALL moves('ru');
INSERT INTO lm VALUES (4, 'a', 'pa4'), (4, 'b', 'pb4'), (4, 's', 'ps4'), (5, 's', 'ps5'),
    (7, 'c', 'pc7'), (110, 'wm', 'wm');
-- each: a is absent from 2 (it moved to c), b from 3 (deleted); s has its
-- version at 4 until 5 (an update within a key); c its version from 6
SELECT * FROM firem('moves_full', 'rf');
SELECT * FROM firem('moves_index', 'ri');
SELECT * FROM firem('moves_upsert', 'ru');
SELECT uid, rows_late, rows_skipped FROM state WHERE uid LIKE 'moves%' ORDER BY uid;
SELECT drop_state('moves_full'), drop_state('moves_index'), drop_state('moves_upsert');
-- an identity without the key cannot say which key a deletion is of
CREATE TABLE rt (t bigint NOT NULL, k text, v text);
CREATE UNIQUE INDEX rt_t ON rt (t);
ALTER TABLE rt REPLICA IDENTITY USING INDEX rt_t;
\set VERBOSITY sqlstate
SELECT * FROM firem('time_only', 'rt');
\set VERBOSITY default
SELECT * FROM firem('time_only', 'rt');

DROP SCHEMA tjs CASCADE;
