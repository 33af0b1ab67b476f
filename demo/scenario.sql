-- demo/scenario.sql: ptf.deduplicate_keep_first on click events (run by demo/run,
-- which has already done CREATE EXTENSION deduplicate_keep_first).
SET timezone = 'UTC';

\echo
\echo '=== Click events: event 1 and event 8 were delivered twice; carol''s events'
\echo '=== arrived out of order; bob''s 09:58 click arrived very late.'
CREATE TABLE events (
    event_id   int,
    user_id    text,
    event_type text,
    event_time timestamptz,   -- when the click happened
    arrived_at timestamptz,   -- when it reached us
    batch      int            -- which load brought it (part d)
);
INSERT INTO events VALUES
    (1, 'alice', 'view',  '2024-05-01 10:00', '2024-05-01 10:00:05', 1),
    (2, 'bob',   'view',  '2024-05-01 10:01', '2024-05-01 10:01:02', 1),
    (1, 'alice', 'view',  '2024-05-01 10:00', '2024-05-01 10:01:30', 1),
    (3, 'alice', 'click', '2024-05-01 10:02', '2024-05-01 10:02:10', 1),
    (4, 'carol', 'view',  '2024-05-01 10:04', '2024-05-01 10:06:00', 1),
    (5, 'carol', 'click', '2024-05-01 10:03', '2024-05-01 10:07:00', 1),
    (6, 'alice', 'buy',   '2024-05-01 10:12', '2024-05-01 10:12:05', 2),
    (7, 'bob',   'click', '2024-05-01 09:58', '2024-05-01 10:12:30', 2),
    (8, 'dave',  'view',  '2024-05-01 10:13', '2024-05-01 10:13:10', 2),
    (8, 'dave',  'view',  '2024-05-01 10:13', '2024-05-01 10:13:40', 2),
    (9, 'erin',  'view',  '2024-05-01 10:14', '2024-05-01 10:14:00', 2);

\echo
\echo '=== (a) First event per user in arrival order (query fixes the order) ...'
SELECT event_id, user_id, event_type, event_time::time, arrived_at::time
  FROM ptf.deduplicate_keep_first(NULL::events, partition_by => ARRAY['user_id'],
           query => 'SELECT * FROM events ORDER BY arrived_at')
 ORDER BY user_id;
\echo '=== ... the same as plain SQL DISTINCT ON:'
SELECT DISTINCT ON (user_id) event_id, user_id, event_type, event_time::time, arrived_at::time
  FROM events
 ORDER BY user_id, arrived_at;

\echo
\echo '=== (b) Earliest event per user by event time.  Declare a watermark of'
\echo '===     5 minutes: the watermark is max(event_time seen) - 5 minutes.'
SELECT ptf.set_watermark('events', 'event_time', interval '5 minutes');
SELECT relid, on_time, delay FROM ptf.watermarks;
\echo '=== When each row arrived, the watermark was (rows below it are late):'
SELECT event_id, user_id, event_time::time, arrived_at::time,
       (max(event_time) OVER w - interval '5 minutes')::time AS watermark,
       event_time < coalesce(max(event_time) OVER w - interval '5 minutes', '-infinity') AS late
  FROM events
