# bgw_jit_advice: deliberately undersized settings under pgbench load give
# the expected findings and no others, with suggestions that point the
# right way; the defaults, idle, give none (under load that depends on the
# machine's speed, and is only noted).  Also bench/plot-history against
# the live server, and against a database without the extension.
# Every wait is on a condition with a timeout: a finding is waited for
# while the load runs, then checked with the load stopped.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Temp ();

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $scale = 10;
my $node = new_bgw_jit_node('advice', 'bgw_jit.history_size = 100000');
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
my $pid = wait_for_worker($node);

# pgbench in the background until stop_load(): update-only over the
# accounts (evictions of dirty pages), or 'hot' updates of the 100
# tellers (pages dirtied again and again, never evicted).
sub start_load
{
	my (%opt) = @_;
	my $clients = $opt{clients} // 2;
	my $file = File::Temp->new(SUFFIX => '.sql');
	print $file $opt{hot}
	  ? "\\set tid random(1, 10 * $scale)\n"
	  . "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = :tid;\n"
	  : "\\set aid random(1, 100000 * $scale)\n"
	  . "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n";
	close $file;
	chmod 0644, $file->filename;
	my %load = (file => $file, out => '', err => '');
	$load{h} = IPC::Run::start(
		[
			'pgbench', '-n', '-f', $file->filename, '-c', $clients,
			'-j', $clients, '-T', 900, '-h', $node->host, '-p', $node->port,
			'postgres'
		],
		'>', \$load{out}, '2>', \$load{err});
	return \%load;
}

sub stop_load
{
	my ($load) = @_;
	kill_pgbench($node, $load->{h});
	return;
}

# Settings through ALTER SYSTEM, reloaded and in use by the worker; the
# counters and history restart then.
sub configure
{
	my (@settings) = @_;
	$node->safe_psql('postgres',
		join(";\n", 'ALTER SYSTEM RESET ALL',
			map { "ALTER SYSTEM SET $_" } @settings));
	my $t = reload_and_wait($node);
	wait_for_cycle_after($node, $t);
	$node->safe_psql('postgres', 'SELECT bgw_jit_reset()');
	wait_for_cycle_after($node,
		$node->safe_psql('postgres', 'SELECT clock_timestamp()'));
	return;
}

# The findings as "setting|current|suggested|severity" lines, sorted.
sub advice
{
	return $node->safe_psql('postgres', q{
		SELECT coalesce(setting, '(none)') || '|' || coalesce(current_value, '')
			   || '|' || coalesce(suggested_value, '') || '|' || severity
		  FROM bgw_jit_advice ORDER BY setting});
}

sub advice_rows
{
	return { map { my @f = split /\|/, $_, -1;
			$f[0] => { current => $f[1], suggested => $f[2], severity => $f[3] } }
		  grep { $_ ne '' } split /\n/, advice() };
}

# A starved worker, made reproducible: stop it (SIGSTOP) until the
# backends have allocated twice the pool, let it run one cycle, and again,
# until $cond holds (false on timeout).  It then wakes far later than it
# planned, every time, while backends evict dirty buffers.
sub starve_until
{
	my ($cond) = @_;
	my $nbuffers = $node->safe_psql('postgres',
		"SELECT setting FROM pg_settings WHERE name = 'shared_buffers'");
	my $deadline = time + 2 * $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		return 1 if $node->safe_psql('postgres', "SELECT $cond") eq 't';
		my $alloc = $node->safe_psql('postgres',
			'SELECT buffers_alloc FROM pg_stat_bgwriter');
		stop_worker_asleep($pid) or return 0;
		my $moved = $node->poll_query_until('postgres',
			"SELECT buffers_alloc >= $alloc + 2 * $nbuffers FROM pg_stat_bgwriter");
		my $t = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
		kill 'CONT', $pid;
		return 0 unless $moved;
		wait_for_cycle_after($node, $t);
	}
	return 0;
}

