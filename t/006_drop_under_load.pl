# DROP DATABASE, DROP TABLE and TRUNCATE of relations whose dirty buffers
# the worker is cleaning, in a loop under load: nothing hangs (each
# statement is bounded by a timeout) and the worker raises no error.
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
	'drop',
	scale => $scale,
	busy => 1,
	conf => "bgw_jit.delay = 10ms\nbgw_jit.lru_multiplier = 10\n"
	  . "bgw_jit.scan_whole_pool_seconds = 1\n");
my $worker = worker_pid($node);
my $offset = -s $node->logfile;

# Background load on the main database for the whole test (stopped when
# the drops are done).
my $load = start_crash_load($node, 600, $scale);

my $iterations = 6;
for my $i (1 .. $iterations)
{
	# a database full of dirty buffers, dropped while they are cleaned
	$node->safe_psql('postgres', "CREATE DATABASE victim_$i");
	$node->safe_psql("victim_$i", q{
		CREATE TABLE t AS SELECT g AS id, repeat('x', 200) AS pad
		FROM generate_series(1, 100000) g;
		UPDATE t SET pad = repeat('y', 200)});
	my ($ret, $out, $err) = $node->psql('postgres',
		"DROP DATABASE victim_$i", timeout => 120);
	is($ret, 0, "iteration $i: DROP DATABASE completes") or diag($err);

	# a table dirtied, truncated, refilled and dropped
	($ret, $out, $err) = $node->psql(
		'postgres', qq{
		CREATE TABLE churn_$i AS SELECT g AS id, repeat('x', 200) AS pad
		FROM generate_series(1, 30000) g;
		UPDATE churn_$i SET pad = repeat('z', 200);
		TRUNCATE churn_$i;
		INSERT INTO churn_$i SELECT g, repeat('w', 200)
		FROM generate_series(1, 30000) g;
		DROP TABLE churn_$i;}, timeout => 120);
	is($ret, 0, "iteration $i: TRUNCATE and DROP TABLE complete") or diag($err);
}

stop_crash_load($load);
is(worker_pid($node), $worker, 'the same worker ran throughout');
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/\[$worker\] (?:WARNING|ERROR|FATAL)/,
	'no warning or error from the worker');
cmp_ok($node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats'),
	'>', 0, 'the worker was cleaning');
check_tpcb_invariant($node, 'after the drops');
check_integrity($node, 'after the drops');

$node->stop;
done_testing();
