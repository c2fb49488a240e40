# What the docs promise at start-up and shutdown, and of
# bgw_jit_bgwriter(timestamptz): a misspelt bgw_jit.* line in
# postgresql.conf draws a WARNING at start-up and is ignored, and so does
# cpu_priority = idle (accepted up to 1.3, refused since); the worker
# warns at start-up (not only at a reload) when bgwriter_lru_maxpages > 0;
# for the pg_stat_bgwriter period the worker has seen, the function gives
# its writes (no more than the kernel saw, and from 16 as many as
# pg_stat_io counts), its capped cycles (each of which the kernel saw
# write the cap) and, on 15, the writes buffers_backend has absorbed
# (what no statement wrote, by pg_stat_statements); a
# smart shutdown stops the worker cleanly.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
my $node = new_bgw_jit_node('startup', <<'EOC');
bgw_jit.delya = 50ms
bgw_jit.cpu_priority = idle
bgw_jit.max_writers = 0
bgwriter_lru_maxpages = 100
shared_preload_libraries = 'bgw_jit, pg_stat_statements'
EOC
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres',
	'CREATE EXTENSION bgw_jit; CREATE EXTENSION pg_stat_statements');
my $pid = wait_for_worker($node);

# --- a misspelt bgw_jit.* setting: a WARNING, then ignored ---
my $log = slurp_file($node->logfile);
like($log,
	qr/WARNING:  invalid configuration parameter name "bgw_jit\.delya", removing it\n.*DETAIL:  "bgw_jit" is now a reserved prefix\./,
	'a misspelt bgw_jit.* line draws a WARNING at start-up');
my ($ret, $out, $err) = $node->psql('postgres', 'SHOW bgw_jit.delya');
isnt($ret, 0, 'the misspelt setting does not exist');
like($err, qr/unrecognized configuration parameter "bgw_jit\.delya"/,
	'SHOW says so');
is($node->safe_psql('postgres', 'SHOW bgw_jit.delay'),
	'200ms', 'bgw_jit.delay keeps its default');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_file_settings WHERE name = 'bgw_jit.delya'}),
	'1', 'pg_file_settings shows the line');

# --- cpu_priority = idle, refused since 1.3.1: a WARNING, then normal ---
like($log,
	qr/WARNING:  invalid value for parameter "bgw_jit\.cpu_priority": "idle"\n.*DETAIL:  Under SCHED_IDLE/,
	'cpu_priority = idle in postgresql.conf draws a WARNING with the reason at start-up');
is($node->safe_psql('postgres', 'SELECT cpu_priority FROM bgw_jit_stats'),
	'normal', 'and the worker runs at normal priority');

# --- the WARNING for bgwriter_lru_maxpages > 0, at start-up ---
ok($log !~ /received SIGHUP/, 'no reload so far');
like($log,
	qr/\[$pid\] (?:\S+ )?WARNING:  the built-in background writer also cleans buffers \(bgwriter_lru_maxpages = 100\)\n.*HINT:  Set bgwriter_lru_maxpages = 0 so that only bgw_jit cleans\./,
	'the worker warns at start-up that the built-in writer cleans too');

# --- bgw_jit_bgwriter(stats_reset) for the period the worker has seen ---
# A new pg_stat_bgwriter period (and from 16 a fresh pg_stat_io) and
# bgw_jit_stats reset together while nothing writes, then a load with a
# per-cycle cap of 20 pages: for that period the function must give the
# worker's writes and capped cycles.  The kernel counts the worker's
# writes too: its wchar grows by at least 8 kB a page (more: it also
# writes WAL).  The cleaner runs without writer processes here: a page
# handed to a writer counts against the cycle's cap when handed, but the
# writer may find it clean by then and not write it, so that a capped
# cycle would not have written the cap.
#
# On 15 the check below takes what no statement wrote to be the worker's
# writes, so the period must hold no other write.  A backend also writes
# outside the statements pg_stat_statements times: while it connects, or
# parses and plans, it may evict a dirty victim (without a cleaner, 48 to
# 112 such pages after a 3 s load and a few connections, in a run of this
# load by hand).  Here the worker keeps the victims clean during the load;
# after it, a session opened before the reset stops the worker and has the
# checkpointer clean the pool before any new connection.  Before the
# reset, the worker is stopped and quiet, so that no write of its own
# reaches core's count after the reset (on 15 the checkpointer absorbs
# the counts of writes some time after them).
set_conf($node, 'bgwriter_lru_maxpages = 0', 'bgw_jit.lru_maxpages = 0');
$node->safe_psql('postgres', 'CHECKPOINT');
settle_quiet($node);
my $session = $node->background_psql('postgres');
$session->query_safe('SELECT conf_load_time, clock_timestamp() FROM bgw_jit_stats');
my $resets = $node->pg_version >= 16
  ? "pg_stat_reset_shared('bgwriter'), pg_stat_reset_shared('io')"
  : "pg_stat_reset_shared('bgwriter')";
my $io0 = worker_io($node);
my $t = $node->safe_psql('postgres',
	"SELECT $resets, pg_stat_statements_reset(), bgw_jit_reset(), clock_timestamp()");
