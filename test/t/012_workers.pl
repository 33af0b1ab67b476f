# More than one pipeline worker per database, owners isolated: one owner's
# slow step does not hold up another owner's pipelines, an owner's
# pipelines all run on its worker, and they go on exactly once across a
# worker ended, a crash, and ptf.max_workers_per_database changed under
# them (pipelines moving between workers).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('workers', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 1s
ptf.pipeline_step_timeout = 60s
});

# alice's pipeline 'a' has a sink whose trigger holds its step while
# control.hold is set; bob's pipeline 'b' is quick.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE ROLE alice LOGIN;
    CREATE ROLE bob LOGIN;
    GRANT ptf_stream TO alice, bob;
    GRANT USAGE, CREATE ON SCHEMA public TO alice, bob;
    CREATE TABLE control (hold boolean);
    INSERT INTO control VALUES (false);
    GRANT SELECT ON control TO alice;
});
$node->safe_psql('postgres', q{
    CREATE TABLE a_src (id int PRIMARY KEY);
    CREATE TABLE a_sink (id int);
    CREATE TABLE a2_src (id int PRIMARY KEY);
    CREATE TABLE a2_sink (id int);
    CREATE FUNCTION held() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
    BEGIN
        WHILE (SELECT hold FROM control) LOOP
            PERFORM pg_sleep(0.05);
        END LOOP;
        RETURN NEW;
    END $$;
    CREATE TRIGGER held BEFORE INSERT ON a_sink FOR EACH ROW EXECUTE FUNCTION held();
    SELECT ptf.create_pipeline('a', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::a_src, partition_by => '{id}', changes => true, uid => 'a')$q$, 'a_sink');
}, extra_params => [ '-U', 'alice' ]);
$node->safe_psql('postgres', q{
    CREATE TABLE b_src (id int PRIMARY KEY);
    CREATE TABLE b_sink (id int);
    SELECT ptf.create_pipeline('b', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::b_src, partition_by => '{id}', changes => true, uid => 'b')$q$, 'b_sink');
}, extra_params => [ '-U', 'bob' ]);

# poll_query_until, but giving up after $seconds
sub within
{
    my ($seconds, $sql, $expected) = @_;
    my $until = time + $seconds;
    while (time < $until)
    {
        return 1 if $node->safe_psql('postgres', $sql) eq $expected;
        usleep(50_000);
    }
    return 0;
}

sub pid_of
{
    my ($name) = @_;
    return $node->safe_psql('postgres',
        "SELECT pid FROM ptf.pipeline_status WHERE name = '$name'");
}

# every sink holds its source's ids once
sub exactly_once
{
    my ($label) = @_;
    for my $p ('a', 'a2', 'b')
    {
        ok($node->poll_query_until('postgres', qq{
            SELECT (SELECT string_agg(id::text, ',' ORDER BY id) FROM ${p}_src)
                   IS NOT DISTINCT FROM (SELECT string_agg(id::text, ',' ORDER BY id) FROM ${p}_sink)}),
            "$label: $p has each of its source's rows once");
    }
    slots_not_ahead($node, $label);
}

my $next = 1;

sub write_all
{
    $node->safe_psql('postgres', qq{
        INSERT INTO a_src VALUES ($next);
        INSERT INTO a2_src SELECT $next WHERE EXISTS (SELECT FROM ptf.pipelines WHERE name = 'a2');
        INSERT INTO b_src VALUES ($next);
    });
    $next++;
}

write_all();
ok($node->poll_query_until('postgres', q{SELECT (SELECT count(*) FROM a_sink) + (SELECT count(*) FROM b_sink)}, '2'),
    'both pipelines run');
ok($node->poll_query_until('postgres', q{
    SELECT count(DISTINCT pid) = 2 AND count(pid) = 2 FROM ptf.pipeline_status}),
    'pipeline_status shows each owner\'s pipeline on a worker of its own');
