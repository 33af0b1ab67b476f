# PtfCitusCluster: a local Citus cluster for the distributed TAP tests (1xx_citus_*):
# a coordinator and workers, three PostgreSQL instances of PostgreSQL::Test::Cluster on
# 127.0.0.1, each with Citus and deduplicate_keep_first preloaded (Citus first: it must
# be), wal_level = logical, and both (with pgoutput, which Citus's logical moves use)
# in output_plugin_libraries.
#
# Citus (AGPL-3.0) is a test-time dependency only: test/run builds it from the vendored
# source (../shared/vendor/citus/build.sh) when it is not installed for the PostgreSQL
# in use; where neither is there the tests skip, saying why (skip_reason).
#
#   my $c = PtfCitusCluster->new('moves', workers => 2, conf => "ptf.pipeline_idle_time = 50ms\n");
#   $c->coord->safe_psql('postgres', ...);  $c->worker(0);  $c->nodes;
#   $c->sql_all(...);  $c->wait_for(sub { ... });  $c->shard_node($shardid);
package PtfCitusCluster;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Why the distributed tests cannot run here, or undef when they can.
sub skip_reason
{
	my $pg_config = $ENV{PG_CONFIG} || 'pg_config';
	my $libdir = `$pg_config --pkglibdir 2>/dev/null`;
	my $sharedir = `$pg_config --sharedir 2>/dev/null`;
	chomp($libdir, $sharedir);
	return "pg_config not found" unless $libdir;
	return "Citus is not installed for this PostgreSQL ($libdir/citus.so missing); "
	  . "test/run builds it from ../shared/vendor/citus when that folder is there"
	  unless -f "$libdir/citus.so" && -f "$sharedir/extension/citus.control";
	return undef;
}

sub new
{
	my ($class, $name, %opts) = @_;
	my $workers = $opts{workers} // 2;
	my $self = bless { nodes => [] }, $class;

	for my $i (0 .. $workers)
	{
		my $node = PostgreSQL::Test::Cluster->new($i == 0 ? "${name}_coord" : "${name}_w$i");
		$node->init(allows_streaming => 'logical');
		$node->append_conf('postgresql.conf', qq{
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'citus,deduplicate_keep_first'
output_plugin_libraries = 'pgoutput,deduplicate_keep_first,citus'
max_replication_slots = 32
max_wal_senders = 32
max_worker_processes = 32
max_prepared_transactions = 100
max_connections = 100
restart_after_crash = on
autovacuum_naptime = 1d
fsync = off
citus.defer_shard_delete_interval = 1000
citus.background_task_queue_interval = 500
citus.max_background_task_executors_per_node = 2
citus.recover_2pc_interval = 1000
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.citus_pending_timeout = 5s
} . ($opts{conf} // ''));
		$node->append_conf('pg_hba.conf', "host all all 127.0.0.1/32 trust\n");
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION citus');
		push @{ $self->{nodes} }, $node;
	}
	my $coord = $self->coord;
	$coord->safe_psql('postgres', "SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
	$coord->safe_psql('postgres', "SELECT citus_add_node('127.0.0.1', " . $_->port . ")")
	  for $self->workers;
	$coord->safe_psql('postgres', 'CREATE EXTENSION deduplicate_keep_first');
	return $self;
}

sub coord { return $_[0]{nodes}[0]; }
sub worker { my ($self, $i) = @_; return $self->{nodes}[ $i + 1 ]; }
sub workers { my ($self) = @_; my @n = @{ $self->{nodes} }; return @n[ 1 .. $#n ]; }
sub nodes { return @{ $_[0]{nodes} }; }

# the node (a PostgreSQL::Test::Cluster) whose port Citus places the shard on
sub shard_node
{
	my ($self, $shard) = @_;
	my $port = $self->coord->safe_psql('postgres',
		"SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $shard");
	for my $n ($self->nodes) { return $n if $n->port == $port; }
	die "no node has shard $shard";
}

# the same SQL on every node; the answers, in node order
sub sql_all
{
	my ($self, $sql) = @_;
	return map { $_->safe_psql('postgres', $sql) } $self->nodes;
}

# poll $check (a code ref returning true when done) for up to $timeout seconds
sub wait_for
{
	my ($self, $check, $what, $timeout) = @_;
	$timeout //= $PostgreSQL::Test::Utils::timeout_default;
	my $until = time + $timeout;
	while (time < $until)
	{
		return 1 if $check->();
		select(undef, undef, undef, 0.1);
	}
	diag("timed out waiting for $what");
	return 0;
}

# every distributed pipeline's shard groups read all there was, on every node
sub wait_caught_up
{
	my ($self, $what) = @_;
	return $self->wait_for(sub {
		my @pending = $self->sql_all(q{
			SELECT count(*) FROM ptf.pipeline_status WHERE pending_bytes > 0 OR state <> 'running'});
		!grep { $_ ne '0' } @pending;
	}, $what // 'the pipelines to catch up');
}

# no slot, origin, pipeline or state of ours is left on any node
sub nothing_left
{
	my ($self) = @_;
	my @left = $self->sql_all(q{
		SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'ptf\_%')
		     + (SELECT count(*) FROM pg_replication_origin WHERE roname LIKE 'ptf\_%')
		     + (SELECT count(*) FROM ptf.pipeline_registry)
		     + (SELECT count(*) FROM ptf.uid_registry)
		     + (SELECT count(*) FROM ptf.citus_shard_pipelines)});
	return !grep { $_ ne '0' } @left;
}

1;
