# pg_upgrade of a cluster that uses bgw_jit, from an older major version
# of PostgreSQL to the one under test, as doc/upgrading.md ("pg_upgrade") tells:
# bgw_jit built for both servers (each staged as t/run_tests.sh stages
# its builds) and preloaded in both clusters.
#
# The old cluster has the extension at an old version (1.2 by default,
# BGW_JIT_UPGRADE_FROM_EXTVERSION) in one database and at the default
# version in another, and was used: pgbench load, every view read.  Then
# pg_upgrade --check and the upgrade itself.  Afterwards the new cluster
# starts, ALTER EXTENSION bgw_jit UPDATE brings the old version to the
# default, every view can be read in both databases, no member of the
# extension names a column of a system view, the worker cleans under
# load (pg_stat_io counts its writes) and both views count those writes,
# no figure negative, NULL only where the server has no such counter.
#
# 1.2's bgw_jit_bgwriter names the columns pg_stat_bgwriter had where it
# was created, which 17 dropped: from 15 (16) to 17 or later, pg_upgrade of
# 1.2 fails.  For such a pair the test checks that it does, then updates
# the old cluster's extension first (what doc/upgrading.md says to do) and upgrades.
#
# Needs the older server: BGW_JIT_UPGRADE_FROM_INSTALL (its bin/ and lib/,
# e.g. /usr/lib/postgresql/18) and BGW_JIT_UPGRADE_FROM_CONF (the
# postgresql.conf lines that load bgw_jit's build for it), which
# t/run_tests.sh sets where it has such a server: PG_MAJOR=17, this
# machine's 15 bound into the 17 root (no Debian suite has 15 and 17;
# BGW_JIT_UPGRADE_FROM_LIBS names a directory of the Debian 12 libraries
# it needs); PG_MAJOR=19, 18 from apt.  17 -> 18 (trixie's
# 17.12 installed beside sid's 18.6, tried 2026-12-02) fails for any
# table, bgw_jit or not: that 17.12 gives every column an attribute
# option pg_attver, which 18.6 rejects when pg_upgrade restores it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $old_install = $ENV{BGW_JIT_UPGRADE_FROM_INSTALL};
my $old_conf = $ENV{BGW_JIT_UPGRADE_FROM_CONF};
plan skip_all =>
  'no older PostgreSQL to upgrade from (t/run_tests.sh sets BGW_JIT_UPGRADE_FROM_INSTALL and BGW_JIT_UPGRADE_FROM_CONF where it has one: PG_MAJOR=17 and 19)'
  unless defined $old_install
  && -x "$old_install/bin/postgres"
  && defined $old_conf
  && -r $old_conf;
my $old_extversion = $ENV{BGW_JIT_UPGRADE_FROM_EXTVERSION} // '1.2';
# libraries the older server needs that this system lacks (15 in the 17
# root: t/run_tests.sh)
$ENV{LD_LIBRARY_PATH} = join(':', $ENV{BGW_JIT_UPGRADE_FROM_LIBS},
	$ENV{LD_LIBRARY_PATH} // ())
  if $ENV{BGW_JIT_UPGRADE_FROM_LIBS};

my $scale = 5;
# initdb options both clusters must share (pg_upgrade compares them)
my @initdb = ('--data-checksums', '--encoding=UTF8', '--locale=C',
	'--locale-provider=libc');
my $busy = <<'EOC';
bgw_jit.delay = 20ms
bgw_jit.lru_multiplier = 4.0
bgw_jit.lru_maxpages = 1000
EOC

# The old cluster: its own bgw_jit build (TEMP_CONFIG is the new one's).
my $old;
{
	local $ENV{TEMP_CONFIG} = $old_conf;
	$old = new_bgw_jit_node(
		'old', $busy,
		install_path => $old_install,
		extra => \@initdb);
}
my $new = new_bgw_jit_node('new', $busy, extra => \@initdb);
my ($old_major, $new_major) = ($old->pg_version->major, $new->pg_version->major);
cmp_ok($old_major, '<', $new_major,
	"upgrading from PostgreSQL $old_major to $new_major");

# Run the update load in rounds until the SQL condition holds (a busy
# machine may do little in one round); whether it did.
sub load_until
{
	my ($node, $dbname, $cond) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		update_load($node, clients => 2, seconds => 3, scale => $scale);
		return 1 if $node->safe_psql($dbname, "SELECT $cond") eq 't';
	}
	return 0;
}

# The views every version of the extension has, and 1.2's.
my @views = qw(bgw_jit_stats bgw_jit_history bgw_jit_bgwriter bgw_jit_advice);

