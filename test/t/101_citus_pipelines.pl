# Distributed pipelines on a local Citus cluster (a coordinator, two workers):
# keep-first, to_changelog, a window aggregate and temporal joins (a reference
# table and a co-located table as build side) made with ptf.create_pipeline on the
# coordinator, one per shard group on its node; rows written through the
# coordinator and straight into shards; every sink compared with the one-shot
# answer over the whole table; status, pause, resume, drop (nothing left on any
# node); and every refusal with its SQLSTATE.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfCitusCluster;

my $skip = PtfCitusCluster::skip_reason();
plan skip_all => "distributed tests skipped: $skip" if $skip;

my $c = PtfCitusCluster->new('pipes');
my $coord = $c->coord;

# the SQLSTATE and message of a failing statement
sub error_of
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err =~ /ERROR:\s+([0-9A-Z]{5}):\s+(.*)/ ? "$1 $2" : "no error: $err";
}

$coord->safe_psql('postgres', q{
    CREATE TABLE events (id bigint, user_id int, v text, PRIMARY KEY (user_id, id));
    SELECT create_distributed_table('events', 'user_id', shard_count => 4);
    CREATE TABLE first_events (id bigint, user_id int, v text);
    SELECT create_distributed_table('first_events', 'user_id', colocate_with => 'events');

    CREATE TABLE accounts (id int PRIMARY KEY, balance int);
    ALTER TABLE accounts REPLICA IDENTITY FULL;
    SELECT create_distributed_table('accounts', 'id', shard_count => 4, colocate_with => 'none');
    CREATE TABLE history (op text, id int, balance int, lsn pg_lsn);
    SELECT create_distributed_table('history', 'id', colocate_with => 'accounts');

    CREATE TABLE clicks (user_id int, ts timestamptz, amount int);
    ALTER TABLE clicks REPLICA IDENTITY FULL;
    SELECT create_distributed_table('clicks', 'user_id', colocate_with => 'events');
    CREATE TABLE minute_sums (window_start timestamptz, window_end timestamptz, user_id int,
                              total bigint, n bigint);
    SELECT create_distributed_table('minute_sums', 'user_id', colocate_with => 'events');

    CREATE TABLE rates (cur text PRIMARY KEY, ts timestamptz, rate numeric);
    ALTER TABLE rates REPLICA IDENTITY FULL;
    SELECT create_reference_table('rates');
    CREATE TABLE orders (order_id int, user_id int, cur text, ts timestamptz, amount numeric);
    SELECT create_distributed_table('orders', 'user_id', colocate_with => 'events');
    CREATE TABLE priced (order_id int, user_id int, amount numeric, rate numeric);
    SELECT create_distributed_table('priced', 'user_id', colocate_with => 'events');

    CREATE TABLE limits (user_id int, ts timestamptz, max_amount numeric, PRIMARY KEY (user_id));
    ALTER TABLE limits REPLICA IDENTITY FULL;
    SELECT create_distributed_table('limits', 'user_id', colocate_with => 'events');
    CREATE TABLE checked (order_id int, user_id int, amount numeric, max_amount numeric);
    SELECT create_distributed_table('checked', 'user_id', colocate_with => 'events');
});