# Under the load, wait until bgw_jit_advice has a row for each of
# @settings; then stop the load, bring buf_backend up to date, and return
# the rows.
sub findings_under_load
{
	my ($label, $load_opt, @settings) = @_;
	my $load = start_load(%$load_opt);
	my $cond = join(' AND ',
		map { "EXISTS (SELECT FROM bgw_jit_advice WHERE setting = '$_')" }
		  @settings);
	my $found = $load_opt->{starve}
	  ? starve_until($cond)
	  : $node->poll_query_until('postgres', "SELECT $cond");
	stop_load($load);
	ok($found, "$label: findings for " . join(', ', @settings))
	  or diag("bgw_jit_advice:\n" . advice() . "\npgbench: $load->{err}");
	settle_stats($node);
	my $rows = advice_rows();
	is_deeply([ sort keys %$rows ], [ sort @settings ],
		"$label: those findings and no others")
	  or diag("bgw_jit_advice:\n" . advice());
	return $rows;
}

# --- the defaults under load: a sample for bench/plot-history ---
# One client: under two, the hand of a fast machine passes this 16 MB pool
# at some 50 000 buffers a second, faster than the worker can wake to lead
# it, and the defaults rightly get the shared_buffers finding (tested
# below with 1 MB).  (On a 64 MB pool instead, over a tenth of the writes
# were re-dirtied, and the notice on wasted writes is right too.)
configure();
my $load = start_load(clients => 1);
# a sample well above the view's minimum evidence: 5000 writes, 100 busy
# cycles, the hand 20 times round the pool
ok( $node->poll_query_until(
		'postgres', q{
		SELECT (SELECT buf_clean + buf_backend >= 5000 FROM bgw_jit_stats)
		   AND (SELECT count(*) >= 100 AND sum(strategy_delta) >=
					   20 * (SELECT setting::bigint FROM pg_settings
							 WHERE name = 'shared_buffers')
				  FROM bgw_jit_history WHERE strategy_delta > 0)}),
	'defaults: a sizeable sample of load');
stop_load($load);
settle_stats($node);
my $d = query_hash($node, q{
	SELECT buf_clean, buf_backend, cleaner_pct,
		   (SELECT count(*) FROM bgw_jit_history WHERE strategy_delta > 0) AS busy
	  FROM bgw_jit_stats});
# (whether the defaults keep up with this load, and so draw no finding,
# depends on the machine's speed: a figure for bench/, not a check; the
# view's silence on sound settings is checked idle, below)
note("defaults under load: cleaned $d->{buf_clean}, backends wrote "
	  . "$d->{buf_backend}, $d->{busy} busy cycles; findings: "
	  . (advice() || 'none'));

# --- bench/plot-history against this server ---
my $plot = "$FindBin::RealBin/../bench/plot-history";
my $plotdir = PostgreSQL::Test::Utils::tempdir('plots');
my $conninfo = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
my ($out, $err);
my $ok = IPC::Run::run([ $plot, $conninfo, '--minutes', 5, '--out', $plotdir ],
	'>', \$out, '2>', \$err);
ok($ok, 'plot-history exits 0 on a live server') or diag("$out$err");
for my $png (qw(allocations writes lead judgements pacing history))
{
	my $f = "$plotdir/$png.png";
	my $head = '';
	if (open my $fh, '<:raw', $f)
	{
		read $fh, $head, 8;
		close $fh;
	}
	ok(-s $f && $head eq "\x89PNG\r\n\x1a\n", "plot-history wrote $png.png, a PNG");
}
$node->safe_psql('postgres', 'CREATE DATABASE no_bgw_jit');
$ok = IPC::Run::run(
	[
		$plot, 'host=' . $node->host . ' port=' . $node->port . ' dbname=no_bgw_jit',
		'--out', "$plotdir/none"
	],
	'>', \$out, '2>', \$err);
ok(!$ok, 'plot-history fails on a database without the extension');
like($err, qr/plot-history: cannot read bgw_jit_history: .*does not exist.*CREATE EXTENSION bgw_jit/s,
	'... and says why');
ok(!-e "$plotdir/none/history.png", '... writing no plot');

# --- a tiny page cap ---
configure('bgw_jit.lru_maxpages = 5');
my $r = findings_under_load('lru_maxpages = 5', {}, 'bgw_jit.lru_maxpages');
is($r->{'bgw_jit.lru_maxpages'}{current}, '5', 'the cap is reported as set');
is($r->{'bgw_jit.lru_maxpages'}{suggested}, '-1', 'no cap is suggested');
is($r->{'bgw_jit.lru_maxpages'}{severity}, 'warning', 'a warning');

