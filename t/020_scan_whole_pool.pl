# bgw_jit.scan_whole_pool_seconds: even with nothing allocating, the
# cleaner visits the whole pool within that time.  Fixed pacing with
# multiplier 0, so that this floor alone drives the scan (a self-paced
# worker that sees no movement at all scans the whole lap at once,
# whatever the setting, and a multiplier would add the demand the
# estimator remembers from the load that planted the buffers).
# Dirty buffers of usage count 0 are planted all over an idle pool.  Time
# is counted in the worker's cycles, as the kernel sees them: with strace
# on the worker, each cycle ends in one epoll wait of delay (100 ms), and
# its page writes name the file and offset of each page.  With 1 s, ten
# cycles a lap, every planted page is written by the 11th wait (one more
# for the cycle the reload cut short); with the default 120 s (the
# control), 50 cycles do not reach them all.  So the setting, not the
# clock or the poll's patience, does it.
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
	'scan_whole_pool',
	scale => $scale,
	conf => "bgw_jit.pacing = fixed\nbgw_jit.lru_multiplier = 0\n"
	  . "bgw_jit.delay = 100ms\n",
	extensions => ['pg_buffercache']);

my $pid = wait_for_worker($node);
my $planted = plant_dirty_buffers($node, 'watched', scale => $scale);
cmp_ok($planted, '>=', 100, "$planted dirty usage-0 buffers planted");
my $watched = watched_sql('watched');
my $all_clean = "SELECT dirty = 0 FROM ($watched) w";
my $calls = 'epoll_wait,epoll_pwait,pwrite64,pwritev,pwritev2';

# The cycles' ends (epoll waits of 100 ms) in a trace's lines.
sub cycles_in
{
	return scalar grep { my ($ms) = strace_wait($_); ($ms // 0) == 100 } @_;
}

# --- the control: 120 s (the default) does not visit the pool in 50 cycles ---
set_conf($node, 'bgw_jit.lru_maxpages = -1',
	'bgw_jit.scan_whole_pool_seconds = 120');
my ($trace, $why) = start_strace($pid, $calls);
SKIP:
{
	skip "the scan counted in cycles: $why", 9 unless $trace;
	ok( $node->poll_query_until('postgres', "SELECT cleaned > 0 FROM ($watched) w"),
		'with 120 s the idle scan makes progress');
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	sleep 1 while cycles_in($trace->lines) < 50 && time < $deadline;
	my $control = query_hash($node, $watched);
	my $cycles = cycles_in($trace->stop);
	note("after the control: $control->{cleaned} cleaned, $control->{dirty} "
		  . "dirty of $control->{same_page} watched buffers that kept their page");
	cmp_ok($cycles, '>=', 50, "the worker ran $cycles cycles (100 ms waits)");
	cmp_ok($control->{dirty}, '>', 0,
		'and planted buffers are still dirty after them');

	# --- 1 s: the whole pool within ten cycles ---
	# The planted pages still dirty after the control, by relfilenode and
	# block (pgbench_accounts and its index, in their first segment): each
	# that keeps its buffer and is cleaned must be among the pages the
	# kernel sees the worker write, by the 11th cycle after it read the
	# new setting (its open of postgresql.conf).  (Read once the trace
	# runs: a page the control's scan writes meanwhile is not among them.)
	($trace, $why) = start_strace($pid, "$calls,openat");
	die "strace: $why" unless $trace;
	my %dirty = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', q{
		SELECT p.relfilenode || '/' || p.relblocknumber
		FROM watched p JOIN pg_buffercache b USING (bufferid)
		WHERE b.reldatabase = p.reldatabase AND b.relfilenode = p.relfilenode
		  AND b.relforknumber = p.relforknumber
		  AND b.relblocknumber = p.relblocknumber AND b.isdirty});
	set_conf($node, 'bgw_jit.scan_whole_pool_seconds = 1');
	ok($node->poll_query_until('postgres', $all_clean),
		'with 1 s every planted buffer that kept its page is cleaned');
	# (cycles end in a wait of 100 ms; a time slice's 1 ms wait does not
	# end one, nor a wait with no timeout, for another process's I/O)
	my ($waits, $last, $loaded, %written) = (0, 0, 0);
	for ($trace->stop)
	{
		if (/^open(?:at)?\(.*postgresql\.conf"/)
		{
			($waits, $loaded) = (0, 1);
		}
		elsif (my ($ms) = strace_wait($_))
		{
			$waits++ if $ms != 1 && $ms >= 0;
		}
		elsif (my ($rel, $block, $pages) = strace_page_write($_))
		{
			for my $b ($block .. $block + $pages - 1)
			{
				next unless $dirty{"$rel/$b"} && !$written{"$rel/$b"}++;
				$last = $waits if $loaded;
			}
		}
	}
	ok($loaded, 'the trace shows the worker read postgresql.conf again');
	my @cleaned = split /\n/, $node->safe_psql('postgres', q{
		SELECT p.relfilenode || '/' || p.relblocknumber
		FROM watched p JOIN pg_buffercache b USING (bufferid)
		WHERE b.reldatabase = p.reldatabase AND b.relfilenode = p.relfilenode
		  AND b.relforknumber = p.relforknumber
		  AND b.relblocknumber = p.relblocknumber AND NOT b.isdirty});
	my @unseen = grep { $dirty{$_} && !$written{$_} } @cleaned;
	note(scalar(keys %dirty) . ' planted pages dirty after the control, '
		  . scalar(keys %written) . " of them written, the last after $last "
		  . 'cycles of the trace');
	cmp_ok(scalar(keys %written), '>', 0,
		'the kernel saw the worker write the planted pages left');
	# (one in a hundred may have been written by another process: the
	# test's own statements read pages, and a backend that evicts one
	# dirty writes it itself; seen once on 18, 2 of 562)
	cmp_ok(scalar(@unseen), '<=', int(scalar(@cleaned) / 100),
		'those cleaned in place were written by the worker (' . scalar(@unseen)
		  . ' of ' . scalar(@cleaned) . " not seen written: @unseen)");
	cmp_ok($last, '<=', 11,
		'all by its 11th cycle: the whole pool within ten, and the one the reload cut short');
	my $after = query_hash($node, $watched);
	cmp_ok($after->{same_page}, '>=', 0.9 * $planted,
		"$after->{same_page} of $planted planted buffers kept their page");
}

$node->stop;
done_testing();
