# A streaming standby with the library preloaded: the worker runs and
# cleans while WAL is replayed, keeps cleaning after promotion, and both
# servers verify.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
my $primary = start_bgw_jit_node(
	'primary',
	scale => $scale,
	busy => 1,
	extensions => ['amcheck'],
	init => { allows_streaming => 1 });
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'standby is in recovery');
ok(wait_for_worker($standby), 'worker runs on the standby during recovery');

# Heavy primary load: the standby's startup process dirties its 16 MB pool.
$standby->safe_psql('postgres', 'SELECT bgw_jit_reset()');
update_load($primary, clients => 2, seconds => 5, scale => $scale);
$primary->wait_for_catchup($standby);
my $replay = query_hash($standby,
	'SELECT buf_clean, buf_alloc, cycles FROM bgw_jit_stats');
note("standby during replay: buf_clean $replay->{buf_clean}, "
	  . "buf_alloc $replay->{buf_alloc}, cycles $replay->{cycles}");
cmp_ok($replay->{buf_clean}, '>', 0,
	'the standby worker cleaned buffers dirtied by replay');
cmp_ok($replay->{buf_alloc}, '>', 0, 'and counted replay allocations');

check_integrity($primary, 'primary');

$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'standby promoted');
my $before = $standby->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats');
update_load($standby, clients => 2, seconds => 3, scale => $scale);
cmp_ok($standby->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats'),
	'>', $before, 'after promotion the worker cleans under load');
check_integrity($standby, 'promoted standby');

$standby->stop;
$primary->stop;
done_testing();
