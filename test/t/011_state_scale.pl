# Pipelines whose state is far larger than the memory they may keep
# (ptf.state_memory_limit = 1MB, 200k keys): the worker drops each state
# after its step and the next step reads only the keys it touches, and the
# keys whose timers come due, through the state tables' indexes
# (engine/state_load.c).  Every sink must still equal its one-shot
# answer, across killed workers and immediate stops at every point of a
# step: keep-first by arrival, keep-first by event time with candidates
# pending across steps, to_changelog and from_changelog that need the row
# images kept in state.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('state_scale', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.state_memory_limit = 1MB
});

# events: 200k users first, then batches of mostly known users; ts grows
# with id, so the first row of a user by time is its first by id.
# accounts: REPLICA IDENTITY DEFAULT, so a delete carries only its key and
# to_changelog completes it (and every update's before image) from state;
# landing carries only after images, so from_changelog makes each update's
# before image from state.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE events (id bigserial PRIMARY KEY, user_id int, ts timestamptz, v text);
    SELECT ptf.set_watermark('events', 'ts', interval '100 milliseconds');
    CREATE TABLE first_events (id bigint, user_id int, v text);
    CREATE TABLE first_by_time (id bigint, user_id int, v text);
    CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance int);
    CREATE TABLE audit (op text, id int, owner text, balance int);
    CREATE TABLE landing (op text, after jsonb);
    CREATE FUNCTION track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            INSERT INTO audit VALUES (CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE_BEFORE' ELSE 'DELETE' END,
                                      OLD.id, OLD.owner, OLD.balance);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO audit VALUES (CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE_AFTER' ELSE 'INSERT' END,
                                      NEW.id, NEW.owner, NEW.balance);
        END IF;
        INSERT INTO landing VALUES (CASE TG_OP WHEN 'INSERT' THEN 'c' WHEN 'UPDATE' THEN 'u' ELSE 'd' END,
            to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END));
        RETURN NULL;
    END $$;
    CREATE TRIGGER track AFTER INSERT OR UPDATE OR DELETE ON accounts
        FOR EACH ROW EXECUTE FUNCTION track();
    CREATE TABLE history (op text, id int, owner text, balance int);
    CREATE TABLE mirror (id int PRIMARY KEY, owner text, balance int);

    SELECT ptf.create_pipeline('firsts', $q$
        SELECT id, user_id, v FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            changes => true, uid => 'firsts')$q$, 'first_events');
    SELECT ptf.create_pipeline('by-time', $q$
        SELECT id, user_id, v FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            on_time => 'ts', changes => true, uid => 'by-time')$q$, 'first_by_time');
    SELECT ptf.create_pipeline('history', $q$
        SELECT op, (data).id, (data).owner, (data).balance FROM ptf.to_changelog(NULL::accounts,
            partition_by => '{id}', changes => true, uid => 'history')$q$, 'history');
    SELECT ptf.create_pipeline('mirror', $q$
        SELECT kind, data FROM ptf.from_changelog(NULL::landing, NULL::mirror, after => 'after',
            op_mapping => '{"c": "INSERT", "u": "UPDATE_AFTER", "d": "DELETE"}',
            partition_by => '{id}', consume_full_deletes => false, changes => true, uid => 'mirror')$q$,
        'mirror', 'changelog');
});

$node->safe_psql('postgres', q{
    INSERT INTO events (user_id, ts, v)
    SELECT g, timestamptz '2024-01-01' + g * interval '1 millisecond', 'first' FROM generate_series(1, 200000) g;
    INSERT INTO accounts SELECT g, 'owner of ' || g, 0 FROM generate_series(1, 30000) g;
});

my $batch = 0;

# A batch in several transactions: events of known and new users, account
# inserts, updates and deletes spread over the whole key range.
sub write_batch
{
    $batch++;
    for my $t (1 .. 3)
    {
        $node->safe_psql('postgres', qq{
            INSERT INTO events (user_id, ts, v)
            SELECT (hashint4(g * $batch * $t) & 2147483647) % 210000,
                   timestamptz '2024-01-01' + (200000 + $batch * 10000 + $t * 1000 + g) * interval '1 millisecond',
                   'b$batch.t$t.' || g
              FROM generate_series(1, 300) g;
            INSERT INTO accounts SELECT DISTINCT (hashint4(g * $batch + $t) & 2147483647) % 40000, 'new', $batch
              FROM generate_series(1, 100) g
                ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + 1;
            UPDATE accounts SET owner = owner || '+' WHERE id % 997 = $batch * 10 + $t;
            DELETE FROM accounts WHERE id % 1009 = $batch * 10 + $t;
        });
    }
}

