#!/usr/bin/env bash
# bench/pipeline.sh: a keep-first pipeline behind pgbench inserting events
# at steady rates, on a throwaway server: the rate the pipeline sustains
# and the end-to-end lag (the event's insert to its row in the sink), with
# the worker woken at commit (ptf.pipeline_wake_at_commit on) and without
# (off: it looks every ptf.pipeline_idle_time), in the same run.
#
#   bash bench/pipeline.sh          (as root: installs what is missing, builds)
#
# Events come in transactions of ROWS_PER_TXN rows (default 10); 20% of
# them repeat a key seen before.  For each setting in WAKE_MODES (default
# "off on") and each rate in RATES (changes/s, default "5000 20000")
# pgbench runs RUN_SECONDS seconds (default 20) with -R; then it runs
# unthrottled for as long, and the pipeline's throughput is what it
# processed divided by the time until it caught up.  Lag is
# sink.seen_at - events.created_at (both clock_timestamp()), p50 and p99
# over the rows of the run.  Then, from idle, IDLE_BATCHES (default 5)
# batches of 200 rows, 2 s apart: the time from the first row's insert to
# the last one's arrival in the sink, median and worst.
#
# Then a backlog: for each of a keep-first pipeline, a to_changelog
# pipeline with whole images (REPLICA IDENTITY FULL, inserts then updates)
# and a TUMBLE window aggregate, the pipeline is made and paused, BACKLOG
# changes (default 5M) are written in transactions of BACKLOG_TXN rows
# (default 100k), and the pipeline is resumed: the time until a marker
# written last is in the sink gives changes/s (the writer is not the
# limit; the session that resumed it looks at the sink each time a step
# has committed, not in a loop of scans that take CPU from the worker).  The floor beside it: the same WAL read by a slot advanced with
# pg_replication_slot_advance (WAL reading, no decoding into changes) and
# decoded by test_decoding, counted; and the worker's CPU time (from /proc)
# during the catch-up, which a shared machine disturbs less than the
# clock.  BACKLOG=0 skips it.
#
# Last, what the wake-up costs writers that no pipeline reads: pgbench
# (CLIENTS clients, one-row inserts into a table without a pipeline) for
# COST_SECONDS (default 5) with the setting off, then on, COST_ROUNDS
# (default 3) times, in a database without pipelines and in the
# pipeline's own database; COST_ROUNDS=0 skips it.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

RATES=${RATES:-"5000 20000"}
WAKE_MODES=${WAKE_MODES:-"off on"}
IDLE_BATCHES=${IDLE_BATCHES:-5}
COST_SECONDS=${COST_SECONDS:-5}
COST_ROUNDS=${COST_ROUNDS:-3}
SECONDS_PER_RUN=${RUN_SECONDS:-20}
ROWS_PER_TXN=${ROWS_PER_TXN:-10}
CLIENTS=${CLIENTS:-2}
BACKLOG=${BACKLOG:-5000000}
BACKLOG_TXN=${BACKLOG_TXN:-100000}

# test_decoding decodes the backlog floor; decoding memory as PostgreSQL
# ships it (the tests' 64kB makes every big transaction spill)
ptf_bench_start "logical_decoding_work_mem = 64MB
output_plugin_libraries = 'deduplicate_keep_first, test_decoding'"
dir=$PTF_BENCH_DIR

ptf_psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION deduplicate_keep_first;
CREATE SEQUENCE new_users;
CREATE TABLE events (id bigserial, user_id bigint, payload text,
                     created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE first_events (id bigint, user_id bigint, payload text, created_at timestamptz,
                           seen_at timestamptz NOT NULL DEFAULT clock_timestamp());
SELECT ptf.create_pipeline('first_events', $q$
    SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
        changes => true, uid => 'first_events')$q$, 'first_events');
SQL

cat >"$dir/insert.sql" <<SQL
INSERT INTO events (user_id, payload)
SELECT CASE WHEN random() < 0.2 THEN (random() * (SELECT last_value FROM new_users))::bigint
            ELSE nextval('new_users') END, 'event payload'
  FROM generate_series(1, $ROWS_PER_TXN);
SQL
ptf_psql -X -q -c "SELECT nextval('new_users')" >/dev/null
chown postgres "$dir/insert.sql"

