# Upgrading 1.0 to the current version as a server does it: 1.0's library and SQL make
# uid state, a watermark and a live pipeline; the server is stopped, the
# new library and scripts put in place and the server started: the old SQL
# objects are refused with a message saying what to do, the pipeline waits
# (failing, retried); ALTER EXTENSION ... UPDATE, and both go on exactly
# once from where 1.0 left them.
#
# The two versions are run from an installation of our own (a copy of the
# server's binaries, links to its libraries and share files), whose library
# and extension files the test switches: test/run builds 1.0's from its
# commit (test/releases) and says where (PTF_OLD_VERSION_DIR).
use strict;
use warnings;
use File::Basename;
use File::Copy;
use File::Path qw(make_path remove_tree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;

my $old = $ENV{PTF_OLD_VERSION_DIR};
plan skip_all => 'no 1.0 build (test/run makes one from its commit in test/releases)'
  unless defined $old && -f "$old/deduplicate_keep_first.so";

# ---- an installation of our own: bin copied (the server finds lib and share
# relative to its own binary), everything else linked
sub pg_config
{
	my ($what) = @_;
	my $v = `pg_config --$what`;
	chomp $v;
	return $v;
}
my ($bindir, $pkglibdir, $sharedir) = map { pg_config($_) } qw(bindir pkglibdir sharedir);
my $root = PostgreSQL::Test::Utils::tempdir('inst');
my ($ibin, $ilib, $ishare) = map { "$root$_" } ($bindir, $pkglibdir, $sharedir);
make_path($ibin, $ilib, "$ishare/extension");
for my $f (glob "$bindir/*")
{
	copy($f, "$ibin/" . basename($f)) or die "copy $f: $!";
	chmod 0755, "$ibin/" . basename($f);
}
for my $f (glob "$pkglibdir/*")
{
	next if basename($f) =~ /^deduplicate_keep_first/;
	symlink($f, "$ilib/" . basename($f)) or die "link $f: $!";
}
for my $f (glob "$sharedir/*")
{
	next if basename($f) eq 'extension';
	symlink($f, "$ishare/" . basename($f)) or die "link $f: $!";
}
for my $f (glob "$sharedir/extension/*")
{
	next if basename($f) =~ /^deduplicate_keep_first/;
	symlink($f, "$ishare/extension/" . basename($f)) or die "link $f: $!";
}

# put one version's library and extension files in place
sub use_version
{
	my (%files) = @_;
	unlink glob("$ilib/deduplicate_keep_first*"), glob("$ishare/extension/deduplicate_keep_first*");
	copy($files{library}, "$ilib/deduplicate_keep_first.so") or die "copy library: $!";
	copy($_, "$ishare/extension/" . basename($_)) or die "copy $_: $!" for @{ $files{extension} };
}
# the version this build's SQL objects are (the control file's default)
my ($new_version) = do
{
	open(my $fh, '<', "$sharedir/extension/deduplicate_keep_first.control") or die "control: $!";
	map { /^default_version\s*=\s*'([^']+)'/ ? ($1) : () } <$fh>;
};
die 'no default_version in the control file' unless defined $new_version;
(my $new_version_re = $new_version) =~ s/\./\\./g;

use_version(
	library => "$old/deduplicate_keep_first.so",
	extension => [ "$old/deduplicate_keep_first.control", "$old/deduplicate_keep_first--1.0.sql" ]);

my $node = ptf_node('upgrade', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 1s
jit = off
}, install_path => dirname($ibin));

# ---- under 1.0
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE events (id bigserial PRIMARY KEY, user_id int, v text, ts timestamptz);
    CREATE TABLE first_events (id bigint, user_id int, v text, ts timestamptz);
    CREATE TABLE earliest (id bigint, user_id int, v text, ts timestamptz);
    SELECT ptf.create_pipeline('firsts', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            changes => true, uid => 'firsts')$q$, 'first_events');
    SELECT ptf.set_watermark('events', 'ts', interval '1 minute');
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'deduplicate_keep_first'}),
	'1.0', '1.0 is installed');

my $batch = 0;
sub write_batch
{
	$batch++;
	$node->safe_psql('postgres', qq{
        INSERT INTO events (user_id, v, ts)
        SELECT (hashint4(g * $batch) & 2147483647) % 300, 'b$batch.' || g,
               timestamptz '2024-01-01' + ($batch * 1000 + g) * interval '1 second'
          FROM generate_series(1, 400) g});
}

