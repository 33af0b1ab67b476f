#!/usr/bin/env bash
# bench/temporal_join.sh: ptf.temporal_join against its plain-SQL
# formulation, a LATERAL subquery over a btree index on (key, ts), on a
# throwaway server, side by side in one run; the state's memory per
# version; a temporal-join pipeline's throughput and lag.
#
#   bash bench/temporal_join.sh        (as root: installs what is missing, builds)
#
# Data: PROBES probe rows (default 1M) and VERSIONS versions (default 100k)
# over KEYS keys (default 10k), times spread over a day.  Every statement
# runs REPS times (default 3) after a warm-up round, alternating with its
# anchor in one session; the table shows medians and the ratio to the
# anchor, for each setting in WORK_MEMS (default "256MB 4MB": state in
# memory, and spilled).  The pipeline part: PIPE_ROWS orders (default 200k)
# written in transactions of 1000 behind the versions, the time until the
# sink has them all, then from idle one order: the time until it is in
# the sink.
set -euo pipefail

PTF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$PTF_ROOT/scripts/lib.sh"

PROBES=${PROBES:-1000000}
VERSIONS=${VERSIONS:-100000}
KEYS=${KEYS:-10000}
REPS=${REPS:-3}
WORK_MEMS=${WORK_MEMS:-"256MB 4MB"}
PIPE_ROWS=${PIPE_ROWS:-200000}

ptf_bench_start ""
dir=$PTF_BENCH_DIR

ptf_log "bench: $PROBES probes, $VERSIONS versions over $KEYS keys"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION deduplicate_keep_first;
CREATE TABLE bench_versions AS
SELECT DISTINCT ON (k, ts) k, ts, rate
  FROM (SELECT (hashint8(i) & 2147483647) % $KEYS AS k,
               timestamptz '2024-01-01' + ((hashint8(i * 31) & 2147483647) % 86400000) * interval '1 millisecond' AS ts,
               (i % 1000) / 10.0 AS rate
          FROM generate_series(1, $VERSIONS) i) g
 ORDER BY k, ts;
CREATE INDEX ON bench_versions (k, ts);
CREATE TABLE bench_probes AS
SELECT i AS id, (hashint8(i * 7) & 2147483647) % $KEYS AS k,
       timestamptz '2024-01-01' + ((hashint8(i * 37) & 2147483647) % 86400000) * interval '1 millisecond' AS ts,
       'order-' || i AS payload
  FROM generate_series(1, $PROBES) i;
VACUUM ANALYZE bench_versions, bench_probes;
SQL

# name|statement; statements are timed by psql's \timing
statements() {
    cat <<'LIST'
tj_inner|SELECT count(*) FROM ptf.temporal_join(NULL::bench_probes, NULL::bench_versions, 'ts', 'ts', '{k}')
lateral_inner|SELECT count(*) FROM bench_probes p JOIN LATERAL (SELECT * FROM bench_versions v WHERE v.k = p.k AND v.ts <= p.ts ORDER BY v.ts DESC LIMIT 1) v ON true
tj_left|SELECT count(*) FROM ptf.temporal_join(NULL::bench_probes, NULL::bench_versions, 'ts', 'ts', '{k}', join_type => 'left')
lateral_left|SELECT count(*) FROM bench_probes p LEFT JOIN LATERAL (SELECT * FROM bench_versions v WHERE v.k = p.k AND v.ts <= p.ts ORDER BY v.ts DESC LIMIT 1) v ON true
tj_rows|SELECT sum((probe).id + (build).rate) FROM ptf.temporal_join(NULL::bench_probes, NULL::bench_versions, 'ts', 'ts', '{k}')
lateral_rows|SELECT sum(p.id + v.rate) FROM bench_probes p JOIN LATERAL (SELECT * FROM bench_versions v WHERE v.k = p.k AND v.ts <= p.ts ORDER BY v.ts DESC LIMIT 1) v ON true
tj_live|SELECT count(*) FROM ptf.temporal_join(NULL::bench_probes, NULL::bench_versions, 'ts', 'ts', '{k}', watermark_delay => '1 hour', probe_query => 'SELECT * FROM bench_probes ORDER BY ts')
floor|SELECT (SELECT count(*) FROM bench_probes) + (SELECT count(*) FROM bench_versions)
LIST
}

for wm in $WORK_MEMS; do
    ptf_log "bench: work_mem = $wm, $REPS rounds"
    script=$dir/run.sql
    {
        echo "SET work_mem = '$wm';"
        echo "\\timing on"
        statements | while IFS='|' read -r name sql; do echo "$sql \\g /dev/null"; done
        for r in $(seq 1 "$REPS"); do
            statements | while IFS='|' read -r name sql; do
                echo "\\echo @@ $name"
                echo "$sql;"
            done
        done
    } >"$script"
    chown postgres "$script"
    ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$script" >"$dir/out.txt"
    ptf_bench_times "$dir/out.txt" >"$dir/times.txt"
    m() { ptf_bench_median "$dir/times.txt" "$1"; }
    ti=$(m tj_inner); li=$(m lateral_inner); tl=$(m tj_left); ll=$(m lateral_left)
    tr=$(m tj_rows); lr=$(m lateral_rows); tv=$(m tj_live); f=$(m floor)
    echo
    echo "### $PROBES probes x $VERSIONS versions, $KEYS keys, work_mem = $wm (median of $REPS, ms)"
    echo
    echo "The floor: \`SELECT count(*)\` over both tables, $f ms; the cost above it in ns per probe row:"
    echo "temporal join (INNER, count) $(ptf_bench_above "$ti" "$f" "$PROBES"), the LATERAL anchor $(ptf_bench_above "$li" "$f" "$PROBES")."
    echo
    echo "| work | ptf | anchor | anchor ms | ratio | target |"
    echo "|---|---:|---|---:|---:|---:|"
    echo "| temporal join, INNER, count(*) | $ti | \`JOIN LATERAL (... ORDER BY ts DESC LIMIT 1)\`, btree (k, ts) | $li | $(ptf_bench_ratio "$ti" "$li") | <= 1.0x |"
    echo "| temporal join, LEFT, count(*) | $tl | \`LEFT JOIN LATERAL (...)\` | $ll | $(ptf_bench_ratio "$tl" "$ll") | <= 1.0x |"
    echo "| temporal join, INNER, columns read | $tr | \`JOIN LATERAL (...)\`, same columns | $lr | $(ptf_bench_ratio "$tr" "$lr") | <= 1.0x |"
    echo "| temporal join, live watermark (probes buffered, fired, cleaned) | $tv | \`JOIN LATERAL (...)\` | $li | $(ptf_bench_ratio "$tv" "$li") | - |"
