# An ERROR inside the worker while it holds a buffer pinned and
# content-locked: it exits with code 1, the postmaster restarts it after
# bgw_restart_time without a crash restart, and nothing stays pinned.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $node = new_bgw_jit_node('error', <<'EOC');
bgw_jit.delay = 20ms
bgw_jit.lru_multiplier = 4.0
bgw_jit.lru_maxpages = 1000
EOC
$node->start;

plan skip_all => 'build without FAULT_INJECTION=1'
  unless has_fault_injection($node);

pgbench_init($node, 5);
$node->safe_psql('postgres',
	'CREATE EXTENSION bgw_jit; CREATE EXTENSION pg_buffercache');
my $pid = wait_for_worker($node);
ok($pid, "worker running (pid $pid)");

# Inject while under load, so that the worker is writing when it fails.
my $log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'bgw_jit.inject_error = on');
$node->reload;
update_load($node, clients => 2, seconds => 3, scale => 5);
ok( $node->wait_for_log(
		qr/ERROR:  bgw_jit: injected error with buffer \d+ pinned and locked/,
		$log_offset),
	'the worker raised the injected error');
ok( $node->wait_for_log(
		qr/background worker "bgw_jit" \(PID $pid\) exited with exit code 1/,
		$log_offset),
	'and exited with code 1');

# Stop injecting before the restart (after 5 s), then expect a new worker.
$node->append_conf('postgresql.conf', 'bgw_jit.inject_error = off');
$node->reload;
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

update_load($node, clients => 2, seconds => 3, scale => 5);
cmp_ok($node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats'),
	'>', 0, 'the restarted worker cleans again');
check_integrity($node, 'after the worker error');

$node->stop;
done_testing();
