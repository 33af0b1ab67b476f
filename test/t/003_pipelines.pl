# Pipelines run by the background worker: exactly once across killed
# workers and immediate stops at every point of a step, failures isolated
# and resumed, other roles kept out.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('pipelines', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.pipeline_batch_size = 300
});

# Three pipelines over two sources:
#  firsts:  keep-first over events, appended to first_events
#  history: to_changelog over accounts (REPLICA IDENTITY FULL), appended
#  mirror:  accounts' changes as Debezium rows in a landing table, read back
#           by from_changelog and applied to a mirror (sink_mode changelog)
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE events (id bigserial PRIMARY KEY, user_id int, v text);
    CREATE TABLE first_events (id bigint, user_id int, v text);
    CREATE TABLE accounts (id int PRIMARY KEY, balance int);
    ALTER TABLE accounts REPLICA IDENTITY FULL;
    CREATE TABLE audit (op text, id int, balance int, xid xid8);
    CREATE TABLE landing (op text, before jsonb, after jsonb);
    CREATE FUNCTION track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            INSERT INTO audit VALUES (CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE_BEFORE' ELSE 'DELETE' END,
                                      OLD.id, OLD.balance, pg_current_xact_id());
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO audit VALUES (CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE_AFTER' ELSE 'INSERT' END,
                                      NEW.id, NEW.balance, pg_current_xact_id());
        END IF;
        INSERT INTO landing VALUES (CASE TG_OP WHEN 'INSERT' THEN 'c' WHEN 'UPDATE' THEN 'u' ELSE 'd' END,
            CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
            CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
        RETURN NULL;
    END $$;
    CREATE TRIGGER track AFTER INSERT OR UPDATE OR DELETE ON accounts
        FOR EACH ROW EXECUTE FUNCTION track();
    CREATE TABLE history (op text, id int, balance int, xid xid8);
    CREATE TABLE mirror (id int PRIMARY KEY, balance int);

    SELECT ptf.create_pipeline('firsts', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}',
            changes => true, uid => 'firsts')$q$, 'first_events');
    SELECT ptf.create_pipeline('history', $q$
        SELECT op, (data).id, (data).balance, xid FROM ptf.to_changelog(NULL::accounts,
            changes => true, uid => 'history')$q$, 'history');
    SELECT ptf.create_pipeline('mirror', $q$
        SELECT kind, data FROM ptf.from_changelog(NULL::landing, NULL::mirror,
            before => 'before', after => 'after',
            op_mapping => '{"c": "INSERT", "u": "UPDATE_BEFORE, UPDATE_AFTER", "d": "DELETE"}',
            changes => true, uid => 'mirror')$q$, 'mirror', 'changelog');
});

my $batch = 0;

# A batch of changes in several transactions: events with repeated users,
# account inserts, updates and deletes.
sub write_batch
{
    $batch++;
    for my $t (1 .. 4)
    {
        $node->safe_psql('postgres', qq{
            INSERT INTO events (user_id, v)
            SELECT (hashint4(g * $batch * $t) & 2147483647) % 400, 'b$batch.t$t.' || g
              FROM generate_series(1, 150) g;
            INSERT INTO accounts SELECT g, $batch FROM generate_series($batch * 40 + $t * 10, $batch * 40 + $t * 10 + 9) g
                ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + 1;
            UPDATE accounts SET balance = balance + 100 WHERE id % 7 = $t;
            DELETE FROM accounts WHERE id % 11 = $batch % 11 AND id % 3 = $t % 3;
        });
    }
}

my %expected = (
    firsts => q{
        WITH firsts AS (SELECT DISTINCT ON (user_id) id, user_id, v FROM events ORDER BY user_id, id)
        SELECT count(*) FROM ((TABLE firsts EXCEPT ALL TABLE first_events)
                              UNION ALL (TABLE first_events EXCEPT ALL TABLE firsts)) d},
    history => q{
        SELECT count(*) FROM ((TABLE audit EXCEPT ALL TABLE history)
                              UNION ALL (TABLE history EXCEPT ALL TABLE audit)) d},
    mirror => q{
        SELECT count(*) FROM ((TABLE accounts EXCEPT ALL TABLE mirror)
                              UNION ALL (TABLE mirror EXCEPT ALL TABLE accounts)) d});

# Every sink equals its one-shot answer (nothing lost, nothing doubled: a
# doubled row never goes away, so waiting for equality cannot hide one), and
# no slot is ahead of the position stored with its state.
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

