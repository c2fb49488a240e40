# Cleaning during recovery: the worker starts with the postmaster, so it
# writes the buffers that crash recovery's redo dirties, and those that
# WAL replay dirties on a standby with hot_standby = off, where nothing
# can connect.  Writes are counted by the kernel (/proc/PID/io), not by
# the worker's own statistics.
#
# Why wchar: it counts every byte a process hands to write()/pwrite(),
# whatever the page cache and the file system then do.  write_bytes counts
# page-cache pages as they are first dirtied (a block written twice before
# the kernel writes it back counts once, and a tmpfs counts nothing), so it
# says how much the kernel will write, not how many pages a process wrote.
# Neither process writes anything else of size in crash recovery (the
# log lines are a few dozen bytes; minRecoveryPoint is not kept during
# crash recovery, so the worker's writes never update pg_control), so
# wchar / 8192 is the pages written.  On a standby each write that
# advances minRecoveryPoint also rewrites the 8 kB pg_control, at most
# once per page written: there wchar / 16384 is a lower bound.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::RecursiveCopy;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $page = 8192;
my $pool_pages = 16 * 1024 * 1024 / $page;    # shared_buffers = 16MB

# A content hash of pgbench's tables.
sub content_hash
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', q{
		SELECT md5(string_agg(h, ',' ORDER BY t)) FROM (
			SELECT 'a' AS t, md5(string_agg(a::text, ',' ORDER BY aid)) AS h
			FROM pgbench_accounts a
			UNION ALL
			SELECT 'b', md5(string_agg(b::text, ',' ORDER BY bid))
			FROM pgbench_branches b
			UNION ALL
			SELECT 't', md5(string_agg(t::text, ',' ORDER BY tid))
			FROM pgbench_tellers t) s});
}

# Start $node on its crash image without waiting and watch crash recovery
# until the startup process has exited: /proc io of the startup process
# and of the worker every 20 ms.  A reading counts as taken during redo if
# the log did not say "redo done" yet when it had been read.  Returns the
# last such readings (pages written so far, by wchar), the startup
# process's last reading of all (it writes nothing after redo: it waits
# for the end-of-recovery checkpoint, which the checkpointer does) and
# how many readings found the server rejecting connections; then waits
# until it accepts them.
sub recover_watching
{
	my ($node, $label) = @_;
	my $offset = -e $node->logfile ? -s $node->logfile : 0;
	my %r = (samples => 0, rejecting => 0, worker_seen => 0);
	my ($startup, $worker, $redo_done) = ('', '', 0);
	start_no_wait($node);
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (1)
	{
		die "$label: recovery not over within the timeout" if time > $deadline;
		$startup ||= postmaster_child_pid($node, qr/^startup\b/);
		$worker ||= worker_pid($node);
		my $sio = proc_io($startup);
		my $wio = proc_io($worker);
		$worker = '' unless $wio;    # (not started yet, or restarted)
		my $ready = $redo_done ? 0 : isready_status($node);
		my $log = slurp_file($node->logfile, $offset);
		# the startup process has exited: recovery is over
		last if $startup && !$sio;
		last if $log =~ /ready to accept connections/;
		$r{startup_total} = int($sio->{wchar} / $page) if $sio;
		$redo_done ||= $log =~ /redo done at/;
		if ($sio && !$redo_done)
		{
			$r{samples}++;
			$r{rejecting}++ if $ready == 1;
			$r{startup} = int($sio->{wchar} / $page);
			$r{worker} = $wio ? int($wio->{wchar} / $page) : 0;
			$r{worker_write_bytes} =
			  $wio ? int($wio->{write_bytes} / $page) : 0;
			$r{worker_seen}++ if $wio;
		}
		usleep(20_000);
	}
	wait_for_connections($node) or die "$label: the server did not come up";
	my ($elapsed) = slurp_file($node->logfile, $offset) =~
	  /redo done at .*elapsed: ([\d.]+) s/;
	$r{$_} //= 0 for qw(startup startup_total worker worker_write_bytes);
	note(sprintf(
			"%s: %d readings during redo (%d rejecting connections, worker seen in %d); "
			  . "redo %s s; during redo: startup %d pages, worker %d pages "
			  . "(write_bytes %d); the startup process %d pages in all",
			$label, $r{samples}, $r{rejecting}, $r{worker_seen},
			$elapsed // '?', $r{startup}, $r{worker}, $r{worker_write_bytes},
			$r{startup_total}));
	return \%r;
}

# Wait until $standby has replayed all the WAL $primary has written, as
# the primary's pg_stat_replication reports it: Cluster's wait_for_catchup
# asks the standby itself from 19 on (WAIT FOR LSN), and a standby with
# hot_standby = off takes no connections.
sub wait_for_replay
{
	my ($primary, $standby) = @_;
	my $lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	$primary->poll_query_until('postgres',
		"SELECT replay_lsn >= '$lsn' FROM pg_stat_replication "
		  . "WHERE application_name = '" . $standby->name . "'")
	  or die 'the standby did not replay the primary\'s WAL';
	return;
}