WINDOW w AS (ORDER BY arrived_at ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
 ORDER BY arrived_at;
\echo '=== carol gets her 10:03 click (out of order but in time); bob''s 09:58'
\echo '=== click was late and is dropped, so bob keeps his 10:01 view:'
SELECT event_id, user_id, event_type, event_time::time, arrived_at::time
  FROM ptf.deduplicate_keep_first(NULL::events, partition_by => ARRAY['user_id'],
           on_time => 'event_time',
           query => 'SELECT * FROM events ORDER BY arrived_at')
 ORDER BY user_id;
\echo '=== (plain SQL, which knows nothing of lateness, would pick bob''s 09:58 click)'
SELECT DISTINCT ON (user_id) event_id, user_id, event_type, event_time::time
  FROM events
 ORDER BY user_id, event_time, arrived_at;

\echo
\echo '=== (c) State TTL: frank pings at 10:00, 10:03, 10:07 and 10:10; his state'
\echo '===     lives 5 minutes of processing time (taken from column seen_at).'
CREATE TABLE pings (user_id text, seen_at timestamptz);
INSERT INTO pings VALUES ('frank', '2024-05-01 10:00'), ('frank', '2024-05-01 10:03'),
                         ('frank', '2024-05-01 10:07'), ('frank', '2024-05-01 10:10');
\echo '=== reset_ttl_on_duplicate => true: every duplicate restarts the 5 minutes,'
\echo '=== so the state never expires: only 10:00.  false: it expires at 10:05,'
\echo '=== 10:07 is a first row again (new state until 10:12): 10:00 and 10:07.'
SELECT 'true' AS reset_ttl_on_duplicate, user_id, seen_at::time
  FROM ptf.deduplicate_keep_first(NULL::pings, partition_by => ARRAY['user_id'],
           state_ttl => interval '5 minutes', proc_time => 'seen_at',
           reset_ttl_on_duplicate => true,
           query => 'SELECT * FROM pings ORDER BY seen_at')
UNION ALL
SELECT 'false', user_id, seen_at::time
  FROM ptf.deduplicate_keep_first(NULL::pings, partition_by => ARRAY['user_id'],
           state_ttl => interval '5 minutes', proc_time => 'seen_at',
           reset_ttl_on_duplicate => false,
           query => 'SELECT * FROM pings ORDER BY seen_at')
 ORDER BY 1 DESC, 3;

\echo
\echo '=== (d) Incremental: with a uid the state is kept between calls.'
\echo '===     Batch 1: alice, bob and carol are new.'
SELECT event_id, user_id, event_type, arrived_at::time
  FROM ptf.deduplicate_keep_first(NULL::events, partition_by => ARRAY['user_id'],
           uid => 'first_click',
           query => 'SELECT * FROM events WHERE batch = 1 ORDER BY arrived_at')
 ORDER BY user_id;
\echo '=== Batch 2: only dave and erin are new; alice and bob were seen in batch 1'
\echo '=== (without on_time there is no lateness: bob''s 09:58 click is a duplicate).'
SELECT event_id, user_id, event_type, arrived_at::time
  FROM ptf.deduplicate_keep_first(NULL::events, partition_by => ARRAY['user_id'],
           uid => 'first_click',
           query => 'SELECT * FROM events WHERE batch = 2 ORDER BY arrived_at')
 ORDER BY user_id;
\echo '=== The durable state of uid first_click:'
SELECT uid, function, partition_by, keys, pg_size_pretty(bytes) AS size, watermark,
       rows_in, rows_out
  FROM ptf.state;
\echo '=== Forget it:'
SELECT ptf.drop_state('first_click');
SELECT count(*) AS uids_left FROM ptf.state;

\echo
\echo '=== (e) Change data capture: the changes of an orders table, read through'
\echo '===     logical decoding, exactly once per uid.  The first calls start the'
\echo '===     streams (they return nothing: rows before them are not changes).'
CREATE TABLE orders (order_id int PRIMARY KEY, customer text, amount numeric, status text);
INSERT INTO orders VALUES (100, 'alice', 12.50, 'new');      -- before the streams: not seen
CREATE TABLE orders_audit (op text, order_id int, customer text, amount numeric, status text,
                           lsn pg_lsn, committed timestamptz);
SELECT count(*) AS rows FROM ptf.to_changelog(NULL::orders, changes => true, uid => 'orders_cdc');
SELECT count(*) AS rows FROM ptf.deduplicate_keep_first(NULL::orders,
           partition_by => ARRAY['customer'], changes => true, uid => 'first_order');
INSERT INTO orders VALUES (101, 'bob', 30.00, 'new'), (102, 'alice', 8.00, 'new');
UPDATE orders SET status = 'paid' WHERE order_id = 101;
UPDATE orders SET amount = 9.00 WHERE order_id = 102;
DELETE FROM orders WHERE order_id = 102;
INSERT INTO orders VALUES (103, 'carol', 5.00, 'new');
\echo '=== Every change as a row, written to an audit table in the same transaction'
\echo '=== that stores the stream position.  orders has REPLICA IDENTITY DEFAULT:'
\echo '=== the WAL has no old row for an update, only the key for a delete; the'
\echo '=== UPDATE_BEFORE and whole DELETE rows come from the images kept per key'
\echo '=== (Flink''s ChangelogNormalize).'
INSERT INTO orders_audit
SELECT op, (data).*, lsn, commit_time
  FROM ptf.to_changelog(NULL::orders, changes => true, uid => 'orders_cdc');
SELECT op, order_id, customer, amount, status FROM orders_audit ORDER BY lsn, op DESC;
\echo '=== Nothing new since: the next call writes nothing.'
INSERT INTO orders_audit
SELECT op, (data).*, lsn, commit_time
  FROM ptf.to_changelog(NULL::orders, changes => true, uid => 'orders_cdc');
SELECT count(*) AS audit_rows FROM orders_audit;
\echo '=== Each customer''s first order since the stream began; alice''s deleted order'
\echo '=== still was her first (keep-first never retracts).'
SELECT order_id, customer, amount
  FROM ptf.deduplicate_keep_first(NULL::orders, partition_by => ARRAY['customer'],
           changes => true, uid => 'first_order')
 ORDER BY order_id;
\echo '=== The streams: their positions, and the WAL their slots hold back.'
SELECT uid, function, lsn IS NOT NULL AS has_position, slot_name IS NOT NULL AS has_slot,
       rows_in, rows_out
  FROM ptf.state ORDER BY uid;
SELECT ptf.drop_state('orders_cdc'), ptf.drop_state('first_order');

\echo
\echo '=== (f) The other way: Debezium records of a remote customers table land'
\echo '===     in a table; from_changelog reads them back as changes and'
\echo '===     apply_changelog keeps a mirror, incrementally and exactly once.'
CREATE TABLE customers (id int PRIMARY KEY, name text, tier text);
CREATE TABLE debezium_landing (op text, before jsonb, after jsonb, ts_ms bigint);
CREATE FUNCTION sync_customers() RETURNS TABLE (inserted bigint, updated bigint, deleted bigint, missing bigint)
LANGUAGE sql AS $$
    SELECT inserted, updated, deleted, missing FROM ptf.apply_changelog('customers', $q$
        SELECT kind, data FROM ptf.from_changelog(NULL::debezium_landing, NULL::customers,
            before => 'before', after => 'after', partition_by => '{id}',
            consume_full_deletes => false,
            op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
            changes => true, uid => 'customers_mirror')$q$)
$$;
SELECT * FROM sync_customers();              -- starts the landing table's stream
\echo '=== A snapshot (op r), then changes; under REPLICA IDENTITY DEFAULT Debezium'
\echo '=== sends no before for updates and only the key for deletes: the mirror'
\echo '=== keeps the last image per key to make them whole.'
INSERT INTO debezium_landing VALUES
  ('r', NULL, '{"id": 1, "name": "Ada", "tier": "gold"}', 1714557600000),
  ('r', NULL, '{"id": 2, "name": "Brian", "tier": "basic"}', 1714557600000);
INSERT INTO debezium_landing VALUES
  ('c', NULL, '{"id": 3, "name": "Chen", "tier": "basic"}', 1714557660000),
  ('u', NULL, '{"id": 2, "name": "Brian", "tier": "gold"}', 1714557720000),
  ('d', '{"id": 1}', NULL, 1714557780000);
SELECT * FROM sync_customers();
TABLE customers;
\echo '=== Processed records may be deleted from the landing table: that is'
\echo '=== clean-up, not a change.  The next sync finds nothing new.'
DELETE FROM debezium_landing;
SELECT * FROM sync_customers();
SELECT ptf.drop_state('customers_mirror');

\echo
\echo '=== (g) A pipeline: the same keep-first, run continuously by the background'
\echo '===     worker.  Nobody calls it: inserts show up in the sink moments later.'
CREATE TABLE signups (id bigserial, email text, source text,
                      at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE first_signups (LIKE signups);
SELECT ptf.create_pipeline('first-signups', $$
    SELECT * FROM ptf.deduplicate_keep_first(NULL::signups, partition_by => '{email}',
        changes => true, uid => 'first-signups')$$, 'first_signups');
-- waits (at most 10 s) until a query returns what is expected
CREATE FUNCTION pg_temp.wait_for(q text, expected bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    FOR i IN 1 .. 200 LOOP
        EXECUTE q INTO n;
        EXIT WHEN n = expected;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN n;
END $$;
INSERT INTO signups (email, source) VALUES
  ('ada@example.com', 'ad'), ('bo@example.com', 'search'), ('ada@example.com', 'newsletter');
SELECT pg_temp.wait_for('SELECT count(*) FROM first_signups', 2) AS first_signups;
SELECT id, email, source FROM first_signups ORDER BY id;
\echo '=== More signups, one from a known address: one new row in the sink.'
INSERT INTO signups (email, source) VALUES ('cy@example.com', 'ad'), ('bo@example.com', 'ad');
SELECT pg_temp.wait_for('SELECT count(*) FROM first_signups', 3) AS first_signups;
SELECT id, email, source FROM first_signups ORDER BY id;
\echo '=== The live status, from the worker''s shared memory:'
SELECT name, state, rows_in, rows_out, lag_seconds, last_error FROM ptf.pipeline_status;
SELECT ptf.drop_pipeline('first-signups');

\echo
\echo '=== (h) Temporal join: each order converted at the rate valid when it was'
\echo '===     placed (Flink''s FOR SYSTEM_TIME AS OF o.order_time).  The rates'
\echo '===     table is a history: each row a version, valid from its own time.'
CREATE TABLE fx_rates (currency text, rate numeric, valid_from timestamptz);
CREATE TABLE fx_orders (id int, currency text, amount numeric, placed_at timestamptz);
INSERT INTO fx_rates VALUES
  ('EUR', 1.10, '2024-05-01 09:00+00'), ('EUR', 1.12, '2024-05-01 12:00+00'),
  ('GBP', 1.25, '2024-05-01 09:00+00');
INSERT INTO fx_orders VALUES
  (1, 'EUR', 100, '2024-05-01 11:59+00'), (2, 'EUR', 100, '2024-05-01 12:00+00'),
  (3, 'GBP', 50, '2024-05-01 10:00+00'), (4, 'CHF', 80, '2024-05-01 10:00+00'),
  (5, 'EUR', 100, '2024-05-01 08:00+00');
\echo '=== Order 1 takes 1.10 (12:00''s rate is later), order 2 takes 1.12 (valid'
\echo '=== from 12:00 inclusive); LEFT keeps CHF (no rate) and order 5 (before any):'
SELECT (probe).id, (probe).currency, (probe).amount, (build).rate,
       (probe).amount * (build).rate AS usd
  FROM ptf.temporal_join(NULL::fx_orders, NULL::fx_rates, probe_time => 'placed_at',
                         build_time => 'valid_from', probe_key => '{currency}', join_type => 'left')
 ORDER BY (probe).id;
\echo '=== A residual condition tests the chosen version only (no fallback):'
SELECT (probe).id, (build).rate
  FROM ptf.temporal_join(NULL::fx_orders, NULL::fx_rates, probe_time => 'placed_at',
                         build_time => 'valid_from', probe_key => '{currency}',
                         condition => 'build.rate < 1.11')
 ORDER BY (probe).id;
\echo '=== As a stream (uid): an order waits until both sides'' watermarks pass it.'
\echo '=== The rates have reached 12:00, orders 12:05: order 7 (11:00) fires, 6 waits.'
SELECT (probe).id, (build).rate
  FROM ptf.temporal_join(NULL::fx_orders, NULL::fx_rates, probe_time => 'placed_at',
                         build_time => 'valid_from', probe_key => '{currency}', uid => 'fx',
                         probe_query => $$VALUES (7, 'GBP', 10.0, timestamptz '2024-05-01 11:00+00'),
                                                 (6, 'EUR', 10.0, timestamptz '2024-05-01 12:05+00')$$)
 ORDER BY (probe).id;
\echo '=== A new GBP rate at 12:10 moves the rates'' watermark: order 6 fires.'
SELECT (probe).id, (build).rate
  FROM ptf.temporal_join(NULL::fx_orders, NULL::fx_rates, probe_time => 'placed_at',
                         build_time => 'valid_from', probe_key => '{currency}', uid => 'fx',
                         probe_query => 'SELECT * FROM fx_orders WHERE false',
                         build_query => $$VALUES ('GBP', 1.26, timestamptz '2024-05-01 12:10+00')$$);
SELECT ptf.drop_state('fx');

\echo
\echo '=== (i) Windows (Flink''s window TVFs and window aggregate) on Flink''s Bid'
\echo '===     example: bids of two suppliers between 08:05 and 08:17.'
CREATE TABLE bids (bidtime timestamp, price numeric(10,2), item text, supplier text);
INSERT INTO bids VALUES
  ('2020-04-15 08:05', 4.00, 'C', 'supplier1'), ('2020-04-15 08:07', 2.00, 'A', 'supplier1'),
  ('2020-04-15 08:09', 5.00, 'D', 'supplier2'), ('2020-04-15 08:11', 3.00, 'B', 'supplier2'),
  ('2020-04-15 08:13', 1.00, 'E', 'supplier1'), ('2020-04-15 08:17', 6.00, 'F', 'supplier2');
SET TimeZone = 'UTC';
\echo '=== TUMBLE(10 min) as a table function: each bid with its window (a scan of bids):'
SELECT (data).item, (data).bidtime, window_start, window_end
  FROM ptf.tumble(NULL::bids, 'bidtime', '10 minutes') ORDER BY 2;
\echo '=== HOP(slide 5, size 10) per supplier with ptf.window_aggregate: the slices'
\echo '=== of 5 minutes are summed once and combined into each window.'
CREATE TYPE supplier_total AS (supplier text, window_start timestamp, window_end timestamp,
                               total numeric, bids bigint, items text);
SELECT * FROM ptf.window_aggregate(NULL::bids, NULL::supplier_total, 'hop', 'bidtime',
    '10 minutes', '5 minutes', partition_by => '{supplier}',
    aggregates => $$sum(price) AS total, count(*) AS bids, string_agg(item, ',' ORDER BY item) AS items$$)
 ORDER BY window_end, supplier;
\echo '=== CUMULATE(step 2, size 10): the running total of each 10 minutes, every 2;'
\echo '=== emit_only_on_update skips steps that changed nothing (08:16 and 08:20).'
CREATE TYPE running AS (window_start timestamp, window_end timestamp, total numeric);
SELECT * FROM ptf.window_aggregate(NULL::bids, NULL::running, 'cumulate', 'bidtime',
    '10 minutes', '2 minutes', aggregates => 'sum(price) AS total', emit_only_on_update => true);
\echo '=== As a stream: a uid with a watermark 1 minute behind the bids.  The first'
\echo '=== call sees bids up to 08:09: no 10-minute window has closed yet.'
CREATE TYPE per_window AS (window_start timestamp, window_end timestamp, total numeric, bids bigint);
SELECT * FROM ptf.window_aggregate(NULL::bids, NULL::per_window, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) AS total, count(*) AS bids', uid => 'bid-windows',
    watermark_delay => '1 minute', query => $$SELECT * FROM bids WHERE bidtime < '2020-04-15 08:10'$$);
\echo '=== The next call brings 08:11 (watermark 08:10): [08:00, 08:10) fires, once.'
SELECT * FROM ptf.window_aggregate(NULL::bids, NULL::per_window, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) AS total, count(*) AS bids', uid => 'bid-windows',
    watermark_delay => '1 minute', query => $$SELECT * FROM bids WHERE bidtime >= '2020-04-15 08:10'$$);
\echo '=== A late bid at 08:08 (its window fired) is dropped and counted:'
SELECT * FROM ptf.window_aggregate(NULL::bids, NULL::per_window, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) AS total, count(*) AS bids', uid => 'bid-windows',
    watermark_delay => '1 minute',
    query => $$VALUES (timestamp '2020-04-15 08:08', 9.00::numeric(10,2), 'G', 'supplier1')$$);
