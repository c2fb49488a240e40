# ERRORs inside the worker: it stays in the same process, as core's
# background writer does, releases what it held, keeps cleaning, and logs
# a repeated error at most once a minute.
#
# 1. A persistent write failure: a relation's file the server may not
#    open (the error comes from inside the write, after the buffer's I/O
#    was started, the case where the release order matters on 15).  The
#    worker keeps its pid, cleans the other relation, leaves no pin, and
#    logs one ERROR until a minute has passed, then the next one with a
#    count of those it did not log.
# 2. (test builds) An ERROR raised while it holds a buffer pinned and
#    content-locked, under load: same process, nothing left pinned, the
#    relations it was cleaning can be rewritten and dropped.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

# --- 1. a file the worker cannot open ---
my $node = new_bgw_jit_node('write_error', "bgw_jit.enabled = off\n");
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION bgw_jit; CREATE EXTENSION pg_buffercache');
my $pid = wait_for_worker($node);
ok($pid, "worker running (pid $pid)");

# Dirty pages of two tables; the worker is off, so it has never opened
# their files (a descriptor it held would still write after the chmod).
$node->safe_psql('postgres', q{
	CREATE TABLE victim (v int);
	INSERT INTO victim SELECT 1;
	CREATE TABLE other (v int);
	INSERT INTO other SELECT generate_series(1, 20000);
});
my $dirty_sql = sub {
	my ($rel) = @_;
	return "SELECT count(*) FROM pg_buffercache
		WHERE isdirty AND relfilenode = pg_relation_filenode('$rel')
		  AND reldatabase = (SELECT oid FROM pg_database
							 WHERE datname = current_database())";
};
cmp_ok($node->safe_psql('postgres', $dirty_sql->('other')),
	'>', 10, 'the other table has dirty buffers');
my $victim_file = $node->data_dir . '/'
  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('victim')");
ok(chmod(0, $victim_file), 'the victim\'s file made unreadable and unwritable');

# jit+all writes dirty pages whatever their usage count, all of them each
# cycle: the victim's page fails at every cycle.
my $log_offset = -s $node->logfile;
set_conf($node, <<'EOC');
bgw_jit.enabled = on
bgw_jit.strategy = 'jit+all'
bgw_jit.all_percent = 100
bgw_jit.all_maxpages = 100000
EOC
ok( $node->wait_for_log(
		qr/ERROR:  could not open file ".*": Permission denied/,
		$log_offset),
	'the worker failed to write the victim\'s page');
ok( $node->poll_query_until('postgres', $dirty_sql->('other'), '0'),
	'it went on to clean the other table');
is($node->safe_psql('postgres', $dirty_sql->('victim')),
	'1', 'the victim\'s page is still dirty');

# The next logged error, a minute after the first, says how many it held
# back: the worker kept failing in the same process without logging each.
ok( $node->wait_for_log(
		qr/LOG:  the bgw_jit worker did not log (\d+) earlier errors/,
		$log_offset),
	'a minute later the worker logs the error again with a count');
my $log = slurp_file($node->logfile, $log_offset);
my ($held_back) = $log =~ /did not log (\d+) earlier errors/;
cmp_ok($held_back, '>=', 10,
	"it had failed again at least once per cycle after each 1 s pause ($held_back not logged)");
my ($first_minute) = split /did not log \d+ earlier errors/, $log;
my @errors = $first_minute =~ /ERROR:  could not open file/g;
is(scalar @errors, 2,
	'only the first error and the one a minute later were logged');
is(worker_pid($node), $pid, 'the same worker process ran throughout');
unlike($log, qr/background worker "bgw_jit" \(PID \d+\) exited/,
	'the postmaster saw no worker exit');
is($node->safe_psql('postgres',
		'SELECT count(*) FROM pg_buffercache WHERE pinning_backends > 0'),
	'0', 'no buffer left pinned');

# Once the file can be written again, so is the page.
ok(chmod(0600, $victim_file), 'the victim\'s file writable again');
ok($node->poll_query_until('postgres', $dirty_sql->('victim'), '0'),
	'the worker then cleaned the victim\'s page');
$node->safe_psql('postgres', 'DROP TABLE victim');
check_integrity($node, 'after the write errors');
$node->stop;

# --- 2. an ERROR with a buffer pinned and content-locked (test builds) ---
$node = start_bgw_jit_node(
	'injected_error',
	scale => 5,
	busy => 1,
	extensions => ['pg_buffercache']);
SKIP:
{
	skip 'build without FAULT_INJECTION=1', 10
	  unless has_fault_injection($node);

	$pid = wait_for_worker($node);
	$log_offset = -s $node->logfile;
	set_conf($node, 'bgw_jit.inject_error = on');
	my $load = start_update_load($node, clients => 2, seconds => 3, scale => 5);
	ok( $node->wait_for_log(
			qr/ERROR:  bgw_jit: injected error with buffer \d+ pinned and locked/,
			$log_offset),
		'the worker raised the injected error');

	# Stop injecting and writing, so that any pin seen is one it left.
	$node->append_conf('postgresql.conf',
		"bgw_jit.inject_error = off\nbgw_jit.enabled = off");
	reload_and_wait($node);
	$load->finish;
	is(worker_pid($node), $pid, 'the worker is still the same process');
	unlike(
		slurp_file($node->logfile, $log_offset),
		qr/exited with exit code|terminating any other active server processes/,
		'no worker exit, no crash restart');
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
		'>', $before, 'it cleans again');
	check_integrity($node, 'after the injected error');
}
$node->stop;
done_testing();
