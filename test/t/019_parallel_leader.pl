# The leader of a parallel call reads too when a worker leaves it a CPU
# (engine/parallel.c, "Shares" and "Flow"), here with one worker.
#
# Keep-first's leader combines chunks in chunk
# order: waiting for a worker's chunk to end, it claims the chunk after
# it.  A chunk's end that shm_mq had not yet told the leader of (the
# receiver hears of what was sent once a quarter of the queue is written,
# unless the sender flushes) kept it waiting while the worker read on: the
# leader read 2 of 65 chunks of 10M rows, and the call took as long as the
# serial one (3-6 of 65 over the 1M rows here).  Flushed, the leader reads
# a third to a half (a third if the worker reads twice as fast as it): at
# least 10 is asked for, whatever the timing.  1M rows, so that the
# chunks the leader reads before the worker has started are few.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;

my $node = ptf_node('parallel_leader', q{
max_parallel_workers = 4
});

$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE TABLE many AS
    SELECT i AS id, (hashint4(i) & 1023) AS k,
           timestamp '2024-01-01' + ((hashint4(i * 7) & 2147483647) % 86400) * interval '1 second' AS ts
      FROM generate_series(1, 1000000) i;
    VACUUM (FREEZE, ANALYZE) many;
});

my %calls = (
	'keep-first by arrival' =>
	  q{ptf.deduplicate_keep_first(NULL::many, partition_by => '{k}')},
	'keep-first by event time' =>
	  q{ptf.deduplicate_keep_first(NULL::many, partition_by => '{k}', on_time => 'ts')},
);

# The call with one worker (DEBUG1 saying what the leader read), then
# serially: the workers launched, the serial call's rows, those missing and
# extra in the parallel call's, and the leader's "N of M chunks".
sub one_worker
{
	my ($name, $call) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', qq{
        SET min_parallel_table_scan_size = 0;
        SET max_parallel_workers_per_gather = 1;
        SET work_mem = '64MB';
        SET client_min_messages = debug1;
        CREATE TEMP TABLE got AS SELECT * FROM $call;
        RESET client_min_messages;
        SELECT workers_launched FROM ptf.last_call_stats();
        SET max_parallel_workers_per_gather = 0;
        CREATE TEMP TABLE want AS SELECT * FROM $call;
        SELECT (SELECT count(*) FROM want),
               (SELECT count(*) FROM (TABLE want EXCEPT ALL TABLE got) x),
               (SELECT count(*) FROM (TABLE got EXCEPT ALL TABLE want) x);
    });
	is($ret, 0, "$name: the calls ran") or diag($err);
	my ($launched, $diff) = split /\n/, $out;
	my ($want, $missing, $extra) = split /\|/, $diff // '';
	my ($own, $chunks) = $err =~ /parallel leader: (\d+) of (\d+) chunks/;
	diag($err) unless defined $own;
	return ($launched, $want, $missing, $extra, $own, $chunks);
}

for my $name (sort keys %calls)
{
	my ($launched, $want, $missing, $extra, $own, $chunks) = one_worker($name, $calls{$name});
	is($launched, 1, "$name: one worker");
	is("$missing|$extra", "0|0", "$name: the serial call's $want rows");
	ok(defined $own, "$name: the leader says what it read");
	next unless defined $own;
	cmp_ok($chunks, '>=', 32, "$name: $chunks chunks");
	cmp_ok($own, '>=', 10, "$name: the leader read $own of $chunks chunks");
}

# A window_aggregate split by key, one worker: a share of the keys is the
# leader's too (with a worker on every CPU, the leader only emits).  HOP
# 1 h / 15 min over 1024 keys: 96 slices a key, about 5 rows a slice a
# participant, too few for partial states to pay.  Before, the one worker
# held every key, and the call took the serial call's time.
SKIP:
{
	# the CPUs of our affinity mask, which the server inherits
	my $cpus = `env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc` // '';
	chomp $cpus;
	skip "one CPU: the leader leaves it to the worker", 4 if $cpus =~ /^\d+$/ && $cpus < 2;

	$node->safe_psql('postgres', q{
        CREATE TYPE wa_out AS (k int, window_start timestamp, window_end timestamp, n bigint, s bigint);
    });
	my ($launched, $want, $missing, $extra, $own, $shares) = one_worker('HOP by key',
		q{ptf.window_aggregate(NULL::many, NULL::wa_out, 'hop', 'ts', '1 hour', '15 minutes', partition_by => '{k}', aggregates => 'count(*) AS n, sum(id) AS s')});
	is("$launched|$missing|$extra", "1|0|0", "HOP by key, one worker: the serial call's $want rows");
	is($shares, 2, "HOP by key, one worker: a share for the worker and one for the leader");
	cmp_ok($own // 0, '>=', 1, "HOP by key, one worker: the leader read a share");
}

$node->stop;
done_testing();
