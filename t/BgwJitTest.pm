# Helpers shared by bgw_jit's TAP tests.
package BgwJitTest;

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use JSON::PP qw(decode_json);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

our @EXPORT = qw(new_bgw_jit_node start_bgw_jit_node pgbench_init
  update_load start_update_load
  reload_and_wait set_conf wait_for_cycle_after settle_stats
  core_backend_writes_sql wal_writes_sql query_hash wait_for_connections
  wait_for_worker wait_for_exit replay_pacer_mismatches worker_pid postmaster_pid check_integrity has_fault_injection
  start_crash_load finish_crash_load stop_crash_load check_tpcb_invariant
  postmaster_child_pid postmaster_child_pids proc_io worker_io start_no_wait
  isready_status voluntary_switches);

# pgbench's update-only transaction: random single-row updates of
# pgbench_accounts, the workload that makes backends evict dirty pages.
my $update_script = <<'EOS';
\set aid random(1, 100000 * :scale)
\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
EOS

# A cluster with data checksums, the library preloaded, the built-in LRU
# scan off and checkpoints out of the way, so that what is measured is
# LRU cleaning.  Extra postgresql.conf lines in $extra_conf, further
# options for Cluster::init (e.g. allows_streaming) after it, and
# install_path => DIR for a server other than the one under test (its
# bin/ and lib/ in DIR).
sub new_bgw_jit_node
{
	my ($name, $extra_conf, %init) = @_;
	my $install_path = delete $init{install_path};
	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $install_path ? (install_path => $install_path) : ());
	$node->init(extra => ['--data-checksums'], %init);
	$node->append_conf('postgresql.conf', <<"EOC");
shared_preload_libraries = 'bgw_jit'
shared_buffers = 16MB
bgwriter_lru_maxpages = 0
synchronous_commit = off
max_wal_size = 4GB
checkpoint_timeout = 30min
autovacuum = off
log_min_messages = info
EOC
	$node->append_conf('postgresql.conf', $extra_conf) if defined $extra_conf;
	return $node;
}

# A cleaner busy enough to keep up with pgbench on the 16 MB pool.
my $busy_cleaner = <<'EOC';
bgw_jit.delay = 20ms
bgw_jit.lru_multiplier = 4.0
bgw_jit.lru_maxpages = 1000
EOC

