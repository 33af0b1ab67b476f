#!/usr/bin/env bash
# bench/state_scale.sh: what a uid's call costs when its state is large
# (engine/state_load.c: the state read whole, or only the keys a call's
# rows touch), on a throwaway server, side by side in one run.
#
#   bash bench/state_scale.sh                  (as root: installs what is missing, builds)
#   STATE_KEYS=1000000 bash bench/state_scale.sh          (a quick run)
#   PG_BINDIR=/path/to/bin bash bench/state_scale.sh      (that server, with the
#       extension already installed for it: nothing is built or installed)
#
# Keep-first by arrival, one bigint key, STATE_KEYS keys (default 10M):
#  1. a 100-row call (half its keys stored, half new; fresh rows every call)
#     into a uid of STATE_KEYS keys, against the same call into a small uid
#     (made beforehand; it holds only the earlier 100-row batches) and into a
#     new uid (its first call); and with ptf.state_load = full, the whole
#     state read by every call (as before probing).  REPS calls each (default
#     5), FULL_REPS with full (default 3), alternating, after a warm-up round
#     whose first call into the big uid makes its key index (timed, shown);
#     medians, and how each call read the state (ptf.last_call_stats()).
#  2. the first call of a uid: STATE_KEYS rows into an empty uid, with the
#     default ptf.state_load (auto) and with full, BULK_REPS times each
#     (default 3, alternating), a CHECKPOINT before each; the state table
#     must have no index after it (made by the first call that probes, not
#     by the bulk).
#  3. a keep-first pipeline over STATE_KEYS live keys, with
#     ptf.state_memory_limit = PIPE_MEMORY_LIMIT (default 256MB, ALTER SYSTEM):
#     its state preloaded (STATE_KEYS rows in transactions of PRELOAD_TXN_ROWS,
#     default 100000, until the pipeline caught up), then pgbench, CLIENTS
#     clients (default 2) unthrottled for PIPE_SECONDS (default 30),
#     transactions of ROWS_PER_TXN rows (default 100), NEW_SHARE of them
#     (default 0.1) new keys, the rest stored ones; changes/s processed (until
#     caught up) and the pipeline worker's memory (/proc/PID/status every
#     0.5 s: RssAnon, its private memory, and VmRSS, which counts the shared
#     buffers it touched).  A pipeline whose position does not move for
#     STUCK_SECONDS (default 120; failing steps) is reported as such.
# Fresh-batch latency from idle: bash bench/pipeline.sh (its last line).
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

STATE_KEYS=${STATE_KEYS:-10000000}
REPS=${REPS:-5}
FULL_REPS=${FULL_REPS:-3}
BULK_REPS=${BULK_REPS:-3}
PIPE_MEMORY_LIMIT=${PIPE_MEMORY_LIMIT:-256MB}
PRELOAD_TXN_ROWS=${PRELOAD_TXN_ROWS:-100000}
PIPE_SECONDS=${PIPE_SECONDS:-30}
ROWS_PER_TXN=${ROWS_PER_TXN:-100}
NEW_SHARE=${NEW_SHARE:-0.1}
CLIENTS=${CLIENTS:-2}
STUCK_SECONDS=${STUCK_SECONDS:-120}
N=$STATE_KEYS
[ "$N" -ge 1000 ] || ptf_die "STATE_KEYS must be at least 1000"
[ "$FULL_REPS" -le "$REPS" ] || FULL_REPS=$REPS

