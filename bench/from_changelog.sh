#!/usr/bin/env bash
# bench/from_changelog.sh: Debezium rows applied to a mirror table through
# ptf.from_changelog + ptf.apply_changelog, against the SQL a user would
# write by hand, on a throwaway server, side by side in one run.
#
#   bash bench/from_changelog.sh          (as root: installs what is missing, builds)
#
# Data: ROWS Debezium rows (default 1M) in a landing table (op, before and
# after as jsonb): 50% creates of new keys, 40% updates, 10% deletes at the
# end, with whole before images (REPLICA IDENTITY FULL).  Each round
# empties the mirrors and applies everything, REPS rounds (default 3)
# after a warm-up, alternating; medians shown.  Anchors:
#   - a PL/pgSQL loop over the rows in order: jsonb_populate_record, then
#     INSERT ... ON CONFLICT DO UPDATE or DELETE per row;
#   - the set-based way in PostgreSQL 15: the last row per key (DISTINCT
#     ON) merged with MERGE.
# The call and MERGE are also timed under SMALL_WORK_MEM (default 4MB,
# PostgreSQL's default), where the changes outgrow apply_changelog's batch
# and it sorts them as MERGE's plan does (statements named *_small).
# Every mirror is checked against the expected final table.  The floor:
# SELECT count(*) over the landing table in the order the call reads it;
# each side's cost above it is printed in ns per Debezium row.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

ROWS=${ROWS:-1000000}
REPS=${REPS:-3}
SMALL_WORK_MEM=${SMALL_WORK_MEM:-4MB}

ptf_bench_start "work_mem = 64MB"
dir=$PTF_BENCH_DIR

ptf_log "bench: $ROWS Debezium rows"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric, status text, updated_at timestamptz);
CREATE TABLE landing (seq bigint, op text, before jsonb, after jsonb, ts_ms bigint);
CREATE TABLE mirror_ptf (LIKE accounts INCLUDING ALL);
CREATE TABLE mirror_loop (LIKE accounts INCLUDING ALL);
CREATE TABLE mirror_merge (LIKE accounts INCLUDING ALL);
CREATE TABLE mirror_ptf_small (LIKE accounts INCLUDING ALL);
CREATE TABLE mirror_merge_small (LIKE accounts INCLUDING ALL);
-- the change sequence: creates, then updates of random keys, then deletes
CREATE TEMP TABLE ev AS
WITH ops AS (
    SELECT g AS seq, g AS id, 'c' AS op, g AS v FROM generate_series(1, $ROWS / 2) g
    UNION ALL
    SELECT $ROWS / 2 + g, (hashint4(g) & 2147483647) % ($ROWS / 2) + 1, 'u', $ROWS + g
      FROM generate_series(1, $ROWS * 4 / 10) g
    UNION ALL
    SELECT $ROWS * 9 / 10 + g, g * 5, 'd', NULL FROM generate_series(1, $ROWS / 10) g)