sub read_views
{
	my ($node, $dbname, $label) = @_;
	for my $view (@views)
	{
		my ($ret, $out, $err) =
		  $node->psql($dbname, "SELECT count(*) FROM $view");
		is($ret, 0, "$label: $view can be read") or diag($err);
	}
	return;
}

# Columns of system catalogs and views that members of the extension
# depend on (views' rules, column by column), as "view: relation.column".
sub system_columns_used
{
	my ($node, $dbname) = @_;
	return $node->safe_psql(
		$dbname, q{
		SELECT string_agg(DISTINCT m.objid::regclass::text || ': ' ||
		                  d.refobjid::regclass::text || '.' || a.attname, ', ')
		  FROM pg_depend m
		  JOIN pg_rewrite r ON r.ev_class = m.objid
		  JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass
		                  AND d.objid = r.oid
		                  AND d.refclassid = 'pg_class'::regclass
		                  AND d.refobjsubid > 0
		  JOIN pg_class c ON c.oid = d.refobjid
		  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.refobjsubid
		 WHERE m.classid = 'pg_class'::regclass
		   AND m.refclassid = 'pg_extension'::regclass
		   AND m.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
		   AND m.deptype = 'e'
		   AND c.relnamespace = 'pg_catalog'::regnamespace});
}

# --- the old cluster, with bgw_jit in use ---
$old->start;
pgbench_init($old, $scale);
$old->safe_psql('postgres',
	"CREATE EXTENSION bgw_jit VERSION '$old_extversion'");
$old->safe_psql('postgres', 'CREATE DATABASE latest');
$old->safe_psql('latest', 'CREATE EXTENSION bgw_jit');
my $default_version = $old->safe_psql('latest',
	"SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit'");
ok(load_until($old, 'postgres', 'buf_clean > 0 FROM bgw_jit_stats'),
	"old cluster ($old_major): the worker cleans under load");
read_views($old, 'postgres', "old cluster, extension $old_extversion");
read_views($old, 'latest', "old cluster, extension $default_version");
my $accounts = $old->safe_psql('postgres',
	'SELECT count(*), sum(abalance) FROM pgbench_accounts');
note("old cluster: bgw_jit_stats "
	  . $old->safe_psql('postgres',
		'SELECT buf_clean, buf_backend, cleaner_pct FROM bgw_jit_stats'));
$old->stop;

# pg_upgrade runs where it can write its scripts and logs.
chdir $PostgreSQL::Test::Utils::tmp_check;

sub upgrade_command
{
	return [
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir,
		'-D', $new->data_dir,
		'-b', $old->config_data('--bindir'),
		'-B', $new->config_data('--bindir'),
		'-s', $new->host,
		'-p', $old->port,
		'-P', $new->port,
		'--copy', @_
	];
}

# The logs pg_upgrade keeps after a failure, for the diagnostics.
sub upgrade_logs
{
	my $text = '';
	for my $log (glob($new->data_dir . '/pg_upgrade_output.d/*/log/*.log'))
	{
		$text .= "=== $log\n" . slurp_file($log);
	}
	return $text;
}

command_ok(upgrade_command('--check'), 'pg_upgrade --check');

my $updated_before = 0;
if ($old_major < 17 && $new_major >= 17 && $old_extversion lt '1.3')
{
	# 1.2 on 15 names pg_stat_bgwriter.checkpoints_timed & co: the new
	# cluster cannot restore its bgw_jit_bgwriter.
	my ($stdout, $stderr) = run_command(upgrade_command());
	my $logs = upgrade_logs();
	like($logs,
		qr/column b\.\w+ does not exist|column "\w+" does not exist/,
		"pg_upgrade of bgw_jit $old_extversion from $old_major to $new_major fails restoring bgw_jit_bgwriter"
	) or diag("$stdout$stderr");
	note($1) if $logs =~ /(pg_restore: error: .*)/;

	# As doc/upgrading.md says: update the extension in the old cluster first.
	$old->start;
	$old->safe_psql('postgres', 'ALTER EXTENSION bgw_jit UPDATE');
	is($old->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit'"),
		$default_version, 'old cluster: ALTER EXTENSION bgw_jit UPDATE before pg_upgrade');
	$old->stop;
	$updated_before = 1;
	# a fresh new cluster: the failed one is half restored
	$new = new_bgw_jit_node('new_again', $busy, extra => \@initdb);
	command_ok(upgrade_command('--check'), 'pg_upgrade --check, updated');
}

my ($upgrade_out, $upgrade_err) = ('', '');
my $ok = IPC::Run::run(upgrade_command(), '>', \$upgrade_out, '2>',
	\$upgrade_err);
