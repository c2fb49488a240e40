# The three cleaning strategies: each writes, they switch live under load,
# jit leaves buffers in use alone while jit+all writes them, and the
# judgement of earlier writes tells a page dirtied again from one that
# left its buffer.
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
my $node = start_bgw_jit_node(
	'strategies',
	scale => $scale,
	busy => 1,
	conf => <<'EOC',
bgw_jit.delay = 50ms
bgw_jit.all_percent = 5
bgw_jit.all_maxpages = 200
bgw_jit.history_size = 10000
EOC
	extensions => ['pg_buffercache']);
my $nbuffers = $node->safe_psql('postgres',
	"SELECT setting FROM pg_settings WHERE name = 'shared_buffers'");

# --- switching live under load: every strategy writes ---
# The writes are counted by the kernel: the worker's wchar in
# /proc/PID/io grows by ten pages (its WAL writes, if any, are made for
# pages it writes).  For jit+all the LRU scan is off, so that the writes
# are the all-buffers scan's.
my $pid = wait_for_worker($node);
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
my $load = start_update_load($node, clients => 2, seconds => 10,
	scale => $scale);
for my $case (['lap', 1000], ['jit+all', 0], ['jit', 1000])
{
	my ($strategy, $maxpages) = @$case;
	my $t = set_conf($node, "bgw_jit.strategy = '$strategy'",
		"bgw_jit.lru_maxpages = $maxpages");
	my $io0 = worker_io($node);
	ok( $node->poll_query_until(
			'postgres', qq{
			SELECT count(*) > 0 FROM bgw_jit_history
			WHERE at > '$t' AND strategy = '$strategy'}),
		"switched to $strategy by reload (the history's strategy)");
	my $bytes = 0;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		$bytes = worker_io($node)->{wchar} - $io0->{wchar};
		last if $bytes >= 10 * 8192;
		usleep(100_000);
	}
	cmp_ok($bytes, '>=', 10 * 8192,
		"$strategy: the kernel saw the worker write $bytes bytes"
		  . ($maxpages ? '' : ' with the LRU scan off'));
}
$load->finish;
set_conf($node, 'bgw_jit.lru_maxpages = 1000');

# ---- planted usage-0 pages for the full jit scan below (audit, part B) ----
# "jit left every hot page dirty" would hold for a worker that writes
# nothing: dirty pages of usage count 0, left by a load with the LRU scan
# off (lru_maxpages = 0, as the scan below wants anyway), must be cleaned
# by that same scan.
my $planted = plant_dirty_buffers($node, 'planted', scale => $scale);
cmp_ok($planted, '>=', 100, "$planted dirty usage-0 pages planted");
# ---- end of planted pages ----

# --- jit leaves buffers in use alone; jit+all writes them ---
# A small hot table, one row per page (fillfactor 10) so that every UPDATE
# of all rows dirties every page again (HOT, in place): every page dirty,
# with a usage count above zero.
$node->safe_psql('postgres', q{
	CREATE TABLE hot (id int PRIMARY KEY, v int, pad text)
		WITH (fillfactor = 10);
	INSERT INTO hot SELECT g, 0, repeat('x', 500)
		FROM generate_series(1, 200) g;
	UPDATE hot SET v = v + 1; UPDATE hot SET v = v + 1});
my $hot_sql = q{
	SELECT count(*) AS pages,
		   count(*) FILTER (WHERE isdirty) AS dirty,
		   min(usagecount) AS min_usage
	FROM pg_buffercache
	WHERE relfilenode = pg_relation_filenode('hot') AND relforknumber = 0};
# Restart the LRU scan at the clock hand (a cycle with lru_maxpages = 0
# does that); with the pool idle it then scans all of it within a second.
set_conf($node, 'bgw_jit.lru_maxpages = 0');
my $scanned =
  $node->safe_psql('postgres', 'SELECT buffers_scanned FROM bgw_jit_stats');
set_conf($node, 'bgw_jit.lru_maxpages = 1000',
	'bgw_jit.scan_whole_pool_seconds = 1');
$node->poll_query_until('postgres',
	"SELECT buffers_scanned >= $scanned + $nbuffers FROM bgw_jit_stats")
  or die 'jit did not scan the whole pool';
my $jit_hot = query_hash($node, $hot_sql);
cmp_ok($jit_hot->{min_usage}, '>', 0, 'hot pages are in use (usage > 0)');
is($jit_hot->{dirty}, $jit_hot->{pages},
	"after a full scan jit left all $jit_hot->{pages} hot pages dirty");

# ---- planted usage-0 pages: cleaned by the same scan (audit, part B) ----
my $cold = query_hash($node, watched_sql('planted'));
cmp_ok($cold->{same_page}, '>=', 0.5 * $planted,
	"$cold->{same_page} of $planted planted pages kept their buffers");
is($cold->{dirty}, 0,
	"and that scan cleaned every one of them ($cold->{cleaned} written in place)");
# ---- end of planted pages ----

# From here on the LRU scan is off: only the all-buffers scan writes.
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
set_conf($node, "bgw_jit.strategy = 'jit+all'", 'bgw_jit.lru_maxpages = 0',
	'bgw_jit.all_percent = 100', 'bgw_jit.all_maxpages = 100000');
ok( $node->poll_query_until(
		'postgres', "SELECT dirty = 0 FROM ($hot_sql) h"),
	'jit+all cleaned every hot page');
cmp_ok(query_hash($node, $hot_sql)->{min_usage},
	'>', 0, 'and they kept their usage counts');

# --- judging earlier writes ---
# Every hot page, cleaned, is dirtied again: each write is judged
# "redirtied" when the scan next meets the page.
my $pages = query_hash($node, $hot_sql)->{pages};
cmp_ok($pages, '>=', 200, "$pages hot pages");
my $j0 = query_hash($node,
	'SELECT buf_clean_redirtied, buf_clean_evicted FROM bgw_jit_stats');
$node->safe_psql('postgres', 'UPDATE hot SET v = v + 1');
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT buf_clean_redirtied >= $j0->{buf_clean_redirtied} + $pages
		FROM bgw_jit_stats}),
	"the $pages hot pages, cleaned and dirtied again, are judged redirtied");

# Once cleaned again and then dropped, their buffers are invalidated and
# reused: from the buffers alone that cannot be told from an eviction, and
# doc/internals.md says they count as evicted.
ok( $node->poll_query_until(
		'postgres', "SELECT dirty = 0 FROM ($hot_sql) h"),
	'jit+all cleaned the hot pages again');
my $j1 = query_hash($node,
	'SELECT buf_clean_redirtied, buf_clean_evicted FROM bgw_jit_stats');
$node->safe_psql('postgres', 'DROP TABLE hot');
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT buf_clean_evicted >= $j1->{buf_clean_evicted} + $pages
		FROM bgw_jit_stats}),
	"a dropped table's cleaned pages are judged evicted");
my $j2 = query_hash($node,
	'SELECT buf_clean_redirtied, buf_clean_evicted,
			buf_clean + buf_all_clean AS written
	 FROM bgw_jit_stats');
cmp_ok($j2->{buf_clean_evicted} + $j2->{buf_clean_redirtied},
	'<=', $j2->{written}, 'no more judgements than writes since the reset');

check_integrity($node, 'after the strategies');
$node->stop;
done_testing();
