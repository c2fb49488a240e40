# The live worker under load: it cleans and is not stopped by a cancel,
# its history holds what the estimator and the allocation count used (and
# core's arithmetic gives the same), it reports its statistics while
# running, buf_backend counts exactly the other processes' writes, it
# obeys reloads, never raises usage counts, backs off when idle, is
# restarted after a SIGTERM and stops at a fast shutdown without being
# restarted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
# The WAL writer writes but flushes only every 10 s, so that the worker
# has WAL to flush before it writes a page (see "statistics" below).
my $node = start_bgw_jit_node(
	'worker',
	scale => $scale,
	busy => 1,
	conf => "wal_writer_delay = 10s\nwal_writer_flush_after = 1GB\n",
	extensions => ['pg_buffercache']);

# --- the worker is there, a child of the postmaster named bgw_jit ---
my $pid = wait_for_worker($node);
ok($pid, "worker runs (pid $pid)");

# --- 18+: the library names itself and its version ---
SKIP:
{
	skip 'pg_get_loaded_modules() exists from PostgreSQL 18', 1
	  if $node->pg_version < 18;
	is( $node->safe_psql(
			'postgres', q{
		SELECT m.version = e.default_version
		FROM pg_get_loaded_modules() m, pg_available_extensions e
		WHERE m.module_name = 'bgw_jit' AND e.name = 'bgw_jit'}),
		't',
		'pg_get_loaded_modules() shows bgw_jit with the extension\'s version');
}

# --- under load it cleans, and SIGINT (a cancel) does not stop it ---
$node->safe_psql('postgres',
	"SELECT pg_stat_reset_shared('bgwriter'), bgw_jit_reset()");
kill('INT', $pid) or die "could not signal the worker: $!";
my $load = start_update_load($node, clients => 2, seconds => 6,
	scale => $scale);
$node->poll_query_until('postgres',
	'SELECT buf_clean > 0 FROM bgw_jit_stats')
  or die 'worker never wrote';
kill 'INT', $pid;
my $written_at_cancel =
  $node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats');
$load->finish;
settle_stats($node);
my $r = query_hash($node, 'SELECT * FROM bgw_jit_stats');
note("load: buf_clean $r->{buf_clean}, evicted $r->{buf_clean_evicted}, "
	  . "redirtied $r->{buf_clean_redirtied}, buf_backend $r->{buf_backend}, "
	  . "buf_alloc $r->{buf_alloc}");
is(worker_pid($node), $pid, 'after two cancels the same worker runs');
cmp_ok($r->{buf_clean}, '>', $written_at_cancel,
	'and it kept cleaning after the cancel under load');
cmp_ok($r->{buf_clean_evicted}, '>', 0,
	'pages it cleaned were later evicted without being dirtied again');

# --- allocations: credited cycle by cycle, not in lumps ---
# pg_stat_bgwriter.buffers_alloc, the exact count, reaches the worker in
# lumps (alloc_reported) at the built-in writer's reports; in between,
# the worker credits allocations from the clock hand's movement.  Over the
# cycles between the first and the last report, the credit per cycle
# without a report must match the exact count per cycle: if the hand
# were not followed, cycles between reports would get nothing and the
# reports would bring it all.
my $alloc = query_hash(
	$node, q{
	WITH span AS (SELECT min(cycle) AS first, max(cycle) AS last
				  FROM bgw_jit_history WHERE alloc_reported > 0),
		 w AS (SELECT h.* FROM bgw_jit_history h, span
			   WHERE h.cycle > span.first AND h.cycle <= span.last)
	SELECT count(*) AS cycles,
		   count(*) FILTER (WHERE alloc_reported > 0) AS reports,
		   sum(alloc_reported) AS reported,
		   sum(recent_alloc) FILTER (WHERE alloc_reported = 0)
			 AS credited_between,
		   count(*) FILTER (WHERE alloc_reported = 0) AS cycles_between
	FROM w});
note(sprintf('allocations: %d cycles, %d reports of %d in all; '
	  . '%d credited in the %d cycles between reports',
	  @$alloc{qw(cycles reports reported credited_between cycles_between)}));
cmp_ok($alloc->{reports}, '>=', 5, 'several reports of buffers_alloc');
my $ratio =
  ($alloc->{credited_between} / $alloc->{cycles_between}) /
  ($alloc->{reported} / $alloc->{cycles});
cmp_ok($ratio, '>', 0.5,
	sprintf('credit per cycle between reports is %.2f of the exact rate', $ratio));
cmp_ok($ratio, '<', 2, 'and does not overshoot it');

