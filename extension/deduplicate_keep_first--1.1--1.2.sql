-- deduplicate_keep_first 1.1 -> 1.2 (ALTER EXTENSION deduplicate_keep_first UPDATE).
-- A fresh install of 1.2 runs 1.0's script and every update after it, so this
-- file is the only definition of what 1.2 changes.
\echo Use "ALTER EXTENSION deduplicate_keep_first UPDATE" to load this file. \quit