# new_bgw_jit_node, started, with a pgbench database of scale $opt{scale}
# and CREATE EXTENSION bgw_jit plus @{$opt{extensions}}.  $opt{busy}: the
# busy cleaner settings above; $opt{conf}: lines after them (which win);
# $opt{init}: options for Cluster::init.
sub start_bgw_jit_node
{
	my ($name, %opt) = @_;
	my $conf = ($opt{busy} ? $busy_cleaner : '') . ($opt{conf} // '');
	my $node = new_bgw_jit_node($name, $conf, %{ $opt{init} // {} });
	$node->start;
	pgbench_init($node, $opt{scale});
	$node->safe_psql('postgres',
		join('; ',
			map { "CREATE EXTENSION $_" } 'bgw_jit', @{ $opt{extensions} // [] }));
	return $node;
}

sub pgbench_init
{
	my ($node, $scale) = @_;
	$node->command_ok([ 'pgbench', '-i', '-q', '-s', $scale, 'postgres' ],
		"pgbench -i -s $scale");
	return;
}

sub update_load_command
{
	my ($node, %opt) = @_;
	my $clients = $opt{clients} // 1;
	my $seconds = $opt{seconds} // 5;
	my $scale = $opt{scale} // 10;
	my $file = File::Temp->new(SUFFIX => '.sql');
	print $file $update_script;
	close $file;
	chmod 0644, $file->filename;
	return (
		$file,
		[
			'pgbench', '-n', '-f', $file->filename, '-s', $scale,
			'-c', $clients, '-j', $clients, '-T', $seconds,
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		"pgbench update load, $clients client(s), ${seconds}s");
}

# Run the update-only load; returns pgbench's output.
sub update_load
{
	my ($node, %opt) = @_;
	my ($file, $cmd, $label) = update_load_command($node, %opt);
	my ($stdout, $stderr);
	my $ok = IPC::Run::run($cmd, '>', \$stdout, '2>', \$stderr);
	ok($ok, $label) or diag($stderr);
	return $stdout;
}

# Start the update-only load in the background; the handle's finish()
# waits for it, checks that it succeeded and returns pgbench's output.
sub start_update_load
{
	my ($node, %opt) = @_;
	my ($file, $cmd, $label) = update_load_command($node, %opt);
	my %load = (file => $file, label => $label);
	$load{h} = IPC::Run::start($cmd, '>', \$load{out}, '2>', \$load{err});
	return bless \%load, 'BgwJitTest::Load';
}

sub BgwJitTest::Load::finish
{
	my ($load) = @_;
	my $ok = $load->{h}->finish;
	ok($ok, $load->{label}) or diag($load->{err});
	return $load->{out};
}

# Reload the configuration and wait until the worker has loaded it (its
# conf_load_time reaches past the moment of the request); returns that
# moment.
sub reload_and_wait
{
	my ($node) = @_;
	my $t = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT conf_load_time >= '$t' FROM bgw_jit_stats")
	  or die 'the worker did not reload its configuration';
	return $t;
}

# Append settings to postgresql.conf and wait until the worker uses them.
sub set_conf
{
	my ($node, @lines) = @_;
	$node->append_conf('postgresql.conf', join("\n", @lines));
	return reload_and_wait($node);
}

# Wait until the worker has published a cycle that began after $t.
sub wait_for_cycle_after
{
	my ($node, $t) = @_;
	$node->poll_query_until('postgres',
		"SELECT last_cycle_at > '$t' FROM bgw_jit_stats")
	  or die "no worker cycle after $t";
	return;
}

# Bring bgw_jit_stats.buf_backend up to date.  On 15 buffers_backend
# reaches pgstat only when the checkpointer absorbs its request queue,
# which a reload makes it do; the worker folds the new value in at its
# next cycle.  From 16 each process reports its I/O to pg_stat_io itself
# (a session when it ends), and the worker samples it about once a second.
# So: (15: reload, then) read the server's count at time t and wait until
# buf_backend_at shows the worker has folded a reading taken after t; done
# when the count is still the same then.  From 16 the count leaves out
# background workers: bgw_jit's own writes are not in buf_backend, and a
# cleaner still at work after a load (held to a page a cycle, say) would
# keep it moving.
sub settle_stats
{
	my ($node) = @_;
	my $count = core_backend_writes_sql($node, without_workers => 1);
	reload_and_wait($node) if $node->pg_version < 16;
	my $prev = -1;
	for (1 .. 100)
	{
		my ($b, $t) = split /\|/,
		  $node->safe_psql('postgres', "SELECT $count, clock_timestamp()");
		return if $b == $prev;
		$prev = $b;
		$node->poll_query_until('postgres',
			"SELECT buf_backend_at > '$t' FROM bgw_jit_stats")
		  or die 'the worker did not read the backend writes again';
	}
	die 'backend writes never settled';
}

# SQL for the server's own count of backend writes, the figure bgw_jit's
# buf_backend is derived from: pg_stat_bgwriter.buffers_backend on 15
# (this worker's writes included); from 16, normal-context relation
# writes in pg_stat_io by every process type but the checkpointer and the
# bgwriter.  From 16 also: only => TYPE counts one backend type's writes,
# without_workers => 1 leaves out background workers (bgw_jit among them).
sub core_backend_writes_sql
{
	my ($node, %opt) = @_;
	return '(SELECT buffers_backend FROM pg_stat_bgwriter)'
	  if $node->pg_version < 16;
	my @out = ('checkpointer', 'background writer');
	push @out, 'background worker' if $opt{without_workers};
	my $which =
	  defined $opt{only}
	  ? "backend_type = '$opt{only}'"
	  : 'backend_type NOT IN (' . join(', ', map { "'$_'" } @out) . ')';
	return "(SELECT coalesce(sum(writes), 0) FROM pg_stat_io
		WHERE object = 'relation' AND context = 'normal' AND $which)";
}

# From 16: bgw_jit's own write count and buf_backend against pg_stat_io's
# writes by background workers (bgw_jit's processes) and by all other
# processes but the checkpointer and the bgwriter, since a baseline.
# io_baseline resets bgw_jit's counters and reads pg_stat_io's;
# io_agreement waits until the two pairs agree (each process reports its
# writes within about a second) and returns own, buf_backend, workers and
# others since the baseline.
sub io_baseline
{
	my ($node) = @_;
	my $others = core_backend_writes_sql($node, without_workers => 1);
	my $workers = core_backend_writes_sql($node, only => 'background worker');
	return query_hash($node,
		"SELECT bgw_jit_reset(), $others AS others, $workers AS workers");
}

sub io_agreement
{
	my ($node, $base) = @_;
	my $others = core_backend_writes_sql($node, without_workers => 1);
	my $workers = core_backend_writes_sql($node, only => 'background worker');
	my $figures = "SELECT buf_clean + buf_all_clean AS own, buf_backend,
		$others - $base->{others} AS others,
		$workers - $base->{workers} AS workers FROM bgw_jit_stats";
	$node->poll_query_until('postgres',
		"SELECT own = workers AND buf_backend = others FROM ($figures) f");
	return query_hash($node, $figures);
}
push @EXPORT, qw(io_baseline io_agreement);

# SQL for the number of WAL writes: pg_stat_wal.wal_write up to 17; from
# 18, where that column is gone, the WAL writes in pg_stat_io.
sub wal_writes_sql
{
	my ($node) = @_;
	return '(SELECT wal_write FROM pg_stat_wal)' if $node->pg_version < 18;
	return "(SELECT coalesce(sum(writes), 0) FROM pg_stat_io
		WHERE object = 'wal')";
}

# One row of a query as a hash of column => value.
sub query_hash
{
	my ($node, $sql) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT row_to_json(q) FROM ($sql) q");
	return decode_json($out);
}

# Data integrity after a test that wrote: amcheck over every heap and
# btree in every database, and no checksum failures.
sub check_integrity
{
	my ($node, $label) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'pg_amcheck', '--install-missing', '--all', '--heapallindexed',
			'-h', $node->host, '-p', $node->port
		],
		'>', \$stdout, '2>', \$stderr);
	ok($ok && $stdout eq '', "$label: pg_amcheck finds no corruption")
	  or diag("pg_amcheck: $stdout$stderr");
	is( $node->safe_psql(
			'postgres',
			'SELECT coalesce(sum(checksum_failures), 0) FROM pg_stat_database'),
		'0',
		"$label: no checksum failures");
	return;
}

# A load to crash under: pgbench's TPC-B-like transactions (2 clients,
# whose invariant check_tpcb_invariant() verifies) plus one client that
# inserts into table acked with synchronous_commit = on, so that every
# transaction pgbench counts as processed was acknowledged durable.
sub start_crash_load
{
	my ($node, $seconds, $scale) = @_;
	$node->safe_psql('postgres',
		'CREATE TABLE IF NOT EXISTS acked (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())');
	my $file = File::Temp->new(SUFFIX => '.sql');
	print $file "INSERT INTO acked DEFAULT VALUES;\n";
	close $file;
	chmod 0644, $file->filename;
	my @conn = ('-h', $node->host, '-p', $node->port, 'postgres');
	my %load = (file => $file);
	$load{tpcb} = IPC::Run::start(
		[ 'pgbench', '-n', '-b', 'tpcb-like', '-s', $scale, '-c', 2, '-j', 2,
		  '-T', $seconds, @conn ],
		'>', \$load{tpcb_out}, '2>', \$load{tpcb_err});
	local $ENV{PGOPTIONS} = '-c synchronous_commit=on';
	$load{acked} = IPC::Run::start(
		[ 'pgbench', '-n', '-f', $file->filename, '-c', 1, '-T', $seconds,
		  @conn ],
		'>', \$load{acked_out}, '2>', \$load{acked_err});
	return \%load;
}

# Wait for the load to end (clients abort when the server crashes); the
# number of inserts acknowledged to the client.
sub finish_crash_load
{
	my ($load) = @_;
	$load->{tpcb}->finish;
	$load->{acked}->finish;
	my ($n) = $load->{acked_out} =~ /actually processed: (\d+)/;
	return $n // 0;
}

# Stop the load early (its clients die; their open transactions roll
# back, so TPC-B's invariant still holds).
sub stop_crash_load
{
	my ($load) = @_;
	$load->{tpcb}->kill_kill;
	$load->{acked}->kill_kill;
	return;
}

# TPC-B's invariant: every transaction adds the same delta to one account,
# teller and branch and logs it in history.  With $with_simple_update,
# pgbench's simple-update also ran (account and history only), so only
# accounts = history and tellers = branches hold.
sub check_tpcb_invariant
{
	my ($node, $label, $with_simple_update) = @_;
	my $r = $node->safe_psql(
		'postgres', q{
		SELECT (SELECT sum(abalance) FROM pgbench_accounts),
			   (SELECT sum(tbalance) FROM pgbench_tellers),
			   (SELECT sum(bbalance) FROM pgbench_branches),
			   (SELECT coalesce(sum(delta), 0) FROM pgbench_history)});
	my ($a, $t, $b, $h) = split /\|/, $r;
	my $ok = $with_simple_update
	  ? ($a == $h && $t == $b)
	  : ($a == $t && $t == $b && $b == $h);
	ok($ok,
		"$label: pgbench balances agree (accounts $a, tellers $t, branches $b, history $h)");
	return;
}

# Whether the installed build has the test-only bgw_jit.inject_error.
sub has_fault_injection
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_settings WHERE name = 'bgw_jit.inject_error'")
	  eq '1';
}

# The bgw_jit worker's pid, or '' if none runs.  The worker has no
# database connection, so it is not in pg_stat_activity: look for the
# postmaster's child whose process title names it, from the kernel.
sub worker_pid
{
	my ($node) = @_;
	return postmaster_child_pid($node, qr/bgw_jit cleaner/);
}

# The pid of the postmaster's child whose process title (from /proc, as
# "postgres: [cluster_name: ]title") matches $title_re, or '' if none
# does: the worker, or the startup process ("startup recovering ..."),
# which are not in pg_stat_activity or not while connections are refused.
sub postmaster_child_pid
{
	my ($node, $title_re) = @_;
	my ($pid) = postmaster_child_pids($node, $title_re);
	return $pid // '';
}

# The pids of all the postmaster's children whose titles match $title_re.
sub postmaster_child_pids
{
	my ($node, $title_re) = @_;
	my $pm = postmaster_pid($node) or return ();
	my @pids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		my ($pid) = $stat =~ m{/proc/(\d+)/stat};
		open(my $fh, '<', $stat) or next;
		my $line = <$fh>;
		close $fh;
		# pid (comm) state ppid ...; comm may hold spaces and parentheses
		next unless defined $line && $line =~ /\) \S+ (\d+) /;
		next unless $1 == $pm;
		open(my $ch, '<', "/proc/$pid/cmdline") or next;
		local $/;
		my $cmd = <$ch> // '';
		close $ch;
		$cmd =~ s/\0+$//;
		$cmd =~ s/^postgres: (?:[^:]*: )?//;
		push @pids, $pid if $cmd =~ $title_re;
	}
	return @pids;
}