my ($pid_a, $pid_b) = (pid_of('a'), pid_of('b'));
is($node->safe_psql('postgres', qq{
    SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker' AND pid IN ($pid_a, $pid_b)}),
    '2', 'both pids are pipeline workers');

# ---- one owner's slow step does not hold up another owner's pipeline
$node->safe_psql('postgres', qq{UPDATE control SET hold = true; INSERT INTO a_src VALUES ($next)});
$next++;
ok($node->poll_query_until('postgres', qq{SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $pid_a}),
    'alice\'s step is held');
$node->safe_psql('postgres', qq{INSERT INTO b_src VALUES ($next)});
$next++;
ok(within(10, q{SELECT count(*) FROM b_sink}, '2'),
    'bob\'s row gets through while alice\'s step is held');
is($node->safe_psql('postgres', qq{
    SELECT (SELECT count(*) FROM a_sink) || ' ' || wait_event FROM pg_stat_activity WHERE pid = $pid_a}),
    '1 PgSleep', 'and alice\'s step is still held');
ok($node->poll_query_until('postgres', q{
    SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM ptf.pipeline_status},
    'a:running,b:running'), 'neither is shown waiting: bob\'s worker is not in alice\'s step');
ok($node->poll_query_until('postgres', q{
    SELECT lag_seconds = 0 AND pending_bytes = 0 FROM ptf.pipeline_status WHERE name = 'b'}),
    'bob\'s pipeline is caught up');
$node->safe_psql('postgres', q{UPDATE control SET hold = false});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM a_sink}, '2'), 'let go, alice\'s step commits');

# ---- an owner's pipelines all run on its worker
$node->safe_psql('postgres', q{
    SELECT ptf.create_pipeline('a2', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::a2_src, partition_by => '{id}', changes => true, uid => 'a2')$q$, 'a2_sink');
}, extra_params => [ '-U', 'alice' ]);
write_all();
exactly_once('two pipelines of one owner');
is(pid_of('a2'), $pid_a, 'alice\'s second pipeline runs on her worker');
is(pid_of('b'), $pid_b, 'bob\'s stays on his');

# ---- alice's worker ended: the launcher starts it again, bob's goes on meanwhile
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid_a)");
$node->safe_psql('postgres', qq{INSERT INTO b_src VALUES ($next)});
ok(within(4, qq{SELECT count(*) FROM b_sink WHERE id = $next}, '1'),
    'bob\'s pipeline goes on while alice\'s worker is away');
$next++;
write_all();
exactly_once('alice\'s worker ended');
ok($node->poll_query_until('postgres', qq{
    SELECT count(DISTINCT pid) = 1 AND min(pid) NOT IN ($pid_a, $pid_b)
      FROM ptf.pipeline_status WHERE name IN ('a', 'a2')}),
    'alice\'s pipelines run on her new worker');
is(pid_of('b'), $pid_b, 'bob\'s worker was not touched');

# ---- a crash: every worker killed, the server restarts
kill_worker($node);
write_all();
exactly_once('workers killed');
ok($node->poll_query_until('postgres', q{
    SELECT count(DISTINCT pid) FILTER (WHERE name IN ('a', 'a2')) = 1
       AND count(DISTINCT pid) = 2 AND count(pid) = 3 FROM ptf.pipeline_status}),
    'after the crash, still a worker per owner');

# ---- pipelines move between workers, exactly once
$node->safe_psql('postgres', q{ALTER SYSTEM SET ptf.max_workers_per_database = 1});
$node->reload;
write_all();
ok($node->poll_query_until('postgres', q{
    SELECT count(DISTINCT pid) = 1 AND count(pid) = 3 FROM ptf.pipeline_status}),
    'with ptf.max_workers_per_database = 1, one worker runs them all');
ok($node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker'}, '1'),
    'and the other worker left');
write_all();
exactly_once('moved to one worker');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET ptf.max_workers_per_database});
$node->reload;
for my $i (1 .. 10)
{
    write_all();
    usleep(20_000);
}
ok($node->poll_query_until('postgres', q{
    SELECT count(DISTINCT pid) = 2 AND count(pid) = 3 FROM ptf.pipeline_status}),
    'back to a worker per owner');
exactly_once('spread again while rows came');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.pipeline_status WHERE failures > 0}), '0',
    'no step failed as pipelines moved');

# ---- no pipeline left: every worker leaves
$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline(name) FROM ptf.pipeline_registry});
ok($node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker'}, '0'),
    'the workers leave when the last pipeline is dropped');

$node->stop;
done_testing();
