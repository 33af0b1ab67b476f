-- Privileges and row-level security: the input is read exactly as the
-- caller's own SELECT would read it; durable state belongs to its owner.

CREATE SCHEMA kf_sec;
SET search_path = kf_sec, ptf;

CREATE ROLE regress_ptf_alice;
CREATE ROLE regress_ptf_bob;
GRANT USAGE ON SCHEMA kf_sec TO regress_ptf_alice, regress_ptf_bob;

CREATE TABLE orders (id int, owner name, customer text, amount int, placed_at timestamptz DEFAULT '2024-01-01 00:00+00');
INSERT INTO orders VALUES
    (1, 'regress_ptf_alice', 'c1', 10), (2, 'regress_ptf_bob', 'c1', 20),
    (3, 'regress_ptf_alice', 'c2', 30), (4, 'regress_ptf_bob', 'c2', 40),
    (5, 'regress_ptf_bob', 'c3', 50),   (6, 'regress_ptf_alice', 'c1', 60);

-- no SELECT privilege: permission denied, as for a plain SELECT
SET ROLE regress_ptf_alice;
SELECT * FROM orders;
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}');
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}',
    query => 'SELECT * FROM kf_sec.orders');
RESET ROLE;

-- column privileges: SELECT on some columns is not enough to read the row
GRANT SELECT (id, customer) ON orders TO regress_ptf_alice;
SET ROLE regress_ptf_alice;
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}');
RESET ROLE;

-- row-level security: each role sees only its own orders
GRANT SELECT ON orders TO regress_ptf_alice, regress_ptf_bob;
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_orders ON orders USING (owner = current_user);

SET ROLE regress_ptf_alice;
SELECT * FROM orders ORDER BY id;
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}') ORDER BY id;
SELECT DISTINCT ON (customer) * FROM orders ORDER BY customer, id;
-- a query input is subject to the same policy
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}',
    query => 'SELECT * FROM kf_sec.orders ORDER BY id DESC') ORDER BY id;
SET ROLE regress_ptf_bob;
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}') ORDER BY id;
RESET ROLE;
-- the table owner (here a superuser) sees everything, as with SELECT
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}') ORDER BY id;

-- durable state belongs to the role that made it
SET ROLE regress_ptf_alice;
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}', uid => 'alice-orders')
ORDER BY id;
SELECT uid, owner, keys FROM state;
-- the registry and the state tables are not readable directly
SELECT * FROM uid_registry;
SELECT count(*) FROM ptf.state_table_seq;

SET ROLE regress_ptf_bob;
-- bob does not see alice's uid, cannot use it, cannot drop it
SELECT uid FROM state;
-- not even through a cheap function of his own that the planner would run
-- before the view's role filter (the view is a security barrier)
CREATE FUNCTION pg_temp.leak(u text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS
$$ BEGIN RAISE NOTICE 'saw uid %', u; RETURN true; END $$;
SELECT uid FROM state WHERE pg_temp.leak(uid);
DROP FUNCTION pg_temp.leak(text);
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}', uid => 'alice-orders');
SELECT drop_state('alice-orders');
-- nor declare a watermark on a table he does not own
SELECT set_watermark('kf_sec.orders', 'placed_at', '1 minute');
INSERT INTO watermarks VALUES ('kf_sec.orders', 'placed_at', '1 minute');
RESET ROLE;
SELECT set_watermark('kf_sec.orders', 'placed_at', '1 minute');
SET ROLE regress_ptf_bob;
DELETE FROM watermarks;
UPDATE watermarks SET delay = '1 hour';
-- everybody may read declarations
SELECT relid, on_time, delay FROM watermarks WHERE relid = 'kf_sec.orders'::regclass;
RESET ROLE;

-- a member of the owning role may use the state
GRANT regress_ptf_alice TO regress_ptf_bob;
SET ROLE regress_ptf_bob;
SELECT uid, owner FROM state;
SELECT * FROM deduplicate_keep_first(NULL::orders, partition_by => '{customer}', uid => 'alice-orders');
RESET ROLE;
REVOKE regress_ptf_alice FROM regress_ptf_bob;

SET ROLE regress_ptf_alice;
SELECT drop_state('alice-orders');
RESET ROLE;

SELECT count(*) FROM watermarks WHERE relid = 'kf_sec.orders'::regclass;
DROP TABLE orders;
-- the declaration went with the table
SELECT count(*) FROM watermarks WHERE on_time = 'placed_at';
REVOKE USAGE ON SCHEMA kf_sec FROM regress_ptf_alice, regress_ptf_bob;
DROP ROLE regress_ptf_alice, regress_ptf_bob;
