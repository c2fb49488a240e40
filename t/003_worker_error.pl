# ERRORs inside the worker: it stays in the same process, as core's
# background writer does, releases what it held, keeps cleaning, and logs
# each distinct error at most once a minute (in test builds
# bgw_jit.error_log_interval shortens that to 10 s here).
#
# 1. A persistent write failure: two relations' files the server may not
#    open (the error comes from inside the write, after the buffer's I/O
#    was started, the case where the release order matters on 15).  The
#    worker keeps its pid, cleans the other relation, leaves no pin, and
#    logs each of the two errors once until the interval has passed, then
#    again with a count of those it did not log.
# 2. (test builds) An ERROR raised while it holds a buffer pinned and
#    content-locked, under load: same process, nothing left pinned, the
#    relations it was cleaning can be rewritten and dropped.
# 3. (test builds) An ERROR retrying a page put off until its WAL was
#    flushed: the cleaning goes on.  (1.3 kept the failing page first in
#    its list of put-off pages, retried before every scan, until the clock
#    hand passed it: on an idle server, never.)
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
# how often the same error is logged: 10 s in test builds, else 60 s
my $interval = has_fault_injection($node) ? 10 : 60;
$node->append_conf('postgresql.conf', "bgw_jit.error_log_interval = $interval\n")
  if $interval == 10;
my $pid = wait_for_worker($node);
ok($pid, "worker running (pid $pid)");

# Dirty pages of two tables; the worker is off, so it has never opened
# their files (a descriptor it held would still write after the chmod).
$node->safe_psql('postgres', q{
	CREATE TABLE victim (v int);
	INSERT INTO victim SELECT 1;
	CREATE TABLE victim2 (v int);
	INSERT INTO victim2 SELECT 1;
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
my %victim_file = map {
	$_ => $node->safe_psql('postgres', "SELECT pg_relation_filepath('$_')")
} qw(victim victim2);
ok(chmod(0, map { $node->data_dir . "/$_" } values %victim_file) == 2,
	'the victims\' files made unreadable and unwritable');

# jit+all writes dirty pages whatever their usage count, all of them each
# cycle: the victims' pages fail in turn.
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
is($node->safe_psql('postgres', $dirty_sql->('victim2')),
	'1', 'so is the other victim\'s');

# The next logged error, an interval after the first, says how many it held
# back: the worker kept failing in the same process without logging each.
ok( $node->wait_for_log(
		qr/LOG:  the bgw_jit cleaner did not log (\d+) earlier errors/,
		$log_offset),
	"$interval s later the worker logs the error again with a count");
my $log = slurp_file($node->logfile, $log_offset);
my ($held_back) = $log =~ /did not log (\d+) earlier errors/;
cmp_ok($held_back, '>=', $interval / 2,
	"it had failed again about once per cycle, after each 1 s pause ($held_back not logged in $interval s)");
my ($first_interval) = split /did not log \d+ earlier errors/, $log;
for my $rel (sort keys %victim_file)
{
	my @errors = $first_interval =~ /ERROR:  could not open file "\Q$victim_file{$rel}\E"/g;
	ok(@errors >= 1 && @errors <= 2,
		"$rel: its error was logged at first and at most once more after $interval s ("
		  . scalar(@errors) . ')');
}
is(worker_pid($node), $pid, 'the same worker process ran throughout');
unlike($log, qr/background worker "bgw_jit" \(PID \d+\) exited/,
	'the postmaster saw no worker exit');
is($node->safe_psql('postgres',
		'SELECT count(*) FROM pg_buffercache WHERE pinning_backends > 0'),
	'0', 'no buffer left pinned');

# Once the file can be written again, so is the page.
ok(chmod(0600, map { $node->data_dir . "/$_" } values %victim_file) == 2,
	'the victims\' files writable again');
ok( $node->poll_query_until('postgres',
		'SELECT (' . $dirty_sql->('victim') . ') + (' . $dirty_sql->('victim2') . ')',
		'0'),
	'the worker then cleaned the victims\' pages');
$node->safe_psql('postgres', 'DROP TABLE victim, victim2');
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
	set_conf($node, 'bgw_jit.inject_error = write');
	my $load = start_update_load($node, clients => 2, seconds => 3, scale => 5);
	ok( $node->wait_for_log(
			qr/ERROR:  injected error with buffer \d+ pinned and locked/,
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
	my $io0 = worker_io($node);
	update_load($node, clients => 2, seconds => 3, scale => 5);
	my $io1 = worker_io($node);
	cmp_ok($io0 && $io1 ? $io1->{wchar} - $io0->{wchar} : 0,
		'>=', 8192, 'it cleans again (its and its writers\' writes, /proc/PID/io)');
	check_integrity($node, 'after the injected error');
}
$node->stop;

# --- 3. an ERROR retrying a put-off page (test builds) ---
# WAL flushed lazily (asynchronous commits, the WAL writer every 10 s), so
# that under load the cleaner puts pages off; jit+all's all-buffers scan
# besides, which writes any dirty page, after the LRU scan's retries.
$node = start_bgw_jit_node(
	'deferred_error',
	scale => 5,
	busy => 1,
	extensions => ['pg_buffercache'],
	conf => <<'EOC');
fsync = on
wal_writer_delay = 10s
wal_writer_flush_after = 1GB
bgw_jit.strategy = 'jit+all'
bgw_jit.all_percent = 100
bgw_jit.all_maxpages = 100000
EOC
SKIP:
{
	skip 'build without FAULT_INJECTION=1', 4
	  unless has_fault_injection($node);

	$pid = wait_for_worker($node);
	$node->safe_psql('postgres', 'CREATE TABLE other (v int)');
	$log_offset = -s $node->logfile;
	set_conf($node, 'bgw_jit.inject_error = deferred');
	update_load($node, clients => 2, seconds => 3, scale => 5);
	ok( $node->wait_for_log(
			qr/ERROR:  injected error retrying the put-off write of buffer \d+/,
			$log_offset),
		'a retry of a put-off page failed');

	# With the load over the hand stands still, and nothing passes the
	# pages put off: every retry of them fails.  Pages dirtied now must
	# still be written, as pg_buffercache shows (no checkpoint is due, the
	# backends are idle: only the worker writes).
	$node->safe_psql('postgres',
		'INSERT INTO other SELECT generate_series(1, 20000)');
	ok( $node->poll_query_until(
			'postgres', $dirty_sql->('other'), '0'),
		'failing retries do not stop the cleaning: the new table is written');
	is(worker_pid($node), $pid, 'in the same process');
}
$node->stop;
done_testing();