# ---- refusals, each with its SQLSTATE, the distribution column named
my %refused = (
    'keys without the distribution column' => [ q{
        SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
            partition_by => '{v}', changes => true, uid => 'bad')$q$, 'first_events')},
        qr/^0A000 the keys of a distributed pipeline must contain the distribution column "user_id"/ ],
    'no keys at all' => [ q{
        SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
            changes => true, uid => 'bad')$q$, 'first_events')},
        qr/^0A000 .*distribution column "user_id"/ ],
    'window keys without the distribution column' => [ q{
        SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::minute_sums,
            'tumble', 'ts', '1 minute', aggregates => 'sum(amount) AS total, count(*) AS n',
            changes => true, uid => 'bad')$q$, 'minute_sums')},
        qr/^0A000 .*distribution column "user_id"/ ],
    'a sink that is a local table' => [ q{
        CREATE TABLE local_sink (id bigint, user_id int, v text);
        SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
            partition_by => '{user_id}', changes => true, uid => 'bad')$q$, 'local_sink')},
        qr/^0A000 the sink public.local_sink of a distributed pipeline must be distributed and co-located with its source public.events/ ],
    'a sink not co-located' => [ q{
        CREATE TABLE other_sink (id bigint, user_id int, v text);
        SELECT create_distributed_table('other_sink', 'user_id', shard_count => 3, colocate_with => 'none');
        SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
            partition_by => '{user_id}', changes => true, uid => 'bad')$q$, 'other_sink')},
        qr/^0A000 the sink public.other_sink .*co-located/ ],
    'a reference table as source' => [ q{
        CREATE TABLE ref_sink (cur text, ts timestamptz, rate numeric);
        SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::rates,
            partition_by => '{cur}', changes => true, uid => 'bad')$q$, 'ref_sink')},
        qr/^0A000 public.rates is a reference table/ ],
    'a local build side' => [ q{
        CREATE TABLE local_rates (cur text PRIMARY KEY, ts timestamptz, rate numeric);
        SELECT ptf.create_pipeline('bad', $q$SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).rate
            FROM ptf.temporal_join(NULL::orders, NULL::local_rates, probe_time => 'ts', build_time => 'ts',
            probe_key => '{cur}', changes => true, uid => 'bad')$q$, 'priced')},
        qr/^0A000 the build side public.local_rates of a distributed temporal join is a local table/ ],
    'a build side not co-located' => [ q{
        SELECT ptf.create_pipeline('bad', $q$SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).balance
            FROM ptf.temporal_join(NULL::orders, NULL::accounts, probe_time => 'ts', build_time => 'balance',
            probe_key => '{user_id}', build_key => '{id}', changes => true, uid => 'bad')$q$, 'priced')},
        qr/^0A000 the build side public.accounts of a distributed temporal join is not co-located/ ],
    'join keys not pairing the distribution columns' => [ q{
        SELECT ptf.create_pipeline('bad', $q$SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).max_amount
            FROM ptf.temporal_join(NULL::orders, NULL::limits, probe_time => 'ts', build_time => 'ts',
            probe_key => '{order_id}', build_key => '{user_id}', changes => true, uid => 'bad')$q$, 'checked')},
        qr/^0A000 the equi-keys of a distributed temporal join must pair the distribution columns "user_id"/ ],
    'changes => true over a distributed table outside a pipeline' => [ q{
        SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            changes => true, uid => 'direct')},
        qr/^0A000 changes => true cannot read the changes of public.events, a Citus table, here/ ],
);
for my $what (sort keys %refused)
{
    my ($sql, $re) = @{ $refused{$what} };
    like(error_of($coord, "BEGIN; $sql; ROLLBACK;"), $re, "refused: $what");
}
like(error_of($c->worker(0), q{SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', changes => true, uid => 'direct')}),
    qr/^0A000 changes => true cannot read the changes of public.events/,
    'refused on a worker too: the shell table has no changes');
like(error_of($c->worker(0), q{SELECT ptf.create_pipeline('bad', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::events, partition_by => '{user_id}', changes => true, uid => 'bad')$q$, 'first_events')}),
    qr/^0A000 a pipeline over a distributed table is made on the Citus coordinator/,
    'refused on a worker: made on the coordinator');
ok($c->nothing_left, 'refusals leave nothing on any node');

# ---- the pipelines
$coord->safe_psql('postgres', q{
    SELECT ptf.create_pipeline('firsts', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', changes => true, uid => 'firsts')$q$, 'first_events');
    SELECT ptf.create_pipeline('history', $q$SELECT op, (data).id, (data).balance, lsn
        FROM ptf.to_changelog(NULL::accounts, changes => true, uid => 'history')$q$, 'history');
    SELECT ptf.create_pipeline('sums', $q$SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::minute_sums,
        'tumble', 'ts', '1 minute', partition_by => '{user_id}',
        aggregates => 'sum(amount) AS total, count(*) AS n', changes => true, uid => 'sums')$q$, 'minute_sums');
    SELECT ptf.create_pipeline('priced', $q$SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).rate
        FROM ptf.temporal_join(NULL::orders, NULL::rates, probe_time => 'ts', build_time => 'ts',
        probe_key => '{cur}', changes => true, uid => 'priced')$q$, 'priced');
    SELECT ptf.create_pipeline('checked', $q$SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).max_amount
        FROM ptf.temporal_join(NULL::orders, NULL::limits, probe_time => 'ts', build_time => 'ts',
        probe_key => '{user_id}', changes => true, uid => 'checked')$q$, 'checked');
});
is($coord->safe_psql('postgres', q{
    SELECT string_agg(pipeline || ':' || shards, ',' ORDER BY pipeline) FROM ptf.distributed_pipeline_status}),
    'checked:4,firsts:4,history:4,priced:4,sums:4', 'one shard pipeline per shard group');
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM ptf.pipelines') } $c->nodes),
    '0,10,10', 'on the workers, as ordinary pipelines of theirs');