# --- a tiny rate budget ---
configure('bgw_jit.max_write_rate = 1');
$r = findings_under_load('max_write_rate = 1', {}, 'bgw_jit.max_write_rate');
cmp_ok($r->{'bgw_jit.max_write_rate'}{suggested}, '>=', 2,
	"a higher rate is suggested ($r->{'bgw_jit.max_write_rate'}{suggested} MB/s)");

# --- fixed pacing with a multiplier too small ---
configure('bgw_jit.pacing = fixed', 'bgw_jit.lru_multiplier = 0.5');
$r = findings_under_load('fixed pacing, multiplier 0.5', {},
	'bgw_jit.lru_multiplier', 'bgw_jit.pacing');
is($r->{'bgw_jit.pacing'}{suggested}, 'auto', 'auto pacing is suggested');
is($r->{'bgw_jit.lru_multiplier'}{current}, '0.5', 'the multiplier as set');
is($r->{'bgw_jit.lru_multiplier'}{suggested}, 'auto', 'the automatic margin is suggested');

# --- both cleaners at once ---
configure('bgwriter_lru_maxpages = 100');
$node->safe_psql('postgres', "SELECT pg_stat_reset_shared('bgwriter')");
$load = start_load();
ok( $node->poll_query_until(
		'postgres', q{
		SELECT EXISTS (SELECT FROM bgw_jit_advice
						WHERE setting = 'bgwriter_lru_maxpages'
						  AND severity = 'warning' AND suggested_value = '0')}),
	'bgwriter_lru_maxpages = 100 under load: a warning, suggesting 0');
stop_load($load);

# --- jit+all writing hot pages that are dirtied again ---
# One finding on the strategy, the all-buffers scan's (its writes and the
# share re-dirtied as evidence), not also the general one on wasted writes.
configure("bgw_jit.strategy = 'jit+all'", 'bgw_jit.all_percent = 100',
	'bgw_jit.all_maxpages = 1000', "bgw_jit.delay = '20ms'");
$r = findings_under_load('jit+all on hot pages', { hot => 1 }, 'bgw_jit.strategy');
is($r->{'bgw_jit.strategy'}{suggested}, 'jit', 'the jit strategy is suggested');
is($r->{'bgw_jit.strategy'}{severity}, 'notice', 'a notice');
my $all_scan = query_hash($node, q{
	SELECT count(*) AS n, max(finding) AS finding, max(evidence) AS evidence
	  FROM bgw_jit_advice WHERE setting = 'bgw_jit.strategy'});
is($all_scan->{n}, 1, 'one finding on the strategy');
like($all_scan->{finding}, qr/all-buffers scan .* does not flatten checkpoints/,
	'the all-buffers scan\'s finding');
# The evidence's share re-dirtied is over the writes judged in the view's
# recent window, which after the load holds none once it has moved on:
# read it while the load runs.
$load = start_load(hot => 1);
my $evidence_sql = q{
	SELECT evidence FROM bgw_jit_advice
	 WHERE setting = 'bgw_jit.strategy'
	   AND evidence ~ 'the all-buffers scan wrote [1-9][0-9]* of the [0-9]+ pages .* were dirtied again'};
my $evidence_seen =
  $node->poll_query_until('postgres', "SELECT EXISTS ($evidence_sql)");
stop_load($load);
ok($evidence_seen, 'its evidence under the load: the scan\'s writes and the share re-dirtied')
  or diag("bgw_jit_advice:\n" . advice());

# --- settings that stop the cleaning (no load needed) ---
for my $case (['bgw_jit.enabled = off', 'bgw_jit.enabled', 'on'],
	['bgw_jit.lru_maxpages = 0', 'bgw_jit.lru_maxpages', '-1'])
{
	my ($set, $setting, $suggested) = @$case;
	configure($set);
	is(advice_rows()->{$setting}{suggested}, $suggested,
		"$set: a finding suggesting $suggested");
}

# --- the worker not running (stopped with SIGSTOP) ---
configure();
is(advice(), '', 'back to the defaults: no finding');
kill 'STOP', $pid;
my $stopped = $node->poll_query_until('postgres',
	q{SELECT EXISTS (SELECT FROM bgw_jit_advice WHERE setting IS NULL
					 AND finding LIKE '%not running%')});
