#!/usr/bin/env bash
# bench/citus.sh: a keep-first pipeline over a Citus distributed table (SHARDS
# shard groups on two workers) behind pgbench writing through the coordinator,
# against the same pipeline over a plain table on one node, in the same run; then
# the pause a move of one shard group makes in its pipeline, in each mode.
#
#   bash bench/citus.sh            (as root: installs what is missing, builds; Citus
#                                   is built from ../shared/vendor/citus if needed)
#   RUN_SECONDS=3 RATE=1000 bash bench/citus.sh     (a quick check)
#
# A local cluster: a coordinator and two workers, three PostgreSQL instances on
# this machine, plus the coordinator's own tables for the one-node run.  pgbench
# (CLIENTS clients, ROWS_PER_TXN rows per transaction, 20% repeated keys) runs
# RUN_SECONDS at RATE changes/s, then unthrottled for as long; what the pipelines
# processed, per node and in total, is divided by the time until they caught up.
# Lag is sink.seen_at - events.created_at (both clock_timestamp(), one clock),
# p50 and p99.  On a machine of few cores the three instances, the writers and
# the pipelines share them: the distributed figures show what running per shard
# group costs, not a speed-up, which needs a node per core set.
#
# The move: during a throttled run one shard group is moved (block_writes, then
# force_logical, and back); reported are the move's duration, the time the
# group's pipeline did not step (the longest gap between its sink rows' arrivals
# while rows were written), and the worst lag of the group's rows.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

SHARDS=${SHARDS:-8}
CLIENTS=${CLIENTS:-2}
ROWS_PER_TXN=${ROWS_PER_TXN:-10}
RUN_SECONDS=${RUN_SECONDS:-20}
RATE=${RATE:-5000}

ptf_ensure_packages
ptf_build_install
ptf_ensure_citus || ptf_die "bench/citus.sh needs Citus: $PTF_CITUS_NOTE"

dir=$(ptf_mktemp_dir ptf-bench-citus)
ports=()
cleanup() {
    local n
    for n in 0 1 2; do
        [ -f "$dir/n$n/postmaster.pid" ] &&
            ptf_as_postgres "$PTF_BINDIR/pg_ctl" -D "$dir/n$n" -m immediate -w stop >/dev/null 2>&1
    done
    rm -rf "$dir"
}
trap cleanup EXIT

# ---- the cluster
port=5480
for n in 0 1 2; do
    port=$(ptf_free_port $((port + 1)))
    ports+=("$port")
    ptf_as_postgres "$PTF_BINDIR/initdb" -D "$dir/n$n" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; ptf_die "initdb failed"; }
    cat >>"$dir/n$n/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus,deduplicate_keep_first'
wal_level = logical
output_plugin_libraries = 'pgoutput,deduplicate_keep_first,citus'
max_replication_slots = 64
max_wal_senders = 32
max_worker_processes = 32
max_prepared_transactions = 100
fsync = off
shared_buffers = 512MB
max_wal_size = 4GB
citus.defer_shard_delete_interval = 1000
CONF
    echo "host all all 127.0.0.1/32 trust" >>"$dir/n$n/pg_hba.conf"
    ptf_as_postgres "$PTF_BINDIR/pg_ctl" -D "$dir/n$n" -l "$dir/n$n.log" -w -t 60 start >/dev/null ||
        { tail -20 "$dir/n$n.log" >&2; ptf_die "node $n did not start"; }
done
q() { # node sql...: psql on node 0, 1 or 2
    local n=$1
    shift
    ptf_as_postgres "$PTF_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p "${ports[$n]}" -U postgres -d postgres "$@"
}
for n in 0 1 2; do q "$n" -c "CREATE EXTENSION citus"; done
q 0 -c "SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]})" \
    -c "SELECT citus_add_node('127.0.0.1', ${ports[1]})" -c "SELECT citus_add_node('127.0.0.1', ${ports[2]})" \
    -c "CREATE EXTENSION deduplicate_keep_first" >/dev/null
ptf_log "cluster: coordinator ${ports[0]}, workers ${ports[1]} ${ports[2]}, in $dir"