# wait until the pipeline has read everything written so far; echo the time it took (s)
wait_caught_up() {
    local target start
    target=$(ptf_psql -X -At -c "SELECT pg_current_wal_flush_lsn()")
    start=$(date +%s.%N)
    until [ "$(ptf_psql -X -At -c "SELECT coalesce(bool_and(lsn >= '$target' OR (state = 'running' AND lag_seconds = 0)), false) FROM ptf.pipeline_status")" = t ]; do
        sleep 0.05
    done
    awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'
}

lag_stats() { # since-id: p50 and p99 lag in ms of the events after it
    ptf_psql -X -At -F ' ' -c "
        SELECT round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY seen_at - created_at))),
               round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY seen_at - created_at))),
               count(*)
          FROM first_events WHERE id > $1"
}

pgbench_run() { # rate (0: unthrottled)
    local rate=$1 throttle=()
    [ "$rate" -eq 0 ] || throttle=(-R "$((rate / ROWS_PER_TXN))")
    ptf_as_postgres "$PTF_BINDIR/pgbench" -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER_RUN" \
        "${throttle[@]}" -f "$dir/insert.sql" -h "$PGHOST" -p "$PGPORT" postgres >"$dir/pgbench.out" 2>&1 ||
        { cat "$dir/pgbench.out" >&2; ptf_die "pgbench failed"; }
}

set_wake() { # on|off
    ptf_psql -X -q -c "ALTER SYSTEM SET ptf.pipeline_wake_at_commit = $1" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 1
}

