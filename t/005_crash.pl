# Crashes under load while the worker writes: SIGKILL of the worker, of a
# backend, and an immediate shutdown.  Each time the cluster recovers, the
# worker comes back, no acknowledged commit is lost and the data verifies.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
my $node = start_bgw_jit_node(
	'crash',
	scale => $scale,
	busy => 1,
	conf => "restart_after_crash = on\ncheckpoint_timeout = 30s\n");

# Start the crash load and return once the worker is writing under it.
# The load is long: the crash ends it.
sub start_load_while_writing
{
	my $written =
	  $node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats');
	my $load = start_crash_load($node, 120, $scale);
	$node->poll_query_until('postgres',
		"SELECT buf_clean >= $written + 50 FROM bgw_jit_stats")
	  or die 'worker never wrote';
	return $load;
}

sub after_recovery
{
	my ($label, $acked_before, $load, $old_worker) = @_;
	my $acked = finish_crash_load($load);
	wait_for_connections($node) or die 'server did not come back';
	my $pid = wait_for_worker($node, $old_worker);
	ok($pid, "$label: worker back (pid $pid)");
	my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM acked');
	cmp_ok($rows - $acked_before, '>=', $acked,
		"$label: all $acked acknowledged inserts survived");
	cmp_ok($acked, '>', 0, "$label: the inserter committed before the crash");
	check_tpcb_invariant($node, $label);
	check_integrity($node, $label);
	return $pid;
}

sub acked_rows
{
	$node->safe_psql('postgres',
		'CREATE TABLE IF NOT EXISTS acked (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())');
	return $node->safe_psql('postgres', 'SELECT count(*) FROM acked');
}

# --- 1. the worker is killed with SIGKILL mid-load ---
my $rows0 = acked_rows();
my $worker = worker_pid($node);
my $offset = -s $node->logfile;
my $load = start_load_while_writing();
kill 'KILL', $worker;
ok( $node->wait_for_log(
		qr/background worker "bgw_jit" \(PID $worker\) was terminated by signal 9/,
		$offset),
	'worker SIGKILL: postmaster saw the crash');
ok($node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$offset),
	'worker SIGKILL: crash restart');
$worker = after_recovery('worker SIGKILL', $rows0, $load, $worker);

# --- 2. a backend is killed with SIGKILL while the worker writes ---
$rows0 = acked_rows();
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
$offset = -s $node->logfile;
$load = start_load_while_writing();
my $backend = $node->safe_psql('postgres', q{
	SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
	  AND query ~ 'pgbench_|acked' LIMIT 1});
ok($backend, "a pgbench backend to kill ($backend)");
kill 'KILL', $backend;
ok($node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$offset),
	"backend SIGKILL ($backend): crash restart");
$worker = after_recovery('backend SIGKILL', $rows0, $load, $worker);

# --- 3. immediate shutdown under load, then start ---
$rows0 = acked_rows();
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
$load = start_load_while_writing();
$node->stop('immediate');
$node->start;
after_recovery('immediate shutdown', $rows0, $load, undef);

$node->stop;
done_testing();
