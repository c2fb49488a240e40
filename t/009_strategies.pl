# The three cleaning strategies: each writes, they switch live under load,
# lap stays behind the strategy point, jit+all writes buffers in use, and
# the wasted-write accounting tells a useful write from a wasted one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 10;
my $node = new_bgw_jit_node('strategies', <<'EOC');
bgw_jit.delay = 50ms
bgw_jit.lru_multiplier = 4.0
bgw_jit.lru_maxpages = 1000
bgw_jit.all_percent = 5
bgw_jit.all_maxpages = 200
bgw_jit.history_size = 100000
EOC
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres',
	'CREATE EXTENSION bgw_jit; CREATE EXTENSION pg_buffercache');
my $nbuffers = $node->safe_psql('postgres',
	"SELECT setting FROM pg_settings WHERE name = 'shared_buffers'");

sub set_conf
{
	$node->append_conf('postgresql.conf', join("\n", @_));
	$node->reload;
	usleep(300_000);
}

# --- switching live under load: every strategy writes ---
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
my @conn = ('-h', $node->host, '-p', $node->port, 'postgres');
my ($out, $err);
my $load = IPC::Run::start(
	[ 'pgbench', '-n', '-b', 'simple-update', '-s', $scale, '-c', 2, '-j', 2,
	  '-T', 12, @conn ],
	'>', \$out, '2>', \$err);
for my $strategy ('lap', 'jit+all', 'jit')
{
	sleep 3;
	set_conf("bgw_jit.strategy = '$strategy'");
	is($node->safe_psql('postgres', 'SELECT strategy FROM bgw_jit_stats'),
		$strategy, "switched to $strategy by reload");
}
$load->finish;
my $by_strategy = $node->safe_psql(
	'postgres', q{
	SELECT strategy, count(*), sum(written), sum(all_written)
	FROM bgw_jit_history GROUP BY strategy ORDER BY strategy});
note("history by strategy (strategy|cycles|written|all_written):\n$by_strategy");
my %w = map { my @f = split /\|/; ($f[0] => [ @f[ 1 .. 3 ] ]) }
  split /\n/, $by_strategy;
for my $strategy ('jit', 'lap', 'jit+all')
{
	cmp_ok($w{$strategy}[1] // 0, '>', 0, "$strategy cycles wrote buffers");
}
cmp_ok($w{'jit+all'}[2] // 0, '>', 0, 'the all-buffers scan wrote buffers');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bgw_jit_history WHERE strategy <> 'jit+all' AND all_written > 0"),
	'0', 'only jit+all runs the all-buffers scan');

# --- lap rides behind the strategy point, never across it ---
my $lap = query_hash($node, qq{
	SELECT count(*) AS cycles,
		   count(*) FILTER (WHERE bufs_ahead + scanned > $nbuffers) AS crossed,
		   max(scanned) AS max_scanned
	FROM bgw_jit_history WHERE strategy = 'lap'});
cmp_ok($lap->{cycles}, '>', 10, "$lap->{cycles} lap cycles");
is($lap->{crossed}, 0, 'no lap cycle scanned past a full lap of the hand');
cmp_ok($lap->{max_scanned}, '<=', int($nbuffers * 0.10 + 1),
	"lap scans at most lru_percent (10%) of $nbuffers buffers per cycle");

# --- jit+all writes buffers in use; jit leaves them alone ---
# A small hot table: every page dirty with a usage count above zero.
$node->safe_psql('postgres', q{
	CREATE TABLE hot (id int PRIMARY KEY, v int);
	INSERT INTO hot SELECT g, 0 FROM generate_series(1, 5000) g;
	UPDATE hot SET v = v + 1; UPDATE hot SET v = v + 1});
my $hot_dirty_sql = q{
	SELECT count(*) FILTER (WHERE isdirty) AS dirty,
		   count(*) FILTER (WHERE NOT isdirty) AS clean,
		   min(usagecount) AS min_usage
	FROM pg_buffercache
	WHERE relfilenode = pg_relation_filenode('hot')};
set_conf("bgw_jit.strategy = 'jit'", 'bgw_jit.scan_whole_pool_seconds = 1');
sleep 3;
my $jit_hot = query_hash($node, $hot_dirty_sql);
cmp_ok($jit_hot->{min_usage}, '>', 0, 'hot pages are in use (usage > 0)');
cmp_ok($jit_hot->{dirty}, '>', 0, "jit leaves the $jit_hot->{dirty} hot dirty pages alone");

set_conf("bgw_jit.strategy = 'jit+all'", 'bgw_jit.all_percent = 100',
	'bgw_jit.all_maxpages = 100000');
sleep 2;
my $all_hot = query_hash($node, $hot_dirty_sql);
is($all_hot->{dirty}, 0, 'jit+all cleaned every hot page');
cmp_ok($all_hot->{min_usage}, '>', 0, 'and they kept their usage counts');

# --- wasted-write accounting ---
# jit+all on a hot table re-dirtied all the time: its writes are wasted.
my $hot_script = File::Temp->new(SUFFIX => '.sql');
print $hot_script "\\set id random(1, 5000)\nUPDATE hot SET v = v + 1 WHERE id = :id;\n";
close $hot_script;
chmod 0644, $hot_script->filename;
set_conf('bgw_jit.lru_maxpages = 0', 'bgw_jit.delay = 200ms');
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
$node->command_ok(
	[ 'pgbench', '-n', '-f', $hot_script->filename, '-c', 2, '-T', 5,
	  'postgres' ],
	'hot-table load');
my $hot = query_hash($node, 'SELECT * FROM bgw_jit_stats');
note("hot table under jit+all: all_clean $hot->{buf_all_clean}, useful "
	  . "$hot->{buf_clean_useful}, wasted $hot->{buf_clean_wasted}");
cmp_ok($hot->{buf_clean_wasted}, '>', 100, 're-dirtied writes counted as wasted');
cmp_ok($hot->{useful_pct} // 100, '<', 10,
	"useful_pct $hot->{useful_pct} is low for a hot table");

# jit under update load on a table far larger than the pool: the pages it
# cleans are evicted soon after, so its writes are useful.
set_conf("bgw_jit.strategy = 'jit'", 'bgw_jit.lru_maxpages = 1000',
	'bgw_jit.delay = 50ms');
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
update_load($node, clients => 2, seconds => 5, scale => $scale);
sleep 1;
my $big = query_hash($node, 'SELECT * FROM bgw_jit_stats');
note("large table under jit: clean $big->{buf_clean}, useful "
	  . "$big->{buf_clean_useful}, wasted $big->{buf_clean_wasted}");
cmp_ok($big->{buf_clean_useful}, '>', 1000, 'evicted cleaned pages counted as useful');
cmp_ok($big->{useful_pct}, '>', 90, "useful_pct $big->{useful_pct} is high for a large table");
my $hist = query_hash($node,
	'SELECT sum(useful) AS useful, sum(wasted) AS wasted FROM bgw_jit_history');
is($hist->{useful}, $big->{buf_clean_useful}, 'history sums to the useful counter');
is($hist->{wasted}, $big->{buf_clean_wasted}, 'history sums to the wasted counter');

check_integrity($node, 'after the strategies');
$node->stop;
done_testing();
