#!/usr/bin/env bash
# bench/parallel.sh: one-shot calls run serially and with parallel workers
# (engine/parallel.c), side by side in one run on a throwaway server.
#
#   bash bench/parallel.sh            (as root: installs what is missing, builds)
#
# Data: ROWS rows (default 10M) over KEYS keys (default ROWS / 10) with a
# timestamp over a day and a numeric value; WKEYS keys (default 10000) for
# the windows and for keep-first again (few answers); PROBES (default ROWS) probes over VERSIONS versions (default
# 100k) of TJKEYS keys (default 10000) for the temporal join.  Each
# statement runs REPS times (default 5) after a warm-up, serial
# (max_parallel_workers_per_gather = 0) and parallel (WORKERS, default 2)
# side by side in one session, serial first in odd rounds and parallel
# first in even ones (a machine that drifts slower or faster within a
# round does not favour one side in every round); the table shows
# medians, their ratio, the median
# of each round's own ratio (paired: what the machine did in that round
# weighs on both calls), and the workers planned and launched
# (ptf.last_call_stats()).  SELECT count(*) over the table is the scan
# floor.  Also printed: the leader's state memory per key beside the
# serial call's.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

ROWS=${ROWS:-10000000}
KEYS=${KEYS:-$((ROWS / 10))}
WKEYS=${WKEYS:-10000}
PROBES=${PROBES:-$ROWS}
VERSIONS=${VERSIONS:-100000}
TJKEYS=${TJKEYS:-10000}
REPS=${REPS:-5}
WORKERS=${WORKERS:-2}
WORK_MEM=${WORK_MEM:-256MB}

ptf_bench_start "max_worker_processes = 16
max_parallel_workers = 8"
dir=$PTF_BENCH_DIR

ptf_log "bench: generating $ROWS rows over $KEYS keys, $PROBES probes over $VERSIONS versions"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE bench_events AS
SELECT i AS id, (hashint8(i) & 2147483647) % $KEYS AS k,
       (hashint8(i * 13) & 2147483647) % $WKEYS AS wk,
       timestamp '2024-01-01' + ((hashint8(i * 31) & 2147483647) % 86400000) * interval '1 millisecond' AS ts,
       ((hashint8(i * 7) & 2147483647) % 100000) / 100.0 AS v
  FROM generate_series(1, $ROWS) i;
CREATE TABLE bench_versions AS
SELECT DISTINCT ON (k, ts) k, ts, rate
  FROM (SELECT (hashint8(i) & 2147483647) % $TJKEYS AS k,
               timestamp '2024-01-01' + ((hashint8(i * 31) & 2147483647) % 86400000) * interval '1 millisecond' AS ts,
               (i % 1000) / 10.0 AS rate
          FROM generate_series(1, $VERSIONS) i) g
 ORDER BY k, ts;
CREATE TABLE bench_probes AS
SELECT i AS id, (hashint8(i * 7) & 2147483647) % $TJKEYS AS k,
       timestamp '2024-01-01' + ((hashint8(i * 37) & 2147483647) % 86400000) * interval '1 millisecond' AS ts
  FROM generate_series(1, $PROBES) i;
VACUUM ANALYZE bench_events, bench_versions, bench_probes;
-- the tables' writes out of the way before anything is timed
CHECKPOINT;
CREATE TYPE wa_out AS (wk int, window_start timestamp, window_end timestamp, n bigint, s numeric);
SQL

# name|statement; each runs serial (name_s) and parallel (name_p)
statements() {
    cat <<'LIST'
count|SELECT count(*) FROM bench_events
arrival|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}')
event|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', on_time => 'ts')
arrival_few|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{wk}')
event_few|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{wk}', on_time => 'ts')
tumble|SELECT count(*) FROM ptf.window_aggregate(NULL::bench_events, NULL::wa_out, 'tumble', 'ts', '1 hour', partition_by => '{wk}', aggregates => 'count(*) AS n, sum(v) AS s')
hop|SELECT count(*) FROM ptf.window_aggregate(NULL::bench_events, NULL::wa_out, 'hop', 'ts', '1 hour', '15 minutes', partition_by => '{wk}', aggregates => 'count(*) AS n, sum(v) AS s')
tj|SELECT count(*) FROM ptf.temporal_join(NULL::bench_probes, NULL::bench_versions, 'ts', 'ts', '{k}')
LIST
}

