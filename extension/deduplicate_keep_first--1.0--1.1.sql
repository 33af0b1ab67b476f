-- deduplicate_keep_first 1.0 -> 1.1
--
-- Durable state tables get the layout each function declares (row images
-- as bytes, namespaces per key); a uid made under 1.0 keeps its table
-- until its next call, which converts it (state/durable.c), so nothing is
-- lost and nothing is read in the old layout afterwards.

\echo Use "ALTER EXTENSION deduplicate_keep_first UPDATE TO '1.1'" to load this file. \quit

ALTER TABLE ptf.uid_registry
    ADD COLUMN layout      int,
    ADD COLUMN row_types   text,
    ADD COLUMN input_times bigint[],
    ADD COLUMN stream_snapshot text,
    ADD COLUMN input_tables oid[];
ALTER TABLE ptf.pipeline_registry ADD COLUMN sink_name text;

-- A dropped table takes its declaration along (regclass holds no dependency);
-- a dropped table that uids or pipelines read, or a pipeline's sink, is
-- warned of (functions/state_functions.c).  Runs as the role dropping.
CREATE OR REPLACE FUNCTION ptf._forget_dropped_tables() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'ptf_forget_dropped_tables'
LANGUAGE C;
REVOKE ALL ON FUNCTION ptf._forget_dropped_tables() FROM PUBLIC;

