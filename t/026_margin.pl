# The automatic margin closes on the misses: when the clock hand runs past
# the cleaned frontier (injected here by stopping the worker with SIGSTOP
# under load, so that it wakes far too late), the margin rises at once;
# under the steady load that follows it comes down again; and the live
# history, misses included, replays exactly through bgw_jit_replay_pacer().
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

# A 64 MB pool: on the default 16 MB one, the hand of a fast machine
# passes the pool faster than the worker can wake (its lead saturated at
# the shortest sleep), where misses rightly do not raise the margin.
my $scale = 10;
my $node = start_bgw_jit_node('margin', scale => $scale,
	conf => "bgw_jit.history_size = 100000\nshared_buffers = 64MB\n");
my $pid = wait_for_worker($node);
ok($pid, "worker running (pid $pid)");
my $nbuffers = $node->safe_psql('postgres',
	"SELECT setting FROM pg_settings WHERE name = 'shared_buffers'");

my $load = start_update_load($node, clients => 2, seconds => 40, scale => $scale);
ok( $node->poll_query_until(
		'postgres', 'SELECT hand_rate > 1000 FROM bgw_jit_stats'),
	'the worker paces itself to the load');
my $from = $node->safe_psql('postgres', 'SELECT max(cycle) FROM bgw_jit_history');
my $before = $node->safe_psql('postgres', 'SELECT margin FROM bgw_jit_stats');

# Stopped while the backends allocate twice the pool: when it runs again
# the hand has lapped its frontier.
my $alloc = $node->safe_psql('postgres', 'SELECT buffers_alloc FROM pg_stat_bgwriter');
stop_worker_asleep($pid) or die 'could not stop the worker asleep';
my $moved = $node->poll_query_until('postgres',
	"SELECT buffers_alloc >= $alloc + 2 * $nbuffers FROM pg_stat_bgwriter");
my $t = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
kill 'CONT', $pid;
ok($moved, 'the backends allocated twice the pool while the worker was stopped');
wait_for_cycle_after($node, $t);
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT count(*) > 0 FROM bgw_jit_history
	 WHERE cycle > $from AND at > '$t' AND misses > 0.001}),
	'the next cycles saw the misses');
my $peak = $node->safe_psql('postgres',
	"SELECT max(margin) FROM bgw_jit_history WHERE cycle > $from AND at > '$t'");
cmp_ok($peak, '>=', $before + 0.2,
	"the margin rose at once ($before -> $peak)");

# Under the steady load that follows it comes down again, from wherever
# it peaked: the misses can go on raising it for a while after $peak was
# read.
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT count(*) > 0 FROM (
		SELECT margin, max(margin) OVER (ORDER BY cycle) AS highest
		  FROM bgw_jit_history WHERE at > '$t') h
	 WHERE margin < highest - 0.01}),
	'and came down again under the steady load');

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) >= 50 FROM bgw_jit_history WHERE cycle > $from"),
	'fifty cycles since the stop');
# (the load has done its part: the rest of its 40 s would be waited out)
kill_pgbench($node, $load->{h});
# The history records what the controller decided from: its own code
# replays it (not a check of the rules: sql/pacer_rules.sql is).
# The whole history, from the worker's start: a replay from a later cycle
# must start where the backends' writes were just counted afresh, which
# under a load the cleaner keeps up with may never happen before the stop.
my $cycles = $node->safe_psql('postgres', 'SELECT count(*) FROM bgw_jit_history');
my ($replayed, $differ) = replay_pacer_mismatches($node, undef);
cmp_ok($replayed, '>=', $cycles,
	"replayed all $replayed cycles since the worker started, misses included");
is($differ, 0,
	'the history records the controller\'s inputs, misses included: its own code '
	  . '(bgw_jit_replay_pacer) replays every decision');

$node->stop;
done_testing();
