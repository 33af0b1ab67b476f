#!/usr/bin/env bash
# bench/keep_first.sh: ptf.deduplicate_keep_first against the plain-SQL ways of
# keeping the first row per key, on a throwaway server, side by side in one run.
#
#   bash bench/keep_first.sh            (as root: installs what is missing, builds)
#
# Data: ROWS rows (default 5M) over KEYS keys (default 500k); a second batch of
# as many rows, half of whose keys are new.  Every statement runs REPS times
# (default 3), alternating with its anchors in one session; the table shows
# medians and the ratio to the anchor.  Each setting in WORK_MEMS (default
# "64MB 4MB") gets its own table.  Also printed: state memory per key.
# ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) = 1 is planned as keep-first
# (planner/first_rows_rule.c; ts is NOT NULL): it is timed against the
# deduplicate_keep_first call and against the same SQL with the rule off
# (ptf.plan_window_sql = off: statements named *_off).
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

ROWS=${ROWS:-5000000}
KEYS=${KEYS:-500000}
REPS=${REPS:-3}
WORK_MEMS=${WORK_MEMS:-"64MB 4MB"}

ptf_bench_start ""
dir=$PTF_BENCH_DIR

ptf_log "bench: generating $ROWS rows over $KEYS keys (twice)"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE bench_events AS
SELECT i AS id, (hashint8(i) & 2147483647) % $KEYS AS k,
       timestamptz '2024-01-01' + ((hashint8(i * 31) & 2147483647) % 86400000) * interval '1 millisecond' AS ts,
       'payload-' || i AS payload
  FROM generate_series(1, $ROWS) i;
CREATE TABLE bench_events2 AS
SELECT i AS id, $KEYS / 2 + (hashint8(i + $ROWS) & 2147483647) % $KEYS AS k,
       timestamptz '2024-01-02' + ((hashint8(i * 37) & 2147483647) % 86400000) * interval '1 millisecond' AS ts,
       'payload-' || i AS payload
  FROM generate_series(1, $ROWS) i;
ALTER TABLE bench_events ALTER ts SET NOT NULL;
VACUUM ANALYZE bench_events, bench_events2;
-- the uid's state after a first batch
SET work_mem = '256MB';
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', uid => 'bench') \g /dev/null
SQL

# name|statement; statements are timed by psql's \timing
statements() {
    cat <<'LIST'
arrival|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}')
distinct_on|SELECT count(*) FROM (SELECT DISTINCT ON (k) * FROM bench_events) s
event|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', on_time => 'ts')
distinct_on_ts|SELECT count(*) FROM (SELECT DISTINCT ON (k) * FROM bench_events ORDER BY k, ts) s
row_number|SELECT count(*) FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM bench_events) s WHERE rn = 1
row_number_off|SELECT count(*) FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM bench_events) s WHERE rn = 1
uid_batch2|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', uid => 'bench', query => 'SELECT * FROM bench_events2')
no_uid_batch2|SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', query => 'SELECT * FROM bench_events2')
floor|SELECT count(*) FROM bench_events
LIST
}

