# The repository stays curated (issue 37): bench/results within 500 files
# and 10 MB, every relative link in README.md, doc/*.md and the result
# runs' READMEs resolving to a file or directory of the repository,
# README.md within 200 lines and doc/performance.md within 30 kB.
#
# Needs no server and no PostgreSQL::Test module: `prove t/031_repository.pl`
# from the repository's top.  In t/run_tests.sh's copy of the source
# (bench/setup.sh's bgw_jit_copy_source, without .git) the tree is walked
# instead of asking git.
use strict;
use warnings;
use FindBin;
use Cwd qw(realpath);
use File::Find;
use File::Spec;
use Test::More;

my $top = realpath("$FindBin::Bin/..");
my $results = "$top/bench/results";

my $max_files = 500;
my $max_bytes = 10 * 1024 * 1024;
my $max_readme_lines = 200;
my $max_perf_bytes = 30 * 1024;

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "$path: $!";
	local $/;
	my $s = <$fh>;
	close $fh;
	return $s;
}

# (a) bench/results: the files git tracks there, or in a copy without
# .git every file under it
my @files;
if (-e "$top/.git" && system("git -C '$top' rev-parse --git-dir >/dev/null 2>&1") == 0)
{
	open(my $git, '-|', 'git', '-C', $top, 'ls-files', '-z', '--', 'bench/results')
	  or die "git ls-files: $!";
	local $/ = "\0";
	while (my $f = <$git>)
	{
		chomp $f;
		push @files, "$top/$f" if -f "$top/$f";
	}
	close $git or die "git ls-files failed";
	note('bench/results: files tracked by git');
}
elsif (-d $results)
{
	find({ wanted => sub { push @files, $File::Find::name if -f $_ }, no_chdir => 1 }, $results);
	note('bench/results: no git checkout, every file under it');
}
my $bytes = 0;
$bytes += -s $_ for @files;
cmp_ok(scalar(@files), '<=', $max_files, "bench/results holds at most $max_files files")
  or diag(scalar(@files) . ' files');
cmp_ok($bytes, '<=', $max_bytes, "bench/results holds at most 10 MB")
  or diag("$bytes bytes");

# (b) relative links: [text](target) and ![alt](target), and
# reference-style definitions "[label]: target"
my @docs = ("$top/README.md", glob("$top/doc/*.md"), glob("$results/*/README.md"),
	glob("$results/*/*/README.md"));
ok(scalar(grep { m{/doc/} } @docs) > 0, 'doc/*.md found');

# the results directory is absent from t/run_tests.sh's copy of the tree
# (its tar leaves out any "results"); links into it are checked where it is
my $have_results = -d $results;
note('bench/results absent: links into it not checked') unless $have_results;

my ($links, @broken) = (0);
for my $doc (@docs)
{
	my $text = slurp($doc);
	# fenced code blocks and inline code hold no links
	$text =~ s/^```.*?^```[^\n]*$//msg;
	$text =~ s/`[^`\n]*`//g;
	my (undef, $dir) = File::Spec->splitpath($doc);
	my @targets;
	push @targets, $1 while $text =~ /\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
	push @targets, $1 while $text =~ /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/mg;
	for my $target (@targets)
	{
		next if $target =~ m{^(?:[a-z][a-z0-9+.-]*:|//)}i;    # http:, https:, mailto:, ...
		next if $target =~ /^#/;                              # an anchor in the same page
		(my $path = $target) =~ s/#.*$//;
		$path =~ s/\?.*$//;
		next if $path eq '';
		$path =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
		my $abs = File::Spec->rel2abs($path, $dir);
		$abs = File::Spec->canonpath($abs);
		1 while $abs =~ s{/(?!\.\.?/)[^/]+/\.\./}{/};
		$abs =~ s{/(?!\.\.?$)[^/]+/\.\.$}{};
		next if !$have_results && index($abs, "$results/") == 0;
		$links++;
		(my $rel = $doc) =~ s{^\Q$top\E/}{};
		push @broken, "$rel: $target" unless -e $abs && index("$abs/", "$top/") == 0;
	}
}
ok($links > 0, "relative links found ($links)");
is(scalar(@broken), 0, 'every relative link resolves to a file or directory of the repository')
  or diag(join("\n", 'broken:', @broken));

# (c) sizes of the two pages read first
my @readme = split /\n/, slurp("$top/README.md"), -1;
pop @readme if @readme && $readme[-1] eq '';
cmp_ok(scalar(@readme), '<=', $max_readme_lines, "README.md has at most $max_readme_lines lines")
  or diag(scalar(@readme) . ' lines');
my $perf = -s "$top/doc/performance.md";
cmp_ok($perf, '<=', $max_perf_bytes, 'doc/performance.md is at most 30 kB')
  or diag("$perf bytes");

done_testing();
