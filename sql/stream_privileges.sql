-- Change streams hold replication slots, a server-wide resource: who may
-- start one, how many a role may have, and that they go with their owner,
-- the extension and the database (issue 12, items 1, 9 and 10).
CREATE SCHEMA sp;
SET search_path = sp, ptf;
CREATE TABLE events (id int PRIMARY KEY, k text);
CREATE TABLE firsts (id int, k text);
CREATE ROLE regress_ptf_plain;
CREATE ROLE regress_ptf_streamer;
GRANT USAGE ON SCHEMA sp TO regress_ptf_plain, regress_ptf_streamer;
GRANT SELECT ON events TO regress_ptf_plain, regress_ptf_streamer;
GRANT INSERT ON firsts TO regress_ptf_plain, regress_ptf_streamer;

-- the slot a uid's first call makes, and how many there are of it
CREATE FUNCTION slots_of(uid text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_catalog.pg_replication_slots
     WHERE slot_name = 'ptf_' || (SELECT oid FROM pg_database WHERE datname = current_database())
                       || '_' || left(md5(uid), 20)
$$;

-- the extension makes a role for it, which cannot log in
SELECT rolname, rolcanlogin, rolreplication, rolsuper FROM pg_roles WHERE rolname = 'ptf_stream';

-- ---- item 1: starting a stream needs superuser, REPLICATION or ptf_stream
SET ROLE regress_ptf_plain;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-plain');
SELECT create_pipeline('sp-plain-pipe', $$SELECT * FROM ptf.deduplicate_keep_first(
    NULL::sp.events, partition_by => '{k}', changes => true, uid => 'sp-plain-pipe')$$, 'firsts');
-- reading the table without a stream is still allowed
SELECT count(*) FROM deduplicate_keep_first(NULL::events, partition_by => '{k}');
RESET ROLE;
-- refused before anything was made: no registry row, no slot
SELECT count(*) AS uids FROM uid_registry WHERE uid LIKE 'sp-plain%';
SELECT slots_of('sp-plain') + slots_of('sp-plain-pipe') AS slots;

-- the REPLICATION attribute is enough, as for pg_create_logical_replication_slot
ALTER ROLE regress_ptf_plain REPLICATION;
SET ROLE regress_ptf_plain;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-plain');
RESET ROLE;
ALTER ROLE regress_ptf_plain NOREPLICATION;
-- a stream once started goes on without it; only starting one is guarded
INSERT INTO events VALUES (1, 'a');
SET ROLE regress_ptf_plain;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-plain');
SELECT drop_state('sp-plain');
RESET ROLE;

-- ---- the cap: ptf.max_streams_per_role, counted per role in this database
SHOW ptf.max_streams_per_role;
GRANT ptf_stream TO regress_ptf_streamer;
SET ptf.max_streams_per_role = 2;
SET ROLE regress_ptf_streamer;
SET ptf.max_streams_per_role = 100;         -- only a superuser may raise it
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-a');
-- a first call that rolls back leaves no slot and does not count
BEGIN;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-rolled-back');
ROLLBACK;
SELECT slots_of('sp-rolled-back') AS slots;
SELECT create_pipeline('sp-pipe', $$SELECT * FROM ptf.deduplicate_keep_first(
    NULL::sp.events, partition_by => '{k}', changes => true, uid => 'sp-pipe')$$, 'firsts');
-- a third is refused, a uid or a pipeline alike, with nothing made
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-c');
SELECT create_pipeline('sp-pipe2', $$SELECT * FROM ptf.deduplicate_keep_first(
    NULL::sp.events, partition_by => '{k}', changes => true, uid => 'sp-pipe2')$$, 'firsts');
SELECT slots_of('sp-c') + slots_of('sp-pipe2') AS slots;
-- a drop that rolls back leaves the streams whole: their slots go only when it commits
BEGIN;
SELECT drop_pipeline('sp-pipe'), drop_state('sp-a');
ROLLBACK;
SELECT slots_of('sp-pipe') + slots_of('sp-a') AS slots;
-- the streams it has go on
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-a');
RESET ROLE;
-- a superuser is not counted
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-super');
SELECT drop_state('sp-super');
-- -1: no cap
SET ptf.max_streams_per_role = -1;
SET ROLE regress_ptf_streamer;
SELECT * FROM deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-c');
RESET ROLE;
RESET ptf.max_streams_per_role;
-- ptf.state shows the WAL each stream holds back
INSERT INTO events VALUES (2, 'b');
SELECT uid, owner, slot_name IS NOT NULL AS has_slot, retained_wal_bytes > 0 AS retains_wal
  FROM state WHERE uid LIKE 'sp-%' ORDER BY uid;

-- ---- item 9: a role's uids and pipelines go with DROP OWNED BY
SELECT id AS pipe_id FROM pipeline_registry WHERE name = 'sp-pipe' \gset
SELECT 'ptf_pipeline_' || (SELECT oid FROM pg_database WHERE datname = current_database())
       || '_' || :pipe_id AS pipe_origin \gset
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname = :'pipe_origin';
-- DROP ROLE refuses while they exist, as for objects it owns
REVOKE ALL ON events, firsts FROM regress_ptf_streamer;
REVOKE USAGE ON SCHEMA sp FROM regress_ptf_streamer;
DROP ROLE regress_ptf_streamer;
-- a DROP OWNED that rolls back leaves every stream whole
BEGIN;
DROP OWNED BY regress_ptf_streamer;
SELECT count(*) AS uids FROM uid_registry WHERE owner = 'regress_ptf_streamer'::regrole;
ROLLBACK;
SELECT slots_of('sp-a') + slots_of('sp-c') + slots_of('sp-pipe') AS slots;
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname = :'pipe_origin';
-- committed, it takes the uids, the pipeline, their slots and origin
DROP OWNED BY regress_ptf_streamer;
SELECT count(*) AS uids FROM uid_registry WHERE uid LIKE 'sp-%';
SELECT count(*) AS pipelines FROM pipeline_registry WHERE name LIKE 'sp-%';
SELECT slots_of('sp-a') + slots_of('sp-c') + slots_of('sp-pipe') AS slots;
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname = :'pipe_origin';
DROP ROLE regress_ptf_streamer;
-- a role that is not a superuser drops its own, with what it owns
CREATE ROLE regress_ptf_own;
GRANT ptf_stream TO regress_ptf_own;
CREATE SCHEMA sp_own AUTHORIZATION regress_ptf_own;
SET ROLE regress_ptf_own;
CREATE TABLE sp_own.t (id int PRIMARY KEY);
SELECT * FROM ptf.to_changelog(NULL::sp_own.t, changes => true, uid => 'sp-own');
DROP OWNED BY regress_ptf_own;
SELECT count(*) AS uids FROM ptf.state WHERE uid = 'sp-own';
RESET ROLE;
SELECT count(*) AS uids FROM uid_registry WHERE uid = 'sp-own';
SELECT slots_of('sp-own') AS slots;
DROP ROLE regress_ptf_own;
-- REASSIGN OWNED gives them to another role, which keeps them
CREATE ROLE regress_ptf_old;
CREATE ROLE regress_ptf_new;
GRANT ptf_stream TO regress_ptf_old;
CREATE SCHEMA sp_old AUTHORIZATION regress_ptf_old;
SET ROLE regress_ptf_old;
CREATE TABLE sp_old.t (id int PRIMARY KEY);
CREATE TABLE sp_old.sink (id int);
SELECT * FROM ptf.to_changelog(NULL::sp_old.t, changes => true, uid => 'sp-old');
SELECT ptf.create_pipeline('sp-old-pipe', $$SELECT * FROM ptf.deduplicate_keep_first(
    NULL::sp_old.t, changes => true, uid => 'sp-old-pipe')$$, 'sp_old.sink');
RESET ROLE;
REASSIGN OWNED BY regress_ptf_old TO regress_ptf_new;
DROP OWNED BY regress_ptf_old;
DROP ROLE regress_ptf_old;
SELECT uid, owner FROM ptf.state WHERE uid LIKE 'sp-old%' ORDER BY uid;
SELECT name, owner FROM ptf.pipelines WHERE name = 'sp-old-pipe';
SELECT slots_of('sp-old') + slots_of('sp-old-pipe') AS slots;
DROP OWNED BY regress_ptf_new;
SELECT slots_of('sp-old') + slots_of('sp-old-pipe') AS slots;
DROP ROLE regress_ptf_new;

-- ---- item 10: DROP EXTENSION and DROP DATABASE leave no slot or origin
CREATE DATABASE regress_ptf_sp;
SELECT oid AS sp_db FROM pg_database WHERE datname = 'regress_ptf_sp' \gset
\c regress_ptf_sp
SET client_min_messages = warning;
CREATE EXTENSION deduplicate_keep_first;
RESET client_min_messages;
CREATE TABLE events (id int PRIMARY KEY, k text);
CREATE TABLE firsts (id int, k text);
SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{k}',
    changes => true, uid => 'sp-ext');
