# A change stream that starts with its table's rows (snapshot => true):
# written to while the first call starts, killed in the middle of the
# snapshot, the stream is the table's history from its snapshot on, every
# row and change exactly once, nothing doubled or lost at the boundary.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use Time::HiRes qw(usleep);

my $node = ptf_node('snapshot');

# src has rows before its stream starts; log gets the stream, in order
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE src (id int PRIMARY KEY, v int);
    ALTER TABLE src REPLICA IDENTITY FULL;
    INSERT INTO src SELECT g, 0 FROM generate_series(1, 400000) g;
    CREATE TABLE log (n bigserial, op text, id int, v int);
});
my $consume = q{
    INSERT INTO log (op, id, v)
    SELECT op, (data).id, (data).v FROM ptf.to_changelog(NULL::src, changes => true,
        uid => 'snap', snapshot => true)};

# ---- killed in the middle of its snapshot: the first call leaves nothing
my $victim = $node->background_psql('postgres');
my $pid = $victim->query_safe('SELECT pg_backend_pid()');
$victim->{stdin} .= "$consume;\n";
$victim->{run}->pump_nb;
ok($node->poll_query_until('postgres', qq{
    SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $pid AND query LIKE '%to_changelog%'}),
	'a first call reads its snapshot');
usleep(300_000);
kill 'KILL', $pid;
$victim->{run}->kill_kill;
$node->poll_query_until('postgres', 'SELECT 1', '1') or die 'server did not come back';
is($node->safe_psql('postgres', q{SELECT count(*) FROM log}), '0', 'the killed call wrote nothing');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.state WHERE uid = 'snap'}), '0',
	'and left no uid');

# ---- writers change the table while the stream starts and goes on
my $script = $node->basedir . '/writer.sql';
open(my $fh, '>', $script) or die;
print $fh q{
\set id random(1, 420000)
\set act random(1, 10)
BEGIN;
\if :act <= 5
UPDATE src SET v = v + 1 WHERE id = :id;
\elif :act <= 8
INSERT INTO src VALUES (:id, 1) ON CONFLICT (id) DO UPDATE SET v = src.v + 100;
\else
DELETE FROM src WHERE id = :id;
\endif
COMMIT;
};
close($fh);
my ($wout, $werr) = ('', '');
my $writers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-t', '3000', '-f', $script, $node->connstr('postgres') ],
	'>', \$wout, '2>', \$werr);
# the first call while they write, then more while they go on
my $calls = 0;
while ($writers->pumpable)
{
	$node->safe_psql('postgres', $consume);
	$calls++;
	$writers->pump_nb;
}
$writers->finish;
like($wout, qr/number of transactions actually processed: 6000/, 'writers ran');
$node->safe_psql('postgres', $consume) for 1 .. 3;
note "$calls calls while the writers ran";

# ---- the stream is the table's history: replayed in order it is the table, and
# each change follows from the row as the stream left it (nothing doubled or lost)
is($node->safe_psql('postgres', q{
    WITH last AS (SELECT DISTINCT ON (id) id, op, v FROM log ORDER BY id, n DESC)
    SELECT count(*) FROM last l FULL JOIN src s USING (id)
     WHERE (s.id IS NULL) <> (l.op IN ('DELETE', 'UPDATE_BEFORE'))
        OR (s.id IS NOT NULL AND s.v IS DISTINCT FROM l.v)}),
	'0', 'replaying the stream gives the table');
is($node->safe_psql('postgres', q{
    WITH steps AS (
        SELECT id, op, v, lag(op) OVER w AS prev_op, lag(v) OVER w AS prev_v
          FROM log WINDOW w AS (PARTITION BY id ORDER BY n))
    SELECT count(*) FROM steps
     WHERE CASE
           WHEN op = 'INSERT' THEN prev_op IS NOT NULL AND prev_op NOT IN ('DELETE')
           WHEN op IN ('UPDATE_BEFORE', 'DELETE') THEN prev_op IS NULL
                OR prev_op NOT IN ('INSERT', 'UPDATE_AFTER') OR prev_v IS DISTINCT FROM v
           WHEN op = 'UPDATE_AFTER' THEN prev_op IS DISTINCT FROM 'UPDATE_BEFORE'
           END}),
	'0', 'every change follows from the row before it: no row twice, none lost');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM log WHERE op = 'INSERT'}), '>=', 395000,
	'the snapshot gave the rows the table had');
is($node->safe_psql('postgres', q{SELECT stream_snapshot IS NULL FROM ptf.uid_registry WHERE uid = 'snap'}),
	't', 'the snapshot is forgotten once the stream passed it');

# ---- a later call with snapshot => true reads no snapshot again (a row
# that is there: the writers may have deleted any given id)
$node->safe_psql('postgres', q{UPDATE src SET v = -1 WHERE id = (SELECT min(id) FROM src)});
is($node->safe_psql('postgres', q{
    SELECT string_agg(op, ',') FROM ptf.to_changelog(NULL::src, changes => true, uid => 'snap',
        snapshot => true)}), 'UPDATE_BEFORE,UPDATE_AFTER', 'only the new change');

# ---- a pipeline whose stream starts with its table: making it reads nothing,
# its first step reads the snapshot, later steps the changes
$node->safe_psql('postgres', q{
    CREATE TABLE accounts (id int PRIMARY KEY, balance int);
    ALTER TABLE accounts REPLICA IDENTITY FULL;
    INSERT INTO accounts SELECT g, g FROM generate_series(1, 1000) g;
    CREATE TABLE mirror (id int PRIMARY KEY, balance int);
    SELECT ptf.create_pipeline('mirror', $q$
        SELECT op, ROW((data).id, (data).balance)::mirror FROM ptf.to_changelog(NULL::accounts,
            changes => true, uid => 'mirror', snapshot => true)$q$, 'mirror', 'changelog');
    UPDATE accounts SET balance = -balance WHERE id % 10 = 0;
    DELETE FROM accounts WHERE id % 7 = 0;
});
ok($node->poll_query_until('postgres', q{
    SELECT count(*) FROM ((TABLE accounts EXCEPT TABLE mirror) UNION ALL (TABLE mirror EXCEPT TABLE accounts)) d},
	'0'), 'a pipeline mirrors a table that had rows before it: snapshot, then changes');
$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('mirror')});

$node->safe_psql('postgres', q{SELECT ptf.drop_state('snap')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot left');
$node->stop;
done_testing();
