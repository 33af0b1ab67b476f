# PtfNode: the one way the TAP tests make a server with the extension --
# preloaded (pipelines need its shared memory and workers), logical
# decoding on and our output plugin allowed (PostgreSQL 15.20 as packaged
# by Debian asks for output_plugin_libraries), room for pipeline workers,
# and restart_after_crash on, which PostgreSQL::Test::Cluster turns off
# and the kill schedules need.  A test adds its own settings.
package PtfNode;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(ptf_node);

# ptf_node(name, [extra postgresql.conf lines], [install_path => dir],
#          [start => 0]): the node, started unless start => 0
sub ptf_node
{
	my ($name, $conf, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $opts{install_path} ? (install_path => $opts{install_path}) : ());
	$node->init(allows_streaming => 'logical');
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'deduplicate_keep_first'
output_plugin_libraries = 'deduplicate_keep_first'
restart_after_crash = on
max_worker_processes = 16
} . ($conf // ''));
	$node->start unless defined $opts{start} && !$opts{start};
	return $node;
}

1;
