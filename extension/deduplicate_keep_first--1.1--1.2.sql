-- deduplicate_keep_first 1.1 -> 1.2 (ALTER EXTENSION deduplicate_keep_first UPDATE).
-- A fresh install of 1.2 runs 1.0's script and every update after it, so this
-- file is the only definition of what 1.2 changes.
\echo Use "ALTER EXTENSION deduplicate_keep_first UPDATE" to load this file. \quit

-- Pipeline workers keep their pipelines between rounds and load them again
-- only when the registry is written (as pg_cron keeps its jobs): the
-- registry's trigger now fires on every write, and invalidates the cache.
DROP TRIGGER wake_pipeline_worker ON ptf.pipeline_registry;
CREATE TRIGGER wake_pipeline_worker AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON ptf.pipeline_registry
    FOR EACH STATEMENT EXECUTE FUNCTION ptf._wake_pipeline_worker();
COMMENT ON FUNCTION ptf._wake_pipeline_worker() IS
    'Internal: trigger telling the pipeline workers that the registry changed, and asking for a worker when pipelines are restored';

-- What wakes pipeline workers at commit reads PostgreSQL's internal
-- statistics layout; this lets a regression test check it on the server
-- it runs against (sql/xact_writes.sql).
CREATE FUNCTION ptf._xact_wrote_table(regclass) RETURNS boolean
AS 'MODULE_PATHNAME', 'ptf_xact_wrote_table_sql'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._xact_wrote_table(regclass) IS
    'Internal: whether a live part of the current transaction wrote the table, as pipeline workers are woken by (NULL: cannot be told)';
REVOKE ALL ON FUNCTION ptf._xact_wrote_table(regclass) FROM PUBLIC;

-- ptf.last_call_stats() says how many parallel workers a one-shot call was
-- planned and got (engine/parallel.c); 0 and 0 for a call run in one process.
DROP FUNCTION ptf.last_call_stats();
CREATE FUNCTION ptf.last_call_stats(
    OUT function text, OUT rows_in bigint, OUT rows_out bigint, OUT rows_late bigint,
    OUT keys bigint, OUT state_bytes bigint, OUT rows_spilled bigint, OUT spill_partitions int,
    OUT state_load text, OUT keys_probed bigint, OUT keys_loaded bigint, OUT keys_evicted bigint,
    OUT workers_planned int, OUT workers_launched int)
RETURNS record
AS 'MODULE_PATHNAME', 'ptf_last_call_stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf.last_call_stats() IS
    'What the last table-function call of this session did: rows, keys, state memory, spilling, how a uid''s state was read, parallel workers planned and launched';