# --- a. crash recovery of a few hundred MB of WAL ---
my $scale = 5;
my $node = new_bgw_jit_node('crash');
$node->start;
pgbench_init($node, $scale);
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
$node->safe_psql('postgres', 'CHECKPOINT');
my $lsn0 = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
# Every row updated in one committed transaction, durable before the
# crash: the first change of each page after the checkpoint logs its
# full image, so redo dirties every page of the table and its index.
$node->safe_psql('postgres',
	'SET synchronous_commit = on; '
	  . 'UPDATE pgbench_accounts SET abalance = abalance + aid % 1000 - 500');
my $wal_mb = $node->safe_psql('postgres',
	"SELECT (pg_current_wal_lsn() - '$lsn0') / 1048576");
cmp_ok($wal_mb, '>=', 150, "the UPDATE wrote $wal_mb MB of WAL to recover");
my $hash = content_hash($node);
$node->stop('immediate');

# The same crash image, to be recovered with the worker switched off.
my $off = PostgreSQL::Test::Cluster->new('crash_off');
PostgreSQL::Test::RecursiveCopy::copypath($node->data_dir, $off->data_dir);
chmod(0700, $off->data_dir) or die "chmod: $!";
$off->append_conf('postgresql.conf',
	'port = ' . $off->port . "\nbgw_jit.enabled = off\n");

my $on_r = recover_watching($node, 'worker on');
cmp_ok($on_r->{rejecting}, '>', 0,
	'worker on: readings taken while the server rejected connections');
cmp_ok($on_r->{worker}, '>', $pool_pages,
	"worker on: during redo the worker wrote more pages than the pool holds "
	  . "($on_r->{worker}, kernel count)");
is(content_hash($node), $hash, 'worker on: the same content after recovery');
check_integrity($node, 'worker on');
note('worker on: bgw_jit_stats after recovery: '
	  . $node->safe_psql('postgres',
		'SELECT buf_clean || \' written, \' || cycles || \' cycles\' FROM bgw_jit_stats'));
$node->stop;

my $off_r = recover_watching($off, 'worker off');
cmp_ok($off_r->{worker}, '<=', 1,
	'worker off: the worker wrote nothing during redo');
# (How many of the startup process's writes the worker took is a figure
# for bench/recovery, not a test: noted only.)
note("the startup process wrote $on_r->{startup_total} pages itself with the "
	  . "worker cleaning, $off_r->{startup_total} without");
is(content_hash($off), $hash, 'worker off: the same content after recovery');
$off->stop;

# --- b. a standby with hot_standby = off ---
my $primary = new_bgw_jit_node('primary', undef, allows_streaming => 1);
$primary->start;
pgbench_init($primary, 5);
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby_off');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', "hot_standby = off\n");
$standby->start;
is(isready_status($standby), 1,
	'the standby rejects connections (hot_standby = off)');
my $worker = wait_for_worker($standby);
ok($worker, "the worker runs on the standby (pid $worker)");

# Update load on the primary in rounds until the standby's cleaner and its
# writers have written at least 256 pages while replaying (at most 10
# rounds).
# (no worker: the checks below fail, rather than the test dying here)
my $io0 = worker_io($standby) // { wchar => 0 };
my $startup = postmaster_child_pid($standby, qr/^startup\b/);
my $sio0 = proc_io($startup) or die 'no /proc io for the standby startup process';
my ($pages, $rounds) = (0, 0);
while ($pages < 256 && $rounds < 10)
{
	update_load($primary, clients => 2, seconds => 3, scale => 5);
	wait_for_replay($primary, $standby);
	$rounds++;
	my $io = worker_io($standby) or last;
	$pages = int(($io->{wchar} - $io0->{wchar}) / (2 * $page));
}
my $sio = proc_io($startup);
note(sprintf('standby after %d round(s): startup wrote %d pages (wchar / 8192)',
		$rounds, $sio ? ($sio->{wchar} - $sio0->{wchar}) / $page : -1));
cmp_ok($pages, '>=', 256,
	"the standby's worker wrote at least 256 pages during replay ($pages, "
	  . 'kernel count with pg_control updates discounted)');
is(isready_status($standby), 1, 'the standby still rejected connections');

$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';
is(worker_pid($standby), $worker, 'after promotion the same worker runs on');
my $io_promoted = worker_io($standby) // { wchar => 0 };
update_load($standby, clients => 2, seconds => 3, scale => 5);
my $io_after = worker_io($standby) // { wchar => 0 };
my $promoted_pages = int(($io_after->{wchar} - $io_promoted->{wchar}) / $page);
cmp_ok($promoted_pages, '>', 0,
	"and cleans under load ($promoted_pages pages, kernel count)");
check_integrity($standby, 'promoted standby');

$standby->stop;
$primary->stop;
done_testing();
