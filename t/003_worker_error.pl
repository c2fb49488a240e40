# An ERROR inside the worker while it holds a buffer pinned and
# content-locked: it exits with code 1, the postmaster restarts it after
# bgw_restart_time without a crash restart, and nothing stays pinned.
#
# The worker has no error handler of its own: the bgworker code's handler
# logs the ERROR and exits with code 1, and the exit path releases the
# content lock (shmem_exit), then the pin (the auxiliary resource owner:
# with a plain resource owner the pin would leak and a later DROP TABLE
# would wait forever), then any I/O in progress.  This test checks that
# path; it also passes on an assert-enabled server, where UnpinBuffer
# asserts that the content lock is no longer held.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $node = start_bgw_jit_node(
	'error',
	scale => 5,
	busy => 1,
	extensions => ['pg_buffercache']);

plan skip_all => 'build without FAULT_INJECTION=1'
  unless has_fault_injection($node);

my $pid = wait_for_worker($node);
ok($pid, "worker running (pid $pid)");

# Inject while under load, so that the worker is writing when it fails.
my $log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'bgw_jit.inject_error = on');
$node->reload;
my $load = start_update_load($node, clients => 2, seconds => 3, scale => 5);
ok( $node->wait_for_log(
		qr/ERROR:  bgw_jit: injected error with buffer \d+ pinned and locked/,
		$log_offset),
	'the worker raised the injected error');
ok( $node->wait_for_log(
		qr/background worker "bgw_jit" \(PID $pid\) exited with exit code 1/,
		$log_offset),
	'and exited with code 1');

# Before the restart (after 5 s): stop injecting, and keep the new worker
# from writing, so that any pin seen below is one the old worker left.
$node->append_conf('postgresql.conf',
	"bgw_jit.inject_error = off\nbgw_jit.enabled = off");
$node->reload;
$load->finish;
my $new_pid = wait_for_worker($node, $pid);
ok($new_pid, "worker restarted after the error ($pid -> $new_pid)");
unlike(
	slurp_file($node->logfile, $log_offset),
	qr/terminating any other active server processes|all server processes terminated/,
	'no cluster-wide crash restart');

is($node->safe_psql('postgres',
		'SELECT count(*) FROM pg_buffercache WHERE pinning_backends > 0'),
	'0', 'no buffer left pinned');

# Relations whose buffers it was cleaning can be rewritten and dropped.
my ($ret, $out, $err) = $node->psql('postgres',
	'VACUUM FULL pgbench_accounts', timeout => 180);
is($ret, 0, 'VACUUM FULL of a table it was cleaning completes') or diag($err);
($ret, $out, $err) = $node->psql('postgres',
	'DROP TABLE pgbench_history; SELECT 1', timeout => 180);
is($ret, 0, 'DROP TABLE of a table it was cleaning completes') or diag($err);

set_conf($node, 'bgw_jit.enabled = on');
my $before = $node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats');
update_load($node, clients => 2, seconds => 3, scale => 5);
cmp_ok($node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats'),
	'>', $before, 'the restarted worker cleans again');
check_integrity($node, 'after the worker error');

$node->stop;
done_testing();
