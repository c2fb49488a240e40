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
update_load($node, clients => 1, seconds => 2, scale => 5);

my $stats_sql = q{SELECT s.cycles, s.buf_clean, s.buf_alloc, s.stats_reset,
	(SELECT count(*) FROM bgw_jit_history) AS history FROM bgw_jit_stats s};
my $stat_file = $node->data_dir . '/pg_stat/bgw_jit.stat';

my $before = query_hash($node, $stats_sql);
cmp_ok($before->{cycles}, '>', 0, 'worker has cycled');
cmp_ok($before->{buf_alloc}, '>', 0, 'allocations counted');

# --- clean restart keeps everything ---
$node->restart;
my $after = query_hash($node, $stats_sql);
is($after->{stats_reset}, $before->{stats_reset}, 'stats_reset kept');
for my $col (qw(cycles buf_clean buf_alloc history))
{
	cmp_ok($after->{$col}, '>=', $before->{$col},
		"$col kept across a clean restart ($before->{$col} -> $after->{$col})");
}
ok(!-e $stat_file, 'the file is removed once loaded');

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
	is($now->{history},
		$now->{cycles} > $history_size ? $history_size : $now->{cycles},
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