write_batch();
check_all('steady');
# "waiting" is right for a moment after the sinks are equal: the others' sink writes are WAL
# a pipeline has not read while its worker steps another one
ok($node->poll_query_until('postgres',
        q{SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM ptf.pipeline_status},
        'firsts:running,history:running,mirror:running'),
    'pipeline_status shows the pipelines running');

survive_kills($node, \&write_batch, \&check_all);

cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM first_events'), '>', 300,
    'keep-first saw many keys');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM history'), '>', 500,
    'the history is long');

# ---- a failing pipeline is isolated, and resumes exactly once when fixed
$node->safe_psql('postgres', q{
    CREATE TABLE events2 (id bigserial, user_id int, v text);
    CREATE TABLE picky (id bigint, user_id int, v text CHECK (v <> 'bad'));
    SELECT ptf.create_pipeline('picky', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::events2, partition_by => '{user_id}',
            changes => true, uid => 'picky')$q$, 'picky');
    INSERT INTO events2 (user_id, v) VALUES (1, 'good'), (2, 'bad'), (3, 'fine');
});
ok($node->poll_query_until('postgres', q{
    SELECT state = 'failing' AND last_error LIKE '%picky_v_check%' AND failures > 0
      FROM ptf.pipeline_status WHERE name = 'picky'}), 'a rejected row makes its pipeline fail');
is($node->safe_psql('postgres', 'SELECT count(*) FROM picky'), '0', 'a failed step wrote nothing');
write_batch();
check_all('others run on while one fails');
$node->safe_psql('postgres', q{
    ALTER TABLE picky DROP CONSTRAINT picky_v_check;
    INSERT INTO events2 (user_id, v) VALUES (1, 'later'), (4, 'new');
});
ok($node->poll_query_until('postgres', q{
    SELECT string_agg(user_id || v, ',' ORDER BY user_id) FROM picky}, '1good,2bad,3fine,4new'),
    'fixed, it resumes where it failed, exactly once');
ok($node->poll_query_until('postgres', q{
    SELECT state || failures FROM ptf.pipeline_status WHERE name = 'picky'}, 'running0'),
    'and runs again');

# ---- pause and resume
$node->safe_psql('postgres', q{SELECT ptf.pause_pipeline('picky')});
$node->safe_psql('postgres', q{INSERT INTO events2 (user_id, v) VALUES (5, 'while paused')});
ok($node->poll_query_until('postgres', q{
    SELECT state FROM ptf.pipeline_status WHERE name = 'picky'}, 'paused'), 'paused');
sleep(1);
is($node->safe_psql('postgres', q{SELECT count(*) FROM picky WHERE user_id = 5}), '0',
    'a paused pipeline does not run');
$node->safe_psql('postgres', q{SELECT ptf.resume_pipeline('picky')});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM picky WHERE user_id = 5}, '1'),
    'resumed, it catches up');

# ---- other roles cannot see, pause, drop, or take the state of a pipeline
$node->safe_psql('postgres', q{
    CREATE ROLE alice LOGIN;
    CREATE ROLE bob LOGIN;
    GRANT ptf_stream TO alice;
    GRANT USAGE, CREATE ON SCHEMA public TO alice, bob;
    SET ROLE alice;
    CREATE TABLE alice_events (id int, k int);
    CREATE TABLE alice_firsts (id int, k int);
    RESET ROLE;
});
$node->safe_psql('postgres', q{
    SELECT ptf.create_pipeline('alices', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::alice_events, partition_by => '{k}', changes => true, uid => 'alices')$q$, 'alice_firsts');
    INSERT INTO alice_events VALUES (1, 1), (2, 1), (3, 2);
}, extra_params => [ '-U', 'alice' ]);
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM alice_firsts}, '2'),
    'a pipeline runs as the role that made it');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.pipelines}, extra_params => [ '-U', 'bob' ]),
    '0', 'another role does not see it in ptf.pipelines');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.pipeline_status}, extra_params => [ '-U', 'bob' ]),
    '0', 'nor in ptf.pipeline_status');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf._pipeline_status()}, extra_params => [ '-U', 'bob' ]),
    '0', 'nor through the status function');