q 0 <<SQL >/dev/null
-- one node: the coordinator's own tables
CREATE TABLE events_local (id bigserial, user_id bigint, payload text,
                           created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE first_local (id bigint, user_id bigint, payload text, created_at timestamptz,
                          seen_at timestamptz NOT NULL DEFAULT clock_timestamp());
SELECT ptf.create_pipeline('one_node', \$q\$
    SELECT * FROM ptf.deduplicate_keep_first(NULL::events_local, partition_by => '{user_id}',
        changes => true, uid => 'one_node')\$q\$, 'first_local');
-- distributed: $SHARDS shard groups on the two workers
CREATE TABLE events (id bigserial, user_id bigint, payload text,
                     created_at timestamptz NOT NULL DEFAULT clock_timestamp());
SELECT create_distributed_table('events', 'user_id', shard_count => $SHARDS);
CREATE TABLE first_events (id bigint, user_id bigint, payload text, created_at timestamptz,
                           seen_at timestamptz NOT NULL DEFAULT clock_timestamp());
SELECT create_distributed_table('first_events', 'user_id', colocate_with => 'events');
SELECT ptf.create_pipeline('distributed', \$q\$
    SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
        changes => true, uid => 'distributed')\$q\$, 'first_events');
SQL

# ROWS_PER_TXN rows per transaction in one multi-row VALUES (Citus routes
# each row to its shard; an INSERT ... SELECT would go through the
# coordinator), 20% of their keys from a pool of 20000 that repeats
for t in events_local events; do
    {
        values=""
        for i in $(seq "$ROWS_PER_TXN"); do
            echo "\\set r$i random(1, 100)"
            echo "\\set k$i CASE WHEN :r$i <= 20 THEN random(1, 20000) ELSE random(20001, 2000000000) END"
            values+="${values:+, }(:k$i, 'event payload')"
        done
        echo "INSERT INTO $t (user_id, payload) VALUES $values;"
    } >"$dir/$t.sql"
