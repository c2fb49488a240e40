# Write combining (bgw_jit.combine_limit): a page the worker writes takes
# its dirty neighbours in shared buffers along, the lower ones first, then
# the higher ones, at most limit - 1 of them, never past the end of its
# 1 GB segment file; the per-cycle cap counts the neighbours, 1 turns it
# off, and what it wrote reads back intact.  Counted outside the worker:
# its page writes, traced with strace (pwrite to a relation file, the file
# named by -y), against the dirty pages and their order in the pool that
# pg_buffercache shows.  Functional facts only: whether combining pays is
# measured by bench/.
#
# The pages are dirtied with cleaning off, in an order chosen so that the
# pool holds them out of block order: islands of dirty blocks, loaded
# round robin across islands, so that no two pages next to each other in
# the pool are neighbours on disk.  They are then written by the
# all-buffers scan (jit+all at 100%, the LRU scan off), which meets them
# in pool order: without combining the writes follow the pool, with it
# they follow the disk.  One relation crosses the first segment boundary
# (block 131072): created with wal_level = minimal in the transaction that
# creates it, one row per page, so it costs 1 GB of page cache and a few
# seconds.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $limit = 16;
my $seg = 131072;    # blocks in a 1 GB segment (RELSEG_SIZE)

my $node = new_bgw_jit_node('combining', <<"EOC");
bgw_jit.enabled = off
bgw_jit.strategy = 'jit+all'
bgw_jit.all_percent = 100
bgw_jit.all_maxpages = 100000
bgw_jit.lru_maxpages = 0
bgw_jit.delay = 100ms
bgw_jit.combine_limit = $limit
EOC
$node->start;

# One row of ~900 bytes per page (fillfactor 10), id = block number, so
# that updates of v stay on their page (HOT) and find it by the index.
# small: 200 pages; big: 131082, ten of them in its second segment file.
$node->safe_psql('postgres', q{
	CREATE EXTENSION bgw_jit;
	CREATE EXTENSION pg_buffercache;
	BEGIN;
	CREATE TABLE small (id int, v int, pad text) WITH (fillfactor = 10);
	CREATE TABLE big (id int, v int, pad text) WITH (fillfactor = 10);
	ALTER TABLE small ALTER pad SET STORAGE PLAIN;
	ALTER TABLE big ALTER pad SET STORAGE PLAIN;
	INSERT INTO small SELECT g, 0, repeat('x', 900) FROM generate_series(0, 199) g;
	INSERT INTO big SELECT g, 0, repeat('x', 900) FROM generate_series(0, 131081) g;
	CREATE INDEX ON small (id);
	CREATE INDEX ON big (id);
	COMMIT});
is($node->safe_psql('postgres', 'SELECT pg_relation_size(\'big\') / 8192'),
	$seg + 10, 'big crosses the first segment boundary');
my %file;    # relfilenode => table
$file{ $node->safe_psql('postgres', "SELECT pg_relation_filenode('$_')") } = $_
  for qw(small big);
my $small = { reverse %file }->{small};
my $big = { reverse %file }->{big};

# The islands: in small four of 40 blocks, longer than a run, so that the
# limit shows; in big the last 8 blocks of the first file and the first 8
# of the second, one stretch of dirty blocks across the boundary.  Loaded
# round robin: the k-th block of every island, then the k+1-th; within an
# island in a scattered order; big's two islands apart in each round.
my @small_islands = map { 10 + 50 * $_ } 0 .. 3;
my @order;
for my $k (0 .. 39)
{
	my $o = ($k * 17) % 40;
	push @order, [ 'big', $seg - 8 + ($k * 3) % 8 ] if $k < 8;
	push @order, [ 'small', $_ + $o ] for @small_islands;
	push @order, [ 'big', $seg + ($k * 3) % 8 ] if $k < 8;
}
my %expect_dirty = map { ("$_->[0]:$_->[1]" => 1) } @order;

# Dirty the pages of @order (or of those given), one statement each in
# that order (the first time, after a restart, that also reads them into
# the pool in that order).
sub dirty_pages
{
	my @pages = @_ ? @_ : @order;
	$node->safe_psql('postgres',
		join '', "SET enable_seqscan = off;\n",
		map { "UPDATE $_->[0] SET v = v + 1 WHERE id = $_->[1];\n" } @pages);
	return;
}

# The dirty pages of small and big in pool order, as "table:block".
sub dirty_in_pool
{
	my @rows = split /\n/, $node->safe_psql('postgres', qq{
		SELECT relfilenode, relblocknumber FROM pg_buffercache
		 WHERE isdirty AND relforknumber = 0
		   AND relfilenode IN ($small, $big)
		 ORDER BY bufferid});
	return map { my ($f, $b) = split /\|/; "$file{$f}:$b" } @rows;
}