# --- from 16: buf_backend is pg_stat_io's count without the worker's ---
# Writes of the worker, not yet reported, would blur the start: stop it and
# let it report; clean the pool so that our own sessions evict nothing
# dirty.  Over a load from there, with both the worker and the backends
# writing, pg_stat_io's writes by client backends (and other types but the
# checkpointer, the bgwriter and background workers) must equal
# buf_backend, and its background-worker writes the worker's own, soon
# after the load (the worker reports about once a second, not only at
# exit).
SKIP:
{
	skip 'pg_stat_io exists from PostgreSQL 16', 4 if $node->pg_version < 16;

	set_conf($node, 'bgw_jit.enabled = off');
	$node->safe_psql('postgres', 'CHECKPOINT');
	settle_stats($node);
	my $base = io_baseline($node);
	# held back to a few writes a cycle, so that backends write too
	set_conf($node, 'bgw_jit.enabled = on', 'bgw_jit.lru_maxpages = 10');
	update_load($node, clients => 2, seconds => 5, scale => $scale);
	$node->safe_psql('postgres', 'CHECKPOINT');
	set_conf($node, 'bgw_jit.lru_maxpages = 1000');
	my $got = io_agreement($node, $base);
	cmp_ok($got->{buf_backend}, '>', 0, 'backends wrote during the load');
	is($got->{buf_backend}, $got->{others},
		'buf_backend equals the writes pg_stat_io counts for other processes');
	cmp_ok($got->{own}, '>', 0, 'the worker wrote during the load');
	is($got->{workers}, $got->{own},
		"pg_stat_io's background-worker writes are the worker's own");
}

# --- the history holds exactly what the estimator used ---
# (The estimator itself is checked against core's arithmetic by the
# regression test; this checks that each cycle records its inputs and
# results faithfully: replaying them gives the recorded figures.)
my ($replayed, $matching) = replay_estimator_matches(
	$node,
	cycles => 'SELECT * FROM bgw_jit_history ORDER BY cycle DESC LIMIT 300',
	multiplier => 4.0, smoothing => 16, delay => 20, whole => 120);
cmp_ok($replayed, '>', 50, "replayed $replayed cycles of history");
is($matching, $replayed,
	'the history records the estimator\'s inputs: its own code (bgw_jit_replay) replays every cycle exactly');
# bgw_jit_replay() runs the worker's own estimator code; the same cycles
# through core's arithmetic, transcribed independently in PL/pgSQL, must
# give the same figures.
my ($core_replayed, $core_matching, $core_first) = replay_core_estimator(
	$node,
	cycles => 'SELECT * FROM bgw_jit_history ORDER BY cycle DESC LIMIT 300',
	multiplier => 4.0, smoothing => 16, delay => 20, whole => 120);
cmp_ok($core_replayed, '>', 50,
	"replayed $core_replayed cycles of history through core's arithmetic");
is($core_matching, $core_replayed,
	"core's BgBufferSync() arithmetic reproduces every cycle exactly")
  or diag("first difference: $core_first");

# --- statistics: reported while running, not only at exit ---
# The worker flushes WAL up to a page's LSN before writing the page, and
# counts those WAL writes in pg_stat_wal.wal_write (18+: pg_stat_io).  With
# the WAL writer stopped (SIGSTOP) and commits asynchronous, no other
# process writes WAL, so the count can rise only by the worker's writes:
# it must rise while the worker runs (its once-a-second report).  The page
# is dirtied with cleaning off and written by the all-buffers scan, which
# writes whatever the usage count.  Once that report has come, terminating
# the worker must add nothing (at most 2, for pages our own queries dirty
# by setting hint bits, whose WAL the worker flushes too): a worker that
# reported only at exit adds everything it flushed.
my $wal_writes = wal_writes_sql($node);
my $wal_sql = "SELECT $wal_writes";
my $walwriter = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'");
ok($walwriter, "the WAL writer runs (pid $walwriter)");
set_conf($node, 'bgw_jit.enabled = off', "bgw_jit.strategy = 'jit+all'",
	'bgw_jit.all_percent = 100', 'bgw_jit.all_maxpages = 100000');
$node->safe_psql('postgres', 'CHECKPOINT');
END { kill 'CONT', $walwriter if $walwriter; }
ok(stop_while_waiting($walwriter), 'the WAL writer stopped while it waited');
$node->safe_psql('postgres', q{
	CREATE TABLE wal_probe AS
	SELECT bufferid, reldatabase, relfilenode, relforknumber, relblocknumber
	FROM pg_buffercache WHERE false;
	UPDATE pgbench_branches SET bbalance = bbalance + 1;
	INSERT INTO wal_probe
	SELECT bufferid, reldatabase, relfilenode, relforknumber, relblocknumber
	FROM pg_buffercache
	WHERE relfilenode = pg_relation_filenode('pgbench_branches')
	  AND relforknumber = 0 AND isdirty});
