# Pipeline workers woken at commit: with a nap of a minute between looks
# (ptf.pipeline_idle_time = 60s), a change committed to a pipeline's source
# -- by INSERT, COPY, a trigger, a chained pipeline, an asynchronous
# commit -- reaches the sink within seconds, because its commit wakes the
# worker; writes to other tables, and writes rolled back, do not wake it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use Time::HiRes qw(time usleep);

my $node = ptf_node('wakeup');

$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE events (id bigserial PRIMARY KEY, user_id int, v text);
    CREATE TABLE first_events (id bigint, user_id int, v text);
    CREATE TABLE firsts_again (id bigint, user_id int, v text);
    CREATE TABLE other (id int, v text);
    CREATE TABLE feeder (user_id int, v text);
    CREATE FUNCTION feed() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
    BEGIN
        INSERT INTO events (user_id, v) VALUES (NEW.user_id, NEW.v);
        RETURN NULL;
    END $$;
    CREATE TRIGGER feed AFTER INSERT ON feeder FOR EACH ROW EXECUTE FUNCTION feed();
    SELECT ptf.create_pipeline('firsts', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            changes => true, uid => 'firsts')$q$, 'first_events');
    -- chained: reads what the first one writes
    SELECT ptf.create_pipeline('again', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::first_events, partition_by => '{user_id}',
            changes => true, uid => 'again')$q$, 'firsts_again');
});
$node->safe_psql('postgres', q{INSERT INTO events (user_id, v) VALUES (0, 'first')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM firsts_again}, '1'),
    'the pipelines run');

# From now on the worker naps a minute: only a wake-up gets a row through in time.
$node->safe_psql('postgres', q{ALTER SYSTEM SET ptf.pipeline_idle_time = '60s'});
$node->reload;

# The sink query's answer reaches $want within $limit seconds; the time it took.
sub arrives_within
{
    my ($sql, $want, $limit) = @_;
    my $start = time;
    while (time - $start < $limit)
    {
        return time - $start if $node->safe_psql('postgres', $sql) eq $want;
        usleep(20_000);
    }
    return undef;
}

# The worker stepped last then (it steps only when it looked, woken or not).
sub last_steps
{
    return $node->safe_psql('postgres',
        q{SELECT string_agg(name || ' ' || last_step_at, ', ' ORDER BY name) FROM ptf.pipeline_status});
}

# Let a wake-up of the reload pass, and the worker nap.
sleep(2);

my $user = 100;
for my $how (
    [ 'an INSERT', sub { $node->safe_psql('postgres', "INSERT INTO events (user_id, v) VALUES ($_[0], 'insert')") } ],
    [ 'a COPY', sub {
        $node->safe_psql('postgres',
            "COPY events (user_id, v) FROM PROGRAM 'echo $_[0],copied' WITH (FORMAT csv)") } ],
    [ 'a trigger of another table', sub {
        $node->safe_psql('postgres', "INSERT INTO feeder VALUES ($_[0], 'fed')") } ],
    [ 'a subtransaction', sub {
        $node->safe_psql('postgres', qq{
            BEGIN; INSERT INTO other VALUES (1, 'x');
            SAVEPOINT s; INSERT INTO events (user_id, v) VALUES ($_[0], 'saved'); RELEASE s;
            COMMIT;}) } ],
    [ 'an asynchronous commit', sub {
        $node->safe_psql('postgres', qq{
            SET synchronous_commit = off; INSERT INTO events (user_id, v) VALUES ($_[0], 'async')}) } ])
{
    my ($label, $write) = @$how;
    $user++;
    usleep(300_000);    # idle again after the last one
    $write->($user);
    my $took = arrives_within("SELECT count(*) FROM firsts_again WHERE user_id = $user", '1', 10);
    ok(defined $took, "after $label, the row is through two chained pipelines within 10 s, not 60 s");
    diag(sprintf('%s: %.0f ms', $label, 1000 * $took)) if defined $took;
}

# Writes elsewhere, and writes to the source that roll back, do not wake it.
usleep(500_000);
my $before = last_steps();
$node->safe_psql('postgres', q{INSERT INTO other SELECT g, 'other' FROM generate_series(1, 100) g});
$node->safe_psql('postgres', q{
    BEGIN; INSERT INTO other VALUES (2, 'y');
    SAVEPOINT s; INSERT INTO events (user_id, v) VALUES (999, 'rolled back'); ROLLBACK TO s;
    COMMIT;});
$node->psql('postgres', q{BEGIN; INSERT INTO events (user_id, v) VALUES (999, 'aborted'); ROLLBACK;});
sleep(2);
is(last_steps(), $before, 'a write to another table, or one rolled back, does not wake the worker');

# ... and the next write to the source is read with them, exactly once.
$node->safe_psql('postgres', q{INSERT INTO events (user_id, v) VALUES (200, 'after others')});
ok(defined arrives_within(q{SELECT count(*) FROM firsts_again WHERE user_id = 200}, '1', 10),
    'the next write to the source wakes it');
is($node->safe_psql('postgres', q{
    WITH firsts AS (SELECT DISTINCT ON (user_id) id, user_id, v FROM events ORDER BY user_id, id)
    SELECT count(*) FROM ((TABLE firsts EXCEPT ALL TABLE first_events)
                          UNION ALL (TABLE first_events EXCEPT ALL TABLE firsts)
                          UNION ALL (TABLE first_events EXCEPT ALL TABLE firsts_again)
                          UNION ALL (TABLE firsts_again EXCEPT ALL TABLE first_events)) d}),
    '0', 'the sinks are the one-shot answer');

# Without the wake-up the worker waits out its nap: the test above tests it.
$node->safe_psql('postgres', q{ALTER SYSTEM SET ptf.pipeline_wake_at_commit = off});
$node->reload;
sleep(2);
$node->safe_psql('postgres', q{INSERT INTO events (user_id, v) VALUES (300, 'not woken')});
ok(!defined arrives_within(q{SELECT count(*) FROM first_events WHERE user_id = 300}, '1', 3),
    'with ptf.pipeline_wake_at_commit off, a row waits for the nap');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET ptf.pipeline_wake_at_commit});
$node->reload;
ok(defined arrives_within(q{SELECT count(*) FROM firsts_again WHERE user_id = 300}, '1', 10),
    'on again (the reload wakes the worker), it is read');

# A worker that left (its pipelines dropped) is no longer woken, and one
# started again watches anew.
$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('again'); SELECT ptf.drop_pipeline('firsts')});
ok($node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker'}, '0'),
    'the worker leaves with its pipelines');
$node->safe_psql('postgres', q{INSERT INTO events (user_id, v) VALUES (400, 'nobody')});
$node->safe_psql('postgres', q{
    CREATE TABLE late_firsts (id bigint, user_id int, v text);
    SELECT ptf.create_pipeline('late', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            changes => true, uid => 'late')$q$, 'late_firsts');
});
sleep(2);
$node->safe_psql('postgres', q{INSERT INTO events (user_id, v) VALUES (500, 'new worker')});
ok(defined arrives_within(q{SELECT count(*) FROM late_firsts WHERE user_id = 500}, '1', 10),
    'a new worker is woken too');

$node->stop;
done_testing();