done

echo
echo "### State memory per version (work_mem = 256MB, the serial call, ptf.last_call_stats())"
echo
# serial: a parallel call's leader may hold no versions (engine/parallel.c)
ptf_psql -X -q -v ON_ERROR_STOP=1 -P format=unaligned -P fieldsep='|' -t <<SQL |
SET work_mem = '256MB';
SET max_parallel_workers_per_gather = 0;
SELECT count(*) FROM ptf.temporal_join(NULL::bench_probes, NULL::bench_versions, 'ts', 'ts', '{k}') \g /dev/null
SELECT 'versions only (probes joined on arrival)', keys, (SELECT count(*) FROM bench_versions), state_bytes,
       round(state_bytes::numeric / (SELECT count(*) FROM bench_versions), 1),
       (SELECT round(avg(pg_column_size(v.*))) FROM bench_versions v) FROM ptf.last_call_stats();
SQL
awk -F'|' 'BEGIN { print "| state | keys | versions | bytes | bytes per version | row bytes |"; print "|---|---:|---:|---:|---:|---:|" }
           { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }'

# ---- a temporal-join pipeline ----
ptf_log "bench: pipeline, $PIPE_ROWS orders"
ptf_psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE rates (k bigint PRIMARY KEY, rate numeric, ts timestamptz);
ALTER TABLE rates REPLICA IDENTITY FULL;
CREATE TABLE orders (id bigserial, k bigint, ts timestamptz NOT NULL DEFAULT clock_timestamp(),
                     created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE enriched (id bigint, k bigint, created_at timestamptz, rate numeric,
                       seen_at timestamptz NOT NULL DEFAULT clock_timestamp());
SELECT ptf.create_pipeline('enrich', $q$
    SELECT (probe).id, (probe).k, (probe).created_at, (build).rate
      FROM ptf.temporal_join(NULL::orders, NULL::rates, 'ts', 'ts', '{k}', join_type => 'left',
                             changes => true, uid => 'enrich')$q$, 'enriched');
INSERT INTO rates SELECT k, 1, '2020-01-01' FROM generate_series(0, 9999) k;
SQL
# orders wait for the rates' watermark: a rate tick after each batch moves it
start=$(date +%s.%N)
batches=$((PIPE_ROWS / 1000))
for b in $(seq 1 "$batches"); do
    echo "INSERT INTO orders (k) SELECT (random() * 9999)::bigint FROM generate_series(1, 1000);"
    echo "UPDATE rates SET ts = clock_timestamp(), rate = rate + 1 WHERE k = $((b % 10000));"
done >"$dir/load.sql"
chown postgres "$dir/load.sql"
ptf_psql -X -q -v ON_ERROR_STOP=1 -f "$dir/load.sql"
written=$(date +%s.%N)
# all but the orders after the last rate tick are due
target=$((batches * 1000 - 1000))
until [ "$(ptf_psql -X -At -c "SELECT count(*) >= $target FROM enriched")" = t ]; do sleep 0.05; done
done_at=$(date +%s.%N)
# from idle: one order and a rate tick after it
ptf_psql -X -q -c "INSERT INTO orders (k) VALUES (1)" -c "UPDATE rates SET ts = clock_timestamp() WHERE k = 2"
one=$(date +%s.%N)
until [ "$(ptf_psql -X -At -c "SELECT count(*) > $target FROM enriched")" = t ]; do sleep 0.01; done
one_done=$(date +%s.%N)
lags=$(ptf_psql -X -At -F ' ' -c "
    SELECT round(1000 * extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY seen_at - created_at))),
           round(1000 * extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY seen_at - created_at)))
      FROM enriched")
echo
echo "### Temporal-join pipeline ($PIPE_ROWS orders over 10k rates, LEFT)"
echo
echo "| measure | value |"
echo "|---|---:|"
awk -v s="$start" -v w="$written" -v d="$done_at" -v n="$target" \
    'BEGIN { printf "| write time (s) | %.2f |\n| all due orders in the sink after (s) | %.2f |\n| throughput (orders/s) | %.0f |\n", w - s, d - s, n / (d - s) }'
echo "| lag p50 / p99 (ms, insert to sink) | ${lags% *} / ${lags#* } |"
awk -v s="$one" -v e="$one_done" 'BEGIN { printf "| from idle: one order in the sink after (ms) | %.0f |\n", 1000 * (e - s) }'