done
chown postgres "$dir"/*.sql

# what the shard pipelines of a node read so far
node_rows() { q "$1" -c "SELECT coalesce(sum(rows_in), 0) FROM ptf.pipeline_status"; }
total_rows() { echo $(( $(node_rows 0) + $(node_rows 1) + $(node_rows 2) )); }

# wait until every node's pipelines have read all that was written
wait_caught_up() {
    local n done
    for _ in $(seq 1 6000); do
        done=1
        for n in 0 1 2; do
            [ "$(q "$n" -c "SELECT count(*) FROM ptf.pipeline_status WHERE pending_bytes > 0")" = 0 ] || done=0
        done
        [ "$done" = 1 ] && return 0
        sleep 0.05
    done
    ptf_die "the pipelines did not catch up"
}

lag_stats() { # sink since-id: p50 p99 (ms)
    q 0 -F ' ' -c "SELECT round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY seen_at - created_at))),
                          round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY seen_at - created_at)))
                     FROM $1 WHERE id > $2"
}

pgbench_run() { # script rate seconds (rate 0: unthrottled)
    local throttle=()
    [ "$2" -eq 0 ] || throttle=(-R "$(( $2 / ROWS_PER_TXN ))")
    ptf_as_postgres "$PTF_BINDIR/pgbench" -n -c "$CLIENTS" -j "$CLIENTS" -T "$3" "${throttle[@]}" \
        -f "$dir/$1.sql" -h "$dir" -p "${ports[0]}" -U postgres postgres >"$dir/pgbench.out" 2>&1 ||
        { cat "$dir/pgbench.out" >&2; ptf_die "pgbench failed"; }
}

rows=()
for setup in one_node distributed; do
    if [ "$setup" = one_node ]; then src=events_local; sink=first_local; else src=events; sink=first_events; fi
    for rate in "$RATE" 0; do
        ptf_log "bench: $setup, $([ "$rate" = 0 ] && echo unthrottled || echo "$rate changes/s") for ${RUN_SECONDS}s"
        since=$(q 0 -c "SELECT coalesce(max(id), 0) FROM $src")
        before=(); for n in 0 1 2; do before+=("$(node_rows "$n")"); done
        start=$(date +%s.%N)
        pgbench_run "$src" "$rate" "$RUN_SECONDS"
        wait_caught_up
        end=$(date +%s.%N)
        per_node=""
        total=0
        for n in 0 1 2; do
            d=$(( $(node_rows "$n") - before[n] ))
            total=$((total + d))
            [ "$d" -eq 0 ] || per_node+="$([ -n "$per_node" ] && echo ' + ')$(awk -v d="$d" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", d / (e - s) }') (node $n)"
        done
        written=$(q 0 -c "SELECT count(*) FROM $src WHERE id > $since")
        read -r p50 p99 <<<"$(lag_stats "$sink" "$since")"
        rows+=("| $setup | $([ "$rate" = 0 ] && echo "unthrottled ($(awk -v w="$written" -v s="$RUN_SECONDS" 'BEGIN { printf "%.0f", w / s }')/s written)" || echo "$rate/s offered") | $per_node | **$(awk -v d="$total" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", d / (e - s) }')** | $p50 | $p99 |")
    done
done

# every key once, in both sinks
check=$(q 0 -c "SELECT (SELECT count(*) FROM first_events) = (SELECT count(DISTINCT user_id) FROM events)
                   AND (SELECT count(DISTINCT user_id) FROM first_events) = (SELECT count(*) FROM first_events)
                   AND (SELECT count(*) FROM first_local) = (SELECT count(DISTINCT user_id) FROM events_local)")
[ "$check" = t ] || ptf_die "a sink is not one event per key"

# ---- moves
shard=$(q 0 -c "SELECT min(shardid) FROM pg_dist_shard WHERE logicalrelid = 'events'::regclass")
move_rows=()
for mode in block_writes force_logical; do
    from=$(q 0 -c "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $shard")
    to=$([ "$from" = "${ports[1]}" ] && echo "${ports[2]}" || echo "${ports[1]}")
    ptf_log "bench: move shard $shard ($mode) under $RATE changes/s"
    since=$(q 0 -c "SELECT coalesce(max(id), 0) FROM events")
    pgbench_run events "$RATE" $((RUN_SECONDS < 6 ? 6 : RUN_SECONDS)) &
    bench=$!
    sleep 2
    mstart=$(date +%s.%N)
    q 0 -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to, '$mode')" >/dev/null
    mend=$(date +%s.%N)
    wait "$bench"
    wait_caught_up
    read -r gap worst n <<<"$(q 0 -F ' ' -c "
        WITH g AS (SELECT seen_at, created_at, seen_at - lag(seen_at) OVER (ORDER BY seen_at) AS gap
                     FROM first_events
                    WHERE id > $since AND get_shard_id_for_distribution_column('events', user_id) = $shard)
        SELECT round(1000 * extract(epoch FROM max(gap))), round(1000 * extract(epoch FROM max(seen_at - created_at))), count(*)
          FROM g")"
    move_rows+=("| $mode | $(awk -v s="$mstart" -v e="$mend" 'BEGIN { printf "%.2f", e - s }') | $(awk -v g="$gap" 'BEGIN { printf "%.2f", g / 1000 }') | $worst | $n |")
done
check=$(q 0 -c "SELECT (SELECT count(*) FROM first_events) = (SELECT count(DISTINCT user_id) FROM events)
                   AND (SELECT count(DISTINCT user_id) FROM first_events) = (SELECT count(*) FROM first_events)")
[ "$check" = t ] || ptf_die "after the moves, the sink is not one event per key"

echo
echo "### keep-first pipeline, one node against $SHARDS shard groups on 2 workers ($CLIENTS pgbench clients through the coordinator, $ROWS_PER_TXN rows per transaction, 20% repeated keys, ${RUN_SECONDS}s runs)"
echo
echo "| setup | load | changes/s processed, per node | total | lag p50 ms | lag p99 ms |"
echo "|---|---|---|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "### a move of one shard group under $RATE changes/s"
echo
echo "| mode | move took, s | the group's pipeline did not step for, s | worst lag of its rows, ms | its rows during the run |"
echo "|---|---:|---:|---:|---:|"
printf '%s\n' "${move_rows[@]}"
echo
echo "Each sink has each key once, with one of its events, after the moves too."
echo "$(nproc) cores: the coordinator, both workers, pgbench and the pipelines share them."
