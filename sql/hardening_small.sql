-- Hardening, the smaller defects: each case fails with a clear error and
-- its SQLSTATE before any row is read, or gives the right figure.
CREATE SCHEMA hs;
SET search_path = hs, ptf;
SET TIME ZONE 'UTC';

-- runs a statement, returns its SQLSTATE and message
CREATE FUNCTION err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- a volatile function in an input query: a NOTICE means rows were read
CREATE FUNCTION noisy() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'an input row was read'; RETURN true; END $$;

CREATE TABLE mirror (id int PRIMARY KEY, name text);

-- ---- apply_changelog: NULL arguments are errors, not a row of NULLs
SELECT err($$SELECT * FROM apply_changelog(NULL, 'SELECT 1 WHERE hs.noisy()')$$);
SELECT err($$SELECT * FROM apply_changelog('mirror', NULL)$$);

DROP SCHEMA hs CASCADE;
