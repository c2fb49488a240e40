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
pass('CREATE EXTENSION succeeds without preloading');

is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bgw_jit'"),
	'0', 'no worker runs');

for my $query (
	'SELECT * FROM bgw_jit_stats',
	'SELECT * FROM bgw_jit_history',
	'SELECT * FROM bgw_jit_advice',
	'SELECT * FROM bgw_jit_stats()',
	'SELECT * FROM bgw_jit_history()',
	'SELECT * FROM bgw_jit_bgwriter',
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

# The settings are not defined, so nothing stops the server from starting.
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_settings WHERE name LIKE 'bgw_jit.%'"),
	'0', 'no settings defined without preloading');

$node->safe_psql('postgres', 'DROP EXTENSION bgw_jit');
pass('DROP EXTENSION succeeds');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'server still up');
$node->stop;

done_testing();
