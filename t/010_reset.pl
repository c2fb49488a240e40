# bgw_jit_reset() in a tight loop under load.  After every reset:
# - buf_backend never exceeds the rise of buffers_backend since the reset
#   (a reading the worker took before a reset must not be counted after
#   it, where it would look like a counter reset and add its whole total);
# - the worker never judges more writes than it counted since the reset
#   (judgements of earlier writes belong to the period that was reset).
# And a reset leaves the caller's statistics snapshot alone.
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
	'reset',
	scale => $scale,
	busy => 1,
	conf => "bgw_jit.delay = 10ms\n");

# One session reloads (which makes the checkpointer absorb backend write
# counts and the worker start a cycle), resets a random moment later,
# waits another, then reads both figures.  buffers_backend (from 16:
# pg_stat_io's count, see BgwJitTest) is read before the reset and after
# bgw_jit_stats, so its rise bounds what the worker may have counted since
# the reset.
my $backend = core_backend_writes_sql($node);
$node->safe_psql(
	'postgres', qq{
	CREATE FUNCTION reset_loop(seconds float8,
		OUT resets int, OUT backend_exceeded int, OUT max_excess bigint,
		OUT over_judged int)
	LANGUAGE plpgsql AS \$\$
	DECLARE
		stop timestamptz := clock_timestamp() + seconds * interval '1 s';
		b0 bigint;
		b1 bigint;
		s record;
	BEGIN
		SET stats_fetch_consistency = none;
		resets := 0; backend_exceeded := 0; max_excess := 0; over_judged := 0;
		WHILE clock_timestamp() < stop LOOP
			PERFORM pg_reload_conf();
			PERFORM pg_sleep(random() * 0.004);
			b0 := $backend;
			PERFORM bgw_jit_reset();
			PERFORM pg_sleep(random() * 0.02);
			SELECT * INTO s FROM bgw_jit_stats;
			b1 := $backend;
			resets := resets + 1;
			IF s.buf_backend > b1 - b0 THEN
				backend_exceeded := backend_exceeded + 1;
				max_excess := greatest(max_excess, s.buf_backend - (b1 - b0));
			END IF;
			IF s.buf_clean_evicted + s.buf_clean_redirtied >
			   s.buf_clean + s.buf_all_clean THEN
				over_judged := over_judged + 1;
			END IF;
		END LOOP;
	END
	\$\$});

my $load = start_update_load($node, clients => 2, seconds => 11,
	scale => $scale);
$node->poll_query_until('postgres',
	'SELECT buf_clean > 0 AND buf_backend > 0 FROM bgw_jit_stats')
  or die 'no writes under load';
my $r = query_hash($node, 'SELECT * FROM reset_loop(8)');
$load->finish;
note("$r->{resets} resets; buf_backend exceeded the rise $r->{backend_exceeded} "
	  . "times (by up to $r->{max_excess}); judgements exceeded writes "
	  . "$r->{over_judged} times");
cmp_ok($r->{resets}, '>', 50, "$r->{resets} resets under load");
is($r->{backend_exceeded}, 0,
	'buf_backend never exceeded the rise of buffers_backend since the reset');
is($r->{over_judged}, 0,
	'the worker never judged more writes than it made since the reset');
is(worker_pid($node) ne '', 1, 'the worker is still running');

# --- the caller's statistics snapshot survives a reset ---
my @ts = split /\n/, $node->safe_psql(
	'postgres', q{
	SET stats_fetch_consistency = snapshot;
	BEGIN;
	SELECT xact_commit > 0 FROM pg_stat_database
	WHERE datname = current_database();
	SELECT pg_stat_get_snapshot_timestamp();
	SELECT bgw_jit_reset();
	SELECT xact_commit > 0 FROM pg_stat_database
	WHERE datname = current_database();
	SELECT pg_stat_get_snapshot_timestamp();
	COMMIT;});
@ts = grep { /^\d{4}-/ } @ts;
is(scalar @ts, 2, 'two snapshot timestamps read');
is($ts[1], $ts[0], 'bgw_jit_reset() kept the snapshot of the transaction');

# --- 15: the worker's writes still queued at a reset are its own ---
# buffers_backend includes the worker's writes, and only once the
# checkpointer absorbs them.  Writes the worker made before a reset and the
# checkpointer absorbs after it must not count as backends' writes.  Here
# backends write nothing (HOT updates in half-empty pages of a table that
# fits the pool, after a checkpoint), the worker writes the table's dirty
# pages, and the reset falls between those writes and their absorption.
SKIP:
{
	skip 'from 16 the worker\'s writes are not in the backends\' count', 5
	  if $node->pg_version >= 16;

	$node->safe_psql(
		'postgres', q{
		CREATE EXTENSION pg_buffercache;
		CREATE TABLE carry (id int, v int, pad text) WITH (fillfactor = 50);
		INSERT INTO carry SELECT g, 0, repeat('x', 200)
		FROM generate_series(1, 6000) g;
		CHECKPOINT});
	set_conf($node, "bgw_jit.strategy = 'jit+all'",
		'bgw_jit.all_percent = 100', 'bgw_jit.all_maxpages = 100000');
	settle_stats($node);
	my $b0 = $node->safe_psql('postgres', $backend);
	my $size_sql = q{SELECT pg_relation_size('carry')};
	my $size0 = $node->safe_psql('postgres', $size_sql);
	my $dirty_sql = q{SELECT count(*) FROM pg_buffercache
		WHERE isdirty AND relfilenode = pg_relation_filenode('carry')};

	$node->safe_psql('postgres', 'UPDATE carry SET v = v + 1');
	my $dirtied = $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_buffercache
		  WHERE relfilenode = pg_relation_filenode('carry')});
	ok($node->poll_query_until('postgres', $dirty_sql, '0'),
		"the worker wrote the $dirtied pages the update dirtied");
	$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
	ok( $node->poll_query_until(
			'postgres', 'SELECT buf_backend_at IS NOT NULL FROM bgw_jit_stats'),
		'the worker read its new baseline');
	# The scenario holds only if the checkpointer had not absorbed them yet.
	is($node->safe_psql('postgres', $backend),
		$b0, 'the writes were not yet absorbed at the reset');

	settle_stats($node);
	my ($rise, $grew, $buf_backend) = split /\|/, $node->safe_psql(
		'postgres', qq{SELECT $backend - $b0, ($size_sql) - $size0,
			(SELECT buf_backend FROM bgw_jit_stats)});
	note("buffers_backend rose by $rise, the table grew by $grew bytes");
	cmp_ok($rise, '>=', $dirtied,
		'buffers_backend rose by the worker\'s writes once absorbed');
	is($buf_backend, 0,
		'buf_backend does not count the worker\'s writes made before the reset');
}

$node->stop;
done_testing();
