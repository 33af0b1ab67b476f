# Change streams against a real server: exactly once under concurrent
# writers, interrupted calls, an immediate stop and a killed backend; a uid
# copied by pg_dump; and the output plugin read live by pg_recvlogical.
use strict;
use warnings;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;

my $node = ptf_node('cs', q{
logical_decoding_work_mem = 64kB
max_connections = 40
});

# Two tables get the same writes: one logs whole old images (a retract
# stream, passed through), one only keys (an upsert stream, normalized from
# the images kept per key).  A trigger writes every row change to an audit
# table: the truth each stream must reproduce, each change exactly once.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE acct_full (id int PRIMARY KEY, v int, note text);
    ALTER TABLE acct_full REPLICA IDENTITY FULL;
    CREATE TABLE acct_key (id int PRIMARY KEY, v int, note text);
    CREATE TABLE audit (tbl text, op text, id int, v int, note text, xid xid8);
    CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            INSERT INTO audit VALUES (TG_TABLE_NAME,
                CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE_BEFORE' ELSE 'DELETE' END,
                OLD.id, OLD.v, OLD.note, pg_current_xact_id());
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO audit VALUES (TG_TABLE_NAME,
                CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE_AFTER' ELSE 'INSERT' END,
                NEW.id, NEW.v, NEW.note, pg_current_xact_id());
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON acct_full
        FOR EACH ROW EXECUTE FUNCTION audit();
    CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON acct_key
        FOR EACH ROW EXECUTE FUNCTION audit();
    CREATE TABLE out_full (n bigserial, op text, id int, v int, note text, lsn pg_lsn, xid xid8);
    CREATE TABLE out_key (n bigserial, op text, id int, v int, note text, lsn pg_lsn, xid xid8);
    CREATE TABLE out_first (id int, v int);
    SELECT count(*) FROM ptf.to_changelog(NULL::acct_full, changes => true, uid => 'full');
    SELECT count(*) FROM ptf.to_changelog(NULL::acct_key, changes => true, uid => 'key');
    SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::acct_key, partition_by => '{id}',
        changes => true, uid => 'first');
    -- a CDC pipeline: acct_full's changes as Debezium rows in a landing
    -- table, read back incrementally and applied to a mirror
    CREATE TABLE landing (op text, before jsonb, after jsonb);
    CREATE FUNCTION to_landing() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO landing VALUES (CASE TG_OP WHEN 'INSERT' THEN 'c' WHEN 'UPDATE' THEN 'u' ELSE 'd' END,
            CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
            CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
        RETURN NULL;
    END $$;
    CREATE TRIGGER to_landing AFTER INSERT OR UPDATE OR DELETE ON acct_full
        FOR EACH ROW EXECUTE FUNCTION to_landing();
    CREATE TABLE mirror (LIKE acct_full INCLUDING ALL);
});

# One consumer step: each stream's next batch written to its table in the
# call's own transaction, so output and state commit (or vanish) together.
my @consume = (
    q{INSERT INTO out_full (op, id, v, note, lsn, xid)
      SELECT op, (data).id, (data).v, (data).note, lsn, xid
        FROM ptf.to_changelog(NULL::acct_full, changes => true, uid => 'full')},
    q{INSERT INTO out_key (op, id, v, note, lsn, xid)
      SELECT op, (data).id, (data).v, (data).note, lsn, xid
        FROM ptf.to_changelog(NULL::acct_key, changes => true, uid => 'key')},
    q{INSERT INTO out_first SELECT id, v
        FROM ptf.deduplicate_keep_first(NULL::acct_key, partition_by => '{id}',
            changes => true, uid => 'first')},
    q{SELECT inserts + updates_after + deletes FROM ptf.apply_changelog('mirror', $q$
        SELECT kind, data FROM ptf.from_changelog(NULL::landing, NULL::mirror,
            before => 'before', after => 'after',
            op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
            changes => true, uid => 'mirror')$q$)});
$node->safe_psql('postgres', $consume[3]);    # the mirror's stream starts with the others

