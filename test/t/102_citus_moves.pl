# Distributed pipelines through node failures and shard moves, on a local Citus
# cluster: the kill schedule of PtfPipelineTest on a worker's pipeline worker (and
# immediate restarts of the worker node) while the other node's groups go on; a
# move in each mode, citus_drain_node and citus_rebalance_start while a writer
# runs through the coordinator -- every change in the sinks exactly once; splits
# and moves of paused pipelines refused; a shard pipeline whose slot is gone (as
# on a promoted standby) stops with a clear error.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfCitusCluster;
use PtfPipelineTest;

my $skip = PtfCitusCluster::skip_reason();
plan skip_all => "distributed tests skipped: $skip" if $skip;

my $c = PtfCitusCluster->new('moves', conf => "ptf.pipeline_batch_size = 300\n");
my $coord = $c->coord;

sub error_of
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err =~ /ERROR:\s+([0-9A-Z]{5}):\s+(.*)/ ? "$1 $2" : "no error: $err";
}

# Three pipelines over one colocation group: keep-first, every change as a
# changelog row, and a temporal join whose build side is a reference table
# (written while groups move: its changes must cut alike on both nodes).
$coord->safe_psql('postgres', q{
    CREATE TABLE events (id bigint, user_id int, v text);
    SELECT create_distributed_table('events', 'user_id', shard_count => 4);
    CREATE TABLE first_events (id bigint, user_id int, v text);
    SELECT create_distributed_table('first_events', 'user_id', colocate_with => 'events');
    CREATE TABLE accounts (user_id int, id bigint, balance int, PRIMARY KEY (user_id, id));
    ALTER TABLE accounts REPLICA IDENTITY FULL;
    SELECT create_distributed_table('accounts', 'user_id', colocate_with => 'events');
    CREATE TABLE account_log (op text, user_id int, id bigint, balance int);
    SELECT create_distributed_table('account_log', 'user_id', colocate_with => 'events');
    CREATE TABLE rates (cur text PRIMARY KEY, ts timestamptz, rate int);
    ALTER TABLE rates REPLICA IDENTITY FULL;
    SELECT create_reference_table('rates');
    CREATE TABLE rate_versions (cur text, ts timestamptz, rate int);
    SELECT create_reference_table('rate_versions');
    CREATE TABLE orders (order_id bigint, user_id int, cur text, ts timestamptz);
    SELECT create_distributed_table('orders', 'user_id', colocate_with => 'events');
    CREATE TABLE priced (order_id bigint, user_id int, rate int);
    SELECT create_distributed_table('priced', 'user_id', colocate_with => 'events');
    INSERT INTO rates VALUES ('eur', '2024-01-01', 0), ('usd', '2024-01-01', 0);
    INSERT INTO rate_versions TABLE rates;

    SELECT ptf.create_pipeline('firsts', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', changes => true, uid => 'firsts')$q$, 'first_events');
    SELECT ptf.create_pipeline('log', $q$SELECT op, (data).user_id, (data).id, (data).balance
        FROM ptf.to_changelog(NULL::accounts, changes => true, uid => 'log')$q$, 'account_log');
    SELECT ptf.create_pipeline('priced', $q$SELECT (probe).order_id, (probe).user_id, (build).rate
        FROM ptf.temporal_join(NULL::orders, NULL::rates, probe_time => 'ts', build_time => 'ts',
        probe_key => '{cur}', changes => true, uid => 'priced')$q$, 'priced');
});

my %key_of_shard = map { reverse split /\|/ } split /\n/, $coord->safe_psql('postgres', q{
    SELECT min(k), get_shard_id_for_distribution_column('events', k) FROM generate_series(1, 400) k GROUP BY 2});

# A tick: a rate version, then events, orders and account changes after it;
# t counts seconds past 2024-01-01.  Each statement its own transaction, as a
# client writes.  $changes counts the account changes to_changelog must see.
my $id = 0;
my $t = 0;
my $changes = 0;
sub ticks_sql
{
    my ($n) = @_;
    my $sql = '';
    for (1 .. $n)
    {
        $t++;
        my $ts = "'2024-01-01'::timestamptz + make_interval(secs => $t)";
        $sql .= qq{
BEGIN;
UPDATE rates SET ts = $ts, rate = $t;
INSERT INTO rate_versions SELECT cur, $ts, $t FROM rates;
COMMIT;
};
        for my $k (1 .. 4)
        {
            $id++;
            my $u = ($id * 7919) % 300 + 1;
            $sql .= "INSERT INTO events VALUES ($id, $u, 'v$id');\n";
            $sql .= "INSERT INTO orders VALUES ($id, $u, '" . ($id % 2 ? 'eur' : 'usd') . "', $ts + interval '0.5 s');\n";
            $sql .= "INSERT INTO accounts VALUES ($u, $id, $t);\n";
            $changes++;
        }
        my $u = ($id * 7919) % 300 + 1;
        $sql .= "UPDATE accounts SET balance = balance + 1 WHERE user_id = $u AND id = $id;\n";
        $changes += 2;
        if ($t % 3 == 0)
        {
            my $d = $id - 1;
            my $du = ($d * 7919) % 300 + 1;
            $sql .= "DELETE FROM accounts WHERE user_id = $du AND id = $d;\n";
            $changes++;
        }
    }
    return $sql;
}

sub write_ticks
{
    my ($n) = @_;
    $coord->safe_psql('postgres', ticks_sql($n));
}

# a writer through the coordinator, in the background, while the test moves groups
sub start_writer
{
    my ($n) = @_;
    my ($out, $err) = ('', '');
    my $sql = ticks_sql($n);
    my $h = IPC::Run::start(
        [ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $coord->connstr('postgres'), '-f', '-' ],
        '<', \$sql, '>', \$out, '2>', \$err);
    return { h => $h, err => \$err };
}

sub finish_writer
{
    my ($w, $label) = @_;
    $w->{h}->finish;
    is(${ $w->{err} }, '', "$label: the writer's statements all succeeded");
}

# orders up to now fire: every shard's probe and the build side past them
sub close_time
{
    $t++;
    my $ts = "'2024-01-01'::timestamptz + make_interval(secs => $t)";
    my $sql = qq{BEGIN; UPDATE rates SET ts = $ts, rate = -1;
                 INSERT INTO rate_versions SELECT cur, $ts, -1 FROM rates; COMMIT;};
    $sql .= "INSERT INTO orders VALUES (-$t$_, $_, 'eur', $ts);\n" for values %key_of_shard;
    $coord->safe_psql('postgres', $sql);
    return $ts;
}

my %expected = (
    firsts => q{
        WITH firsts AS (SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
                          query => 'SELECT * FROM events ORDER BY id'))
        SELECT count(*) FROM ((TABLE firsts EXCEPT ALL TABLE first_events)
                              UNION ALL (TABLE first_events EXCEPT ALL TABLE firsts)) d},
    log => q{
        WITH net AS (SELECT user_id, id, balance FROM account_log WHERE op IN ('INSERT', 'UPDATE_AFTER')
                     EXCEPT ALL SELECT user_id, id, balance FROM account_log WHERE op IN ('DELETE', 'UPDATE_BEFORE'))
        SELECT count(*) + abs((SELECT count(*) FROM account_log) - CHANGES)
          FROM ((TABLE net EXCEPT ALL TABLE accounts) UNION ALL (TABLE accounts EXCEPT ALL TABLE net)) d},
    priced => q{
        WITH once AS (SELECT (probe).order_id, (probe).user_id, (build).rate
                        FROM ptf.temporal_join(NULL::orders, NULL::rate_versions, probe_time => 'ts',
                             build_time => 'ts', probe_key => '{cur}',
                             probe_query => $p$SELECT * FROM orders WHERE order_id > 0 AND ts < CLOSE$p$)),
             got AS (SELECT * FROM priced WHERE order_id > 0)
        SELECT count(*) FROM ((TABLE once EXCEPT ALL TABLE got) UNION ALL (TABLE got EXCEPT ALL TABLE once)) d});

