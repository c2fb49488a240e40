# The bgw_jit_bgwriter view: pg_stat_bgwriter with bgw_jit's writes
# counted as the background writer's.  Its figures are compared with what
# core itself counted, not with bgw_jit's own counters, in phases where
# only one kind of process writes:
# - backends alone (the worker disabled): the view's buffers_clean stays
#   core's (0), and on 15 its buffers_backend is core's buffers_backend;
# - the worker alone (cleaning the dirty buffers left, backends idle):
#   the view's buffers_clean rises by exactly the worker's writes as core
#   counted them (15: the rise of buffers_backend, which then holds only
#   the worker's; from 17: pg_stat_io's background-worker writes), its
#   maxwritten_clean by at least one cycle and at most one per 5 of
#   those writes (a cap of 5 pages a cycle in that phase, below the idle
#   pass's pace; 50 elsewhere), and on 15 its buffers_backend does not
#   move.
# Every other column is pg_stat_bgwriter's (compared by name, as the
# catalog lists them).  bgw_jit_reset() and a clean restart leave the view
# alone; after pg_stat_reset_shared('bgwriter') it is pg_stat_bgwriter
# exactly, and the two phases again give only the writes made since.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 5;
my $cap = 50;

# A per-cycle cap low enough that the worker hits it while cleaning.
my $node = start_bgw_jit_node(
	'bgwriter_view',
	scale => $scale,
	busy => 1,
	conf => "bgw_jit.lru_maxpages = $cap\n",
	extensions => ['pg_buffercache']);
my $pid = wait_for_worker($node);
my $v15 = $node->pg_version < 17;    # pg_stat_bgwriter has buffers_backend

# --- the columns, by name ---
sub columns
{
	my ($rel) = @_;
	return [
		split /\n/, $node->safe_psql(
			'postgres', qq{
		SELECT attname FROM pg_attribute
		 WHERE attrelid = '$rel'::regclass AND attnum > 0 AND NOT attisdropped
		 ORDER BY attname})
	];
}
# (1.3's view has 15's columns on every version: from 17 a superset)
my $core_cols = columns('pg_stat_bgwriter');
my %view_cols = map { $_ => 1 } @{ columns('bgw_jit_bgwriter') };
is(join(',', grep { !$view_cols{$_} } @$core_cols), '',
	'the view has every column of pg_stat_bgwriter');
my %share = map { $_ => 1 } qw(buffers_clean maxwritten_clean buffers_backend);
my @share_cols = grep { $share{$_} } @$core_cols;
my @other_cols = grep { !$share{$_} } @$core_cols;
is(scalar(@share_cols), $v15 ? 3 : 2,
	'buffers_clean, maxwritten_clean' . ($v15 ? ', buffers_backend' : '')
	  . ' are among them');

# SQL: whether the view's columns @cols equal pg_stat_bgwriter's.
sub same_as_core_sql
{
	my (@cols) = @_;
	return 'SELECT '
	  . join(' AND ', map { "v.$_ IS NOT DISTINCT FROM b.$_" } @cols)
	  . ' FROM bgw_jit_bgwriter v, pg_stat_bgwriter b';
}

# The view's and pg_stat_bgwriter's share columns (as view_X and core_X),
# whether every other column is the same in both, and core's count of
# the writes of client backends and of background workers (from 16).
my $io = $node->pg_version >= 16;
my $figures_sql =
	'SELECT '
  . join(', ', map { "v.$_ AS view_$_, b.$_ AS core_$_" } @share_cols)
  . ', ('
  . join(' AND ', map { "v.$_ IS NOT DISTINCT FROM b.$_" } @other_cols)
  . ') AS others_same'
  . ($io
	? ', ' . core_backend_writes_sql($node, without_workers => 1) . ' AS clients, '
	  . core_backend_writes_sql($node, only => 'background worker') . ' AS workers'
	: '')
  . ' FROM bgw_jit_bgwriter v, pg_stat_bgwriter b';

