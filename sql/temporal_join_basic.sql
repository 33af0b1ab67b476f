-- ptf.temporal_join over bounded inputs: each probe row with the build
-- version valid at its own event time (doc/flink-semantics.md §7.2), INNER and LEFT.
-- Cases from Flink's TemporalJoinTestPrograms and
-- TemporalRowTimeJoinOperatorTest, each output checked by hand.

CREATE SCHEMA tj;
SET search_path = tj, ptf;

-- ---- orders x rates (TemporalJoinTestPrograms): a plain table is a history ----
CREATE TABLE rates_history (currency text, rate int, rate_time timestamptz);
CREATE TABLE orders (amount int, currency text, order_time timestamptz);
INSERT INTO rates_history VALUES
    ('USD', 102, '2020-10-10 00:00:41+00'), ('Euro', 114, '2020-10-10 00:00:41+00'),
    ('Yen', 1, '2020-10-10 00:00:41+00'), ('Euro', 116, '2020-10-10 00:00:45+00'),
    ('Euro', 119, '2020-10-10 00:00:47+00'),
    -- after Flink's restore
    ('USD', 103, '2020-10-10 00:00:58+00'), ('Euro', 120, '2020-10-10 00:00:59+00');
INSERT INTO orders VALUES
    (2, 'Euro', '2020-10-10 00:00:42+00'), (1, 'USD', '2020-10-10 00:00:43+00'),
    (50, 'Yen', '2020-10-10 00:00:44+00'), (3, 'Euro', '2020-10-10 00:00:45+00'),
    (1, 'Euro', '2020-10-10 00:00:58+00'), (1, 'USD', '2020-10-10 00:00:58+00');

-- 3 Euro @45 takes 116 @45 (valid from its own time), 1 Euro @58 takes
-- 119 @47 (120 is @59), 1 USD @58 takes 103 @58: 228 102 50 348 119 103
SELECT (probe).amount * (build).rate AS converted, (probe).currency, (probe).order_time,
       (build).rate_time
  FROM temporal_join(NULL::orders, NULL::rates_history, probe_time => 'order_time',
                     build_time => 'rate_time', probe_key => '{currency}')
 ORDER BY (probe).order_time, (probe).currency;

-- the same as a stream, in three steps of a uid with a watermark 1 s behind
-- each side's greatest time.  Step 1: rates reach 47 (watermark 46), orders
-- 45 (watermark 44): the join watermark 44 fires the orders at 42 43 44
-- (228 102 50); the one at 45 stays buffered.
SELECT (probe).amount * (build).rate AS converted
  FROM temporal_join(NULL::orders, NULL::rates_history, probe_time => 'order_time',
                     build_time => 'rate_time', probe_key => '{currency}', uid => 'rates',
                     watermark_delay => '1 second',
                     probe_query => $$SELECT * FROM tj.orders WHERE order_time < '2020-10-10 00:00:50+00'$$,
                     build_query => $$SELECT * FROM tj.rates_history WHERE rate_time < '2020-10-10 00:00:50+00'$$)
 ORDER BY (probe).order_time;
SELECT keys, rows_in, rows_out, rows_late FROM state WHERE uid = 'rates';
-- step 2, from the kept state: rates reach 59 (watermark 58), orders 58
-- (57): the buffered 3 Euro at 45 fires with 116 at 45 (348); versions of
-- Euro before 47 go (the newest at or below 57 is kept); both orders at 58 wait
SELECT (probe).amount * (build).rate AS converted
  FROM temporal_join(NULL::orders, NULL::rates_history, probe_time => 'order_time',
                     build_time => 'rate_time', probe_key => '{currency}', uid => 'rates',
                     watermark_delay => '1 second',
                     probe_query => $$SELECT * FROM tj.orders WHERE order_time > '2020-10-10 00:00:50+00'$$,
                     build_query => $$SELECT * FROM tj.rates_history WHERE rate_time > '2020-10-10 00:00:50+00'$$)
 ORDER BY (probe).currency;
-- step 3: both sides move to 70 (watermark 69): 1 Euro at 58 takes 119 at
-- 47 (120 is at 59), 1 USD at 58 takes 103 at 58 (its own time counts)
SELECT (probe).amount * (build).rate AS converted, (probe).currency
  FROM temporal_join(NULL::orders, NULL::rates_history, probe_time => 'order_time',
                     build_time => 'rate_time', probe_key => '{currency}', uid => 'rates',
                     watermark_delay => '1 second',
                     probe_query => $$VALUES (1, 'CHF', timestamptz '2020-10-10 00:01:10+00')$$,
                     build_query => $$VALUES ('CHF', 1, timestamptz '2020-10-10 00:01:10+00')$$)
 ORDER BY (probe).currency;
