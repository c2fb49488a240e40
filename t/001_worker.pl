# The live worker under load: it cleans, it counts allocations right, it
# obeys reloads, it restarts, it never raises usage counts, it idles.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 10;
my $node = new_bgw_jit_node('worker', <<'EOC');
bgw_jit.delay = 20ms
bgw_jit.lru_multiplier = 4.0
bgw_jit.lru_maxpages = 1000
EOC
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres',
	'CREATE EXTENSION bgw_jit; CREATE EXTENSION pg_buffercache');

# --- the worker is there, as its own backend type ---
my $pid = wait_for_worker($node);
ok($pid, "worker runs with backend_type bgw_jit (pid $pid)");

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

# Backend writes and worker writes over one load run, from a reset.
sub measured_run
{
	my ($label) = @_;
	$node->safe_psql('postgres',
		"SELECT pg_stat_reset_shared('bgwriter'), bgw_jit_reset()");
	my $before = query_hash($node,
		'SELECT sum(blks_read) AS blks_read FROM pg_stat_database');
	update_load($node, clients => 2, seconds => 8, scale => $scale);
	settle_stats($node);
	my $r = query_hash($node, q{
		SELECT s.buf_clean, s.buf_backend, s.buf_alloc, s.cleaner_pct,
			   b.buffers_alloc, b.buffers_clean,
			   (SELECT sum(blks_read) FROM pg_stat_database) AS blks_read,
			   } . core_backend_writes_sql($node) . q{ AS core_backend
		FROM bgw_jit_stats s, pg_stat_bgwriter b});
	$r->{blks_read} -= $before->{blks_read};
	note(sprintf('%s: buf_clean %d, buf_backend %d, buf_alloc %d, '
		  . 'cleaner_pct %s; server: backend writes %d, alloc %d',
		  $label, @$r{qw(buf_clean buf_backend buf_alloc)},
		  $r->{cleaner_pct} // 'null', @$r{qw(core_backend buffers_alloc)}));
	return $r;
}

# --- cleaning under load beats no cleaning, in the same test ---
my $on = measured_run('enabled');
$node->append_conf('postgresql.conf', 'bgw_jit.enabled = off');
$node->reload;
my $off = measured_run('disabled');

cmp_ok($on->{buf_clean}, '>', 1000, 'worker wrote buffers under load');
is($off->{buf_clean}, 0, 'disabled worker wrote nothing');
cmp_ok($off->{buf_backend}, '>', 1000, 'without cleaning, backends write');
cmp_ok($on->{buf_backend}, '<', 0.5 * $off->{buf_backend},
	"backend writes with the worker ($on->{buf_backend}) are well below "
	  . "without it ($off->{buf_backend})");
cmp_ok($on->{cleaner_pct}, '>', 50, "cleaner_pct $on->{cleaner_pct} > 50");
is($on->{buffers_clean}, 0, 'the built-in LRU scan stayed off');

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

	my $others = core_backend_writes_sql($node, without_workers => 1);
	my $worker = core_backend_writes_sql($node, only => 'background worker');
	$node->append_conf('postgresql.conf', 'bgw_jit.enabled = off');
	$node->reload;
	$node->safe_psql('postgres', 'CHECKPOINT');
	settle_stats($node);
	my $base = query_hash($node,
		"SELECT bgw_jit_reset(), $others AS others, $worker AS worker");
	# held back to a few writes a cycle, so that backends write too
	$node->append_conf('postgresql.conf',
		"bgw_jit.enabled = on\nbgw_jit.lru_maxpages = 10");
	$node->reload;
	update_load($node, clients => 2, seconds => 5, scale => $scale);
	$node->safe_psql('postgres', 'CHECKPOINT');
	$node->append_conf('postgresql.conf', 'bgw_jit.lru_maxpages = 1000');
	$node->reload;
	my $figures = "SELECT buf_clean + buf_all_clean AS own, buf_backend,
		$others - $base->{others} AS others,
		$worker - $base->{worker} AS worker FROM bgw_jit_stats";
	$node->poll_query_until('postgres',
		"SELECT own = worker AND buf_backend = others FROM ($figures) f");
	my $got = query_hash($node, $figures);
	cmp_ok($got->{buf_backend}, '>', 0, 'backends wrote during the load');
	is($got->{buf_backend}, $got->{others},
		'buf_backend equals the writes pg_stat_io counts for other processes');
	cmp_ok($got->{own}, '>', 0, 'the worker wrote during the load');
	is($got->{worker}, $got->{own},
		"pg_stat_io's background-worker writes are the worker's own");
}

# --- allocation counting: exact, and core's counter left intact ---
for my $r ($on, $off)
{
	my $diff = abs($r->{buf_alloc} - $r->{buffers_alloc});
	cmp_ok($diff, '<=', 0.01 * $r->{buffers_alloc},
		"buf_alloc $r->{buf_alloc} within 1% of buffers_alloc "
		  . "$r->{buffers_alloc}");
	# every block read into shared buffers took an allocation: had the
	# worker consumed the shared counter, buffers_alloc would fall short
	cmp_ok($r->{buffers_alloc}, '>=', $r->{blks_read},
		"buffers_alloc $r->{buffers_alloc} covers the $r->{blks_read} "
		  . 'blocks read');
}

# --- reload: lru_maxpages = 0 stops writes at once ---
$node->append_conf('postgresql.conf',
	"bgw_jit.enabled = on\nbgw_jit.lru_maxpages = 0");
$node->reload;
usleep(500_000);
my $c0 = query_hash($node, 'SELECT buf_clean FROM bgw_jit_stats');
update_load($node, clients => 2, seconds => 3, scale => $scale);
my $c1 = query_hash($node, 'SELECT buf_clean FROM bgw_jit_stats');
is($c1->{buf_clean}, $c0->{buf_clean},
	'after reload with lru_maxpages = 0 the worker writes nothing');

$node->append_conf('postgresql.conf', 'bgw_jit.lru_maxpages = 1000');
$node->reload;
usleep(500_000);
update_load($node, clients => 2, seconds => 3, scale => $scale);
my $c2 = query_hash($node, 'SELECT buf_clean FROM bgw_jit_stats');
cmp_ok($c2->{buf_clean}, '>', $c1->{buf_clean},
	'raising lru_maxpages by reload resumes cleaning');

# --- the history replays exactly through the estimator ---
my $replay = $node->safe_psql(
	'postgres', q{
	WITH h AS (SELECT * FROM bgw_jit_history ORDER BY cycle DESC LIMIT 200),
		 o AS (SELECT * FROM h ORDER BY cycle),
		 first AS (SELECT * FROM o LIMIT 1),
		 rest AS (SELECT * FROM o OFFSET 1),
		 r AS (
			SELECT r.* FROM first, bgw_jit_replay(
				(SELECT array_agg(recent_alloc ORDER BY cycle) FROM rest),
				(SELECT array_agg(strategy_delta ORDER BY cycle) FROM rest),
				(SELECT array_agg(bufs_ahead::bigint ORDER BY cycle) FROM rest),
				(SELECT array_agg(scanned::bigint ORDER BY cycle) FROM rest),
				(SELECT array_agg(reusable_found::bigint ORDER BY cycle) FROM rest),
				lru_multiplier => current_setting('bgw_jit.lru_multiplier')::float8,
				smoothing_samples => current_setting('bgw_jit.smoothing_samples')::int,
				delay => 20,
				scan_whole_pool_seconds => 120,
				start_smoothed_alloc => first.smoothed_alloc,
				start_smoothed_density => first.smoothed_density) r)
	SELECT count(*),
		   count(*) FILTER (WHERE rest.smoothed_alloc = r.smoothed_alloc
							  AND rest.smoothed_density = r.smoothed_density
							  AND rest.upcoming_alloc_est = r.upcoming_alloc_est)
	FROM (SELECT row_number() OVER (ORDER BY cycle) AS n, * FROM rest) rest
	JOIN r ON r.cycle = rest.n});
my ($replayed, $matching) = split /\|/, $replay;
cmp_ok($replayed, '>', 50, "replayed $replayed cycles of history");
is($matching, $replayed, 'replay reproduces every cycle exactly');

# --- cleaning never raises a buffer's usage count ---
# Build dirty, usage-0 buffers with the worker off, then let it lap the
# pool with no other activity and look at the same buffers again.
$node->append_conf('postgresql.conf',
	"bgw_jit.enabled = off\nbgw_jit.scan_whole_pool_seconds = 1");
$node->reload;
usleep(500_000);
update_load($node, clients => 2, seconds => 3, scale => $scale);
my %probe = map { my ($b, $rel, $blk) = split /\|/; ($b => "$rel/$blk") }
  split /\n/, $node->safe_psql('postgres', q{
	SELECT bufferid, relfilenode, relblocknumber
	FROM pg_buffercache
	WHERE isdirty AND usagecount = 0 AND pinning_backends = 0});
my $probed = scalar keys %probe;
cmp_ok($probed, '>', 20, "$probed dirty usage-0 buffers to watch");
my $written_before = query_hash($node, 'SELECT buf_clean FROM bgw_jit_stats');
$node->append_conf('postgresql.conf', 'bgw_jit.enabled = on');
$node->reload;
sleep 4;
my $written_after = query_hash($node, 'SELECT buf_clean FROM bgw_jit_stats');
my ($same_page, $cleaned, $raised) = (0, 0, 0);
for my $row (split /\n/, $node->safe_psql('postgres', q{
	SELECT bufferid, relfilenode, relblocknumber, isdirty, usagecount
	FROM pg_buffercache}))
{
	my ($b, $rel, $blk, $dirty, $usage) = split /\|/, $row;
	next unless defined $probe{$b} && $probe{$b} eq "$rel/$blk";
	# still the same page: only the worker can have written it
	$same_page++;
	$cleaned++ if $dirty eq 'f';
	$raised++ if $usage > 0;
}
# our own queries allocate a few buffers, evicting some watched ones
cmp_ok($same_page, '>=', 0.9 * $probed,
	"$same_page of $probed watched buffers kept their pages");
is($cleaned, $same_page, 'the worker cleaned every one of them');
is($raised, 0, 'and raised none of their usage counts');
cmp_ok($written_after->{buf_clean} - $written_before->{buf_clean},
	'>=', $cleaned, 'buf_clean counted those writes');

# --- an idle server's worker backs off and does almost nothing ---
$node->poll_query_until('postgres',
	'SELECT hibernations > 0 FROM bgw_jit_stats')
  or die 'worker never went idle';
my $t0 = $node->safe_psql('postgres', 'SELECT now()');
my $i0 = query_hash($node, 'SELECT cycles, buf_clean FROM bgw_jit_stats');
sleep 20;
my $i1 = query_hash($node, qq{
	SELECT s.cycles, s.buf_clean,
		   extract(epoch FROM now() - '$t0'::timestamptz) AS secs,
		   (SELECT coalesce(sum(cpu_us), 0) FROM bgw_jit_history
			WHERE at > '$t0') AS cpu_us
	FROM bgw_jit_stats s});
my $idle_cycles = $i1->{cycles} - $i0->{cycles};
note(sprintf('idle: %d cycles and %d us of CPU in %.1f s',
	$idle_cycles, $i1->{cpu_us}, $i1->{secs}));
# awake every 20 ms this would be ~1000 cycles; backed off, about one a
# second after a few cycles of doubling
cmp_ok($idle_cycles, '<=', 2 * $i1->{secs} + 10,
	"idle worker ran $idle_cycles cycles in $i1->{secs} s");
cmp_ok($i1->{buf_clean} - $i0->{buf_clean}, '<=', 100,
	'idle worker wrote next to nothing');

# --- a WARNING when the built-in LRU scan is on as well ---
my $log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'bgwriter_lru_maxpages = 100');
$node->reload;
ok( $node->wait_for_log(
		qr/WARNING:  the built-in background writer also cleans buffers \(bgwriter_lru_maxpages = 100\)\n.*HINT:  Set bgwriter_lru_maxpages = 0/,
		$log_offset),
	'reload with bgwriter_lru_maxpages > 0 warns with a hint');
$node->append_conf('postgresql.conf', 'bgwriter_lru_maxpages = 0');
$node->reload;

# --- terminated, the worker comes back ---
$pid = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
my $new_pid = wait_for_worker($node, $pid);
ok($new_pid, "worker restarted after pg_terminate_backend ($pid -> $new_pid)");

# --- and a shutdown is prompt ---
my $t_stop = time;
$node->stop('fast');
cmp_ok(time - $t_stop, '<', 30, 'fast shutdown completes promptly');

done_testing();