ok($ok, "pg_upgrade from $old_major to $new_major")
  or diag("$upgrade_out$upgrade_err" . upgrade_logs());
# 16+: pg_upgrade lists the extensions that have a newer version, which it
# finds through the new server's extension_control_path/extension_destdir
# (that of its staged build here).
SKIP:
{
	skip 'the extension was at the default version in every database', 1
	  if $updated_before || $old_extversion eq $default_version;
	skip 'pg_upgrade lists extension updates from 16', 1 if $new_major < 16;
	like(
		-f 'update_extensions.sql' ? slurp_file('update_extensions.sql') : '',
		qr/ALTER EXTENSION "?bgw_jit"? UPDATE/,
		'pg_upgrade lists bgw_jit in update_extensions.sql');
}

# --- the new cluster ---
$new->start;
is($new->safe_psql('postgres',
		'SELECT count(*), sum(abalance) FROM pgbench_accounts'),
	$accounts, 'the data came through');
my $upgraded_version = $new->safe_psql('postgres',
	"SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit'");
note("new cluster: extension at $upgraded_version in postgres");
read_views($new, 'postgres', "new cluster, extension $upgraded_version");
$new->safe_psql('postgres', 'ALTER EXTENSION bgw_jit UPDATE');
is($new->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit'"),
	$default_version,
	"ALTER EXTENSION bgw_jit UPDATE: $upgraded_version -> $default_version");
for my $db ('postgres', 'latest')
{
	read_views($new, $db, "new cluster, $db, extension $default_version");
	is(system_columns_used($new, $db), '',
		"$db: no member of the extension names a column of a system view");
}

# the worker: its pid is a child of the new postmaster, named bgw_jit
my $pid = $new->safe_psql('postgres', 'SELECT pid FROM bgw_jit_stats');
like($pid, qr/^\d+$/, "bgw_jit_stats.pid shows the worker ($pid)");
my $postmaster = (split /\n/, slurp_file($new->data_dir . '/postmaster.pid'))[0];
my ($ppid) = (split ' ', slurp_file("/proc/$pid/stat"))[3];
is($ppid, $postmaster, 'the worker is a child of the new postmaster');
like(slurp_file("/proc/$pid/cmdline"), qr/bgw_jit/, 'and named bgw_jit');

# it cleans under load, as pg_stat_io counts (the new cluster is 16 or
# later): the writes both views count over the load are the ones
# pg_stat_io's background-worker row gains (the cleaner's writes stopped
# and the statistics settled at each end; no other background worker
# writes here)
my $worker_io = core_backend_writes_sql($new, only => 'background worker');
my $counts = qq{SELECT $worker_io AS io, s.buf_clean + s.buf_all_clean AS stats,
	v.buffers_clean AS view FROM bgw_jit_stats s, bgw_jit_bgwriter v};
$new->safe_psql('postgres', 'CHECKPOINT');
settle_stats($new);
my $before = query_hash($new, $counts);
ok( load_until(
		$new, 'postgres', "$worker_io > $before->{io}"),
	"new cluster ($new_major): the worker cleans under load (pg_stat_io)");
set_conf($new, 'bgw_jit.lru_maxpages = 0');
settle_stats($new);
my $after = query_hash($new, $counts);
my %rose = map { $_ => $after->{$_} - $before->{$_} } qw(io stats view);
note("over the load: pg_stat_io $rose{io}, bgw_jit_stats $rose{stats}, "
	  . "bgw_jit_bgwriter $rose{view} writes");
is($rose{stats}, $rose{io},
	'bgw_jit_stats counts as many writes as pg_stat_io');
is($rose{view}, $rose{io}, 'and so does bgw_jit_bgwriter.buffers_clean');
my $s = query_hash($new, 'SELECT * FROM bgw_jit_stats');
my @negative = grep { defined $s->{$_} && $s->{$_} =~ /^-\d/ } sort keys %$s;
is("@negative", '', 'no figure of bgw_jit_stats is negative');
my $v = query_hash($new, 'SELECT * FROM bgw_jit_bgwriter');
my @null = grep { !defined $v->{$_} } sort keys %$v;
is("@null",
	$new_major >= 17 ? 'buffers_backend buffers_backend_fsync' : '',
	'bgw_jit_bgwriter: NULL only where the server has no such counter');
@negative = grep { defined $v->{$_} && $v->{$_} =~ /^-\d/ } sort keys %$v;
is("@negative", '', 'no figure of bgw_jit_bgwriter is negative');
is($new->safe_psql('latest', 'SELECT count(*) > 0 FROM bgw_jit_history'),
	't', 'the other database sees the same worker\'s history');
check_integrity($new, 'after the upgrade');

$new->stop;
done_testing();
