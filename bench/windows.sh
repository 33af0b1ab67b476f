#!/usr/bin/env bash
# bench/windows.sh: the window TVFs and ptf.window_aggregate against their
# plain-SQL formulations (GROUP BY date_bin; a join of each row to its
# windows for HOP and CUMULATE) on a throwaway server, side by side in one
# run; a window pipeline's throughput and the time from a window's close to
# its row in the sink.
#
#   bash bench/windows.sh        (as root: installs what is missing, builds)
#
# Data: ROWS rows (default 5M) over KEYS keys (default 10k), times spread
# over SPAN_HOURS hours (default 24), in random order (the worst case for per-key state: every row
# a different key and slice than the last), and the same rows in time
# order (an event table as it is written).  Windows: TUMBLE 1 hour; HOP 1 hour sliding
# by 5 minutes (size = 12 slides); CUMULATE 1 hour in 5-minute steps.
# Flink's SQL as written (planner/): a TVF + GROUP BY planned as the window
# aggregate is timed against the window_aggregate call of the same windows,
# against GROUP BY k, date_bin(...), and against the same SQL with the rule
# off (ptf.plan_window_sql; statements named *_off); Window Top-N (the top 3
# of each window and key) against the same SQL with the rule off.
# Every statement runs REPS times (default 3) after a warm-up round,
# alternating with its anchor in one session; the table shows medians and
# the ratio to the anchor, for each setting in RUNS (default
# "random:256MB random:16MB time:256MB": row order and work_mem, state in
# memory and spilled).  The pipeline part:
# PIPE_ROWS rows (default 1M) over 1000 keys written in transactions of
# 10000 with the clock as event time, a TUMBLE of 1 second per key; the
# time until the sink has every window the load closed, and how long after
# its end each window reached the sink.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

ROWS=${ROWS:-5000000}
KEYS=${KEYS:-10000}
SPAN_HOURS=${SPAN_HOURS:-24}
REPS=${REPS:-3}
RUNS=${RUNS:-"random:256MB random:16MB time:256MB"}
PIPE_ROWS=${PIPE_ROWS:-1000000}

ptf_bench_start "max_worker_processes = 16
ptf.pipeline_idle_time = 20ms"
dir=$PTF_BENCH_DIR

ptf_log "bench: $ROWS rows over $KEYS keys"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE bench_events AS
SELECT (hashint8(i) & 2147483647) % $KEYS AS k,
       timestamp '2024-01-01' + ((hashint8(i * 31) & 2147483647) % ($SPAN_HOURS * 3600000)) * interval '1 millisecond' AS ts,
       (hashint8(i * 7) & 2147483647) % 1000 AS v
  FROM generate_series(1, $ROWS) i;
CREATE TABLE bench_events_by_time AS SELECT * FROM bench_events ORDER BY ts;
VACUUM ANALYZE bench_events, bench_events_by_time;
CREATE TYPE wa_out AS (k int, window_start timestamp, window_end timestamp, n bigint, s bigint);
SQL

