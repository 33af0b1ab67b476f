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

-- Rows put in the registry otherwise than by create_pipeline -- a restore,
-- which loads them before the uids' state and the tables' rows -- come
-- paused (functions/pipelines.c), as pg_dump restores subscriptions
-- disabled: ptf.resume_pipeline once the restore is complete.
CREATE FUNCTION ptf._pipeline_restored() RETURNS trigger
AS 'MODULE_PATHNAME', 'ptf_pipeline_restored'
LANGUAGE C;
COMMENT ON FUNCTION ptf._pipeline_restored() IS
    'Internal: trigger pausing the pipelines put in the registry otherwise than by create_pipeline (a restore)';
CREATE TRIGGER pipeline_restored BEFORE INSERT ON ptf.pipeline_registry
    FOR EACH ROW EXECUTE FUNCTION ptf._pipeline_restored();

-- What wakes pipeline workers at commit reads PostgreSQL's internal
-- statistics layout; this lets a regression test check it on the server
-- it runs against (sql/xact_writes.sql).
CREATE FUNCTION ptf._xact_wrote_table(regclass) RETURNS boolean
AS 'MODULE_PATHNAME', 'ptf_xact_wrote_table_sql'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._xact_wrote_table(regclass) IS
    'Internal: whether a live part of the current transaction wrote the table, as pipeline workers are woken by (NULL: cannot be told)';
REVOKE ALL ON FUNCTION ptf._xact_wrote_table(regclass) FROM PUBLIC;

-- ptf.skip_transaction: a stream stopped for good at a change it cannot
-- read (a NULL event time, a row it cannot complete) passes over the
-- transaction whose commit record is at skip_lsn, as ALTER SUBSCRIPTION ...
-- SKIP does; the request goes once the stream has passed that position.
ALTER TABLE ptf.uid_registry ADD COLUMN skip_lsn pg_lsn;

CREATE FUNCTION ptf.skip_transaction(uid text, lsn pg_lsn) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_skip_transaction'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf.skip_transaction(text, pg_lsn) IS
    'The uid''s stream passes over the transaction whose commit record is at lsn (the "finished at" of an error''s context), unread';

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
       -- NULL on a standby (no WAL position of its own: the view must read there)
       CASE WHEN NOT pg_catalog.pg_is_in_recovery()
            THEN pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn)
       END AS retained_wal_bytes,
       r.rows_in,
       r.rows_out,
       r.rows_late,
       r.rows_skipped,
       r.state_table,
       r.created_at,
       r.updated_at,
       ptf._state_expired(r.state_table, false) AS expired_keys,
       ptf._state_expired(r.state_table, true) AS expired_bytes,
       r.skip_lsn
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

-------------------------------------------------------------------------------
-- Flink's SQL as written (planner/): a window TVF + GROUP BY is planned as the
-- sliced window aggregate, row_number() over its windows as Window Top-N.
-------------------------------------------------------------------------------

-- The TVFs take the watermark of a planned query over their change stream:
-- a new last argument, watermark_delay (a new signature: views calling the
-- TVFs must be dropped before the update and made again after it).
DROP FUNCTION ptf.tumble(anyelement, text, interval, interval, text, text, boolean, boolean);
DROP FUNCTION ptf.hop(anyelement, text, interval, interval, interval, text, text, boolean, boolean);
DROP FUNCTION ptf.cumulate(anyelement, text, interval, interval, interval, text, text, boolean, boolean);

CREATE FUNCTION ptf.tumble(
    input     anyelement,
    on_time   text,
    size      interval,
    "offset"  interval DEFAULT '0',
    uid       text     DEFAULT NULL,
    query     text     DEFAULT NULL,
    changes   boolean  DEFAULT false,
    snapshot  boolean  DEFAULT false,
    watermark_delay interval DEFAULT NULL)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_tumble'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.tumble(anyelement, text, interval, interval, text, text, boolean, boolean, interval) IS
    'Each row with its tumbling window [window_start, window_end) (Flink TUMBLE)';

