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

-- A uid reading an upsert source (window_aggregate over a table under
-- REPLICA IDENTITY DEFAULT) keeps the last row of each primary key in a
-- second state table, ptf.state_<n>_images (state/images_table.c): its
-- bytes are the uid's too.
CREATE OR REPLACE VIEW ptf.state WITH (security_barrier) AS
SELECT r.uid,
       r.function,
       r.owner,
       r.row_type,
       r.key_columns AS partition_by,
       r.on_time,
       r.keys,
       pg_catalog.pg_total_relation_size(r.state_table)
         OPERATOR(pg_catalog.+) COALESCE(pg_catalog.pg_total_relation_size(i.oid), 0) AS bytes,
       ptf._time_text(r.watermark, r.time_type) AS watermark,
       r.last_lsn AS lsn,
       r.slot_name,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn) AS retained_wal_bytes,
       r.rows_in,
       r.rows_out,
       r.rows_late,
       r.rows_skipped,
       r.state_table,
       r.created_at,
       r.updated_at,
       ptf._state_expired(r.state_table, false) AS expired_keys,
       ptf._state_expired(r.state_table, true) AS expired_bytes
  FROM ptf.uid_registry r
  LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name OPERATOR(pg_catalog.=) r.slot_name
        AND s.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
  LEFT JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) r.state_table
  LEFT JOIN pg_catalog.pg_class i ON i.relnamespace OPERATOR(pg_catalog.=) t.relnamespace
        AND i.relname OPERATOR(pg_catalog.=) (t.relname OPERATOR(pg_catalog.||) '_images')::pg_catalog.name
 WHERE pg_catalog.pg_has_role(r.owner, 'USAGE');

-- REASSIGN OWNED hands a role's streams over (commands/drops.c): a change
-- made before the hand-over is read with the rights of the owner it had
-- then.  handover_roles[i] judges the changes committed before transaction
-- handover_xids[i] (the REASSIGN's) commits; entries go once the stream
-- has passed it (state/registry.c, input/change_stream.c).
ALTER TABLE ptf.uid_registry
    ADD COLUMN handover_roles oid[],
    ADD COLUMN handover_xids xid8[];