sub figures { return query_hash($node, $figures_sql); }

# The view's share columns, as text, for comparisons with themselves.
my $share_sql = 'SELECT ' . join(', ', @share_cols) . ' FROM bgw_jit_bgwriter';

# --- a clean start: nothing dirty, the worker disabled, a new period ---
set_conf($node, 'bgw_jit.enabled = off');
$node->safe_psql('postgres', 'CHECKPOINT');
settle_stats($node);
my $t = $node->safe_psql('postgres',
	"SELECT clock_timestamp() FROM pg_stat_reset_shared('bgwriter')");
is($node->safe_psql('postgres', same_as_core_sql(@$core_cols)), 't',
	'after pg_stat_reset_shared(\'bgwriter\') the view is pg_stat_bgwriter');
wait_for_cycle_after($node, $t);
is($node->safe_psql('postgres', same_as_core_sql(@$core_cols)), 't',
	'... also after the worker\'s next cycle');

# Backends alone: a load with the worker disabled.  Returns the figures
# after it.
sub backends_alone
{
	my ($label) = @_;
	my $f0 = figures();
	update_load($node, clients => 2, seconds => 3, scale => $scale);
	settle_stats($node);
	my $f = figures();
	is($f->{core_buffers_clean}, 0,
		"$label: pg_stat_bgwriter.buffers_clean stays 0 (bgwriter_lru_maxpages = 0)");
	is($f->{view_buffers_clean}, $f0->{view_buffers_clean},
		"$label: with the worker disabled, the view's buffers_clean does not move");
	is($f->{view_maxwritten_clean}, $f0->{view_maxwritten_clean},
		"$label: nor its maxwritten_clean");
	if ($v15)
	{
		cmp_ok($f->{core_buffers_backend} - $f0->{core_buffers_backend}, '>', 0,
			"$label: backends wrote (buffers_backend rose by "
			  . ($f->{core_buffers_backend} - $f0->{core_buffers_backend}) . ')');
		is( $f->{view_buffers_backend} - $f0->{view_buffers_backend},
			$f->{core_buffers_backend} - $f0->{core_buffers_backend},
			"$label: the view's buffers_backend rose by as much");
	}
	else
	{
		cmp_ok($f->{clients} - $f0->{clients}, '>', 0,
			"$label: backends wrote (pg_stat_io: "
			  . ($f->{clients} - $f0->{clients}) . ')');
	}
	ok($f->{others_same}, "$label: every other column is pg_stat_bgwriter's");
	return $f;
}

# The worker alone: the dirty, usage-0 buffers the load left, cleaned by
# the worker, set to lap the pool within a second, while backends do
# nothing; then the worker is disabled again.
my $dirty_sql = q{SELECT count(*) FROM pg_buffercache
	WHERE isdirty AND usagecount = 0 AND pinning_backends = 0};