-- A row image of a state table (its bytea fields) as a row of the uid's
-- row type: SELECT (ptf.state_row(image, NULL::events)).* FROM ptf.state_7.
-- Only who can read state tables (the extension's owner) needs it.
CREATE FUNCTION ptf.state_row(image bytea, row_type anyelement) RETURNS anyelement
AS 'MODULE_PATHNAME', 'ptf_state_row'
LANGUAGE C IMMUTABLE;
REVOKE ALL ON FUNCTION ptf.state_row(bytea, anyelement) FROM PUBLIC;
COMMENT ON FUNCTION ptf.state_row(bytea, anyelement) IS
    'A row image kept in a state table, as a row of the given row type';


-------------------------------------------------------------------------------
-- snapshot => true: a change stream may start with its tables' rows.  The
-- functions of 1.0 get the argument (a new signature: views calling them
-- must be dropped before the update and made again after it).
-------------------------------------------------------------------------------

DROP FUNCTION ptf.deduplicate_keep_first(anyelement, text[], text, interval, boolean, text, text, boolean, interval, text);
DROP FUNCTION ptf.to_changelog(anyelement, text[], jsonb, boolean, interval, text, text, boolean);
DROP FUNCTION ptf.from_changelog(anyelement, anycompatible, text, jsonb, text, text, text, text[], boolean, interval, text, text, boolean);

CREATE FUNCTION ptf.deduplicate_keep_first(
    input                  anyelement,
    partition_by           text[]   DEFAULT NULL,
    on_time                text     DEFAULT NULL,
    state_ttl              interval DEFAULT NULL,
    reset_ttl_on_duplicate boolean  DEFAULT true,
    uid                    text     DEFAULT NULL,
    query                  text     DEFAULT NULL,
    changes                boolean  DEFAULT false,
    watermark_delay        interval DEFAULT NULL,
    proc_time              text     DEFAULT NULL,
    snapshot            boolean  DEFAULT false)
RETURNS SETOF anyelement
AS 'MODULE_PATHNAME', 'ptf_deduplicate_keep_first'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.deduplicate_keep_first(anyelement, text[], text, interval, boolean, text, text, boolean, interval, text, boolean) IS
    'Keep the first row per key (Flink DEDUPLICATE_KEEP_FIRST): by arrival, or by event time with watermarks';

CREATE FUNCTION ptf.to_changelog(
    input                 anyelement,
    partition_by          text[]   DEFAULT NULL,
    op_mapping            jsonb    DEFAULT NULL,
    produces_full_deletes boolean  DEFAULT true,
    state_ttl             interval DEFAULT NULL,
    uid                   text     DEFAULT NULL,
    query                 text     DEFAULT NULL,
    changes               boolean  DEFAULT false,
    snapshot            boolean  DEFAULT false)
RETURNS TABLE (op text, data anyelement, lsn pg_lsn, commit_time timestamptz, xid xid8)
AS 'MODULE_PATHNAME', 'ptf_to_changelog'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.to_changelog(anyelement, text[], jsonb, boolean, interval, text, text, boolean, boolean) IS
    'Every change of the input as an append-only row with its operation (Flink TO_CHANGELOG)';

CREATE FUNCTION ptf.from_changelog(
    input                anyelement,
    target               anycompatible,
    op                   text     DEFAULT 'op',
    op_mapping           jsonb    DEFAULT NULL,
    invalid_op_handling  text     DEFAULT 'FAIL',
    before               text     DEFAULT NULL,
    after                text     DEFAULT NULL,
    partition_by         text[]   DEFAULT NULL,
    consume_full_deletes boolean  DEFAULT true,
    state_ttl            interval DEFAULT NULL,
    uid                  text     DEFAULT NULL,
    query                text     DEFAULT NULL,
    changes              boolean  DEFAULT false,
    snapshot            boolean  DEFAULT false)
RETURNS TABLE (kind text, data anycompatible)
AS 'MODULE_PATHNAME', 'ptf_from_changelog'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.from_changelog(anyelement, anycompatible, text, jsonb, text, text, text, text[], boolean, interval, text, text, boolean, boolean) IS
    'CDC rows with an operation code turned back into changes of the target row type (Flink FROM_CHANGELOG)';

-------------------------------------------------------------------------------
-- WINDOWS: Flink's window table-valued functions and the sliced window
-- aggregate (TUMBLE, HOP, CUMULATE, SESSION).
-------------------------------------------------------------------------------

CREATE FUNCTION ptf.tumble(
    input     anyelement,
    on_time   text,
    size      interval,
    "offset"  interval DEFAULT '0',
    uid       text     DEFAULT NULL,
    query     text     DEFAULT NULL,
    changes   boolean  DEFAULT false,
    snapshot            boolean  DEFAULT false)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_tumble'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.tumble(anyelement, text, interval, interval, text, text, boolean, boolean) IS
    'Each row with its tumbling window [window_start, window_end) (Flink TUMBLE)';

-- The bounds of ptf.tumble's windows, for tumble calls the planner
-- replaces by a scan of their table (functions/tvf_inline.c).  Internal.
CREATE FUNCTION ptf._tumble_bound(time_value anyelement, size_us bigint, offset_us bigint,
                                  which integer, on_time text)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'ptf_tumble_bound'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ptf._tumble_bound(anyelement, bigint, bigint, integer, text) IS
    'Internal: a bound of the TUMBLE window holding a time (0 start, 1 end, 2 window_time)';

CREATE FUNCTION ptf.hop(
    input     anyelement,
    on_time   text,
    slide     interval,
    size      interval,
    "offset"  interval DEFAULT '0',
    uid       text     DEFAULT NULL,
    query     text     DEFAULT NULL,
    changes   boolean  DEFAULT false,
    snapshot            boolean  DEFAULT false)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_hop'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.hop(anyelement, text, interval, interval, interval, text, text, boolean, boolean) IS
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
    snapshot            boolean  DEFAULT false)
RETURNS TABLE (data anyelement, window_start timestamptz, window_end timestamptz,
               window_time timestamptz)
AS 'MODULE_PATHNAME', 'ptf_cumulate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.cumulate(anyelement, text, interval, interval, interval, text, text, boolean, boolean) IS
    'Each row once per cumulating window it falls in (Flink CUMULATE)';

CREATE FUNCTION ptf.window_aggregate(
    input               anyelement,
    target              anycompatible,
    "window"            text,
    on_time             text,
    size                interval,
    step                interval DEFAULT NULL,
    "offset"            interval DEFAULT '0',
    partition_by        text[]   DEFAULT NULL,
    aggregates          text     DEFAULT 'count(*) AS count',
    emit_only_on_update boolean  DEFAULT false,
    uid                 text     DEFAULT NULL,
    query               text     DEFAULT NULL,
    changes             boolean  DEFAULT false,
    watermark_delay     interval DEFAULT NULL,
    idle_timeout        interval DEFAULT NULL,
    proc_time           text     DEFAULT NULL,
    snapshot            boolean  DEFAULT false)