# name|statement; statements are timed by psql's \timing
statements() {
    cat <<'LIST'
tvf_tumble|SELECT count(*) FROM (SELECT window_start, window_end, count(*), sum((data).v) FROM ptf.tumble(NULL::bench_events, 'ts', '1 hour') GROUP BY 1, 2) s
sql_tumble_key|SELECT count(*) FROM (SELECT window_start, window_end, (data).k, count(*), sum((data).v) FROM ptf.tumble(NULL::bench_events, 'ts', '1 hour') GROUP BY 1, 2, 3) s
sql_hop|SELECT count(*) FROM (SELECT window_start, window_end, (data).k, count(*), sum((data).v) FROM ptf.hop(NULL::bench_events, 'ts', '5 minutes', '1 hour') GROUP BY 1, 2, 3) s
sql_hop_off|SELECT count(*) FROM (SELECT window_start, window_end, (data).k, count(*), sum((data).v) FROM ptf.hop(NULL::bench_events, 'ts', '5 minutes', '1 hour') GROUP BY 1, 2, 3) s
topn|SELECT count(*) FROM (SELECT (data).k, (data).v, window_start, row_number() OVER (PARTITION BY window_start, window_end, (data).k ORDER BY (data).v DESC) AS rownum FROM ptf.tumble(NULL::bench_events, 'ts', '1 hour')) t WHERE rownum <= 3
topn_off|SELECT count(*) FROM (SELECT (data).k, (data).v, window_start, row_number() OVER (PARTITION BY window_start, window_end, (data).k ORDER BY (data).v DESC) AS rownum FROM ptf.tumble(NULL::bench_events, 'ts', '1 hour')) t WHERE rownum <= 3
bin_tumble|SELECT count(*) FROM (SELECT date_bin('1 hour', ts, '2000-01-01'), date_bin('1 hour', ts, '2000-01-01') + interval '1 hour', count(*), sum(v) FROM bench_events GROUP BY 1, 2) s
wa_tumble|SELECT count(*) FROM ptf.window_aggregate(NULL::bench_events, NULL::wa_out, 'tumble', 'ts', '1 hour', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')
bin_key_tumble|SELECT count(*) FROM (SELECT k, date_bin('1 hour', ts, '2000-01-01'), date_bin('1 hour', ts, '2000-01-01') + interval '1 hour', count(*), sum(v) FROM bench_events GROUP BY 1, 2, 3) s
wa_hop|SELECT count(*) FROM ptf.window_aggregate(NULL::bench_events, NULL::wa_out, 'hop', 'ts', '1 hour', '5 minutes', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')
join_hop|SELECT count(*) FROM (SELECT k, ws, ws + interval '1 hour', count(*), sum(v) FROM bench_events, LATERAL (SELECT date_bin('5 minutes', ts, '2000-01-01') - i * interval '5 minutes' FROM generate_series(0, 11) i) w(ws) GROUP BY 1, 2, 3) s
wa_cumulate|SELECT count(*) FROM ptf.window_aggregate(NULL::bench_events, NULL::wa_out, 'cumulate', 'ts', '1 hour', '5 minutes', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')
join_cumulate|SELECT count(*) FROM (SELECT k, ws, we, count(*), sum(v) FROM bench_events, LATERAL (SELECT date_bin('1 hour', ts, '2000-01-01'), date_bin('1 hour', ts, '2000-01-01') + j * interval '5 minutes' FROM generate_series(1, 12) j) w(ws, we) WHERE we > ts GROUP BY 1, 2, 3) s
floor|SELECT count(*) FROM bench_events
LIST
}

for run in $RUNS; do
    order=${run%%:*}
    wm=${run#*:}
    table=bench_events
    [ "$order" = time ] && table=bench_events_by_time
    ptf_log "bench: rows in $order order, work_mem = $wm, $REPS rounds"
    script=$dir/run.sql
    {
        echo "SET work_mem = '$wm';"
        echo "SET max_parallel_workers_per_gather = 0;"
        echo "\\timing on"
        # a statement named *_off runs with the window rules off
        statements | sed "s/bench_events/$table/g" | while IFS='|' read -r name sql; do
            case $name in *_off) echo "SET ptf.plan_window_sql = off;" ;; esac
            echo "$sql \\g /dev/null"
            case $name in *_off) echo "RESET ptf.plan_window_sql;" ;; esac
        done
        for r in $(seq 1 "$REPS"); do
            statements | sed "s/bench_events/$table/g" | while IFS='|' read -r name sql; do
                case $name in *_off) echo "SET ptf.plan_window_sql = off;" ;; esac
                echo "\\echo @@ $name"
                echo "$sql;"
                case $name in *_off) echo "RESET ptf.plan_window_sql;" ;; esac
            done
        done
    } >"$script"
    chown postgres "$script"
    ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$script" >"$dir/out.txt"
    ptf_bench_times "$dir/out.txt" >"$dir/times.txt"
    m() { ptf_bench_median "$dir/times.txt" "$1"; }
    tt=$(m tvf_tumble); bt=$(m bin_tumble); wt=$(m wa_tumble); bk=$(m bin_key_tumble)
    wh=$(m wa_hop); jh=$(m join_hop); wc=$(m wa_cumulate); jc=$(m join_cumulate)
    sk=$(m sql_tumble_key); sh=$(m sql_hop); so=$(m sql_hop_off); tn=$(m topn); to=$(m topn_off)
    f=$(m floor)
    ab() { ptf_bench_above "$1" "$f" "$ROWS"; }
    echo
    echo "### $ROWS rows, $KEYS keys, $SPAN_HOURS hours, rows in $order order, work_mem = $wm (median of $REPS, ms)"
    echo
    echo "The floor: \`SELECT count(*)\` over the same table, $f ms; the cost above it in ns per input row:"
    echo "window_aggregate TUMBLE $(ab "$wt"), HOP $(ab "$wh"), CUMULATE $(ab "$wc"); planned HOP $(ab "$sh"), Window Top-N $(ab "$tn")."
    echo
    echo "| work | ptf | anchor | anchor ms | ratio | target |"
    echo "|---|---:|---|---:|---:|---:|"
    echo "| \`ptf.tumble\` 1 h + GROUP BY window (planned) | $tt | \`GROUP BY date_bin('1 hour', ts)\` | $bt | $(ptf_bench_ratio "$tt" "$bt") | <= 1.2x |"
    echo "| \`ptf.tumble\` 1 h + GROUP BY window, k (planned) | $sk | \`GROUP BY k, date_bin('1 hour', ts)\` | $bk | $(ptf_bench_ratio "$sk" "$bk") | <= 1.0x |"
    echo "| \`ptf.hop\` 1 h / 5 min + GROUP BY window, k (planned) | $sh | the \`window_aggregate\` call | $wh | $(ptf_bench_ratio "$sh" "$wh") | <= 1.2x |"
    echo "| \`ptf.hop\` 1 h / 5 min + GROUP BY window, k (planned) | $sh | the same SQL, \`ptf.plan_window_sql = off\` | $so | $(ptf_bench_ratio "$sh" "$so") | <= 0.15x |"
    echo "| Window Top-N (3 per 1 h window and k, planned) | $tn | the same SQL, \`ptf.plan_window_sql = off\` | $to | $(ptf_bench_ratio "$tn" "$to") | <= 0.5x |"
    echo "| \`window_aggregate\` TUMBLE 1 h per key | $wt | \`GROUP BY k, date_bin('1 hour', ts)\` | $bk | $(ptf_bench_ratio "$wt" "$bk") | <= 0.7x |"
    echo "| \`window_aggregate\` HOP 1 h / 5 min per key | $wh | join to each row's 12 windows, GROUP BY | $jh | $(ptf_bench_ratio "$wh" "$jh") | <= 0.07x |"
    echo "| \`window_aggregate\` CUMULATE 1 h / 5 min per key | $wc | join to each row's windows, GROUP BY | $jc | $(ptf_bench_ratio "$wc" "$jc") | <= 0.20x |"
