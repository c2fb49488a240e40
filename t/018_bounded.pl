# Bounded work (issue "production scale"): what a busy period left dirty
# is written over many cycles at the idle pace, not in one burst (the
# cycles and their writes counted with strace), and the pool still ends
# clean; a cached read-only load that allocates nothing
# wakes the worker far less often than once per statement (counted by
# the kernel: voluntary context switches, against pgbench's count of
# statements); lap and jit+all stay within max_write_rate (their writes
# and times traced with strace).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Temp ();
use POSIX ();
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
my $node = start_bgw_jit_node(
	'bounded',
	scale => $scale,
	# (no writer processes: the rate bound below is on the cleaner's trace)
	conf => "bgw_jit.lru_maxpages = 0\nbgw_jit.max_writers = 0\n",
	extensions => ['pg_buffercache']);
my $pid = wait_for_worker($node);
ok($pid, "worker running (pid $pid)");

# --- an idle pass over a dirty pool is spread over many cycles ---
# Backends leave dirty, unused buffers behind while the worker does not
# write (lru_maxpages = 0); the worker then sees no movement at all.
update_load($node, clients => 2, seconds => 3, scale => $scale);
my $dirty_sql = 'SELECT count(*) FROM pg_buffercache
	WHERE isdirty AND usagecount = 0 AND pinning_backends = 0';
my $planted = $node->safe_psql('postgres', $dirty_sql);
cmp_ok($planted, '>', 200, "the load left $planted dirty unused buffers");
# Let the hand's measured speed decay, so that the pace is the lap's.
ok( $node->poll_query_until(
		'postgres', 'SELECT hand_rate < 20 FROM bgw_jit_stats'),
	'the worker saw the hand stop');
my $hib0 = $node->safe_psql('postgres', 'SELECT hibernations FROM bgw_jit_stats');
my $wchar0 = worker_io($node)->{wchar};
# The cleaner's cycles as the kernel sees them: each ends in a sleep,
# an epoll wait of more than the 1 ms a cycle's time slices sleep between
# them; its page writes in between are the cycle's.
my ($trace, $strace_why) = start_strace($pid,
	'epoll_wait,epoll_pwait,pwrite64,pwritev,pwritev2');
# 2048 buffers a lap per 10 s: about 41 writes a 200 ms cycle.
set_conf($node, "bgw_jit.lru_maxpages = -1\nbgw_jit.scan_whole_pool_seconds = 10");
ok($node->poll_query_until('postgres', $dirty_sql, '0'),
	'the pool ends with no dirty unused buffer');
my $written_kernel = int((worker_io($node)->{wchar} - $wchar0) / 8192);
note("idle pass: the kernel saw the cleaner and its writers write $written_kernel pages");
cmp_ok($written_kernel, '>=', $planted * 0.9,
	'the kernel saw the cleaner and its writers write them');
SKIP:
{
	skip "the cycles are counted with strace: $strace_why", 2 unless $trace;
	$trace->stop;
	my @writing = strace_cycle_pages($trace, $pid);
	my ($largest) = sort { $b <=> $a } @writing, 0;
	note('strace: the cleaner wrote in ' . scalar(@writing)
		  . " cycles, at most $largest pages in one");
	cmp_ok(scalar(@writing), '>=', 5, 'over at least five cycles');
	cmp_ok($largest, '<', $planted / 3, 'none of which wrote a third of them');
}
is($node->safe_psql('postgres', 'SELECT hibernations FROM bgw_jit_stats'),
	$hib0, 'and the worker did not hibernate before the pass was done');

# --- a cached read-only load wakes it a few times a second ---
set_conf($node, 'bgw_jit.scan_whole_pool_seconds = 120');
$node->safe_psql('postgres', 'SELECT count(*) FROM pgbench_tellers');
ok( $node->poll_query_until(
		'postgres', 'SELECT sleep_ms IS NULL FROM bgw_jit_stats'),
	'the idle worker hibernates');
# (pgbench_accounts does not fit in the 16 MB pool: read the tellers.)
my $script = File::Temp->new(SUFFIX => '.sql');
print $script "\\set tid random(1, 10 * :scale)\n"
  . "SELECT tbalance FROM pgbench_tellers WHERE tid = :tid;\n";
