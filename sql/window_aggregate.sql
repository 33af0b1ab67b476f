-- ptf.window_aggregate: the sliced window aggregate (doc/design.md §2.5), checked
-- against Flink's documented answers (window-agg.md, window-tvf.md).
SET search_path = ptf, public;
SET TimeZone = 'UTC';
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE TABLE bid (bidtime timestamp, price numeric(10,2), item text, supplier_id text);
INSERT INTO bid VALUES
 ('2020-04-15 08:05', 4.00, 'C', 'supplier1'),
 ('2020-04-15 08:07', 2.00, 'A', 'supplier1'),
 ('2020-04-15 08:09', 5.00, 'D', 'supplier2'),
 ('2020-04-15 08:11', 3.00, 'B', 'supplier2'),
 ('2020-04-15 08:13', 1.00, 'E', 'supplier1'),
 ('2020-04-15 08:17', 6.00, 'F', 'supplier2');
CREATE TYPE total AS (window_start timestamp, window_end timestamp, total_price numeric);

-- TUMBLE, HOP, CUMULATE: one row per window, fired in window-end order
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) AS total_price');
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'hop', 'bidtime', '10 minutes', '5 minutes',
    aggregates => 'sum(price) AS total_price');
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'cumulate', 'bidtime', '10 minutes', '2 minutes',
    aggregates => 'sum(price) AS total_price');
-- emit_only_on_update (the seed's fireWindow): [08:10, 08:16) and [08:10, 08:20) equal
-- their previous windows and are not emitted
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'cumulate', 'bidtime', '10 minutes', '2 minutes',
    aggregates => 'sum(price) AS total_price', emit_only_on_update => true);
-- offset 1 minute
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes',
    "offset" => '1 minute', aggregates => 'sum(price) AS total_price');
-- equivalent offsets: -16, -6 and +4 minutes give one set of windows
SELECT o, (window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes',
    "offset" => o, aggregates => 'sum(price) AS total_price')).*
  FROM unnest(ARRAY[interval '-16 min', '-6 min', '4 min']) AS o;
-- the window columns may be left out; keys and aggregates fill columns by name
CREATE TYPE by_supplier AS (supplier_id text, total_price numeric, n bigint, window_end timestamptz);
SELECT * FROM window_aggregate(NULL::bid, NULL::by_supplier, 'tumble', 'bidtime', '10 minutes',
    partition_by => '{supplier_id}', aggregates => 'sum(price) AS total_price, count(*) AS n')
 ORDER BY window_end, supplier_id;

-- SESSION (gap 2 min), partitioned and not; touching sessions merge
CREATE TYPE session_total AS (window_start timestamp, window_end timestamp, supplier_id text,
                              total_price numeric);
SELECT * FROM window_aggregate(NULL::bid, NULL::session_total, 'session', 'bidtime', '2 minutes',
    partition_by => '{supplier_id}', aggregates => 'sum(price) AS total_price')
 ORDER BY window_start;
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'session', 'bidtime', '2 minutes',
    aggregates => 'sum(price) AS total_price');
-- window-tvf.md's session table: out of order, gap 5 min
CREATE TABLE bid2 (bidtime timestamp, price numeric(10,2), item text);
INSERT INTO bid2 VALUES ('2020-04-15 08:07', 4.00, 'A'), ('2020-04-15 08:06', 2.00, 'A'),
    ('2020-04-15 08:09', 5.00, 'B'), ('2020-04-15 08:08', 3.00, 'A'), ('2020-04-15 08:17', 1.00, 'B');
CREATE TYPE item_total AS (window_start timestamp, window_end timestamp, item text, total_price numeric);
SELECT * FROM window_aggregate(NULL::bid2, NULL::item_total, 'session', 'bidtime', '5 minutes',
    partition_by => '{item}', aggregates => 'sum(price) AS total_price')
 ORDER BY window_start, item;
SELECT * FROM window_aggregate(NULL::bid2, NULL::total, 'session', 'bidtime', '5 minutes',
    aggregates => 'sum(price) AS total_price');
-- a session that would end past the end of PostgreSQL's timestamps has no window, as an
-- aligned window: the row is passed over
INSERT INTO bid2 VALUES ('294276-12-31 23:59:59', 9.00, 'Z');
SELECT * FROM window_aggregate(NULL::bid2, NULL::item_total, 'session', 'bidtime', '5 minutes',
    partition_by => '{item}', aggregates => 'sum(price) AS total_price')
 ORDER BY window_start, item;