SELECT uid, watermark, rows_in, rows_out, rows_late FROM ptf.state WHERE uid = 'bid-windows';
SELECT ptf.drop_state('bid-windows');
\echo '=== A window pipeline: per-second counts of a live table, closed by the'
\echo '=== idle rule one second after the clicks stop (no new row needed).'
CREATE TABLE clicks (page text, at timestamptz NOT NULL DEFAULT clock_timestamp());
ALTER TABLE clicks REPLICA IDENTITY FULL;   -- an update or delete takes its whole old row back
CREATE TYPE page_second AS (page text, window_start timestamptz, window_end timestamptz, clicks bigint);
CREATE TABLE page_seconds OF page_second;
SELECT ptf.create_pipeline('page-seconds', $$
    SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::page_second, 'tumble', 'at', '1 second',
        partition_by => '{page}', aggregates => 'count(*) AS clicks', idle_timeout => '1 second',
        changes => true, uid => 'page-seconds')$$, 'page_seconds');
INSERT INTO clicks (page) SELECT (ARRAY['home', 'pricing', 'docs'])[1 + g % 3] FROM generate_series(1, 30) g;
SELECT pg_temp.wait_for('SELECT coalesce(sum(clicks), 0) FROM page_seconds', 30) AS clicks_counted;
SELECT page, sum(clicks) AS clicks, count(*) AS seconds FROM page_seconds GROUP BY page ORDER BY page;
SELECT ptf.drop_pipeline('page-seconds');

