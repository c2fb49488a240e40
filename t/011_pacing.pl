# The zero-tuning cleaner with its defaults: self-pacing, the automatic
# margin, the rate budget and the per-cycle cap, the statement wake-up of
# an idle worker, and the worker's CPU priority.  Functional facts only:
# the figures that say how well it cleans come from bench/.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Temp ();
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 10;

# No bgw_jit settings at all: what a DBA gets by preloading the library.
my $node = new_bgw_jit_node('pacing', 'bgw_jit.history_size = 100000');
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
my $pid = wait_for_worker($node);

# Update load in the background while $code runs; returns $code's result.
sub under_load
{
	my ($seconds, $code) = @_;
	my $file = File::Temp->new(SUFFIX => '.sql');
	print $file "\\set aid random(1, 100000 * $scale)\n"
	  . "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n";
	close $file;
	chmod 0644, $file->filename;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-f', $file->filename, '-c', 2, '-j', 2,
			'-T', $seconds, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);
	my $result = $code->();
	$h->finish;
	ok($h->result(0) == 0, "pgbench ran for ${seconds}s") or diag($err);
	return $result;
}

# Cycles of the history from $from on, as hashes.
sub cycles_since
{
	my ($from) = @_;
	my $rows = $node->safe_psql('postgres', qq{
		SELECT cycle, written, hit_maxpages, elapsed_us, sleep_ms, write_rate
		  FROM bgw_jit_history WHERE cycle > $from ORDER BY cycle});
	return [ map { my @f = split /\|/; { cycle => $f[0], written => $f[1],
		hit => $f[2], elapsed_us => $f[3], sleep_ms => $f[4],
		write_rate => $f[5] } }
		split /\n/, $rows ];
}

sub last_cycle
{
	return $node->safe_psql('postgres',
		'SELECT coalesce(max(cycle), 0) FROM bgw_jit_history');
}

# --- the defaults clean, with sleeps the worker chose itself ---
# No reset before the load: the replay below starts from the worker's
# start, and a reset would renumber the history.
my $load_from = last_cycle();
my $clean_before = $node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats');
under_load(6, sub { return 1; });
my $s = query_hash($node, qq{
	WITH h AS (SELECT * FROM bgw_jit_history WHERE cycle > $load_from)
	SELECT buf_clean - $clean_before AS cleaned, pacing, cpu_priority,
		   (SELECT count(DISTINCT sleep_ms) FROM h) AS sleeps,
		   (SELECT min(sleep_ms) FROM h
			 WHERE cycle < (SELECT max(cycle) FROM h)) AS min_sleep,
		   (SELECT max(sleep_ms) FROM h) AS max_sleep,
		   (SELECT min(margin) FROM h) AS min_margin,
		   (SELECT max(margin) FROM h) AS max_margin,
		   (SELECT current_setting('bgw_jit.delay')) AS delay
	  FROM bgw_jit_stats});
is($s->{pacing}, 'auto', 'pacing is auto by default');
cmp_ok($s->{cleaned}, '>', 0,
	"the default settings cleaned ($s->{cleaned} buffers)");
# Under this load a fixed pace would sleep bgw_jit.delay every cycle; the
# automatic one plans shorter sleeps from the hand's speed.  (How many
# different sleeps it plans depends on the machine: on a fast one every
# cycle may sleep the 10 ms floor.)
my ($delay_ms) = $s->{delay} =~ /^(\d+)ms$/;
cmp_ok($s->{min_sleep}, '<', $delay_ms,
	"the worker chose its sleeps ($s->{sleeps} different, "
	  . "$s->{min_sleep}..$s->{max_sleep} ms, bgw_jit.delay $s->{delay})");
ok($s->{min_sleep} >= 10 && $s->{max_sleep} <= 200,
	'every planned sleep within [10 ms, bgw_jit.delay]');
ok($s->{min_margin} >= 1 && $s->{max_margin} <= 10,
	"automatic margin within [1, 10] ($s->{min_margin}..$s->{max_margin})");

# The history carries everything the controller decided from: replaying
# it through the controller's own code reproduces each cycle's decisions.
# That shows the inputs are recorded, not that the rules are right (those
# are checked against a transcription by sql/pacer_rules.sql).  (BgwJitTest's
# replay_pacer_mismatches, the whole history from the worker's start: a
# later start needs a cycle where the backends' writes were just counted
# afresh, and under this load they may not write at all).
my ($replayed, $differ) = replay_pacer_mismatches($node, undef);
cmp_ok($replayed, '>', 20, "replayed $replayed cycles of the live history");
is($differ, 0,
	'the history records the controller\'s inputs: its own code (bgw_jit_replay_pacer) '
	  . 'replays every sleep, lead, margin and speed');
# bgw_jit_replay_pacer() runs the worker's own code.  The estimate each
# cycle made with the margin it chose is core's BgBufferSync() arithmetic:
# the same cycles through an independent PL/pgSQL transcription of it,
# with each cycle's recorded margin as the multiplier, must give the
# recorded figures.
my ($core_replayed, $core_matching, $core_first) = replay_core_estimator(
	$node,
	cycles => 'SELECT * FROM bgw_jit_history',
	multiplier => undef, smoothing => 16, delay => 200, whole => 120);
