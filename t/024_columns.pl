# bgw_jit_stats columns no other test asserts, each checked so that it can
# fail: laps and buffers_overrun (a starved cleaner is lapped, backends
# write meanwhile, the history's lead, scan and hand movement account for
# every lap and every buffer overrun; an idle pool adds none),
# buffers_reusable (a full scan of a still pool finds what pg_buffercache
# shows), hibernations and sleep_ms (NULL while the idle worker sleeps its
# long sleep, watched from a session that runs no statement meanwhile) and
# redirtied_pct.
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
	'columns',
	scale => $scale,
	conf => "bgw_jit.history_size = 100000\n",
	extensions => ['pg_buffercache']);
my $nbuffers = $node->safe_psql('postgres',
	"SELECT setting FROM pg_settings WHERE name = 'shared_buffers'");
my $pid = wait_for_worker($node);

# Wait for $n more cycles of the worker.
sub wait_cycles
{
	my ($n) = @_;
	for (1 .. $n)
	{
		wait_for_cycle_after($node,
			$node->safe_psql('postgres', 'SELECT last_cycle_at FROM bgw_jit_stats'));
	}
	return;
}

# --- laps and buffers_overrun: a cleaner held to one page a cycle ---
set_conf($node, 'bgw_jit.lru_maxpages = 1');
my $backend_writes = core_backend_writes_sql($node, without_workers => 1);
my $b0 = $node->safe_psql('postgres',
	"SELECT bgw_jit_reset(), $backend_writes");
$b0 =~ s/^\|//;
update_load($node, clients => 2, seconds => 3, scale => $scale);
settle_stats($node);
# (the history is read after the counters: cycles published in between
# are left out)
my $r = query_hash($node, qq{
	SELECT laps, buffers_overrun, cycles, $backend_writes AS backend_writes,
		   (SELECT count(*) FILTER (WHERE lapped) FROM bgw_jit_history h
			 WHERE h.cycle <= s.cycles) AS lapped,
		   (SELECT coalesce(sum(overrun), 0) FROM bgw_jit_history h
			 WHERE h.cycle <= s.cycles) AS overrun,
		   (SELECT count(*) FROM bgw_jit_history h
			 WHERE h.cycle <= s.cycles) AS history
	FROM bgw_jit_stats s});
note("starved: $r->{laps} laps, $r->{buffers_overrun} buffers overrun "
	  . "in $r->{cycles} cycles");
# (on 15 the count includes the worker's writes, at most one a cycle)
cmp_ok($r->{backend_writes} - $b0, '>', $r->{cycles},
	'backends wrote dirty buffers the cleaner had not reached ('
	  . ($r->{backend_writes} - $b0) . " writes in $r->{cycles} cycles)");
cmp_ok($r->{laps}, '>', 0, "and the hand lapped the cleaner $r->{laps} times");
cmp_ok($r->{buffers_overrun}, '>', $r->{laps},
	"overrunning it by $r->{buffers_overrun} buffers");
# (bookkeeping, not behaviour: the counters and the history add up the
# same cycles; it lets the check below, made on the history's rows, speak
# for the counters too)
is("$r->{history} $r->{lapped} $r->{overrun}",
	"$r->{cycles} $r->{laps} $r->{buffers_overrun}",
	'the history holds every cycle since the reset, and laps and '
	  . 'buffers_overrun add up its lapped and overrun');

# The cleaner's frontier is where the last cycle's scan ended: the lead the
# last cycle started with, plus what it scanned.  The hand's movement to
# the next cycle either leaves a lead (that cycle's bufs_ahead) or passes
# the frontier: then the cycle is lapped, its lead 0 and its overrun how
# far the hand went past.
my $bad = $node->safe_psql('postgres', q{
	WITH h AS (
		SELECT cycle, lapped, overrun, bufs_ahead,
			   lag(bufs_ahead) OVER w + lag(scanned) OVER w - strategy_delta AS lead,
			   lag(cycle) OVER w AS prev
		FROM bgw_jit_history WINDOW w AS (ORDER BY cycle))
	SELECT count(*) FILTER (WHERE CASE WHEN lead < 0
		THEN NOT lapped OR overrun <> -lead OR bufs_ahead <> 0
		ELSE lapped OR overrun <> 0 OR bufs_ahead <> lead END) || ' '
		|| count(*) FILTER (WHERE lead < 0)
	FROM h WHERE prev = cycle - 1});
