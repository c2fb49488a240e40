# The worker counts allocations without taking them from the built-in
# writer: pg_stat_bgwriter.buffers_alloc still counts every buffer a
# backend allocates, and bgw_jit_stats.buf_alloc follows it.
#
# Core's writer publishes buffers_alloc from the shared allocation counter,
# which StrategySyncStart() resets when asked for it.  Were the worker to
# ask (core's own BgBufferSync() does), every cycle of it would take the
# allocations since the last, and buffers_alloc would show only what the
# built-in writer read in between.  The allocations are counted apart from
# both: under a select-only load on a pool far smaller than the data, every
# block read from disk (pg_statio_all_tables and _indexes, blks_read)
# takes a buffer.  The worker cycles every 10 ms, twenty times as often as
# the built-in writer, so a reset would leave buffers_alloc a small part
# of the reads.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

# (16 MB of pool against ~300 MB of pgbench tables)
my $node = start_bgw_jit_node('alloc', scale => 20, conf => <<'EOC');
bgw_jit.delay = 10ms
bgw_jit.pacing = fixed
EOC
$node->safe_psql('postgres', 'CHECKPOINT');

my $reads_sql = q{
	SELECT (SELECT sum(coalesce(heap_blks_read, 0) + coalesce(idx_blks_read, 0)
					   + coalesce(toast_blks_read, 0) + coalesce(tidx_blks_read, 0))
			FROM pg_statio_all_tables)
		 + (SELECT coalesce(sum(blks_read), 0) FROM pg_statio_all_sequences)};
my $counts_sql = qq{
	SELECT ($reads_sql)::bigint AS reads,
		   (SELECT buffers_alloc FROM pg_stat_bgwriter) AS buffers_alloc,
		   (SELECT buf_alloc FROM bgw_jit_stats) AS buf_alloc};

my $before = query_hash($node, $counts_sql);
$node->command_ok(
	[
		'pgbench', '-n', '-S', '-c', '2', '-j', '2', '-T', '5',
		$node->connstr('postgres')
	],
	'a select-only load on a pool far smaller than the data');

# The backends publish their reads at the end of their transactions, the
# built-in writer its count at its next cycle, the worker its own at its
# next: wait until the reads have settled and both counts have caught up.
ok( $node->poll_query_until(
		'postgres', qq{
	WITH c AS ($counts_sql)
	SELECT reads - $before->{reads} > 10000
	   AND buffers_alloc - $before->{buffers_alloc} >= 0.95 * (reads - $before->{reads})
	FROM c}),
	'pg_stat_bgwriter.buffers_alloc counts at least 95% of the blocks read')
  or diag(explain(query_hash($node, $counts_sql)), 'before: ', explain($before));
my $after = query_hash($node, $counts_sql);
note(sprintf('reads %d, buffers_alloc +%d, buf_alloc +%d',
	$after->{reads} - $before->{reads},
	$after->{buffers_alloc} - $before->{buffers_alloc},
	$after->{buf_alloc} - $before->{buf_alloc}));
ok( $node->poll_query_until(
		'postgres', qq{
	WITH c AS ($counts_sql)
	SELECT buf_alloc - $before->{buf_alloc} >= 0.95 * (reads - $before->{reads})
	FROM c}),
	'bgw_jit_stats.buf_alloc follows it');

$node->stop;
done_testing();