# keys of each shard group, to write straight into shards and to close windows
my %shard_of_key = map { split /\|/ } split /\n/, $coord->safe_psql('postgres',
    q{SELECT k, get_shard_id_for_distribution_column('events', k) FROM generate_series(1, 400) k});
my %key_of_shard;
$key_of_shard{ $shard_of_key{$_} } //= $_ for sort { $a <=> $b } keys %shard_of_key;

my $id = 0;
my $minute = 0;
sub write_batch
{
    my ($n) = @_;
    my $sql = '';
    for my $t (1 .. 3)
    {
        my $from = $id + 1;
        $id += $n;
        $minute++;
        $sql .= qq{
            INSERT INTO events SELECT g, (g * 7919) % 300 + 1, 'v' || g FROM generate_series($from, $id) g;
            INSERT INTO accounts SELECT g % 97, sum(g) FROM generate_series($from, $id) g GROUP BY 1
                ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + excluded.balance;
            DELETE FROM accounts WHERE id % 13 = $t;
            INSERT INTO clicks SELECT (g * 31) % 50 + 1, '2024-01-01'::timestamptz + make_interval(mins => $minute, secs => g % 60), g % 9
              FROM generate_series($from, $id) g;
            INSERT INTO rates VALUES ('eur', '2024-01-01'::timestamptz + make_interval(mins => $minute), $minute),
                                     ('usd', '2024-01-01'::timestamptz + make_interval(mins => $minute), 100 + $minute)
                ON CONFLICT (cur) DO UPDATE SET ts = excluded.ts, rate = excluded.rate;
            INSERT INTO limits SELECT u, '2024-01-01'::timestamptz + make_interval(mins => $minute), u * 10 + $minute
              FROM generate_series(1, 40) u
                ON CONFLICT (user_id) DO UPDATE SET ts = excluded.ts, max_amount = excluded.max_amount;
            INSERT INTO orders SELECT g, (g * 13) % 40 + 1, CASE WHEN g % 2 = 0 THEN 'eur' ELSE 'usd' END,
                '2024-01-01'::timestamptz + make_interval(mins => $minute, secs => 30), g
              FROM generate_series($from, $id) g;
        };
    }
    $coord->safe_psql('postgres', $sql);
}