my %expected = (
    firsts => q{
        WITH f AS (SELECT DISTINCT ON (user_id) id, user_id, v FROM events ORDER BY user_id, id)
        SELECT count(*) FROM ((TABLE f EXCEPT ALL TABLE first_events)
                              UNION ALL (TABLE first_events EXCEPT ALL TABLE f)) d},
    'by-time' => q{
        WITH f AS (SELECT DISTINCT ON (user_id) id, user_id, v FROM events
                    WHERE ts <= (SELECT max(ts) - interval '100 milliseconds' FROM events)
                    ORDER BY user_id, ts, id)
        SELECT count(*) FROM ((TABLE f EXCEPT ALL TABLE first_by_time)
                              UNION ALL (TABLE first_by_time EXCEPT ALL TABLE f)) d},
    history => q{
        SELECT count(*) FROM ((TABLE audit EXCEPT ALL TABLE history)
                              UNION ALL (TABLE history EXCEPT ALL TABLE audit)) d},
    mirror => q{
        SELECT count(*) FROM ((TABLE accounts EXCEPT ALL TABLE mirror)
                              UNION ALL (TABLE mirror EXCEPT ALL TABLE accounts)) d});

sub check_all
{
    my ($label) = @_;
    for my $p (sort keys %expected)
    {
        ok($node->poll_query_until('postgres', $expected{$p}, '0'),
            "$label: $p equals its one-shot answer");
    }
    slots_not_ahead($node, $label);
}

check_all('preloaded');
write_batch();
check_all('steady');
# each state is far larger than the limit, and steps after the first read it through its indexes
is($node->safe_psql('postgres', q{
    SELECT count(*) FROM ptf.state s
     WHERE pg_relation_size(s.state_table) > 1024 * 1024
       AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = s.state_table)}),
    '4', 'every state is larger than the memory limit, and has been probed')
  or diag($node->safe_psql('postgres', q{SELECT uid, pg_relation_size(state_table), keys,
      (SELECT count(*) FROM pg_index i WHERE i.indrelid = s.state_table) FROM ptf.state s}));
is($node->safe_psql('postgres', q{SELECT sum(keys) >= 200000 FROM ptf.state WHERE uid IN ('firsts', 'by-time')}),
    't', 'the keep-first states hold every user');

survive_kills($node, \&write_batch, \&check_all);

# A backlog written before the state's indexes exist, read by steps that
# make them: the changes are decoded under the catalog of their time,
# which has no index, while the state table is read key by key.
$node->safe_psql('postgres', q{
    CREATE TABLE bk (k bigint, v bigint);
    CREATE TABLE bk_sink (k bigint, v bigint);
    SELECT ptf.create_pipeline('backlog', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::bk, partition_by => '{k}',
            changes => true, uid => 'backlog')$q$, 'bk_sink');
    SELECT ptf.pause_pipeline('backlog');
});
$node->safe_psql('postgres', q{
    DO $$ BEGIN
        FOR b IN 0 .. 29 LOOP
            INSERT INTO bk SELECT i, i FROM generate_series(b * 10000 + 1, (b + 1) * 10000) i;
            COMMIT;
        END LOOP;
    END $$});
$node->safe_psql('postgres', q{SELECT ptf.resume_pipeline('backlog')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM bk_sink}, '300000'),
    'a backlog from before the indexes is read key by key');
is($node->safe_psql('postgres', q{SELECT failures FROM ptf.pipeline_status WHERE name = 'backlog'}),
    '0', 'no step of the backlog failed');

# the stored key counts are the tables'
for my $uid ('firsts', 'by-time', 'history', 'mirror', 'backlog')
{
    is($node->safe_psql('postgres', qq{
        SELECT s.keys = (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %s WHERE %s',
                   s.state_table, 'true'), false, true, '')))[1]::text::bigint
          FROM ptf.state s WHERE uid = '$uid'}),
        't', "$uid: the stored key count is its table's");
}

# no process crashed along the way (the kills above are SIGKILL, signal 9)
unlike(slurp_file($node->logfile), qr/TRAP:|terminated by signal (6|11)/,
    'no assertion failed and no process crashed');

done_testing();
