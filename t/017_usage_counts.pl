# Writing a buffer leaves its usage count as it was: on an otherwise idle
# cluster, jit+all (which writes dirty unpinned buffers whatever their
# usage count) cleans a table whose pages have usage counts 1 to 5, and
# every page keeps its own count.  On 19 the worker's pin raises the count
# (ReadRecentBuffer pins with PinBuffer), and compat_pin_if_tag must take
# back exactly that raise, and nothing when the count was at the maximum.
#
# The pool is never filled (a 200-page table in 16 MB), so that no
# allocation runs the clock sweep over these pages: on 19, which has no
# freelist, the hand then only passes buffers never used; through 18 the
# freelist serves allocations.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

# The all-buffers scan is configured but off (all_maxpages = 0) until the
# counts are in place; the LRU scan stays off throughout.
my $node = new_bgw_jit_node('usage', <<'EOC');
bgw_jit.delay = 50ms
bgw_jit.strategy = 'jit+all'
bgw_jit.lru_maxpages = 0
bgw_jit.all_percent = 100
bgw_jit.all_maxpages = 0
EOC
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION bgw_jit; CREATE EXTENSION pg_buffercache');

# One row per page (fillfactor 10), so that an update of a row dirties
# exactly its page (HOT, in place).
$node->safe_psql('postgres', q{
	CREATE TABLE hot (id int PRIMARY KEY, v int, pad text)
		WITH (fillfactor = 10);
	INSERT INTO hot SELECT g, 0, repeat('x', 500)
		FROM generate_series(1, 200) g;
	VACUUM hot});

# After a restart none of the table is in shared buffers.  An UPDATE of
# every row through the index then reads every page in (usage count 1;
# the update's own pin of the page the scan has pinned adds nothing), and
# each UPDATE of the ids above 40, 80, 120 and 160 pins those pages once
# more: five groups of 40 pages at counts 1 to 5.
$node->restart;
$node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SET enable_bitmapscan = off;
	UPDATE hot SET v = v + 1 WHERE id > 0;
	UPDATE hot SET v = v + 1 WHERE id > 40;
	UPDATE hot SET v = v + 1 WHERE id > 80;
	UPDATE hot SET v = v + 1 WHERE id > 120;
	UPDATE hot SET v = v + 1 WHERE id > 160});

my $pages_sql = q{
	SELECT relblocknumber, usagecount, isdirty
	FROM pg_buffercache
	WHERE relfilenode = pg_relation_filenode('hot') AND relforknumber = 0
	  AND reldatabase = (SELECT oid FROM pg_database
						 WHERE datname = current_database())
	ORDER BY relblocknumber};

# block => [usage count, dirty]
sub pages
{
	my %pages;
	for my $row (split /\n/, $node->safe_psql('postgres', $pages_sql))
	{
		my ($block, $usage, $dirty) = split /\|/, $row;
		$pages{$block} = [ $usage, $dirty ];
	}
	return \%pages;
}

my $before = pages();
my @blocks = sort { $a <=> $b } keys %$before;
cmp_ok(scalar(@blocks), '>=', 200, scalar(@blocks) . ' pages of the table in shared buffers');
is(scalar(grep { $before->{$_}[1] ne 't' } @blocks), 0, 'all of them dirty');
my %by_usage;
$by_usage{ $before->{$_}[0] }++ for @blocks;
my $spread = join(', ', map { "$by_usage{$_} at $_" } sort keys %by_usage);
ok( ($by_usage{5} // 0) > 0
	  && (grep { $_ >= 1 && $_ < 5 && $by_usage{$_} } keys %by_usage) >= 3,
	"usage counts below the maximum and at it ($spread)");

# Clean them with the all-buffers scan alone.
$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
set_conf($node, 'bgw_jit.all_maxpages = 100000');
ok( $node->poll_query_until(
		'postgres', "SELECT bool_or(isdirty) IS NOT TRUE FROM ($pages_sql) p"),
	'jit+all cleaned every page of the table');
cmp_ok($node->safe_psql('postgres', 'SELECT buf_all_clean FROM bgw_jit_stats'),
	'>=', scalar(@blocks), 'the all-buffers scan wrote them');

my $after = pages();
my @changed = grep {
	!defined $after->{$_} || $after->{$_}[0] != $before->{$_}[0]
} @blocks;
my %moves;
$moves{"$before->{$_}[0] to " . ($after->{$_}[0] // 'gone')}++ for @changed;
is(scalar(@changed), 0, 'every page kept its usage count')
  or diag('pages whose count changed: '
	  . join(', ', map { "$moves{$_} from $_" } sort keys %moves));

$node->stop;
done_testing();