for wm in $WORK_MEMS; do
    ptf_log "bench: work_mem = $wm, $REPS rounds"
    script=$dir/run.sql
    {
        echo "SET work_mem = '$wm';"
        echo "\\timing on"
        # one warm-up round, not counted: caches, shared buffers
        statements | while IFS='|' read -r name sql; do
            if [ "$name" = uid_batch2 ]; then echo "BEGIN;"; fi
            case $name in *_off) echo "SET ptf.plan_window_sql = off;" ;; esac
            [ "$name" != floor ] || echo "SET max_parallel_workers_per_gather = 0;"
            echo "$sql \\g /dev/null"
            [ "$name" != floor ] || echo "RESET max_parallel_workers_per_gather;"
            case $name in *_off) echo "RESET ptf.plan_window_sql;" ;; esac
            if [ "$name" = uid_batch2 ]; then echo "ROLLBACK;"; fi
        done
        for r in $(seq 1 "$REPS"); do
            statements | while IFS='|' read -r name sql; do
                # the uid call must see the same state every round
                if [ "$name" = uid_batch2 ]; then echo "BEGIN;"; fi
                # a statement named *_off runs with the planner's rules off
                case $name in *_off) echo "SET ptf.plan_window_sql = off;" ;; esac
                # the floor is the scan the call makes: serial, as the call is
                [ "$name" != floor ] || echo "SET max_parallel_workers_per_gather = 0;"
                echo "\\echo @@ $name"
                echo "$sql;"
                [ "$name" != floor ] || echo "RESET max_parallel_workers_per_gather;"
                case $name in *_off) echo "RESET ptf.plan_window_sql;" ;; esac
                if [ "$name" = uid_batch2 ]; then echo "ROLLBACK;"; fi
            done
        done
    } >"$script"
    chown postgres "$script"
    ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$script" >"$dir/out.txt"
    # the uid call again, each time in a new session: nothing cached in the backend
    for r in $(seq 1 "$REPS"); do
        printf '%s\n' "SET work_mem = '$wm';" "\\timing on" "BEGIN;" "\\echo @@ uid_batch2_new_session" \
            "SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', uid => 'bench', query => 'SELECT * FROM bench_events2');" \
            "ROLLBACK;" >"$dir/cold.sql"
        chown postgres "$dir/cold.sql"
        ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$dir/cold.sql" >>"$dir/out.txt"
    done
    ptf_bench_times "$dir/out.txt" >"$dir/times.txt"
    m() { ptf_bench_median "$dir/times.txt" "$1"; }
    a=$(m arrival); d=$(m distinct_on); e=$(m event); dt=$(m distinct_on_ts)
    rn=$(m row_number_off); rp=$(m row_number); u=$(m uid_batch2); nu=$(m no_uid_batch2); uc=$(m uid_batch2_new_session)
    f=$(m floor)
    echo
    echo "### $ROWS rows, $KEYS keys, work_mem = $wm (median of $REPS, ms)"
    echo
    echo "The floor: \`SELECT count(*)\` over the same table, serial as the call is, $f ms; each keep-first call's cost above it"
    echo "in ns per row: by arrival $(ptf_bench_above "$a" "$f" "$ROWS"), by event time $(ptf_bench_above "$e" "$f" "$ROWS") (goal for arrival: <= 60)."
    echo
    echo "| work | ptf | anchor | anchor ms | ratio | target |"
    echo "|---|---:|---|---:|---:|---:|"
    echo "| keep-first by arrival | $a | \`SELECT DISTINCT ON (k) *\` | $d | $(ptf_bench_ratio "$a" "$d") | <= 0.25x |"
    echo "| keep-first by event time | $e | \`DISTINCT ON (k) ... ORDER BY k, ts\` | $dt | $(ptf_bench_ratio "$e" "$dt") | <= 0.30x |"
    echo "| keep-first by event time | $e | \`ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) = 1\`, rule off | $rn | $(ptf_bench_ratio "$e" "$rn") | <= 0.5x |"
    echo "| \`ROW_NUMBER() ... = 1\` (planned as keep-first) | $rp | the \`deduplicate_keep_first\` call | $e | $(ptf_bench_ratio "$rp" "$e") | <= 1.2x |"
    echo "| \`ROW_NUMBER() ... = 1\` (planned as keep-first) | $rp | the same SQL, \`ptf.plan_window_sql = off\` | $rn | $(ptf_bench_ratio "$rp" "$rn") | <= 0.5x |"
    echo "| uid, second batch (half new keys) | $u | same call without uid | $nu | $(ptf_bench_ratio "$u" "$nu") | <= 2x |"
    echo "| uid, second batch, in a new session | $uc | same call without uid | $nu | $(ptf_bench_ratio "$uc" "$nu") | <= 2x |"
done

echo
echo "### State memory per key (work_mem = 256MB, the serial call, ptf.last_call_stats())"
echo
ptf_psql -X -q -v ON_ERROR_STOP=1 -P format=unaligned -P fieldsep='|' -t <<'SQL' |
SET work_mem = '256MB';
SET max_parallel_workers_per_gather = 0;
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}') \g /dev/null
SELECT 'integer key 0..499,999, by arrival (a bitmap: the statistics say the keys are dense)', keys, state_bytes, round(state_bytes::numeric / keys, 1), 4 FROM ptf.last_call_stats();
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}',
    query => $$SELECT id, k * 4099, ts, payload FROM bench_events$$) \g /dev/null
SELECT 'integer key spread out (k * 4099, through a query: the map), by arrival', keys, state_bytes, round(state_bytes::numeric / keys, 1), 4 FROM ptf.last_call_stats();
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{payload}',
    query => $$SELECT id, k, ts, 'user-' || k FROM bench_events$$) \g /dev/null
SELECT 'text key (''user-NNNNNN''), by arrival', keys, state_bytes, round(state_bytes::numeric / keys, 1), 12 FROM ptf.last_call_stats();
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', on_time => 'ts') \g /dev/null
SELECT 'integer key, by event time (keeps a candidate row; a slot per key of the range)', keys, state_bytes, round(state_bytes::numeric / keys, 1), 4 FROM ptf.last_call_stats();
SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::bench_events, partition_by => '{k}', on_time => 'ts',
    query => $$SELECT id, k * 4099, ts, payload FROM bench_events$$) \g /dev/null
SELECT 'integer key spread out, by event time (the map)', keys, state_bytes, round(state_bytes::numeric / keys, 1), 4 FROM ptf.last_call_stats();
SQL
awk -F'|' 'BEGIN { print "| state | keys | bytes | bytes per key | key bytes |"; print "|---|---:|---:|---:|---:|" }
           { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
