# A parallel one-shot call over a table larger than a quarter of
# shared_buffers reads it as the serial call's sequential scan does:
# through a small ring of buffers per participant, not through the whole
# buffer pool (engine/parallel.c, "Shares").  From a cold pool (a restart),
# each way of splitting a call -- keep-first's ordered chunks, the window
# aggregate's partial states, the temporal join's split probes and a HOP
# window of many slices (by key) -- leaves at most a few rings' worth of the table's blocks
# in shared buffers, where reading every chunk into the pool left the whole
# table there, and gives the serial call's answer.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;

my $node = ptf_node('parallel_buffers', q{
shared_buffers = 16MB
max_parallel_workers = 4
});

# 150k rows, about 12 MB: over a quarter of 16 MB, under all of it; frozen,
# so that reading sets no hint bits (a dirty ring buffer may be passed over)
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE EXTENSION pg_buffercache;
    CREATE TABLE big AS
    SELECT i AS id, (hashint4(i) & 1023) AS k,
           timestamp '2024-01-01' + ((hashint4(i * 7) & 2147483647) % 86400) * interval '1 second' AS ts,
           (i % 1000) / 10.0 AS v, repeat('x', 40) AS pad
      FROM generate_series(1, 150000) i;
    CREATE TABLE versions AS
    SELECT DISTINCT ON (k, ts) k, ts, i AS rate
      FROM (SELECT (hashint4(i) & 1023) AS k,
                   timestamp '2024-01-01' + ((hashint4(i * 3) & 2147483647) % 86400) * interval '1 second' AS ts, i
              FROM generate_series(1, 5000) i) g
     ORDER BY k, ts;
    CREATE TYPE wa_out AS (k int, window_start timestamp, window_end timestamp, n bigint, s numeric);
    -- without keys: 25 slices of about 6k rows, partial states pay
    CREATE TYPE wa_tot AS (window_start timestamp, window_end timestamp, n bigint, s numeric);
    VACUUM (FREEZE, ANALYZE) big, versions;
});

my $blocks = $node->safe_psql('postgres', q{SELECT pg_relation_size('big') / 8192});
my $ring_from = $node->safe_psql('postgres',
	q{SELECT setting::int / 4 FROM pg_settings WHERE name = 'shared_buffers'});
cmp_ok($blocks, '>', $ring_from, "the table ($blocks blocks) is over a quarter of shared_buffers");

my %calls = (
	'keep-first by arrival' =>
	  q{ptf.deduplicate_keep_first(NULL::big, partition_by => '{k}')},
	'keep-first by event time' =>
	  q{ptf.deduplicate_keep_first(NULL::big, partition_by => '{k}', on_time => 'ts')},
	'TUMBLE, partial states' =>
	  q{ptf.window_aggregate(NULL::big, NULL::wa_tot, 'tumble', 'ts', '1 hour', aggregates => 'count(*) AS n, sum(v) AS s')},
	'HOP, 96 slices a key' =>
	  q{ptf.window_aggregate(NULL::big, NULL::wa_out, 'hop', 'ts', '1 hour', '15 minutes', partition_by => '{k}', aggregates => 'count(*) AS n, sum(v) AS s')},
	'temporal join, split probes' =>
	  q{ptf.temporal_join(NULL::big, NULL::versions, 'ts', 'ts', '{k}')},
);

for my $name (sort keys %calls)
{
	my $call = $calls{$name};

	# a cold pool: nothing of the table in shared buffers
	$node->restart;
	my ($launched, $held, $cached) = split /\|/, $node->safe_psql('postgres', qq{
        SET min_parallel_table_scan_size = 0;
        SET max_parallel_workers_per_gather = 2;
        SET work_mem = '64MB';
        CREATE TEMP TABLE got AS SELECT * FROM $call;
        SELECT (SELECT workers_launched FROM ptf.last_call_stats()),
               (SELECT count(*) FROM pg_buffercache
                 WHERE relfilenode = pg_relation_filenode('big')
                   AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())),
               (SELECT count(*) FROM got);
    });
	cmp_ok($launched, '>=', 1, "$name: parallel workers ran");
	# three participants' rings of 32 buffers, and a little slack; by key
	# every worker reads every block at once with the others, and a ring
	# buffer another worker has just used is not reused (its usage count),
	# so those rings grow with the timing -- still far from the table
	my $bound = $name =~ /^HOP/ ? int($blocks / 4) : 128;
	cmp_ok($held, '<=', $bound, "$name: $held of $blocks blocks left in shared buffers");

	my $diff = $node->safe_psql('postgres', qq{
        SET min_parallel_table_scan_size = 0;
        SET max_parallel_workers_per_gather = 2;
        SET work_mem = '64MB';
        CREATE TEMP TABLE got AS SELECT * FROM $call;
        SET max_parallel_workers_per_gather = 0;
        CREATE TEMP TABLE want AS SELECT * FROM $call;
        SELECT (SELECT count(*) FROM want),
               (SELECT count(*) FROM (TABLE want EXCEPT ALL TABLE got) x),
               (SELECT count(*) FROM (TABLE got EXCEPT ALL TABLE want) x);
    });
	my ($want, $missing, $extra) = split /\|/, $diff;
	is("$cached|$missing|$extra", "$want|0|0", "$name: the serial call's $want rows");
}

$node->stop;
done_testing();
