# Monitoring: bgw_jit_exporter.yaml served by the real postgres_exporter.
#
# Debian's prometheus-postgres-exporter with our queries file, scraped
# over HTTP: every series of the file is there with its TYPE (the
# 15/16-only ones only there), counters move under load and, with the
# worker switched off and the statistics settled, match the SQL figures
# of bgw_jit_bgwriter and bgw_jit_stats.  (The view's own figures are
# checked against core's counts in t/015_bgwriter_view.pl, which needs no
# exporter.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HTTP::Tiny;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $exporter_bin = $ENV{BGW_JIT_EXPORTER}
  // '/usr/bin/prometheus-postgres-exporter';
plan skip_all =>
  "$exporter_bin is not installed (Debian package prometheus-postgres-exporter; t/run_tests.sh installs it)"
  unless -x $exporter_bin;
my $queries = "$FindBin::RealBin/../bgw_jit_exporter.yaml";

my $scale = 5;

# A per-cycle cap low enough that the worker hits it under load.
my $node = start_bgw_jit_node(
	'exporter',
	scale => $scale,
	busy => 1,
	conf => "bgw_jit.lru_maxpages = 50\n");
my $v15 = $node->pg_version < 17;    # pg_stat_bgwriter has buffers_backend

# Every series the queries file defines: name => counter|gauge, and the
# namespaces whose query only returns a row on 15 and 16.
my (%series, %old_only, $ns, $metric);
open my $fh, '<', $queries or die "$queries: $!";
while (<$fh>)
{
	if (/^(\w+):\s*$/) { $ns = $1; next; }
	$old_only{$ns} = 1 if /WHERE b ->> 'buffers_backend' IS NOT NULL/;
	if (/^\s+- (\w+):\s*$/) { $metric = $1; next; }
	if (/^\s+usage: "(\w+)"/ && $1 ne 'LABEL')
	{
		$series{"${ns}_$metric"} = { type => lc $1, ns => $ns };
	}
}
close $fh;
cmp_ok(scalar keys %series, '>=', 35, 'queries file parsed');
for my $name (sort keys %series)
{
	my $counter = $series{$name}{type} eq 'counter';
	ok(($name =~ /_total$/) == $counter,
		"$name: _total if and only if a counter");
}

# The exporter, on a free port, connected over the test cluster's socket.
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $url = "http://127.0.0.1:$port/metrics";
my ($exp_out, $exp_err) = ('', '');
my $exporter;
{
	local $ENV{DATA_SOURCE_NAME} =
	    'host=' . $node->host
	  . ' port=' . $node->port
	  . ' dbname=postgres sslmode=disable';
	$exporter = IPC::Run::start(
		[
			$exporter_bin,
			"--web.listen-address=127.0.0.1:$port",
			"--extend.query-path=$queries",
			'--disable-settings-metrics'
		],
		'>', \$exp_out, '2>', \$exp_err);
}
my $http = HTTP::Tiny->new(timeout => 30);

# Run the update load in rounds of a few seconds until the SQL condition
# holds (on a busy machine one round may do little), for at most the
# default timeout; whether it held.
sub load_until
{
	my ($cond) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		update_load($node, clients => 2, seconds => 3, scale => $scale);
		return 1 if $node->safe_psql('postgres', "SELECT $cond") eq 't';
	}
	return 0;
}

# Scrape /metrics: { name => { type => ..., value => ... } } for the
# bgw_jit series (one sample each: no labels but bgw_jit_state_info's).
sub scrape
{
	my $res = $http->get($url);
	return undef unless $res->{success};
	my %m;
	for (split /\n/, $res->{content})
	{
		if (/^# TYPE (bgw_jit\w*) (\w+)/) { $m{$1}{type} = $2; }
		elsif (/^(bgw_jit\w*)(\{[^}]*\})? (\S+)$/)
		{
			$m{$1}{value} = $3;
			$m{$1}{labels} = $2;
		}
	}
	$m{_raw} = $res->{content};
	return \%m;
}

# Scrape until $cond->(scrape) holds, for at most the default timeout.
sub scrape_until
{
	my ($cond) = @_;
	my $m;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		$m = scrape();
		return $m if $m && $cond->($m);
		usleep(100_000);
	}
	return $m;
}

my $first = scrape_until(sub { defined $_[0]{bgw_jit_cycles_total}{value} });
ok(defined $first->{bgw_jit_cycles_total}{value},
	'the exporter serves bgw_jit series')
  or diag("exporter stderr:\n$exp_err");