# (that session's own WAL statistics reach pgstat when it ends)
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'client backend'})
  or die 'the sessions did not end';
my $wal_start = $node->safe_psql('postgres', $wal_sql);
my $probe = watched_sql('wal_probe');
cmp_ok(query_hash($node, $probe)->{dirty}, '>', 0,
	'a dirty page whose WAL nobody has written');
set_conf($node, 'bgw_jit.enabled = on');
ok( $node->poll_query_until('postgres', qq{
		SELECT w.dirty = 0 AND w.same_page > 0 AND $wal_writes > $wal_start
		FROM ($probe) w}),
	'the running worker wrote the page and reported the WAL writes that took');
my $wal_before = $node->safe_psql('postgres', $wal_sql);
note("WAL writes: $wal_start before the worker wrote, $wal_before after");
is($node->safe_psql('postgres', 'SELECT pid FROM bgw_jit_stats'),
	$pid, 'bgw_jit_stats.pid is the worker\'s process id');
kill 'TERM', $pid;
# (the postmaster restarts it 5 s after it exits)
ok($node->poll_query_until('postgres', 'SELECT pid IS NULL FROM bgw_jit_stats'),
	'bgw_jit_stats.pid is NULL once the worker has exited');
wait_for_exit($pid) or die 'the worker did not exit';
my $wal_after = $node->safe_psql('postgres', $wal_sql);
cmp_ok($wal_after - $wal_before, '<=', 2,
	"the exiting worker had no WAL statistics left to report "
	  . "(wal_write $wal_before -> $wal_after)");
kill 'CONT', $walwriter;

# Stop process $pid with SIGSTOP while it sleeps in the system call it
# spends its idle time in (the commonest of /proc/PID/syscall's readings),
# not in the middle of a write holding a lock others need.  Where that file
# cannot be read (ptrace restricted) it dies, saying so.
sub stop_while_waiting
{
	my ($pid) = @_;
	my $syscall = sub {
		open(my $fh, '<', "/proc/$pid/syscall") or return '';
		my ($nr) = split / /, <$fh> // '';
		return $nr // '';
	};
	my %seen;
	$seen{ $syscall->() }++ for 1 .. 20;
	my ($idle) = sort { $seen{$b} <=> $seen{$a} } keys %seen;
	# (stopped mid-write the worker would hold a page the backends wait for)
	die "/proc/$pid/syscall cannot be read: cannot tell whether the worker is asleep"
	  if $idle eq '';
	return 0 if $idle eq 'running';
	for (1 .. 100)
	{
		kill 'STOP', $pid;
		return 1 if $syscall->() eq $idle;
		kill 'CONT', $pid;
		usleep(10_000);
	}
	return 0;
}

# --- terminated, the worker comes back ---
my $new_pid = wait_for_worker($node, $pid);
ok($new_pid, "worker restarted after a SIGTERM from outside ($pid -> $new_pid)");
ok( $node->poll_query_until(
		'postgres', "SELECT pid = $new_pid FROM bgw_jit_stats"),
	'bgw_jit_stats.pid is the new worker\'s');
$pid = $new_pid;

# --- bgw_jit.enabled = off: buf_backend is core's count of backend writes ---
# With the worker writing nothing, every write core counts as a backend
# write is another process's: buf_backend must rise by exactly as much as
# core's count (15: pg_stat_bgwriter.buffers_backend; from 16, pg_stat_io's
# writes by every process type but the checkpointer and the bgwriter),
# both read once settled.
my $io = $node->pg_version >= 16;
my $core = core_backend_writes_sql($node);
my $others = core_backend_writes_sql($node, without_workers => 1);
my $figures_sql = "SELECT buf_clean + buf_all_clean AS own, buf_backend,
	$core AS core, $others AS others FROM bgw_jit_stats";
set_conf($node, 'bgw_jit.enabled = off', "bgw_jit.strategy = 'jit'");
settle_stats($node);
my $off0 = query_hash($node, $figures_sql);
update_load($node, clients => 2, seconds => 3, scale => $scale);
settle_stats($node);
my $off1 = query_hash($node, $figures_sql);
my $core_rise = $off1->{core} - $off0->{core};
is($off1->{own}, $off0->{own}, 'disabled, the worker wrote nothing');
cmp_ok($core_rise, '>', 0, "backends wrote $core_rise pages (core's count)");
is($off1->{buf_backend} - $off0->{buf_backend}, $core_rise,
	'buf_backend rose by exactly as much as core\'s count of backend writes');