$t =~ s/^.*\|//;
set_conf($node, 'bgw_jit.lru_maxpages = 20');
wait_for_cycle_after($node, $t);
update_load($node, clients => 2, seconds => 3, scale => $scale);
# (stop the writes, so that on 15 the checkpointer's absorb at the reload
# takes in the last of them)
$node->append_conf('postgresql.conf', 'bgw_jit.lru_maxpages = 0');
my $asked = $session->query_safe('SELECT clock_timestamp()');
$node->reload;
my $polls = 100 * $PostgreSQL::Test::Utils::timeout_default;
$session->query_safe(qq{
	DO \$\$ BEGIN
		FOR i IN 1 .. $polls LOOP
			IF (SELECT conf_load_time >= '$asked' FROM bgw_jit_stats) THEN
				RETURN;
			END IF;
			PERFORM pg_sleep(0.01);
		END LOOP;
		RAISE 'the worker did not load lru_maxpages = 0';
	END \$\$});
$session->query_safe('CHECKPOINT');
$session->quit;
my $io1 = settle_quiet($node);
my $worker_io = core_backend_writes_sql($node, only => 'background worker');
my $f = query_hash($node, qq{
	SELECT f.*, s.buf_clean + s.buf_all_clean AS written,
		   s.maxwritten_clean AS capped,
		   (SELECT stats_reset FROM pg_stat_bgwriter) AS period,
		   $worker_io AS io_writes
	FROM bgw_jit_bgwriter((SELECT stats_reset FROM pg_stat_bgwriter)) f,
		 bgw_jit_stats s});
note("period $f->{period}: buffers_clean $f->{buffers_clean}, "
	  . "maxwritten_clean $f->{maxwritten_clean}, buffers_backend "
	  . ($f->{buffers_backend} // 'NULL'));
note("bgw_jit_stats since its reset: $f->{written} written, $f->{capped} capped");
cmp_ok($f->{buffers_clean}, '>', 0, 'the period holds the worker\'s writes');
# (a page is one write call of 8 kB; WAL the worker flushed before a page
# adds bytes and calls: the kernel's counts are at least the pages)
my $kernel_pages = int(($io1->{wchar} - $io0->{wchar}) / 8192);
$kernel_pages = $io1->{syscw} - $io0->{syscw}
  if $io1->{syscw} - $io0->{syscw} < $kernel_pages;
cmp_ok($kernel_pages, '>=', $f->{buffers_clean},
	"no more than the kernel saw the worker write ($kernel_pages pages at most: "
	  . ($io1->{wchar} - $io0->{wchar}) . ' bytes, '
	  . ($io1->{syscw} - $io0->{syscw}) . ' write calls)');
cmp_ok($f->{maxwritten_clean}, '>', 0, "$f->{maxwritten_clean} capped cycles");
# (a capped cycle wrote its 20 pages)
cmp_ok(20 * $f->{maxwritten_clean}, '<=', $kernel_pages,
	'each of which wrote the cap of 20 pages, by the kernel\'s count');
if ($node->pg_version >= 16)
{
	is($f->{buffers_clean}, $f->{io_writes},
		"as many writes as pg_stat_io's background-worker writes since the reset");
	ok(!defined $f->{buffers_backend}, 'buffers_backend is NULL from 16');
}
else
{
	# (all of them, by now: the reload in settle_stats made the
	# checkpointer absorb the last.)  Core's own count holds the
	# backends' writes too; what no statement wrote, by
	# pg_stat_statements' count (autovacuum is off), is the worker's.
	my $core = query_hash($node, q{
		SELECT buffers_backend AS core,
			   (SELECT sum(shared_blks_written) FROM pg_stat_statements)
				 AS statements
		FROM pg_stat_bgwriter});
	is($f->{buffers_backend}, $f->{buffers_clean},
		'15: the worker saw buffers_backend absorb all of its writes');
	is($f->{buffers_backend}, $core->{core} - $core->{statements},
		"15: which are pg_stat_bgwriter.buffers_backend ($core->{core}) less "
		  . "the statements' writes ($core->{statements}, pg_stat_statements)");
}
my $old = query_hash($node, qq{
	SELECT * FROM bgw_jit_bgwriter(timestamptz '$f->{period}' - interval '1 s')});
is_deeply([ @$old{qw(buffers_clean maxwritten_clean)} ], [ 0, 0 ],
	'a period it has not seen gives zeros');

# --- a smart shutdown stops the worker cleanly ---
my $offset = -s $node->logfile;
my $stat_file = $node->data_dir . '/pg_stat/bgw_jit.stat';
ok($node->stop('smart', fail_ok => 1), 'pg_ctl stop -m smart succeeds');
$log = slurp_file($node->logfile, $offset);
like($log, qr/received smart shutdown request/, 'it was a smart shutdown');
like($log, qr/database system is shut down/, 'and the server shut down');
unlike($log, qr/\[$pid\] (?:\S+ )?(?:FATAL|ERROR|WARNING):/,
	'the worker logged no FATAL, ERROR or WARNING');
like($log, qr/background worker "bgw_jit" \(PID $pid\) exited with exit code 1/,
	'it left through its SIGTERM path (exit code 1)');
ok(!kill(0, $pid), 'the worker is gone');
ok(-s $stat_file, 'the statistics were saved, as at any clean shutdown');

# Settle the statistics until the kernel sees the worker's processes write
# nothing across a settle, whose last cycle then counted all of their
# writes; returns their /proc I/O counts then.
sub settle_quiet
{
	my ($node) = @_;
	my $io = worker_io($node);
	for (1 .. 20)
	{
		settle_stats($node);
		my $again = worker_io($node);
		return $again if $again->{wchar} == $io->{wchar};
		$io = $again;
	}
	die 'the cleaner and its writers never stopped writing';
}

done_testing();
