# Window pipelines run by the background worker: tumbling, hopping and
# session window aggregates and the TUMBLE table function over a table's
# changes, with updates and deletes taking rows back out of open windows.  Across killed workers and immediate stops at every point of a
# step, each sink holds exactly the windows the watermark closed, equal to
# GROUP BY over the same rows: nothing lost, nothing doubled.  A source that
# goes quiet has its last windows closed by the idle rule, without any new
# change to wake the pipeline.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('window_pipelines', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.pipeline_batch_size = 300
TimeZone = 'UTC'
});

# Batch b writes clicks with times in [b * 10 min, b * 10 min + 5 min), out
# of order; with a watermark delay of 5 minutes no click is ever late, and
# the batch's updates and deletes (of its own clicks) fall in open windows.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE clicks (id bigserial PRIMARY KEY, user_id int, ts timestamp, v int);
    ALTER TABLE clicks REPLICA IDENTITY FULL;
    -- the clicks as inserted: TUMBLE's rows (a TVF passes updates and deletes over)
    CREATE TABLE inserted (LIKE clicks);
    CREATE FUNCTION keep_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO inserted VALUES (NEW.*); RETURN NULL; END $$;
    CREATE TRIGGER keep_inserted AFTER INSERT ON clicks FOR EACH ROW EXECUTE FUNCTION keep_inserted();
    CREATE TABLE sessions (user_id int, window_start timestamp, window_end timestamp, n bigint);
    CREATE TABLE per_minute (user_id int, window_start timestamp, window_end timestamp, n bigint, total bigint);
    CREATE TABLE per_hop (user_id int, window_start timestamp, window_end timestamp, n bigint, biggest int);
    CREATE TABLE tumbled (id bigint, user_id int, ts timestamp, v int, window_start timestamptz,
                          window_end timestamptz);

    SELECT ptf.create_pipeline('minutes', $q$
        SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::per_minute, 'tumble', 'ts', '1 minute',
            partition_by => '{user_id}', aggregates => 'count(*) AS n, sum(v) AS total',
            watermark_delay => '5 minutes', changes => true, uid => 'minutes')$q$, 'per_minute');
    SELECT ptf.create_pipeline('hops', $q$
        SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::per_hop, 'hop', 'ts', '2 minutes', '30 seconds',
            partition_by => '{user_id}', aggregates => 'count(*) AS n, max(v) AS biggest',
            watermark_delay => '5 minutes', changes => true, uid => 'hops')$q$, 'per_hop');
    SELECT ptf.create_pipeline('sessions', $q$
        SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::sessions, 'session', 'ts', '20 seconds',
            partition_by => '{user_id}', aggregates => 'count(*) AS n',
            watermark_delay => '5 minutes', changes => true, uid => 'sessions')$q$, 'sessions');
    SELECT ptf.create_pipeline('tumbled', $q$
        SELECT (data).*, window_start, window_end FROM ptf.tumble(NULL::clicks, 'ts', '1 minute',
            changes => true, uid => 'tumbled')$q$, 'tumbled');
});

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
            -- changes of rows whose windows are still open (this batch's)
            UPDATE clicks SET v = v + 1000 WHERE id % 13 = $t AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';
            DELETE FROM clicks WHERE id % 17 = $t AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';
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
    hops => sprintf(q{
        SELECT user_id, w.ws, w.ws + interval '2 minutes', count(*), max(v)
          FROM clicks, LATERAL (SELECT date_bin('30 seconds', ts, '2024-01-01') - k * interval '30 seconds' AS ws
                                  FROM generate_series(0, 3) k) w
         GROUP BY 1, 2 HAVING w.ws + interval '2 minutes' <= %s}, sprintf($closed, 'hops')),
    # sessions: a click starts one unless the user's previous click is at most 20 s before
    # it (Flink merges windows that touch)
    sessions => sprintf(q{
        WITH marked AS (
            SELECT user_id, ts, CASE WHEN ts - lag(ts) OVER w <= interval '20 seconds' THEN 0 ELSE 1 END AS starts
              FROM clicks WINDOW w AS (PARTITION BY user_id ORDER BY ts, id)),
        numbered AS (SELECT user_id, ts, sum(starts) OVER (PARTITION BY user_id ORDER BY ts) AS s FROM marked)
        SELECT user_id, min(ts), max(ts) + interval '20 seconds', count(*)
          FROM numbered GROUP BY user_id, s
        HAVING max(ts) + interval '20 seconds' <= %s}, sprintf($closed, 'sessions')),
    tumbled => q{
        SELECT id, user_id, ts, v, date_bin('1 minute', ts, '2024-01-01')::timestamptz,
               (date_bin('1 minute', ts, '2024-01-01') + interval '1 minute')::timestamptz
          FROM inserted});