sub check_all
{
    my ($label) = @_;
    my $close = close_time();
    for my $p (sort keys %expected)
    {
        (my $sql = $expected{$p}) =~ s/CLOSE/$close/g;
        $sql =~ s/CHANGES/$changes/g;
        ok($c->wait_for(sub { $coord->safe_psql('postgres', $sql) eq '0' }, "$p ($label)", 60),
            "$label: $p has every change exactly once");
    }
}

write_ticks(20);
check_all('steady');
ok($c->wait_for(sub { $coord->safe_psql('postgres',
        q{SELECT string_agg(DISTINCT state, ',') FROM ptf.distributed_pipeline_shards}) eq 'running' }),
    'all shard groups running');

# ---- the kill schedule on worker 1's pipeline worker, immediate restarts of
# worker 1; worker 2's groups do not wait for it
my $w1 = $c->worker(0);
my $w2 = $c->worker(1);
stop_at_fault($w1, 'before_commit', sub { write_ticks(5) });
my $w2_user = $coord->safe_psql('postgres', qq{
    SELECT k FROM generate_series(100000, 100400) k
     WHERE get_shard_id_for_distribution_column('events', k) IN (} . join(',', grep { $c->shard_node($_)->port == $w2->port } keys %key_of_shard) . q{)
     LIMIT 1});
