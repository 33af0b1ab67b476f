# Pipelines that must not wedge: a changelog sink with another unique
# column gets changes that collide in key order but not in their own
# order; a truly invalid change still fails, and the pipeline resumes once
# it is fixed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('apply_hardening');
$node->init(allows_streaming => 'logical');
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'deduplicate_keep_first'
output_plugin_libraries = 'deduplicate_keep_first'
max_worker_processes = 16
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
});
$node->start;

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

$node->stop;
done_testing();