cmp_ok($core_replayed, '>', 20,
	"replayed $core_replayed cycles of the live history through core's arithmetic");
is($core_matching, $core_replayed,
	"with the automatic margin, core's arithmetic reproduces every cycle's estimate")
  or diag("first difference: $core_first");

# --- write caps, with the writes counted outside the worker ---
# The cleaner alone (max_writers = 0: a writer's pages are charged to the
# cycle that hands them, and written, and folded into the history, in a
# later one), so that its writes are all there is to count.  A window
# opens with the worker disabled, at the moment the test asks for the cap
# and enabled = on, and closes once the worker has loaded enabled = off
# after a load.  Meanwhile strace follows the cleaner: its relation page
# writes, with their times (strace_rate_span), and its cycles, which end
# in its sleeps (strace_cycle_pages).  Returns the pages written and the
# seconds over which strace_rate_span counts them, the most the cleaner
# wrote in one cycle and the cycles of the history meanwhile; or undef,
# with the reason in $strace_why.
my $strace_why;
$node->append_conf('postgresql.conf', 'bgw_jit.max_writers = 0');
$node->restart;
$pid = wait_for_worker($node);

sub capped_window
{
	my ($seconds, @conf) = @_;
	set_conf($node, 'bgw_jit.enabled = off');
	settle_stats($node);
	(my $trace, $strace_why) = start_strace($pid,
		'epoll_wait,epoll_pwait,pwrite64,pwritev,pwritev2');
	return undef unless $trace;
	set_conf($node, @conf, 'bgw_jit.enabled = on');
	my $from = last_cycle();
	under_load($seconds, sub { return 1; });
	set_conf($node, 'bgw_jit.enabled = off');
	settle_stats($node);
	$trace->stop;
	my ($pages, $span) = strace_rate_span($trace, $pid);
	my ($most) = sort { $b <=> $a } strace_cycle_pages($trace, $pid), 0;
	note(sprintf('window: strace saw %d pages written in %.2f s, at most %d '
			  . 'by the cleaner in a cycle', $pages, $span, $most));
	return ($pages, $span, $most, cycles_since($from));
}

# --- the rate budget caps writes over time, whatever the pacing ---
# 1 MB/s = 128 pages/s; the bucket holds one second: from a sleep of the
# cleaner to its last write after it, <= 128 + 128/s * the seconds between
# them.  The budget must have stopped scans (else the load did not ask
# for more, and the bound proves nothing).
SKIP:
{
	my ($written, $span, $most, $cycles) =
	  capped_window(5, 'bgw_jit.max_write_rate = 1');
	skip "the writes are counted with strace: $strace_why", 4
	  unless defined $written;
	my $limited = grep { $_->{hit} eq 't' } @$cycles;
	cmp_ok($limited, '>', 0,
		"the budget stopped $limited of " . scalar(@$cycles) . ' scans');
	cmp_ok($written, '>', 0, "the worker wrote $written pages");
	my $rate_limit = 128 + 128 * $span;
	cmp_ok($written, '<=', $rate_limit,
		sprintf('rate budget: %d pages in %.2f s, by strace (limit %.1f)',
			$written, $span, $rate_limit));
	# The history's write_rate is the rate in force: the cap's 128 pages/s
	# in every cycle of the window; with the cap lifted (the next window),
	# the plan's own rate, never below its floor of 1000 pages/s.
	my %rates;
	$rates{ $_->{write_rate} }++ for @$cycles;
	is(join(',', sort { $a <=> $b } keys %rates), '128',
		'bgw_jit_history.write_rate is 128 pages/s in every capped cycle');
}

# --- a per-cycle cap works as core's lru_maxpages ---
# Fixed pacing at the default delay of 200 ms, lru_maxpages = 7: between
# two of its sleeps the cleaner writes at most 7 pages (by strace); and
# the cap must have been reached: some cycle stopped by it, and the most
# any cycle wrote, by the history, exactly 7.
SKIP:
{
	my ($written, $span, $most, $cycles) = capped_window(3,
		'bgw_jit.max_write_rate = 0', 'bgw_jit.lru_maxpages = 7',
		'bgw_jit.pacing = fixed');
	skip "the writes are counted with strace: $strace_why", 4
	  unless defined $written;
	my ($capped, $max) = (0, 0);
	for my $cy (@$cycles)
	{
		$capped++ if $cy->{hit} eq 't';
		$max = $cy->{written} if $cy->{written} > $max;
	}
	cmp_ok($capped, '>', 0,
		"the cap stopped $capped of " . scalar(@$cycles) . ' scans');
	is($max, 7, 'the most a cycle wrote is lru_maxpages = 7');
	my @low = grep { $_->{write_rate} < 1000 } @$cycles;
	is(scalar(@low), 0,
		'with max_write_rate = 0 no cycle\'s write_rate is below 1000 pages/s'
		  . (@low ? " (cycle $low[0]{cycle}: $low[0]{write_rate})" : ''));
	cmp_ok($most, '<=', 7,
		"per-cycle cap: at most $most pages between two of the cleaner's "
		  . "sleeps, by strace ($written in all)");
}
$node->append_conf('postgresql.conf',
	"bgw_jit.lru_maxpages = -1\nbgw_jit.pacing = auto\nbgw_jit.enabled = on");