# strace, if it is installed and may trace the worker; else the checks
# that need it skip, saying why.
my $strace_ok = grep { -x "$_/strace" } split /:/, $ENV{PATH};
my $why = 'strace not found';

# Let the worker write the dirty pages with @conf in force, tracing its
# writes.  Returns the pages small and big got written, in the order
# written, as "table:block" (block numbers across segment files), or undef
# if strace could not trace.
sub traced_writes
{
	my (@conf) = @_;
	return undef unless $strace_ok;
	my $pid = wait_for_worker($node);
	my $trace = PostgreSQL::Test::Utils::tempdir() . '/strace.out';
	my $err = '';
	my $h = IPC::Run::start(
		[
			'strace', '-y', '-o', $trace,
			'-e', 'trace=pwrite64,pwritev,pwritev2', '-p', $pid
		],
		'2>', \$err);
	my $deadline = time + 30;
	$h->pump_nb, usleep(50_000)
	  until $err =~ /attached/ || !$h->pumpable || time > $deadline;
	if ($err !~ /attached/)
	{
		$h->kill_kill;
		($strace_ok, $why) = (0, "strace could not attach: $err");
		return undef;
	}

	set_conf($node, 'bgw_jit.enabled = on', @conf);
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 0 FROM pg_buffercache
		 WHERE isdirty AND relforknumber = 0 AND relfilenode IN ($small, $big)})
	  or die 'the worker did not write the pages';
	set_conf($node, 'bgw_jit.enabled = off');
	$h->signal('INT');
	$h->finish;

	# pwrite64(12</.../base/5/16384.1>, "..."..., 8192, 16384) = 8192
	# (pwritev: iovecs, count, offset): the offset is the last argument.
	my @writes;
	open(my $fh, '<', $trace) or die "reading $trace: $!";
	for (<$fh>)
	{
		next unless /^pwrite\w*\(\d+<[^>]*\/base\/\d+\/(\d+)(?:\.(\d+))?>.*, (\d+)\) += 8192$/;
		next unless $file{$1};
		push @writes, "$file{$1}:" . (($2 // 0) * $seg + $3 / 8192);
	}
	close $fh;
	return \@writes;
}

# What the rule says the all-buffers scan writes, from the dirty pages in
# pool order and the first page written: each dirty page it meets in pool
# order, then its dirty neighbours, lower ones first, then higher ones, up
# to $limit - 1, a run ending at a page that is not dirty or at the end of
# the segment file.
sub expected_writes
{
	my ($limit, $first, @pool) = @_;
	my %dirty = map { ($_ => 1) } @pool;
	my ($start) = grep { $pool[$_] eq $first } 0 .. $#pool;
	return () unless defined $start;
	my @out;
	for my $page (@pool[ $start .. $#pool ], @pool[ 0 .. $start - 1 ])
	{
		next unless delete $dirty{$page};
		push @out, $page;
		my ($rel, $block) = split /:/, $page;
		my $room = $limit - 1;
		for my $dir (-1, 1)
		{
			my $b = $block;
			while ($room > 0)
			{
				last if $dir < 0 ? $b % $seg == 0 : $b % $seg == $seg - 1;
				$b += $dir;
				last unless delete $dirty{"$rel:$b"};
				push @out, "$rel:$b";
				$room--;
			}
		}
	}
	return @out;
}

# Writes right after the write of a neighbouring block of the same table,
# by file ("small:0"; "big:0" is big's first file, "big:1" its second),
# and "across": a write in one segment file right after that of the
# neighbouring block in the other.
sub adjacent_pairs
{
	my ($writes) = @_;
	my %n;
	for my $i (1 .. $#$writes)
	{
		my ($r0, $b0) = split /:/, $writes->[ $i - 1 ];
		my ($r1, $b1) = split /:/, $writes->[$i];
		next unless $r0 eq $r1 && abs($b1 - $b0) == 1;
		my ($f0, $f1) = (int($b0 / $seg), int($b1 / $seg));
		$n{ $f0 == $f1 ? "$r1:$f1" : 'across' }++;
	}
	$n{$_} //= 0 for 'across', 'small:0', 'big:0', 'big:1';
	return \%n;
}

# Longest stretch of consecutive writes, each of the block next (in the
# same direction) to the one before, in one table.
sub longest_stretch
{
	my ($writes) = @_;
	my ($longest, $len, $dir) = (1, 1, 0);
	for my $i (1 .. $#$writes)
	{
		my ($r0, $b0) = split /:/, $writes->[ $i - 1 ];
		my ($r1, $b1) = split /:/, $writes->[$i];
		my $d = $b1 - $b0;
		if ($r0 eq $r1 && abs($d) == 1 && ($len == 1 || $d == $dir))
		{
			($len, $dir) = ($len + 1, $d);
		}
		else
		{
			($len, $dir) = (1, 0);
		}
		$longest = $len if $len > $longest;
	}
	return $longest;
}

# --- combine_limit = 16: the writes follow the disk, not the pool ---
$node->restart;
dirty_pages();
my @pool = dirty_in_pool();
is_deeply([ sort @pool ], [ sort keys %expect_dirty ],
	scalar(@pool) . ' pages dirtied: the islands of small and big');
my $pool_adjacent = adjacent_pairs(\@pool);
is( $pool_adjacent->{'small:0'} + $pool_adjacent->{'big:0'}
	  + $pool_adjacent->{'big:1'} + $pool_adjacent->{across},
	0, 'no two pages next to each other in the pool are neighbours on disk');

my $writes = traced_writes();
SKIP:
{
	skip "combine_limit = $limit: $why", 6 unless defined $writes;
	is_deeply([ sort @$writes ], [ sort @pool ],
		'combine_limit = 16: the worker wrote each dirty page once ('
		  . scalar(@$writes) . ' pwrite calls)');
	my $adj = adjacent_pairs($writes);
	cmp_ok($adj->{'small:0'}, '>=', 100,
		"combine_limit = 16: $adj->{'small:0'} of small's "
		  . scalar(grep { /^small/ } @$writes)
		  . ' pages were written right after a neighbour on disk');
	my $longest = longest_stretch([ grep { /^small/ } @$writes ]);
	is($longest, $limit,
		"combine_limit = 16: the longest run of small's blocks written in a row is $limit");
	ok( $adj->{'big:0'} > 0 && $adj->{'big:1'} > 0,
		"combine_limit = 16: big's pages were written with their neighbours in "
		  . "each segment file ($adj->{'big:0'} in the first, $adj->{'big:1'} in the second)");
	is($adj->{across}, 0,
		'combine_limit = 16: no run of writes crossed from one segment file to the next');
	is( join(' ', @$writes),
		join(' ', expected_writes($limit, $writes->[0], @pool)),
		'combine_limit = 16: each page the scan met, then its dirty neighbours, '
		  . 'lower then higher, at most 15, within its segment file')
	  or diag('pool order: ' . join(' ', @pool));
}

# --- 1 turns it off: the writes follow the pool ---
dirty_pages();
@pool = dirty_in_pool();
$writes = traced_writes('bgw_jit.combine_limit = 1');
SKIP:
{
	skip "combine_limit = 1: $why", 2 unless defined $writes;
	my $adj = adjacent_pairs($writes);
	is( $adj->{'small:0'} + $adj->{'big:0'} + $adj->{'big:1'} + $adj->{across},
		0, 'combine_limit = 1: no page was written right after a neighbour on disk ('
		  . scalar(@$writes) . ' writes)');
	is( join(' ', @$writes),
		join(' ', expected_writes(1, $writes->[0], @pool)),
		'combine_limit = 1: the worker wrote the dirty pages in pool order, as its scan met them');
}

# --- the per-cycle cap counts the neighbours ---
# all_maxpages = 4 ends a cycle's scan once 4 pages are written, the
# neighbours included, so no run of writes along the disk is longer.  (One
# island of small: 10 cycles or more.)
dirty_pages(grep { $_->[0] eq 'small' && $_->[1] < 50 } @order);
$writes = traced_writes("bgw_jit.combine_limit = $limit",
	'bgw_jit.all_maxpages = 4', 'bgw_jit.delay = 20ms');
SKIP:
{
	skip "all_maxpages = 4: $why", 1 unless defined $writes;
	my $small_writes = [ grep { /^small/ } @$writes ];
	my $longest = longest_stretch($small_writes);
	my $adj = adjacent_pairs($writes);
	ok( $longest <= 4 && $adj->{'small:0'} > 0,
		"all_maxpages = 4: neighbours still written ($adj->{'small:0'} after their "
		  . "neighbour), but no run of small's blocks in a row longer than 4 ($longest)");
}

# --- what it wrote reads back intact ---
# A fast stop writes only what is still dirty; the pages the worker wrote
# are read back from disk after the restart, past their checksums.
my $sums = q{SELECT (SELECT count(*) || ' ' || sum(v) FROM small),
	(SELECT count(*) || ' ' || sum(v) FROM big WHERE id >= 131000)};
my $rows = $node->safe_psql('postgres', $sums);
$node->restart;
is($node->safe_psql('postgres', $sums), $rows, 'every row survives a restart');
# (pg_amcheck would read all of big's 1 GB)
$node->safe_psql('postgres', 'DROP TABLE big');
check_integrity($node, 'after combined writes');

$node->stop;
done_testing();