for my $name (sort keys %series)
{
	if ($old_only{ $series{$name}{ns} } && !$v15)
	{
		ok(!exists $first->{$name}, "$name: not exported from 17 on");
		next;
	}
	is($first->{$name}{type}, $series{$name}{type},
		"$name exported as a $series{$name}{type}");
	# (NaN: a ratio of nothing yet, e.g. redirtied_ratio before any
	# write was judged)
	like($first->{$name}{value} // '', qr/^([-+0-9.eE]+|NaN)$/,
		"$name has a value");
}
for my $label ('cpu_priority="normal"', 'pacing="auto"', 'strategy="jit"')
{
	like($first->{bgw_jit_state_info}{labels} // '', qr/[{,]\Q$label\E[,}]/,
		"bgw_jit_state_info has the label $label");
}
like($first->{_raw}, qr/^pg_up 1$/m, 'the exporter reaches the server');
unlike($first->{_raw}, qr/^pg_exporter_last_scrape_error 1$/m,
	'no scrape error');

# Under load the worker cleans, and the counters move in the exporter.
my $before = scrape();
ok( load_until(
		'buf_clean > 0 AND maxwritten_clean > 0 AND cycles > 0 FROM bgw_jit_stats'),
	'under load bgw_jit writes and hits its page cap');
my @moving = qw(bgw_jit_buffers_clean_total bgw_jit_cycles_total
  bgw_jit_maxwritten_clean_total bgw_jit_bgwriter_buffers_clean_total
  bgw_jit_bgwriter_maxwritten_clean_total bgw_jit_buffers_alloc_total
  bgw_jit_bgwriter_buffers_alloc_total);
my $moved = scrape_until(
	sub {
		my ($m) = @_;
		!grep { ($m->{$_}{value} // 0) <= ($before->{$_}{value} // 0) }
		  @moving;
	});
for (@moving)
{
	cmp_ok($moved->{$_}{value} // 0, '>', $before->{$_}{value} // 0,
		"$_ rises under load in the exporter");
}

# Freeze the worker's figures; on 15 let buffers_backend absorb all.
set_conf($node, 'bgw_jit.enabled = off');
settle_stats($node);
my $r = query_hash($node,
	'SELECT v.buffers_clean, v.maxwritten_clean'
	  . ($v15 ? ', v.buffers_backend' : '')
	  . ', s.buf_clean, s.buf_all_clean
	 FROM bgw_jit_bgwriter v, bgw_jit_stats s');
note(join ', ', map { "$_ $r->{$_}" } sort keys %$r);

# The exporter serves the same figures.
my $m = scrape_until(
	sub {
		($_[0]{bgw_jit_bgwriter_buffers_clean_total}{value} // -1) ==
		  $r->{buffers_clean};
	});
cmp_ok($m->{bgw_jit_bgwriter_buffers_clean_total}{value}, '==', $r->{buffers_clean},
	'exported bgw_jit_bgwriter_buffers_clean_total is the view\'s');
cmp_ok($m->{bgw_jit_bgwriter_maxwritten_clean_total}{value},
	'==', $r->{maxwritten_clean},
	'exported bgw_jit_bgwriter_maxwritten_clean_total is the view\'s');
# (each series against its own column: under jit the all-buffers scan
# writes nothing, so a series fed the other column would show 0)
cmp_ok($r->{buf_clean}, '>', $r->{buf_all_clean},
	"the LRU scan wrote ($r->{buf_clean}), the all-buffers scan less ($r->{buf_all_clean})");
cmp_ok($m->{bgw_jit_buffers_clean_total}{value}, '==', $r->{buf_clean},
	'exported bgw_jit_buffers_clean_total is bgw_jit_stats.buf_clean');
cmp_ok($m->{bgw_jit_buffers_all_clean_total}{value}, '==', $r->{buf_all_clean},
	'exported bgw_jit_buffers_all_clean_total is bgw_jit_stats.buf_all_clean');
cmp_ok($m->{bgw_jit_bgwriter_buffers_backend_total}{value},
	'==', $r->{buffers_backend},
	'15: exported bgw_jit_bgwriter_buffers_backend_total is the view\'s')
  if $v15;

$exporter->signal('TERM');
$exporter->finish;
$node->stop;

done_testing();