# --- the worker cleaning alone: no backend write, and no usage count raised ---
# Dirty, usage-0 buffers left by the load above; with no other activity,
# the worker, enabled and set to lap the pool within a second, must clean
# every one that still holds its page, and leave its usage count at 0.
# Core counts those writes as another process's (15: a backend's; from 16
# a background worker's), so they show in core's count; buf_backend must
# not move, as no backend wrote.
$node->safe_psql('postgres', q{
	CREATE TABLE probe AS
	SELECT bufferid, relfilenode, relblocknumber
	FROM pg_buffercache
	WHERE isdirty AND usagecount = 0 AND pinning_backends = 0});
my $probed = $node->safe_psql('postgres', 'SELECT count(*) FROM probe');
cmp_ok($probed, '>', 0, "$probed dirty usage-0 buffers to watch");
my $same_page_sql = q{
	FROM probe p JOIN pg_buffercache b USING (bufferid)
	WHERE b.relfilenode = p.relfilenode
	  AND b.relblocknumber = p.relblocknumber};
my $cleaned_sql = "SELECT count(*) FILTER (WHERE b.isdirty) = 0 $same_page_sql";
# (creating the probe may have made a backend write; and our queries read
# their catalog pages back now, not while the worker cleans)
$node->safe_psql('postgres', $cleaned_sql);
settle_stats($node);
my $alone0 = query_hash($node, $figures_sql);
set_conf($node, 'bgw_jit.enabled = on', 'bgw_jit.scan_whole_pool_seconds = 1');
ok($node->poll_query_until('postgres', $cleaned_sql),
	'the worker cleaned every watched buffer that kept its page');
my $kept = query_hash($node,
	"SELECT count(*) AS same_page,
			count(*) FILTER (WHERE b.usagecount > 0) AS raised $same_page_sql");
# our own queries allocate a few buffers, evicting some watched ones
cmp_ok($kept->{same_page}, '>=', 0.9 * $probed,
	"$kept->{same_page} of $probed watched buffers kept their pages");
is($kept->{raised}, 0, 'and none of their usage counts was raised');
settle_stats($node);
# The cleaner and its writers flush their statistics about a second after
# they write, and would go on cleaning pages our queries dirty: stop it,
# then wait (with a timeout) until the two counts agree, as they must.
set_conf($node, 'bgw_jit.enabled = off');
$node->poll_query_until('postgres',
	"SELECT $core - $alone0->{core} = buf_clean + buf_all_clean - $alone0->{own}
	 FROM bgw_jit_stats");
my $alone1 = query_hash($node, $figures_sql);
my $own_rise = $alone1->{own} - $alone0->{own};
cmp_ok($own_rise, '>', 0, "the worker wrote $own_rise pages");
is($alone1->{others} - $alone0->{others}, 0,
	'16+: no backend wrote meanwhile (pg_stat_io)')
  if $io;
is($alone1->{core} - $alone0->{core}, $own_rise,
	"core counted exactly the worker's writes as "
	  . ($io ? "a background worker's" : 'backend writes (buffers_backend)'));
is($alone1->{buf_backend}, $alone0->{buf_backend},
	'and buf_backend did not move: the worker\'s own writes are taken out');
set_conf($node, 'bgw_jit.enabled = on');

# --- a WARNING when the built-in LRU scan is on as well ---
my $log_offset = -s $node->logfile;
set_conf($node, 'bgwriter_lru_maxpages = 100');
ok( $node->wait_for_log(
		qr/WARNING:  the built-in background writer also cleans buffers \(bgwriter_lru_maxpages = 100\)\n.*HINT:  Set bgwriter_lru_maxpages = 0/,
		$log_offset),
	'reload with bgwriter_lru_maxpages > 0 warns with a hint');
set_conf($node, 'bgwriter_lru_maxpages = 0');

# --- a fast shutdown stops the worker, and it is not restarted ---
# (stop() fails if the server is not down within pg_ctl's timeout)
$log_offset = -s $node->logfile;
$node->stop('fast');
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/\[$pid\] (?:\S+ )?(?:FATAL|ERROR|WARNING):/,
	'the worker logged no FATAL, ERROR or WARNING at shutdown');
like($log, qr/background worker "bgw_jit" \(PID $pid\) exited with exit code 1/,
	'it left through its SIGTERM path (exit code 1)');

done_testing();