SELECT rows_in, rows_out FROM last_call_stats();
SELECT * FROM window_aggregate(NULL::bid2, NULL::item_total, 'tumble', 'bidtime', '5 minutes',
    partition_by => '{item}', aggregates => 'sum(price) AS total_price')
 ORDER BY window_start, item;
SELECT rows_in, rows_out FROM last_call_stats();
-- in the last 30 years of the range (the window arithmetic counts from 1970) a row's windows
-- are its own; Z's last window would end past the range: passed over
INSERT INTO bid2 VALUES ('294260-06-15 12:02', 7.00, 'Y');
SELECT * FROM window_aggregate(NULL::bid2, NULL::item_total, 'hop', 'bidtime', '10 minutes',
    '5 minutes', partition_by => '{item}', aggregates => 'sum(price) AS total_price')
 WHERE item IN ('Y', 'Z') ORDER BY window_start, item;
SELECT * FROM window_aggregate(NULL::bid2, NULL::item_total, 'cumulate', 'bidtime', '10 minutes',
    '5 minutes', partition_by => '{item}', aggregates => 'sum(price) AS total_price')
 WHERE item IN ('Y', 'Z') ORDER BY window_start, window_end, item;
-- a row whose first window ends within the range has its windows that do: X's at 23:52 is
-- in [23:45, 23:55) with W's at 23:47, not in [23:50, 00:00); CUMULATE likewise to 23:55
INSERT INTO bid2 VALUES ('294276-12-31 23:47', 1.00, 'W'), ('294276-12-31 23:52', 2.00, 'X');
SELECT * FROM window_aggregate(NULL::bid2, NULL::total, 'hop', 'bidtime', '10 minutes',
    '5 minutes', aggregates => 'sum(price) AS total_price')
 WHERE window_start > '294276-01-01' ORDER BY window_start;
SELECT * FROM window_aggregate(NULL::bid2, NULL::total, 'cumulate', 'bidtime', '20 minutes',
    '5 minutes', aggregates => 'sum(price) AS total_price')
 WHERE window_start > '294276-01-01' ORDER BY window_end;
DELETE FROM bid2 WHERE item IN ('W', 'X', 'Y', 'Z');

-- any aggregate: built-in, DISTINCT, FILTER, ORDER BY, expressions, expressions over
-- aggregates and keys; aggregates without a combine function (array_agg, string_agg)
CREATE TYPE many AS (window_start timestamp, window_end timestamp, supplier_id text,
    n bigint, total numeric, avg_price numeric, mx numeric, mn text, items text[], listed text,
    d bigint, cheap bigint, per_item numeric, label text, any_big boolean, sd numeric);
SELECT * FROM window_aggregate(NULL::bid, NULL::many, 'hop', 'bidtime', '10 minutes', '5 minutes',
    partition_by => '{supplier_id}',
    aggregates => $$count(*) AS n, sum(price * 2) / 2 AS total, avg(price) AS avg_price,
        max(price) AS mx, min(item) AS mn, array_agg(item ORDER BY item DESC) AS items,
        string_agg(item, ',' ORDER BY bidtime) AS listed, count(DISTINCT price > 3) AS d,
        count(*) FILTER (WHERE price < 3) AS cheap, round(sum(price) / count(*), 2) AS per_item,
        upper(supplier_id) || ':' || count(*) AS label, bool_or(price > 5) AS any_big,
        round(stddev(price), 3) AS sd$$)
 ORDER BY window_start, supplier_id;
-- a user-defined aggregate without a combine function, and one with
CREATE FUNCTION pg_temp.concat_sfunc(text, text) RETURNS text LANGUAGE sql IMMUTABLE
    AS $$ SELECT coalesce($1 || '+', '') || $2 $$;
CREATE AGGREGATE pg_temp.concat_all(text) (SFUNC = pg_temp.concat_sfunc, STYPE = text);
CREATE AGGREGATE pg_temp.my_sum(numeric) (SFUNC = numeric_add, STYPE = numeric,
    COMBINEFUNC = numeric_add, INITCOND = '0');
CREATE TYPE uda AS (window_start timestamp, window_end timestamp, everything text, s numeric);
SELECT * FROM window_aggregate(NULL::bid, NULL::uda, 'cumulate', 'bidtime', '10 minutes', '5 minutes',
    aggregates => 'pg_temp.concat_all(item) AS everything, pg_temp.my_sum(price) AS s');
