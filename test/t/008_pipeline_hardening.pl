# Pipelines that misbehave do not harm the worker or other pipelines: the
# owner's session-level advisory locks end with each step, a step has a
# time limit, the status says when changes wait behind another pipeline's
# step, and pipelines of a restored or copied database are taken up.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('hardening', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 1s
});

# slow: its sink's trigger takes a session-level advisory lock, and holds
# its step while slow_control.hold is set.  quick: another pipeline of the
# same database.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE slow_src (id int PRIMARY KEY, v text);
    CREATE TABLE slow_sink (id int, v text);
    CREATE TABLE slow_control (hold boolean, unlock_all boolean);
    INSERT INTO slow_control VALUES (false, false);
    CREATE FUNCTION slow_trigger() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
    BEGIN
        PERFORM pg_advisory_lock(4242);
        IF (SELECT unlock_all FROM slow_control) THEN
            PERFORM pg_advisory_unlock_all();
        END IF;
        WHILE (SELECT hold FROM slow_control) LOOP
            PERFORM pg_sleep(0.02);
        END LOOP;
        RETURN NEW;
    END $$;
    CREATE TRIGGER slow BEFORE INSERT ON slow_sink FOR EACH ROW EXECUTE FUNCTION slow_trigger();
    CREATE TABLE quick_src (id int PRIMARY KEY, v text);
    CREATE TABLE quick_sink (id int, v text);
    SELECT ptf.create_pipeline('slow', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::slow_src, partition_by => '{id}', changes => true, uid => 'slow')$q$, 'slow_sink');
    SELECT ptf.create_pipeline('quick', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::quick_src, partition_by => '{id}', changes => true, uid => 'quick')$q$, 'quick_sink');
});
my $worker = worker_pid($node);

# ---- (a) session-level advisory locks the owner's code takes end with its step
$node->safe_psql('postgres', q{INSERT INTO slow_src VALUES (1, 'a')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM slow_sink}, '1'), 'the step ran');
is($node->safe_psql('postgres', q{SELECT pg_try_advisory_lock(4242)}), 't',
    'a session-level advisory lock taken in a step is not kept by the worker');
is($node->safe_psql('postgres', qq{
    SELECT count(*) FROM pg_locks WHERE pid = $worker AND locktype = 'advisory' AND objsubid <> 20564}),
    '0', 'the worker holds no advisory lock of the owner\'s');

# pg_advisory_unlock_all() in the owner's code does not take the worker's own lock
$node->safe_psql('postgres', q{UPDATE slow_control SET unlock_all = true});
$node->safe_psql('postgres', q{INSERT INTO slow_src VALUES (2, 'b')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM slow_sink}, '2'), 'the step ran');
is($node->safe_psql('postgres', qq{
    SELECT count(*) FROM pg_locks WHERE pid = $worker AND locktype = 'advisory' AND objsubid = 20564
       AND granted}),
    '1', 'the worker still holds its own lock, one worker per database');
$node->safe_psql('postgres', q{UPDATE slow_control SET unlock_all = false});

# ---- (c) changes waiting behind another pipeline's step are not shown as caught up
$node->safe_psql('postgres', q{INSERT INTO quick_src VALUES (1, 'q1')});
ok($node->poll_query_until('postgres', q{
    SELECT state = 'running' AND lag_seconds = 0 AND pending_bytes = 0
      FROM ptf.pipeline_status WHERE name = 'quick'}), 'quick is caught up');
$node->safe_psql('postgres', q{
    UPDATE slow_control SET hold = true;
    INSERT INTO slow_src VALUES (3, 'held');
});
ok($node->poll_query_until('postgres', qq{
    SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $worker}),
    'slow\'s step is held');
$node->safe_psql('postgres', q{INSERT INTO quick_src VALUES (2, 'q2')});
sleep(1);
is($node->safe_psql('postgres', q{
    SELECT state || ' ' || (pending_bytes > 0) || ' ' || (lag_seconds >= 1)
      FROM ptf.pipeline_status WHERE name = 'quick'}),
    'waiting true true', 'a pipeline behind another\'s step is waiting, with WAL pending and a lag');