# straight into the shards, on the workers (rows of each shard's own keys)
sub write_into_shards
{
    for my $node ($c->workers)
    {
        my $shards = $node->safe_psql('postgres', q{
            SET citus.override_table_visibility = off;
            SELECT string_agg(relname, ' ') FROM pg_class WHERE relname ~ '^events_[0-9]+$'});
        for my $shard (split / /, $shards)
        {
            my ($sid) = $shard =~ /_(\d+)$/;
            my @keys = grep { $shard_of_key{$_} == $sid } (301 .. 400);
            my $values = join(', ', map { $id++; "($id, $_, 'direct')" } @keys[ 0 .. 4 ]);
            $node->safe_psql('postgres', "INSERT INTO $shard VALUES $values");
        }
    }
}

# every shard's watermark past the windows and orders written so far: a row
# of each shard group at the start of the next minute (the next batch comes
# after it); windows and orders before it have fired
my $close;
sub close_time
{
    $minute++;
    $close = "'2024-01-01'::timestamptz + make_interval(mins => $minute)";
    my $sql = '';
    for my $k (values %key_of_shard)
    {
        $sql .= qq{
            INSERT INTO clicks VALUES ($k, $close, 0);
            INSERT INTO orders VALUES (-$k, $k, 'eur', $close, 0);
            INSERT INTO limits VALUES ($k, $close, 0)
                ON CONFLICT (user_id) DO UPDATE SET ts = excluded.ts, max_amount = excluded.max_amount;};
    }
    $sql .= qq{INSERT INTO rates VALUES ('eur', $close, 0), ('usd', $close, 0)
                ON CONFLICT (cur) DO UPDATE SET ts = excluded.ts, rate = excluded.rate;};
    $coord->safe_psql('postgres', $sql);
}

# each sink against the one-shot answer over the whole table (on the
# coordinator, which reads every shard)
my %expected = (
    firsts => q{
        WITH firsts AS (SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
                          query => 'SELECT * FROM events ORDER BY id'))
        SELECT count(*) FROM ((TABLE firsts EXCEPT ALL TABLE first_events)
                              UNION ALL (TABLE first_events EXCEPT ALL TABLE firsts)) d},
    history => q{
        WITH last AS (SELECT DISTINCT ON (id) id, op, balance FROM history ORDER BY id, lsn DESC, op),
             net AS (SELECT id, balance FROM last WHERE op <> 'DELETE')
        SELECT count(*) FROM ((TABLE net EXCEPT ALL TABLE accounts)
                              UNION ALL (TABLE accounts EXCEPT ALL TABLE net)) d},
    sums => q{
        WITH once AS (SELECT * FROM ptf.window_aggregate(NULL::clicks, NULL::minute_sums, 'tumble', 'ts',
                          '1 minute', partition_by => '{user_id}', aggregates => 'sum(amount) AS total, count(*) AS n')
                       WHERE window_end <= CLOSE)
        SELECT count(*) FROM ((TABLE once EXCEPT ALL TABLE minute_sums)
                              UNION ALL (TABLE minute_sums EXCEPT ALL TABLE once)) d},
);

# the temporal joins' one-shot answers: over each version as it was written
# (rates and limits are updated in place, so the versions are kept aside, as
# history tables, which a bounded temporal join reads a version per row)
$coord->safe_psql('postgres', q{
    CREATE TABLE rate_versions (cur text, ts timestamptz, rate numeric);
    SELECT create_reference_table('rate_versions');
    CREATE TABLE limit_versions (user_id int, ts timestamptz, max_amount numeric);
    SELECT create_distributed_table('limit_versions', 'user_id', colocate_with => 'events');
});
$expected{priced} = q{
    WITH once AS (SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).rate
                    FROM ptf.temporal_join(NULL::orders, NULL::rate_versions, probe_time => 'ts', build_time => 'ts',
                         probe_key => '{cur}',
                         probe_query => $p$SELECT * FROM orders WHERE order_id > 0 AND ts < CLOSE$p$))
    SELECT count(*) FROM ((TABLE once EXCEPT ALL SELECT * FROM priced WHERE order_id > 0)
                          UNION ALL (SELECT * FROM priced WHERE order_id > 0 EXCEPT ALL TABLE once)) d};
