# bgw_jit_stats reports the settings the worker runs with, not the calling
# backend's: with the worker stopped (SIGSTOP) across a reload, a session
# that has loaded the new bgw_jit.pacing still sees the worker's old one;
# once the worker runs again and reloads, the new one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $node = new_bgw_jit_node('settings', "bgw_jit.delay = 50ms\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
my $pid = wait_for_worker($node);
ok($pid, "worker runs (pid $pid)");
wait_for_cycle_after($node,
	$node->safe_psql('postgres', 'SELECT clock_timestamp()'));
is($node->safe_psql('postgres', 'SELECT pacing FROM bgw_jit_stats'),
	'auto', 'pacing auto, the default');

# Stop the worker, then reload with pacing = fixed: the postmaster, and so
# every new session, has the new value; the worker cannot load it.  It is
# stopped only while it sleeps in its latch wait (the kernel shows it
# blocked in epoll_wait, syscall 232 on x86-64, or epoll_pwait, 281), so
# that it holds no lock a session would wait for.
my $stopped = 0;
END { kill 'CONT', $pid if $stopped; }

my $loaded = $node->safe_psql('postgres',
	'SELECT conf_load_time FROM bgw_jit_stats');
$stopped = stop_worker_asleep($pid)
  or die 'the worker was never caught asleep';
$node->append_conf('postgresql.conf', "bgw_jit.pacing = fixed\n");
$node->reload;
my $seen_ok = $node->poll_query_until('postgres',
	"SELECT current_setting('bgw_jit.pacing') = 'fixed'");
my $r = query_hash($node, qq{
	SELECT current_setting('bgw_jit.pacing') AS session, pacing,
		   conf_load_time = '$loaded' AS not_reloaded
	FROM bgw_jit_stats});
kill 'CONT', $pid or die "could not continue the worker: $!";
$stopped = 0;
ok($seen_ok, 'a new session has pacing = fixed after the reload');
ok($r->{not_reloaded},
	'the stopped worker has not loaded the configuration again');
is($r->{pacing}, 'auto',
	"bgw_jit_stats.pacing is the worker's (auto), not the session's ($r->{session})");

# Running again, the worker loads the new setting and reports it.
$node->poll_query_until('postgres',
	"SELECT conf_load_time > '$loaded' FROM bgw_jit_stats")
  or die 'the worker did not reload its configuration';
wait_for_cycle_after($node,
	$node->safe_psql('postgres', 'SELECT clock_timestamp()'));
is($node->safe_psql('postgres', 'SELECT pacing FROM bgw_jit_stats'),
	'fixed', 'after its reload the worker reports pacing fixed');

$node->stop;
done_testing();
