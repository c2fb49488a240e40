# bgw_jit.scan_whole_pool_seconds: even with nothing allocating, the
# cleaner visits the whole pool within that time.  Fixed pacing with
# multiplier 0, so that this floor alone drives the scan (a self-paced
# worker that sees no movement at all scans the whole lap at once,
# whatever the setting, and a multiplier would add the demand the
# estimator remembers from the load that planted the buffers).
# Dirty buffers of usage count 0 are planted all over an idle pool; with
# 1 s every one of them is clean within 10 s, with the default 120 s (the
# control) not: so the setting, not the poll's patience, does it.
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

my $planted = plant_dirty_buffers($node, 'watched', scale => $scale);
cmp_ok($planted, '>=', 100, "$planted dirty usage-0 buffers planted");
my $watched = watched_sql('watched');
my $all_clean = "SELECT dirty = 0 FROM ($watched) w";

# --- the control: 120 s (the default) does not visit the pool in 10 s ---
set_conf($node, 'bgw_jit.lru_maxpages = -1',
	'bgw_jit.scan_whole_pool_seconds = 120');
ok( $node->poll_query_until('postgres', "SELECT cleaned > 0 FROM ($watched) w"),
	'with 120 s the idle scan makes progress');
ok(!poll_for($node, $all_clean, 10),
	'but it does not clean every planted buffer within 10 s');
my $control = query_hash($node, $watched);
note("after the control: $control->{cleaned} cleaned, $control->{dirty} "
	  . "dirty of $control->{same_page} watched buffers that kept their page");
cmp_ok($control->{dirty}, '>', 0, 'planted buffers still dirty after the control');

# --- 1 s: the whole pool within 10 s ---
set_conf($node, 'bgw_jit.scan_whole_pool_seconds = 1');
ok(poll_for($node, $all_clean, 10),
	'with 1 s every planted buffer that kept its page is clean within 10 s');
my $after = query_hash($node, $watched);
cmp_ok($after->{same_page}, '>=', 0.9 * $planted,
	"$after->{same_page} of $planted planted buffers kept their page");

$node->stop;
done_testing();
