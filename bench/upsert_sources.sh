#!/usr/bin/env bash
# bench/upsert_sources.sh: what reading an upsert source costs -- a table
# under REPLICA IDENTITY DEFAULT, whose rows the stream keeps by primary
# key -- against the same table under REPLICA IDENTITY FULL, whose WAL
# carries whole old rows.  Side by side in one run, on a throwaway server.
#
#   bash bench/upsert_sources.sh      (as root: installs what is missing, builds)
#
# Window aggregate: ROWS rows (default 1M) over NGROUPS groups (1000), a
# tumbling window of an hour per group, then every other row updated and
# every tenth deleted; the uid's one call reads every change.  Measured per
# replica identity: the WAL the changes wrote, the call's time (changes per
# second), the state's memory (ptf.last_call_stats().state_bytes) and its
# tables (ptf.state.bytes), per live row.  Temporal join: KEYS rates
# (default 100k) updated UPDATES times each (default 5), then the state's
# memory per key.  REPS rounds (default 3) on fresh tables; medians.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

ROWS=${ROWS:-1000000}
NGROUPS=${NGROUPS:-1000}
KEYS=${KEYS:-100000}
UPDATES=${UPDATES:-5}
REPS=${REPS:-3}

ptf_bench_start ""
dir=$PTF_BENCH_DIR
ptf_psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION deduplicate_keep_first'

# one round for identity $1 (full|default), round $2: "name value" lines
window_round() {
    local ident=$1 r=$2 t="w_${1}_$2"
    ptf_psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE TABLE $t (id bigint PRIMARY KEY, g int, ts timestamp, v int, payload text);
ALTER TABLE $t REPLICA IDENTITY $ident;
CREATE TYPE ${t}_out AS (g int, window_start timestamp, window_end timestamp, n bigint, total bigint);
SELECT count(*) FROM ptf.window_aggregate(NULL::$t, NULL::${t}_out, 'tumble', 'ts', '1 hour',
    partition_by => '{g}', aggregates => 'count(*) AS n, sum(v) AS total',
    watermark_delay => '1 day', changes => true, uid => '$t');
SQL
    ptf_psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/$t.out" <<SQL
SET ptf.max_changes_per_call = 0;
SELECT pg_current_wal_lsn() AS lsn0 \\gset
INSERT INTO $t SELECT i, (hashint8(i) & 2147483647) % $NGROUPS,
       timestamp '2024-01-01' + ((hashint8(i * 7) & 2147483647) % 86400) * interval '1 second',
       i % 1000, md5(i::text)
  FROM generate_series(1, $ROWS) i;
UPDATE $t SET v = v + 1 WHERE id % 2 = 0;
DELETE FROM $t WHERE id % 10 = 0;
SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');
\\timing on
\\echo @@ read
SELECT count(*) FROM ptf.window_aggregate(NULL::$t, NULL::${t}_out, 'tumble', 'ts', '1 hour',
    partition_by => '{g}', aggregates => 'count(*) AS n, sum(v) AS total',
    watermark_delay => '1 day', changes => true, uid => '$t');
\\echo @@
\\timing off
SELECT 'changes', rows_in FROM ptf.state WHERE uid = '$t';
SELECT 'state_bytes', state_bytes FROM ptf.last_call_stats();
SELECT 'table_bytes', bytes FROM ptf.state WHERE uid = '$t';
SELECT 'live', count(*) FROM $t;
SELECT ptf.drop_state('$t');
DROP TABLE $t;
DROP TYPE ${t}_out;
SQL
}