# writers: a fixed number of transactions (a stalled machine only makes them
# slower, never fewer): random upserts, updates of several rows, deletes; both tables in
# one transaction.  A long note gets TOASTed, and stays so while unchanged.
my $script = $node->basedir . '/writer.sql';
open(my $fh, '>', $script) or die;
print $fh q{
\set id random(1, 300)
\set act random(1, 20)
BEGIN;
\if :act <= 12
INSERT INTO acct_full VALUES (:id, 1, CASE WHEN :id % 10 = 0 THEN repeat(md5(:id::text), 200) END)
    ON CONFLICT (id) DO UPDATE SET v = acct_full.v + 1;
INSERT INTO acct_key VALUES (:id, 1, CASE WHEN :id % 10 = 0 THEN repeat(md5(:id::text), 200) END)
    ON CONFLICT (id) DO UPDATE SET v = acct_key.v + 1;
\elif :act <= 16
UPDATE acct_full SET v = v + 10 WHERE id BETWEEN :id AND :id + 5;
UPDATE acct_key SET v = v + 10 WHERE id BETWEEN :id AND :id + 5;
\elif :act <= 17
UPDATE acct_full SET id = id + 1000 WHERE id = :id
   AND NOT EXISTS (SELECT FROM acct_full WHERE id = :id + 1000);
UPDATE acct_key SET id = id + 1000 WHERE id = :id
   AND NOT EXISTS (SELECT FROM acct_key WHERE id = :id + 1000);
\else
DELETE FROM acct_full WHERE id = :id;
DELETE FROM acct_key WHERE id = :id;
\endif
COMMIT;
};
close($fh);

my ($wout, $werr) = ('', '');
my $writers = IPC::Run::start(
    [ 'pgbench', '-n', '-c', '3', '-t', '500', '-f', $script, $node->connstr('postgres') ],
    '>', \$wout, '2>', \$werr);

# consumers in small batches while the writers run; every third step is
# cut short by pg_terminate_backend somewhere in the middle
my $steps = 0;
my $terminated = 0;
while ($writers->pumpable)
{
    local $ENV{PGOPTIONS} = '-c ptf.max_changes_per_call=150';
    my ($out, $err) = ('', '');
    my $h = IPC::Run::start(
        [ 'psql', '-X', '-q', '-d', $node->connstr('postgres') . ' application_name=consumer',
          map { ('-c', $_) } @consume ],
        '>', \$out, '2>', \$err);
    if (++$steps % 3 == 0)
    {
        select(undef, undef, undef, rand(0.05));
        $terminated += $node->safe_psql('postgres',
            q{SELECT count(pg_terminate_backend(pid)) FROM
                (SELECT pid FROM pg_stat_activity WHERE application_name = 'consumer' OFFSET 0) c});
    }
    $h->finish;
    $writers->pump_nb;
}
$writers->finish;
like($wout, qr/number of transactions actually processed: \d+/, 'writers ran');
note "$steps consumer steps, $terminated terminated mid-way";

# the position stored with a uid's state is never behind its slot
sub slots_not_ahead
{
    return $node->safe_psql('postgres', q{
        SELECT bool_and(s.confirmed_flush_lsn <= st.lsn)
          FROM ptf.state st JOIN pg_replication_slots s USING (slot_name)});
}
is(slots_not_ahead(), 't', 'no slot is ahead of its uid after interrupted calls');

# ---- an immediate stop while a call holds uncommitted output
$node->safe_psql('postgres', q{
    INSERT INTO acct_full SELECT g, 7, NULL FROM generate_series(5001, 5100) g;
    INSERT INTO acct_key SELECT g, 7, NULL FROM generate_series(5001, 5100) g;
});
my $bg = $node->background_psql('postgres');
$bg->query_safe('BEGIN');
$bg->query_safe($_) for @consume;
$node->stop('immediate');
$bg->{run}->kill_kill;
$node->start;
is(slots_not_ahead(), 't', 'no slot is ahead of its uid after an immediate stop');

# ---- a backend killed inside a call: the server restarts
$node->safe_psql('postgres', q{
    UPDATE acct_full SET v = v + 1 WHERE id > 5000;
    UPDATE acct_key SET v = v + 1 WHERE id > 5000;
});
my $victim = $node->background_psql('postgres');
my $pid = $victim->query_safe('SELECT pg_backend_pid()');
$victim->query_safe('BEGIN');
$victim->query_safe($consume[0]);
kill 'KILL', $pid;
$victim->{run}->kill_kill;
$node->poll_query_until('postgres', 'SELECT 1', '1') or die 'server did not come back';
is(slots_not_ahead(), 't', 'no slot is ahead of its uid after a killed backend');

