-- Window table-valued functions: each row with its windows (DESIGN 2.5),
-- checked against Flink's documented answers (window-tvf.md, window-agg.md).
SET search_path = ptf, public;
SET TimeZone = 'UTC';

-- Flink's Bid table (bidtime TIMESTAMP(3), price DECIMAL(10, 2))
CREATE TABLE bid (bidtime timestamp, price numeric(10,2), item text, supplier_id text);
INSERT INTO bid VALUES
 ('2020-04-15 08:05', 4.00, 'C', 'supplier1'),
 ('2020-04-15 08:07', 2.00, 'A', 'supplier1'),
 ('2020-04-15 08:09', 5.00, 'D', 'supplier2'),
 ('2020-04-15 08:11', 3.00, 'B', 'supplier2'),
 ('2020-04-15 08:13', 1.00, 'E', 'supplier1'),
 ('2020-04-15 08:17', 6.00, 'F', 'supplier2');

-- TUMBLE(10 min): each row its one window; window_time = end - 1 ms
SELECT (data).bidtime, (data).price, (data).item, window_start, window_end, window_time
  FROM tumble(NULL::bid, 'bidtime', '10 minutes');
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes') GROUP BY 1, 2 ORDER BY 1;

-- HOP(slide 5 min, size 10 min): each row in two windows, ascending
SELECT (data).item, window_start, window_end FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes');
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes') GROUP BY 1, 2 ORDER BY 1;

-- CUMULATE(step 2 min, size 10 min): every cumulative end after the row's step
SELECT (data).item, window_start, window_end FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes');
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM cumulate(NULL::bid, 'bidtime', '2 minutes', '10 minutes') GROUP BY 1, 2 ORDER BY 1, 2;

-- offset: TUMBLE(10 min, offset 1 min)
SELECT window_start, window_end, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes', "offset" => '1 minute') GROUP BY 1, 2 ORDER BY 1;
-- offsets matter modulo the size: -16, -6 and +4 minutes are one window; so are -4, +6, +16
CREATE TABLE one_row (ts timestamp);
INSERT INTO one_row VALUES ('2021-06-30 00:00:04');
SELECT o AS "offset", window_start, window_end
  FROM unnest(ARRAY[interval '-16 min', '-6 min', '-4 min', '0', '4 min', '6 min', '16 min']) AS o,
       LATERAL tumble(NULL::one_row, 'ts', '10 minutes', "offset" => o);
-- HOP and CUMULATE with an offset
SELECT window_start, window_end, sum((data).price)
  FROM hop(NULL::bid, 'bidtime', '5 minutes', '10 minutes', "offset" => '1 minute') GROUP BY 1, 2 ORDER BY 1;
SELECT window_start, window_end, sum((data).price)
  FROM cumulate(NULL::bid, 'bidtime', '4 minutes', '12 minutes', "offset" => '-3 minutes') GROUP BY 1, 2 ORDER BY 1, 2;

-- GROUPING SETS, ROLLUP and CUBE over the TVF are plain PostgreSQL
SELECT window_start, window_end, (data).supplier_id, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end, GROUPING SETS (((data).supplier_id), ())
 ORDER BY 1, 3 NULLS FIRST;
SELECT window_start, window_end, (data).supplier_id, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end, ROLLUP ((data).supplier_id)
 ORDER BY 1, 3 NULLS FIRST;
SELECT window_start, window_end, (data).supplier_id, (data).item, sum((data).price) AS total_price
  FROM tumble(NULL::bid, 'bidtime', '10 minutes')
 GROUP BY window_start, window_end, CUBE ((data).supplier_id, (data).item)
 ORDER BY 1, 3 NULLS FIRST, 4 NULLS FIRST;

-- HOP windows need not be a multiple of the slide: size 10 min, slide 4 min
SELECT (data).item, window_start, window_end
  FROM hop(NULL::bid, 'bidtime', '4 minutes', '10 minutes') WHERE (data).item IN ('C', 'F');

-- timestamptz is windowed in absolute time; window columns are timestamptz
CREATE TABLE bid_tz (bidtime timestamptz, price numeric(10,2));
INSERT INTO bid_tz SELECT bidtime AT TIME ZONE 'UTC', price FROM bid;
SET TimeZone = 'Asia/Kolkata';
SELECT window_start, window_end, sum((data).price)
  FROM tumble(NULL::bid_tz, 'bidtime', '1 hour') GROUP BY 1, 2;
-- a timestamp column is windowed on its own clock: the bounds keep its wall clock
SELECT window_start, window_end, window_start::timestamp AS wall_start, sum((data).price)
  FROM tumble(NULL::bid, 'bidtime', '1 hour') GROUP BY 1, 2;
SET TimeZone = 'UTC';
-- bigint is milliseconds since 1970
CREATE TABLE bid_ms (bidtime bigint, price numeric(10,2));
INSERT INTO bid_ms SELECT (extract(epoch FROM bidtime) * 1000)::bigint, price FROM bid;
SELECT window_start, window_end, sum((data).price)
  FROM tumble(NULL::bid_ms, 'bidtime', '10 minutes') GROUP BY 1, 2 ORDER BY 1;
-- times before 1970 and weeks: windows align to 1970-01-01 (a Thursday)
SELECT window_start, window_end FROM tumble(NULL::one_row, 'ts', '7 days',
    query => $$VALUES (timestamp '1969-12-31 23:00'), (timestamp '2024-01-01')$$);

-- the input may be a query; the TVF composes with plain SQL
SELECT (data).item, window_start
  FROM tumble(NULL::bid, 'bidtime', '10 minutes',
              query => $$SELECT * FROM bid WHERE price > 3$$) ORDER BY 1;

-- errors, before any row is read: SQLSTATE and message
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT pg_temp.try(q) FROM (VALUES
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '1 month')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '1 year 2 days')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '0')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '-5 minutes')$$),
    ($$SELECT * FROM hop(NULL::bid, 'bidtime', '0', '10 minutes')$$),
    ($$SELECT * FROM hop(NULL::bid, 'bidtime', '5 minutes', '-10 minutes')$$),
    ($$SELECT * FROM cumulate(NULL::bid, 'bidtime', '3 minutes', '10 minutes')$$),
    ($$SELECT * FROM cumulate(NULL::bid, 'bidtime', '1 minute', '10 minutes', "offset" => '1 month')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'nope', '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'price', '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, NULL, '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', NULL)$$),
    ($$SELECT * FROM tumble(NULL::int, 'bidtime', '10 minutes')$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '10 minutes', changes => true)$$),
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '10 minutes', query => $q$SELECT '+I', b FROM bid b$q$)$$),
    -- a NULL event time is an error when its row is read
    ($$SELECT * FROM tumble(NULL::bid, 'bidtime', '10 minutes',
        query => $q$VALUES (NULL::timestamp, 1.00::numeric(10,2), 'x', 'y')$q$)$$)
) AS t(q);
DROP TABLE bid, one_row, bid_tz, bid_ms;
