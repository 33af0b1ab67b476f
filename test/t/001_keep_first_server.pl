# Keep-first against real servers: without preloading, durable state across
# crashes and restarts, and durable state through pg_dump / pg_restore.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;

# ---- the functions work from a plain CREATE EXTENSION, without preloading
# not ptf_node: this one is deliberately without shared_preload_libraries
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->append_conf('postgresql.conf', "output_plugin_libraries = 'deduplicate_keep_first'");
$plain->start;
$plain->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE t (k int, v text);
    INSERT INTO t VALUES (1, 'a'), (1, 'b'), (2, 'c');
});
is($plain->safe_psql('postgres',
        q{SELECT string_agg(v, ',' ORDER BY k) FROM ptf.deduplicate_keep_first(NULL::t, partition_by => '{k}')}),
    'a,c', 'keep-first works without shared_preload_libraries');
is($plain->safe_psql('postgres',
        q{SELECT string_agg(v, ',' ORDER BY k) FROM ptf.deduplicate_keep_first(NULL::t, partition_by => '{k}', uid => 'u')}),
    'a,c', 'durable state works without shared_preload_libraries');
my ($ret, $out, $err) = $plain->psql('postgres', q{
    SELECT ptf.create_pipeline('p', $$SELECT * FROM ptf.deduplicate_keep_first(NULL::t,
        changes => true, uid => 'p')$$, 't')});
like($err, qr/pipelines need deduplicate_keep_first in shared_preload_libraries/,
    'pipelines say what they need without preloading');
$plain->stop;

# ---- durable state is what was committed, across an immediate stop
my $node = ptf_node('main');
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE events (batch int, k int, v text);
    INSERT INTO events SELECT b, (i * 7) % 50, b || ':' || i
      FROM generate_series(1, 4) b, generate_series(1, 100) i;
});

sub step
{
    my ($batch) = @_;
    return $node->safe_psql('postgres', qq{
        SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{k}',
            uid => 'crash', query => 'SELECT * FROM events WHERE batch = $batch ORDER BY v')});
}

is(step(1), '50', 'first batch emits every key');

# a call in flight when the server stops immediately leaves no trace
my $bg = $node->background_psql('postgres');
$bg->query_safe(q{BEGIN});
$bg->query_safe(q{CREATE TABLE ptf_probe AS SELECT 1});
$bg->query_safe(q{
    SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{k}',
        uid => 'crash-new', query => 'SELECT * FROM events')});
$node->stop('immediate');
$bg->{run}->kill_kill;
$node->start;

is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.state WHERE uid = 'crash-new'}),
    '0', 'an uncommitted first call leaves no uid behind');
is($node->safe_psql('postgres', q{SELECT keys || '/' || rows_in FROM ptf.state WHERE uid = 'crash'}),
    '50/100', 'committed state survives the crash');
is(step(2), '0', 'after the crash, known keys stay known');

# a backend killed mid-call: crash restart, committed state intact
$node->safe_psql('postgres', q{INSERT INTO events SELECT 5, 1000 + i, 'new' FROM generate_series(1, 10) i});
my $victim = $node->background_psql('postgres');
my $pid = $victim->query_safe('SELECT pg_backend_pid()');
$victim->query_safe(q{BEGIN});
$victim->query_safe(q{
    SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{k}',
        uid => 'crash', query => 'SELECT * FROM events WHERE batch = 5')});
kill 'KILL', $pid;
$victim->{run}->kill_kill;
$node->poll_query_until('postgres', 'SELECT 1', '1') or die 'server did not come back';
is($node->safe_psql('postgres', q{SELECT keys FROM ptf.state WHERE uid = 'crash'}),
    '50', 'the killed call changed nothing');
is(step(5), '10', 'its keys are still new afterwards');

# a clean restart changes nothing either
$node->restart;
is(step(3), '0', 'state after a clean restart');

# ---- pg_dump keeps durable state: restore into a new database and continue
$node->safe_psql('postgres', q{
    CREATE TABLE watermarked (k int, ts timestamptz);
    SELECT ptf.set_watermark('watermarked', 'ts', interval '5 minutes');
    SELECT * FROM ptf.deduplicate_keep_first(NULL::watermarked, partition_by => '{k}',
        on_time => 'ts', uid => 'pending',
        query => $$VALUES (1, timestamptz '2024-01-01 10:00+00'), (2, timestamptz '2024-01-01 10:03+00')$$);
});
my $dump = $node->basedir . '/dump.sql';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-q', '-d', $node->connstr('restored'), '-f', $dump ],
    'restore');
is($node->safe_psql('restored', q{SELECT string_agg(uid || '=' || keys, ',' ORDER BY uid) FROM ptf.state}),
    'crash=60,pending=2', 'registry and state tables restored');
is($node->safe_psql('restored', q{SELECT count(*) FROM ptf.watermarks}), '1', 'watermark declaration restored');
is($node->safe_psql('restored', qq{
    SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{k}',
        uid => 'crash', query => 'SELECT * FROM events')}),
    '0', 'restored state continues: nothing new');
# the pending candidates came along: a later row moves the watermark past them
is($node->safe_psql('restored', q{
    SELECT string_agg(k::text, ',' ORDER BY k) FROM ptf.deduplicate_keep_first(NULL::watermarked,
        partition_by => '{k}', on_time => 'ts', uid => 'pending',
        query => $$VALUES (3, timestamptz '2024-01-01 10:09+00')$$)}),
    '1,2', 'restored pending candidates are emitted by the next watermark');

$node->stop;
done_testing();
