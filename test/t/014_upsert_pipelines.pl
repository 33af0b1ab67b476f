# Pipelines over upsert sources: tables under REPLICA IDENTITY DEFAULT,
# whose updates log no old row and whose deletes log only the primary key.
# A window aggregate keeps the last row of each key (in a second state
# table of its uid) to retract whole rows; a temporal join whose build key
# is the build table's primary key keeps the time of each key's last row,
# at which a delete deletes.  Across killed workers and immediate stops at
# every point of a step, each sink equals its one-shot answer over the same
# rows: nothing lost, nothing doubled, the kept rows in step with the sinks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('upsert_pipelines', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.pipeline_batch_size = 300
TimeZone = 'UTC'
});

# ---- windows: batch b writes clicks with times in [b * 10 min, b * 10 min +
# 5 min), out of order; with a delay of 5 minutes no change is late.  Its
# updates (of values, of the group, of the key) and deletes are of its own
# clicks, in open windows.
#
# ---- the temporal join: every change takes its time from one clock, so a
# side's watermark is its greatest time; rate_history records each version
# (insert, update) and each deletion, the one-shot answer's history.  A
# rate is deleted at the time of its last row, which the same transaction
# has just moved to the clock: a deletion no order before it can see.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE clicks (id bigserial PRIMARY KEY, user_id int, ts timestamp, v int);
    CREATE TABLE per_minute (user_id int, window_start timestamp, window_end timestamp, n bigint, total bigint);
    CREATE TABLE sessions (user_id int, window_start timestamp, window_end timestamp, n bigint, biggest int);
    SELECT ptf.create_pipeline('minutes', $q$
        SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::per_minute, 'tumble', 'ts', '1 minute',
            partition_by => '{user_id}', aggregates => 'count(*) AS n, sum(v) AS total',
            watermark_delay => '5 minutes', changes => true, uid => 'minutes')$q$, 'per_minute');
    SELECT ptf.create_pipeline('sessions', $q$
        SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::sessions, 'session', 'ts', '20 seconds',
            partition_by => '{user_id}', aggregates => 'count(*) AS n, max(v) AS biggest',
            watermark_delay => '5 minutes', changes => true, uid => 'sessions')$q$, 'sessions');

    CREATE SEQUENCE clock;
    CREATE FUNCTION tick() RETURNS timestamptz LANGUAGE sql
        AS $$SELECT timestamptz '2024-01-01 00:00+00' + nextval('clock') * interval '1 ms'$$;
    CREATE TABLE orders (id bigserial PRIMARY KEY, cur int, amount int, ts timestamptz);
    CREATE TABLE rates (cur int PRIMARY KEY, rate int, ts timestamptz);
    CREATE TABLE rate_history (seq bigserial, cur int, rate int, ts timestamptz, deleted boolean);
    CREATE FUNCTION track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            INSERT INTO rate_history (cur, rate, ts, deleted) VALUES (OLD.cur, NULL, OLD.ts, true);
        ELSE
            INSERT INTO rate_history (cur, rate, ts, deleted) VALUES (NEW.cur, NEW.rate, NEW.ts, false);
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER track AFTER INSERT OR UPDATE OR DELETE ON rates
        FOR EACH ROW EXECUTE FUNCTION track();
    CREATE TABLE enriched (id bigint, cur int, ts timestamptz, rate int, rate_ts timestamptz);
    SELECT ptf.create_pipeline('enrich', $q$
        SELECT (probe).id, (probe).cur, (probe).ts, (build).rate, (build).ts
          FROM ptf.temporal_join(NULL::orders, NULL::rates, probe_time => 'ts', build_time => 'ts',
                                 probe_key => '{cur}', join_type => 'left',
                                 changes => true, uid => 'enrich')$q$, 'enriched');
});

is($node->safe_psql('postgres', q{
    SELECT count(*) FROM pg_class WHERE relname LIKE 'state\_%\_images'}),
    '2', 'each window uid keeps its rows by primary key in a table of its own');

my $batch = 0;

sub write_batch
{
    $batch++;
    for my $t (1 .. 4)
    {
        $node->safe_psql('postgres', qq{
            INSERT INTO clicks (user_id, ts, v)
            SELECT (hashint4(g * $batch + $t) & 2147483647) % 40,
                   timestamp '2024-01-01' + ($batch * 600 + (hashint4(g * 7 + $batch * $t) & 2147483647) % 300) * interval '1 second',
                   g % 97
              FROM generate_series(1, 200) g;
            UPDATE clicks SET v = v + 1000 WHERE id % 13 = $t AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';
            UPDATE clicks SET user_id = user_id + 1 WHERE id % 29 = $t AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';
            UPDATE clicks SET id = id + 100000000 WHERE id % 31 = $t AND id < 100000000
                AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';
            DELETE FROM clicks WHERE id % 17 = $t AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';

            INSERT INTO rates SELECT g, $batch * 100 + $t, tick()
              FROM generate_series($batch * 3 + $t, $batch * 3 + $t + 2) g
                ON CONFLICT (cur) DO UPDATE SET rate = EXCLUDED.rate, ts = EXCLUDED.ts;
            INSERT INTO orders (cur, amount, ts)
            SELECT (hashint4(g * $batch * $t) & 2147483647) % 40, g, tick()
              FROM generate_series(1, 120) g;
            UPDATE rates SET rate = rate + 1, ts = tick() WHERE cur % 5 = $t;
            UPDATE rates SET ts = tick() WHERE cur % 7 = $t;
            DELETE FROM rates WHERE cur % 7 = $t;
            UPDATE orders SET amount = amount + 1 WHERE id % 97 = $t;
        });
    }
}

