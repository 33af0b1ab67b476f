#!/usr/bin/env bash
# bench/to_changelog.sh: ptf.to_changelog over a change stream against
# pg_logical_slot_peek_changes with test_decoding on the same WAL, on a
# throwaway server, side by side in one run.
#
#   bash bench/to_changelog.sh          (as root: installs what is missing, builds)
#
# Data: a table with REPLICA IDENTITY FULL gets INSERTS inserts (default 1M)
# then UPDATES updates (default 500k), in transactions of 10k rows, after
# both slots were made: the uid's (by its first call) and a test_decoding
# one.  Every statement runs REPS times (default 3), alternating; the
# to_changelog call reads the whole backlog (ptf.max_changes_per_call = 0)
# and is rolled back, so each round reads the same changes.  The table shows
# medians and ratios.  Our plugin's JSON is also set against wal2json's
# format-version 2, the JSON plugin a user would otherwise pick, when its
# Debian package can be installed (postgresql-15-wal2json).
#
# SHAPE=int (default): (id int, v int, payload text); SHAPE=numeric: (id
# bigint, v numeric, payload text), v = id * 1.5 -- the numeric and text
# columns of a money table, whose values test_decoding prints through their
# output functions.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

INSERTS=${INSERTS:-1000000}
UPDATES=${UPDATES:-500000}
REPS=${REPS:-3}
SHAPE=${SHAPE:-int}
case $SHAPE in
    int) columns="id int PRIMARY KEY, v int, payload text"; values="i, i % 1000, 'payload-' || md5(i::text)" ;;
    numeric) columns="id bigint PRIMARY KEY, v numeric, payload text"; values="i, i * 1.5, 'payload-' || md5(i::text)" ;;
    *) echo "SHAPE must be int or numeric" >&2; exit 2 ;;
esac

# wal2json, the competitor of our JSON: Debian's package, when apt has it
ptf_ensure_packages
if ! ptf_pkg_installed postgresql-15-wal2json && ptf_pkg_exists postgresql-15-wal2json &&
    [ "$(id -u)" -eq 0 ]; then
    ptf_log "apt-get install postgresql-15-wal2json (the JSON plugin we are compared with)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        postgresql-15-wal2json >/dev/null || ptf_log "wal2json not installed: compared without it"
fi
plugins="deduplicate_keep_first, test_decoding"
if ptf_pkg_installed postgresql-15-wal2json; then plugins="$plugins, wal2json"; fi

ptf_bench_start "# test_decoding is the anchor; decoding memory as PostgreSQL ships it
logical_decoding_work_mem = 64MB
output_plugin_libraries = '$plugins'"
dir=$PTF_BENCH_DIR

ptf_log "bench: $INSERTS inserts, then $UPDATES updates, REPLICA IDENTITY FULL"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE bench_cdc ($columns);
ALTER TABLE bench_cdc REPLICA IDENTITY FULL;
CREATE TABLE bench_other (id int);
-- the uid's first call makes its slot; the anchor's slot at the same point
SELECT count(*) FROM ptf.to_changelog(NULL::bench_cdc, changes => true, uid => 'bench') \g /dev/null
SELECT 'slot' FROM pg_create_logical_replication_slot('td', 'test_decoding') \g /dev/null
SELECT 'slot' FROM pg_create_logical_replication_slot('json', 'deduplicate_keep_first') \g /dev/null
$(if [[ $plugins == *wal2json* ]]; then
    echo "SELECT 'slot' FROM pg_create_logical_replication_slot('w2j', 'wal2json') \\g /dev/null"
fi)
DO \$\$
BEGIN
    FOR b IN 0 .. ($INSERTS - 1) / 10000 LOOP
        INSERT INTO bench_cdc
        SELECT $values
          FROM generate_series(b * 10000 + 1, least((b + 1) * 10000, $INSERTS)) i;
        COMMIT;
    END LOOP;
    FOR b IN 0 .. ($UPDATES - 1) / 10000 LOOP
        UPDATE bench_cdc SET v = v + 1
         WHERE id BETWEEN b * 10000 + 1 AND least((b + 1) * 10000, $UPDATES);
        COMMIT;
    END LOOP;
