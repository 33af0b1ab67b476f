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
    ADD COLUMN input_times bigint[];

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
    proc_time       text     DEFAULT NULL)
RETURNS TABLE (probe anyelement, build anycompatible)
AS 'MODULE_PATHNAME', 'ptf_temporal_join'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION ptf.temporal_join(anyelement, anycompatible, text, text, text[], text[], text, text, interval, text, text, text, boolean, interval, text) IS
    'Each probe row joined with the build version valid at its event time (Flink FOR SYSTEM_TIME AS OF, INNER or LEFT)';
