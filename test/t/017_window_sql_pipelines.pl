# Pipelines of Flink's SQL as written (doc/design.md §8): a window TVF + GROUP BY over
# a change stream (tumble, hop with a WHERE and HAVING, cumulate), Window Top-N
# of a TVF's rows, window deduplication, and Top-N of a window aggregate's
# groups, each planned by the window rules and run by the background worker.
# Across killed workers and immediate stops at every point of a step, each
# sink holds exactly the windows its watermark closed, equal to the same SQL
# run once over the table (no stream, no uid): nothing lost, nothing doubled,
# each window once and whole although its rows came in many steps.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('window_sql_pipelines', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.pipeline_batch_size = 300
TimeZone = 'UTC'
});

# The queries, over a stream (%s: the TVF's stream arguments) or a table.
my %query = (
    sql_minutes => q{
        SELECT window_start, window_end, (data).user_id, count(*) AS n, sum((data).v) AS total
          FROM ptf.tumble(NULL::%s, 'ts', '1 minute'%s) GROUP BY 1, 2, 3},
    sql_hops => q{
        SELECT window_start, window_end, (data).user_id, count(*) AS n, max((data).v) AS biggest
          FROM ptf.hop(NULL::%s, 'ts', '30 seconds', '2 minutes'%s)
         WHERE (data).v < 90 GROUP BY 1, 2, 3 HAVING count(*) > 1},
    sql_cumulate => q{
        SELECT window_end, (data).user_id, count(*) AS n, count(DISTINCT (data).v) AS vs
          FROM ptf.cumulate(NULL::%s, 'ts', '1 minute', '3 minutes'%s) GROUP BY 1, 2},
    sql_top => q{
        SELECT (data).id, (data).user_id, (data).v, window_start, window_end, rownum FROM (
            SELECT data, window_start, window_end,
                   row_number() OVER (PARTITION BY window_start, window_end, (data).user_id
                                      ORDER BY (data).v DESC, (data).id) AS rownum
              FROM ptf.tumble(NULL::%s, 'ts', '2 minutes'%s)) t WHERE rownum <= 2},
    sql_first => q{
        SELECT (data).id, window_start, window_end FROM (
            SELECT data, window_start, window_end,
                   row_number() OVER (PARTITION BY window_start, window_end ORDER BY (data).ts, (data).id) AS rownum
              FROM ptf.hop(NULL::%s, 'ts', '1 minute', '2 minutes'%s)) t WHERE rownum = 1},
    sql_top_users => q{
        SELECT * FROM (
            SELECT window_start, window_end, (data).user_id, count(*) AS n,
                   row_number() OVER (PARTITION BY window_start, window_end ORDER BY count(*) DESC, (data).user_id) AS rownum
              FROM ptf.tumble(NULL::%s, 'ts', '1 minute'%s) GROUP BY 1, 2, 3) t WHERE rownum <= 3});
# Top-N ranks a TVF's rows, which are the stream's inserts (updates and deletes
# are passed over, as the TVF passes them over): its one-shot answer is over
# the rows as inserted.  The aggregates retract updated and deleted rows: over
# the table as it is.
my %source = (sql_minutes => 'clicks', sql_hops => 'clicks', sql_cumulate => 'clicks',
    sql_top => 'inserted', sql_first => 'inserted', sql_top_users => 'clicks');
my %sink_columns = (
    sql_minutes => 'window_start timestamptz, window_end timestamptz, user_id int, n bigint, total bigint',
    sql_hops => 'window_start timestamptz, window_end timestamptz, user_id int, n bigint, biggest int',
    sql_cumulate => 'window_end timestamptz, user_id int, n bigint, vs bigint',
    sql_top => 'id bigint, user_id int, v int, window_start timestamptz, window_end timestamptz, rownum bigint',
    sql_first => 'id bigint, window_start timestamptz, window_end timestamptz',
    sql_top_users => 'window_start timestamptz, window_end timestamptz, user_id int, n bigint, rownum bigint');