CREATE FUNCTION ptf.hop(
    input     anyelement,
    on_time   text,
    slide     interval,
    size      interval,
    "offset"  interval DEFAULT '0',
    uid       text     DEFAULT NULL,
    query     text     DEFAULT NULL,
    changes   boolean  DEFAULT false,
    snapshot  boolean  DEFAULT false,
    watermark_delay interval DEFAULT NULL)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_hop'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.hop(anyelement, text, interval, interval, interval, text, text, boolean, boolean, interval) IS
    'Each row once per hopping window it falls in (Flink HOP)';

CREATE FUNCTION ptf.cumulate(
    input     anyelement,
    on_time   text,
    step      interval,
    size      interval,
    "offset"  interval DEFAULT '0',
    uid       text     DEFAULT NULL,
    query     text     DEFAULT NULL,
    changes   boolean  DEFAULT false,
    snapshot  boolean  DEFAULT false,
    watermark_delay interval DEFAULT NULL)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_cumulate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.cumulate(anyelement, text, interval, interval, interval, text, text, boolean, boolean, interval) IS
    'Each row once per cumulating window it falls in (Flink CUMULATE)';

-- The windows of a HOP or CUMULATE row, for calls the planner replaces by a
-- scan of their table (planner/tvf_inline.c).  Internal.
CREATE FUNCTION ptf._tvf_windows(time_value anyelement, kind integer, size_us bigint,
                                 step_us bigint, offset_us bigint, on_time text)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_tvf_windows'
LANGUAGE C STABLE PARALLEL SAFE ROWS 4;
COMMENT ON FUNCTION ptf._tvf_windows(anyelement, integer, bigint, bigint, bigint, text) IS
    'Internal: the HOP (kind 1) or CUMULATE (kind 2) windows holding a time';

-- A generic plan that groups a TVF's rows itself, its changes argument a
-- parameter, passes that argument through this: true (a change stream,
-- which PostgreSQL would group per call) is refused at execution as a
-- constant true is at planning (planner/planner.c).  Internal.
CREATE FUNCTION ptf._refuse_grouped_stream(changes boolean) RETURNS boolean
AS 'MODULE_PATHNAME', 'ptf_refuse_grouped_stream'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION ptf._refuse_grouped_stream(boolean) IS
    'Internal: a grouped window TVF''s changes argument, refused when true';

-- Window Top-N as a function: per window (and key), the first top_n rows
-- in the order of order_by, numbered; window deduplication is top_n 1.
CREATE FUNCTION ptf.window_top_n(
    input           anyelement,
    "window"        text,
    on_time         text,
    size            interval,
    step            interval DEFAULT NULL,
    "offset"        interval DEFAULT '0',
    partition_by    text[]   DEFAULT NULL,
    order_by        text     DEFAULT NULL,
    top_n           integer  DEFAULT 1,
    uid             text     DEFAULT NULL,
    query           text     DEFAULT NULL,
    changes         boolean  DEFAULT false,
    watermark_delay interval DEFAULT NULL,
    snapshot        boolean  DEFAULT false)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz, rownum bigint)
AS 'MODULE_PATHNAME', 'ptf_window_top_n'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.window_top_n(anyelement, text, text, interval, interval, interval, text[], text, integer, text, text, boolean, interval, boolean) IS
    'The first top_n rows of every window and key in an order (Flink Window Top-N, window deduplication)';

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

-------------------------------------------------------------------------------
-- Distributed pipelines (Citus).  ptf.create_pipeline on the coordinator over
-- a distributed table makes one pipeline per shard group, on the node that
-- holds the group (src/citus/).  The distributed pipelines themselves are
-- kept in Citus reference tables of schema ptf_citus, made by the first
-- such create_pipeline (they need Citus, which this script does not).
-- Nothing here needs Citus: without it these objects are unused.
-------------------------------------------------------------------------------

-- On every node: the shard pipelines running here.  A shard pipeline is an
-- ordinary pipeline of this database (ptf.pipeline_registry) over a shard
-- table, writing the co-located sink shard; this says which distributed
-- pipeline and shard group it is, and how far it has come.
CREATE TABLE ptf.citus_shard_pipelines (
    pipeline      int PRIMARY KEY REFERENCES ptf.pipeline_registry (id) ON DELETE CASCADE,
    dist_name     text NOT NULL,        -- the distributed pipeline (ptf_citus.pipelines.name)
    token         text NOT NULL,        -- of the create_pipeline or move that made it here
    shard         bigint NOT NULL,      -- the source shard it reads
    shards        bigint[] NOT NULL,    -- every shard of its group it reads or writes
    colocation_id int NOT NULL,         -- with shard_index: Citus's metadata lock of the group
    shard_index   int NOT NULL,
    status        text NOT NULL CHECK (status IN ('pending', 'active', 'incoming')),
    slot          text,                 -- incoming: the slot made for it before the move
    handoff_table regclass,             -- incoming: the state copied from the node it came from
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    UNIQUE (dist_name, shard)
);
COMMENT ON TABLE ptf.citus_shard_pipelines IS
    'Internal: the pipelines of this node that run shard groups of distributed (Citus) pipelines';
