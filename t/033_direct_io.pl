# Direct I/O (debug_io_direct = 'data', 16 and later): each write of a
# data page is a round trip to the device, the place where a background
# cleaner saves the backends most.  With bgw_jit's defaults and a
# one-client update load that evicts dirty pages, the cleaner writes at
# least 99% of the pages written out of the pool, counted by the server
# (pg_stat_io: background-worker against client-backend writes of
# relations, normal context), and keeps its pid throughout; with the
# worker disabled the same count shows the backends writing them (the
# control).  On 15, which lacks the setting, bench/run --direct-io and
# bench/latency-diag --direct-io refuse with a message naming the server
# and leave no results behind; so does --slow-device without root, or
# with a rate it cannot read.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

# The loop devices over a file of a bench/run --slow-device (bench/slowdev.sh).
sub slowdev_loops
{
	my @loops;
	for my $b (glob('/sys/block/loop*/loop/backing_file'))
	{
		open(my $f, '<', $b) or next;
		my $file = <$f> // '';
		push @loops, $b if $file =~ m{^/var/tmp/bgw_jit_slowdev\.};
	}
	return sort @loops;
}

my $scale = 5;
my $node = new_bgw_jit_node('direct_io', <<'EOC');
shared_buffers = 32MB
EOC

if ($node->pg_version < 16)
{
	my $out = PostgreSQL::Test::Utils::tempdir() . '/bench';
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'bash', "$FindBin::RealBin/../bench/run", '--direct-io',
			'--no-build', '--quick', '--out', $out
		],
		'>', \$stdout, '2>', \$stderr);
	ok(!$ok, 'bench/run --direct-io fails on ' . $node->pg_version);
	like($stderr, qr/--direct-io: debug_io_direct exists from PostgreSQL 16 on; this server is .*15\./,
		'saying why, with the server it found');
	ok(!-e $out, 'and writes no results');
	# and so does the alternating load's harness
	$out = PostgreSQL::Test::Utils::tempdir() . '/diag';
	$ok = IPC::Run::run(
		[ 'bash', "$FindBin::RealBin/../bench/latency-diag", '--direct-io', '--out', $out ],
		'>', \$stdout, '2>', \$stderr);
	ok(!$ok, 'bench/latency-diag --direct-io fails on ' . $node->pg_version);
	like($stderr, qr/^bench\/latency-diag: --direct-io: debug_io_direct exists from PostgreSQL 16 on; this server is .*15\./m,
		'saying why');
	ok(!-e $out, 'and writes no results');

	# bench/run and bench/latency-diag --slow-device refuse, saying why,
	# before they make anything: without root (this test runs as the
	# server account), and for a rate they cannot read.
	# (t/slow_device_tests.sh runs them as root.)
	my @loops_before = slowdev_loops();
	for my $case (
		[ '30M,2000', qr/--slow-device: needs root: it makes a loop device/, 'without root' ],
		[ '30Q', qr/--slow-device: BPS\[,IOPS\]: bytes a second .* not '30Q'/, 'a malformed rate' ])
	{
		my ($spec, $why, $label) = @$case;
		for my $harness ([ 'run', '--no-build', '--quick' ], [ 'latency-diag' ])
		{
			my ($script, @opts) = @$harness;
			$out = PostgreSQL::Test::Utils::tempdir() . '/bench';
			$ok = IPC::Run::run(
				[
					'bash', "$FindBin::RealBin/../bench/$script", '--slow-device', $spec,
					@opts, '--out', $out
				],
				'>', \$stdout, '2>', \$stderr);
			ok(!$ok, "bench/$script --slow-device $spec fails ($label)");
			like($stderr, $why, '  saying why');
			ok(!-e $out, '  and writes no results');
			is_deeply([ slowdev_loops() ], \@loops_before, '  and makes no loop device');
		}
	}
	done_testing();
	exit;
}

$node->append_conf('postgresql.conf', "debug_io_direct = 'data'\n");
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
is($node->safe_psql('postgres', 'SHOW debug_io_direct'), 'data',
	'data files are written with direct I/O');
my $pid = wait_for_worker($node);

my $worker = core_backend_writes_sql($node, only => 'background worker');
my $backends = core_backend_writes_sql($node, only => 'client backend');

# Fill the pool and let the worker learn the load, then count a second run.
update_load($node, clients => 1, seconds => 5, scale => $scale);
settle_stats($node);
my $s0 = query_hash($node, "SELECT $worker AS worker, $backends AS backends");
update_load($node, clients => 1, seconds => 10, scale => $scale);
settle_stats($node);
my $s1 = query_hash($node, "SELECT $worker AS worker, $backends AS backends");
my $cleaned = $s1->{worker} - $s0->{worker};
my $left = $s1->{backends} - $s0->{backends};
cmp_ok($cleaned + $left, '>', 1000,
	"the load wrote " . ($cleaned + $left) . " pages out of the pool");
cmp_ok($cleaned / ($cleaned + $left), '>=', 0.99,
	sprintf('the cleaner wrote %.2f%% of them (%d; client backends %d)',
		100 * $cleaned / ($cleaned + $left), $cleaned, $left));
is(worker_pid($node), $pid, 'the worker kept its pid');

# The control: with the worker off, the same count sees the backends write.
set_conf($node, 'bgw_jit.enabled = off');
settle_stats($node);
my $c0 = query_hash($node, "SELECT $worker AS worker, $backends AS backends");
update_load($node, clients => 1, seconds => 3, scale => $scale);
settle_stats($node);
my $c1 = query_hash($node, "SELECT $worker AS worker, $backends AS backends");
cmp_ok($c1->{backends} - $c0->{backends}, '>', 100,
	'control: with bgw_jit.enabled = off the client backends wrote '
	  . ($c1->{backends} - $c0->{backends}) . ' pages');
is($c1->{worker}, $c0->{worker}, 'and the worker none');

$node->stop;
done_testing();