$expected{checked} = q{
    WITH once AS (SELECT (probe).order_id, (probe).user_id, (probe).amount, (build).max_amount
                    FROM ptf.temporal_join(NULL::orders, NULL::limit_versions, probe_time => 'ts', build_time => 'ts',
                         probe_key => '{user_id}',
                         probe_query => $p$SELECT * FROM orders WHERE order_id > 0 AND ts < CLOSE$p$))
    SELECT count(*) FROM ((TABLE once EXCEPT ALL SELECT * FROM checked WHERE order_id > 0)
                          UNION ALL (SELECT * FROM checked WHERE order_id > 0 EXCEPT ALL TABLE once)) d};
sub keep_versions
{
    $coord->safe_psql('postgres', qq{
        TRUNCATE rate_versions, limit_versions;
        INSERT INTO rate_versions SELECT cur, '2024-01-01'::timestamptz + make_interval(mins => m),
               m + CASE cur WHEN 'usd' THEN 100 ELSE 0 END
          FROM (VALUES ('eur'), ('usd')) c(cur), generate_series(1, $minute) m;
        INSERT INTO limit_versions SELECT u, '2024-01-01'::timestamptz + make_interval(mins => m), u * 10 + m
          FROM generate_series(1, 40) u, generate_series(1, $minute) m;
        -- (versions at the close minutes are never an order's latest: no order is then)
    });
}

sub check_all
{
    my ($label) = @_;
    keep_versions();
    for my $p (sort keys %expected)
    {
        (my $sql = $expected{$p}) =~ s/CLOSE/$close/g;
        my $ok = $c->wait_for(sub { $coord->safe_psql('postgres', $sql) eq '0' }, "$p ($label)", 60);
        ok($ok, "$label: $p equals the one-shot answer over the whole table");
    }
}

write_batch(200);
write_into_shards();
close_time();
check_all('through the coordinator and straight into shards');

is($coord->safe_psql('postgres', q{SELECT count(*) FROM first_events WHERE v = 'direct'}),
    $coord->safe_psql('postgres', q{SELECT count(DISTINCT user_id) FROM events WHERE user_id > 300}),
    'rows written straight into shards reached the sink');
cmp_ok($coord->safe_psql('postgres', 'SELECT count(*) FROM minute_sums'), '>', 50, 'windows fired per shard');
cmp_ok($coord->safe_psql('postgres', 'SELECT count(*) FROM priced'), '>', 500, 'orders were priced');

# ---- status: one row per pipeline, one per shard group with its node
# (a group whose worker is stepping another group while WAL was written after
# its own last read shows 'waiting' for that moment: wait until none does)
my $shards_sql = q{
    SELECT string_agg(DISTINCT state, ',') || ' ' || count(*) || ' ' || count(DISTINCT port)
      FROM ptf.distributed_pipeline_shards};
ok($c->wait_for(sub { $coord->safe_psql('postgres', $shards_sql) eq 'running 20 2' },
        'every shard group running', 60),
    'status: every shard group running, on both workers');
is($coord->safe_psql('postgres', q{
    SELECT rows_in = (SELECT count(*) FROM events) FROM ptf.distributed_pipeline_status WHERE pipeline = 'firsts'}),
    't', 'status: rows summed over the shard groups');
is($coord->safe_psql('postgres', q{
    SELECT min_watermark FROM ptf.distributed_pipeline_status WHERE pipeline = 'sums'}),
    $coord->safe_psql('postgres', q{
    SELECT min(watermark) FROM ptf.distributed_pipeline_shards WHERE pipeline = 'sums'}),
    'status: the cluster-wide watermark is the smallest of the shards\'');

# ---- pause, resume
$coord->safe_psql('postgres', q{SELECT ptf.pause_pipeline('firsts')});
ok($c->wait_for(sub { $coord->safe_psql('postgres', q{
    SELECT state FROM ptf.distributed_pipeline_status WHERE pipeline = 'firsts'}) eq 'paused' }),
    'paused on every shard group');
my $before = $coord->safe_psql('postgres', 'SELECT count(*) FROM first_events');
write_batch(100);
sleep(1);
is($coord->safe_psql('postgres', 'SELECT count(*) FROM first_events'), $before,
    'a paused distributed pipeline writes nothing');
$coord->safe_psql('postgres', q{SELECT ptf.resume_pipeline('firsts')});
close_time();
check_all('resumed');

# ---- the same function, the same refusals of rights: another role sees nothing
$coord->safe_psql('postgres', 'CREATE ROLE bob LOGIN');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ptf.distributed_pipeline_shards',
    extra_params => [ '-U', 'bob' ]), '0', 'another role sees no shard group');