REVOKE ALL ON ptf.citus_shard_pipelines FROM PUBLIC;

-- Called by the coordinator on the node of a shard group (over Citus's
-- connections, as the calling role).
CREATE FUNCTION ptf._citus_shard_prepare(pipeline text, query text, sink text, sink_mode text,
                                         token text, shard bigint, incoming boolean)
RETURNS text
AS 'MODULE_PATHNAME', 'ptf_citus_shard_prepare'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._citus_shard_prepare(text, text, text, text, text, bigint, boolean) IS
    'Internal: start the stream of a distributed pipeline''s shard group on this node';

CREATE FUNCTION ptf._citus_shard_forget(pipeline text, shard bigint, token text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ptf_citus_shard_forget'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._citus_shard_forget(text, bigint, text) IS
    'Internal: drop a shard pipeline of this node that a failed create_pipeline or move left';

CREATE FUNCTION ptf._citus_handoff_export(pipeline text, shard bigint, token text)
RETURNS text
AS 'MODULE_PATHNAME', 'ptf_citus_handoff_export'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._citus_handoff_export(text, bigint, text) IS
    'Internal: a moved shard group''s pipeline state, caught up, for its new node';

CREATE FUNCTION ptf._citus_handoff_receive(pipeline text, shard bigint, token text, export text)
RETURNS text
AS 'MODULE_PATHNAME', 'ptf_citus_handoff_receive'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._citus_handoff_receive(text, bigint, text, text) IS
    'Internal: the new node of a moved shard group checks and prepares for its pipeline''s state';

CREATE FUNCTION ptf._citus_handoff_send(pipeline text, shard bigint, token text,
                                        target_table text, target_node int)
RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_handoff_send'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION ptf._citus_handoff_send(text, bigint, text, text, int) IS
    'Internal: copy a moved shard group''s pipeline state table to its new node';

CREATE FUNCTION ptf._citus_shard_status(
    OUT pipeline text, OUT shard bigint, OUT name text, OUT status text, OUT state text,
    OUT rows_in bigint, OUT rows_out bigint, OUT rows_late bigint, OUT rows_skipped bigint,
    OUT lag_bytes bigint, OUT lag_seconds double precision, OUT watermark text,
    OUT watermark_us bigint, OUT failures int, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ptf_citus_shard_status'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_shard_status() IS
    'Internal: the shard pipelines of this node, of roles the current user belongs to';

-- A shard pipeline writes only rows of its own shard: each output row's
-- distribution value must hash into the sink shard's range.
CREATE FUNCTION ptf._citus_row_in_shard(value anyelement, shard bigint, lo int, hi int)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ptf_citus_row_in_shard'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_row_in_shard(anyelement, bigint, int, int) IS
    'Internal: true when a value hashes into a shard''s range; an error otherwise';

-- On the coordinator: distributed pipelines and their shard groups.
CREATE FUNCTION ptf._distributed_shard_status(
    OUT pipeline text, OUT shard bigint, OUT node text, OUT port int, OUT state text,
    OUT rows_in bigint, OUT rows_out bigint, OUT rows_late bigint, OUT rows_skipped bigint,
    OUT lag_bytes bigint, OUT lag_seconds double precision, OUT watermark text,
    OUT watermark_us bigint, OUT failures int, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ptf_citus_distributed_status'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._distributed_shard_status() IS
    'Internal: the shard groups of the current user''s distributed pipelines, gathered from the nodes';

CREATE VIEW ptf.distributed_pipeline_shards AS
SELECT pipeline, shard, node, port, state, rows_in, rows_out, rows_late, rows_skipped,
       lag_bytes, lag_seconds, watermark, failures, last_error
  FROM ptf._distributed_shard_status();
COMMENT ON VIEW ptf.distributed_pipeline_shards IS
    'Each shard group of the current user''s distributed pipelines: its node and live status there';
GRANT SELECT ON ptf.distributed_pipeline_shards TO PUBLIC;

CREATE VIEW ptf.distributed_pipeline_status AS
SELECT pipeline,
       count(*) AS shards,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'failing') AS failing,
       CASE WHEN bool_and(state = 'paused') THEN 'paused'
            WHEN bool_or(state IN ('failing', 'missing', 'unreachable')) THEN 'failing'
            WHEN bool_and(state = 'running') THEN 'running'
            ELSE 'waiting' END AS state,
       sum(rows_in)::bigint AS rows_in, sum(rows_out)::bigint AS rows_out,
       sum(rows_late)::bigint AS rows_late, sum(rows_skipped)::bigint AS rows_skipped,
       max(lag_bytes) AS max_lag_bytes, max(lag_seconds) AS max_lag_seconds,
       (pg_catalog.array_agg(watermark ORDER BY watermark_us) FILTER (WHERE watermark_us IS NOT NULL))[1]
           AS min_watermark,
       (pg_catalog.array_agg(last_error ORDER BY shard) FILTER (WHERE last_error IS NOT NULL))[1]
           AS last_error
  FROM ptf._distributed_shard_status()
 GROUP BY pipeline;
COMMENT ON VIEW ptf.distributed_pipeline_status IS
    'The current user''s distributed pipelines, one row each, summed over their shard groups';
GRANT SELECT ON ptf.distributed_pipeline_status TO PUBLIC;

-- Citus's shard operations run through these while distributed pipelines
-- exist (a planner hook puts them in place of Citus's functions of the same
-- arguments): moves carry each shard group's pipeline to the new node, the
-- rest are refused for groups pipelines run over.  The transfer mode is
-- Citus's enum, taken as anyenum so that this script needs no Citus.
CREATE FUNCTION ptf._citus_move(bigint, text, int, text, int, anyenum) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_move(bigint, text, int, text, int, anyenum) IS
    'Internal: citus_move_shard_placement, carrying the shard group''s pipelines along';
CREATE FUNCTION ptf._citus_move(bigint, int, int, anyenum) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_move(bigint, int, int, anyenum) IS
    'Internal: citus_move_shard_placement by node ids, carrying the shard group''s pipelines along';
CREATE FUNCTION ptf._citus_refuse_copy(bigint, text, int, text, int, anyenum) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_refuse_copy(bigint, text, int, text, int, anyenum) IS
    'Internal: citus_copy_shard_placement, refused for shard groups pipelines run over';
CREATE FUNCTION ptf._citus_refuse_copy(bigint, int, int, anyenum) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_refuse_copy(bigint, int, int, anyenum) IS
    'Internal: citus_copy_shard_placement by node ids, refused for shard groups pipelines run over';
CREATE FUNCTION ptf._citus_refuse_split(bigint, text[], int[], anyenum) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_refuse_split(bigint, text[], int[], anyenum) IS
    'Internal: citus_split_shard_by_split_points, refused for shard groups pipelines run over';
CREATE FUNCTION ptf._citus_refuse_isolate(regclass, "any", text, anyenum) RETURNS bigint
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_refuse_isolate(regclass, "any", text, anyenum) IS
    'Internal: isolate_tenant_to_new_shard, refused for tables pipelines run over';
CREATE FUNCTION ptf._citus_refuse_alter(regclass, text, int, text, boolean) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_refuse_alter(regclass, text, int, text, boolean) IS
    'Internal: alter_distributed_table, refused for tables pipelines run over';
CREATE FUNCTION ptf._citus_refuse_undistribute(regclass, boolean) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_refuse_undistribute(regclass, boolean) IS
    'Internal: undistribute_table, refused for tables pipelines run over';
-- on the nodes: where a move blocks a shard group's writes, its pipelines catch up
CREATE FUNCTION ptf._citus_lock_shard_metadata(int, bigint[]) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_citus_intercept' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf._citus_lock_shard_metadata(int, bigint[]) IS
    'Internal: Citus''s lock_shard_metadata; when it blocks a shard group''s writes, the group''s pipelines here catch up first';