\echo
\echo '=== (j) A stream that starts with what the table has (Debezium''s snapshot'
\echo '===     mode initial): snapshot => true reads the rows already there, then'
\echo '===     goes on with the changes after them, with nothing missed or doubled.'
CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric);
INSERT INTO accounts VALUES (1, 'ada', 100), (2, 'brian', 50);
\echo '=== Debezium''s codes: the rows read first are r, changes c, u and d.'
SELECT op, data, lsn IS NULL AS from_the_table
  FROM ptf.to_changelog(NULL::accounts, changes => true, uid => 'accounts', snapshot => true,
      op_mapping => '{"READ": "r", "INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}');
UPDATE accounts SET balance = balance + 25 WHERE id = 2;
INSERT INTO accounts VALUES (3, 'chen', 10);
SELECT op, data FROM ptf.to_changelog(NULL::accounts, changes => true, uid => 'accounts',
    snapshot => true, op_mapping => '{"READ": "r", "INSERT": "c", "UPDATE_AFTER": "u", "DELETE": "d"}');
SELECT ptf.drop_state('accounts');
\echo '=== The library is also an output plugin for tools outside the database'
\echo '=== (pg_recvlogical, Debezium-style consumers): JSON per change, options'
\echo '=== parsed once, only tables the reader may SELECT.'
SELECT 'slot' FROM pg_create_logical_replication_slot('demo_json', 'deduplicate_keep_first');
UPDATE accounts SET owner = 'Ada' WHERE id = 1;
DELETE FROM accounts WHERE id = 3;
SELECT data FROM pg_logical_slot_get_changes('demo_json', NULL, NULL,
    'format', 'debezium', 'tables', 'accounts', 'include_lsn', 'off', 'include_xid', 'off',
    'include_commit_time', 'off');
