# Pipelines across DDL on their sources.  Renames: a pipeline's query
# follows its source table renamed, moved to another schema, its schema
# renamed, and a column it picks renamed, as its sink follows renames --
# no step fails, no row is lost or doubled.  Columns dropped and added: the
# operator a worker keeps between steps is not used for rows of another
# layout (a row image of the new layout in a slot of the old type was an
# internal error at the next TRUNCATE).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('pipeline_ddl', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
});

$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE SCHEMA s1;
    CREATE SCHEMA s2;
    CREATE TABLE s1.src (id int PRIMARY KEY, v text);
    CREATE TABLE copied (id int, v text);
    SELECT ptf.create_pipeline('copy', $q$SELECT (data).id, (data).v FROM ptf.to_changelog(NULL::s1.src,
        changes => true, uid => 'copy') WHERE (data).id > 0$q$, 'copied');
});

my $next = 0;

sub write_rows
{
    my ($table, $n) = @_;
    my $from = $next + 1;
    $next += $n;
    $node->safe_psql('postgres', qq{INSERT INTO $table SELECT g, 'row ' || g FROM generate_series($from, $next) g});
}

sub sink_has_all
{
    my ($label) = @_;
    ok($node->poll_query_until('postgres',
        qq{SELECT count(*) = $next AND count(DISTINCT id) = $next AND max(id) = $next FROM copied}),
        "$label: the sink holds every row once");
    is($node->safe_psql('postgres', q{SELECT state, failures FROM ptf.pipeline_status WHERE name = 'copy'}),
        'running|0', "$label: no step failed");
}

sub query_names
{
    my ($what, $label) = @_;
    like($node->safe_psql('postgres', q{SELECT query FROM ptf.pipelines WHERE name = 'copy'}),
        $what, "$label: the stored query names it");
}

write_rows('s1.src', 10);
sink_has_all('before');

$node->safe_psql('postgres', q{ALTER TABLE s1.src RENAME TO renamed});
write_rows('s1.renamed', 10);
sink_has_all('table renamed');
query_names(qr/NULL::s1\.renamed/, 'table renamed');

$node->safe_psql('postgres', q{ALTER TABLE s1.renamed SET SCHEMA s2});
write_rows('s2.renamed', 10);
sink_has_all('table moved to another schema');

$node->safe_psql('postgres', q{ALTER SCHEMA s2 RENAME TO s3});
write_rows('s3.renamed', 10);
sink_has_all('its schema renamed');
query_names(qr/NULL::s3\.renamed/, 'its schema renamed');

$node->safe_psql('postgres', q{ALTER TABLE s3.renamed RENAME COLUMN v TO w});
write_rows('s3.renamed', 10);
sink_has_all('a column it picks renamed');
query_names(qr/\(data\)\.w/, 'a column it picks renamed');

# a rename rolled back leaves the query as it was
$node->safe_psql('postgres', q{BEGIN; ALTER TABLE s3.renamed RENAME TO gone; ROLLBACK});
query_names(qr/NULL::s3\.renamed/, 'a rename rolled back');
write_rows('s3.renamed', 10);
sink_has_all('after a rename rolled back');

$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('copy')});

# ---- a column dropped and added again, then TRUNCATE, under a to_changelog
# pipeline keeping an image per key: the worker's kept operator was built
# for the old row type
$node->safe_psql('postgres', q{
    CREATE TABLE t (id int PRIMARY KEY, a text, b text);
    CREATE TABLE changes (op text, id int, a text, b text);
    SELECT ptf.create_pipeline('log', $q$SELECT op, (data).id, (data).a, (data).b
        FROM ptf.to_changelog(NULL::t, changes => true, uid => 'log')$q$, 'changes');
    INSERT INTO t VALUES (1, 'x', 'y'), (2, 'z', 'w');
});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM changes}), 'the first rows are read');
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
    BEGIN;
    ALTER TABLE t DROP COLUMN b;
    ALTER TABLE t ADD COLUMN b text;
    INSERT INTO t VALUES (5, 'n', 'o');
    COMMIT;
    TRUNCATE t;
    INSERT INTO t VALUES (3, 'q', 'r');
});
my $expected = q{VALUES ('INSERT', 1, 'x', 'y'), ('INSERT', 2, 'z', 'w'), ('INSERT', 5, 'n', 'o'),
    ('DELETE', 1, 'x', NULL), ('DELETE', 2, 'z', NULL), ('DELETE', 5, 'n', 'o'),
    ('TRUNCATE', NULL, NULL, NULL), ('INSERT', 3, 'q', 'r')};
ok($node->poll_query_until('postgres', qq{
    SELECT count(*) FROM (($expected EXCEPT ALL TABLE changes) UNION ALL
                          (TABLE changes EXCEPT ALL $expected)) d}, '0'),
    'every change once, deletes of the truncation with the rows as kept');
unlike(substr(slurp_file($node->logfile), $offset), qr/pipeline "log" failed/,
    'no step failed');
$node->safe_psql('postgres', q{SELECT ptf.drop_pipeline('log')});
$node->stop;
done_testing();
