# The WAL flusher (flusher.c): the cleaner puts off a page whose WAL is
# not flushed yet, the 'bgw_jit wal flusher' worker flushes that WAL, and
# the cleaner writes the page at a later cycle; without a flusher (no
# worker slot left for it) the cleaner flushes for itself.  Counted
# outside bgw_jit: the system calls of both processes, traced with
# strace -y (a WAL write or fsync names a file under pg_wal, a page write
# one under base/), and the buffers left dirty (pg_buffercache).  fsync is
# on, commits are asynchronous and the WAL writer flushes only every 10 s,
# so that the WAL of most pages the cleaner meets under the update load is
# not flushed yet.  An ERROR in the flusher (test builds:
# bgw_jit.inject_error = flush) is logged and the same process carries on
# (1.3 exited, to be restarted 5 s later).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

plan skip_all => 'strace not found'
  unless grep { -x "$_/strace" } split /:/, $ENV{PATH};

my $node = start_bgw_jit_node('wal_flusher', scale => 10,
	extensions => ['pg_buffercache'], conf => <<'EOC');
fsync = on
wal_writer_delay = 10s
wal_writer_flush_after = 1GB
EOC

sub flusher_pid
{
	return postmaster_child_pid($node, qr/^bgw_jit wal flusher/);
}

sub wait_for_flusher
{
	my ($old) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		my $pid = flusher_pid();
		return $pid if $pid && (!defined $old || $pid != $old);
		usleep(100_000);
	}
	return undef;
}