# earliest row per user by event time, kept with a uid (1.0's state table keeps
# pending candidates as images of the events row type)
my $earliest = q{
    INSERT INTO earliest SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', on_time => 'ts', uid => 'earliest',
        query => $$SELECT * FROM events WHERE id > coalesce((SELECT max(id) FROM seen), 0) ORDER BY id$$)};
$node->safe_psql('postgres', q{CREATE TABLE seen (id bigint)});
sub consume_earliest
{
	$node->safe_psql('postgres', $earliest . ';'
		  . q{INSERT INTO seen SELECT max(id) FROM events});
}

my $firsts_ok = q{
    WITH f AS (SELECT DISTINCT ON (user_id) * FROM events ORDER BY user_id, id)
    SELECT count(*) FROM ((TABLE f EXCEPT ALL TABLE first_events)
                          UNION ALL (TABLE first_events EXCEPT ALL TABLE f)) d};

write_batch();
consume_earliest();
ok($node->poll_query_until('postgres', $firsts_ok, '0'), '1.0: the pipeline runs');
my $state_before = $node->safe_psql('postgres',
	q{SELECT keys || '/' || rows_in FROM ptf.state WHERE uid = 'earliest'});
like($state_before, qr{^\d+/400$}, "1.0: uid state kept ($state_before keys/rows)");

# ---- the new library and scripts, the server restarted, SQL still 1.0
$node->stop;
my @ext = glob("$sharedir/extension/deduplicate_keep_first*");
use_version(library => "$pkglibdir/deduplicate_keep_first.so", extension => \@ext);
$node->start;

write_batch();
my ($ret, $out, $err) = $node->psql('postgres', $earliest);
like($err, qr/is at version 1\.0, and its library needs version $new_version_re.*ALTER EXTENSION deduplicate_keep_first UPDATE/s,
	'the old SQL objects are refused, saying what to do');
ok($node->poll_query_until('postgres', qq{
    SELECT last_error LIKE '%needs version $new_version%' FROM ptf.pipeline_status WHERE name = 'firsts'}),
	'the pipeline waits, failing with the same message');
is($node->safe_psql('postgres', 'SELECT count(*) FROM first_events'),
	$node->safe_psql('postgres', q{SELECT count(DISTINCT user_id) FROM events WHERE id <= 400}),
	'and writes nothing meanwhile');

# ---- the update
$node->safe_psql('postgres', q{ALTER EXTENSION deduplicate_keep_first UPDATE});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'deduplicate_keep_first'}),
	$new_version, "updated to $new_version");
ok($node->poll_query_until('postgres', $firsts_ok, '0'),
	'the pipeline goes on: every user\'s first event once, those of both batches');
write_batch();
ok($node->poll_query_until('postgres', $firsts_ok, '0'), 'and on after the update');
is($node->safe_psql('postgres', q{SELECT state FROM ptf.pipeline_status WHERE name = 'firsts'}),
	'running', 'running again');

# the uid's 1.0 table is converted by its next call; its candidates survive
($ret, $out, $err) = $node->psql('postgres', $earliest);
like($err, qr/converted/, 'the uid\'s 1.0 state table is converted, with a notice');
$node->safe_psql('postgres', q{INSERT INTO seen SELECT max(id) FROM events});
$node->safe_psql('postgres', q{
    INSERT INTO earliest SELECT * FROM ptf.deduplicate_keep_first(NULL::events,
        partition_by => '{user_id}', on_time => 'ts', uid => 'earliest',
        query => $$VALUES (0::bigint, -1, 'end', timestamptz '2030-01-01')$$)});
# every user's earliest event, emitted once: what the watermark passed, in
# three calls across the two versions
is($node->safe_psql('postgres', q{
    WITH e AS (SELECT DISTINCT ON (user_id) * FROM events ORDER BY user_id, ts, id)
    SELECT count(*) FROM ((TABLE e EXCEPT ALL SELECT * FROM earliest WHERE user_id >= 0)
                          UNION ALL (SELECT * FROM earliest WHERE user_id >= 0 EXCEPT ALL TABLE e)) d}),
	'0', 'the uid goes on exactly once: each user\'s earliest event, once');
is($node->safe_psql('postgres', q{SELECT relid::regclass || ' ' || on_time || ' ' || delay FROM ptf.watermarks}),
	'events ts 00:01:00', 'the watermark declaration is kept');

$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('firsts'); SELECT ptf.drop_state('earliest')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'nothing left behind');
$node->stop;
done_testing();