SELECT pg_drop_replication_slot('demo_json');

\echo
\echo '=== (k) State at scale: a uid whose state is large reads only the keys a'
\echo '===     call touches (through indexes on its state table), not all of it.'
CREATE TABLE visits (visitor bigint, page text);
INSERT INTO visits SELECT g, 'home' FROM generate_series(1, 300000) g;
\echo '=== 300000 visitors, each kept once: the first call writes them all.'
SELECT count(*) AS first_visits FROM ptf.deduplicate_keep_first(NULL::visits,
    partition_by => ARRAY['visitor'], uid => 'first_visit', query => 'SELECT * FROM visits');
SELECT state_load, keys_probed, keys_loaded FROM ptf.last_call_stats();
\echo '=== Five visits, two of them by new visitors: the call reads five keys.'
SELECT visitor, page FROM ptf.deduplicate_keep_first(NULL::visits,
    partition_by => ARRAY['visitor'], uid => 'first_visit',
    query => $$VALUES (7::bigint, 'docs'), (42, 'docs'), (300001, 'home'), (99, 'docs'), (300002, 'pricing')$$);
SELECT state_load, keys_probed, keys_loaded FROM ptf.last_call_stats();
SELECT keys, pg_size_pretty(bytes) AS size FROM ptf.state WHERE uid = 'first_visit';
SELECT ptf.drop_state('first_visit');