sub worker_alone
{
	my ($label) = @_;
	# (our own queries read their catalog pages back now, not while the
	# worker cleans: any dirty buffer they evicted would be a backend's
	# write)
	my $dirty = $node->safe_psql('postgres', $dirty_sql);
	# (more than one cycle's cap, so that the cap stops at least one; a cap
	# below the idle pass's pace, which spreads the writes of an idle pool:
	# at a lap a second, 20 pages a 10 ms sleep and more as sleeps grow)
	my $alone_cap = 5;
	cmp_ok($dirty, '>', $alone_cap, "$label: $dirty dirty usage-0 buffers to clean");
	settle_stats($node);
	my $f0 = figures();
	set_conf($node, 'bgw_jit.enabled = on',
		'bgw_jit.scan_whole_pool_seconds = 1',
		"bgw_jit.lru_maxpages = $alone_cap");
	ok($node->poll_query_until('postgres', "SELECT ($dirty_sql) = 0"),
		"$label: the worker cleaned them");
	set_conf($node, 'bgw_jit.enabled = off');
	settle_stats($node);
	my $f = figures();
	# the worker's writes, as core counted them
	my $written =
	  $v15
	  ? $f->{core_buffers_backend} - $f0->{core_buffers_backend}
	  : $f->{workers} - $f0->{workers};
	cmp_ok($written, '>', 0,
		"$label: core counted $written writes of the worker ("
		  . ($v15 ? 'buffers_backend' : 'pg_stat_io') . ')');
	is($f->{clients} - $f0->{clients}, 0, "$label: and none by backends")
	  if $io;
	is($f->{core_buffers_clean}, 0,
		"$label: pg_stat_bgwriter.buffers_clean stays 0");
	is($f->{view_buffers_clean} - $f0->{view_buffers_clean}, $written,
		"$label: the view's buffers_clean rose by exactly the worker's writes");
	my $capped = $f->{view_maxwritten_clean} - $f0->{view_maxwritten_clean};
	cmp_ok($capped, '>', 0,
		"$label: its maxwritten_clean by $capped cycles stopped by the cap");
	cmp_ok($capped, '<=', $written / $alone_cap,
		"$label: at most one per $alone_cap of those writes");
	is($f->{view_buffers_backend}, $f0->{view_buffers_backend},
		"$label: 15: the view's buffers_backend does not move")
	  if $v15;
	ok($f->{others_same}, "$label: every other column is pg_stat_bgwriter's");
	return $f;
}

my $f = backends_alone('backends alone');
is($f->{view_buffers_clean}, 0, 'in the new period the view has no bgw_jit share');
is($f->{view_buffers_backend}, $f->{core_buffers_backend},
	'15: its buffers_backend is core\'s')
  if $v15;
worker_alone('worker alone');

# --- bgw_jit_reset() is not pg_stat_bgwriter's reset: the view stays ---
my $share_before = $node->safe_psql('postgres', $share_sql);
$t = $node->safe_psql('postgres', 'SELECT clock_timestamp() FROM bgw_jit_reset()');
wait_for_cycle_after($node, $t);
is($node->safe_psql('postgres', $share_sql), $share_before,
	'bgw_jit_reset() leaves bgw_jit_bgwriter alone');
is($node->safe_psql('postgres', 'SELECT buf_clean FROM bgw_jit_stats'),
	'0', '... while bgw_jit_stats restarts');

# --- a clean restart keeps pg_stat_bgwriter and bgw_jit's share of it ---
# (the worker stays disabled: bgw_jit.enabled = off is in the file)
$node->restart;
wait_for_worker($node);
is($node->safe_psql('postgres', $share_sql), $share_before,
	'a clean restart leaves the view\'s ' . join(', ', @share_cols) . ' as they were');

# --- pg_stat_reset_shared('bgwriter'): the view is pg_stat_bgwriter's ---
# at once (the worker has not seen the new period), and still after the
# worker's next cycle; then it counts only the writes made since.
$t = $node->safe_psql('postgres',
	"SELECT clock_timestamp() FROM pg_stat_reset_shared('bgwriter')");
is($node->safe_psql('postgres', same_as_core_sql(@$core_cols)), 't',
	'after pg_stat_reset_shared(\'bgwriter\') the view has no bgw_jit share');
wait_for_cycle_after($node, $t);
is($node->safe_psql('postgres', same_as_core_sql(@$core_cols)), 't',
	'... nor after the worker\'s next cycle');
$f = backends_alone('after the reset, backends alone');
is($f->{view_buffers_clean}, 0,
	'after the reset, backends alone: nothing of the old period in the view');
is($f->{view_buffers_backend}, $f->{core_buffers_backend},
	'after the reset, backends alone: 15: its buffers_backend is core\'s')
  if $v15;
worker_alone('after the reset, the worker alone');

$node->stop;
done_testing();