kill 'CONT', $pid;
ok($stopped, 'a stopped worker is reported as not running');
ok( $node->poll_query_until(
		'postgres', 'SELECT NOT EXISTS (SELECT FROM bgw_jit_advice)'),
	'and no longer once it runs again');

# --- the automatic margin pinned at its bound, on a made-up history ---
# Reaching the bound live takes some 50 late cycles in a row, too slow to
# provoke reliably; so the view's own definition is run over a copy of
# the history and counters with made-up figures: backends writing, the
# margin at 10 (then at 9) over the last 30 busy cycles.
my $viewdef = $node->safe_psql('postgres', "SELECT pg_get_viewdef('bgw_jit_advice')");
$viewdef =~ s/\bbgw_jit_history\b/pg_temp.made_up_history/g;
$viewdef =~ s/\bbgw_jit_stats\b/pg_temp.made_up_stats/g;

# The findings ("setting|suggested" lines) over 30 made-up busy cycles,
# 100 ms apart, lapped, each writing 100 pages, with backends writing as
# much as the worker; of the cycles' judged earlier writes, 100 evicted
# and $c{redirtied} (0 by default) dirtied again.  $c{strategy}, if set,
# stands for the bgw_jit.strategy setting.
sub made_up_advice
{
	my (%c) = @_;
	$c{redirtied} //= 0;
	my $def = $viewdef;
	$def =~ s/current_setting\('bgw_jit\.strategy'(?:::text)?, true\)/'$c{strategy}'::text/
	  or die 'no bgw_jit.strategy setting in the view'
	  if defined $c{strategy};
	return $node->safe_psql('postgres', qq{
		CREATE TEMP TABLE made_up_stats AS SELECT * FROM bgw_jit_stats;
		UPDATE made_up_stats SET buf_clean = 5000, buf_backend = 5000,
			   last_cycle_at = now(), cpu_priority = 'normal';
		CREATE TEMP TABLE made_up_history AS
			SELECT * FROM bgw_jit_history LIMIT 0;
		INSERT INTO made_up_history (cycle, at, strategy, strategy_delta,
			written, all_written, reusable_found, evicted, redirtied,
			overrun, lapped, hit_maxpages, elapsed_us, margin, hand_rate,
			sleep_ms, bufs_ahead, sliced)
		SELECT i, now() - (30 - i) * interval '100 ms', 'jit', 2000,
			   100, 0, 100, 100, $c{redirtied}, 1000, true, false, 100000, $c{margin}, 20000,
			   $c{sleep_ms}, 0, $c{sliced}
		  FROM generate_series(1, 30) i;
		CREATE TEMP VIEW made_up_advice AS $def
		SELECT coalesce(setting, '') || '|' || coalesce(suggested_value, '(null)')
		  FROM made_up_advice ORDER BY 1});
}

for my $margin (10, 9)
{
	is(made_up_advice(margin => $margin, sleep_ms => 50, sliced => 'false'),
		$margin == 10 ? 'bgw_jit.lru_multiplier|(null)' : '',
		"made-up history, margin $margin: "
		  . ($margin == 10 ? 'the pinned margin, nothing to suggest' : 'no finding'));
}

# --- busy cycles at the 10 ms minimum sleep, each taking several time
# slices (as under direct I/O), on a made-up history as above ---
# A cycle's row shows its planned sleep once the cycle is over, and 1 ms
# only while it still goes on in its slices: the finding counts the
# first, not the second (1.3's view counted no sliced cycle at all).
like(made_up_advice(margin => 2, sleep_ms => 10, sliced => 'true'),
	qr/^shared_buffers\|\d+MB$/,
	'sliced busy cycles at sleep_ms 10: the shared_buffers finding');
is(made_up_advice(margin => 2, sleep_ms => 1, sliced => 'true'),
	'', 'sliced busy cycles still in their slices (sleep_ms 1): no finding');