# ---- an immediate stop right after committed calls: their positions hold
# (the slots' own positions may be older on disk; what is stored wins)
$node->safe_psql('postgres', q{
    UPDATE acct_full SET v = v + 1 WHERE id > 5050;
    UPDATE acct_key SET v = v + 1 WHERE id > 5050;
});
$node->safe_psql('postgres', $_) for @consume;
$node->stop('immediate');
$node->start;
is(slots_not_ahead(), 't', 'no slot is ahead of its uid after a stop between calls');

# ---- drain, then compare with the truth
for my $i (1 .. 200)
{
    my $more = 0;
    for my $q (@consume)
    {
        my $r = $q =~ /^INSERT/
          ? $node->safe_psql('postgres', "WITH moved AS ($q RETURNING 1) SELECT count(*) FROM moved")
          : $node->safe_psql('postgres', $q);
        $more += $r;
    }
    last if $more == 0;
}

# The retract stream is the audit trail as is.  The normalized one says a
# key's change as -D old, +I new (Flink's ChangelogNormalize) where the
# trail has -U, +U: compared by retraction or addition.
for my $t ([ 'full', 'acct_full', 'op' ],
           [ 'key', 'acct_key', q{CASE WHEN op IN ('INSERT', 'UPDATE_AFTER') THEN '+' ELSE '-' END} ])
{
    my ($uid, $tbl, $op) = @$t;
    my $total = $node->safe_psql('postgres', "SELECT count(*) FROM audit WHERE tbl = '$tbl'");
    cmp_ok($total, '>', 1000, "$tbl: a real history ($total row changes)");
    # as multisets: nothing lost, nothing twice
    is($node->safe_psql('postgres', qq{
        SELECT count(*) FROM (
            (SELECT $op, id, v, note, xid FROM audit WHERE tbl = '$tbl'
             EXCEPT ALL SELECT $op, id, v, note, xid FROM out_$uid)
            UNION ALL
            (SELECT $op, id, v, note, xid FROM out_$uid
             EXCEPT ALL SELECT $op, id, v, note, xid FROM audit WHERE tbl = '$tbl')) d}),
        '0', "$uid: the stream is the audit trail, each change exactly once");
    # in order: the last row of each key is the table's row
    is($node->safe_psql('postgres', qq{
        WITH last AS (
            SELECT DISTINCT ON (id) id, op, v, note FROM out_$uid ORDER BY id, n DESC)
        SELECT count(*) FROM last l FULL JOIN $tbl t USING (id)
         WHERE (t.id IS NULL) <> (l.op = 'DELETE' OR l.op = 'UPDATE_BEFORE')
            OR (t.id IS NOT NULL AND (t.v, t.note) IS DISTINCT FROM (l.v, l.note))}),
        '0', "$uid: replaying the stream gives the table");
}
# key changes came out of the normalized stream as -D, +I
is($node->safe_psql('postgres', q{
    SELECT count(*) FILTER (WHERE op LIKE 'UPDATE%' AND id BETWEEN 1001 AND 2000) FROM out_key}),
    '0', 'key: a key change is a delete and an insert');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM out_key WHERE op = 'INSERT' AND id BETWEEN 1001 AND 2000}),
    '>', 0, 'key: there were key changes');
# keep-first over the same changes: every id ever written, once, with the
# first value the (verified) stream shows for it
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM (
        (SELECT DISTINCT ON (id) id, v FROM out_key
          WHERE op IN ('INSERT', 'UPDATE_AFTER') ORDER BY id, n)
        EXCEPT ALL TABLE out_first) d}),
    '0', 'keep-first emitted the first row of every key');
is($node->safe_psql('postgres', q{SELECT count(*) - count(DISTINCT id) FROM out_first}),
    '0', 'keep-first emitted each key once');

# the CDC pipeline: the mirror is the table
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM ((TABLE acct_full EXCEPT ALL TABLE mirror)
                          UNION ALL (TABLE mirror EXCEPT ALL TABLE acct_full)) d}),
    '0', 'the mirror fed by from_changelog and apply_changelog equals the source');