done

# parallel query is off above: both sides run in one process
echo
echo "(max_parallel_workers_per_gather = 0 for both sides: ptf functions run in one process.)"

# ---- a window pipeline ----
# Throughput: rows whose event times advance 1 ms a row (1000 rows a
# second of event time over 100 keys), written in transactions of 10000;
# the time until the sink holds every window the rows closed.  Latency:
# then, in real time, a row, and after its window's end another row that
# moves the watermark past it; the time from that row's insert to the
# first row's window in the sink (the worker wakes on the new WAL).
ptf_log "bench: pipeline, $PIPE_ROWS rows"
ptf_psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE TABLE clicks (k int, v int, ts timestamptz NOT NULL);
ALTER TABLE clicks REPLICA IDENTITY FULL;
CREATE TABLE per_second (k int, window_start timestamptz, window_end timestamptz, n bigint, s bigint,
                         seen_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TYPE per_second_row AS (k int, window_start timestamptz, window_end timestamptz, n bigint, s bigint);
SELECT ptf.create_pipeline('per-second', $q$
    SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::per_second_row, 'tumble', 'ts',
        '1 second', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s',
        changes => true, uid => 'per-second')$q$, 'per_second');
SQL
batches=$((PIPE_ROWS / 10000))
for b in $(seq 0 $((batches - 1))); do
    echo "INSERT INTO clicks SELECT g % 100, g, timestamptz '2024-01-01 00:00+00' + ($b * 10000 + g) * interval '1 ms' FROM generate_series(0, 9999) g;"
done >"$dir/load.sql"
chown postgres "$dir/load.sql"
start=$(date +%s.%N)
ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$dir/load.sql"
written=$(date +%s.%N)
# the last row's second is the one window left open
closed=$(( (PIPE_ROWS / 1000) * 1000 ))
[ "$closed" -lt "$PIPE_ROWS" ] || closed=$((PIPE_ROWS - 1000))
until [ "$(ptf_psql -X -At -c "SELECT coalesce(sum(n), 0) >= $closed FROM per_second")" = t ]; do
    sleep 0.02
done
done_at=$(date +%s.%N)
echo
echo "### Window pipeline (TUMBLE 1 s over 100 keys, $PIPE_ROWS rows in transactions of 10000)"
echo
echo "| measure | value |"
echo "|---|---:|"
awk -v s="$start" -v w="$written" -v d="$done_at" -v n="$closed" \
    'BEGIN { printf "| write time (s) | %.2f |\n| every closed window in the sink after (s) | %.2f |\n| throughput (rows/s) | %.0f |\n", w - s, d - s, n / (d - s) }'

# latency, five times: from the insert that closes a window to its row in the sink
lat=""
for i in 1 2 3 4 5; do
    ptf_psql -X -q -c "INSERT INTO clicks VALUES (1000 + $i, 1, clock_timestamp())"
    # after the end of that row's second
    ptf_psql -X -q -c "SELECT pg_sleep(1.05 - extract(epoch FROM clock_timestamp())::numeric % 1)" >/dev/null
    closer=$(ptf_psql -X -q -At -c "INSERT INTO clicks VALUES (0, 0, clock_timestamp()) RETURNING ts")
    until [ "$(ptf_psql -X -At -c "SELECT count(*) FROM per_second WHERE k = 1000 + $i")" = 1 ]; do
        sleep 0.005
    done
    ms=$(ptf_psql -X -At -c "SELECT round(1000 * extract(epoch FROM seen_at - '$closer'::timestamptz)) FROM per_second WHERE k = 1000 + $i")
    lat="$lat $ms"
done
sorted=$(echo $lat | tr ' ' '\n' | sort -n | tr '\n' ' ')
echo "| from the row that closes a window to the window in the sink, 5 times (ms) | ${sorted% } |"