my %sink = (minutes => 'per_minute', hops => 'per_hop', sessions => 'sessions', tumbled => 'tumbled');

# Every sink equals its GROUP BY: a doubled row never goes away, so waiting
# for equality cannot hide one.
sub check_all
{
    my ($label) = @_;
    for my $p (sort keys %expected)
    {
        my $q = "SELECT count(*) FROM ((($expected{$p}) EXCEPT ALL TABLE $sink{$p})
                                       UNION ALL (TABLE $sink{$p} EXCEPT ALL ($expected{$p}))) d";
        ok($node->poll_query_until('postgres', $q, '0'), "$label: $p equals its GROUP BY");
    }
    slots_not_ahead($node, $label);
}

write_batch();
write_batch();
check_all('steady');

survive_kills($node, \&write_batch, \&check_all);

cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM per_minute'), '>', 500,
    'many windows closed');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM per_hop'), '>', 2000,
    'many hopping windows closed');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM sessions'), '>', 500,
    'many sessions closed');
cmp_ok($node->safe_psql('postgres', q{SELECT sum(rows_in) FROM ptf.state WHERE uid = 'minutes'}), '>',
    $node->safe_psql('postgres', 'SELECT count(*) FROM inserted'), 'updates and deletes were read');
is($node->safe_psql('postgres', q{SELECT sum(rows_late) FROM ptf.state}), '0', 'no click was late');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT user_id, window_start FROM per_minute GROUP BY 1, 2 HAVING count(*) > 1) d}),
    '0', 'no window was emitted twice');

# ---- the idle rule closes a quiet source's last windows, with no change to wake the pipeline
$node->safe_psql('postgres', q{
    CREATE TABLE readings (sensor int, ts timestamptz);
    ALTER TABLE readings REPLICA IDENTITY FULL;
    CREATE TABLE per_second (sensor int, window_end timestamptz, n bigint);
    SELECT ptf.create_pipeline('seconds', $q$
        SELECT * FROM ptf.window_aggregate(NULL::readings, NULL::per_second, 'tumble', 'ts', '1 second',
            partition_by => '{sensor}', aggregates => 'count(*) AS n', idle_timeout => '1 second',
            changes => true, uid => 'seconds')$q$, 'per_second');
    INSERT INTO readings SELECT g % 3, date_trunc('second', now()) + g * interval '10 ms'
      FROM generate_series(0, 99) g;
});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM per_second}, '3'),
    'a quiet source\'s last windows close');
is($node->safe_psql('postgres', q{SELECT sum(n) FROM per_second}), '100', 'with every reading in them');

# ---- only our window functions over a change stream may be pipelines
my ($ret, $out, $err) = $node->psql('postgres', q{
    SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::per_minute,
        'tumble', 'ts', '1 minute', uid => 'bad')$q$, 'per_minute')});
like($err, qr/changes => true/, 'a window pipeline must read changes');
$node->safe_psql('postgres', q{CREATE TABLE plain (user_id int, ts timestamp, v int)});
($ret, $out, $err) = $node->psql('postgres', q{
    SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.window_aggregate(NULL::plain, NULL::per_minute,
        'tumble', 'ts', '1 minute', partition_by => '{user_id}', aggregates => 'count(*) AS n, sum(v) AS total',
        changes => true, uid => 'bad')$q$, 'per_minute')});
like($err, qr/needs a primary key or REPLICA IDENTITY FULL/, 'nor over a table whose old rows the WAL lacks');

$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline(name) FROM ptf.pipeline_registry});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot is left behind');
$node->stop;
done_testing();