close $script;
chmod 0644, $script->filename;
my $seconds = 5;
my $switches0 = voluntary_switches($pid);
my $t0 = time;
my ($out, $err);
IPC::Run::run(
	[
		'pgbench', '-n', '-f', $script->filename, '-s', $scale,
		'-c', 2, '-j', 2, '-T', $seconds,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err) or die "pgbench: $err";
my $elapsed = time - $t0;
my $switches = voluntary_switches($pid) - $switches0;
my ($statements) = $out =~ /number of transactions actually processed: (\d+)/;
note(sprintf('select-only: %d statements, worker %d sleeps in %.1f s (%.1f/s)',
		$statements, $switches, $elapsed, $switches / $elapsed));
# (how many wake-ups a second is the worker's pace, which no test bounds
# by the clock: what it must not do is wake once per statement)
cmp_ok($statements, '>', 20 * $switches,
	"far fewer wake-ups than statements ($switches for $statements)");

# --- lap and jit+all stay within max_write_rate ---
# 1 MB/s is 128 pages/s, the bucket one second: from a sleep of the
# cleaner to its last write after it, strace sees at most 128 + 128/s *
# the seconds between them.  (The node runs no writer processes.)
for my $strategy ('lap', 'jit+all')
{
	set_conf($node, <<"EOC");
bgw_jit.strategy = '$strategy'
bgw_jit.lru_percent = 100
bgw_jit.all_percent = 100
bgw_jit.all_maxpages = 100000
bgw_jit.max_write_rate = 1
EOC
	my $h0 = $node->safe_psql('postgres', 'SELECT coalesce(max(cycle), 0) FROM bgw_jit_history');
	my ($trace, $why) = start_strace($pid,
		'epoll_wait,epoll_pwait,pwrite64,pwritev,pwritev2');
	update_load($node, clients => 2, seconds => 4, scale => $scale);
	SKIP:
	{
		skip "the writes are counted with strace: $why", 2 unless $trace;
		$trace->stop;
		my ($pages, $span) = strace_rate_span($trace, $pid);
		my $capped = $node->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE hit_maxpages) FROM bgw_jit_history WHERE cycle > $h0");
		my $limit = 128 + 128 * $span;
		cmp_ok($pages, '<=', $limit,
			sprintf('%s at 1 MB/s: %d pages in %.2f s, by strace (limit %.1f)',
				$strategy, $pages, $span, $limit));
		# (the bound is only a bound if the load asked for more)
		cmp_ok($capped, '>', 0, "$strategy: the budget stopped $capped scans");
	}
}

# --- cpu_us is the cycles' CPU time ---
# Summed over the cycles of a loaded stretch, the history's cpu_us is no
# more than the CPU time the kernel charged the worker over it (plus a
# cycle's worth at each end and a clock tick) and most of it: cycles are
# what the worker spends its CPU on under load.
set_conf($node, <<'EOC');
bgw_jit.strategy = 'jit'
bgw_jit.max_write_rate = 0
EOC
my $ticks = POSIX::sysconf(POSIX::_SC_CLK_TCK());
sub cpu_ms
{
	open(my $fh, '<', "/proc/$pid/stat") or die "/proc/$pid/stat: $!";
	my @f = split ' ', (split /\) /, <$fh>)[1];
	close $fh;
	# utime and stime, fields 14 and 15 of stat (12 and 13 after "comm) ")
	return ($f[11] + $f[12]) * 1000 / $ticks;
}
my $c0 = $node->safe_psql('postgres', 'SELECT coalesce(max(cycle), 0) FROM bgw_jit_history');
my $k0 = cpu_ms();
update_load($node, clients => 2, seconds => 4, scale => $scale);
my $k1 = cpu_ms();
my $c1 = $node->safe_psql('postgres', 'SELECT coalesce(max(cycle), 0) FROM bgw_jit_history');
my $cycles_cpu = $node->safe_psql('postgres', qq{
	SELECT coalesce(sum(cpu_us), 0) / 1000.0, coalesce(max(cpu_us), 0) / 1000.0
	FROM bgw_jit_history WHERE cycle > $c0 AND cycle <= $c1});
my ($sum_ms, $max_ms) = split /\|/, $cycles_cpu;
note(sprintf('cycles %d..%d: cpu_us sums to %.1f ms, the kernel charged %.1f ms',
		$c0 + 1, $c1, $sum_ms, $k1 - $k0));
cmp_ok($k1 - $k0, '>', 0, 'the kernel charged the worker CPU time under load');
cmp_ok($sum_ms, '<=', $k1 - $k0 + 2 * $max_ms + 1000 / $ticks,
	"the cycles' cpu_us ($sum_ms ms) is no more than the kernel's count");
cmp_ok($sum_ms, '>=', 0.5 * ($k1 - $k0),
	'and at least half of it');

$node->stop;
done_testing();