# PG_BINDIR: a server of one's own (the extension installed for it with
# make install PG_CONFIG=$PG_BINDIR/pg_config): no apt, no build.
if [ -n "${PG_BINDIR:-}" ]; then
    ptf_ensure_packages() {
        PTF_BINDIR=$(cd "$PG_BINDIR" && pwd)
        PTF_PG_CONFIG=$PTF_BINDIR/pg_config
        export PTF_BINDIR PTF_PG_CONFIG
        [ -x "$PTF_BINDIR/postgres" ] || ptf_die "PG_BINDIR=$PG_BINDIR: no postgres there"
        ptf_log "using $("$PTF_BINDIR/postgres" --version) ($PTF_BINDIR)"
    }
    ptf_build_install() {
        local so
        so=$("$PTF_PG_CONFIG" --pkglibdir)/deduplicate_keep_first.so
        [ -f "$so" ] || ptf_die "$so missing: make install PG_CONFIG=$PTF_PG_CONFIG first"
        ptf_log "build: skipped (PG_BINDIR), using $so"
    }
fi

ptf_bench_start ""
dir=$PTF_BENCH_DIR

# the keys 1..N in a scattered order: i * P mod N is a permutation (P prime, > N)
P=2147483647
[ "$N" -lt "$P" ] || ptf_die "STATE_KEYS must be below $P"

big_call="SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::t, partition_by => '{k}', uid => 'big', query => 'SELECT k, v FROM batches WHERE b = <b>')"
bulk_call="SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::t, partition_by => '{k}', uid => '<uid>', query => 'SELECT k, v FROM src')"
pipe_query="SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{k}', changes => true, uid => 'pipe')"

echo "## State at scale: keep-first by arrival, bigint keys, STATE_KEYS = $N"
echo
echo "Parameters: STATE_KEYS=$N REPS=$REPS FULL_REPS=$FULL_REPS BULK_REPS=$BULK_REPS"
echo "PIPE_MEMORY_LIMIT=$PIPE_MEMORY_LIMIT PRELOAD_TXN_ROWS=$PRELOAD_TXN_ROWS PIPE_SECONDS=$PIPE_SECONDS"
echo "ROWS_PER_TXN=$ROWS_PER_TXN NEW_SHARE=$NEW_SHARE CLIENTS=$CLIENTS; $("$PTF_BINDIR/postgres" --version), $(nproc) CPUs"
echo "(server: test/ptf.conf, shared_buffers = 1GB, fsync = off; other settings default)"
echo
echo "* 100-row call: \`$big_call\`"
echo "  (batches: 100 rows each, 50 keys stored in 'big' and 50 new; anchors: the same rows, uid 'small' or a new uid)"
echo "* bulk call: \`$bulk_call\` (src: keys 1..$N, each once)"
echo "* pipeline: \`$pipe_query\` into an append sink"
echo

ptf_log "bench: $N keys: source tables"
nbatches=$((4 * REPS + 3))
ptf_psql -q <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE t (k bigint, v bigint);
CREATE TABLE src AS SELECT (i * $P) % $N + 1 AS k, i AS v FROM generate_series(1, $N::bigint) i;
-- 100-row batches: 50 keys of src (scattered), 50 keys no call has seen
CREATE TABLE batches AS
SELECT b, CASE WHEN j <= 50 THEN 1 + (hashint8(b * 1000 + j) & 2147483647) % $N
               ELSE $N + b::bigint * 100 + j END AS k, j::bigint AS v
  FROM generate_series(1, $nbatches) b, generate_series(1, 100) j
 ORDER BY b, hashint8(b * 1000 + j);
CREATE INDEX ON batches (b);
VACUUM ANALYZE src, batches;
SELECT count(*) FROM src \g /dev/null
SQL

state_indexes() { # uid: indexes on its state table
    ptf_psql -At -c "SELECT count(*) FROM pg_index WHERE indrelid = (SELECT state_table FROM ptf.state WHERE uid = '$1')::regclass"
}