SELECT ptf.create_pipeline('sp-ext-pipe', $$SELECT * FROM ptf.deduplicate_keep_first(
    NULL::events, partition_by => '{k}', changes => true, uid => 'sp-ext-pipe')$$, 'firsts');
CREATE VIEW needs_ptf AS SELECT * FROM ptf.state;
SELECT count(*) AS slots FROM pg_replication_slots WHERE database = current_database();
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname LIKE 'ptf\_pipeline\_' || :sp_db || '\_%';
-- a DROP EXTENSION that fails leaves the streams whole
DROP EXTENSION deduplicate_keep_first;
SELECT count(*) AS slots FROM pg_replication_slots WHERE database = current_database();
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname LIKE 'ptf\_pipeline\_' || :sp_db || '\_%';
SET client_min_messages = warning;
DROP EXTENSION deduplicate_keep_first CASCADE;
RESET client_min_messages;
SELECT count(*) AS slots FROM pg_replication_slots WHERE database = current_database();
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname LIKE 'ptf\_pipeline\_' || :sp_db || '\_%';
-- again, then the database is dropped under its pipeline
SET client_min_messages = warning;
CREATE EXTENSION deduplicate_keep_first;
RESET client_min_messages;
SELECT ptf.create_pipeline('sp-db-pipe', $$SELECT * FROM ptf.deduplicate_keep_first(
    NULL::events, partition_by => '{k}', changes => true, uid => 'sp-db-pipe')$$, 'firsts');
-- a DROP DATABASE that fails stops nothing: the pipeline goes on
\c contrib_regression
BEGIN;
DROP DATABASE regress_ptf_sp WITH (FORCE);
ROLLBACK;
\c regress_ptf_sp
INSERT INTO events VALUES (1, 'a');
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN (SELECT count(*) FROM firsts) > 0;
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SELECT count(*) AS written_by_the_pipeline FROM firsts;
\c contrib_regression
DROP DATABASE regress_ptf_sp WITH (FORCE);
SELECT count(*) AS origins FROM pg_replication_origin WHERE roname LIKE 'ptf\_pipeline\_' || :sp_db || '\_%';
SELECT count(*) AS slots FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_' || :sp_db || '\_%';

SET search_path = sp, ptf;
REVOKE ALL ON events, firsts FROM regress_ptf_plain;
REVOKE USAGE ON SCHEMA sp FROM regress_ptf_plain;
DROP ROLE regress_ptf_plain;
DROP SCHEMA sp CASCADE;