$coord->safe_psql('postgres', "INSERT INTO events VALUES (999999, $w2_user, 'while w1 is held')");
ok($c->wait_for(sub { $coord->safe_psql('postgres',
        "SELECT count(*) FROM first_events WHERE id = 999999") eq '1' }, 'w2', 30),
    "while worker 1's step is held, worker 2's groups go on");
kill_worker($w1);
$w1->reload;
check_all('worker 1 killed inside a step, before commit');
survive_kills($w1, sub { write_ticks(5) }, \&check_all);
slots_not_ahead($_, 'after the kills') for $c->workers;

# ---- moves, while a writer runs through the coordinator
my $shard = (sort keys %key_of_shard)[0];
sub move
{
	my ($mode, $to) = @_;
	$coord->safe_psql('postgres', "SELECT citus_move_shard_placement($shard, '127.0.0.1', "
		  . $c->shard_node($shard)->port . ", '127.0.0.1', " . $to->port . ", '$mode')");
}
for my $mode (qw(block_writes force_logical))
{
    my $to = $c->shard_node($shard)->port == $w1->port ? $w2 : $w1;
    my $w = start_writer(60);
    sleep(1);
    move($mode, $to);
    finish_writer($w, $mode);
    is($c->shard_node($shard)->port, $to->port, "$mode: the group moved");
    check_all("moved ($mode) while writing");
    is($coord->safe_psql('postgres', qq{
        SELECT string_agg(DISTINCT port::text, ',') FROM ptf.distributed_pipeline_shards WHERE shard = $shard}),
        $to->port, "$mode: its pipelines run on the new node");
}
is(join(',', map { $_->safe_psql('postgres', q{
    SELECT count(*) FROM ptf.citus_shard_pipelines WHERE status <> 'active'}) } $c->workers),
    '0,0', 'no shard pipeline is left waiting');
slots_not_ahead($_, 'after the moves') for $c->workers;

# ---- the rebalancer's ways: draining a node, then rebalancing in the background
my $w = start_writer(80);
$coord->safe_psql('postgres', "SELECT citus_drain_node('127.0.0.1', " . $w2->port . ", 'block_writes')");
finish_writer($w, 'drain');
is($coord->safe_psql('postgres', "SELECT count(*) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'events'::regclass AND nodeport = " . $w2->port),
    '0', 'citus_drain_node moved every group off worker 2');
check_all('drained while writing');