# /proc/PID/io summed over the cleaner and its writer processes: every
# write bgw_jit_stats counts is made by one of them.  undef when no
# cleaner runs.
sub worker_io
{
	my ($node) = @_;
	my @pids = postmaster_child_pids($node,
		qr/^bgw_jit (?:cleaner|writer \d+)\b/);
	my %sum;
	for my $io (grep { defined } map { proc_io($_) } @pids)
	{
		$sum{$_} += $io->{$_} for keys %$io;
	}
	return %sum ? \%sum : undef;
}

# The voluntary context switches of process $pid (/proc/PID/status), or
# undef if it is gone: the kernel's upper bound on the cycles a worker
# ran, as each cycle (and each slice of one) ends in a sleep, and its
# other waits (for a lock, for I/O) only add to the count.
sub voluntary_switches
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	my ($n) = map { /^voluntary_ctxt_switches:\s+(\d+)/ ? $1 : () } <$fh>;
	close $fh;
	return $n;
}

# /proc/$pid/io as a hash of field => count (rchar, wchar, syscr, syscw,
# read_bytes, write_bytes, cancelled_write_bytes), or undef if the
# process is gone (or $pid is empty).  The file is read in one go.
sub proc_io
{
	my ($pid) = @_;
	return undef unless $pid;
	open(my $fh, '<', "/proc/$pid/io") or return undef;
	local $/;
	my $text = <$fh>;
	close $fh;
	return undef unless defined $text && $text =~ /wchar/;
	my %io = $text =~ /^(\w+):\s*(\d+)$/mg;
	return \%io;
}

