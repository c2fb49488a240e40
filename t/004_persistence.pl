# Statistics survive a clean restart, are reset after a crash or an
# immediate shutdown, a damaged or foreign stats file is ignored, and a
# failure to write the file at shutdown is reported once and harms
# nothing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

# A short history keeps the whole file within one stdio buffer (see the
# failed write below).
my $history_size = 10;
my $node = start_bgw_jit_node(
	'persist',
	scale => 5,
	conf => "bgw_jit.delay = 20ms\nbgw_jit.history_size = $history_size\n");

my $stats_sql = q{SELECT s.cycles, s.buf_clean, s.buf_alloc, s.stats_reset,
	(SELECT count(*) FROM bgw_jit_history) AS history FROM bgw_jit_stats s};
my $stat_file = $node->data_dir . '/pg_stat/bgw_jit.stat';
# The history's rows, as text, oldest first.
my $history_sql =
  q{SELECT string_agg(cycle || ' ' || at, ', ' ORDER BY cycle) FROM bgw_jit_history};

# Load until the worker has written (one round may do little on a busy
# machine), so that what is kept is more than zeros.
my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
do
{
	update_load($node, clients => 1, seconds => 2, scale => 5);
} until $node->safe_psql('postgres', 'SELECT buf_clean > 0 FROM bgw_jit_stats') eq 't'
  || time > $deadline;

# Disabled, the worker adds no cycle to the counters or the history (the
# 10-slot ring would otherwise refill within 0.2 s of the restart), so
# what the restart keeps can be compared exactly.
set_conf($node, 'bgw_jit.enabled = off');
my $before = query_hash($node, $stats_sql);
my $history_before = $node->safe_psql('postgres', $history_sql);
cmp_ok($before->{cycles}, '>', 0, 'worker has cycled');
cmp_ok($before->{buf_clean}, '>', 0, 'and written');
cmp_ok($before->{buf_alloc}, '>', 0, 'allocations counted');
is($before->{history}, $history_size, 'the history is full');

# --- clean restart keeps everything ---
$node->restart;
my $after = query_hash($node, $stats_sql);
is($after->{stats_reset}, $before->{stats_reset}, 'stats_reset kept');
for my $col (qw(cycles buf_clean history))
{
	is($after->{$col}, $before->{$col},
		"$col kept across a clean restart ($before->{$col})");
}
# (allocations go on being counted: the restart empties the pool)
cmp_ok($after->{buf_alloc}, '>=', $before->{buf_alloc},
	"buf_alloc kept across a clean restart ($before->{buf_alloc} -> $after->{buf_alloc})");
is($node->safe_psql('postgres', $history_sql), $history_before,
	'the same history rows (cycle, at) after the restart');
ok(!-e $stat_file, 'the file is removed once loaded');
set_conf($node, 'bgw_jit.enabled = on');

# --- damaged or foreign files are ignored with a LOG, never trusted ---
sub restart_with_file
{
	my ($label, $mangle, $expect) = @_;
	$node->stop;
	ok(-s $stat_file, "$label: file written at shutdown");
	$mangle->();
	my $offset = -s $node->logfile;
	$node->start;
	ok( $node->wait_for_log(
			qr/LOG:  ignoring bgw_jit statistics file "pg_stat\/bgw_jit.stat": $expect/,
			$offset),
		"$label: ignored ($expect)");
	my $now = query_hash($node, $stats_sql);
	isnt($now->{stats_reset}, $before->{stats_reset},
		"$label: statistics start afresh");
	# (the file's cycles began before this server started; counting the
	# history against the counters instead would race with new cycles)
	is( $node->safe_psql(
			'postgres',
			'SELECT count(*) FROM bgw_jit_history WHERE at < pg_postmaster_start_time()'),
		'0',
		"$label: history holds only new cycles");
	ok(!-e $stat_file, "$label: file removed");
	return;
}

restart_with_file('truncated', sub { truncate($stat_file, 30) or die $! },
	'file is truncated');
restart_with_file(
	'flipped byte',
	sub {
		open(my $fh, '+<:raw', $stat_file) or die $!;
		seek($fh, 40, 0);
		read($fh, my $b, 1);
		seek($fh, 40, 0);
		print $fh chr(ord($b) ^ 0xff);
		close $fh;
	},
	'checksum mismatch');
restart_with_file(
	'foreign file',
	sub {
		open(my $fh, '>:raw', $stat_file) or die $!;
		print $fh 'x' x 4096;
		close $fh;
	},
	'not a statistics file of this bgw_jit version');
restart_with_file(
	'trailing garbage',
	sub {
		open(my $fh, '>>:raw', $stat_file) or die $!;
		print $fh 'extra';
		close $fh;
	},
	'file has trailing data');

# --- a write that fails at shutdown: one LOG, file handle closed once ---
# The file's few hundred bytes sit in stdio's buffer until FreeFile()
# closes it, so writing to /dev/full fails there, not in fwrite().
symlink('/dev/full', "$stat_file.tmp") or die "symlink: $!";
my $offset = -s $node->logfile;
ok($node->stop('fast', fail_ok => 1), 'the server stops cleanly');
my $log = slurp_file($node->logfile, $offset);
like($log,
	qr/LOG:  could not write file "pg_stat\/bgw_jit.stat.tmp": No space left on device/,
	'a failed write of the statistics file is logged');
unlike($log, qr/FreeFile|double free|terminated by signal/,
	'and the file is closed only once');
ok(!-l "$stat_file.tmp" && !-e $stat_file, 'no statistics file is left');
$node->start;

# --- an immediate shutdown (a crash, for statistics) resets them ---
update_load($node, clients => 1, seconds => 2, scale => 5);
my $pre_crash = query_hash($node, $stats_sql);
# (a checkpoint first: the worker runs during crash recovery and counts
# the allocations of the redo, which for the whole load can exceed what
# it had counted before)
$node->safe_psql('postgres', 'CHECKPOINT');
$node->stop('immediate');
ok(!-e $stat_file, 'no file written after an immediate shutdown');
$node->start;
my $post_crash = query_hash($node, $stats_sql);
cmp_ok($post_crash->{stats_reset}, 'gt', $pre_crash->{stats_reset},
	'statistics reset after an immediate shutdown');
cmp_ok($post_crash->{buf_alloc}, '<', $pre_crash->{buf_alloc},
	'counters start from zero');

$node->stop;
done_testing();
