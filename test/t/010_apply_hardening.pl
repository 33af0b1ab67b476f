# Pipelines that must not wedge.  A changelog sink with another unique
# column gets changes that collide in key order but not in their own
# order; a truly invalid change still fails, and the pipeline resumes once
# it is fixed.  A dropped sink is warned of, fails clearly while missing,
# and is followed to a table made again by its name (by its owner only),
# exactly once; a dropped source names the pipelines and uids it breaks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;

my $node = ptf_node('apply_hardening', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
});

# ---- a changelog sink with a unique email besides its key
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE landing (seq bigserial, op text, id int, email text);
    CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL UNIQUE);
    SELECT ptf.create_pipeline('users', $q$
        SELECT kind, data FROM ptf.from_changelog(NULL::landing, NULL::users,
            op_mapping => '{"c": "INSERT", "ub": "UPDATE_BEFORE", "ua": "UPDATE_AFTER", "d": "DELETE"}',
            changes => true, uid => 'users')$q$, 'users', 'changelog');
    INSERT INTO landing (op, id, email) VALUES ('c', 2, 'a');
});
ok($node->poll_query_until('postgres', q{SELECT string_agg(id || email, ',' ORDER BY id) FROM users}, '2a'),
    'the first row is applied');

# id 2's email a -> b, then id 1 takes a: in key order 1 would take a first
$node->safe_psql('postgres', q{
    INSERT INTO landing (op, id, email) VALUES ('ub', 2, 'a'), ('ua', 2, 'b'), ('c', 1, 'a');
});
ok($node->poll_query_until('postgres', q{SELECT string_agg(id || email, ',' ORDER BY id) FROM users}, '1a,2b'),
    'an email moved to another row is applied in order');

# two emails swapped through a third value, in one transaction
$node->safe_psql('postgres', q{
    INSERT INTO landing (op, id, email) VALUES
        ('ub', 1, 'a'), ('ua', 1, 'tmp'), ('ub', 2, 'b'), ('ua', 2, 'a'), ('ub', 1, 'tmp'), ('ua', 1, 'b');
});
ok($node->poll_query_until('postgres', q{SELECT string_agg(id || email, ',' ORDER BY id) FROM users}, '1b,2a'),
    'a swap is applied');
unlike(slurp_file($node->logfile), qr/pipeline "users" failed/, 'no step of the pipeline failed');

# truly invalid: b is taken by id 1 and never freed
$node->safe_psql('postgres', q{
    INSERT INTO landing (op, id, email) VALUES ('c', 3, 'b');
});
ok($node->poll_query_until('postgres', q{
    SELECT state = 'failing' AND last_error LIKE '%users_email_key%' FROM ptf.pipeline_status
     WHERE name = 'users'}), 'a change the constraint refuses in any order fails with its error');
is($node->safe_psql('postgres', q{SELECT count(*) FROM users}), '2', 'and writes nothing');
# the failed step's changes come again once the sink allows them
$node->safe_psql('postgres', q{ALTER TABLE users DROP CONSTRAINT users_email_key});
ok($node->poll_query_until('postgres', q{SELECT string_agg(id || email, ',' ORDER BY id) FROM users}, '1b,2a,3b'),
    'once the constraint is gone it resumes, exactly once');
ok($node->poll_query_until('postgres', q{
    SELECT state || failures FROM ptf.pipeline_status WHERE name = 'users'}, 'running0'),
    'and runs again');

# ---- a dropped sink: warned of; the pipeline fails with a clear error
# while it is missing, and goes on into a table made again by its name,
# exactly once
# (the pipeline's owner is not a superuser: a superuser owns every table)
$node->safe_psql('postgres', q{
    CREATE ROLE regress_alice;
    GRANT ptf_stream TO regress_alice;
    CREATE TABLE clicks (id bigserial PRIMARY KEY, user_id int);
    GRANT SELECT ON clicks TO regress_alice;
    CREATE SCHEMA "Out";
    GRANT USAGE, CREATE ON SCHEMA "Out" TO regress_alice;
    SET ROLE regress_alice;
    CREATE TABLE "Out"."First clicks" (id bigint, user_id int);
    SELECT ptf.create_pipeline('firsts', $q$
        SELECT * FROM ptf.deduplicate_keep_first(NULL::public.clicks, partition_by => '{user_id}',
            changes => true, uid => 'firsts')$q$, '"Out"."First clicks"');
    RESET ROLE;
    INSERT INTO clicks (user_id) VALUES (1), (2), (1);
});
ok($node->poll_query_until('postgres', q{SELECT string_agg(user_id::text, ',' ORDER BY user_id) FROM "Out"."First clicks"}, '1,2'),
    'the sink fills');
