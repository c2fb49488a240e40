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
		SELECT cycle, written, hit_maxpages, elapsed_us, sleep_ms
		  FROM bgw_jit_history WHERE cycle > $from ORDER BY cycle});
	return [ map { my @f = split /\|/; { cycle => $f[0], written => $f[1],
		hit => $f[2], elapsed_us => $f[3], sleep_ms => $f[4] } }
		split /\n/, $rows ];
}

sub last_cycle
{
	return $node->safe_psql('postgres',
		'SELECT coalesce(max(cycle), 0) FROM bgw_jit_history');
}

# --- the defaults clean, with sleeps the worker chose itself ---
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
under_load(6, sub { return 1; });
my $s = query_hash($node, q{
	SELECT buf_clean, pacing, cpu_priority,
		   (SELECT count(DISTINCT sleep_ms) FROM bgw_jit_history) AS sleeps,
		   (SELECT min(sleep_ms) FROM bgw_jit_history) AS min_sleep,
		   (SELECT max(sleep_ms) FROM bgw_jit_history) AS max_sleep,
		   (SELECT min(margin) FROM bgw_jit_history) AS min_margin,
		   (SELECT max(margin) FROM bgw_jit_history) AS max_margin,
		   (SELECT current_setting('bgw_jit.delay')) AS delay
	  FROM bgw_jit_stats});
is($s->{pacing}, 'auto', 'pacing is auto by default');
cmp_ok($s->{buf_clean}, '>', 0,
	"the default settings cleaned ($s->{buf_clean} buffers)");
cmp_ok($s->{sleeps}, '>', 1,
	"the worker chose its sleeps ($s->{sleeps} different, "
	  . "$s->{min_sleep}..$s->{max_sleep} ms)");
ok($s->{min_sleep} >= 10 && $s->{max_sleep} <= 200,
	'every sleep within [10 ms, bgw_jit.delay]');
ok($s->{min_margin} >= 1 && $s->{max_margin} <= 10,
	"automatic margin within [1, 10] ($s->{min_margin}..$s->{max_margin})");

# The history carries everything the controller decided from: replaying
# it reproduces each cycle's decisions (start from the first cycle's
# recorded state; evicted/redirtied were judged the cycle before).
my $mismatch = $node->safe_psql('postgres', q{
	WITH h AS (SELECT *, lag(evicted) OVER w AS pu, lag(redirtied) OVER w AS pw
				 FROM bgw_jit_history WINDOW w AS (ORDER BY cycle)),
	first AS (SELECT * FROM h ORDER BY cycle LIMIT 1),
	rest AS (SELECT array_agg(elapsed_us ORDER BY cycle) el,
					array_agg(strategy_delta ORDER BY cycle) mv,
					array_agg(written + all_written ORDER BY cycle) wr,
					array_agg(pu ORDER BY cycle) us,
					array_agg(pw ORDER BY cycle) wa,
					array_agg(woken ORDER BY cycle) wk
			   FROM h WHERE cycle > (SELECT cycle FROM first)),
	r AS (SELECT r.* FROM rest, first,
			bgw_jit_replay_pacer(rest.el, rest.mv, rest.wr, rest.us, rest.wa,
								 rest.wk,
								 start_hand_rate => first.hand_rate,
								 start_margin => first.margin,
								 start_planned_ms => first.sleep_ms) r)
	SELECT count(*) || ' ' || count(*) FILTER (
			 WHERE r.sleep_ms <> h.sleep_ms OR r.lead_target <> h.lead_target
				OR abs(r.margin - h.margin) > 1e-5
				OR abs(r.hand_rate - h.hand_rate) > 1e-4 * h.hand_rate + 1e-3)
	  FROM r JOIN h ON h.cycle = r.cycle + (SELECT cycle FROM first)});
my ($replayed, $differ) = split / /, $mismatch;
cmp_ok($replayed, '>', 20, "replayed $replayed cycles of the live history");
is($differ, 0, 'the replay reproduces every sleep, lead, margin and speed');

# --- the rate budget caps writes over time, whatever the pacing ---
# 1 MB/s = 128 pages/s; the bucket holds one second.  Over any stretch of
# cycles from the change on, writes <= 128/s * elapsed + 128.
$node->append_conf('postgresql.conf', 'bgw_jit.max_write_rate = 1');
$node->reload;
$node->poll_query_until('postgres',
	"SELECT current_setting('bgw_jit.max_write_rate') = '1'");
my $from = last_cycle() + 1;    # the cycle that saw the reload may not
my $c = under_load(5, sub { return 1; });
my $cycles = cycles_since($from);
my ($written, $elapsed, $limited) = (0, 0, 0);
for my $cy (@$cycles)
{
	$written += $cy->{written};
	$elapsed += $cy->{elapsed_us} / 1e6;
	$limited++ if $cy->{hit} eq 't';
}
cmp_ok($written, '<=', 128 * $elapsed + 128,
	sprintf('rate budget: %d writes in %.2f s of cycles (limit %.0f)',
		$written, $elapsed, 128 * $elapsed + 128));
cmp_ok($limited, '>', 0, "the budget stopped $limited scans");

# --- a per-cycle cap still works as core's lru_maxpages ---
$node->append_conf('postgresql.conf',
	"bgw_jit.max_write_rate = 0\nbgw_jit.lru_maxpages = 7");
$node->reload;
$node->poll_query_until('postgres',
	"SELECT current_setting('bgw_jit.lru_maxpages') = '7'");
$from = last_cycle() + 1;
under_load(3, sub { return 1; });
my @over = grep { $_->{written} > 7 } @{ cycles_since($from) };
is(scalar(@over), 0, 'no cycle wrote more than lru_maxpages = 7');
$node->append_conf('postgresql.conf', 'bgw_jit.lru_maxpages = -1');

# --- an idle worker is woken by the next statement ---
# With a 10 s delay every timed sleep is long.  After the reload (whose
# SIGHUP also sets the latch) only the statement-start hooks can end a
# sleep early, so a later cycle marked woken proves they did.
$from = last_cycle();
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
ok(set_priority('idle'), 'cpu_priority = idle is applied');
is(proc_priority()->{policy}, 5, 'the worker runs under SCHED_IDLE');

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
if ($raised)
{
	is($p->{policy}, 0, 'raised back to normal (the server may raise priorities)');
}
else
{
	ok($refused, 'raising the priority without privileges is reported');
	is($node->safe_psql('postgres', 'SELECT cpu_priority FROM bgw_jit_stats'),
		'idle', 'bgw_jit_stats shows the priority the worker really has');
	is($p->{policy}, 5, 'and the worker is still under SCHED_IDLE');
}
is(worker_pid($node), $pid, 'the same worker ran throughout');

$node->stop;
done_testing();