RETURNS SETOF anycompatible
AS 'MODULE_PATHNAME', 'ptf_window_aggregate'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.window_aggregate(anyelement, anycompatible, text, text, interval, interval, interval, text[], text, boolean, text, text, boolean, interval, interval, text, boolean) IS
    'Aggregates per key and TUMBLE, HOP, CUMULATE or SESSION window, fired by the watermark (Flink window aggregation)';

-- A NULL target or query is an error (22004), not a row of NULL counts.
ALTER FUNCTION ptf.apply_changelog(regclass, text) CALLED ON NULL INPUT;

-- An interval in microseconds as calls count it: set_watermark refuses a
-- delay that every call would.
CREATE FUNCTION ptf._interval_us(delay interval, what text) RETURNS bigint
AS 'MODULE_PATHNAME', 'ptf_interval_us'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ptf._interval_us(interval, text) IS
    'Internal: an interval in microseconds as the functions count it (months of 30 days); an error when out of range';

CREATE OR REPLACE FUNCTION ptf.set_watermark(tbl regclass, on_time text, delay interval)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    coltype regtype;
BEGIN
    IF tbl IS NULL OR on_time IS NULL OR delay IS NULL THEN
        RAISE EXCEPTION 'set_watermark needs tbl, on_time and delay'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF delay < interval '0' THEN
        RAISE EXCEPTION 'watermark delay must not be negative'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT pg_has_role((SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table % to declare its watermark', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT a.atttypid INTO coltype
      FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attname = on_time AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of table % does not exist', on_time, tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    IF coltype NOT IN ('timestamp'::regtype, 'timestamptz'::regtype, 'bigint'::regtype) THEN
        RAISE EXCEPTION 'column "%" has type %, not a time type', on_time, coltype
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Time columns are timestamp, timestamptz, or bigint milliseconds since 1970.';
    END IF;
    -- 22015 now rather than at every call that would use it
    PERFORM ptf._interval_us(delay, 'watermark delay');
    INSERT INTO ptf.watermarks AS w (relid, on_time, delay) VALUES (tbl, on_time, delay)
        ON CONFLICT (relid) DO UPDATE SET on_time = excluded.on_time, delay = excluded.delay;
END
$$;

-- Times shown exactly to the end of the timestamp range.
CREATE OR REPLACE FUNCTION ptf._time_text(us bigint, time_type regtype) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN us IS NULL THEN NULL
        WHEN us = 9223372036854775807 THEN 'infinity'
        WHEN us = -9223372036854775808 THEN '-infinity'
        -- epoch milliseconds, floored as the functions floor them
        WHEN time_type = 'pg_catalog.int8'::pg_catalog.regtype
            THEN pg_catalog.floor((us::pg_catalog.numeric + 946684800000000) / 1000)::pg_catalog.int8::pg_catalog.text
        -- interval * number is float8 arithmetic: exact only for a number of
        -- at most 53 bits, so whole days, then the microseconds left; UTC
        -- days are exact for timestamptz too
        WHEN time_type = 'pg_catalog.timestamp'::pg_catalog.regtype
            THEN (timestamp '2000-01-01 00:00:00' + (us / 86400000000) * interval '1 day'
                  + (us % 86400000000) * interval '1 microsecond')::pg_catalog.text
        ELSE ((timestamp '2000-01-01 00:00:00' + (us / 86400000000) * interval '1 day'
               + (us % 86400000000) * interval '1 microsecond') AT TIME ZONE 'UTC')::pg_catalog.text
    END
$$;

-------------------------------------------------------------------------------
-- TEMPORAL JOIN
-------------------------------------------------------------------------------

CREATE FUNCTION ptf.temporal_join(
    probe           anyelement,
    build           anycompatible,
    probe_time      text,
    build_time      text,
    probe_key       text[],
    build_key       text[]   DEFAULT NULL,
    join_type       text     DEFAULT 'inner',
    condition       text     DEFAULT NULL,
    state_ttl       interval DEFAULT NULL,
    uid             text     DEFAULT NULL,
    probe_query     text     DEFAULT NULL,
    build_query     text     DEFAULT NULL,
    changes         boolean  DEFAULT false,
    watermark_delay interval DEFAULT NULL,
    proc_time       text     DEFAULT NULL,
    snapshot            boolean  DEFAULT false)
RETURNS TABLE (probe anyelement, build anycompatible)
AS 'MODULE_PATHNAME', 'ptf_temporal_join'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.temporal_join(anyelement, anycompatible, text, text, text[], text[], text, text, interval, text, text, text, boolean, interval, text, boolean) IS
    'Each probe row joined with the build version valid at its event time (Flink FOR SYSTEM_TIME AS OF, INNER or LEFT)';

-------------------------------------------------------------------------------
-- Pipelines: ptf.pipeline_status shows the WAL a pipeline has not read yet;
-- pipelines restored into a database wake its worker.
-------------------------------------------------------------------------------

DROP VIEW ptf.pipeline_status;
DROP FUNCTION ptf._pipeline_status();
CREATE FUNCTION ptf._pipeline_status(
    OUT name text, OUT state text, OUT pid int, OUT rows_in bigint, OUT rows_out bigint,
    OUT rows_late bigint, OUT rows_skipped bigint, OUT lsn pg_lsn, OUT lag_bytes bigint,
    OUT lag_seconds double precision, OUT last_step_at timestamptz, OUT failures int,
    OUT last_error text, OUT pending_bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ptf_pipeline_status_rows'
LANGUAGE C VOLATILE;

CREATE VIEW ptf.pipeline_status AS SELECT * FROM ptf._pipeline_status();
COMMENT ON VIEW ptf.pipeline_status IS
    'Live status of the current user''s pipelines, from the pipeline workers'' shared memory';
GRANT SELECT ON ptf.pipeline_status TO PUBLIC;

-- Rows put in the registry otherwise than by create_pipeline (pg_restore)
-- ask for the database's pipeline worker, as create_pipeline does.
CREATE FUNCTION ptf._wake_pipeline_worker() RETURNS trigger
AS 'MODULE_PATHNAME', 'ptf_wake_pipeline_worker'
LANGUAGE C;
COMMENT ON FUNCTION ptf._wake_pipeline_worker() IS
    'Internal: trigger asking for the database''s pipeline worker when pipelines are restored';
CREATE TRIGGER wake_pipeline_worker AFTER INSERT ON ptf.pipeline_registry
    FOR EACH STATEMENT EXECUTE FUNCTION ptf._wake_pipeline_worker();

-------------------------------------------------------------------------------
-- Comments on every function and catalog, for \df+ and \d+
-------------------------------------------------------------------------------

COMMENT ON FUNCTION ptf.pause_pipeline(text) IS
    'Stops running a pipeline until ptf.resume_pipeline; its state and slot are kept';
COMMENT ON FUNCTION ptf.resume_pipeline(text) IS
    'Runs a paused pipeline again, from where it stopped';
COMMENT ON FUNCTION ptf._pipeline_status() IS
    'Internal: the pipelines'' live status from the workers'' shared memory (see ptf.pipeline_status)';
COMMENT ON FUNCTION ptf._time_text(bigint, regtype) IS
    'Internal: a stored time as text in its column''s type (ptf.state, ptf.watermarks)';
COMMENT ON FUNCTION ptf._forget_dropped_tables() IS
    'Internal: event trigger forgetting watermark declarations of dropped tables, warning of dropped sources and sinks of uids and pipelines';
COMMENT ON SEQUENCE ptf.pipeline_registry_id_seq IS 'Internal: pipeline ids';
COMMENT ON SEQUENCE ptf.state_table_seq IS 'Internal: numbers of state tables (ptf.state_N)';
COMMENT ON SEQUENCE ptf.state_version_seq IS 'Internal: versions of stored states, to know a kept operator is current';

-------------------------------------------------------------------------------
-- Who may start a change stream.  A stream holds a replication slot, which
-- PostgreSQL lets only REPLICATION roles make; the extension makes slots as
-- its owner, so a uid's first call asks the caller for superuser,
-- REPLICATION, or the privileges of ptf_stream: a role a DBA grants on
-- purpose (GRANT ptf_stream TO ...).  Roles are server-wide and not members
-- of an extension: made by the first installation, kept by DROP EXTENSION.
-------------------------------------------------------------------------------

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'ptf_stream') THEN
        CREATE ROLE ptf_stream NOLOGIN;
        COMMENT ON ROLE ptf_stream IS
            'Members may start change streams of deduplicate_keep_first (each holds a replication slot)';
    END IF;
END
$$;

-- DROP OWNED drops the role's uids and pipelines (state, slots, origins);
-- DROP EXTENSION the slots and origins of all (functions/drops.c).  At
-- ddl_command_start: the registry is still there, and the trigger fires
-- for the drop of its own extension.
CREATE FUNCTION ptf._drop_streams() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'ptf_drop_streams'
LANGUAGE C;
REVOKE ALL ON FUNCTION ptf._drop_streams() FROM PUBLIC;
COMMENT ON FUNCTION ptf._drop_streams() IS
    'Internal: DROP OWNED drops the role''s uids and pipelines, DROP EXTENSION the slots and origins of all (event trigger)';
CREATE EVENT TRIGGER ptf_drop_streams ON ddl_command_start
    WHEN TAG IN ('DROP OWNED', 'DROP EXTENSION')
    EXECUTE FUNCTION ptf._drop_streams();
COMMENT ON EVENT TRIGGER ptf_drop_streams IS
    'Slots and replication origins of uids and pipelines go with their owner (DROP OWNED) or the extension';

-------------------------------------------------------------------------------
-- ptf.last_call_stats() says how a uid's state was read: whole, or the keys
-- the call's rows touched (functions/state_load.c).
-------------------------------------------------------------------------------

DROP FUNCTION ptf.last_call_stats();
CREATE FUNCTION ptf.last_call_stats(
    OUT function text, OUT rows_in bigint, OUT rows_out bigint, OUT rows_late bigint,
    OUT keys bigint, OUT state_bytes bigint, OUT rows_spilled bigint, OUT spill_partitions int,
    OUT state_load text, OUT keys_probed bigint, OUT keys_loaded bigint, OUT keys_evicted bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'ptf_last_call_stats'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf.last_call_stats() IS
    'What the last table-function call of this session did: rows, keys, state memory, spilling, how a uid''s state was read';

-------------------------------------------------------------------------------
-- ptf.state shows the keys whose TTL passed and that no call removed yet.
-------------------------------------------------------------------------------

-- Expired keys not removed yet, for ptf.state (NULL for others' tables):
-- reading them scans the state table.
CREATE FUNCTION ptf._state_expired(state_table regclass, want_bytes boolean) RETURNS bigint
AS 'MODULE_PATHNAME', 'ptf_state_expired'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION ptf._state_expired(regclass, boolean) IS
    'Internal: a uid''s stored keys whose TTL passed and that no call removed yet, or their bytes (ptf.state)';

-- security_barrier: the role filter runs before any function of the caller's
CREATE OR REPLACE VIEW ptf.state WITH (security_barrier) AS
SELECT r.uid,
       r.function,
       r.owner,
       r.row_type,
       r.key_columns AS partition_by,
       r.on_time,
       r.keys,
       pg_catalog.pg_total_relation_size(r.state_table) AS bytes,
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
 WHERE pg_catalog.pg_has_role(r.owner, 'USAGE');

-------------------------------------------------------------------------------
-- ptf.resync: a stream goes on from its tables as they are, keeping its state.
-------------------------------------------------------------------------------

-- A stream brought in line with its tables (a stream stopped at a change it
-- cannot complete, or one to be checked): its next call reads the tables'
-- rows as they are then, says the net effect on its state, and goes on with
-- the changes after them (functions/call.c).
CREATE FUNCTION ptf.resync(uid text) RETURNS void
AS 'MODULE_PATHNAME', 'ptf_resync'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ptf.resync(text) IS
    'The uid''s next call reads its tables as they are and emits the net effect on its state, then goes on with the changes after';