SELECT keys, rows_in, rows_out, rows_late FROM state WHERE uid = 'rates';
-- without a delay the watermark is each side's greatest time: the second
-- order at 58 arrives at the join watermark 58, late, dropped and counted
SELECT (probe).amount * (build).rate AS converted
  FROM temporal_join(NULL::orders, NULL::rates_history, probe_time => 'order_time',
                     build_time => 'rate_time', probe_key => '{currency}', uid => 'rates0',
                     probe_query => $$SELECT * FROM tj.orders WHERE order_time > '2020-10-10 00:00:50+00'$$,
                     build_query => $$SELECT * FROM tj.rates_history$$);
SELECT rows_in, rows_out, rows_late FROM state WHERE uid = 'rates0';
SELECT drop_state('rates0');
SELECT drop_state('rates');

-- ---- version selection around a delete: the operator test's main case ----
-- rows (t, k, v); the build side a changelog: -U ignored, +U at 7 a version,
-- -D at 9 the key's absence from 9 on, then a new version at 10
CREATE TABLE l (t bigint, k text, v text);
CREATE TABLE r (t bigint, k text, v text);
INSERT INTO l VALUES (1, 'k1', '1a1'), (3, 'k1', '1a3'), (6, 'k2', '2a3'),
                     (9, 'k2', '5a11'), (11, 'k2', '5a12');
CREATE VIEW r_changes AS
SELECT * FROM (VALUES
    ('+I', ROW(2, 'k1', '1a2')::tj.r), ('+I', ROW(4, 'k2', '2a4')::tj.r),
    ('-U', ROW(7, 'k2', '2a4')::tj.r), ('+U', ROW(7, 'k2', '2a5')::tj.r),
    ('-D', ROW(9, 'k2', '2a5')::tj.r), ('+I', ROW(10, 'k2', '2a6')::tj.r)) c(kind, data);
-- INNER: (3 k1 1a3 | 2 k1 1a2), (6 k2 2a3 | 4 k2 2a4), (11 k2 5a12 | 10 k2 2a6)
SELECT (probe).*, (build).*
  FROM temporal_join(NULL::l, NULL::r, probe_time => 't', build_time => 't',
                     probe_key => '{k}', build_query => 'SELECT * FROM tj.r_changes')
 ORDER BY (probe).t;
-- LEFT adds (1 k1 1a1 | none yet) and (9 k2 5a11 | the -D at 9: absent)
SELECT (probe).*, (build).*
  FROM temporal_join(NULL::l, NULL::r, probe_time => 't', build_time => 't',
                     probe_key => '{k}', join_type => 'left',
                     build_query => 'SELECT * FROM tj.r_changes')
 ORDER BY (probe).t;

-- boundary: a version at 2 applies at 2; a deletion at 4 applies at 4
SELECT (probe).*, (build).*
  FROM temporal_join(NULL::l, NULL::r, probe_time => 't', build_time => 't', probe_key => '{k}',
                     probe_query => $$VALUES (2::bigint, 'k1', '1a2'), (4, 'k1', '1a4')$$,
                     build_query => $$VALUES ('+I', ROW(2, 'k1', '2a2')::tj.r), ('-D', ROW(4, 'k1', '2a2')::tj.r)$$);

-- negative times (LEFT): versions at -10, -4, 2
-- 3 -> 2, -7 -> -10, -12 -> none, -3 -> -4, 1 -> -4
SELECT (probe).t, (build).t AS version
  FROM temporal_join(NULL::l, NULL::r, probe_time => 't', build_time => 't', probe_key => '{k}',
                     join_type => 'left',
                     probe_query => $$VALUES (3::bigint, 'k1', 'a'), (-7, 'k1', 'b'), (-12, 'k1', 'c'),
                                             (-3, 'k1', 'd'), (1, 'k1', 'e')$$,
                     build_query => $$VALUES (-10::bigint, 'k1', 'x'), (-4, 'k1', 'y'), (2, 'k1', 'z')$$)
 ORDER BY (probe).t;

-- a later version of the same time replaces the earlier (the history's
-- order): the probe at 5 sees 'second'
SELECT (probe).t, (build).v
  FROM temporal_join(NULL::l, NULL::r, probe_time => 't', build_time => 't', probe_key => '{k}',
                     probe_query => $$VALUES (5::bigint, 'k1', 'p')$$,
                     build_query => $$VALUES (5::bigint, 'k1', 'first'), (5, 'k1', 'second')$$);