\echo
\echo '=== (l) Flink''s SQL as written: a window TVF + GROUP BY is planned as the'
\echo '===     window aggregate, row_number() over its windows as Window Top-N --'
\echo '===     one-shot, over a stream, in a pipeline.  EXPLAIN shows which.'
\echo '=== TVF + GROUP BY: HOP(5, 10) per supplier, no bid copied once per window.'
EXPLAIN (COSTS OFF)
SELECT window_start, window_end, (data).supplier, sum((data).price) AS total, count(*) AS bids
  FROM ptf.hop(NULL::bids, 'bidtime', '5 minutes', '10 minutes')
 GROUP BY window_start, window_end, (data).supplier;
SELECT window_start, window_end, (data).supplier, sum((data).price) AS total, count(*) AS bids
  FROM ptf.hop(NULL::bids, 'bidtime', '5 minutes', '10 minutes')
 GROUP BY window_start, window_end, (data).supplier ORDER BY 2, 3;
\echo '=== Window Top-N: the two dearest bids of every 10 minutes.'
SELECT * FROM (
  SELECT (data).item, (data).price, window_start, window_end,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).price DESC) AS rownum
    FROM ptf.tumble(NULL::bids, 'bidtime', '10 minutes')) t
 WHERE rownum <= 2 ORDER BY window_start, rownum;
