# Writes after a database's files are removed and created again under the
# same OID: what PostgreSQL's own recovery test 032_relfilenode_reuse
# checks, with bgw_jit cleaning on a primary and two hot standbys (one at
# the defaults, one at its most aggressive: jit+all every 10 ms).
#
# DROP DATABASE, DROP TABLESPACE and ALTER DATABASE SET TABLESPACE, and
# their replay, send a ProcSignal barrier and wait until every process in
# ProcSignal has closed its data-file descriptors before the files go.  A
# cleaner outside ProcSignal (bgw_jit 1.3) keeps descriptors of the
# unlinked files; after CREATE DATABASE with the same OID its writes of
# the new relations go to the old inodes and are lost, and the standby
# later reads zero pages or old rows from disk.
#
# Checked outside bgw_jit: the descriptors the worker processes hold
# (/proc/PID/fd), the table's contents on each standby against the
# primary's after the standby's pool has been flushed of them (so that
# they are read back from disk), and pg_amcheck.  The pools are 1 MB and
# the table some 6 MB, so that the cleaners write its pages all along.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $db_oid = 50001;
my $pool_conf = <<'EOC';
shared_buffers = 1MB
full_page_writes = off
allow_in_place_tablespaces = on
EOC

my $primary = new_bgw_jit_node('primary', $pool_conf, allows_streaming => 1);
$primary->start;
$primary->backup('base');

my %standby;
for my $config (
	[ defaults => '' ],
	[ aggressive => "bgw_jit.strategy = 'jit+all'\nbgw_jit.delay = 10ms\n" ])
{
	my ($name, $conf) = @$config;
	my $node = PostgreSQL::Test::Cluster->new("standby_$name");
	$node->init_from_backup($primary, 'base', has_streaming => 1);
	$node->append_conf('postgresql.conf', $conf);
	$node->start;
	$standby{$name} = $node;
}
my @nodes = ($primary, map { $standby{$_} } sort keys %standby);

# A template with the table, copied into the database under test; both
# hold amcheck (a standby cannot install it).
$primary->safe_psql('postgres', 'CREATE EXTENSION amcheck');
$primary->safe_psql('postgres', 'CREATE EXTENSION pg_prewarm');
# what a standby reads to push the table out of its pool
$primary->safe_psql('postgres',
	'CREATE TABLE filler AS SELECT g, repeat(\'f\', 500) AS pad '
	  . 'FROM generate_series(1, 5000) g');
$primary->safe_psql('postgres', 'CREATE DATABASE template_reuse OID = 50000');
$primary->safe_psql(
	'template_reuse', q{
	CREATE EXTENSION amcheck;
	CREATE TABLE large (id int PRIMARY KEY, v int NOT NULL, pad text);
	INSERT INTO large SELECT g, 0, repeat('x', 200)
	FROM generate_series(1, 20000) g});
create_db();

my $update_script = <<'EOS';
\set id random(1, 20000)
UPDATE large SET v = v + 1 WHERE id = :id;
EOS
my $script = PostgreSQL::Test::Utils::tempdir() . '/update.sql';
PostgreSQL::Test::Utils::append_to_file($script, $update_script);

sub create_db
{
	my ($tablespace) = @_;
	$primary->safe_psql('postgres',
		"CREATE DATABASE reuse TEMPLATE template_reuse OID = $db_oid"
		  . (defined $tablespace ? " TABLESPACE $tablespace" : ''));
	return;
}

# The update load on the database under test.
sub load
{
	my ($seconds) = @_;
	$primary->command_ok(
		[
			'pgbench', '-n', '-f', $script, '-c', 2, '-j', 2,
			'-T', $seconds, '-h', $primary->host, '-p', $primary->port,
			'reuse'
		],
		"update load, ${seconds}s");
	return;
}

# Wait until every standby has replayed the primary's WAL so far, as the
# primary's pg_stat_replication has it; die at once if a standby's server
# is gone (a lost write can end its replay in a PANIC).
sub catch_up
{
	my $lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	for my $node (values %standby)
	{
		my $name = $node->name;
		while (1)
		{
			die "$name is down: " . slurp_file($node->logfile) =~ s/.*\n(?=(?:.*\n){20})//sr
			  unless postmaster_pid($node);
			last if $primary->safe_psql('postgres',
				"SELECT replay_lsn >= '$lsn' FROM pg_stat_replication "
				  . "WHERE application_name = '$name'") eq 't';
			die "$name did not replay up to $lsn in time" if time > $deadline;
			usleep(50_000);
		}
	}
	return;
}

# The data-file descriptors (under base/ or pg_tblspc/) that process
# $pid holds: their targets as the kernel names them, " (deleted)" for
# an unlinked file.
sub data_fds
{
	my ($pid) = @_;
	my @fds;
	opendir(my $dh, "/proc/$pid/fd") or return ();
	for my $fd (readdir $dh)
	{
		my $target = readlink("/proc/$pid/fd/$fd") // next;
		push @fds, $target if $target =~ m{/(?:base|pg_tblspc)/};
	}
	closedir $dh;
	return @fds;
}

