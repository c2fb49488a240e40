# DROP DATABASE, DROP TABLE and TRUNCATE of relations whose dirty buffers
# the worker is cleaning, in a loop under load: nothing hangs (each
# statement is bounded by a timeout) and the worker raises no error.
# Before each of them pg_buffercache shows the victim's dirty buffers
# being cleaned in place (clean again while holding the same page, which
# only a writer that does not evict does), with no checkpoint running: so
# the worker is cleaning that very relation when it goes.
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
	  . "bgw_jit.scan_whole_pool_seconds = 1\nlog_checkpoints = on\n"
	  . "bgw_jit.history_size = 100000\n",
	extensions => ['pg_buffercache']);
my $worker = worker_pid($node);
my $offset = -s $node->logfile;

# Background load on the main database for the whole test (stopped when
# the drops are done).
my $load = start_crash_load($node, 3600, $scale);

# Dirty the victim again ($redirty, SQL in database $db) and, in the same
# session right after, record its dirty buffers ($cond, SQL over
# pg_buffercache); then wait until the worker has cleaned some of them in
# place: ten, or a tenth if fewer than 100 were dirty (a backend that
# evicts a buffer writes it only to give it another page; nobody else
# uses these pages, so no backend leaves one of them clean in place), with
# no checkpoint in progress or started meanwhile (checkpoints are
# otherwise 30 min and 4 GB of WAL away; DROP DATABASE's own is over when
# the statement returns).  Under the load a cleaned page may be evicted
# soon after, so a function samples pg_buffercache every 10 ms and keeps
# every buffer it ever saw clean in place.  The load evicts what the
# worker does not clean: buffers dirtied where the cleaner had already
# looked, or that a backend needed first, are written by backends and
# never seen clean in place.  So a round that sees too few is tried again
# (up to 5 rounds of 30 s); a worker that cleans nothing fails every one.
$node->safe_psql('postgres', q{
	CREATE FUNCTION watch_cleaning(need int, timeout float8) RETURNS int
	LANGUAGE plpgsql AS $$
	DECLARE
		n int := 0;
		deadline timestamptz := clock_timestamp() + make_interval(secs => timeout);
	BEGIN
		CREATE TEMP TABLE IF NOT EXISTS seen (bufferid int PRIMARY KEY);
		TRUNCATE seen;
		LOOP
			INSERT INTO seen
			SELECT p.bufferid FROM victim_buffers p JOIN pg_buffercache b USING (bufferid)
			WHERE b.reldatabase = p.reldatabase AND b.relfilenode = p.relfilenode
			  AND b.relforknumber = p.relforknumber
			  AND b.relblocknumber = p.relblocknumber AND NOT b.isdirty
			ON CONFLICT DO NOTHING;
			SELECT count(*) INTO n FROM seen;
			EXIT WHEN n >= need OR clock_timestamp() > deadline;
			PERFORM pg_sleep(0.01);
		END LOOP;
		RETURN n;
	END $$});

sub wait_for_cleaning
{
	my ($label, $cond, $db, $redirty) = @_;
	my ($dirty, $need, $seen, $log_from, $running) = (0, 1, 0);
	$log_from = -s $node->logfile;
	my $log = slurp_file($node->logfile);
	$running = () = $log =~ /checkpoint starting:/g;
	$running -= () = $log =~ /checkpoint complete:/g;
	for my $round (1 .. 5)
	{
		# (every database has pg_buffercache: template1 has it)
		my $rows = $node->safe_psql(
			$db, qq{$redirty;
			SELECT coalesce(string_agg(format('(%s, %s, %s, %s, %s)', bufferid,
						reldatabase, relfilenode, relforknumber, relblocknumber), ', '), '')
			FROM pg_buffercache WHERE isdirty AND $cond});
		$node->safe_psql('postgres', q{
			DROP TABLE IF EXISTS victim_buffers;
			CREATE TABLE victim_buffers (bufferid int, reldatabase oid,
				relfilenode oid, relforknumber int2, relblocknumber bigint)}
			  . ($rows eq '' ? '' : "; INSERT INTO victim_buffers VALUES $rows"));
		$dirty =
		  $node->safe_psql('postgres', 'SELECT count(*) FROM victim_buffers');
		$need = $dirty >= 100 ? 10 : int($dirty / 10) || 1;
		$seen = $node->safe_psql('postgres', "SELECT watch_cleaning($need, 30)");
		last if $seen >= $need;
		note("$label, round $round: $seen of $dirty dirty buffers seen cleaned in place");
	}
	cmp_ok($seen, '>=', $need,
		"$label: the worker cleaned $seen of the victim's $dirty dirty buffers in place");
	ok($running == 0 && slurp_file($node->logfile, $log_from) !~ /checkpoint starting:/,
		"$label: with no checkpoint running meanwhile");
	return;
}

$node->safe_psql('template1', 'CREATE EXTENSION pg_buffercache');

my $iterations = 3;
for my $i (1 .. $iterations)
{
	# a database full of dirty buffers, dropped while they are cleaned
	$node->safe_psql('postgres', "CREATE DATABASE victim_$i");
	$node->safe_psql("victim_$i", q{
		CREATE TABLE t AS SELECT g AS id, repeat('x', 200) AS pad
		FROM generate_series(1, 100000) g;
		UPDATE t SET pad = repeat('y', 200)});
	wait_for_cleaning("iteration $i: database",
		"reldatabase = (SELECT oid FROM pg_database WHERE datname = 'victim_$i')",
		"victim_$i", "UPDATE t SET pad = repeat('v', 200)");
	my ($ret, $out, $err) = $node->psql('postgres',
		"DROP DATABASE victim_$i", timeout => 120);
	is($ret, 0, "iteration $i: DROP DATABASE completes") or diag($err);

	# a table dirtied, truncated, refilled and dropped
	my $churn = "reldatabase = (SELECT oid FROM pg_database WHERE datname = 'postgres')
		AND relfilenode = pg_relation_filenode('churn_$i')";
	($ret, $out, $err) = $node->psql(
		'postgres', qq{
		CREATE TABLE churn_$i AS SELECT g AS id, repeat('x', 200) AS pad
		FROM generate_series(1, 30000) g;
		UPDATE churn_$i SET pad = repeat('z', 200);}, timeout => 120);
	is($ret, 0, "iteration $i: table created and dirtied") or diag($err);
	wait_for_cleaning("iteration $i: table before TRUNCATE", $churn,
		'postgres', "UPDATE churn_$i SET pad = repeat('v', 200)");
	($ret, $out, $err) = $node->psql(
		'postgres', qq{
		TRUNCATE churn_$i;
		INSERT INTO churn_$i SELECT g, repeat('w', 200)
		FROM generate_series(1, 30000) g;}, timeout => 120);
	is($ret, 0, "iteration $i: TRUNCATE completes") or diag($err);
	wait_for_cleaning("iteration $i: table before DROP TABLE", $churn,
		'postgres', "UPDATE churn_$i SET pad = repeat('v', 200)");
	($ret, $out, $err) = $node->psql('postgres', "DROP TABLE churn_$i",
		timeout => 120);
	is($ret, 0, "iteration $i: DROP TABLE completes") or diag($err);
}

stop_crash_load($load);
is(worker_pid($node), $worker, 'the same worker ran throughout');
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/\[$worker\] (?:WARNING|ERROR|FATAL)/,
	'no warning or error from the worker');
check_tpcb_invariant($node, 'after the drops');
check_integrity($node, 'after the drops');

$node->stop;
done_testing();