for my $sql (q{SELECT ptf.pause_pipeline('alices')}, q{SELECT ptf.drop_pipeline('alices')},
    q{SELECT ptf.drop_state('alices')})
{
    my ($ret, $out, $err) = $node->psql('postgres', $sql, extra_params => [ '-U', 'bob' ]);
    like($err, qr/must be owner of pipeline|permission denied/, "another role cannot: $sql");
}
# names are per database, but whose they are is not said
$node->safe_psql('postgres', q{CREATE TABLE bob_events (id int, k int); CREATE TABLE bob_firsts (id int, k int)},
    extra_params => [ '-U', 'bob' ]);
for my $case (
    [ q{SELECT ptf.drop_state('alices')}, qr/permission denied for the state of uid "alices"/ ],
    [ q{SELECT ptf.create_pipeline('alices', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::bob_events, partition_by => '{k}', changes => true, uid => 'bobs')$q$, 'bob_firsts')},
      qr/pipeline "alices" already exists/ ],
    [ q{SELECT ptf.create_pipeline('bobs', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::bob_events, partition_by => '{k}', changes => true, uid => 'alices')$q$, 'bob_firsts')},
      qr/uid "alices" is already in use/ ])
{
    my ($ret, $out, $err) = $node->psql('postgres', $case->[0], extra_params => [ '-U', 'bob' ]);
    like($err, $case->[1], "another role is refused: $case->[0]");
    like($err, qr/another role made this one/, 'saying another role made it');
    unlike($err, qr/role alice|state of pipeline|belongs/, 'without saying whose it is or what uses it');
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%'}) + 0,
    $node->safe_psql('postgres', q{SELECT count(*) FROM ptf.state WHERE slot_name IS NOT NULL}) + 0,
    'the refused calls left no slot behind');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT ptf.drop_state('alices')},
    extra_params => [ '-U', 'alice' ]);
like($err, qr/is the state of pipeline "alices"/, 'the owner cannot take a pipeline\'s state from under it');

# nor run the uid of another role's pipeline, nor call a pipeline's uid by hand
($ret, $out, $err) = $node->psql('postgres', q{
    SELECT ptf.create_pipeline('bobs', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::alice_events, partition_by => '{k}', changes => true, uid => 'alices')$q$, 'alice_firsts')},
    extra_params => [ '-U', 'bob' ]);
like($err, qr/permission denied/, 'another role cannot take over a uid');
($ret, $out, $err) = $node->psql('postgres', q{
    SELECT * FROM ptf.deduplicate_keep_first(NULL::alice_events, partition_by => '{k}',
        changes => true, uid => 'alices')}, extra_params => [ '-U', 'alice' ]);
like($err, qr/is the state of pipeline "alices"/, 'a pipeline\'s uid is read by its worker only');

# what the owner's code leaves for later does not run with the worker's rights
$node->safe_psql('postgres', q{
    SET ROLE alice;
    CREATE TABLE mallory_src (id int);
    CREATE TABLE mallory_sink (id int);
    CREATE FUNCTION promote() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN EXECUTE 'ALTER ROLE alice SUPERUSER'; RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER later AFTER INSERT ON mallory_sink DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION promote();
    SELECT ptf.create_pipeline('mallory', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::mallory_src, partition_by => '{id}', changes => true, uid => 'mallory')$q$, 'mallory_sink');
    INSERT INTO mallory_src VALUES (1);
});
ok($node->poll_query_until('postgres', q{
    SELECT last_error FROM ptf.pipeline_status WHERE name = 'mallory'},
    'cannot fire deferred trigger within security-restricted operation'),
    'a deferred trigger of the owner does not fire as the worker');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'}), 'f',
    'the owner gained nothing');
$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('mallory')});

# the query is read with the search_path it was made with
$node->safe_psql('postgres', q{
    CREATE SCHEMA shop;
    CREATE TABLE shop.orders (id int, customer int);
    CREATE TABLE shop.first_orders (id int, customer int);
    SET search_path = shop, public;
    SELECT ptf.create_pipeline('first-orders', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::orders, partition_by => '{customer}', changes => true, uid => 'first-orders')$q$,
        'first_orders');
});
$node->safe_psql('postgres', q{INSERT INTO shop.orders VALUES (1, 7), (2, 7), (3, 8)});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM shop.first_orders}, '2'),
    'a pipeline made under another search_path runs');

