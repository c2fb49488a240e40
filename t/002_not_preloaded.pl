# Without shared_preload_libraries: CREATE EXTENSION works, every view and
# function that needs the worker fails with a clear error and hint, the
# estimator's replay (pure arithmetic) works, and nothing crashes.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;

my $node = PostgreSQL::Test::Cluster->new('not_preloaded');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
# (pg_available_extensions does not see a staged build: the control file)
my ($default_version) =
  slurp_file("$FindBin::RealBin/../bgw_jit.control") =~
  /^default_version\s*=\s*'([^']+)'/m;
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit'"),
	$default_version,
	'CREATE EXTENSION succeeds without preloading, at the default version');

# No worker: the postmaster has no child whose title names it, and the
# log has no start-up line of it.  (Not pg_stat_activity: a worker without
# a database connection would not show there anyway.)
my ($postmaster) = slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
my @children;
for my $stat (glob '/proc/[0-9]*/stat')
{
	open(my $fh, '<', $stat) or next;
	my ($ppid) = (<$fh> // '') =~ /^\d+ \(.*\) \S+ (\d+)/;
	close $fh;
	next unless defined $ppid && $ppid == $postmaster;
	(my $cmdline = $stat) =~ s/stat$/cmdline/;
	open($fh, '<', $cmdline) or next;
	my $title = <$fh> // '';
	close $fh;
	push @children, $title;
}
ok(-e "/proc/$postmaster/stat", "the postmaster ($postmaster) is visible in /proc");
# (the same scan finds the postmaster's other children: it can see a worker)
ok(scalar(grep { /checkpointer/ } @children),
	'the scan finds the checkpointer among its children');
my @workers = grep { /bgw_jit/ } @children;
is(scalar(@workers), 0, 'no worker runs') or diag("@workers");
unlike(slurp_file($node->logfile), qr/bgw_jit worker started/,
	'and none started');

for my $query (
	'SELECT * FROM bgw_jit_stats',
	'SELECT * FROM bgw_jit_history',
	'SELECT * FROM bgw_jit_advice',
	'SELECT * FROM bgw_jit_stats()',
	'SELECT * FROM bgw_jit_history()',
	'SELECT * FROM bgw_jit_bgwriter',
	'SELECT * FROM bgw_jit_bgwriter(now())',
	'SELECT bgw_jit_reset()')
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $query);
	isnt($ret, 0, "$query fails");
	like($stderr,
		qr/ERROR:  bgw_jit must be loaded via shared_preload_libraries\nHINT:  Add bgw_jit to shared_preload_libraries/,
		"$query: error names shared_preload_libraries, with a hint");
}

# bench/plot-history says so too, and fails.
{
	my ($out, $err);
	my $ok = IPC::Run::run(
		[
			"$FindBin::RealBin/../bench/plot-history",
			'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres',
			'--out', PostgreSQL::Test::Utils::tempdir('plots')
		],
		'>', \$out, '2>', \$err);
	ok(!$ok, 'plot-history fails without preloading');
	like($err,
		qr/plot-history: cannot read bgw_jit_history: .*shared_preload_libraries/s,
		'plot-history: the error names shared_preload_libraries');
}

# The pacer's replay needs no shared memory either, and the server's own
# pg_stat_bgwriter figures are the server's.
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM bgw_jit_replay_pacer(ARRAY[1000, 1000]::bigint[], '
		  . 'ARRAY[10, 10]::bigint[], nbuffers => 4096)'),
	'2',
	'bgw_jit_replay_pacer works without preloading');
is( $node->safe_psql(
		'postgres',
		'SELECT b.buffers_alloc = s.buffers_alloc AND b.stats_reset = s.stats_reset '
		  . 'FROM bgw_jit_core_bgwriter() b, pg_stat_bgwriter s'),
	't',
	'bgw_jit_core_bgwriter() reads the server\'s figures without preloading');

# Replay needs no shared memory; a NULL nbuffers is this server's pool.
is( $node->safe_psql(
		'postgres',
		'SELECT upcoming_alloc_est FROM bgw_jit_replay(ARRAY[100], ARRAY[0], nbuffers => 4096)'
	),
	'200',
	'bgw_jit_replay works without preloading');
is( $node->safe_psql(
		'postgres', q{
		SELECT min_scan_buffers = (SELECT setting::int / 600 FROM pg_settings
								   WHERE name = 'shared_buffers')
		FROM bgw_jit_replay(ARRAY[0], ARRAY[0])}),
	't',
	'bgw_jit_replay with nbuffers NULL uses shared_buffers');

# The settings are not defined, so nothing stops the server from starting:
# not even in a session that has loaded the library (LOAD runs _PG_init,
# which must define nothing outside the postmaster; the functions called
# above loaded it too, but in sessions of their own).
is( $node->safe_psql(
		'postgres', q{
		LOAD 'bgw_jit';
		SELECT count(*) FROM pg_settings WHERE name LIKE 'bgw_jit.%'}),
	'0', 'no settings defined without preloading, the library loaded');

$node->safe_psql('postgres', 'DROP EXTENSION bgw_jit');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'bgw_jit'"),
	'0', 'DROP EXTENSION succeeds');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'server still up');
$node->stop;

done_testing();