# Start $node without waiting for it to accept connections (pg_ctl start
# without -w; Cluster's start always waits), so that a test can watch
# crash recovery.  Returns once the postmaster has written its pid file,
# with the node's pid recorded so that its stop and teardown work.
sub start_no_wait
{
	my ($node) = @_;
	my $offset = -e $node->logfile ? -s $node->logfile : 0;
	local $ENV{PGAPPNAME};
	PostgreSQL::Test::Utils::system_or_bail(
		'pg_ctl', '-W', '-D', $node->data_dir,
		'-l', $node->logfile, '-o', '--cluster-name=' . $node->name,
		'start');
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		if (postmaster_pid($node))
		{
			# (the framework's own record of the pid: start() does the same)
			$node->_update_pid(1);
			return;
		}
		my $log = -e $node->logfile ? slurp_file($node->logfile, $offset) : '';
		BAIL_OUT('node ' . $node->name . " did not start:\n$log")
		  if $log =~ /(?:FATAL|PANIC):/;
		usleep(100_000);
	}
	BAIL_OUT('the postmaster of node ' . $node->name . ' wrote no pid file');
}

# pg_isready's exit status for $node: 0 accepting connections, 1
# rejecting them (starting up, in crash recovery, a standby with
# hot_standby = off), 2 no response.
sub isready_status
{
	my ($node) = @_;
	IPC::Run::run(
		[ 'pg_isready', '-q', '-h', $node->host, '-p', $node->port ]);
	return $? >> 8;
}

# The postmaster's pid, from postmaster.pid; undef if it is not running.
sub postmaster_pid
{
	my ($node) = @_;
	my $file = $node->data_dir . '/postmaster.pid';
	open(my $fh, '<', $file) or return undef;
	my $pid = <$fh>;
	close $fh;
	return undef unless defined $pid;
	chomp $pid;
	return ($pid =~ /^\d+$/ && kill(0, $pid)) ? $pid : undef;
}

# Wait until the server accepts connections again after a crash restart.
# (poll_query_until feeds psql its query on stdin, and dies of EPIPE when
# psql is turned away during recovery before reading it.)
sub wait_for_connections
{
	my ($node) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1
		  if IPC::Run::run(
			[ 'pg_isready', '-q', '-h', $node->host, '-p', $node->port ]);
		usleep(100_000);
	}
	return 0;
}

# Wait until a bgw_jit worker other than $old_pid is running; its pid.
sub wait_for_worker
{
	my ($node, $old_pid) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		my $pid = worker_pid($node);
		return $pid if $pid && (!defined $old_pid || $pid != $old_pid);
		usleep(100_000);
	}
	return undef;
}

# Kill a background pgbench started with IPC::Run::start and wait until
# its sessions have gone: a backend finishes (and commits) the statement
# it was running when its client vanished.
sub kill_pgbench
{
	my ($node, $h) = @_;
	$h->kill_kill;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'pgbench'")
	  or die 'pgbench sessions still there';
	return;
}
push @EXPORT, 'kill_pgbench';

