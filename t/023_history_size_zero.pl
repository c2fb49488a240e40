# bgw_jit.history_size = 0: no history is kept, yet every view works (the
# history returns no rows) and the worker cleans as before, shown by the
# buffers it cleans (pg_buffercache), not by its own counters; a clean
# restart keeps the statistics.
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
	'history_zero',
	scale => $scale,
	conf => "bgw_jit.history_size = 0\n",
	extensions => ['pg_buffercache']);
is($node->safe_psql('postgres', 'SHOW bgw_jit.history_size'),
	'0', 'history_size is 0');

# --- the worker cleans ---
my $planted = plant_dirty_buffers($node, 'planted', scale => $scale);
cmp_ok($planted, '>=', 100, "$planted dirty usage-0 pages planted");
my $watched = watched_sql('planted');
set_conf($node, 'bgw_jit.lru_maxpages = -1');
ok($node->poll_query_until('postgres', "SELECT dirty = 0 FROM ($watched) w"),
	'the worker cleaned every planted page that kept its buffer');
my $w = query_hash($node, $watched);
cmp_ok($w->{cleaned}, '>=', 0.5 * $planted,
	"$w->{cleaned} of $planted planted pages cleaned in place");

# --- under load: the views work, the history stays empty ---
# The writes bgw_jit_stats counts are set against the kernel's count of
# the writes of the cleaner and its writer processes: a page is one write
# call of 8 kB (WAL flushed first adds calls and bytes), so the pages are
# at most the smaller of the two.  (The kernel's count is read first and
# last, so that it covers every write the counter does.)
wait_for_worker($node);
my $io0 = worker_io($node);
my $s0 = query_hash($node, 'SELECT cycles, buf_clean FROM bgw_jit_stats');
update_load($node, clients => 2, seconds => 2, scale => $scale);
my $s = query_hash($node, q{
	SELECT cycles, buf_clean, last_cycle_at IS NOT NULL AS cycled,
		   (SELECT count(*) FROM bgw_jit_history) AS history,
		   (SELECT count(*) FROM bgw_jit_history()) AS history_function
	FROM bgw_jit_stats});
my $io1 = worker_io($node);
my $kernel_pages = int(($io1->{wchar} - $io0->{wchar}) / 8192);
$kernel_pages = $io1->{syscw} - $io0->{syscw}
  if $io1->{syscw} - $io0->{syscw} < $kernel_pages;
my $counted = $s->{buf_clean} - $s0->{buf_clean};
cmp_ok($s->{cycles}, '>', $s0->{cycles},
	'bgw_jit_stats goes on counting cycles (' . ($s->{cycles} - $s0->{cycles}) . ')');
cmp_ok($counted, '>', 0, "and writes ($counted)");
cmp_ok($counted, '<=', $kernel_pages,
	"no more than the kernel saw the worker write ($kernel_pages pages at most)");
is($s->{history}, 0, 'bgw_jit_history has no rows');
is($s->{history_function}, 0, 'nor has bgw_jit_history()');
my ($ret, $out, $err) = $node->psql('postgres',
	'SELECT severity, setting FROM bgw_jit_advice');
is($ret, 0, 'bgw_jit_advice works') or diag($err);
unlike($out, qr/^warning\|$/m, 'and does not call the worker stopped');
($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM bgw_jit_bgwriter');
is($ret, 0, 'bgw_jit_bgwriter works') or diag($err);

# --- a clean restart keeps the statistics ---
my $before = query_hash($node, 'SELECT cycles, stats_reset FROM bgw_jit_stats');
my $offset = -s $node->logfile;
$node->restart;
my $after = query_hash($node, q{
	SELECT cycles, stats_reset, (SELECT count(*) FROM bgw_jit_history) AS history
	FROM bgw_jit_stats});
is($after->{stats_reset}, $before->{stats_reset}, 'stats_reset kept across a clean restart');
cmp_ok($after->{cycles}, '>=', $before->{cycles}, 'and the counters');
is($after->{history}, 0, 'the history is still empty');
ok(!$node->log_contains('ignoring bgw_jit statistics file', $offset),
	'the statistics file was read back without complaint');

$node->stop;
done_testing();