\echo '=== Window deduplication: the last bid of every 10 minutes (its time DESC).'
SELECT * FROM (
  SELECT (data).item, (data).bidtime, window_start,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).bidtime DESC) AS rownum
    FROM ptf.tumble(NULL::bids, 'bidtime', '10 minutes')) t
 WHERE rownum = 1 ORDER BY window_start;
\echo '=== Top-N after window aggregation: the best supplier of every 10 minutes.'
SELECT * FROM (
  SELECT window_start, (data).supplier, sum((data).price) AS total,
         row_number() OVER (PARTITION BY window_start, window_end ORDER BY sum((data).price) DESC) AS rownum
    FROM ptf.tumble(NULL::bids, 'bidtime', '10 minutes') GROUP BY window_start, window_end, (data).supplier) t
 WHERE rownum = 1 ORDER BY window_start;
\echo '=== The same grouping over a live table''s changes, as a pipeline: each window'
\echo '=== written once, whole, when the watermark (5 s behind) passes its end.'
CREATE TABLE live_bids (LIKE bids);
ALTER TABLE live_bids REPLICA IDENTITY FULL;
CREATE TABLE supplier_windows (window_start timestamptz, window_end timestamptz, supplier text,
                               total numeric, bids bigint);
SELECT ptf.create_pipeline('supplier-windows', $$
    SELECT window_start, window_end, (data).supplier, sum((data).price), count(*)
      FROM ptf.tumble(NULL::live_bids, 'bidtime', '10 minutes', watermark_delay => '5 seconds',
                      changes => true, uid => 'supplier-windows')
     GROUP BY window_start, window_end, (data).supplier$$, 'supplier_windows');
INSERT INTO live_bids SELECT * FROM bids;
INSERT INTO live_bids VALUES ('2020-04-15 08:20:06', 1.00, 'H', 'supplier1');
SELECT pg_temp.wait_for('SELECT count(*) FROM supplier_windows', 4) AS windows_written;
SELECT * FROM supplier_windows ORDER BY window_start, supplier;
SELECT ptf.drop_pipeline('supplier-windows');

\echo
\echo '=== (m) An upsert source: a table with a primary key under the default replica'
\echo '===     identity logs only the key of an updated or deleted row. The stream keeps'
\echo '===     the last row of each key (Flink''s ChangelogNormalize), so an update moves'
\echo '===     its row between windows and a delete takes it out.'
CREATE TABLE plays (id int PRIMARY KEY, song text, played_at timestamp);
SELECT window_start, count(*) FROM ptf.tumble(NULL::plays, 'played_at', '1 hour',
    changes => true, uid => 'plays', watermark_delay => '1 hour') GROUP BY 1;
INSERT INTO plays VALUES (1, 'a', '2024-01-01 10:05'), (2, 'b', '2024-01-01 10:10'), (3, 'c', '2024-01-01 10:20');
UPDATE plays SET played_at = '2024-01-01 11:30' WHERE id = 2;
DELETE FROM plays WHERE id = 3;
INSERT INTO plays VALUES (4, 'd', '2024-01-01 12:00');   -- the watermark passes 11:00
SELECT window_start, count(*) FROM ptf.tumble(NULL::plays, 'played_at', '1 hour',
    changes => true, uid => 'plays', watermark_delay => '1 hour') GROUP BY 1;
SELECT uid, rows_in, rows_late, rows_skipped FROM ptf.state WHERE uid = 'plays';
SELECT ptf.drop_state('plays');

\echo
\echo '=== (n) A parallel call: keep-first over a table PostgreSQL would scan in'
\echo '===     parallel splits its blocks between workers; the answer is the serial one.'
CREATE TABLE taps AS SELECT g AS seq, g % 1000 AS device FROM generate_series(1, 200000) g;
ANALYZE taps;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
SELECT count(*) AS devices FROM ptf.deduplicate_keep_first(NULL::taps, partition_by => '{device}');
SELECT function, rows_in, rows_out, workers_planned, workers_launched FROM ptf.last_call_stats();
RESET min_parallel_table_scan_size;
RESET parallel_setup_cost;