sub cleaner_pid
{
	my ($node) = @_;
	my $pid = worker_pid($node) or die $node->name . ': no bgw_jit cleaner';
	return $pid;
}

sub flusher_pid
{
	my ($node) = @_;
	return postmaster_child_pid($node, qr/^bgw_jit wal flusher/)
	  || die $node->name . ': no bgw_jit wal flusher';
}

# Load until every node's cleaner holds a descriptor of a file of the
# database under test (it has written its pages since it opened them),
# so that what follows would find any descriptor it failed to close.
sub load_until_cleaners_hold_files
{
	my ($label) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	my @waiting = @nodes;
	while (@waiting && time < $deadline)
	{
		load(2);
		catch_up();
		@waiting = grep {
			!grep { m{/$db_oid/\d+} } data_fds(cleaner_pid($_))
		} @waiting;
	}
	is(join(' ', map { $_->name } @waiting),
		'', "$label: every cleaner has the database's files open");
	return;
}

# After a barrier: no cleaner or flusher holds a descriptor of a removed
# file, and the flusher none of any data file (it only flushes WAL).
sub check_no_stale_fds
{
	my ($label) = @_;
	catch_up();
	for my $node (@nodes)
	{
		my $pid = cleaner_pid($node);
		my @stale = grep { / \(deleted\)$/ } data_fds($pid);
		is(scalar(@stale), 0,
			"$label: the cleaner on " . $node->name
			  . ' holds no descriptor of a removed file')
		  or diag(join("\n", @stale));
		my @flusher = data_fds(flusher_pid($node));
		is(scalar(@flusher), 0,
			"$label: the WAL flusher on " . $node->name
			  . ' holds no data-file descriptor')
		  or diag(join("\n", @flusher));
	}
	return;
}

# The table's contents on each standby, read from disk, against the
# primary's; then amcheck on the standby.
sub check_contents
{
	my ($label) = @_;
	my $sql = q{SELECT count(*) || ':' || sum(v) || ':'
		|| md5(string_agg(id || ',' || v, ';' ORDER BY id)) FROM large};
	my $want = $primary->safe_psql('reuse', $sql);
	catch_up();
	for my $node (values %standby)
	{
		# Push the table out of the pool: its pages are read back from
		# the files, where a lost write shows.  (A checkpoint or restart
		# point would not help: the cleaner's lost writes left the
		# buffers clean.)
		$node->safe_psql('postgres', "SELECT pg_prewarm('filler')");
		my ($rc, $got, $err) = $node->psql('reuse', $sql);
		is($got, $want, "$label: " . $node->name . ' has the primary\'s rows')
		  or diag($err);
		my ($out, $stderr);
		my $ok = IPC::Run::run(
			[
				'pg_amcheck', '--heapallindexed', '-d', 'reuse',
				'-h', $node->host, '-p', $node->port
			],
			'>', \$out, '2>', \$stderr);
		ok($ok && $out eq '', "$label: pg_amcheck on " . $node->name)
		  or diag("pg_amcheck: $out$stderr");
	}
	return;
}

# 1. DROP DATABASE and CREATE DATABASE with the same OID.
load_until_cleaners_hold_files('before DROP DATABASE');
$primary->safe_psql('postgres', 'DROP DATABASE reuse');
check_no_stale_fds('after DROP DATABASE');
create_db();
load(5);
check_contents('database created again with the same OID');

# 2. ALTER DATABASE SET TABLESPACE, there and back.
$primary->safe_psql('postgres', "CREATE TABLESPACE ts LOCATION ''");
for my $to ('ts', 'pg_default')
{
	load_until_cleaners_hold_files("before SET TABLESPACE $to");
	$primary->safe_psql('postgres', "ALTER DATABASE reuse SET TABLESPACE $to");
	check_no_stale_fds("after SET TABLESPACE $to");
	load(5);
	check_contents("database moved to $to");
}

# 3. DROP TABLESPACE, and the database created again in a new one.
$primary->safe_psql('postgres', 'ALTER DATABASE reuse SET TABLESPACE ts');
load_until_cleaners_hold_files('before DROP TABLESPACE');
$primary->safe_psql('postgres', 'DROP DATABASE reuse');
$primary->safe_psql('postgres', 'DROP TABLESPACE ts');
check_no_stale_fds('after DROP TABLESPACE');
$primary->safe_psql('postgres', "CREATE TABLESPACE ts2 LOCATION ''");
create_db('ts2');
load(5);
check_contents('database created again in a new tablespace');

# 4. Crash recovery replaying a DROP and CREATE DATABASE: the startup
# process sends the barrier with the cleaner running, and waits for it.
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->safe_psql('postgres', 'DROP DATABASE reuse');
create_db();
load(3);
my $want = $primary->safe_psql('reuse',
	'SELECT count(*) || \':\' || sum(v) FROM large');
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('reuse', 'SELECT count(*) || \':\' || sum(v) FROM large'),
	$want, 'after crash recovery the primary has its rows');
check_integrity($primary, 'after crash recovery');

$_->stop for @nodes;
done_testing();
