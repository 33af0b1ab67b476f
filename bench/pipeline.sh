#!/usr/bin/env bash
# bench/pipeline.sh: a keep-first pipeline behind pgbench inserting events
# at steady rates, on a throwaway server: the rate the pipeline sustains
# and the end-to-end lag (the event's insert to its row in the sink).
#
#   bash bench/pipeline.sh          (as root: installs what is missing, builds)
#
# Events come in transactions of ROWS_PER_TXN rows (default 10); 20% of
# them repeat a key seen before.  For each rate in RATES (changes/s,
# default "5000 20000") pgbench runs RUN_SECONDS seconds (default 20) with -R;
# then it runs unthrottled for as long, and the pipeline's throughput is
# what it processed divided by the time until it caught up.  Lag is
# sink.seen_at - events.created_at (both clock_timestamp()), p50 and p99
# over the rows of the run.  Last, from idle, a batch of 200 rows: the
# time until the last of them is in the sink.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

RATES=${RATES:-"5000 20000"}
SECONDS_PER_RUN=${RUN_SECONDS:-20}
ROWS_PER_TXN=${ROWS_PER_TXN:-10}
CLIENTS=${CLIENTS:-2}

ptf_bench_start ""
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

rows=()
for rate in $RATES; do
    ptf_log "bench: $rate changes/s for ${SECONDS_PER_RUN}s"
    since=$(ptf_psql -X -At -c "SELECT coalesce(max(id), 0) FROM events")
    pgbench_run "$rate"
    drain=$(wait_caught_up)
    read -r p50 p99 n <<<"$(lag_stats "$since")"
    written=$(ptf_psql -X -At -c "SELECT count(*) FROM events WHERE id > $since")
    rows+=("| $rate changes/s offered | $(awk -v w="$written" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.0f", w / s }') | $p50 | $p99 | $drain |")
done

ptf_log "bench: unthrottled for ${SECONDS_PER_RUN}s"
since=$(ptf_psql -X -At -c "SELECT coalesce(max(id), 0) FROM events")
start=$(date +%s.%N)
pgbench_run 0
drain=$(wait_caught_up)
end=$(date +%s.%N)
written=$(ptf_psql -X -At -c "SELECT count(*) FROM events WHERE id > $since")
read -r p50 p99 n <<<"$(lag_stats "$since")"
sustained=$(awk -v w="$written" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", w / (e - s) }')
rows+=("| unthrottled: $(awk -v w="$written" -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.0f", w / s }') changes/s written | **$sustained** (all $written changes, until caught up) | $p50 | $p99 | $drain |")

ptf_log "bench: a 200-row batch from idle"
sleep 2
since=$(ptf_psql -X -At -c "SELECT coalesce(max(id), 0) FROM events")
start=$(date +%s.%N)
ptf_psql -X -q -c "INSERT INTO events (user_id, payload) SELECT nextval('new_users'), 'batch' FROM generate_series(1, 200)"
until [ "$(ptf_psql -X -At -c "SELECT count(*) FROM first_events WHERE id > $since")" -ge 200 ]; do sleep 0.01; done
idle_ms=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", 1000 * (e - s) }')

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

echo
echo "### keep-first pipeline behind pgbench ($CLIENTS clients, $ROWS_PER_TXN rows per transaction, 20% repeated keys)"
echo
echo "| load | changes/s processed | lag p50 ms | lag p99 ms | catch-up after the run, s |"
echo "|---|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "A 200-row batch after 2 s idle: in the sink after $idle_ms ms. The sink has each key once, with one of its events$([ "$CLIENTS" -eq 1 ] && echo ', and equals DISTINCT ON over all events')."