script=$dir/run.sql
{
    echo "SET work_mem = '$WORK_MEM';"
    echo "\\timing on"
    # one warm-up round, not counted: caches, shared buffers, hint bits
    statements | while IFS='|' read -r name sql; do echo "$sql \\g /dev/null"; done
    for r in $(seq 1 "$REPS"); do
        statements | while IFS='|' read -r name sql; do
            if [ $((r % 2)) = 1 ]; then modes="s p"; else modes="p s"; fi
            for mode in $modes; do
                if [ $mode = s ]; then echo "SET max_parallel_workers_per_gather = 0;"
                else echo "SET max_parallel_workers_per_gather = $WORKERS;"; fi
                echo "\\echo @@ ${name}_$mode"
                echo "$sql;"
                echo "\\echo @@"
                if [ "$name" != count ]; then
                    echo "SELECT '@@w ${name}_$mode', workers_planned, workers_launched, keys, state_bytes FROM ptf.last_call_stats();"
                fi
            done
        done
    done
} >"$script"
chown postgres "$script"
ptf_log "bench: $REPS rounds, serial and $WORKERS workers"
ptf_psql -X -q -v ON_ERROR_STOP=1 -P format=unaligned -P fieldsep='|' -f "$script" >"$dir/out.txt"
ptf_bench_times "$dir/out.txt" >"$dir/times.txt"
m() { ptf_bench_median "$dir/times.txt" "$1"; }
# each round of NAME: "serial parallel" ms, a line a round
rounds() {
    awk -v s="$1_s" -v p="$1_p" '$1 == s { a[++ns] = $2 } $1 == p { b[++np] = $2 }
        END { for (i = 1; i <= ns && i <= np; i++) print a[i], b[i] }' "$dir/times.txt"
}
# the median of the rounds' own ratios, NAME_p / NAME_s of the same round
paired() {
    rounds "$1" | awk '{ printf "%.6f\n", $2 / $1 }' | sort -n |
        awk '{ r[NR] = $1 } END { printf "%.2fx", r[int((NR + 1) / 2)] }'
}
w() { awk -F'|' -v n="@@w $1" '$1 == n { v = $2 "/" $3 } END { print v }' "$dir/out.txt"; }
perkey() { awk -F'|' -v n="@@w $1" '$1 == n && $4 > 0 { v = sprintf("%.1f", $5 / $4) } END { print v }' "$dir/out.txt"; }

cs=$(m count_s); cp=$(m count_p)
echo
echo "### $ROWS rows, work_mem = $WORK_MEM, serial against $WORKERS workers (median of $REPS, ms)"
echo
echo "| work | serial | parallel | ratio | paired | goal | workers planned/launched | serial above floor, ns/row |"
echo "|---|---:|---:|---:|---:|---:|---|---:|"
echo "| \`SELECT count(*)\` (the scan floor; PostgreSQL's own parallel scan) | $cs | $cp | $(ptf_bench_ratio "$cp" "$cs") | $(paired count) | | | |"
row() {
    local name=$1 label=$2 s p floor=""
    s=$(m "${name}_s"); p=$(m "${name}_p")
    # over bench_events only: the floor is its scan
    [ "$name" = tj ] || floor=$(awk -v s="$s" -v c="$cs" -v r="$ROWS" 'BEGIN { printf "%.0f", (s - c) * 1e6 / r }')
    echo "| $label | $s | $p | $(ptf_bench_ratio "$p" "$s") | $(paired "$name") | <= 0.65x | $(w "${name}_p") | $floor |"
}
row arrival "keep-first by arrival, $KEYS keys"
row event "keep-first by event time, $KEYS keys"
row arrival_few "keep-first by arrival, $WKEYS keys"
row event_few "keep-first by event time, $WKEYS keys"
row tumble "window_aggregate TUMBLE 1 h, $WKEYS keys"
row hop "window_aggregate HOP 1 h / 15 min, $WKEYS keys"
row tj "temporal join, $PROBES probes x $VERSIONS versions"

echo
echo "### State memory per key of the call (serial) and of the leader (parallel), bytes"
echo
echo "| work | serial | parallel leader |"
echo "|---|---:|---:|"
for n in arrival event tumble tj; do
    echo "| $n | $(perkey "${n}_s") | $(perkey "${n}_p") |"
done

echo
echo "### Each round: serial / parallel ms (round 1 ran serial first, round 2 parallel first, ...)"
echo
for n in count arrival event arrival_few event_few tumble hop tj; do
    echo "- $n:$(rounds "$n" | awk '{ printf " %.0f / %.0f", $1, $2 }')"
done