rows=()
idle_rows=()
for mode in $WAKE_MODES; do
    set_wake "$mode"
    for rate in $RATES; do
        ptf_log "bench: wake at commit $mode, $rate changes/s for ${SECONDS_PER_RUN}s"
        since=$(ptf_psql -X -At -c "SELECT coalesce(max(id), 0) FROM events")
        pgbench_run "$rate"
        drain=$(wait_caught_up)
        read -r p50 p99 n <<<"$(lag_stats "$since")"
        written=$(ptf_psql -X -At -c "SELECT count(*) FROM events WHERE id > $since")
        rows+=("| $mode | $rate changes/s offered | $(awk -v w="$written" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.0f", w / s }') | $p50 | $p99 | $drain |")
    done

    ptf_log "bench: wake at commit $mode, unthrottled for ${SECONDS_PER_RUN}s"
    since=$(ptf_psql -X -At -c "SELECT coalesce(max(id), 0) FROM events")
    start=$(date +%s.%N)
    pgbench_run 0
    drain=$(wait_caught_up)
    end=$(date +%s.%N)
    written=$(ptf_psql -X -At -c "SELECT count(*) FROM events WHERE id > $since")
    read -r p50 p99 n <<<"$(lag_stats "$since")"
    sustained=$(awk -v w="$written" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", w / (e - s) }')
    rows+=("| $mode | unthrottled: $(awk -v w="$written" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.0f", w / s }') changes/s written | **$sustained** (all $written changes, until caught up) | $p50 | $p99 | $drain |")

    ptf_log "bench: wake at commit $mode, $IDLE_BATCHES 200-row batches from idle"
    : >"$dir/idle.txt"
    for _ in $(seq "$IDLE_BATCHES"); do
        sleep 2
        since=$(ptf_psql -X -At -c "SELECT coalesce(max(id), 0) FROM events")
        ptf_psql -X -q -c "INSERT INTO events (user_id, payload) SELECT nextval('new_users'), 'batch' FROM generate_series(1, 200)"
        until [ "$(ptf_psql -X -At -c "SELECT count(*) FROM first_events WHERE id > $since")" -ge 200 ]; do sleep 0.01; done
        # measured in the server: the first row's insert to the last row's arrival
        ptf_psql -X -At -c "SELECT round(1000 * extract(epoch FROM max(seen_at) - min(created_at)))
                              FROM first_events WHERE id > $since" >>"$dir/idle.txt"
    done
    idle_rows+=("| $mode | $(sort -n "$dir/idle.txt" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }') | $(sort -n "$dir/idle.txt" | tail -1) |")
done

# With several writers, arrival (commit) order is not id order: the check
# is that every key is in the sink once, with one of its events.
ptf_psql -X -q -v ON_ERROR_STOP=1 -c "
    SELECT 'the sink is not one event per key'
     WHERE (SELECT count(*) FROM first_events) <> (SELECT count(DISTINCT user_id) FROM events)
        OR (SELECT count(DISTINCT user_id) FROM first_events) <> (SELECT count(*) FROM first_events)
        OR EXISTS (SELECT id, user_id, payload, created_at FROM first_events
                   EXCEPT SELECT id, user_id, payload, created_at FROM events)" >"$dir/check.txt"
if grep -q "not one event" "$dir/check.txt"; then ptf_die "the sink is wrong"; fi
if [ "$CLIENTS" -eq 1 ]; then
    ptf_psql -X -q -v ON_ERROR_STOP=1 -c "
        SELECT 'the sink differs from DISTINCT ON over the events'
          FROM (SELECT count(*) AS n FROM (
                  (SELECT DISTINCT ON (user_id) id, user_id, payload, created_at FROM events ORDER BY user_id, id)
                  EXCEPT ALL SELECT id, user_id, payload, created_at FROM first_events) d) c
         WHERE n > 0" >"$dir/check.txt"
    if grep -q differs "$dir/check.txt"; then ptf_die "the sink is wrong"; fi
fi

# ---- catching up a backlog ----

# seconds a statement takes (2 decimals)
timed_sql() {
    local s
    s=$(date +%s.%N)
    ptf_psql -X -q -c "$1" >/dev/null
    awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'
}

# backlog NAME SETUP PIPELINE_SQL SINK WRITE_SQL MARKER_SQL DONE_SQL: make the
# pipeline, pause it, write the backlog (WRITE_SQL is run for each batch
# with :b set, :n rows a batch), time the floor slots, resume, time until
# DONE_SQL says t; one table row.
backlog() {
    local name=$1 setup=$2 query=$3 sink=$4 write=$5 marker=$6 done_sql=$7 label=$8
    local batches=$((BACKLOG / BACKLOG_TXN)) target t_adv t_td secs rate pid cpu0 cpu1 cpu
    ptf_log "bench: backlog, $label: $BACKLOG changes"
    ptf_psql -X -q -v ON_ERROR_STOP=1 -c "$setup" >/dev/null
    ptf_psql -X -q -v ON_ERROR_STOP=1 -c "SELECT ptf.create_pipeline('$name', \$q\$$query\$q\$, '$sink')" \
        -c "SELECT ptf.pause_pipeline('$name')" \
        -c "SELECT pg_create_logical_replication_slot('floor_adv', 'test_decoding')" \
        -c "SELECT pg_create_logical_replication_slot('floor_td', 'test_decoding')" >/dev/null
    for b in $(seq 0 $((batches - 1))); do
        echo "\\set b $b"
        echo "\\set n $BACKLOG_TXN"
        echo "$write"
    done >"$dir/backlog.sql"
    echo "$marker" >>"$dir/backlog.sql"
    chown postgres "$dir/backlog.sql"
    ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$dir/backlog.sql" >/dev/null
    target=$(ptf_psql -X -At -c "SELECT pg_current_wal_insert_lsn()")
    t_adv=$(timed_sql "SELECT pg_replication_slot_advance('floor_adv', '$target')")
    t_td=$(timed_sql "SELECT count(*) FROM pg_logical_slot_get_changes('floor_td', '$target', NULL)")
    ptf_psql -X -q -c "SELECT pg_drop_replication_slot('floor_adv')" -c "SELECT pg_drop_replication_slot('floor_td')" >/dev/null
    # the worker's CPU time too: on a shared machine it says more than the clock
    pid=$(ptf_psql -X -At -c "SELECT pid FROM ptf.pipeline_status WHERE name = '$name'")
    cpu0=$(proc_cpu "$pid")
    # resumed and watched from one session: the sink is looked at only
    # after a step commits (the pipeline's count of changes read, shared
    # memory, moves then), not scanned again and again while the worker runs
    secs=$(ptf_psql -X -q -At -v ON_ERROR_STOP=1 <<SQL
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT ptf.resume_pipeline('$name') \g /dev/null
DO \$\$
DECLARE
    seen bigint := -1;
    n bigint;
    done boolean := false;
BEGIN
    WHILE NOT done LOOP
        SELECT rows_in, last_error IS NOT NULL INTO n, done
          FROM ptf.pipeline_status WHERE name = '$name';
        IF done THEN
            RAISE EXCEPTION 'pipeline $name failed';
        END IF;
        IF n IS DISTINCT FROM seen THEN
            EXECUTE \$d\$$done_sql\$d\$ INTO done;
        ELSE
            PERFORM pg_sleep(0.01);
        END IF;
        seen := n;
    END LOOP;
END
\$\$;
SELECT round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 2);
SQL
)
    cpu1=$(proc_cpu "$pid")
    cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')
    ptf_psql -X -At -c "SELECT state, last_error FROM ptf.pipeline_status WHERE name = '$name'" >"$dir/status.txt"
    ptf_psql -X -q -c "SELECT ptf.drop_pipeline('$name')" >/dev/null
    rate=$(awk -v n="$BACKLOG" -v t="$secs" 'BEGIN { printf "%.0f", n / t }')
    backlog_rows+=("| $label | $BACKLOG | $secs | **$rate** | $t_adv | $t_td | $(awk -v a="$secs" -v f="$t_adv" -v n="$BACKLOG" 'BEGIN { printf "%.0f", (a - f) * 1e9 / n }') | $cpu | $(awk -v c="$cpu" -v n="$BACKLOG" 'BEGIN { printf "%.0f", c * 1e9 / n }') | $9 |")
}

