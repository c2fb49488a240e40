# bgw_jit.flush_after: after that many writes the worker asks the kernel to
# write them back (sync_file_range), 0 never, -1 as bgwriter_flush_after
# says.  Counted outside the worker: its system calls, traced with strace
# (each page write, pwrite to a relation file, and each writeback request,
# sync_file_range on one), and from 16 pg_stat_io's writebacks of the
# background-worker row.  fsync is on here: with fsync off (the test
# clusters' default) PostgreSQL skips sync_file_range altogether.  The
# pages are dirtied with cleaning off and written by the all-buffers scan
# (jit+all at 100%, the LRU scan off), all in the cycle after cleaning is
# switched on.  The same trace shows the worker giving up its CPU
# (sched_yield) in the middle of those writes, as scan.c does after every
# 100 us of a scan's CPU time.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $node = new_bgw_jit_node('flush_after', <<'EOC');
fsync = on
bgw_jit.enabled = off
bgw_jit.strategy = 'jit+all'
bgw_jit.all_percent = 100
bgw_jit.all_maxpages = 100000
bgw_jit.lru_maxpages = 0
bgw_jit.delay = 100ms
EOC
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION bgw_jit;
	CREATE EXTENSION pg_buffercache;
	CREATE TABLE t (id int, v int, pad text) WITH (fillfactor = 10);
	INSERT INTO t SELECT g, 0, repeat('x', 500) FROM generate_series(1, 300) g;
	CHECKPOINT});
my $pid = wait_for_worker($node);

# strace, if it is installed and may trace the worker (same user, no
# ptrace restriction); else that part is skipped, saying why.
my $strace_ok = grep { -x "$_/strace" } split /:/, $ENV{PATH};
my $why = 'strace not found';

my $io_writes = core_backend_writes_sql($node, only => 'background worker');
my $io_writebacks = $node->pg_version >= 16
  ? q{(SELECT coalesce(sum(writebacks), 0) FROM pg_stat_io
	   WHERE backend_type = 'background worker' AND object = 'relation'
	     AND context = 'normal')}
  : '0';
my $own = '(SELECT buf_clean + buf_all_clean FROM bgw_jit_stats)';

