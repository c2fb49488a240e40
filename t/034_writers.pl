# The writer processes (bgw_jit.max_writers, writers.c), with test builds'
# bgw_jit.writers_min = 2 making the cleaner hand every second page to be
# written to the writer, whatever the load: counted by the kernel, the
# writer writes pages and so does the cleaner; with max_write_rate, the two
# together write no faster than it allows; and the writer stops with the
# server.  The control: with writers_min = 1 and buffered writes (a write
# takes microseconds), Little's law asks for the cleaner alone, and the
# writer process writes at most a few pages in a hundred (not none: the
# time a write takes the cleaner includes its waits for a CPU, and on a
# machine busy with other tests the writer may be asked for now and then).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
my $node = new_bgw_jit_node('writers', <<'EOC');
shared_buffers = 16MB
EOC
$node->start;
if (!has_fault_injection($node))
{
	plan skip_all => 'bgw_jit.writers_min exists in test builds only';
}
pgbench_init($node, $scale);
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
my $cleaner = wait_for_worker($node);
my $writer = '';
for (1 .. 300)
{
	last if $writer = postmaster_child_pid($node, qr/^bgw_jit writer 1\b/);
	usleep(100_000);
}
ok($writer, 'a writer process runs (max_writers = 1)') or die 'no writer';