# --- wasted writes, on a made-up history as above ---
# A third of the judged writes dirtied again (50 of 150 a cycle): the
# notice, suggesting (at the defaults) a rate cap of 3/4 of what the
# cleaner wrote, 3000 pages in 3 s, 7.8 MB/s: 6 MB/s; a twentieth (5 of
# 105), under its 10% threshold: none.
is(made_up_advice(margin => 2, sleep_ms => 50, sliced => 'false', redirtied => 50),
	'bgw_jit.max_write_rate|6',
	'a third of the judged writes dirtied again: the wasted-writes notice, a 6 MB/s cap');
is(made_up_advice(margin => 2, sleep_ms => 50, sliced => 'false', redirtied => 5),
	'', 'a twentieth of them: no finding');

# --- the fixed-pace strategies, on a made-up history as above ---
# lap and jit+all scan a fixed share of the pool a cycle, whatever the
# load: with backends writing as much as the worker, the warning to go
# back to jit; jit itself, the same history, no finding.
for my $strategy ('lap', 'jit+all', 'jit')
{
	is( made_up_advice(
			margin => 2,
			sleep_ms => 50,
			sliced => 'false',
			strategy => $strategy),
		$strategy eq 'jit' ? '' : 'bgw_jit.strategy|jit',
		"made-up history, strategy $strategy: "
		  . ($strategy eq 'jit' ? 'no finding' : 'the warning to use jit'));
}

# --- a pool the hand turns over faster than the worker can wake ---
$node->safe_psql('postgres', "ALTER SYSTEM SET shared_buffers = '1MB'");
$node->restart;
$pid = wait_for_worker($node);
configure("shared_buffers = '1MB'");
$r = findings_under_load('shared_buffers = 1MB', {}, 'shared_buffers');
like($r->{shared_buffers}{suggested}, qr/^\d+MB$/, 'a pool size is suggested');
cmp_ok($r->{shared_buffers}{suggested} =~ s/MB$//r, '>=', 2,
	"larger than 1MB ($r->{shared_buffers}{suggested})");
$node->safe_psql('postgres', 'ALTER SYSTEM RESET ALL');
$node->restart;
$pid = wait_for_worker($node);

# --- a starved worker: low CPU priority ---
# (last: raising the priority again needs a restart).  Whether nice 10
# alone starves the worker depends on what else the machine runs, so the
# starving is done with SIGSTOP (starve_until): the view sees a worker at
# low priority that falls behind.  (Its margin may climb to the bound
# meanwhile, which is a finding too.)
configure("bgw_jit.cpu_priority = 'low'");
is($node->safe_psql('postgres', 'SELECT cpu_priority FROM bgw_jit_stats'),
	'low', 'the worker runs at low priority');
$load = start_load();
ok(starve_until(q{EXISTS (SELECT FROM bgw_jit_advice
						   WHERE setting = 'bgw_jit.cpu_priority')}),
	'cpu_priority = low, worker starved: a finding for bgw_jit.cpu_priority');
stop_load($load);
settle_stats($node);
$r = advice_rows();
is($r->{'bgw_jit.cpu_priority'}{suggested}, 'normal', 'normal priority is suggested');
is_deeply([ grep { $_ ne 'bgw_jit.cpu_priority' && $_ ne 'bgw_jit.lru_multiplier' }
		  sort keys %$r ],
	[], 'no other finding (but the pinned margin)')
  or diag("bgw_jit_advice:\n" . advice());

# Raising it back needs privileges a server normally lacks: the worker
# keeps low, and the advice says so (if the server may raise it, no
# such notice).
$node->safe_psql('postgres',
	"ALTER SYSTEM SET bgw_jit.cpu_priority = 'normal'");
reload_and_wait($node);
wait_for_cycle_after($node, $node->safe_psql('postgres', 'SELECT clock_timestamp()'));
my $in_force = $node->safe_psql('postgres', 'SELECT cpu_priority FROM bgw_jit_stats');
my $notice = $node->safe_psql('postgres', q{
	SELECT current_value || '|' || suggested_value FROM bgw_jit_advice
	 WHERE setting = 'bgw_jit.cpu_priority' AND severity = 'notice'});
# (which of the two depends on the server's privileges: said in the name)
if ($in_force eq 'low')
{
	is($notice, 'low|normal',
		'a refused raise (no CAP_SYS_NICE): the notice shows low in force, normal configured');
}
else
{
	is($notice, '', 'the priority was raised (the server may raise priorities): no notice');
}

$node->stop;
done_testing();