-- DISTINCT over HOP slices: values merged across slices when a window fires
CREATE TYPE distinct_count AS (window_start timestamp, window_end timestamp, suppliers bigint);
SELECT * FROM window_aggregate(NULL::bid, NULL::distinct_count, 'hop', 'bidtime', '10 minutes', '5 minutes',
    aggregates => 'count(DISTINCT supplier_id) AS suppliers');

-- timestamptz and bigint time columns; target columns of another time type
CREATE TABLE bid_ms (bidtime bigint, price numeric(10,2));
INSERT INTO bid_ms SELECT (extract(epoch FROM bidtime) * 1000)::bigint, price FROM bid;
CREATE TYPE total_ms AS (window_start bigint, window_end bigint, window_time timestamptz, total_price numeric);
SELECT * FROM window_aggregate(NULL::bid_ms, NULL::total_ms, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) AS total_price');
CREATE TABLE bid_tz (bidtime timestamptz, price numeric(10,2));
INSERT INTO bid_tz SELECT bidtime AT TIME ZONE 'UTC', price FROM bid;
CREATE TYPE total_tz AS (window_start timestamptz, window_end timestamptz, total_price numeric);
SELECT * FROM window_aggregate(NULL::bid_tz, NULL::total_tz, 'hop', 'bidtime', '10 minutes', '5 minutes',
    aggregates => 'sum(price) AS total_price');
-- a HOP size need not be a multiple of its slide
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'hop', 'bidtime', '10 minutes', '4 minutes',
    aggregates => 'sum(price) AS total_price');
SELECT window_start, window_end, sum((data).price) FROM hop(NULL::bid, 'bidtime', '4 minutes', '10 minutes')
 GROUP BY 1, 2 ORDER BY 1;

-- a watermark in a bounded input fires windows as it passes them; late rows:
-- TUMBLE drops them, HOP and CUMULATE still count them in windows not fired yet
CREATE TABLE late (ord int, ts timestamp, v int);
INSERT INTO late VALUES (1, '2024-01-01 00:00:01', 1), (2, '2024-01-01 00:00:12', 10),
    (3, '2024-01-01 00:00:04', 100), (4, '2024-01-01 00:00:20', 1000), (5, '2024-01-01 00:00:09', 10000);
CREATE TYPE late_sum AS (window_start timestamp, window_end timestamp, s bigint, n bigint);
SELECT * FROM window_aggregate(NULL::late, NULL::late_sum, 'tumble', 'ts', '5 seconds',
    watermark_delay => '1 second', aggregates => 'sum(v) AS s, count(*) AS n',
    query => 'SELECT * FROM late ORDER BY ord');
SELECT rows_in, rows_out, rows_late FROM last_call_stats();
SELECT * FROM window_aggregate(NULL::late, NULL::late_sum, 'hop', 'ts', '10 seconds', '5 seconds',
    watermark_delay => '1 second', aggregates => 'sum(v) AS s, count(*) AS n',
    query => 'SELECT * FROM late ORDER BY ord');
SELECT rows_in, rows_out, rows_late FROM last_call_stats();
SELECT * FROM window_aggregate(NULL::late, NULL::late_sum, 'cumulate', 'ts', '15 seconds', '5 seconds',
    watermark_delay => '1 second', aggregates => 'sum(v) AS s, count(*) AS n',
    query => 'SELECT * FROM late ORDER BY ord');
SELECT rows_in, rows_out, rows_late FROM last_call_stats();

-- updating input and aggregates without an inverse (max, string_agg, DISTINCT): the
-- window keeps its rows, a retraction takes its row out, the window is computed when it fires
CREATE TYPE upd AS (window_start timestamp, window_end timestamp, mx numeric, items text,
    suppliers bigint, n bigint);
