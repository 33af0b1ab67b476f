# REASSIGN OWNED hands a role's streams over, and they go on exactly once.
# Changes the stream had not read yet were made while the old owner had it
# (and could read the table); the new owner could not read it then.  They
# are read with the old owner's rights as of each change, the changes after
# the REASSIGN with the new owner's: a uid called by the new owner and a
# pipeline (paused across the hand-over, then across two of them in a
# row, and across a crash) deliver every change once, and never fail.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('reassign_owned', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
});

# ra owns the table, the sink, a uid and a pipeline; rb and rc have no
# right on any of them until they are handed over
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE ROLE ra LOGIN;
    CREATE ROLE rb LOGIN;
    CREATE ROLE rc LOGIN;
    GRANT ptf_stream TO ra;
    GRANT USAGE, CREATE ON SCHEMA public TO ra, rb, rc;
    SET ROLE ra;
    CREATE TABLE src (id int PRIMARY KEY, v text);
    CREATE TABLE sink (id int, v text);
    SELECT count(*) FROM ptf.to_changelog(NULL::src, changes => true, uid => 'cdc');
    SELECT ptf.create_pipeline('copy', $q$SELECT (data).* FROM ptf.to_changelog(NULL::src,
        changes => true, uid => 'copy')$q$, 'sink');
});

my $next = 0;

# n rows written by role
sub write_rows
{
    my ($role, $n) = @_;
    my $from = $next + 1;
    $next += $n;
    $node->safe_psql('postgres', qq{SET ROLE $role; INSERT INTO src
        SELECT g, 'row ' || g FROM generate_series($from, $next) g});
}

# the uid's changes, read by role: the ids, in order
sub read_uid
{
    my ($role) = @_;
    my ($ret, $out, $err) = $node->psql('postgres', qq{SET ROLE $role;
        SELECT string_agg((data).id::text, ',' ORDER BY lsn, (data).id)
          FROM ptf.to_changelog(NULL::src, changes => true, uid => 'cdc')});
    return $ret == 0 ? $out : "error: $err";
}

sub sink_is_table
{
    my ($label) = @_;
    ok($node->poll_query_until('postgres', q{
        SELECT count(*) FROM ((TABLE src EXCEPT ALL TABLE sink) UNION ALL
                              (TABLE sink EXCEPT ALL TABLE src)) d}, '0'),
        "$label: the sink holds every row once");
    is($node->safe_psql('postgres', q{SELECT state, failures FROM ptf.pipeline_status WHERE name = 'copy'}),
        "running|0", "$label: the pipeline never failed");
    slots_not_ahead($node, $label);
}

# ---- one hand-over, with changes unread by both streams
write_rows('ra', 5);
sink_is_table('before');
is(read_uid('ra'), '1,2,3,4,5', 'the old owner reads its uid');
$node->safe_psql('postgres', q{SELECT ptf.pause_pipeline('copy')});
write_rows('ra', 5);
$node->safe_psql('postgres', q{REASSIGN OWNED BY ra TO rb});
is($node->safe_psql('postgres', q{SELECT string_agg(uid || ':' || owner, ',' ORDER BY uid) FROM ptf.state}),
    'cdc:rb,copy:rb', 'the streams are the new owner\'s');
write_rows('rb', 5);
is(read_uid('rb'), '6,7,8,9,10,11,12,13,14,15',
    'the new owner reads the changes from before the hand-over and after, once');
write_rows('rb', 2);
is(read_uid('rb'), '16,17', 'and goes on');
is($node->safe_psql('postgres', q{SELECT handover_roles IS NULL FROM ptf.uid_registry WHERE uid = 'cdc'}),
    't', 'once past the hand-over, the old owner is forgotten');
$node->safe_psql('postgres', q{SELECT ptf.resume_pipeline('copy')});
sink_is_table('one hand-over');

# ---- two hand-overs before the pipeline reads, and a crash between
$node->safe_psql('postgres', q{SELECT ptf.pause_pipeline('copy')});
write_rows('rb', 5);
$node->safe_psql('postgres', q{REASSIGN OWNED BY rb TO rc});
write_rows('rc', 5);
$node->safe_psql('postgres', q{REASSIGN OWNED BY rc TO ra});
write_rows('ra', 5);
$node->stop('immediate');
$node->start;
$node->safe_psql('postgres', q{SELECT ptf.resume_pipeline('copy')});
sink_is_table('two hand-overs and a crash');
is(read_uid('ra'), join(',', 18 .. 32), 'the uid too, read by its owner of now');

# ---- a hand-over between a pipeline's steps, unpaused: whatever the race
for my $round (1 .. 3)
{
    my $to = $round % 2 ? 'rb' : 'ra';
    my $from = $round % 2 ? 'ra' : 'rb';
    write_rows($from, 20);
    $node->safe_psql('postgres', qq{REASSIGN OWNED BY $from TO $to});
    write_rows($to, 20);
}
sink_is_table('hand-overs under a running pipeline');

# ---- a REASSIGN right after a pipeline is made, its worker stepping: the
# REASSIGN waits for a step under way and later steps wait for it, so it
# neither deadlocks with a step (which held the sink and wanted the source
# the REASSIGN held) nor has one run as the role before (which had lost its
# rights on the schema: a failure, retried)
my ($reassign_errors, $failures, $delivered) = (0, 0, 0);
for my $round (1 .. 30)
{
    # one session, so that the REASSIGN follows the insert's wake-up at once
    my ($ret, $out, $err) = $node->psql('postgres', qq{
        CREATE ROLE rq$round;
        GRANT ptf_stream TO rq$round;
        CREATE SCHEMA sq$round AUTHORIZATION rq$round;
        SET ROLE rq$round;
        CREATE TABLE sq$round.t (id int PRIMARY KEY);
        CREATE TABLE sq$round.sink (id int);
        SELECT ptf.create_pipeline('q$round', \$q\$SELECT (data).* FROM ptf.to_changelog(
            NULL::sq$round.t, changes => true, uid => 'q$round')\$q\$, 'sq$round.sink');
        INSERT INTO sq$round.t VALUES ($round);
        RESET ROLE;
        REASSIGN OWNED BY rq$round TO rb;
    });
    if ($ret != 0)
    {
        diag("round $round: $err");
        $reassign_errors++;
        next;
    }
    $node->safe_psql('postgres', qq{SET ROLE rb; INSERT INTO sq$round.t VALUES ($round + 1000)});
    $delivered++ if $node->poll_query_until('postgres',
        qq{SELECT count(*) FROM sq$round.sink}, '2');
    $failures += $node->safe_psql('postgres',
        qq{SELECT failures FROM ptf.pipeline_status WHERE name = 'q$round'});
    $node->safe_psql('postgres', qq{SET ROLE rb; SELECT ptf.drop_pipeline('q$round');
        DROP SCHEMA sq$round CASCADE});
    $node->safe_psql('postgres', qq{DROP OWNED BY rq$round; DROP ROLE rq$round});
}
is($reassign_errors, 0, 'no REASSIGN right after a pipeline was made failed');
is($delivered, 30, 'each such pipeline delivered its rows from before and after it');
is($failures, 0, 'and none of their steps failed');

$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('copy'); SELECT ptf.drop_state('cdc')});
$node->stop;
done_testing();