# user + system CPU seconds of a process so far
proc_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}

backlog_rows=()
if [ "$BACKLOG" -gt 0 ]; then
    ptf_psql -X -q -c "ALTER SYSTEM SET ptf.pipeline_wake_at_commit = on" -c "SELECT pg_reload_conf()" >/dev/null
    backlog kf_backlog \
        "CREATE TABLE bl_events (id bigint, user_id bigint, payload text);
         CREATE TABLE bl_first (LIKE bl_events);" \
        "SELECT * FROM ptf.deduplicate_keep_first(NULL::bl_events, partition_by => '{user_id}', changes => true, uid => 'kf_backlog')" \
        bl_first \
        "INSERT INTO bl_events SELECT g, (hashint8(g) & 1048575), 'event payload' FROM generate_series(:b::bigint * :n, (:b + 1)::bigint * :n - 1) g;" \
        "INSERT INTO bl_events VALUES (-1, -1, 'marker');" \
        "SELECT EXISTS (SELECT FROM bl_first WHERE user_id = -1)" \
        "keep-first, 1M keys (inserts)" ">= 500k"
    backlog tc_backlog \
        "CREATE TABLE bl_acc (id int, balance numeric, note text);
         ALTER TABLE bl_acc REPLICA IDENTITY FULL;
         CREATE TABLE bl_log (op text, id int, balance numeric, note text);" \
        "SELECT op, (data).id, (data).balance, (data).note FROM ptf.to_changelog(NULL::bl_acc, changes => true, uid => 'tc_backlog')" \
        bl_log \
        "SELECT (:b * :n < $BACKLOG / 2) AS ins \\gset
