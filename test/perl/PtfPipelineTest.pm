# PtfPipelineTest: what the pipeline TAP tests (003, 004, 005, 008, 011, 012)
# share -- finding and killing the pipeline workers, stopping a step at one of its
# fault points, checking that no slot got ahead of its stored position,
# and the schedule of kills every pipeline must survive exactly once.
#
# Fault points: ptf.debug_fault_point makes a step wait at a named point
# and log 'ptf fault point "<point>" reached'.  stop_at_fault resets the
# setting on disk only, so the step stays stopped until it is killed; a
# server started again reads the reset, one restarted after a crash keeps
# the postmaster's settings until reloaded.
package PtfPipelineTest;

use strict;
use warnings;
use IPC::Run;
use Time::HiRes qw(usleep);
use Exporter 'import';
use Test::More;

our @EXPORT = qw(worker_pid kill_worker stop_at_fault slots_not_ahead survive_kills);

# The pipeline workers' pids, of every database: all of them in list
# context, the first in scalar context (a test with one worker).
sub worker_pid
{
    my ($node) = @_;
    $node->poll_query_until('postgres', q{
        SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker'})
      or die 'no pipeline worker';
    my @pids = split /\n/, $node->safe_psql('postgres',
        q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'ptf pipeline worker' ORDER BY pid});
    return wantarray ? @pids : $pids[0];
}

# the whole server restarts after a process with shared memory died
# (until the killed processes are gone: a query that runs before the
# postmaster noticed the death would find the server up).  While it
# restarts, a psql given its query on stdin may give up before reading it,
# and writing to it then kills the test (IPC::Run: "ack Broken pipe", seen
# in 102_citus_moves.pl under load): the query goes on psql's command line.
sub kill_worker
{
    my ($node) = @_;
    my @pids = worker_pid($node);
    kill 'KILL', @pids;
    my $sql = 'SELECT count(*) FROM pg_stat_activity WHERE pid IN (' . join(', ', @pids) . ')';
    for (1 .. 1800)
    {
        my ($out, $err) = ('', '');
        IPC::Run::run([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
            '>', \$out, '2>', \$err);
        chomp $out;
        return if $out eq '0';
        usleep(100_000);
    }
    die 'server did not come back';
}

# write (a code ref) makes the changes whose step is to stop at $point
sub stop_at_fault
{
    my ($node, $point, $write) = @_;
    my $offset = -s $node->logfile;
    $node->safe_psql('postgres', "ALTER SYSTEM SET ptf.debug_fault_point = '$point'");
    $node->reload;
    $write->();
    $node->wait_for_log(qr/ptf fault point "$point" reached/, $offset);
    $node->safe_psql('postgres', 'ALTER SYSTEM RESET ptf.debug_fault_point');
}

# a slot confirmed past the position stored with its uid would lose changes
sub slots_not_ahead
{
    my ($node, $label) = @_;
    is($node->safe_psql('postgres', q{
        SELECT count(*) FROM ptf.state st JOIN pg_replication_slots s USING (slot_name)
         WHERE s.confirmed_flush_lsn > st.lsn}),
        '0', "$label: no slot is ahead of its stored position");
}

# An immediate restart, then a WAL switch: the insert position sits at a
# segment's start until something writes, where a flush up to
# GetXLogInsertRecPtr() fails with "xlog flush request ... is not
# satisfied" -- the bug a shard move in 102_citus_moves.pl met twice (at
# any page boundary, not only after restarts: citus/drain.c's inserted_end
# flushes to the boundary).  Kept so that such positions keep occurring.
sub restart_immediate
{
    my ($node) = @_;
    $node->stop('immediate');
    $node->start;
    $node->safe_psql('postgres', 'SELECT pg_switch_wal()');
}

# The kill schedule every pipeline must survive exactly once: the worker
# killed and the server stopped immediately, between steps, inside a step
# before its commit, and after the commit before the slot moved.  $write
# makes a batch of changes; $check waits for the sinks to catch up and
# compares them with what was written, under the label it is given.
sub survive_kills
{
    my ($node, $write, $check) = @_;

    kill_worker($node);
    $write->();
    $check->('worker killed between steps');

    restart_immediate($node);
    $write->();
    $check->('immediate stop between steps');

    stop_at_fault($node, 'before_commit', $write);
    kill_worker($node);
    $node->reload;
    $check->('worker killed inside a step, before commit');

    stop_at_fault($node, 'before_commit', $write);
    restart_immediate($node);
    $check->('immediate stop inside a step, before commit');

    stop_at_fault($node, 'after_commit', $write);
    kill_worker($node);
    $node->reload;
    $check->('worker killed after commit, before the slot moved');

    stop_at_fault($node, 'after_commit', $write);
    restart_immediate($node);
    $write->();
    $check->('immediate stop after commit, before the slot moved');
}

1;