# A psql script's run: "@@ name" before each timed statement; after it a
# stats line "STATS|name|state_load|keys_probed|keys_loaded".
stats_sql() { echo "SELECT 'STATS', '$1', state_load, keys_probed, keys_loaded FROM ptf.last_call_stats();"; }
run_script() { # file out
    chown postgres "$1"
    ptf_psql -q -P format=unaligned -P tuples_only=on -f "$1" >>"$2"
}
# median of a stats column (4: keys_probed, 5: keys_loaded), and the ways (3) seen
stat_median() { awk -F'|' -v n="$2" -v c="$3" '$1 == "STATS" && $2 == n { print $c }' "$1" | sort -n |
                    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
stat_ways() { awk -F'|' -v n="$2" '$1 == "STATS" && $2 == n { print $3 }' "$1" | sort | uniq -c |
                  awk '{ printf "%s%s%s", (NR > 1 ? ", " : ""), $2, ($1 > 1 ? " x" $1 : "") }'; }

# ---- 2. the bulk call: N rows into an empty uid, auto and full ----
ptf_log "bench: bulk call, $N rows into an empty uid, auto and full, $BULK_REPS times each"
: >"$dir/bulk.txt"
for r in $(seq 1 "$BULK_REPS"); do
    order="auto full"
    [ $((r % 2)) -eq 1 ] || order="full auto"
    for mode in $order; do
        uid=bulk_${mode}_$r
        [ "$mode:$r" != auto:1 ] || uid=big
        {
            echo "CHECKPOINT;"
            echo "\\timing on"
            [ "$mode" = auto ] || echo "SET ptf.state_load = full;"
            echo "\\echo @@ bulk_$mode"
            echo "${bulk_call//<uid>/$uid};"
            echo "\\timing off"
            stats_sql "bulk_$mode"
        } >"$dir/bulk.sql"
        run_script "$dir/bulk.sql" "$dir/bulk.txt"
        echo "INDEXES|bulk_$mode|$(state_indexes "$uid")" >>"$dir/bulk.txt"
        [ "$uid" = big ] || ptf_psql -q -c "SELECT ptf.drop_state('$uid')" >/dev/null
    done
done
ptf_bench_times "$dir/bulk.txt" >"$dir/bulk_times.txt"
bulk_auto=$(ptf_bench_median "$dir/bulk_times.txt" bulk_auto)
bulk_full=$(ptf_bench_median "$dir/bulk_times.txt" bulk_full)
idx_auto=$(awk -F'|' '$1 == "INDEXES" && $2 == "bulk_auto" { print $3 }' "$dir/bulk.txt" | sort -u | paste -sd/)
idx_full=$(awk -F'|' '$1 == "INDEXES" && $2 == "bulk_full" { print $3 }' "$dir/bulk.txt" | sort -u | paste -sd/)
read -r big_keys big_bytes <<<"$(ptf_psql -At -F ' ' -c "SELECT keys, pg_total_relation_size(state_table::regclass) FROM ptf.state WHERE uid = 'big'")"
ptf_psql -q -c "CHECKPOINT"

# ---- 1. 100-row calls over the big state, against small and new uids ----
ptf_log "bench: 100-row calls into 'big' ($big_keys keys), 'small', new uids; $REPS rounds"
b=0
call() { # uid: a call with the next batch
    b=$((b + 1))
    echo "${big_call//<b>/$b};" | sed "s/uid => 'big'/uid => '$1'/"
}
{
    echo "\\timing on"
    # warm-up, not counted but the first probe: it makes the key index
    echo "\\echo @@ first_probe"
    call big
    stats_sql first_probe
    call small
    call fresh_0
    for r in $(seq 1 "$REPS"); do
        echo "\\echo @@ probe"; call big; stats_sql probe
        echo "\\echo @@ small"; call small; stats_sql small
        echo "\\echo @@ fresh"; call "fresh_$r"; stats_sql fresh
        if [ "$r" -le "$FULL_REPS" ]; then
            echo "SET ptf.state_load = full;"
            echo "\\echo @@ full"; call big; stats_sql full
            echo "RESET ptf.state_load;"
        fi
    done
} >"$dir/calls.sql"
: >"$dir/calls.txt"
run_script "$dir/calls.sql" "$dir/calls.txt"
ptf_bench_times "$dir/calls.txt" >"$dir/calls_times.txt"
m() { ptf_bench_median "$dir/calls_times.txt" "$1"; }
t_first=$(m first_probe); t_probe=$(m probe); t_small=$(m small); t_fresh=$(m fresh); t_full=$(m full)
ways() { # name: "way (probed/loaded)"
    echo "$(stat_ways "$dir/calls.txt" "$1") ($(stat_median "$dir/calls.txt" "$1" 4) / $(stat_median "$dir/calls.txt" "$1" 5))"
}
idx_big=$(state_indexes big)
idx_big_defs=$(ptf_psql -At -c "SELECT string_agg(btrim(substring(pg_get_indexdef(indexrelid) from ' USING .*')), ', ' ORDER BY indexrelid) FROM pg_index WHERE indrelid = (SELECT state_table FROM ptf.state WHERE uid = 'big')::regclass")
small_keys=$(ptf_psql -At -c "SELECT keys FROM ptf.state WHERE uid = 'small'")
within() { # ms ratio-of ms-anchor max-ratio max-ms: yes/NO
    awk -v a="$1" -v b="$2" -v r="$3" -v ms="$4" 'BEGIN { print ((a / b <= r && a <= ms) ? "yes" : "**NO**") }'
}
for u in $(ptf_psql -At -c "SELECT uid FROM ptf.state WHERE uid LIKE 'fresh\_%'"); do
    ptf_psql -q -c "SELECT ptf.drop_state('$u')" >/dev/null
done

echo "### 1. A 100-row call over a uid of $big_keys keys (state table $((big_bytes / 1048576)) MB; median of $REPS, ms)"
echo
echo "state_load: as ptf.last_call_stats() gave it (median keys_probed / keys_loaded)."
echo
echo "| call | ms | state_load (probed / loaded) | anchor | anchor ms | ratio | target | met |"
echo "|---|---:|---|---|---:|---:|---|---|"
echo "| 100 rows into 'big' (auto) | $t_probe | $(ways probe) | the same into 'small' ($small_keys keys at the end) | $t_small | $(ptf_bench_ratio "$t_probe" "$t_small") | <= 3x and <= 20 ms | $(within "$t_probe" "$t_small" 3 20) |"
echo "| 100 rows into 'big' (auto) | $t_probe | $(ways probe) | the same into a new uid (its first call) | $t_fresh | $(ptf_bench_ratio "$t_probe" "$t_fresh") | <= 3x and <= 20 ms | $(within "$t_probe" "$t_fresh" 3 20) |"
echo "| before: 100 rows into 'big', \`ptf.state_load = full\` (median of $FULL_REPS) | $t_full | $(ways full) | the same, auto | $t_probe | $(ptf_bench_ratio "$t_full" "$t_probe") | (the old path) | |"
echo "| the first probing call (makes the key index; once, not in the medians) | $t_first | $(ways first_probe) | | | | | |"
echo
echo "Indexes on the state table of 'big' now: $idx_big (made by the first probing call): $idx_big_defs."
echo

echo "### 2. The first call of a uid: $N rows into an empty uid (median of $BULK_REPS, ms)"
echo
echo "| call | ms | state_load | indexes on the state table after it | anchor | anchor ms | ratio | target | met |"
echo "|---|---:|---|---:|---|---:|---:|---|---|"
echo "| $N rows, auto | $bulk_auto | $(stat_ways "$dir/bulk.txt" bulk_auto) | $idx_auto | the same, \`ptf.state_load = full\` ($(stat_ways "$dir/bulk.txt" bulk_full), $idx_full indexes) | $bulk_full | $(ptf_bench_ratio "$bulk_auto" "$bulk_full") | <= 1.1x, no index | $(awk -v a="$bulk_auto" -v b="$bulk_full" -v i="$idx_auto" 'BEGIN { print ((a / b <= 1.1 && i == "0") ? "yes" : "**NO**") }') |"
echo

# ---- 3. a pipeline over N live keys ----
ptf_log "bench: pipeline, ptf.state_memory_limit = $PIPE_MEMORY_LIMIT, preloading $N keys"
ptf_psql -q <<SQL
ALTER SYSTEM SET ptf.state_memory_limit = '$PIPE_MEMORY_LIMIT';
SELECT pg_reload_conf() \g /dev/null
CREATE TABLE events (k bigint, v bigint);
CREATE TABLE first_events (k bigint, v bigint);
CREATE SEQUENCE new_keys START $((N + 1));
SELECT ptf.create_pipeline('pipe', \$q\$$pipe_query\$q\$, 'first_events') \g /dev/null
SQL
for i in $(seq 1 600); do
    pid=$(ptf_psql -At -c "SELECT coalesce(max(pid), 0) FROM ptf.pipeline_status WHERE name = 'pipe'")
    [ "$pid" -eq 0 ] || break
    [ "$i" -lt 600 ] || ptf_die "no pipeline worker after 60 s"
    sleep 0.1
done
worker_limit=$(ptf_psql -At -c "SELECT setting || unit FROM pg_settings WHERE name = 'ptf.state_memory_limit'")

# /proc/PID/status every 0.5 s: time VmRSS RssAnon VmHWM (kB)
sample_memory() {
    while [ -r "/proc/$pid/status" ]; do
        awk -v t="$(date +%s.%N)" '$1 == "VmRSS:" || $1 == "RssAnon:" || $1 == "VmHWM:" { v[$1] = $2 }
            END { if (v["VmRSS:"] != "") print t, v["VmRSS:"], v["RssAnon:"], v["VmHWM:"] }' "/proc/$pid/status" 2>/dev/null || true
        sleep 0.5
    done
}
sample_memory >"$dir/memory.txt" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true; ptf_pg_stop "$PTF_BENCH_DIR" >/dev/null 2>&1 || true; rm -rf "$PTF_BENCH_DIR"' EXIT
sleep 1

# Wait until the pipeline has read everything written so far.  False when
# its position did not move for STUCK_SECONDS (failing steps, say).
wait_caught_up() {
    local target ok lsn last="" moved now
    target=$(ptf_psql -At -c "SELECT pg_current_wal_flush_lsn()")
    moved=$(date +%s)
    while :; do
        read -r ok lsn <<<"$(ptf_psql -At -F ' ' -c "SELECT coalesce(bool_and(lsn >= '$target' OR (state = 'running' AND lag_seconds = 0)), false), max(lsn) FROM ptf.pipeline_status WHERE name = 'pipe'")"
        [ "$ok" != t ] || return 0
        now=$(date +%s)
        if [ "$lsn" != "$last" ]; then last=$lsn; moved=$now; fi
        [ $((now - moved)) -lt "$STUCK_SECONDS" ] || return 1
        sleep 0.1
    done
}
pipe_failures() { ptf_psql -At -c "SELECT state || ', ' || failures || ' failed steps' || coalesce(', last error: ' || last_error, '') FROM ptf.pipeline_status WHERE name = 'pipe'"; }
state_size() { ptf_psql -At -F ' ' -c "SELECT keys, pg_total_relation_size(state_table::regclass) FROM ptf.state WHERE uid = 'pipe'"; }
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
secs() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", e - s }'; }
# peaks over [from, to) of the samples; fields 2 VmRSS, 3 RssAnon, 4 VmHWM
peak() { awk -v f="$1" -v t="$2" -v c="$3" '$1 >= f && $1 < t && $c > m { m = $c } END { print m + 0 }' "$dir/memory.txt"; }
limit_kb=$(awk -v s="$worker_limit" 'BEGIN { n = s + 0; u = s; sub(/^[0-9]+/, "", u);
    if (u == "kB") print n; else if (u == "MB") print n * 1024; else if (u == "GB") print n * 1048576; else print n }')
mem_ok() { awk -v a="$1" -v l="$limit_kb" 'BEGIN { print ((a <= l + 65536) ? "yes (<= cap + 64 MB)" : "**NO** (> cap + 64 MB)") }'; }
rows=()

read -r _ _ anon0 _ <<<"$(tail -n 1 "$dir/memory.txt")"
pre_start=$(date +%s.%N)
ptf_psql -q <<SQL
DO \$\$
BEGIN
    FOR b IN 0 .. ($N - 1) / $PRELOAD_TXN_ROWS LOOP
        INSERT INTO events SELECT (i * $P) % $N + 1, i FROM generate_series(b::bigint * $PRELOAD_TXN_ROWS + 1, least((b + 1)::bigint * $PRELOAD_TXN_ROWS, $N)) i;
        COMMIT;
    END LOOP;
END
\$\$;
SQL
pre_written=$(date +%s.%N)
rows+=("| preload: $N rows in transactions of $PRELOAD_TXN_ROWS, written in (s) | $(secs "$pre_start" "$pre_written") | | |")
if wait_caught_up; then
    pre_end=$(date +%s.%N)
    pipe_ok=1
    rows+=("| preload: caught up after (s), changes/s | $(secs "$pre_start" "$pre_end"), $(awk -v s="$pre_start" -v e="$pre_end" -v n="$N" 'BEGIN { printf "%.0f", n / (e - s) }') | | |")
else
    pre_end=$(date +%s.%N)
    pipe_ok=0
    rows+=("| preload: **did not catch up** (no progress for ${STUCK_SECONDS} s; read $(ptf_psql -At -c "SELECT rows_in FROM ptf.pipeline_status WHERE name = 'pipe'") of $N changes) | $(pipe_failures) | | **NO** |")
fi
sleep 2
st_start=$(date +%s.%N)
read -r _ rss_s anon_s _ <<<"$(tail -n 1 "$dir/memory.txt")"
read -r keys0 bytes0 <<<"$(state_size)"
rows+=("| state after the preload: keys, table + indexes MB | $keys0, $(mb $((bytes0 / 1024))) | | |")

if [ "$pipe_ok" -eq 1 ]; then
    rows_in0=$(ptf_psql -At -c "SELECT rows_in FROM ptf.pipeline_status WHERE name = 'pipe'")
    cat >"$dir/insert.sql" <<SQL
INSERT INTO events (k, v)
SELECT CASE WHEN random() < $NEW_SHARE THEN nextval('new_keys') ELSE 1 + (random() * ($N - 1))::bigint END, 0
  FROM generate_series(1, $ROWS_PER_TXN);
SQL
    chown postgres "$dir/insert.sql"
    ptf_log "bench: pipeline, pgbench $CLIENTS clients for ${PIPE_SECONDS}s, $ROWS_PER_TXN rows a transaction"
    since=$(ptf_psql -At -c "SELECT count(*) FROM events")
    st_start=$(date +%s.%N)
    ptf_as_postgres "$PTF_BINDIR/pgbench" -n -c "$CLIENTS" -j "$CLIENTS" -T "$PIPE_SECONDS" \
        -f "$dir/insert.sql" -h "$PGHOST" -p "$PGPORT" postgres >"$dir/pgbench.out" 2>&1 ||
        { cat "$dir/pgbench.out" >&2; ptf_die "pgbench failed"; }
    st_written=$(date +%s.%N)
    written=$(( $(ptf_psql -At -c "SELECT count(*) FROM events") - since ))
    rows+=("| stream: changes written in ${PIPE_SECONDS} s of pgbench, changes/s written | $written, $(awk -v w="$written" -v s="$st_start" -v e="$st_written" 'BEGIN { printf "%.0f", w / (e - s) }') | | |")
    if wait_caught_up; then
        st_end=$(date +%s.%N)
        processed=$(awk -v w="$written" -v s="$st_start" -v e="$st_end" 'BEGIN { printf "%.0f", w / (e - s) }')
        rows+=("| stream: **changes/s processed** (all of them, until caught up: $(secs "$st_written" "$st_end") s after pgbench) | **$processed** | >= 50000 | $(awk -v p="$processed" 'BEGIN { print ((p >= 50000) ? "yes" : "**NO**") }') |")
    else
        st_end=$(date +%s.%N)
        rows+=("| stream: **did not catch up** (no progress for ${STUCK_SECONDS} s) | $(pipe_failures) | >= 50000 | **NO** |")
    fi
    rows_in1=$(ptf_psql -At -c "SELECT rows_in FROM ptf.pipeline_status WHERE name = 'pipe'")
    rows+=("| rows_in counted by the pipeline over the stream | $((rows_in1 - rows_in0)) | = changes written | $([ $((rows_in1 - rows_in0)) -eq "$written" ] && echo yes || echo '**NO**') |")
    sleep 1
fi
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
pid_end=$(ptf_psql -At -c "SELECT pid FROM ptf.pipeline_status WHERE name = 'pipe'")
pre_anon=$(peak "$pre_start" "$st_start" 3); pre_rss=$(peak "$pre_start" "$st_start" 2)
rows+=("| worker RssAnon (private memory) MB: at its start / peak during the preload / after it | $(mb "$anon0") / **$(mb "$pre_anon")** / $(mb "$anon_s") | <= $(mb "$limit_kb") + fixed overhead | $(mem_ok "$pre_anon") |")
if [ "$pipe_ok" -eq 1 ]; then
    st_anon=$(peak "$st_start" 9e18 3); st_rss=$(peak "$st_start" 9e18 2)
    rows+=("| worker RssAnon MB: peak during the stream; minus after the preload | **$(mb "$st_anon")**; $(mb $((st_anon - anon_s))) | <= $(mb "$limit_kb") + fixed overhead | $(mem_ok "$st_anon") |")
    rows+=("| worker VmRSS MB (counts the shared buffers it touched): peak of the preload / after it / peak of the stream | $(mb "$pre_rss") / $(mb "$rss_s") / $(mb "$st_rss") | | |")
    read -r keys1 bytes1 <<<"$(state_size)"
    rows+=("| state after the stream: keys, table + indexes MB | $keys1, $(mb $((bytes1 / 1024))) | | |")
    sink_ok=$(ptf_psql -At -c "SELECT (SELECT count(*) FROM first_events) = (SELECT CASE WHEN is_called THEN last_value ELSE $N END FROM new_keys)")
    rows+=("| sink: as many rows as keys | $sink_ok | t | $([ "$sink_ok" = t ] && echo yes || echo '**NO**') |")
else
    rows+=("| worker VmRSS MB (counts the shared buffers it touched): peak of the preload | $(mb "$pre_rss") | | |")
fi
rows+=("| pipeline now; same worker throughout | $(pipe_failures); $([ "$pid_end" = "$pid" ] && echo "yes" || echo "no (now $pid_end)") | running, 0 failed steps; yes | |")
pipe_indexes=$(ptf_psql -At -c "SELECT count(*) FROM pg_index WHERE indrelid = (SELECT state_table FROM ptf.state WHERE uid = 'pipe')::regclass")

echo "### 3. A keep-first pipeline over $N live keys, ptf.state_memory_limit = $worker_limit (worker pid $pid)"
echo
echo "| measure | value | target | met |"
echo "|---|---:|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Memory sampled every 0.5 s ($(wc -l <"$dir/memory.txt") samples) from /proc/$pid/status. Indexes on the pipeline's state table at the end: $pipe_indexes$([ "$pipe_indexes" -gt 0 ] || echo " (the worker never read it key by key)")."
echo "Fresh-batch latency from idle: \`bash bench/pipeline.sh\` (a 200-row batch after 2 s idle)."
