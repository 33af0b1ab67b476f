-- ptf.temporal_join: every bad argument fails with its SQLSTATE before a
-- single row is read.
CREATE SCHEMA tje;
SET search_path = tje, ptf;
-- the SQLSTATE and message of a statement's error
CREATE FUNCTION try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE TABLE o (id int, cur text, amount numeric, ts timestamptz, pt timestamptz);
CREATE TABLE r (cur text PRIMARY KEY, rate numeric, ts timestamptz, pt timestamptz);
CREATE TABLE r_int (cur int, rate numeric, ts timestamptz);
CREATE TABLE r_ts (cur text, rate numeric, ts timestamp);
INSERT INTO o VALUES (1, 'EUR', 10, '2024-01-02', '2024-01-02');
INSERT INTO r VALUES ('EUR', 1.1, '2024-01-01', '2024-01-01');

-- join types: RIGHT and FULL refused as Flink refuses them (0A000), others 22023
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', join_type => 'right')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', join_type => 'FULL OUTER')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', join_type => 'cross')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', join_type => NULL)$s$);
-- no equi key (0A000)
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', NULL)$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{}')$s$);
-- unknown key columns (42703)
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{currency}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', build_key => '{nope}')$s$);
-- as many key columns on both sides (22023), of the same types (42804)
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', build_key => '{cur,rate}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r_int, 'ts', 'ts', '{cur}')$s$);
-- time columns: missing (22004), unknown (42703), not time (42804), of two types (42804)
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, NULL, 'ts', '{cur}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', NULL, '{cur}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'order_time', 'ts', '{cur}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'rate', '{cur}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r_ts, 'ts', 'ts', '{cur}')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', proc_time => 'amount')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r_int, 'ts', 'ts', '{amount}', build_key => '{rate}', proc_time => 'pt')$s$);
-- condition: not boolean (42804), volatile (22023), a subquery (0A000),
-- unknown column (42703), not an expression (42601)
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.amount * build.rate')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'random() < build.rate')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.id IN (SELECT 1)')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.nope > 1')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'true FROM pg_class')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'true; SELECT 1')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'count(*) > 0')$s$);
-- an error's position is in the condition (shown as the query), not in the statement
SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.amount > build.nope');
SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.amount >');
-- system columns of either side (42703): the rows joined are the probe row and
-- a version kept in state, rows of no table (plain SQL would compare the
-- tables' own: 1 row here where the function would give 0)
SELECT count(*) FROM o JOIN r ON o.cur = r.cur AND r.tableoid = 'tje.r'::regclass AND o.ctid = '(0,1)';
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'build.tableoid = ''tje.r''::regclass')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.ctid = ''(0,1)''')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'build.xmin IS NOT NULL')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'probe.cmax::text <> build.xmax::text')$s$);
-- whole rows are rows of the types, and may be named
SELECT (probe).id FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', condition => 'build IS NOT NULL AND probe.amount > 0');
-- a (kind, data) probe query: the probe side is insert-only (0A000)
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}',
    probe_query => $q$SELECT '+I', o FROM tje.o$q$)$s$);
-- a build query may be one
SELECT (probe).id, (build).rate FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}',
    build_query => $$SELECT '+I', r FROM tje.r$$);
-- inputs: changes without uid (22023), with a query (22023), a negative TTL
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', changes => true)$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', changes => true, uid => 'x',
    build_query => 'SELECT * FROM tje.r')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', state_ttl => '-1 s')$s$);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, 1, 'ts', 'ts', '{cur}')$s$);
-- the build side's change stream must log deleted rows' build_time (55000):
-- FULL, an identity with build_time, or the build key as primary key
-- (sql/upsert_sources.sql); a surrogate key names no row's time
CREATE TABLE r_default (id int PRIMARY KEY, cur text, rate numeric, ts timestamptz);
SELECT try($s$SELECT * FROM temporal_join(NULL::o, NULL::r_default, 'ts', 'ts', '{cur}', changes => true, uid => 'y')$s$);
-- a uid keeps its join (the order waits for the rates' watermark);
-- another join type is another state (22023)
SELECT count(*) FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', uid => 'tje');
SELECT try($s$SELECT count(*) FROM temporal_join(NULL::o, NULL::r, 'ts', 'ts', '{cur}', uid => 'tje', join_type => 'left')$s$);
SELECT drop_state('tje');
-- nothing was left behind by the failed calls
SELECT count(*) FROM state WHERE uid IN ('x', 'y');
DROP SCHEMA tje CASCADE;