$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE clicks (id bigserial PRIMARY KEY, user_id int, ts timestamp, v int);
    ALTER TABLE clicks REPLICA IDENTITY FULL;
    CREATE TABLE inserted (LIKE clicks);
    CREATE FUNCTION keep_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO inserted VALUES (NEW.*); RETURN NULL; END $$;
    CREATE TRIGGER keep_inserted AFTER INSERT ON clicks FOR EACH ROW EXECUTE FUNCTION keep_inserted();
});
for my $p (sort keys %query)
{
    my $stream = sprintf(q{, watermark_delay => '5 minutes', changes => true, uid => '%s'}, $p);
    my $q = sprintf($query{$p}, 'clicks', $stream);
    $node->safe_psql('postgres', "CREATE TABLE $p ($sink_columns{$p})");
    $node->safe_psql('postgres', "SELECT ptf.create_pipeline('$p', \$q\$$q\$q\$, '$p')");
}
like($node->safe_psql('postgres', q{SELECT string_agg(name || ':' || function, ' ' ORDER BY name) FROM ptf.pipelines}),
    qr/^sql_cumulate:window_aggregate sql_first:window_top_n sql_hops:window_aggregate sql_minutes:window_aggregate sql_top:window_top_n sql_top_users:window_aggregate$/,
    'every shape is accepted as a pipeline');

# Batch b writes clicks with times in [b * 10 min, b * 10 min + 5 min), out of
# order: with a watermark delay of 5 minutes none is late, and the batch's
# updates and deletes (of its own clicks) fall in open windows.
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
            DELETE FROM clicks WHERE id % 17 = $t AND ts >= timestamp '2024-01-01' + $batch * interval '10 minutes';
        });
    }
}

# Every sink equals the same SQL run once over its table, for the windows the
# uid's watermark closed; a doubled row never goes away, so waiting for
# equality cannot hide one.
sub check_all
{
    my ($label) = @_;
    for my $p (sort keys %query)
    {
        my $once = sprintf($query{$p}, $source{$p}, '');
        my $q = "WITH once AS (SELECT * FROM ($once) o WHERE window_end <=
                     (SELECT watermark::timestamptz FROM ptf.state WHERE uid = '$p'))
                 SELECT count(*) FROM ((TABLE once EXCEPT ALL TABLE $p)
                                       UNION ALL (TABLE $p EXCEPT ALL TABLE once)) d";
        ok($node->poll_query_until('postgres', $q, '0'), "$label: $p equals the query run once");
    }
    slots_not_ahead($node, $label);
}

write_batch();
write_batch();
check_all('steady');

survive_kills($node, \&write_batch, \&check_all);

for my $p (sort keys %query)
{
    # one row per window for the window deduplication, dozens of windows
    cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM $p"), '>', $p eq 'sql_first' ? 40 : 100,
        "$p: many rows");
}
is($node->safe_psql('postgres', q{SELECT sum(rows_late) FROM ptf.state}), '0', 'no click was late');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (SELECT window_start, user_id FROM sql_minutes GROUP BY 1, 2 HAVING count(*) > 1) d}),
    '0', 'no window was emitted twice');
cmp_ok($node->safe_psql('postgres', q{SELECT rows_skipped FROM ptf.state WHERE uid = 'sql_top'}), '>', 0,
    'Top-N passed over updates and deletes');

# ---- what the rules do not plan is not a pipeline: it would group each step apart
my ($ret, $out, $err) = $node->psql('postgres', q{
    SELECT ptf.create_pipeline('bad', $q$SELECT window_start, lower((data).user_id::text), count(*)
        FROM ptf.tumble(NULL::clicks, 'ts', '1 minute', changes => true, uid => 'bad') GROUP BY 1, 2$q$,
        'sql_minutes')});
like($err, qr/(not|must be) planned as the window aggregate/, 'a grouping by an expression is refused');
($ret, $out, $err) = $node->psql('postgres', q{
    SELECT ptf.create_pipeline('bad', $q$SELECT data, row_number() OVER (PARTITION BY window_start, window_end)
        FROM ptf.tumble(NULL::clicks, 'ts', '1 minute', changes => true, uid => 'bad')$q$, 'sql_first')});
like($err, qr/filtered by the query around it|not planned|must be planned/, 'a ranking without its filter is refused');
($ret, $out, $err) = $node->psql('postgres', q{
    SELECT ptf.create_pipeline('bad', $q$SELECT window_start, count(*)
        FROM ptf.tumble(NULL::clicks, 'ts', '1 minute', changes => true, uid => 'bad') GROUP BY 1 LIMIT 3$q$,
        'sql_minutes')});
like($err, qr/no joins, grouping, ordering, limits/, 'a limit is refused');
# and the setting does not turn a pipeline's plan off
$node->safe_psql('postgres', q{ALTER SYSTEM SET ptf.plan_window_sql = off});
$node->reload;
write_batch();
check_all('ptf.plan_window_sql off');

$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline(name) FROM ptf.pipeline_registry});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot is left behind');
$node->stop;
done_testing();