# the query is bound when made: a function another role creates later,
# earlier on the maker's search_path, is not what the pipeline calls
$node->safe_psql('postgres', q{
    CREATE SCHEMA lib;
    CREATE FUNCTION lib.wanted(k int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT k % 2 = 0';
    CREATE TABLE shop.picked (id int, customer int);
    SET search_path = public, lib, shop;
    SELECT ptf.create_pipeline('picked', $q$SELECT * FROM ptf.deduplicate_keep_first(
        NULL::orders, partition_by => '{id}', changes => true, uid => 'picked') AS o
        WHERE wanted(customer) AND lower(o.customer::varchar) <> 'x'
          AND concat(o.customer, 'x') <> ''$q$, 'picked');
});
$node->safe_psql('postgres', q{
    CREATE TABLE public.stolen (who text);
    GRANT INSERT ON public.stolen TO PUBLIC;
    CREATE FUNCTION public.wanted(k int) RETURNS boolean LANGUAGE sql
        AS $$INSERT INTO public.stolen VALUES (current_user) RETURNING true$$;
    CREATE FUNCTION public.lower(v varchar) RETURNS text LANGUAGE sql
        AS $$INSERT INTO public.stolen VALUES (current_user) RETURNING 'y'$$;
    CREATE FUNCTION public.concat(i int, t text) RETURNS text LANGUAGE sql
        AS $$INSERT INTO public.stolen VALUES (current_user) RETURNING 'y'$$;
}, extra_params => [ '-U', 'bob' ]);
$node->safe_psql('postgres', q{INSERT INTO shop.orders VALUES (10, 2), (11, 3)});
ok($node->poll_query_until('postgres', q{SELECT string_agg(id::text, ',') FROM shop.picked}, '10'),
    'a pipeline calls what its query named when it was made');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.stolen}), '0',
    'not a function, a better-matching overload or an exact-type overload of a polymorphic built-in created later on its search_path');
like($node->safe_psql('postgres', q{SELECT query FROM ptf.pipelines WHERE name = 'picked'}),
    qr/lib\.wanted\(/, 'the stored query names its functions with their schemas');

# a pipeline runs with its owner's rights only
$node->safe_psql('postgres', q{REVOKE INSERT ON alice_firsts FROM alice}, );
$node->safe_psql('postgres', q{INSERT INTO alice_events VALUES (4, 3)}, extra_params => [ '-U', 'alice' ]);
ok($node->poll_query_until('postgres', q{
    SELECT last_error LIKE 'permission denied for table alice_firsts%' FROM ptf.pipeline_status
     WHERE name = 'alices'}), 'without its owner\'s right to write the sink, it fails');
$node->safe_psql('postgres', q{GRANT INSERT ON alice_firsts TO alice});
ok($node->poll_query_until('postgres', q{SELECT count(*) FROM alice_firsts}, '3'), 'granted again, it goes on');

# ---- the query is checked when the pipeline is made
for my $case (
    [ q{SELECT * FROM events}, qr/must read a change stream with one of the ptf functions/ ],
    [ q{SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}', uid => 'x')},
      qr/changes => true/ ],
    [ q{SELECT * FROM ptf.deduplicate_keep_first(NULL::events, partition_by => '{user_id}', changes => true)},
      qr/uid => / ],
    [ q{SELECT count(*) FROM ptf.deduplicate_keep_first(NULL::events, changes => true, uid => 'x')},
      qr/no joins, grouping/ ])
{
    my ($r, $o, $e) = $node->psql('postgres',
        "SELECT ptf.create_pipeline('bad', \$q\$$case->[0]\$q\$, 'first_events')");
    like($e, $case->[1], "rejected: $case->[0]");
}

# ---- dropping a pipeline drops its slot and state
my $slots = $node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots});
my $origins = $node->safe_psql('postgres',
    q{SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'ptf_pipeline_%'});
$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('picky')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), $slots - 1,
    'its slot is gone');
is($node->safe_psql('postgres', q{SELECT count(*) FROM ptf.state WHERE uid = 'picky'}), '0',
    'its state is gone');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'ptf_pipeline_%'}),
    $origins - 1, 'its replication origin is gone');

# ---- with no pipeline left, the worker leaves
$node->safe_psql('postgres', q{
    SELECT ptf.drop_pipeline(name) FROM ptf.pipeline_registry;
});
ok($node->poll_query_until('postgres', q{
    SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker'}, '0'),
    'the worker leaves when the last pipeline is dropped');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}), '0', 'no slot is left behind');

$node->stop;
done_testing();