my ($mismatch, $overtaken) = split / /, $bad;
cmp_ok($overtaken, '>', 0, "the hand passed the frontier in $overtaken cycles");
is($mismatch, 0,
	'every lap, overrun and lead agrees with the scans and the hand\'s movement');

# An idle pool: with the cleaner a lap ahead, no laps and no overrun.
set_conf($node, 'bgw_jit.lru_maxpages = -1');
$node->poll_query_until('postgres',
	"SELECT bufs_ahead > $nbuffers / 2 FROM bgw_jit_stats")
  or die 'the cleaner did not get ahead';
my $idle0 = query_hash($node, 'SELECT laps, buffers_overrun FROM bgw_jit_stats');
wait_cycles(10);
my $idle1 = query_hash($node, 'SELECT laps, buffers_overrun FROM bgw_jit_stats');
is_deeply($idle1, $idle0, 'idle, ten cycles add no laps and no overrun');

# --- buffers_reusable: what a full scan of a still pool finds ---
# (lru_maxpages = 0 makes the next scan start at the hand; idle, the
# worker then scans the lap in a cycle or a few, until it is a whole pool
# ahead.)  Buffers are reusable when unpinned with usage count 0; unused
# ones count too.  With the pool still the count moves little, but both
# ways: the hand lowers usage counts, and a pin held for a moment (a
# checkpoint's write, a writer process's) keeps a buffer out of a
# snapshot; so the scan's count lies between the snapshots taken before
# and after, give or take a slack.
my $reusable_sql = q{SELECT count(*) FILTER (WHERE usagecount = 0
		AND pinning_backends = 0) + count(*) FILTER (WHERE relfilenode IS NULL)
	FROM pg_buffercache};
plant_dirty_buffers($node, 'planted', scale => $scale);
my $before = $node->safe_psql('postgres', $reusable_sql);
# (with lru_maxpages = 0 no cycle scans: the counter stands still until
# the lap begins)
my $reusable0 =
  $node->safe_psql('postgres', 'SELECT buffers_reusable FROM bgw_jit_stats');
set_conf($node, 'bgw_jit.lru_maxpages = -1');
$node->poll_query_until('postgres',
	"SELECT bufs_ahead = $nbuffers FROM bgw_jit_stats")
  or die 'the cleaner did not get a lap ahead';
my $after = $node->safe_psql('postgres', $reusable_sql);
my $lap = query_hash($node, qq{
	SELECT count(*) AS cycles, sum(scanned) AS scanned,
		   sum(reusable_found) AS reusable_found, sum(written) AS written,
		   sum(strategy_delta) AS moved,
		   (SELECT buffers_reusable FROM bgw_jit_stats) - $reusable0 AS counted
	FROM bgw_jit_history
	WHERE at >= (SELECT conf_load_time FROM bgw_jit_stats)});
note("pg_buffercache: $before reusable before, $after after; the scan: "
	  . "$lap->{scanned} scanned in $lap->{cycles} cycles, "
	  . "$lap->{reusable_found} reusable, $lap->{written} written");
# (the idle pass spreads its writes over cycles, during which this
# test's own statements move the hand a little)
ok( $lap->{scanned} >= $nbuffers
	  && $lap->{scanned} <= $nbuffers + $lap->{moved} + 50,
	"the scan went once round the pool ($lap->{scanned} buffers, "
	  . "the hand moving $lap->{moved})");
# (what our own sessions allocate meanwhile moves the hand by a few
# buffers: each step can make one more buffer reusable, and each buffer
# the scan visits twice - those at the lap's end - count once more)
my $slack = 10 + 2 * ($lap->{scanned} - $nbuffers);
my ($low, $high) = $before < $after ? ($before, $after) : ($after, $before);
ok( $lap->{reusable_found} >= $low - $slack
	  && $lap->{reusable_found} <= $high + $slack,
	"and found $lap->{reusable_found} reusable buffers, as pg_buffercache "
	  . "shows ($before before, $after after, give or take $slack)");
