# Soak: mixed pgbench load with checkpoints every 30 s while the settings
# change by reload every ten cycles of the worker.  No warning or error
# from the worker, its private memory stays flat, counters never go
# backwards, data verifies.
#
# BGW_JIT_SOAK_SECONDS sets the length (default 45, as in CI: a timed
# checkpoint and 30 s of memory after an 8 s warm-up; the full soak
# documented in doc/tests.md is 600).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $seconds = $ENV{BGW_JIT_SOAK_SECONDS} // 45;
my $scale = 10;
my $node = start_bgw_jit_node(
	'soak',
	scale => $scale,
	conf => "checkpoint_timeout = 30s\nmax_wal_size = 256MB\n");
my $worker = worker_pid($node);
my $offset = -s $node->logfile;

sub memory_kb
{
	my %kb;
	open(my $fh, '<', "/proc/$worker/status") or return \%kb;
	while (<$fh>)
	{
		$kb{$1} = $2 if /^(VmRSS|RssAnon):\s+(\d+) kB/;
	}
	return \%kb;
}

my @counters = qw(cycles buf_clean buf_all_clean buf_clean_evicted
  buf_clean_redirtied buf_alloc buffers_scanned
  maxwritten_clean laps hibernations);
my $counter_sql = 'SELECT ' . join(', ', @counters) . ' FROM bgw_jit_stats';

# Settings to cycle through, one change after every 10 cycles of the
# worker under the one before.
my @changes = (
	"bgw_jit.strategy = 'lap'", 'bgw_jit.lru_multiplier = 1.0',
	'bgw_jit.delay = 10ms', "bgw_jit.strategy = 'jit+all'",
	'bgw_jit.lru_maxpages = 1000', 'bgw_jit.enabled = off',
	'bgw_jit.lru_multiplier = 8.0', 'bgw_jit.enabled = on',
	"bgw_jit.strategy = 'jit'", 'bgw_jit.all_maxpages = 100',
	'bgw_jit.smoothing_samples = 1', 'bgw_jit.delay = 200ms',
	'bgw_jit.lru_maxpages = 50', 'bgw_jit.smoothing_samples = 320',
	'bgw_jit.lru_multiplier = 2.0', 'bgw_jit.delay = 50ms',
	'bgw_jit.scan_whole_pool_seconds = 5',
	'bgw_jit.scan_whole_pool_seconds = 120',
	'bgw_jit.lru_maxpages = 1000', 'bgw_jit.smoothing_samples = 16');

my @conn = ('-h', $node->host, '-p', $node->port, 'postgres');
my ($out1, $err1, $out2, $err2);
my $tpcb = IPC::Run::start(
	[ 'pgbench', '-n', '-b', 'tpcb-like', '-s', $scale, '-c', 2, '-j', 2,
	  '-T', $seconds, @conn ],
	'>', \$out1, '2>', \$err1);
my $mixed = IPC::Run::start(
	[ 'pgbench', '-n', '-b', 'simple-update@2', '-b', 'select-only@1',
	  '-s', $scale, '-c', 2, '-j', 2, '-T', $seconds, @conn ],
	'>', \$out2, '2>', \$err2);

my $start = time;
my $prev = query_hash($node, $counter_sql);
my ($mem_start, $mem_start_at, $backwards, $reloads, $samples) =
  (undef, undef, 0, 0, 0);
while (time - $start < $seconds - 1)
{
	# ten cycles with the setting in force (enabled = off too: the worker
	# still runs its cycles then)
	for (1 .. 10)
	{
		wait_for_cycle_after($node,
			$node->safe_psql('postgres', 'SELECT last_cycle_at FROM bgw_jit_stats'));
	}
	set_conf($node, $changes[ $reloads % @changes ]);
	$reloads++;
	my $now = query_hash($node, $counter_sql);
	for my $c (@counters)
	{
		next if $now->{$c} >= $prev->{$c};
		$backwards++;
		diag("$c went backwards: $prev->{$c} -> $now->{$c}");
	}
	$prev = $now;
	$samples++;
	# memory after a warm-up, once the worker has touched what it will
	($mem_start, $mem_start_at) = (memory_kb(), time)
	  if !$mem_start && time - $start >= 8;
}
my ($mem_end, $mem_end_at) = (memory_kb(), time);
$tpcb->finish;
$mixed->finish;

my ($tx1) = $out1 =~ /actually processed: (\d+)/;
my ($tx2) = $out2 =~ /actually processed: (\d+)/;
ok($tx1 && $tx2, "load ran: $tx1 TPC-B and $tx2 mixed transactions")
  or diag($err1 . $err2);
is($backwards, 0, "counters never went backwards ($samples samples, $reloads reloads)");
is(worker_pid($node), $worker, 'the same worker ran throughout');
my $final = query_hash($node, $counter_sql);
cmp_ok($final->{buf_clean}, '>', 0, "the worker wrote $final->{buf_clean} buffers");
SKIP:
{
	skip 'memory: the soak is too short to see growth (under 40 s)', 2
	  if !$mem_start_at || $mem_end_at - $mem_start_at < 30;
	ok(defined $mem_start->{RssAnon} && defined $mem_end->{RssAnon},
		"read the worker's memory from /proc/$worker/status")
	  or last SKIP;
	note(sprintf('worker memory over %d s: VmRSS %d -> %d kB, RssAnon %d -> %d kB',
		$mem_end_at - $mem_start_at, $mem_start->{VmRSS}, $mem_end->{VmRSS},
		$mem_start->{RssAnon}, $mem_end->{RssAnon}));
	cmp_ok($mem_end->{RssAnon} - $mem_start->{RssAnon}, '<', 1024,
		"worker private memory stayed flat ($mem_start->{RssAnon} -> $mem_end->{RssAnon} kB)");
}
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/\[$worker\] (?:WARNING|ERROR|FATAL)/,
	'no warning or error from the worker');
like($log, qr/checkpoint complete/, 'checkpoints ran during the soak');
check_tpcb_invariant($node, 'after the soak', 1);
check_integrity($node, 'after the soak');

$node->stop;
done_testing();