like(error_of($coord, q{SET ROLE bob; SELECT ptf.drop_pipeline('firsts')}),
    qr/^42501 must be owner of pipeline "firsts"/, 'nor drops the pipeline');

# ---- DDL that would strand a distributed pipeline (it names its tables and owner by name)
like(error_of($coord, q{ALTER TABLE events RENAME TO events2}),
    qr/^0A000 cannot rename table events: distributed pipeline .*firsts.* reads or writes it by name/,
    'the source table is not renamed');
like(error_of($coord, q{ALTER TABLE first_events RENAME COLUMN v TO w}),
    qr/^0A000 cannot rename a column of table first_events: distributed pipeline firsts /,
    'nor a column of the sink');
like(error_of($coord, q{CREATE SCHEMA elsewhere; ALTER TABLE events SET SCHEMA elsewhere}),
    qr/^0A000 cannot move table events: /, 'nor is the source moved to another schema');
like(error_of($coord, q{ALTER SCHEMA public RENAME TO public2}),
    qr/^0A000 cannot rename schema public: /, 'nor its schema renamed');
like(error_of($coord, q{REASSIGN OWNED BY postgres TO bob}),
    qr/^0A000 cannot reassign what is owned by role postgres: it owns distributed pipeline /,
    'nor what its owner owns reassigned');
$coord->safe_psql('postgres', q{CREATE TABLE unrelated (a int); ALTER TABLE unrelated RENAME TO unrelated2; DROP TABLE unrelated2});
check_all('after the refused DDL');

# ---- drop: nothing left on any node
$coord->safe_psql('postgres', qq{SELECT ptf.drop_pipeline('$_')})
  for qw(firsts history sums priced checked);
ok($c->wait_for(sub { $c->nothing_left }), 'dropped: no slot, origin, pipeline or state left on any node');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ptf.distributed_pipeline_status'), '0',
    'and no distributed pipeline');

# a name used again starts afresh
$coord->safe_psql('postgres', q{
    TRUNCATE first_events;
    SELECT ptf.create_pipeline('firsts', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', changes => true, uid => 'firsts')$q$, 'first_events');
    INSERT INTO events SELECT g, 1000 + g, 'again' FROM generate_series(1000000, 1000009) g;
});
ok($c->wait_for(sub { $coord->safe_psql('postgres', 'SELECT count(*) FROM first_events') eq '10' }),
    'made again under the same name, it reads what is written after');

# a create_pipeline rolled back leaves nothing behind on the nodes
$coord->safe_psql('postgres', q{
    BEGIN;
    SELECT ptf.create_pipeline('gone', $q$SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', changes => true, uid => 'gone')$q$, 'first_events');
    ROLLBACK;
});
$coord->safe_psql('postgres', q{SELECT ptf.drop_pipeline('firsts')});
# (the nodes keep a rolled-back pipeline's stream until they see no pipeline of its name)
ok($c->wait_for(sub { $c->nothing_left }, 'nothing left', 30), 'a rolled-back create_pipeline leaves nothing on any node');

done_testing();