ok($lap->{reusable_found} < $lap->{scanned} - $slack
	  && $lap->{reusable_found} > $lap->{written} + $slack,
	'fewer than it scanned, more than it wrote (clean ones count too)');
ok( $lap->{counted} >= $low - $slack
	  && $lap->{counted} <= $high + $slack,
	"bgw_jit_stats.buffers_reusable rose by $lap->{counted} over the lap, "
	  . 'as pg_buffercache shows too');

# --- hibernations, and sleep_ms NULL while hibernating ---
# Every statement wakes an idle worker (that is what the hooks are for), so
# it is watched from a function whose loop runs no statement: plpgsql
# evaluates a plain expression such as bgw_jit_stats() or pg_sleep()
# without the executor's start, which is where the hook sits.  With delay
# 100 ms the hibernating worker's 1 s sleep is plain in the history.
set_conf($node, 'bgw_jit.delay = 100ms');
$node->safe_psql('postgres', q{
	CREATE FUNCTION watch_hibernation(timeout float8) RETURNS text
	LANGUAGE plpgsql AS $$
	DECLARE
		r record;
		h0 bigint;
		seen timestamptz;
		at_seen timestamptz;
		sleep_seen text;
		deadline timestamptz := clock_timestamp() + make_interval(secs => timeout);
		d text;
	BEGIN
		r := bgw_jit_stats();
		h0 := r.hibernations;
		LOOP
			r := bgw_jit_stats();
			IF seen IS NULL AND r.hibernations > h0 THEN
				seen := clock_timestamp();
				at_seen := r.last_cycle_at;
				sleep_seen := coalesce(r.sleep_ms::text, 'NULL');
			END IF;
			-- then a cycle later, still hibernating
			IF seen IS NOT NULL AND r.last_cycle_at > at_seen THEN
				RETURN format('%s %s %s %s %s', h0, r.hibernations, sleep_seen,
							  coalesce(r.sleep_ms::text, 'NULL'), at_seen);
			END IF;
			IF clock_timestamp() > deadline THEN
				RETURN 'timeout';
			END IF;
			d := pg_sleep(0.02)::text;
		END LOOP;
	END $$});