SELECT * FROM window_aggregate(NULL::bid, NULL::upd, 'hop', 'bidtime', '10 minutes', '5 minutes',
    aggregates => $$max(price) AS mx, string_agg(item, ',' ORDER BY item) AS items,
        count(DISTINCT supplier_id) AS suppliers, count(*) AS n$$,
    query => $q$SELECT k, b FROM (VALUES
        (1, '+I', ROW('2020-04-15 08:05', 4.00, 'C', 'supplier1')::bid),
        (2, '+I', ROW('2020-04-15 08:07', 6.00, 'A', 'supplier2')::bid),
        (3, '+I', ROW('2020-04-15 08:09', 5.00, 'D', 'supplier2')::bid),
        (4, '-U', ROW('2020-04-15 08:07', 6.00, 'A', 'supplier2')::bid),
        (5, '+U', ROW('2020-04-15 08:07', 3.00, 'A', 'supplier1')::bid),
        (6, '+I', ROW('2020-04-15 08:11', 1.00, 'B', 'supplier3')::bid),
        (7, '-D', ROW('2020-04-15 08:09', 5.00, 'D', 'supplier2')::bid)) v(o, k, b) ORDER BY o$q$)
 ORDER BY window_end;

-- a retraction is found by its whole row: one of a row never added takes nothing out, even
-- when its aggregate inputs are those of another (count(*) has none); the last input of a
-- window taken out leaves the aggregate as if it had none (NULL, not 0)
CREATE TYPE upd_count AS (window_start timestamp, window_end timestamp, n bigint, total interval);
CREATE TYPE dur AS (ts timestamp, d interval, tag text);
SELECT * FROM window_aggregate(NULL::dur, NULL::upd_count, 'tumble', 'ts', '1 hour',
    aggregates => 'count(*) AS n, sum(d) AS total',
    query => $q$SELECT k, r FROM (VALUES
        (1, '+I', ROW('2020-04-15 08:05', NULL, 'a')::dur),
        (2, '+I', ROW('2020-04-15 08:06', '5 minutes', 'b')::dur),
        (3, '-D', ROW('2020-04-15 08:07', '5 minutes', 'never added')::dur),
        (4, '-D', ROW('2020-04-15 08:06', '5 minutes', 'b')::dur)) v(o, k, r) ORDER BY o$q$);
-- target columns with a typmod get values made to fit, as an INSERT would make them
CREATE TYPE rounded AS (window_end timestamp, total numeric(10,1));
SELECT * FROM window_aggregate(NULL::bid, NULL::rounded, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) / 3 AS total') ORDER BY 1;
CREATE TYPE too_small AS (window_end timestamp, total numeric(2,1));
SELECT * FROM window_aggregate(NULL::bid, NULL::too_small, 'tumble', 'bidtime', '10 minutes',
    aggregates => 'sum(price) AS total');

-- errors, before any row is read: SQLSTATE and message
SELECT pg_temp.try(q) FROM (VALUES
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'sliding', 'bidtime', '10 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, NULL, 'bidtime', '10 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '1 mon')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '0')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'hop', 'bidtime', '10 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'hop', 'bidtime', '10 minutes', '-1 minute')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'cumulate', 'bidtime', '10 minutes', '3 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', '5 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'session', 'bidtime', '10 minutes', "offset" => '1 minute')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'hop', 'bidtime', '10 minutes', '5 minutes', emit_only_on_update => true, aggregates => 'sum(price) AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'nope', '10 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'item', '10 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::int, 'tumble', 'bidtime', '10 minutes')$$),
    -- the target and the aggregates must match by name and type
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price, count(*) AS n')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'count(*) AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price, max(price) AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price, min(price) AS window_end')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', partition_by => '{item}', aggregates => 'sum(price) AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::by_supplier, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price, count(*) AS n')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::late_sum, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS s, count(*) AS n')$$),
    -- the aggregates are a select list of aggregate calls, analyzed by PostgreSQL
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => NULL)$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price FROM pg_authid')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price; DROP TABLE bid')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'price AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(nope) AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) + price AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'percentile_cont(0.5) WITHIN GROUP (ORDER BY price)::numeric AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) OVER () AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => '(SELECT sum(price)) AS total_price')$$),
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(sum(price)) AS total_price')$$),
    -- updating input: inputs must be found again
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price * random()::numeric) AS total_price', query => $q$SELECT '+I', b FROM bid b$q$)$$),
    -- a NULL event time is an error when its row is read
    ($$SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(price) AS total_price', query => $q$VALUES (NULL::timestamp, 1.00::numeric(10,2), 'x', 'y')$q$)$$)
) AS t(q);
-- an error's position is in the aggregates (shown as the query), not in the statement
SELECT * FROM window_aggregate(NULL::bid, NULL::total, 'tumble', 'bidtime', '10 minutes', aggregates => 'sum(nope) AS total_price');
DROP TABLE bid, bid2, bid_ms, bid_tz, late;
DROP TYPE dur CASCADE;