# ---- a uid copied into another database by pg_dump cannot use the slot,
# and forgetting it there leaves the original alone
my $dump = $node->basedir . '/dump.sql';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE copy');
$node->command_ok([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-q', '-d', $node->connstr('copy'), '-f', $dump ],
    'restore');
my ($ret, $stdout, $stderr) = $node->psql('copy', $consume[0]);
like($stderr, qr/belongs to another database/, 'the copy refuses the original database\'s slot');
$node->safe_psql('copy', q{SELECT ptf.drop_state('full')});
$node->safe_psql('postgres', q{INSERT INTO acct_full VALUES (9999, 1, 'after')});
is($node->safe_psql('postgres', qq{
    SELECT string_agg(op || ':' || (data).id, ',')
      FROM ptf.to_changelog(NULL::acct_full, changes => true, uid => 'full')}),
    'INSERT:9999', 'the original uid goes on after the copy was dropped');

# ---- the output plugin read live by pg_recvlogical
$node->safe_psql('postgres', q{
    CREATE TABLE live (id int PRIMARY KEY, v text);
    SELECT pg_create_logical_replication_slot('recv', 'deduplicate_keep_first');
});
my $file = $node->basedir . '/recv.json';
my $recv = IPC::Run::start(
    [ 'pg_recvlogical', '-d', $node->connstr('postgres'), '-S', 'recv', '--start',
      '-o', 'tables=live', '-o', 'format=debezium', '-f', $file, '-F', '0' ],
    '>', \my $rout, '2>', \my $rerr);
$node->safe_psql('postgres', q{
    INSERT INTO live VALUES (1, 'a'), (2, 'b');
    UPDATE live SET v = 'c' WHERE id = 1;
    DELETE FROM live WHERE id = 2;
    INSERT INTO acct_full VALUES (10001, 1, NULL);
});
my @events;
for (1 .. 300)
{
    if (-e $file)
    {
        open(my $in, '<', $file) or die;
        @events = map { decode_json($_) } grep { /\S/ } <$in>;
        close($in);
        last if @events >= 4;
    }
    select(undef, undef, undef, 0.1);
}
$recv->kill_kill;
is(join(',', map { $_->{op} . ':' . ($_->{after} // $_->{before})->{id} } @events),
    'c:1,c:2,u:1,d:2', 'pg_recvlogical receives the changes of the chosen table as envelopes');
is($events[2]{after}{v}, 'c', 'the update envelope carries the new row');
is($events[0]{source}{table}, 'live', 'the envelope names its table');
$node->safe_psql('postgres', q{SELECT pg_drop_replication_slot('recv')});

# options over the replication protocol: a walsender starts the plugin
# outside any transaction; an option without a value is a boolean's true
$node->safe_psql('postgres', q{
    SELECT pg_create_logical_replication_slot('recv2', 'deduplicate_keep_first');
});
my $file2 = $node->basedir . '/recv2.json';
$recv = IPC::Run::start(
    [ 'pg_recvlogical', '-d', $node->connstr('postgres'), '-S', 'recv2', '--start',
      '-o', 'format_version=1', '-o', 'include_lsn=off', '-o', 'include_xid',
      '-o', 'tables=public."live"', '-f', $file2, '-F', '0' ],
    '>', \my $rout2, '2>', \my $rerr2);
$node->safe_psql('postgres', q{INSERT INTO live VALUES (3, 'd')});
@events = ();
for (1 .. 300)
{
    if (-e $file2)
    {
        open(my $in, '<', $file2) or die;
        @events = map { decode_json($_) } grep { /\S/ } <$in>;
        close($in);
        last if @events >= 1;
    }
    select(undef, undef, undef, 0.1);
}
$recv->kill_kill;
is(scalar(@events) . ':' . ($events[0]{table} // '') . ':' . ($events[0]{data}{id} // ''),
    '1:public.live:3', 'options by the replication protocol: the named table, its row');
ok(!exists $events[0]{lsn} && $events[0]{xid} > 0,
    'include_lsn=off leaves out the position, include_xid alone means true');
IPC::Run::run(
    [ 'pg_recvlogical', '-d', $node->connstr('postgres'), '-S', 'recv2', '--start',
      '--no-loop', '-o', 'format_version=2', '-f', '-' ],
    '>', \my $bad_out, '2>', \my $bad_err, IPC::Run::timeout(60));
like($bad_err, qr/format_version "2" is not supported/,
    'a format version the plugin does not write is refused at START_REPLICATION');
$node->safe_psql('postgres', q{SELECT pg_drop_replication_slot('recv2')});

# ---- slots that no stream names: a first call killed before its commit
# leaves its slot (made before the transaction ends, not transactional);
# after the restart the database's first pipeline worker drops it, and no
# other.  A first call in progress holds its slot's lock to its end: a
# drop that comes meanwhile leaves its slot alone.
sub uid_slot
{
    my ($db, $uid) = @_;
    return $node->safe_psql($db, qq{
        SELECT 'ptf_' || (SELECT oid FROM pg_database WHERE datname = current_database())
               || '_' || left(md5('$uid'), 20)});
}
sub slot_count
{
    my ($db, $slot) = @_;
    return $node->safe_psql($db,
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'");
}
my $streams_before = $node->safe_psql('postgres', q{
    SELECT count(*) FROM ptf.state st JOIN pg_replication_slots s USING (slot_name)});
cmp_ok($streams_before, '>', 0, 'streams with slots before the kill');
my $orphan = uid_slot('postgres', 'orphan');
my $killed = $node->background_psql('postgres');
my $kpid = $killed->query_safe('SELECT pg_backend_pid()');
$killed->query_safe('BEGIN');
$killed->query_safe(q{SELECT count(*) FROM ptf.to_changelog(NULL::acct_full, changes => true,
    uid => 'orphan')});
is(slot_count('postgres', $orphan), '1', 'a first call in progress has made its slot');
kill 'KILL', $kpid;
$killed->{run}->kill_kill;
$node->poll_query_until('postgres', "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$orphan'", '0')
  or die 'the killed first call\'s slot stayed';
is($node->safe_psql('postgres', "SELECT count(*) FROM ptf.state WHERE uid = 'orphan'"), '0',
    'the killed first call left no uid');
pass('after the restart, the slot of the killed first call is dropped');
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM ptf.state st JOIN pg_replication_slots s USING (slot_name)}),
    $streams_before, 'the slots of the streams that exist are kept');
ok($node->log_contains(qr/dropped replication slot \Q$orphan\E, which no change stream/),
    'the drop is logged');

# the lock: a database whose first worker starts while a first call there
# is under way (made before its connections were allowed again), beside a
# slot nobody makes any more
$node->safe_psql('postgres', 'CREATE DATABASE sweep');
$node->safe_psql('sweep', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE t (id int PRIMARY KEY)});
my $pending = uid_slot('sweep', 'pending');
my $ghost = uid_slot('sweep', 'ghost');
my $first = $node->background_psql('sweep');
$node->safe_psql('postgres', 'ALTER DATABASE sweep ALLOW_CONNECTIONS false');
# the launcher reads pg_database every few seconds: it sees sweep closed
sleep 7;
$first->query_safe("SELECT 1 FROM pg_create_logical_replication_slot('$ghost', 'deduplicate_keep_first')");
$first->query_safe('BEGIN');
$first->query_safe(q{SELECT count(*) FROM ptf.to_changelog(NULL::t, changes => true, uid => 'pending')});
is(slot_count('postgres', $ghost) . slot_count('postgres', $pending), '11',
    'a slot in the making and one that nothing names');
$node->safe_psql('postgres', 'ALTER DATABASE sweep ALLOW_CONNECTIONS true');
$node->poll_query_until('postgres', "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$ghost'", '0')
  or die 'the slot nothing names stayed';
is(slot_count('postgres', $pending), '1', 'the slot of the first call under way is kept');
$first->query_safe('COMMIT');
$node->safe_psql('sweep', 'INSERT INTO t VALUES (1)');
is($node->safe_psql('sweep', q{SELECT count(*) FROM ptf.to_changelog(NULL::t, changes => true, uid => 'pending')}),
    '1', 'its stream goes on');
$first->quit;

# ---- a hot standby reads ptf.state (the state is replicated; the view's
# WAL distance has no meaning there: NULL), and refuses stream calls
$node->backup('for_standby');
my $standby = PostgreSQL::Test::Cluster->new('cs_standby');
$standby->init_from_backup($node, 'for_standby', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{
    SELECT count(*) > 0 AND bool_and(retained_wal_bytes IS NULL) FROM ptf.state}),
    't', 'ptf.state reads on a standby, without WAL distances');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.state}),
    $standby->safe_psql('postgres', q{SELECT count(*) FROM ptf.state}),
    'the standby has every uid');
$standby->stop;

$node->stop;
done_testing();