$coord->safe_psql('postgres', "SELECT citus_set_node_property('127.0.0.1', " . $w2->port . ", 'shouldhaveshards', true)");
$w = start_writer(80);
$coord->safe_psql('postgres', q{SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical')});
$coord->safe_psql('postgres', q{SELECT citus_rebalance_wait()});
finish_writer($w, 'rebalance');
is($coord->safe_psql('postgres', q{SELECT string_agg(state::text, ',') FROM pg_dist_background_job}),
    'finished', 'citus_rebalance_start finished');
cmp_ok($coord->safe_psql('postgres', "SELECT count(*) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'events'::regclass AND nodeport = " . $w2->port),
    '>', 0, 'and moved groups back to worker 2');
check_all('rebalanced while writing');
ok($c->wait_for(sub { !grep { $_ ne '0' } $c->sql_all(q{
        SELECT count(*) FROM ptf.citus_shard_pipelines c JOIN pg_dist_placement p ON p.shardid = c.shard
         WHERE p.groupid <> (SELECT groupid FROM pg_dist_local_group)}) }),
    'every node runs only the groups it holds');
is(join(',', $c->sql_all(q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%'})),
    '0,6,6', 'one slot per shard group and pipeline, nothing left behind by the moves');

# ---- a second pipeline over the same source, made while a move of one of its groups is
# under way: create_pipeline waits for the move and starts that group where it went (it
# started it on the node the group left, where it dropped itself: the group's rows were
# lost); the next move carries both (their handed-over state tables were named alike:
# every move of the group failed)
{
    $coord->safe_psql('postgres', q{
        CREATE TABLE first_events2 (LIKE first_events);
        SELECT create_distributed_table('first_events2', 'user_id', colocate_with => 'events');
    });
    my $from = $c->shard_node($shard);
    my $to = $from->port == $w1->port ? $w2 : $w1;
    my $sql = "BEGIN; SELECT citus_move_shard_placement($shard, '127.0.0.1', " . $from->port
      . ", '127.0.0.1', " . $to->port . ", 'block_writes'); SELECT pg_sleep(3); COMMIT;\n";
    my ($out, $err) = ('', '');
    # (the statement as an argument: IPC::Run feeds stdin only when pumped)
    my $h = IPC::Run::start(
        [ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $coord->connstr('postgres'), '-c', $sql ],
        '>', \$out, '2>', \$err);
    ok($c->wait_for(sub { $coord->safe_psql('postgres', q{
            SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(3)%' AND wait_event = 'PgSleep'}) eq '1' },
        'the move to hold on'), 'a move holds its group');
    $coord->safe_psql('postgres', q{
        SELECT ptf.create_pipeline('firsts2', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
            partition_by => '{user_id}', changes => true, uid => 'firsts2')$q$, 'first_events2')});
    $h->finish;
    is($err, '', 'the move committed');
    is($c->shard_node($shard)->port, $to->port, 'the group moved');
    is($coord->safe_psql('postgres', qq{
        SELECT string_agg(DISTINCT port::text, ',') FROM ptf.distributed_pipeline_shards
         WHERE pipeline = 'firsts2' AND shard = $shard}),
        $to->port, 'create_pipeline waited for the move: the group\'s pipeline runs where it went');
    $coord->safe_psql('postgres', q{INSERT INTO events SELECT 2000000 + k, 500000 + k, 'x' FROM generate_series(1, 40) k});
    ok($c->wait_for(sub { $coord->safe_psql('postgres', q{
            SELECT count(DISTINCT user_id) FROM first_events2 WHERE user_id > 500000}) eq '40' }, 'firsts2', 60),
        'every new key reached the second sink, the moved group\'s too');
    move('block_writes', $from);
    is($c->shard_node($shard)->port, $from->port, 'a move carries both pipelines over one source');
    $coord->safe_psql('postgres', q{INSERT INTO events SELECT 3000000 + k, 600000 + k, 'x' FROM generate_series(1, 40) k});
    ok($c->wait_for(sub { $coord->safe_psql('postgres', q{
            SELECT count(DISTINCT user_id) FROM first_events2 WHERE user_id > 600000}) eq '40' }, 'firsts2', 60),
        'and the second goes on after it');
    is($coord->safe_psql('postgres', q{
        SELECT count(*) FROM (SELECT user_id, count(*) FROM first_events2 GROUP BY 1 HAVING count(*) > 1) d}),
        '0', 'each key once');
    check_all('after moving two pipelines over one source');
}

# ---- other objects: renames and role drops of the cluster pass (the check, run on the
# workers inside Citus's own statements, failed every one of them); DROP EXTENSION is
# refused while distributed pipelines exist (a node failed its two-phase drop)
is($coord->psql('postgres', q{
    CREATE ROLE passer_by; DROP ROLE passer_by;
    CREATE TABLE unrelated (k int, a int);
    SELECT create_distributed_table('unrelated', 'k', colocate_with => 'none');
    ALTER TABLE unrelated RENAME COLUMN a TO b;
    ALTER TABLE unrelated RENAME TO unrelated2;
    SELECT alter_distributed_table('unrelated2', shard_count => 3);
    DROP TABLE unrelated2;}), 0, 'renames, role drops and redistributions of other objects pass on every node');
like(error_of($coord, q{DROP EXTENSION deduplicate_keep_first CASCADE}),
    qr/^2BP01 cannot drop extension deduplicate_keep_first while distributed pipelines exist: firsts, firsts2, log, priced/,
    'DROP EXTENSION is refused while distributed pipelines exist');
$coord->safe_psql('postgres', q{SELECT ptf.drop_pipeline('firsts2')});

# ---- refused
my $nodeid = $coord->safe_psql('postgres', 'SELECT nodeid FROM pg_dist_node WHERE nodeport = ' . $c->shard_node($shard)->port);
like(error_of($coord, "SELECT citus_split_shard_by_split_points($shard, ARRAY['-1500000000'], ARRAY[$nodeid, $nodeid], 'block_writes')"),
    qr/^0A000 cannot split a shard while pipeline "firsts" runs over it/, 'a split is refused');
like(error_of($coord, q{SELECT alter_distributed_table('events', shard_count => 8)}),
    qr/^0A000 cannot redistribute a table while pipeline "firsts" runs over it/, 'a redistribution is refused');
like(error_of($coord, q{SELECT undistribute_table('first_events')}),
    qr/^0A000 cannot redistribute a table while pipeline "firsts" runs over it/, 'so is undistributing a sink');
like(error_of($coord, q{SELECT isolate_tenant_to_new_shard('events', 7, shard_transfer_mode => 'block_writes')}),
    qr/^0A000 cannot split a shard while pipeline "firsts" runs over it/, 'and isolating a tenant');
{
    my $other = $c->shard_node($shard)->port == $w1->port ? $w2 : $w1;
    like(error_of($coord, "SELECT citus_copy_shard_placement($shard, '127.0.0.1', " . $c->shard_node($shard)->port
          . ", '127.0.0.1', " . $other->port . ", 'block_writes')"),
        qr/^0A000 cannot copy a shard placement while pipeline "firsts" runs over it/, 'and a second placement');
}
$coord->safe_psql('postgres', q{SELECT ptf.pause_pipeline('log')});
my $from = $c->shard_node($shard);
my $to = $from->port == $w1->port ? $w2 : $w1;
like(error_of($coord, "SELECT citus_move_shard_placement($shard, '127.0.0.1', " . $from->port
      . ", '127.0.0.1', " . $to->port . ", 'block_writes')"),
    qr/^55000 cannot move shard \d+ while pipeline "log" over it is paused/, 'a move of a paused pipeline\'s group is refused');
$coord->safe_psql('postgres', q{SELECT ptf.resume_pipeline('log')});
# a window aggregate over an upsert source (a key, REPLICA IDENTITY DEFAULT) keeps the last
# row of each key in a second table, which a move does not carry yet: refused
$coord->safe_psql('postgres', q{
    CREATE TABLE plays (user_id int, id bigint, ts timestamptz, PRIMARY KEY (user_id, id));
    SELECT create_distributed_table('plays', 'user_id', colocate_with => 'events');
    CREATE TABLE play_hours (user_id int, window_start timestamptz, window_end timestamptz, n bigint);
    SELECT create_distributed_table('play_hours', 'user_id', colocate_with => 'events');
    SELECT ptf.create_pipeline('upserts', $q$SELECT * FROM ptf.window_aggregate(NULL::plays, NULL::play_hours,
        'tumble', 'ts', '1 hour', partition_by => '{user_id}', aggregates => 'count(*) AS n',
        changes => true, uid => 'upserts')$q$, 'play_hours');
});
$coord->safe_psql('postgres', "INSERT INTO plays VALUES ($key_of_shard{$shard}, 1, '2024-01-01 10:00')");
ok($c->wait_for(sub { $from->safe_psql('postgres', q{
        SELECT count(*) FROM pg_class WHERE relname LIKE 'state\_%\_images'}) > 0 }),
    'the upsert pipeline keeps its rows by key');
like(error_of($coord, "SELECT citus_move_shard_placement($shard, '127.0.0.1', " . $from->port
      . ", '127.0.0.1', " . $to->port . ", 'block_writes')"),
    # (raised on the node: master_run_on_worker passes its message, not its SQLSTATE)
    qr/cannot move shard \d+ while pipeline "upserts" keeps the last row of each key of it/,
    'a move of a group whose pipeline keeps rows by key is refused');
$coord->safe_psql('postgres', q{SELECT ptf.drop_pipeline('upserts')});
check_all('after the refusals');

# ---- a shard pipeline whose slot is gone (a promoted standby has no logical slots)
my $node = $c->shard_node($shard);
$coord->safe_psql('postgres', q{SELECT ptf.pause_pipeline('firsts')});
ok($c->wait_for(sub { $node->safe_psql('postgres', qq{
        SELECT state FROM ptf.pipeline_status WHERE name = 'firsts/$shard'}) eq 'paused' }), 'paused');
$node->safe_psql('postgres', qq{
    SELECT pg_drop_replication_slot(slot_name) FROM ptf.state WHERE uid = 'firsts/$shard'});
$coord->safe_psql('postgres', q{SELECT ptf.resume_pipeline('firsts')});
write_ticks(2);
ok($c->wait_for(sub { $coord->safe_psql('postgres', qq{
        SELECT state = 'failing' AND last_error LIKE 'the replication slot of shard group $shard of distributed pipeline "firsts" is gone from this node'
          FROM ptf.distributed_pipeline_shards WHERE pipeline = 'firsts' AND shard = $shard}) eq 't' }),
    'a shard pipeline without its slot stops, saying why');

$coord->safe_psql('postgres', qq{SELECT ptf.drop_pipeline('$_')}) for qw(firsts log priced);
ok($c->wait_for(sub { $c->nothing_left }), 'dropped: nothing left on any node');

done_testing();