END \$\$;
CHECKPOINT;
SQL

# name|statement; statements are timed by psql's \timing
statements() {
    cat <<'LIST'
to_changelog|SELECT count(*) FROM ptf.to_changelog(NULL::bench_cdc, changes => true, uid => 'bench')
test_decoding|SELECT count(*) FROM pg_logical_slot_peek_changes('td', NULL, NULL)
plugin_json|SELECT count(*) FROM pg_logical_slot_peek_changes('json', NULL, NULL)
floor|DO $$BEGIN PERFORM pg_copy_logical_replication_slot('td', 'floor'); PERFORM pg_replication_slot_advance('floor', pg_current_wal_insert_lsn()); PERFORM pg_drop_replication_slot('floor'); END$$
LIST
    if [[ $plugins == *wal2json* ]]; then
        echo "wal2json|SELECT count(*) FROM pg_logical_slot_peek_changes('w2j', NULL, NULL, 'format-version', '2')"
    fi
}

script=$dir/run.sql
{
    echo "SET ptf.max_changes_per_call = 0;"
    echo "SET work_mem = '64MB';"
    echo "\\timing on"
    for r in $(seq 0 "$REPS"); do
        statements | while IFS='|' read -r name sql; do
            # the uid's state must stay where it is: every round reads it all
            if [ "$name" = to_changelog ]; then echo "BEGIN;"; fi
            # round 0 warms the caches and is not counted
            if [ "$r" -gt 0 ]; then echo "\\echo @@ $name"; fi
            echo "$sql;"
            if [ "$name" = to_changelog ]; then echo "ROLLBACK;"; fi
        done
    done
} >"$script"
chown postgres "$script"
ptf_log "bench: $REPS rounds (and one warm-up)"
ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$script" >"$dir/out.txt"
ptf_bench_times "$dir/out.txt" >"$dir/times.txt"
m() { ptf_bench_median "$dir/times.txt" "$1"; }
t=$(m to_changelog); td=$(m test_decoding); pj=$(m plugin_json); wj=$(m wal2json); f=$(m floor)
rows=$(ptf_psql -X -q -At -c "BEGIN" -c "SET ptf.max_changes_per_call = 0" \
    -c "SELECT count(*) FROM ptf.to_changelog(NULL::bench_cdc, changes => true, uid => 'bench')" -c "ROLLBACK")
changes=$((INSERTS + UPDATES))

echo
echo "### $changes changes ($INSERTS inserts + $UPDATES updates, REPLICA IDENTITY FULL, ($columns)), median of $REPS, ms"
echo
echo "The floor: a copy of the anchor's slot advanced over the same WAL (\`pg_replication_slot_advance\`:"
echo "the WAL read, no changes decoded), $f ms; the cost above it in ns per change: to_changelog"
echo "$(ptf_bench_above "$t" "$f" "$changes"), test_decoding $(ptf_bench_above "$td" "$f" "$changes")."
echo
echo "| work | ptf | anchor | anchor ms | ratio | target |"
echo "|---|---:|---|---:|---:|---:|"
echo "| \`to_changelog(changes => true)\`, $rows rows out | $t | \`pg_logical_slot_peek_changes\`, test_decoding | $td | $(ptf_bench_ratio "$t" "$td") | <= 0.45x |"
echo "| our plugin's JSON, \`pg_logical_slot_peek_changes\` | $pj | same, test_decoding | $td | $(ptf_bench_ratio "$pj" "$td") | <= 0.9x |"
if [ -n "$wj" ]; then
    echo "| our plugin's JSON, \`pg_logical_slot_peek_changes\` | $pj | same, wal2json \`format-version 2\` | $wj | $(ptf_bench_ratio "$pj" "$wj") | |"
fi