my $watch = $node->safe_psql('postgres', 'SELECT watch_hibernation(60)');
my ($h0, $h1, $sleep_seen, $sleep_next, $at_seen) = split / /, $watch, 5;
isnt($watch, 'timeout', "idle, the worker hibernated ($watch)");
cmp_ok($h1 // 0, '>', $h0 // 0, "hibernations rose ($h0 -> $h1)");
is($sleep_seen, 'NULL', 'sleep_ms is NULL once it hibernates');
is($sleep_next, 'NULL', 'and still at its next cycle');
my $next = query_hash($node, qq{
	SELECT elapsed_us FROM bgw_jit_history
	WHERE at > '$at_seen' ORDER BY cycle LIMIT 1});
cmp_ok($next->{elapsed_us}, '>=', 900_000,
	"which came after a long sleep ($next->{elapsed_us} us; delay is 100 ms)");
my $load = start_update_load($node, clients => 1, seconds => 3, scale => $scale);
ok( $node->poll_query_until('postgres',
		'SELECT sleep_ms IS NOT NULL AND sleep_ms <= 100 FROM bgw_jit_stats'),
	'under load sleep_ms is the planned sleep again');
$load->finish;

# --- redirtied_pct ---
# NULL until a write is judged; then 100 * redirtied / (evicted +
# redirtied).  The all-buffers scan writes a table's pages whatever their
# usage count: dirtied again they are judged redirtied, dropped evicted.
set_conf($node, "bgw_jit.strategy = 'jit+all'", 'bgw_jit.lru_maxpages = 0',
	'bgw_jit.all_percent = 100', 'bgw_jit.all_maxpages = 100000');
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
wait_cycles(3);
is($node->safe_psql('postgres',
		'SELECT redirtied_pct IS NULL AND buf_clean_evicted + buf_clean_redirtied = 0 FROM bgw_jit_stats'),
	't', 'redirtied_pct is NULL before any write is judged');
$node->safe_psql('postgres', q{
	CREATE TABLE judged (id int, v int, pad text) WITH (fillfactor = 10);
	INSERT INTO judged SELECT g, 0, repeat('x', 500) FROM generate_series(1, 100) g});
my $judged_sql = q{SELECT count(*) FILTER (WHERE isdirty) = 0 FROM pg_buffercache
	WHERE relfilenode = pg_relation_filenode('judged') AND relforknumber = 0};
$node->poll_query_until('postgres', $judged_sql) or die 'pages not written';
$node->safe_psql('postgres', 'UPDATE judged SET v = v + 1');
$node->poll_query_until('postgres',
	'SELECT buf_clean_redirtied >= 100 FROM bgw_jit_stats')
  or die 'no redirtied judgements';
$node->poll_query_until('postgres', $judged_sql) or die 'pages not written';
my $e0 = $node->safe_psql('postgres', 'SELECT buf_clean_evicted FROM bgw_jit_stats');
$node->safe_psql('postgres', 'DROP TABLE judged');
$node->poll_query_until('postgres',
	"SELECT buf_clean_evicted >= $e0 + 100 FROM bgw_jit_stats")
  or die 'no evicted judgements';
my $j = query_hash($node, q{
	SELECT buf_clean_evicted AS e, buf_clean_redirtied AS r, redirtied_pct AS pct,
		   round(100.0 * buf_clean_redirtied
				 / (buf_clean_evicted + buf_clean_redirtied), 2) AS expected
	FROM bgw_jit_stats});
ok($j->{r} >= 100 && $j->{e} >= 100,
	"$j->{r} writes judged redirtied, $j->{e} evicted");
is($j->{pct}, $j->{expected}, "redirtied_pct is 100 * redirtied / judged ($j->{pct})");
ok($j->{pct} > 0 && $j->{pct} < 100, 'strictly between 0 and 100');

# --- after a restart of the worker the frontier is where it says ---
# The clock hand's position is counted from buffer 0 of pass 0 as the
# worker first reads it (once it was counted from the worker's first
# cycle, so that a worker started again with the hand elsewhere scanned
# that far away from it).  With an idle pool and the cleaner a lap ahead,
# next_to_clean is strategy_buf_id + bufs_ahead.
set_conf($node, "bgw_jit.strategy = 'jit'", 'bgw_jit.lru_maxpages = -1');
# One row of bgw_jit_stats is one cycle's, so the lead and the frontier are
# read together; polled, as anything that moves the hand in between starts
# a cycle that scans again.  Were the hand counted from the worker's first
# cycle, the frontier would stay off by where the hand was then, and the
# poll would run out.
my $frontier_sql = qq{SELECT bufs_ahead = $nbuffers
	AND next_to_clean = (strategy_buf_id + bufs_ahead) % $nbuffers
	FROM bgw_jit_stats};
ok($node->poll_query_until('postgres', $frontier_sql),
	'the frontier is where bufs_ahead says (worker started with the hand at 0)')
  or diag(frontier_state());
update_load($node, clients => 1, seconds => 1, scale => $scale);
kill 'TERM', $pid;
wait_for_exit($pid) or die 'the worker did not exit';
$pid = wait_for_worker($node, $pid);
$node->poll_query_until('postgres',
	"SELECT bufs_ahead = $nbuffers AND strategy_buf_id <> 0 FROM bgw_jit_stats")
  or die 'the restarted cleaner did not get a lap ahead';
ok($node->poll_query_until('postgres', $frontier_sql),
	'after a restart too (the worker places the hand where it first sees it)')
  or diag(frontier_state());

$node->stop;
done_testing();

# What a failed frontier check saw: the published state and the last cycles.
sub frontier_state
{
	return $node->safe_psql('postgres', q{
	SELECT format('stats: strategy_buf_id %s next_to_clean %s bufs_ahead %s last_cycle_at %s',
				  strategy_buf_id, next_to_clean, bufs_ahead, last_cycle_at)
	  FROM bgw_jit_stats
	UNION ALL
	SELECT * FROM (SELECT format('cycle %s at %s strategy_delta %s recent_alloc %s bufs_ahead %s scanned %s written %s sliced %s woken %s',
				  cycle, at, strategy_delta, recent_alloc, bufs_ahead, scanned, written, sliced, woken)
	  FROM bgw_jit_history ORDER BY cycle DESC LIMIT 8) h});
}
