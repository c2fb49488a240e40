# Write combining (bgw_jit.combine_limit): under an append load, whose
# dirty pages have dirty neighbours, the worker writes runs of neighbours
# along with the pages its scan picks; a run never exceeds the limit, the
# per-cycle cap counts the neighbours, 1 turns it off, and what it wrote
# reads back intact.  Functional facts only: whether combining pays is
# measured by bench/.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Temp ();

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $limit = 16;

my $node = new_bgw_jit_node('combining',
	"bgw_jit.combine_limit = $limit\nbgw_jit.history_size = 100000");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION bgw_jit;
	CREATE TABLE app (id bigserial PRIMARY KEY, v int, filler text)});
wait_for_worker($node);

# Append load in the background until the end of the test: 100 rows of
# ~130 bytes per transaction at the end of the heap and of its index.
my $script = File::Temp->new(SUFFIX => '.sql');
print $script "\\set v random(1, 1000)\n"
  . "INSERT INTO app (v, filler) SELECT :v, repeat('x', 84) FROM generate_series(1, 100);\n";
close $script;
chmod 0644, $script->filename;
my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '-n', '-f', $script->filename, '-c', 2, '-j', 2,
		'-T', 600, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err);

# Cycles that began after $t: count, and those breaking $cond.
sub cycles_after
{
	my ($t, $cond) = @_;
	return split /\|/, $node->safe_psql('postgres', qq{
		SELECT count(*), count(*) FILTER (WHERE NOT ($cond)),
			   coalesce(sum(combined), 0), coalesce(sum(written), 0)
		  FROM bgw_jit_history WHERE at > '$t'});
}

# --- runs of neighbours are written, each within the limit ---
my $t0 = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
ok( $node->poll_query_until('postgres',
		'SELECT buf_combined >= 1000 FROM bgw_jit_stats'),
	'the worker writes neighbours along under an append load')
  or diag($err);
# Each write the scan chose brings at most limit - 1 neighbours.
my ($n, $bad, $combined, $written) =
  cycles_after($t0, 'combined * ' . $limit . ' <= written * ' . ($limit - 1));
cmp_ok($combined, '>', 0, "cycles record their combined writes ($combined of $written)");
is($bad, 0, "no cycle wrote more than $limit pages per page its scan chose ($n cycles)");
my $stats = query_hash($node,
	'SELECT buf_combined, buf_clean + buf_all_clean AS written FROM bgw_jit_stats');
cmp_ok($stats->{buf_combined}, '<', $stats->{written},
	'buf_combined is a part of the writes counted');

# Settings in force for every cycle that begins after the returned moment.
sub configure
{
	set_conf($node, @_);
	return $node->safe_psql('postgres', 'SELECT conf_load_time FROM bgw_jit_stats');
}

# --- the per-cycle cap counts the neighbours ---
my $t1 = configure('bgw_jit.lru_maxpages = 4');
ok( $node->poll_query_until('postgres', qq{
		SELECT sum(combined) >= 200 FROM bgw_jit_history WHERE at > '$t1'}),
	'neighbours are still written under lru_maxpages = 4');
($n, $bad, $combined, $written) = cycles_after($t1, 'written <= 4');
is($bad, 0, "no cycle wrote more than lru_maxpages = 4, neighbours included ($n cycles, $combined of $written combined)");

# --- 1 turns it off ---
my $t2 = configure('bgw_jit.lru_maxpages = -1', 'bgw_jit.combine_limit = 1');
ok( $node->poll_query_until('postgres', qq{
		SELECT sum(written) >= 2000 FROM bgw_jit_history WHERE at > '$t2'}),
	'the worker keeps cleaning with combine_limit = 1');
($n, $bad, $combined, $written) = cycles_after($t2, 'combined = 0');
is($bad, 0, "no neighbours written with combine_limit = 1 ($n cycles, $written written)");

kill_pgbench($node, $load);
$load->finish;

# --- what it wrote reads back intact ---
# A fast stop writes only what is still dirty; the pages the worker wrote
# are read back from disk after the restart, past their checksums.
my $rows = $node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM app');
$node->restart;
is($node->safe_psql('postgres', 'SELECT count(*), sum(v) FROM app'),
	$rows, 'every row survives a restart');
check_integrity($node, 'after combined writes');

$node->stop;
done_testing();