# The windows a uid's watermark closed, by GROUP BY over the clicks.
my $closed = q{(SELECT watermark::timestamp FROM ptf.state WHERE uid = '%s')};
my %expected = (
    minutes => sprintf(q{
        SELECT user_id, date_bin('1 minute', ts, '2024-01-01') AS ws,
               date_bin('1 minute', ts, '2024-01-01') + interval '1 minute' AS we, count(*), sum(v)
          FROM clicks GROUP BY 1, 2
        HAVING date_bin('1 minute', ts, '2024-01-01') + interval '1 minute' <= %s}, sprintf($closed, 'minutes')),
    sessions => sprintf(q{
        WITH marked AS (
            SELECT user_id, ts, v, CASE WHEN ts - lag(ts) OVER w <= interval '20 seconds' THEN 0 ELSE 1 END AS starts
              FROM clicks WINDOW w AS (PARTITION BY user_id ORDER BY ts, id)),
        numbered AS (SELECT user_id, ts, v, sum(starts) OVER (PARTITION BY user_id ORDER BY ts) AS s FROM marked)
        SELECT user_id, min(ts), max(ts) + interval '20 seconds', count(*), max(v)
          FROM numbered GROUP BY user_id, s
        HAVING max(ts) + interval '20 seconds' <= %s}, sprintf($closed, 'sessions')),
    # the orders the join watermark passed, each with the newest version or
    # deletion at or below its time (the later change of one time wins)
    enrich => q{
        WITH wm AS (SELECT least((SELECT max(ts) FROM orders), (SELECT max(ts) FROM rate_history)) AS wm)
        SELECT o.id, o.cur, o.ts, v.rate, CASE WHEN v.deleted THEN NULL ELSE v.ts END
          FROM orders o CROSS JOIN wm
          LEFT JOIN LATERAL (SELECT * FROM rate_history h WHERE h.cur = o.cur AND h.ts <= o.ts
                              ORDER BY h.ts DESC, h.seq DESC LIMIT 1) v ON true
         WHERE o.ts <= wm.wm});
my %sink = (minutes => 'per_minute', sessions => 'sessions', enrich => 'enriched');

# Every sink equals its one-shot answer: a doubled row never goes away, so
# waiting for equality cannot hide one.
sub check_all
{
    my ($label) = @_;
    for my $p (sort keys %expected)
    {
        my $q = "SELECT count(*) FROM ((($expected{$p}) EXCEPT ALL TABLE $sink{$p})
                                       UNION ALL (TABLE $sink{$p} EXCEPT ALL ($expected{$p}))) d";
        ok($node->poll_query_until('postgres', $q, '0'), "$label: $p equals its one-shot answer");
    }
    slots_not_ahead($node, $label);
}

write_batch();
write_batch();
check_all('steady');

survive_kills($node, \&write_batch, \&check_all);

cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM per_minute'), '>', 500,
    'many windows closed');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM sessions'), '>', 500,
    'many sessions closed');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM enriched WHERE rate IS NULL AND cur IN (SELECT cur FROM rate_history WHERE deleted)'),
    '>', 0, 'orders after a deletion are padded');
is($node->safe_psql('postgres', q{SELECT sum(rows_late) FROM ptf.state WHERE uid IN ('minutes', 'sessions')}),
    '0', 'no click was late');
# the kept rows are the table's rows (the key-changing updates moved theirs)
my $images = $node->safe_psql('postgres', q{SELECT state_table || '_images' FROM ptf.state WHERE uid = 'minutes'});
ok($node->poll_query_until('postgres', qq{
    SELECT count(*) FROM (((SELECT * FROM clicks) EXCEPT ALL
                           (SELECT (ptf.state_row(image, NULL::clicks)).* FROM $images))
                          UNION ALL
                          ((SELECT (ptf.state_row(image, NULL::clicks)).* FROM $images) EXCEPT ALL
                           (SELECT * FROM clicks))) d}, '0'),
    'the rows kept by primary key are the table\'s rows');

$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline(name) FROM ptf.pipeline_registry});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'state\_%' AND relkind = 'r'}),
    '0', 'dropping the pipelines dropped their state tables, kept rows too');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot is left behind');
$node->stop;
done_testing();