# Pages written by each process: the kernel's bytes written, in pages.
sub pages_written
{
	return map { int((proc_io($_) // { wchar => 0 })->{wchar} / 8192) } @_;
}

# strace of both processes' relation page writes; (undef, why) when
# strace cannot trace them.
sub start_trace
{
	return start_strace([ $cleaner, $writer ], 'pwrite64,pwritev,pwritev2');
}

# The pages each process wrote in a stopped trace: (cleaner's, writer's).
sub traced_pages
{
	my ($trace) = @_;
	my %pages;
	for ($trace->timed_lines)
	{
		my (undef, $line, $pid) = @$_;
		my (undef, undef, $n) = strace_page_write($line) or next;
		$pages{$pid} += $n;
	}
	return map { $pages{$_} // 0 } ($cleaner, $writer);
}

# --- the control: one writer is what Little's law asks for here ---
my ($c0, $w0) = pages_written($cleaner, $writer);
update_load($node, clients => 2, seconds => 3, scale => $scale);
my ($c1, $w1) = pages_written($cleaner, $writer);
cmp_ok($c1 - $c0, '>', 100,
	"buffered writes, writers_min = 1: the cleaner writes (" . ($c1 - $c0) . ' pages)');
cmp_ok($w1 - $w0, '<', 0.1 * ($c1 - $c0 + $w1 - $w0),
	'and the writer process under a tenth of the pages (' . ($w1 - $w0)
	  . '), where writers_min = 2 gives it about half');

# --- writers_min = 2: the writer takes pages ---
set_conf($node, 'bgw_jit.writers_min = 2');
($c0, $w0) = pages_written($cleaner, $writer);
update_load($node, clients => 2, seconds => 5, scale => $scale);
($c1, $w1) = pages_written($cleaner, $writer);
cmp_ok($w1 - $w0, '>', 100,
	'writers_min = 2: the writer writes pages (' . ($w1 - $w0) . ')');
cmp_ok($c1 - $c0, '>', 100, 'and so does the cleaner (' . ($c1 - $c0) . ')');
is(postmaster_child_pid($node, qr/^bgw_jit writer 1\b/), $writer,
	'the writer kept its pid');

# --- from 16: the writer's writes are the cleaner's, not the backends' ---
# As t/001 checks for the cleaner alone: over a load, bgw_jit_stats'
# buf_backend must equal pg_stat_io's writes by processes other than
# background workers, and its own count pg_stat_io's background-worker
# writes, which are the cleaner's and the writer's.
SKIP:
{
	skip 'pg_stat_io exists from PostgreSQL 16', 4 if $node->pg_version < 16;

	my $workers = core_backend_writes_sql($node, only => 'background worker');
	$node->safe_psql('postgres', 'CHECKPOINT');
	settle_stats($node);
	# settle_stats leaves out background workers; the writer reports its
	# writes up to a second after it made them: wait until it has
	my $prev = -1;
	for (1 .. 60)
	{
		my $n = $node->safe_psql('postgres', "SELECT $workers");
		last if $n == $prev;
		$prev = $n;
		usleep(1_500_000);
	}
	my $base = io_baseline($node);
	# held back, so that backends write too
	set_conf($node, 'bgw_jit.lru_maxpages = 20');
	($c0, $w0) = pages_written($cleaner, $writer);
	update_load($node, clients => 2, seconds => 4, scale => $scale);
	($c1, $w1) = pages_written($cleaner, $writer);
	$node->safe_psql('postgres', 'CHECKPOINT');
	set_conf($node, 'bgw_jit.lru_maxpages = -1');
	my $got = io_agreement($node, $base);
	cmp_ok($w1 - $w0, '>', 0, 'the writer wrote during the load (' . ($w1 - $w0) . ')');
	cmp_ok($got->{others}, '>', 0, 'and so did backends');
	is($got->{buf_backend}, $got->{others},
		'buf_backend equals the writes pg_stat_io counts for processes other than background workers');
	is($got->{own}, $got->{workers},
		"bgw_jit_stats' own count equals pg_stat_io's background-worker writes");
}

# --- the write budget counts the writer's writes ---
# 1 MB/s is 128 pages a second; the bucket holds one second's worth.
# Counted in a trace of both processes' data-file writes: their bytes
# written (/proc/PID/io) would also hold the WAL a writer flushes itself
# before writing a page whose WAL was not yet on disk.
set_conf($node, 'bgw_jit.max_write_rate = 1');
update_load($node, clients => 2, seconds => 2, scale => $scale);
SKIP:
{
	my $t0 = time;
	my ($trace, $why) = start_trace();
	skip $why, 2 unless $trace;
	update_load($node, clients => 2, seconds => 5, scale => $scale);
	$trace->stop;
	my $seconds = time - $t0;
	my ($c, $w) = traced_pages($trace);
	cmp_ok($c + $w, '<=', 128 * ($seconds + 1) + 16,
		sprintf('max_write_rate = 1MB: cleaner and writer wrote %d data pages in %.1f s (%d + %d)',
			$c + $w, $seconds, $c, $w));
	cmp_ok($w, '>', 0, 'the writer among them');
}

# --- the writer's pages count, also those written once cleaning stops ---
# The cleaner adds what its writers wrote to its next cycle; a writer may
# still be writing pages handed to it when lru_maxpages = 0 stops the
# scans, and the cycles that then fold them in clean nothing (1.4.0's
# development code dropped such writes from bgw_jit_stats: CI runs of
# t/025 saw 4 and 5 pages missing).  Under a load, cleaning stopped and
# started again five times, each time once the worker has run a cycle:
# strace's count of the two processes' page writes must be the rise of
# bgw_jit_stats' own count, read once a cycle has folded in the last.
SKIP:
{
	set_conf($node, 'bgw_jit.lru_maxpages = 0', 'bgw_jit.max_write_rate = 0');
	# (until the kernel sees neither write across a settle: the writer's
	# last pages are written and counted)
	my @before = (-1);
	for (1 .. 20)
	{
		settle_stats($node);
		my @now = pages_written($cleaner, $writer);
		last if "@now" eq "@before";
		@before = @now;
	}
	my ($trace, $why) = start_trace();
	skip $why, 2 unless $trace;
	my $own_sql = 'SELECT buf_clean + buf_all_clean FROM bgw_jit_stats';
	my $own0 = $node->safe_psql('postgres', $own_sql);
	my $load = start_update_load($node, clients => 2, seconds => 5,
		scale => $scale);
	for my $maxpages ((-1, 0) x 5)
	{
		wait_for_cycle_after($node,
			set_conf($node, "bgw_jit.lru_maxpages = $maxpages"));
	}
	$load->finish;
	settle_stats($node) for 1 .. 2;
	my $own = $node->safe_psql('postgres', $own_sql) - $own0;
	$trace->stop;
	my ($c, $w) = traced_pages($trace);
	cmp_ok($w, '>', 0, "the writer wrote pages ($w; the cleaner $c)");
	is($own, $c + $w,
		"bgw_jit_stats' own count rose by the pages strace saw the two write");
}
set_conf($node, 'bgw_jit.lru_maxpages = -1');

# --- the writer stops with the server ---
$node->stop;
ok(!-e "/proc/$writer", 'the writer stops with the server');
like(slurp_file($node->logfile),
	qr/background worker "bgw_jit writer" \(PID $writer\) exited with exit code 1/,
	'with exit code 1, as the other workers');

done_testing();