# --- an idle worker is woken by the next statement ---
# With a 10 s delay every timed sleep is long.  After the reload (whose
# SIGHUP also sets the latch) only the statement-start hooks can end a
# sleep early, so a later cycle marked woken proves they did.
my $from = last_cycle();
$node->append_conf('postgresql.conf', 'bgw_jit.delay = 10s');
$node->reload;
$node->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM bgw_jit_history WHERE woken AND cycle > $from")
  or die 'the reload did not wake the worker';
$from = last_cycle();
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) > 0 FROM bgw_jit_history WHERE woken AND cycle > $from"
	),
	'a statement woke the idle worker before its 10 s sleep ended');

# --- CPU priority ---
sub proc_priority
{
	open my $fh, '<', "/proc/$pid/stat" or return undef;
	my $stat = <$fh>;
	close $fh;
	$stat =~ s/^.*\) //;    # fields after the command name
	my @f = split / /, $stat;
	my $nice = $f[16];
	open $fh, '<', "/proc/$pid/sched" or return { nice => $nice };
	my ($policy) = join('', <$fh>) =~ /^policy\s*:\s*(\d+)/m;
	close $fh;
	return { nice => $nice, policy => $policy };
}

sub set_priority
{
	my ($value) = @_;
	$node->append_conf('postgresql.conf', "bgw_jit.cpu_priority = $value");
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT current_setting('bgw_jit.cpu_priority') = '$value'");
	# the worker applies it at its next cycle; statements wake it
	$node->poll_query_until('postgres',
		"SELECT cpu_priority = '$value' FROM bgw_jit_stats")
	  or return 0;
	return 1;
}

$node->append_conf('postgresql.conf', 'bgw_jit.delay = 200ms');
ok(set_priority('low'), 'cpu_priority = low is applied');
cmp_ok(proc_priority()->{nice}, '>=', 10, 'the worker runs at nice 10 (or the server\'s, if lower)');

# SCHED_IDLE (offered up to 1.3) is refused, saying why, and nothing changes
my ($rc, $stdout, $stderr) = $node->psql('postgres',
	"ALTER SYSTEM SET bgw_jit.cpu_priority = 'idle'");
isnt($rc, 0, 'cpu_priority = idle is refused');
like($stderr, qr/invalid value for parameter "bgw_jit.cpu_priority": "idle"/,
	'with an error naming the setting and value');
like($stderr, qr/DETAIL:  Under SCHED_IDLE the worker can be kept off the CPU while it holds locks/,
	'and the reason');
is($node->safe_psql('postgres', 'SELECT cpu_priority FROM bgw_jit_stats'),
	'low', 'the worker keeps cpu_priority = low');

# Raising it again needs privileges the server normally lacks: then the
# worker must say so and report the priority it really has.
my $log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'bgw_jit.cpu_priority = normal');
$node->reload;
$node->poll_query_until('postgres',
	"SELECT current_setting('bgw_jit.cpu_priority') = 'normal'");
my ($raised, $refused);
my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
until ($raised || $refused || time > $deadline)
{
	$raised = $node->safe_psql('postgres',
		"SELECT cpu_priority = 'normal' FROM bgw_jit_stats") eq 't';
	$refused = $node->log_contains(
		'could not change the CPU priority of the bgw_jit worker',
		$log_offset);
	usleep(100_000) unless $raised || $refused;
}
my $p = proc_priority();
# Which of the two happens depends on the server's privileges: the other
# branch is skipped, saying so.
SKIP:
{
	skip 'the server may not raise priorities (no CAP_SYS_NICE or RLIMIT_NICE): '
	  . 'the raise is refused below', 1
	  unless $raised;
	cmp_ok($p->{nice}, '<', 10, 'raised back to normal (the server may raise priorities)');
}
SKIP:
{
	skip 'the server may raise priorities (CAP_SYS_NICE or RLIMIT_NICE): '
	  . 'no refusal to report', 4
	  if $raised;
	ok($refused, 'raising the priority without privileges is reported');
	is($node->safe_psql('postgres', 'SELECT cpu_priority FROM bgw_jit_stats'),
		'low', 'bgw_jit_stats shows the priority the worker really has');
	cmp_ok($p->{nice}, '>=', 10, 'and the worker still runs at nice 10 or more');

	# What was refused is not asked again at every reload (a reload sets
	# the configured value again; 1.2 wrote the one in force over it, and
	# so retried): two more reloads, one warning.
	reload_and_wait($node) for 1 .. 2;
	my $warnings = () = slurp_file($node->logfile, $log_offset) =~
	  /could not change the CPU priority of the bgw_jit worker/g;
	is($warnings, 1, 'the refused change is not retried at each reload');
}
is(worker_pid($node), $pid, 'the same worker ran throughout');

$node->stop;
done_testing();