# Run the update load while tracing the processes @pids, and count per
# process its page writes and its WAL writes and fsyncs; also the growth
# of bgw_jit_stats.buf_wal_deferred (the cleaner's own count).
sub load_traced
{
	my (@pids) = @_;
	my $deferred0 = $node->safe_psql('postgres',
		'SELECT buf_wal_deferred FROM bgw_jit_stats');
	my $cycle0 = $node->safe_psql('postgres',
		'SELECT coalesce(max(cycle), 0) FROM bgw_jit_history');
	my $trace = PostgreSQL::Test::Utils::tempdir() . '/strace.out';
	my $err = '';
	my $h = IPC::Run::start(
		[
			'strace', '-y', '-o', $trace,
			'-e', 'trace=pwrite64,pwritev,pwritev2,write,fsync,fdatasync',
			map { ('-p', $_) } @pids
		],
		'2>', \$err);
	my $deadline = time + 30;
	my $attached = 0;
	until ($attached == @pids || !$h->pumpable || time > $deadline)
	{
		$h->pump_nb;
		$attached = () = $err =~ /attached/g;
		usleep(50_000);
	}
	die "strace could not attach: $err" unless $attached == @pids;
	update_load($node, clients => 2, seconds => 5, scale => 10);
	$h->signal('INT');
	$h->finish;

	my %got;
	$got{deferred} = $node->safe_psql('postgres',
		'SELECT buf_wal_deferred FROM bgw_jit_stats') - $deferred0;
	# the history's per-cycle column over the load's cycles, and whether
	# the ring still holds all of them
	($got{history_deferred}, $got{history_whole}) = split /\|/,
	  $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(wal_deferred), 0), min(cycle) = $cycle0 + 1
		FROM bgw_jit_history WHERE cycle > $cycle0});
	open(my $fh, '<', $trace) or die "reading $trace: $!";
	for (<$fh>)
	{
		# with more than one process traced, each line starts with its pid
		my $pid = s/^(\d+)\s+// ? $1 : $pids[0];
		$got{$pid}{page_writes}++ if m{^pwrite\w*\(\d+<[^>]*/base/};
		$got{$pid}{wal_writes}++ if m{^(?:pwrite\w*|write)\(\d+<[^>]*/pg_wal/};
		$got{$pid}{wal_syncs}++ if m{^f(?:data)?sync\(\d+<[^>]*/pg_wal/};
	}
	close $fh;
	for my $pid (@pids)
	{
		$got{$pid}{$_} //= 0 for qw(page_writes wal_writes wal_syncs);
		note("strace, process $pid: $got{$pid}{page_writes} page writes, "
			  . "$got{$pid}{wal_writes} WAL writes, $got{$pid}{wal_syncs} WAL fsyncs");
	}
	note("buf_wal_deferred rose by $got{deferred}, bgw_jit_history.wal_deferred "
		  . "sums to $got{history_deferred} over the load's cycles");
	return \%got;
}

# --- with the flusher ---
my $cleaner = wait_for_worker($node);
my $flusher = wait_for_flusher();
ok($cleaner && $flusher, 'the cleaner and the WAL flusher run')
  or BAIL_OUT('no bgw_jit worker');

my $got = load_traced($cleaner, $flusher);
cmp_ok($got->{$cleaner}{page_writes}, '>', 0, 'the cleaner wrote pages');
cmp_ok($got->{$flusher}{wal_syncs}, '>=', 1, 'the flusher fsynced the WAL');
is($got->{$cleaner}{wal_syncs} + $got->{$cleaner}{wal_writes},
	0, 'the cleaner neither wrote nor fsynced WAL');
# (that pages were put off is shown by the kernel: the same load makes
# the cleaner flush WAL for itself when no flusher runs, below; what
# follows is only the worker's own count of them)
cmp_ok($got->{deferred}, '>', 0,
	'bgw_jit_stats.buf_wal_deferred reports pages put off (its own count)');
cmp_ok($got->{history_deferred}, '>', 0,
	'bgw_jit_history.wal_deferred shows them in the cycles that put them off');
SKIP:
{
	skip 'the history ring no longer holds all of the load\'s cycles', 1
	  unless $got->{history_whole} eq 't';
	is($got->{history_deferred}, $got->{deferred},
		'the history\'s wal_deferred sums to buf_wal_deferred\'s rise');
}

# --- a SIGTERM: the flusher comes back, the cleaner stays ---
kill 'TERM', $flusher;
ok(wait_for_exit($flusher), 'the flusher exits on SIGTERM');
my $flusher2 = wait_for_flusher($flusher);
ok($flusher2, 'and is started again');
is(worker_pid($node), $cleaner, 'the cleaner kept running');
like(slurp_file($node->logfile),
	qr/background worker "bgw_jit wal flusher" \(PID $flusher\) exited with exit code 1/,
	'it exited with code 1, which asks the postmaster for the restart');

# --- an ERROR in the flusher (test builds): logged, and it carries on ---
SKIP:
{
	skip 'build without FAULT_INJECTION=1', 5
	  unless has_fault_injection($node);
	my $offset = -s $node->logfile;
	set_conf($node, 'bgw_jit.inject_error = flush');
	update_load($node, clients => 2, seconds => 3, scale => 10);
	ok( $node->wait_for_log(qr/ERROR:  injected error flushing WAL up to/,
			$offset),
		'the flusher raised the injected error');
	is(flusher_pid(), $flusher2, 'the flusher is still the same process');
	unlike(
		slurp_file($node->logfile, $offset),
		qr/background worker "bgw_jit wal flusher" \(PID \d+\) exited/,
		'the postmaster saw no flusher exit');
	set_conf($node, 'bgw_jit.inject_error = off');
	is(worker_pid($node), $cleaner, 'the cleaner kept running');
}

# --- without a flusher: no worker slot left for it ---
# (the logical replication launcher would take a slot first)
$node->append_conf('postgresql.conf',
	"max_worker_processes = 1\nmax_logical_replication_workers = 0");
$node->restart;
$cleaner = wait_for_worker($node);
ok($cleaner, 'the cleaner runs in the only worker slot');
# (the flusher, registered after it, was refused its slot at start)
like(slurp_file($node->logfile), qr/too many background workers/,
	'the flusher found no slot');
is(flusher_pid(), '', 'no flusher runs');

$got = load_traced($cleaner);
cmp_ok($got->{$cleaner}{page_writes}, '>', 0,
	'without it the cleaner still writes pages');
cmp_ok($got->{$cleaner}{wal_syncs}, '>=', 1,
	'flushing the WAL for itself first');
is($got->{deferred}, 0, 'and reports nothing put off (its own count)');
is($got->{history_deferred}, 0,
	'bgw_jit_history.wal_deferred is 0 in every cycle of the load');

check_integrity($node, 'after the loads');
$node->stop;
done_testing();