is($node->safe_psql('postgres', q{SELECT state FROM ptf.pipeline_status WHERE name = 'slow'}),
    'running', 'the pipeline in its step is running');
$node->safe_psql('postgres', q{UPDATE slow_control SET hold = false});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM quick_sink}, '2'), 'released, quick catches up');
ok($node->poll_query_until('postgres', q{
    SELECT state = 'running' AND lag_seconds = 0 AND pending_bytes = 0
      FROM ptf.pipeline_status WHERE name = 'quick'}), 'and is caught up again');

# ---- (b) a step over ptf.pipeline_step_timeout is cancelled, and retried
$node->safe_psql('postgres', q{
    ALTER SYSTEM SET ptf.pipeline_step_timeout = '500ms';
    SELECT pg_reload_conf();
    UPDATE slow_control SET hold = true;
    INSERT INTO slow_src VALUES (4, 'too slow');
});
ok($node->poll_query_until('postgres', q{
    SELECT state = 'failing' AND failures >= 2 AND last_error LIKE '%ptf.pipeline_step_timeout%'
      FROM ptf.pipeline_status WHERE name = 'slow'}), 'a step over the time limit fails, again and again');
is($node->safe_psql('postgres', q{SELECT count(*) FROM slow_sink WHERE id = 4}), '0',
    'a cancelled step wrote nothing');
$node->safe_psql('postgres', q{INSERT INTO quick_src VALUES (3, 'q3')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM quick_sink WHERE id = 3}, '1'),
    'the other pipeline goes on meanwhile');
$node->safe_psql('postgres', q{UPDATE slow_control SET hold = false});
ok($node->poll_query_until('postgres', q{
    SELECT state || failures FROM ptf.pipeline_status WHERE name = 'slow'}, 'running0'),
    'fast again, it runs');
is($node->safe_psql('postgres', q{
    SELECT string_agg(id::text, ',' ORDER BY id) = (SELECT string_agg(id::text, ',' ORDER BY id) FROM slow_src)
      FROM slow_sink}),
    't', 'exactly once');
is($node->safe_psql('postgres', q{SELECT pg_try_advisory_lock(4242)}), 't',
    'no lock of a cancelled step is kept');
slots_not_ahead($node, 'after timeouts');

# a step that catches the cancel and runs on ends with its worker, and
# the other pipelines go on
$node->safe_psql('postgres', q{
    CREATE TABLE stubborn_src (id int PRIMARY KEY);
    CREATE TABLE stubborn_sink (id int);
    CREATE TABLE stubborn_control (hold boolean);
    INSERT INTO stubborn_control VALUES (true);
    CREATE FUNCTION stubborn() RETURNS trigger LANGUAGE plpgsql SET search_path = public AS $$
    BEGIN
        LOOP
            BEGIN
                EXIT WHEN NOT (SELECT hold FROM stubborn_control);
                PERFORM pg_sleep(0.05);
            EXCEPTION WHEN query_canceled THEN
                NULL;
            END;
        END LOOP;
        RETURN NEW;
    END $$;
    CREATE TRIGGER stubborn BEFORE INSERT ON stubborn_sink FOR EACH ROW EXECUTE FUNCTION stubborn();
    SELECT ptf.create_pipeline('stubborn', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::stubborn_src, partition_by => '{id}', changes => true, uid => 'stubborn')$q$,
        'stubborn_sink');
    INSERT INTO stubborn_src VALUES (1);
});
ok($node->poll_query_until('postgres', q{
    SELECT last_error LIKE 'step ended with its worker%' FROM ptf.pipeline_status WHERE name = 'stubborn'}),
    'a step that catches the cancel and runs on ends with its worker');