# renamed, it is still the sink
$node->safe_psql('postgres', q{
    ALTER TABLE "Out"."First clicks" RENAME TO "Firsts";
    INSERT INTO clicks (user_id) VALUES (3);
});
ok($node->poll_query_until('postgres', q{SELECT string_agg(user_id::text, ',' ORDER BY user_id) FROM "Out"."Firsts"}, '1,2,3'),
    'a renamed sink is written on');
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{DROP TABLE "Out"."Firsts"});
like($stderr, qr/WARNING:  table "Out"\."Firsts" is the sink of pipeline "firsts"/, 'dropping the sink warns');
like($stderr, qr/HINT:  Make the table again, or drop the pipeline: SELECT ptf\.drop_pipeline\('firsts'\);/,
    'and says the ways out');
$node->safe_psql('postgres', q{INSERT INTO clicks (user_id) VALUES (4), (5), (4)});
ok($node->poll_query_until('postgres', q{
    SELECT state = 'failing' AND last_error = 'the sink of pipeline "firsts", table "Out"."Firsts", was dropped'
      FROM ptf.pipeline_status WHERE name = 'firsts'}), 'while the sink is missing the pipeline fails, saying why');
$node->safe_psql('postgres', q{
    SET ROLE regress_alice;
    CREATE TABLE "Out"."Firsts" (id bigint, user_id int);
});
ok($node->poll_query_until('postgres', q{SELECT string_agg(user_id::text, ',' ORDER BY user_id) FROM "Out"."Firsts"}, '4,5'),
    'made again, the sink gets what came meanwhile, once');
$node->safe_psql('postgres', q{INSERT INTO clicks (user_id) VALUES (6), (5)});
ok($node->poll_query_until('postgres', q{SELECT string_agg(user_id::text, ',' ORDER BY user_id) FROM "Out"."Firsts"}, '4,5,6'),
    'and what comes after');
ok($node->poll_query_until('postgres', q{
    SELECT state || failures FROM ptf.pipeline_status WHERE name = 'firsts'}, 'running0'),
    'the pipeline runs again');
is($node->safe_psql('postgres', q{SELECT sink::text, sink_name IS NULL FROM ptf.pipeline_registry WHERE name = 'firsts'}),
    '"Out"."Firsts"|t', 'the new table is the sink');

# another role's table of the sink's name gets nothing
$node->safe_psql('postgres', q{
    CREATE ROLE regress_other;
    GRANT CREATE, USAGE ON SCHEMA "Out" TO regress_other;
    DROP TABLE "Out"."Firsts";
    SET ROLE regress_other;
    CREATE TABLE "Out"."Firsts" (id bigint, user_id int);
    GRANT INSERT ON "Out"."Firsts" TO PUBLIC;
    RESET ROLE;
    INSERT INTO clicks (user_id) VALUES (7);
});
ok($node->poll_query_until('postgres', q{
    SELECT state = 'failing' AND last_error LIKE '%was made again by another role'
      FROM ptf.pipeline_status WHERE name = 'firsts'}), 'a table of the name made by another role is refused');
is($node->safe_psql('postgres', q{SELECT count(*) FROM "Out"."Firsts"}), '0', 'and gets no rows');
$node->safe_psql('postgres', q{ALTER TABLE "Out"."Firsts" OWNER TO regress_alice});
ok($node->poll_query_until('postgres', q{SELECT string_agg(user_id::text, ',' ORDER BY user_id) FROM "Out"."Firsts"}, '7'),
    'given to the pipeline\'s owner, it is the sink');

# ---- a dropped source: its pipeline and uids are named
$node->safe_psql('postgres', q{
    SELECT * FROM ptf.to_changelog(NULL::clicks, changes => true, uid => 'clicks-log');
});
($ret, $stdout, $stderr) = $node->psql('postgres', q{DROP TABLE clicks});
like($stderr, qr/WARNING:  table public\.clicks is read by pipeline "firsts"/, 'the pipeline reading a dropped table is named');
like($stderr, qr/WARNING:  table public\.clicks is read by the change stream of uid "clicks-log".*HINT:  SELECT ptf\.drop_state\('clicks-log'\);/s,
    'so is a uid, with the way out');
ok($node->poll_query_until('postgres', q{
    SELECT state = 'failing' FROM ptf.pipeline_status WHERE name = 'firsts'}), 'the pipeline fails');
is($node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('firsts'), ptf.drop_state('clicks-log')}), 't|t',
    'and both are dropped');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ptf%'}), '1',
    'with their slots (the users pipeline keeps its own)');

$node->stop;
done_testing();