# Dirty every page of t, then let the worker write them with @conf in
# force, tracing it meanwhile.  Returns the page writes and the writeback
# requests strace saw (undef if it could not trace), and pg_stat_io's
# writes and writebacks (16+).
sub write_with
{
	my (@conf) = @_;
	set_conf($node, 'bgw_jit.enabled = off', @conf);
	$node->safe_psql('postgres', 'UPDATE t SET v = v + 1');
	my $dirty = $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_buffercache
		WHERE relfilenode = pg_relation_filenode('t') AND relforknumber = 0
		  AND isdirty});
	# the worker's own report of its I/O reaches pg_stat_io about once a
	# second: wait until it holds all of the worker's writes
	$node->poll_query_until('postgres', "SELECT $io_writes - 0 = $own - 0")
	  if $node->pg_version >= 16;
	my $base = query_hash($node,
		"SELECT $io_writes AS writes, $io_writebacks AS writebacks, $own AS own");

	my ($trace, $h, $err) = (undef, undef, '');
	if ($strace_ok)
	{
		$trace = PostgreSQL::Test::Utils::tempdir() . '/strace.out';
		$h = IPC::Run::start(
			[
				'strace', '-y', '-o', $trace,
				'-e', 'trace=pwrite64,pwritev,pwritev2,sync_file_range,sched_yield',
				'-p', $pid
			],
			'2>', \$err);
		my $deadline = time + 30;
		$h->pump_nb, usleep(50_000)
		  until $err =~ /attached/ || !$h->pumpable || time > $deadline;
		if ($err !~ /attached/)
		{
			$h->kill_kill;
			($strace_ok, $why, $h) = (0, "strace could not attach: $err", undef);
		}
	}

	set_conf($node, 'bgw_jit.enabled = on');
	$node->poll_query_until('postgres', q{
		SELECT count(*) FILTER (WHERE isdirty) = 0 FROM pg_buffercache
		WHERE relfilenode = pg_relation_filenode('t') AND relforknumber = 0})
	  or die 'the worker did not write the pages';
	set_conf($node, 'bgw_jit.enabled = off');

	my %got = (dirty => $dirty);
	if ($h)
	{
		$h->signal('INT');
		$h->finish;
		open(my $fh, '<', $trace) or die "reading $trace: $!";
		my $rel = qr{<[^>]*/(?:base|global)/[^>]*>};
		for (<$fh>)
		{
			if (/^pwrite\w*\(\d+$rel/)
			{
				$got{writes}++;
				# writes made before the first sched_yield
				$got{writes_before_yield}++ unless $got{yields};
			}
			$got{flushes}++ if /^sync_file_range\(\d+$rel/;
			$got{yields}++ if /^sched_yield\(/;
		}
		close $fh;
		$got{$_} //= 0 for qw(writes flushes yields writes_before_yield);
		note("strace: $got{writes} page writes, $got{flushes} sync_file_range");
	}
	if ($node->pg_version >= 16)
	{
		$node->poll_query_until('postgres', "SELECT $io_writes - 0 = $own - 0")
		  or die 'pg_stat_io never caught up with the worker';
		my $now = query_hash($node,
			"SELECT $io_writes AS writes, $io_writebacks AS writebacks");
		$got{io_writes} = $now->{writes} - $base->{writes};
		$got{io_writebacks} = $now->{writebacks} - $base->{writebacks};
		note("pg_stat_io: $got{io_writes} writes, $got{io_writebacks} writebacks");
	}
	return \%got;
}

# Checks for one setting: $expect is 'none' (no writeback requests) or
# 'each' (one per page written: with a limit of 1 page each write is
# handed to the kernel at once, as a request of its own).
sub check
{
	my ($label, $expect, $got) = @_;
	cmp_ok($got->{dirty}, '>=', 300, "$label: $got->{dirty} pages dirtied");
  SKIP:
	{
		skip "$label: $why", 2 unless defined $got->{writes};
		cmp_ok($got->{writes}, '>=', $got->{dirty},
			"$label: the worker wrote them ($got->{writes} pwrite calls)");
		is($got->{flushes}, $expect eq 'each' ? $got->{writes} : 0,
			"$label: sync_file_range calls: "
			  . ($expect eq 'each' ? 'one per page' : 'none'));
	}
  SKIP:
	{
		skip 'pg_stat_io exists from PostgreSQL 16', 2 if $node->pg_version < 16;
		cmp_ok($got->{io_writes}, '>=', $got->{dirty},
			"$label: pg_stat_io counts the worker's $got->{io_writes} writes");
		is($got->{io_writebacks}, $expect eq 'each' ? $got->{io_writes} : 0,
			"$label: and " . ($expect eq 'each' ? 'as many' : 'no') . ' writebacks');
	}
	return;
}

my $default = write_with('bgw_jit.flush_after = 0');
check('flush_after = 0 (the default)', 'none', $default);
SKIP:
{
	skip "sched_yield: $why", 1 unless defined $default->{writes};
	ok( $default->{yields} > 0
		  && $default->{writes_before_yield} < $default->{writes},
		"the worker yielded its CPU between writes ($default->{yields} "
		  . "sched_yield calls, the first after $default->{writes_before_yield} "
		  . "of $default->{writes} writes)");
}
check('flush_after = 1', 'each', write_with('bgw_jit.flush_after = 1'));
check('flush_after = -1, bgwriter_flush_after = 0', 'none',
	write_with('bgw_jit.flush_after = -1', 'bgwriter_flush_after = 0'));
check('flush_after = -1, bgwriter_flush_after = 8kB', 'each',
	write_with('bgw_jit.flush_after = -1', "bgwriter_flush_after = '8kB'"));

# A larger limit batches the requests: fewer calls than pages, but some
# (neighbouring pages of a batch go to the kernel as one range).
my $got = write_with('bgw_jit.flush_after = 32');
SKIP:
{
	skip "flush_after = 32: $why", 1 unless defined $got->{writes};
	ok($got->{flushes} > 0 && $got->{flushes} < $got->{writes},
		"flush_after = 32: $got->{flushes} sync_file_range calls for $got->{writes} pages");
}
SKIP:
{
	skip 'pg_stat_io exists from PostgreSQL 16', 1 if $node->pg_version < 16;
	ok( $got->{io_writebacks} <= $got->{io_writes}
		  && $got->{io_writebacks} > $got->{io_writes} - 32,
		"flush_after = 32: $got->{io_writebacks} writebacks of $got->{io_writes} "
		  . 'writes (at most 31 still pending)');
}

is(worker_pid($node), $pid, 'the same worker ran throughout');
$node->stop;
done_testing();