$node->safe_psql('postgres', q{INSERT INTO quick_src VALUES (4, 'q4')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM quick_sink WHERE id = 4}, '1'),
    'the other pipelines go on');
$node->safe_psql('postgres', q{UPDATE stubborn_control SET hold = false});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM stubborn_sink}, '1'),
    'let go, it writes its row, once');
$node->safe_psql('postgres', q{
    ALTER SYSTEM RESET ptf.pipeline_step_timeout;
    SELECT pg_reload_conf();
});
$worker = worker_pid($node);

# ---- (d) pipelines of a restored database, or of one made from a template,
# run: their slot is the original database's, so each starts again on a slot
# of its own, brought in line with its tables (ptf.resync) -- keys the copy
# saw are not emitted again, new ones are.  A restore's pipelines come
# paused (a worker started by the registry's rows, loaded first, would run
# them before their uids' state and the tables' rows are there), until
# ptf.resume_pipeline
$node->safe_psql('postgres', q{CREATE DATABASE orig});
$node->safe_psql('orig', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE src (id int PRIMARY KEY);
    CREATE TABLE sink (id int);
    SELECT ptf.create_pipeline('copied', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::src, partition_by => '{id}', changes => true, uid => 'copied')$q$, 'sink');
    INSERT INTO src VALUES (1);
});
ok($node->poll_query_until('orig', q{SELECT count(*) FROM sink}, '1'), 'the original runs');

my $dump = $node->basedir . '/orig.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('orig'), '-f', $dump ], 'pg_dump');
# a row the copy's table has but its state never saw (after the dump's state)
$node->safe_psql('postgres', q{CREATE DATABASE restored});
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');
is($node->safe_psql('restored', q{SELECT paused FROM ptf.pipelines WHERE name = 'copied'}), 't',
    'a restored pipeline comes paused');
is($node->safe_psql('restored', q{SELECT count(*) FROM ptf.uid_registry WHERE uid = 'copied'}), '1',
    'its uid is the restored one');
$node->safe_psql('restored', q{INSERT INTO src VALUES (3)});
sleep 2;
is($node->safe_psql('restored', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sink}), '1',
    'paused, it reads nothing');
$node->safe_psql('restored', q{SELECT ptf.resume_pipeline('copied')});

# a copy: the original must have no connection, its worker included
$node->safe_psql('postgres', q{
    ALTER DATABASE orig ALLOW_CONNECTIONS false;
    SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'orig';
    CREATE DATABASE copy TEMPLATE orig;
    ALTER DATABASE orig ALLOW_CONNECTIONS true;
});

$node->safe_psql('copy', q{INSERT INTO src VALUES (3)});
for my $db ('restored', 'copy')
{
    ok($node->poll_query_until($db, q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sink}, '1,3'),
        "the pipeline of $db runs on a slot of its own: key 1 once, key 3 new");
    is($node->safe_psql($db, q{
        SELECT s.database = current_database() FROM ptf.state st JOIN pg_replication_slots s USING (slot_name)
         WHERE st.uid = 'copied'}), 't', "the uid of $db reads a slot of $db");
    $node->safe_psql($db, q{INSERT INTO src VALUES (4), (1) ON CONFLICT DO NOTHING});
    ok($node->poll_query_until($db, q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sink}, '1,3,4'),
        "the pipeline of $db goes on");
}

# the original's slot and pipeline are not touched
$node->safe_psql('orig', q{INSERT INTO src VALUES (2)});
ok($node->poll_query_until('orig', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sink}, '1,2'),
    'the original goes on');
for my $db ('restored', 'copy')
{
    is($node->safe_psql($db, q{SELECT ptf.drop_pipeline('copied')}), 't', "the pipeline of $db is dropped");
}
$node->safe_psql('orig', q{INSERT INTO src VALUES (5)});
ok($node->poll_query_until('orig', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM sink}, '1,2,5'),
    'the original goes on after the copies are dropped');

$node->stop;
done_testing();
