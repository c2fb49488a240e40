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
  wait_for_worker worker_pid check_integrity has_fault_injection
  start_crash_load finish_crash_load stop_crash_load check_tpcb_invariant);

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
# options for Cluster::init (e.g. allows_streaming) after it.
sub new_bgw_jit_node
{
	my ($name, $extra_conf, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
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
# next cycle.  So: reload, then wait until buffers_backend stays the same
# across a cycle of the worker, which has then folded exactly that value.
# From 16 each process reports its I/O to pg_stat_io itself (a session
# when it ends), and the worker samples it once a second, at the end of a
# cycle, for the next cycle to fold: so wait until the count stays the
# same across a cycle that began a second later and the cycle after it.
sub settle_stats
{
	my ($node) = @_;
	my $io = $node->pg_version >= 16;
	my $count = core_backend_writes_sql($node);
	reload_and_wait($node) unless $io;
	my $prev = -1;
	for (1 .. 100)
	{
		my ($b, $t) = split /\|/, $node->safe_psql('postgres',
			"SELECT $count, clock_timestamp()"
			  . ($io ? " + interval '1 s'" : ''));
		return if $b == $prev;
		$prev = $b;
		wait_for_cycle_after($node, $t);
		wait_for_cycle_after($node,
			$node->safe_psql('postgres', 'SELECT last_cycle_at FROM bgw_jit_stats'))
		  if $io;
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

sub worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'bgw_jit'");
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
	my $cond = "backend_type = 'bgw_jit'";
	$cond .= " AND pid <> $old_pid" if defined $old_pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE $cond")
	  or return undef;
	return worker_pid($node);
}

1;