SELECT seq, op, id, v, lag(v) OVER (PARTITION BY id ORDER BY seq) AS prev FROM ops;
CREATE FUNCTION pg_temp.img(id int, v int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS
\$\$ SELECT jsonb_build_object('id', id, 'owner', 'owner-' || id, 'balance', v / 100.0,
                             'status', CASE WHEN v % 3 = 0 THEN 'gold' ELSE 'basic' END,
                             'updated_at', timestamptz '2024-01-01' + v * interval '1 second') \$\$;
INSERT INTO landing
SELECT seq, op,
       CASE WHEN op IN ('u', 'd') THEN pg_temp.img(id, prev) END,
       CASE WHEN op IN ('c', 'u') THEN pg_temp.img(id, v) END,
       1700000000000 + seq
  FROM ev ORDER BY seq;
CREATE INDEX ON landing (seq);
VACUUM ANALYZE landing;
-- the final table the changes lead to
CREATE TABLE expected AS
SELECT (jsonb_populate_record(NULL::accounts, after)).*
  FROM (SELECT DISTINCT ON (coalesce(after, before)->>'id') op, after
          FROM landing ORDER BY coalesce(after, before)->>'id', seq DESC) s
 WHERE op <> 'd';
CREATE FUNCTION apply_loop() RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE r record;
BEGIN
    FOR r IN SELECT op, before, after FROM landing ORDER BY seq LOOP
        IF r.op IN ('c', 'r', 'u') THEN
            INSERT INTO mirror_loop SELECT (jsonb_populate_record(NULL::mirror_loop, r.after)).*
                ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, balance = EXCLUDED.balance,
                    status = EXCLUDED.status, updated_at = EXCLUDED.updated_at;
        ELSIF r.op = 'd' THEN
            DELETE FROM mirror_loop WHERE id = (r.before->>'id')::int;
        END IF;
    END LOOP;
END \$\$;
SQL

statements() {
    cat <<'LIST'
ptf|SELECT * FROM ptf.apply_changelog('mirror_ptf', $q$SELECT kind, data FROM ptf.from_changelog(NULL::landing, NULL::mirror_ptf, before => 'before', after => 'after', op_mapping => '{"c, r": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}', query => 'SELECT * FROM landing ORDER BY seq')$q$)
loop|SELECT apply_loop()
floor|SELECT count(*) FROM (SELECT * FROM landing ORDER BY seq) l
merge|MERGE INTO mirror_merge m USING (SELECT DISTINCT ON (id) id, op, after FROM (SELECT seq, op, after, (coalesce(after, before)->>'id')::int AS id FROM landing) l ORDER BY id, seq DESC) s ON m.id = s.id WHEN MATCHED AND s.op = 'd' THEN DELETE WHEN MATCHED THEN UPDATE SET owner = s.after->>'owner', balance = (s.after->>'balance')::numeric, status = s.after->>'status', updated_at = (s.after->>'updated_at')::timestamptz WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT VALUES (s.id, s.after->>'owner', (s.after->>'balance')::numeric, s.after->>'status', (s.after->>'updated_at')::timestamptz)
LIST
}

# the same two under little work_mem, into mirrors of their own
statements_all() {
    statements
    statements | awk -F'|' '$1 == "ptf" || $1 == "merge" { print }' |
        sed -e 's/^ptf|/ptf_small|/; s/^merge|/merge_small|/' \
            -e 's/mirror_ptf\b/mirror_ptf_small/g; s/mirror_merge\b/mirror_merge_small/g'
}

script=$dir/run.sql
{
    echo "\\timing on"
    for r in $(seq 0 "$REPS"); do
        statements_all | while IFS='|' read -r name sql; do
            [ "$name" = floor ] || echo "TRUNCATE mirror_$name;"
            echo "CHECKPOINT;"
            case $name in *_small) echo "SET work_mem = '$SMALL_WORK_MEM';" ;; esac
            # round 0 warms the caches and is not counted
            if [ "$r" -gt 0 ]; then echo "\\echo @@ $name"; fi
            echo "$sql \\g /dev/null"
            echo "\\echo @@"
            case $name in *_small) echo "RESET work_mem;" ;; esac
            [ "$name" = floor ] ||
                echo "SELECT 'mirror_$name differs from the expected table' FROM (SELECT count(*) AS n FROM ((TABLE mirror_$name EXCEPT ALL TABLE expected) UNION ALL (TABLE expected EXCEPT ALL TABLE mirror_$name)) d) c WHERE n > 0;"
        done
    done
} >"$script"
chown postgres "$script"
ptf_log "bench: $REPS rounds (and one warm-up)"
ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$script" >"$dir/out.txt"
if grep -q "differs from the expected" "$dir/out.txt"; then
    grep "differs from the expected" "$dir/out.txt" >&2
    ptf_die "a mirror is wrong"
fi
ptf_bench_times "$dir/out.txt" >"$dir/times.txt"
m() { ptf_bench_median "$dir/times.txt" "$1"; }
p=$(m ptf); l=$(m loop); g=$(m merge); f=$(m floor); ps=$(m ptf_small); gs=$(m merge_small)
# ns per row above the floor
above() { awk -v t="$1" -v f="$f" -v n="$ROWS" 'BEGIN { printf "%.0f", (t - f) * 1e6 / n }'; }

echo
echo "### $ROWS Debezium rows applied to an empty mirror (median of $REPS, ms; every mirror checked)"
echo
echo "| work | ptf | anchor | anchor ms | ratio | target |"
echo "|---|---:|---|---:|---:|---:|"
echo "| \`apply_changelog(from_changelog(...))\` | $p | PL/pgSQL loop in order: \`jsonb_populate_record\`, \`INSERT ... ON CONFLICT\` / \`DELETE\` | $l | $(ptf_bench_ratio "$p" "$l") | |"
echo "| \`apply_changelog(from_changelog(...))\` | $p | set-based: last row per key (\`DISTINCT ON\`) + \`MERGE\` | $g | $(ptf_bench_ratio "$p" "$g") | <= 1.0x |"
echo "| the same, work_mem = $SMALL_WORK_MEM | $ps | the same \`MERGE\`, work_mem = $SMALL_WORK_MEM | $gs | $(ptf_bench_ratio "$ps" "$gs") | |"
echo
echo "| floor: \`SELECT count(*)\` over the landing rows in seq order, ms | ptf above it, ns per row | MERGE above it, ns per row | loop above it, ns per row |"
echo "|---:|---:|---:|---:|"
echo "| $f | $(above "$p") | $(above "$g") | $(above "$l") |"