# Wait until process $pid has gone (exited and been reaped); true if it
# did within $seconds (default: the suite's timeout).
sub wait_for_exit
{
	my ($pid, $seconds) = @_;
	my $deadline = Time::HiRes::time() +
	  ($seconds // $PostgreSQL::Test::Utils::timeout_default);
	while (Time::HiRes::time() < $deadline)
	{
		return 1 unless kill(0, $pid);
		usleep(50_000);
	}
	return 0;
}

# --- core's arithmetic over the live history ---

push @EXPORT, qw(replay_core_estimator);

# Run a stretch of the live history through core's BgBufferSync()
# arithmetic, transcribed in PL/pgSQL in sql/core_bgbuffersync.sql (which
# the regression test also checks bgw_jit_replay() against): started from
# the state its first cycle recorded, every later cycle must come out
# with the smoothed_alloc, smoothed_density and upcoming_alloc_est the
# worker recorded.  Independent of the worker's C code, unlike
# bgw_jit_replay().  $opt{cycles}: SQL for the rows of bgw_jit_history to
# replay, consecutive cycles of one worker in which the scan ran;
# $opt{multiplier}: the lru_multiplier set, or undef for each cycle's
# recorded margin (the automatic one); $opt{delay} (ms), $opt{smoothing},
# $opt{whole} (scan_whole_pool_seconds): the settings in force.  Returns
# (cycles replayed, cycles that match, the first that does not or '').
sub replay_core_estimator
{
	my ($node, %opt) = @_;
	require File::Basename;
	my $file = File::Basename::dirname(__FILE__) . '/../sql/core_bgbuffersync.sql';
	my $function = PostgreSQL::Test::Utils::slurp_file($file);
	my $multiplier = $opt{multiplier} // 0;
	my $margins = defined $opt{multiplier} ? 'NULL'
	  : '(SELECT array_agg(margin ORDER BY n) FROM rest)';
	my $out = $node->safe_psql(
		'postgres', $function . qq{
		WITH h AS (SELECT * FROM ($opt{cycles}) x
					WHERE NOT (sliced AND sleep_ms = 1)),
			 first AS (SELECT * FROM h ORDER BY cycle LIMIT 1),
			 rest AS (SELECT row_number() OVER (ORDER BY cycle) AS n, h.*
						FROM h WHERE cycle > (SELECT cycle FROM first)),
			 c AS (
				SELECT c.* FROM first, pg_temp.core_bgbuffersync(
					(SELECT array_agg(recent_alloc ORDER BY n) FROM rest),
					(SELECT array_agg(strategy_delta ORDER BY n) FROM rest),
					(SELECT array_agg(bufs_ahead::bigint ORDER BY n) FROM rest),
					(SELECT array_agg(scanned::bigint ORDER BY n) FROM rest),
					(SELECT array_agg(reusable_found::bigint ORDER BY n) FROM rest),
					$multiplier, $opt{smoothing}, $opt{delay}, $opt{whole},
					(SELECT setting::int FROM pg_settings
					  WHERE name = 'shared_buffers'),
					start_smoothed_alloc => first.smoothed_alloc,
					start_smoothed_density => first.smoothed_density,
					multipliers => $margins) c),
			 cmp AS (
				SELECT rest.cycle, c.smoothed_alloc = rest.smoothed_alloc
					   AND c.smoothed_density = rest.smoothed_density
					   AND c.upcoming_alloc_est = rest.upcoming_alloc_est AS same,
					   format('cycle %s: core %s, %s, %s; recorded %s, %s, %s',
							  rest.cycle, c.smoothed_alloc, c.smoothed_density,
							  c.upcoming_alloc_est, rest.smoothed_alloc,
							  rest.smoothed_density, rest.upcoming_alloc_est) AS what
				  FROM rest JOIN c ON c.cycle = rest.n)
		SELECT count(*), count(*) FILTER (WHERE same),
			   coalesce((SELECT what FROM cmp WHERE NOT same
						  ORDER BY cycle LIMIT 1), '')
		  FROM cmp});
	return split /\|/, $out, 3;
}

# Replay the rows of bgw_jit_history that $opt{cycles} (SQL) selects,
# consecutive cycles of one worker, through bgw_jit_replay() (the worker's
# own estimator code), started from the state the first of them recorded,
# with the settings they ran with: $opt{multiplier}, $opt{smoothing},
# $opt{delay} (ms), $opt{whole} (scan_whole_pool_seconds).  Returns (cycles
# replayed, cycles whose smoothed_alloc, smoothed_density and
# upcoming_alloc_est match the recorded ones exactly).
sub replay_estimator_matches
{
	my ($node, %opt) = @_;
	return split /\|/, $node->safe_psql(
		'postgres', qq{
		WITH h AS (SELECT * FROM ($opt{cycles}) x
					WHERE NOT (sliced AND sleep_ms = 1)),
			 first AS (SELECT * FROM h ORDER BY cycle LIMIT 1),
			 rest AS (SELECT row_number() OVER (ORDER BY cycle) AS n, h.*
						FROM h WHERE cycle > (SELECT cycle FROM first)),
			 r AS (
				SELECT r.* FROM first, bgw_jit_replay(
					(SELECT array_agg(recent_alloc ORDER BY n) FROM rest),
					(SELECT array_agg(strategy_delta ORDER BY n) FROM rest),
					(SELECT array_agg(bufs_ahead::bigint ORDER BY n) FROM rest),
					(SELECT array_agg(scanned::bigint ORDER BY n) FROM rest),
					(SELECT array_agg(reusable_found::bigint ORDER BY n) FROM rest),
					lru_multiplier => $opt{multiplier},
					smoothing_samples => $opt{smoothing}, delay => $opt{delay},
					scan_whole_pool_seconds => $opt{whole},
					start_smoothed_alloc => first.smoothed_alloc,
					start_smoothed_density => first.smoothed_density) r)
		SELECT count(*),
			   count(*) FILTER (WHERE rest.smoothed_alloc = r.smoothed_alloc
								  AND rest.smoothed_density = r.smoothed_density
								  AND rest.upcoming_alloc_est = r.upcoming_alloc_est)
		  FROM rest JOIN r ON r.cycle = rest.n});
}
push @EXPORT, qw(replay_estimator_matches);

# The history with each cycle's predecessor's counts (h) and the state a
# replay of the cycles after $from starts from (first): the first cycle
# after $from that, from 16, saw the backends' writes change (the
# controller judges their increase over the allocations since the last
# change, so a replay can start only where that sum is zero; NULL
# backend_writes, on 15, means the server does not count dirty
# evictions), and not a cycle still going on in further time slices
# (sliced, sleeping 1 ms): its sleep is not yet its plan's.  The replay
# leaves such a last cycle out too.  $from undef: the worker's own start (the state
# pacer_init() gives, bgw_jit_replay_pacer()'s defaults), for a history
# that holds every cycle since; the backends need not have written.
sub replay_start_sql
{
	my ($from) = @_;
	my $first = defined $from
	  ? qq{SELECT * FROM h WHERE cycle > $from
				 AND NOT (sliced AND sleep_ms = 1)
				 AND (backend_writes IS NULL OR backend_writes <> prev_bw)
			   ORDER BY cycle LIMIT 1}
	  : q{SELECT 0 AS cycle, 0::float8 AS hand_rate, 1.5::float8 AS margin,
				 0 AS sleep_ms, NULL::bigint AS backend_writes};
	return qq{
	WITH h AS (SELECT *, coalesce(lag(evicted) OVER w, 0) AS pu,
					  coalesce(lag(redirtied) OVER w, 0) AS pw,
					  lag(backend_writes) OVER w AS prev_bw
				 FROM bgw_jit_history WINDOW w AS (ORDER BY cycle)),
	first AS ($first)};
}

# Replay bgw_jit_history's cycles after cycle $from (undef: all, from
# the worker's start) through bgw_jit_replay_pacer(), started from the
# state replay_start_sql picks (evicted and redirtied were judged the
# cycle before).
# $settings: further arguments of bgw_jit_replay_pacer() (the settings
# the cycles ran with, e.g. "delay => 50").  Returns how many cycles were
# replayed and how many differ in sleep, lead, margin, speed or misses.
sub replay_pacer_mismatches
{
	my ($node, $from, $settings) = @_;
	$settings = defined $settings ? "$settings," : '';
	die 'the history does not begin at the worker\'s first cycle'
	  if !defined $from
	  && $node->safe_psql('postgres', 'SELECT min(cycle) FROM bgw_jit_history') ne '1';
	my $out = $node->safe_psql('postgres', replay_start_sql($from) . qq{,
	rest AS (SELECT array_agg(elapsed_us ORDER BY cycle) el,
					array_agg(strategy_delta ORDER BY cycle) mv,
					array_agg(written + all_written ORDER BY cycle) wr,
					array_agg(pu ORDER BY cycle) us,
					array_agg(pw ORDER BY cycle) wa,
					array_agg(woken ORDER BY cycle) wk,
					array_agg(overrun ORDER BY cycle) ov,
					array_agg(recent_alloc ORDER BY cycle) al,
					CASE WHEN count(backend_writes) = count(*)
						 THEN array_agg(backend_writes ORDER BY cycle) END bw,
					array_agg(restarted ORDER BY cycle) rs,
					array_agg(sliced ORDER BY cycle) sl
			   FROM h WHERE cycle > (SELECT cycle FROM first)),
	r AS (SELECT r.* FROM rest, first,
			bgw_jit_replay_pacer(rest.el, rest.mv, rest.wr, rest.us, rest.wa,
								 rest.wk, $settings
								 start_hand_rate => first.hand_rate,
								 start_margin => first.margin,
								 start_planned_ms => first.sleep_ms,
								 overrun => rest.ov,
								 recent_alloc => rest.al,
								 backend_writes => rest.bw,
								 restarted => rest.rs,
								 sliced => rest.sl,
								 start_backend_writes => first.backend_writes) r)
	, cmp AS (SELECT h.cycle, r.sleep_ms <> h.sleep_ms OR r.lead_target <> h.lead_target
				OR abs(r.margin - h.margin) > 1e-5
				OR abs(r.hand_rate - h.hand_rate) > 1e-4 * h.hand_rate + 1e-3
				OR abs(r.misses - h.misses) > 1e-5 AS differs,
				format('cycle %s: sleep %s/%s lead %s/%s margin %s/%s rate %s/%s misses %s/%s (replayed/live)',
					   h.cycle, r.sleep_ms, h.sleep_ms, r.lead_target, h.lead_target,
					   r.margin, h.margin, r.hand_rate, h.hand_rate,
					   r.misses, h.misses) AS what
		  FROM r JOIN h ON h.cycle = r.cycle + (SELECT cycle FROM first)
		  WHERE NOT (h.sliced AND h.sleep_ms = 1))
	SELECT count(*) || ' ' || count(*) FILTER (WHERE differs) || ' ' ||
		   coalesce((SELECT what FROM cmp WHERE differs ORDER BY cycle LIMIT 1), '')
	  FROM cmp});
	my ($replayed, $differ, $first_diff) = split / /, $out, 3;
	Test::More::diag("first replay difference: $first_diff") if $differ;
	return ($replayed, $differ);
}

# --- helpers added by the test audit (part B) ---
push @EXPORT, qw(poll_for plant_dirty_buffers watched_sql);

# Poll $sql until it returns $expected ('t' by default) or $seconds of
# wall-clock time have passed (poll_query_until's limit counts attempts,
# each a psql start plus 0.1 s, so it cannot give a short, exact bound).
# True if it did.
sub poll_for
{
	my ($node, $sql, $seconds, $expected) = @_;
	$expected //= 't';
	my $deadline = Time::HiRes::time() + $seconds;
	my $out = '';
	while (1)
	{
		my ($ret, $stdout, $stderr) = $node->psql('postgres', $sql);
		$out = $stdout;
		return 1 if $ret == 0 && $stdout eq $expected;
		last if Time::HiRes::time() >= $deadline;
		usleep(100_000);
	}
	note("poll_for: $sql still gave '$out' after $seconds s");
	return 0;
}

# Leave the pool with dirty, unpinned buffers of usage count 0 (the ones
# a just-in-time scan writes): run the update load with the cleaner's
# writes stopped (lru_maxpages = 0, which also makes the next scan start
# at the clock hand), so that the backends' clock sweep ages what they
# dirtied.  Records those of pgbench_accounts and its index (pages nothing
# but the load touches, so that later statements of the test do not raise
# their usage counts) in table $table (bufferid and page) and returns how
# many there are.  The caller sets lru_maxpages afterwards.
sub plant_dirty_buffers
{
	my ($node, $table, %opt) = @_;
	set_conf($node, 'bgw_jit.lru_maxpages = 0');
	update_load($node, clients => 2, seconds => $opt{seconds} // 3,
		scale => $opt{scale});
	$node->safe_psql('postgres', qq{
		DROP TABLE IF EXISTS $table;
		CREATE TABLE $table AS
		SELECT bufferid, reldatabase, relfilenode, relforknumber, relblocknumber
		FROM pg_buffercache
		WHERE isdirty AND usagecount = 0 AND pinning_backends = 0
		  AND reldatabase = (SELECT oid FROM pg_database
							 WHERE datname = current_database())
		  AND relfilenode IN (pg_relation_filenode('pgbench_accounts'),
							  pg_relation_filenode('pgbench_accounts_pkey'))});
	return $node->safe_psql('postgres', "SELECT count(*) FROM $table");
}

# SQL over the buffers recorded in $table that still hold the same page:
# "SELECT count(*) AS same_page, count(*) FILTER (WHERE b.isdirty) AS
# dirty ..." - so that a buffer that became clean while keeping its page
# was written in place (only a writer that does not evict does that: the
# cleaner or a checkpoint), never evicted by a backend.
sub watched_sql
{
	my ($table) = @_;
	return qq{
		SELECT count(*) AS same_page,
			   count(*) FILTER (WHERE b.isdirty) AS dirty,
			   count(*) FILTER (WHERE NOT b.isdirty) AS cleaned
		FROM $table p JOIN pg_buffercache b USING (bufferid)
		WHERE b.reldatabase = p.reldatabase AND b.relfilenode = p.relfilenode
		  AND b.relforknumber = p.relforknumber
		  AND b.relblocknumber = p.relblocknumber};
}


# Stop the worker (SIGSTOP) while it sleeps between cycles, never in the
# middle of one: stopped while writing a page, it would hold that page's
# I/O and content lock, and every backend that needs the page would wait
# until it runs again.  Its sleep is the latch's epoll wait (syscall 232,
# epoll_wait, or 281, epoll_pwait, on x86-64), as /proc/PID/syscall shows
# for the stopped process.  Where that cannot be read (it takes ptrace
# access to the process) it dies, saying so: a worker stopped mid-write
# would hold a page the backends then wait for.  True once stopped asleep.
sub stop_worker_asleep
{
	my ($pid) = @_;
	my $deadline = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
	while (Time::HiRes::time() < $deadline)
	{
		kill 'STOP', $pid;
		open(my $fh, '<', "/proc/$pid/syscall") or do
		{
			kill 'CONT', $pid;
			die "cannot read /proc/$pid/syscall ($!): cannot tell whether the worker is asleep";
		};
		my $syscall = <$fh> // '';
		close $fh;
		return 1 if $syscall =~ /^(232|281) /;
		kill 'CONT', $pid;
		usleep(1000);
	}
	return 0;
}
push @EXPORT, qw(stop_worker_asleep);

# --- the worker's system calls, traced with strace ---
push @EXPORT,
  qw(start_strace strace_wait strace_page_write strace_rate_span strace_cycle_pages);

# Start strace -y -ttt on process $pid (or each process of an array of
# them) for the system calls in $calls (a list for strace's -e trace=),
# into a file per process (-ff: with one file, calls of two processes that
# overlap in time are split over two lines).  Returns a handle whose
# lines() gives the lines written so far (without their times) and stop()
# ends the trace and gives them all, timed_lines() each as [seconds, line,
# pid]; or (undef, why) when strace is missing or cannot attach
# (t/run_tests.sh installs it), for a skip that says why.
sub start_strace
{
	my ($pid, $calls) = @_;
	my @pids = ref $pid ? @$pid : ($pid);
	return (undef, 'strace not found (t/run_tests.sh installs it)')
	  unless grep { -x "$_/strace" } split /:/, $ENV{PATH};
	my $file = PostgreSQL::Test::Utils::tempdir() . '/strace.out';
	my $err = '';
	my $h = IPC::Run::start(
		[
			'strace', '-ff', '-y', '-ttt', '-o', $file, '-e', "trace=$calls",
			map { ('-p', $_) } @pids
		],
		'2>', \$err);
	my $deadline = Time::HiRes::time() + 30;
	my $attached = 0;
	until ($attached == @pids
		  || !$h->pumpable
		  || Time::HiRes::time() > $deadline)
	{
		$h->pump_nb;
		$attached = () = $err =~ /attached/g;
		usleep(50_000);
	}
	if ($attached != @pids)
	{
		$h->kill_kill;
		return (undef, "strace could not attach: $err");
	}
	return bless { h => $h, file => $file, pids => \@pids },
	  'BgwJitTest::Trace';
}

# Each process's lines in turn, in the order it made them.
sub BgwJitTest::Trace::timed_lines
{
	my ($t) = @_;
	my @lines;
	for my $pid (@{ $t->{pids} })
	{
		open(my $fh, '<', "$t->{file}.$pid") or next;
		push @lines, map {
			/^(\d+\.\d+) (.*\n?)$/s ? [ $1, $2, $pid ] : [ undef, $_, $pid ]
		} <$fh>;
		close $fh;
	}
	return @lines;
}

sub BgwJitTest::Trace::lines
{
	my ($t) = @_;
	return map { $_->[1] } $t->timed_lines;
}

sub BgwJitTest::Trace::stop
{
	my ($t) = @_;
	$t->{h}->signal('INT');
	$t->{h}->finish;
	return $t->lines;
}

# Of a stopped trace of epoll waits and page writes: the pages process
# $pid wrote in each of its cycles that wrote, in order.  A cycle ends in
# a sleep, a wait of more than the 1 ms between a cycle's time slices.  A
# signal interrupts a wait (-1) and the latch code waits again for the
# time left: one sleep, of the first timeout.  (A timeout of -1 is no
# sleep: a wait for another process, e.g. for a page's I/O.)
sub strace_cycle_pages
{
	my ($trace, $pid) = @_;
	my ($asked, @cycles) = (undef, 0);
	for ($trace->timed_lines)
	{
		my (undef, $line, $who) = @$_;
		next unless $who == $pid;
		if (my ($ms, $rc) = strace_wait($line))
		{
			next if $ms < 0;
			$asked //= $ms;
			next if $rc < 0;
			($ms, $asked) = ($asked, undef);
			push @cycles, 0 if $ms > 1 && $cycles[-1] > 0;
		}
		elsif (my (undef, undef, $n) = strace_page_write($line))
		{
			$cycles[-1] += $n;
		}
	}
	return grep { $_ > 0 } @cycles;
}

# Of a stopped trace of process $pid's epoll waits and page writes, for a
# bound on its rate of writes: (pages, seconds).  Counted from its first
# sleep in the trace (a wait of more than a time slice's 1 ms): the cycles
# after it are planned after it, each taking its budget when it starts;
# to its last page write.  A token bucket of rate r pages a second holding
# one second's worth lets at most r + r * seconds of them through.
sub strace_rate_span
{
	my ($trace, $pid) = @_;
	my ($pages, $from, $last) = (0, undef, undef);
	for ($trace->timed_lines)
	{
		my ($t, $line, $who) = @$_;
		next unless $who == $pid;
		if (my ($ms) = strace_wait($line))
		{
			$from //= $t if $ms > 1;
			next;
		}
		next unless defined $from;
		my (undef, undef, $n) = strace_page_write($line) or next;
		$pages += $n;
		$last = $t;
	}
	return ($pages, defined $last ? $last - $from : 0);
}

# An epoll wait in a line of strace's: (timeout in ms, result), or ()
# for another line.  The worker sleeps in the latch's epoll wait, whose
# timeout is the sleep it asked for; 0 means the timeout ended it.
# epoll_pwait has a signal mask and its size after the timeout.
sub strace_wait
{
	my ($line) = @_;
	return ($1, $2) if $line =~ /^epoll_wait\(.*, (-?\d+)\)\s+= (-?\d+)/;
	return ($1, $2)
	  if $line =~
	  /^epoll_pwait\(.*, (-?\d+), (?:NULL|\[[^\]]*\]|0x[0-9a-f]+), \d+\)\s+= (-?\d+)/;
	return ();
}

# A write of relation pages in a line of strace -y's (pwrite64, pwritev,
# pwritev2 to a file under base/, of any fork: free space and visibility
# maps are written too): (relfilenode, with _fsm or _vm for those forks,
# first block, pages), or () for another line.  (One segment: blocks
# counted from its start.)
sub strace_page_write
{
	my ($line) = @_;
	return ()
	  unless $line =~
	  m{^(pwrite64|pwritev2?)\(\d+<[^>]*/base/\d+/(\d+(?:_[a-z]+)?)(?:\.\d+)?>, (.*)\)\s+= (\d+)};
	my ($call, $rel, $args, $bytes) = ($1, $2, $3, $4);
	my @a = split /, /, $args;
	my $offset = $call eq 'pwritev2' ? $a[-2] : $a[-1];
	return ($rel, $offset / 8192, $bytes / 8192);
}

1;