-- emission per key in probe arrival order (5, 3, 4), as Flink's
-- testEmissionInArrivalOrder: no ORDER BY
SELECT (probe).t, (build).v
  FROM temporal_join(NULL::l, NULL::r, probe_time => 't', build_time => 't', probe_key => '{k}',
                     probe_query => $$VALUES (5::bigint, 'k1', 'p'), (3, 'k1', 'p'), (4, 'k1', 'p')$$,
                     build_query => $$VALUES (1::bigint, 'k1', 'v1')$$);

-- ---- NULL and multi-column keys ----
CREATE TABLE acct_rates (region text, cur text, rate numeric, since date);
CREATE TABLE payments (id int, region text, cur text, amount numeric, paid date);
INSERT INTO acct_rates VALUES ('eu', 'USD', 0.9, '2024-01-01'), ('us', 'USD', 1.0, '2024-01-01'),
    ('eu', 'USD', 0.95, '2024-02-01'), ('eu', NULL, 7, '2024-01-01'), (NULL, 'USD', 8, '2024-01-01');
-- timestamps, not dates: time columns are timestamp, timestamptz or bigint ms
CREATE VIEW acct_rates_v AS SELECT region, cur, rate, since::timestamp AS since FROM acct_rates;
CREATE VIEW payments_v AS SELECT id, region, cur, amount, paid::timestamp AS paid FROM payments;
INSERT INTO payments VALUES (1, 'eu', 'USD', 10, '2024-01-15'), (2, 'eu', 'USD', 10, '2024-02-15'),
    (3, 'us', 'USD', 10, '2024-02-15'), (4, 'eu', NULL, 10, '2024-02-15'),
    (5, NULL, 'USD', 10, '2024-02-15'), (6, 'us', 'EUR', 10, '2024-02-15'),
    (7, 'eu', 'USD', 10, '2023-12-31');
-- INNER: 1 -> 0.9, 2 -> 0.95, 3 -> 1.0; a key with a NULL part never
-- matches (4, 5: not even the build rows with NULL parts), 6 has no
-- version, 7 is before every version
SELECT (probe).id, (build).rate
  FROM temporal_join(NULL::payments_v, NULL::acct_rates_v, probe_time => 'paid', build_time => 'since',
                     probe_key => '{region,cur}')
 ORDER BY 1;
-- LEFT: all seven, NULL build for 4 5 6 7
SELECT (probe).id, (build).rate, build IS NULL AS unmatched
  FROM temporal_join(NULL::payments_v, NULL::acct_rates_v, probe_time => 'paid', build_time => 'since',
                     probe_key => '{region,cur}', join_type => 'LEFT')
 ORDER BY 1;
-- build_key names the build's own columns
CREATE VIEW acct_rates_renamed AS SELECT region AS r_region, cur AS r_cur, rate, since FROM acct_rates_v;
SELECT (probe).id, (build).rate
  FROM temporal_join(NULL::payments_v, NULL::acct_rates_renamed, probe_time => 'paid', build_time => 'since',
                     probe_key => '{region,cur}', build_key => '{r_region,r_cur}')
 ORDER BY 1;

-- ---- residual condition: evaluated against the chosen version only ----
-- payment 2 (Feb 15) chooses 0.95; with rate < 0.93 it does not match,
-- and the older 0.9 is not tried: INNER keeps 1 only; LEFT pads 2
SELECT (probe).id, (build).rate
  FROM temporal_join(NULL::payments_v, NULL::acct_rates_v, probe_time => 'paid', build_time => 'since',
                     probe_key => '{region,cur}', condition => 'build.rate < 0.93 AND probe.region = ''eu''')
 ORDER BY 1;
SELECT (probe).id, (build).rate
  FROM temporal_join(NULL::payments_v, NULL::acct_rates_v, probe_time => 'paid', build_time => 'since',
                     probe_key => '{region,cur}', join_type => 'left',
                     condition => 'build.rate < 0.93 AND probe.region = ''eu''')
 ORDER BY 1;
-- whole rows and functions, NULL is no match
SELECT (probe).id, (build).rate
  FROM temporal_join(NULL::payments_v, NULL::acct_rates_v, probe_time => 'paid', build_time => 'since',
                     probe_key => '{region,cur}',
                     condition => $$build IS NOT NULL AND round(probe.amount * build.rate) >= NULLIF(probe.id, 3)$$)
 ORDER BY 1;

-- what the call did
SELECT function, rows_in, rows_out, rows_late, keys FROM last_call_stats();

DROP SCHEMA tj CASCADE;