\\if :ins
INSERT INTO bl_acc SELECT g, g / 100.0, 'note ' || g FROM generate_series(:b * :n, (:b + 1) * :n - 1) g;
\\else
UPDATE bl_acc SET balance = balance + 1 WHERE id BETWEEN :b * :n - $BACKLOG / 2 AND (:b + 1) * :n - 1 - $BACKLOG / 2;
\\endif" \
        "INSERT INTO bl_acc VALUES (-1, 0, 'marker');" \
        "SELECT EXISTS (SELECT FROM bl_log WHERE id = -1)" \
        "to_changelog, whole images (half inserts, half updates)" ">= 300k"
    backlog tw_backlog \
        "CREATE TABLE bl_clicks (k int, v int, ts timestamptz NOT NULL);
         ALTER TABLE bl_clicks REPLICA IDENTITY FULL;
         CREATE TYPE bl_per_second_row AS (k int, window_start timestamptz, window_end timestamptz, n bigint, s bigint);
         CREATE TABLE bl_per_second OF bl_per_second_row;" \
        "SELECT * FROM ptf.window_aggregate(NULL::bl_clicks, NULL::bl_per_second_row, 'tumble', 'ts', '1 second', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s', changes => true, uid => 'tw_backlog')" \
        bl_per_second \
        "INSERT INTO bl_clicks SELECT g % 100, g, timestamptz '2024-01-01 00:00+00' + g * interval '1 ms' FROM generate_series(:b * :n, (:b + 1) * :n - 1) g;" \
        "INSERT INTO bl_clicks VALUES (-1, 0, timestamptz '2030-01-01 00:00+00');" \
        "SELECT coalesce(sum(n), 0) >= $BACKLOG FROM bl_per_second" \
        "window_aggregate TUMBLE 1 s, 100 keys (inserts)" ">= 300k"
fi

cost_rows=()
if [ "$COST_ROUNDS" -gt 0 ]; then
    ptf_psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE nopipes" -c "CREATE TABLE plain (id bigint, payload text)"
    ptf_psql -X -q -v ON_ERROR_STOP=1 -d nopipes -c "CREATE TABLE plain (id bigint, payload text)"
    echo "INSERT INTO plain VALUES (1, 'plain payload');" >"$dir/plain.sql"
    chown postgres "$dir/plain.sql"
    for db in nopipes postgres; do
        : >"$dir/cost.txt"
        for round in $(seq "$COST_ROUNDS"); do
            for mode in off on; do
                ptf_log "bench: cost, database $db, wake at commit $mode, round $round"
                set_wake "$mode"
                ptf_as_postgres "$PTF_BINDIR/pgbench" -n -c "$CLIENTS" -j "$CLIENTS" -T "$COST_SECONDS" \
                    -f "$dir/plain.sql" -h "$PGHOST" -p "$PGPORT" "$db" >"$dir/pgbench.out" 2>&1 ||
                    { cat "$dir/pgbench.out" >&2; ptf_die "pgbench failed"; }
                echo "$mode $(awk '/^tps = / { print $3 }' "$dir/pgbench.out")" >>"$dir/cost.txt"
            done
        done
        label=$([ "$db" = nopipes ] && echo "without pipelines" || echo "with the pipeline (another table)")
        cost_rows+=("$(awk -v l="$label" '{ s[$1] += $2; n[$1]++ }
            END { off = s["off"] / n["off"]; on = s["on"] / n["on"];
                  printf "| %s | %.0f | %.0f | %.3f |", l, off, on, on / off }' "$dir/cost.txt")")
    done
    set_wake on
fi

echo
echo "### keep-first pipeline behind pgbench ($CLIENTS clients, $ROWS_PER_TXN rows per transaction, 20% repeated keys)"
echo
echo "| wake at commit | load | changes/s processed | lag p50 ms | lag p99 ms | catch-up after the run, s |"
echo "|---|---|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "| wake at commit | 200-row batch after 2 s idle, in the sink after: median ms | worst ms (of $IDLE_BATCHES) |"
echo "|---|---:|---:|"
printf '%s\n' "${idle_rows[@]}"
echo
echo "The sink has each key once, with one of its events$([ "$CLIENTS" -eq 1 ] && echo ', and equals DISTINCT ON over all events')."
if [ "$BACKLOG" -gt 0 ]; then
    echo
    echo "### catching up a backlog written while the pipeline was paused (transactions of $BACKLOG_TXN rows)"
    echo
    echo "| pipeline | changes | catch-up s | changes/s | floor: slot advanced over the WAL, s | test_decoding, s | ns per change above the floor | worker CPU s | worker CPU ns per change | goal (changes/s) |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    printf '%s\n' "${backlog_rows[@]}"
fi
if [ "$COST_ROUNDS" -gt 0 ]; then
    echo
    echo "### what the wake-up costs writers no pipeline reads ($CLIENTS clients, one-row inserts, ${COST_SECONDS}s runs, $COST_ROUNDS rounds)"
    echo
    echo "| database | TPS, wake at commit off | TPS, on | on / off |"
    echo "|---|---:|---:|---:|"
    printf '%s\n' "${cost_rows[@]}"
fi