tj_round() {
    local ident=$1 r=$2 t="r_${1}_$2" o="o_${1}_$2"
    ptf_psql -X -q -At -v ON_ERROR_STOP=1 >"$dir/$t.out" <<SQL
SET ptf.max_changes_per_call = 0;
CREATE TABLE $t (cur int PRIMARY KEY, rate int, ts timestamptz);
ALTER TABLE $t REPLICA IDENTITY $ident;
CREATE TABLE $o (id int, cur int, ts timestamptz);
SELECT count(*) FROM ptf.temporal_join(NULL::$o, NULL::$t, 'ts', 'ts', '{cur}',
    changes => true, uid => '$t');
INSERT INTO $t SELECT i, 0, timestamptz '2024-01-01' + i * interval '1 ms' FROM generate_series(1, $KEYS) i;
SELECT pg_current_wal_lsn() AS lsn0 \\gset
$(for u in $(seq 1 "$UPDATES"); do
    echo "UPDATE $t SET rate = $u, ts = ts + interval '1 hour';"
  done)
DELETE FROM $t WHERE cur % 10 = 0;
SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');
\\timing on
\\echo @@ read
SELECT count(*) FROM ptf.temporal_join(NULL::$o, NULL::$t, 'ts', 'ts', '{cur}',
    changes => true, uid => '$t');
\\echo @@
\\timing off
SELECT 'changes', rows_in FROM ptf.state WHERE uid = '$t';
SELECT 'state_bytes', state_bytes FROM ptf.last_call_stats();
SELECT 'keys', keys FROM ptf.state WHERE uid = '$t';
SELECT ptf.drop_state('$t');
DROP TABLE $t, $o;
SQL
}

# value of name in a round's output
val() { awk -F'|' -v n="$2" '$1 == n { v = $2 } END { print (v == "" ? 0 : v) }' "$1"; }
ms() { ptf_bench_times "$1" | awk '$1 == "read" { print $2 }'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for r in $(seq 1 "$REPS"); do
    for ident in full default; do
        ptf_log "bench: window aggregate, REPLICA IDENTITY $ident, round $r"
        window_round "$ident" "$r"
        ptf_log "bench: temporal join, REPLICA IDENTITY $ident, round $r"
        tj_round "$ident" "$r"
    done
done

summarize() {   # prefix ident: "wal ms changes state_bytes table_bytes live" medians
    local p=$1 ident=$2 f out=""
    for f in wal ms changes state_bytes table_bytes live keys; do
        out+=" $(for r in $(seq 1 "$REPS"); do
            file="$dir/${p}_${ident}_$r.out"
            if [ "$f" = ms ]; then ms "$file"; else val "$file" "$f"; fi
        done | median)"
    done
    echo "$out"
}

# changes as written (an UPDATE is one), the same under either identity
wchanges=$((ROWS + ROWS / 2 + ROWS / 10))
tchanges=$((KEYS * (1 + UPDATES) + KEYS / 10))
echo
echo "#### Window aggregate over $ROWS inserts, $((ROWS / 2)) updates, $((ROWS / 10)) deletes ($NGROUPS groups; median of $REPS)"
echo
echo "| replica identity | WAL of the changes (MB) | read (ms) | changes/s | state memory (MB) | state tables (MB) | memory per live row (B) | tables per live row (B) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for ident in full default; do
    read -r wal t _ sb tb live _ <<<"$(summarize w "$ident")"
    awk -v i="$ident" -v wal="$wal" -v t="$t" -v c="$wchanges" -v sb="$sb" -v tb="$tb" -v live="$live" 'BEGIN {
        printf "| %s | %.1f | %.0f | %.0f | %.1f | %.1f | %.0f | %.0f |\n", toupper(i), wal / 1048576, t,
               c / (t / 1000), sb / 1048576, tb / 1048576, sb / live, tb / live }'
done
echo
echo "#### Temporal join over $KEYS rates updated $UPDATES times, a tenth deleted (median of $REPS)"
echo
echo "| replica identity | WAL of the changes (MB) | read (ms) | changes/s | state memory (MB) | memory per key (B) |"
echo "|---|---:|---:|---:|---:|---:|"
for ident in full default; do
    read -r wal t _ sb _ _ keys <<<"$(summarize r "$ident")"
    awk -v i="$ident" -v wal="$wal" -v t="$t" -v c="$tchanges" -v sb="$sb" -v k="$keys" 'BEGIN {
        printf "| %s | %.1f | %.0f | %.0f | %.1f | %.0f |\n", toupper(i), wal / 1048576, t,
               c / (t / 1000), sb / 1048576, sb / k }'
done
