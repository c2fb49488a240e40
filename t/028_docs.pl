# Docs that cannot drift: doc/settings.md against pg_settings, and
# doc/sql.md against the catalog, on a running server with the extension
# installed at its default version.
#
# Settings: every bgw_jit.* setting the server has is in a table of
# doc/settings.md with its type, default (boot_val), unit, bounds (or enum
# values) and context exactly as pg_settings shows them, and has a section
# of its own; nothing is documented that the server does not have.  The
# table under "Test builds only" must list exactly the settings bgw_jit.c
# defines under BGW_JIT_FAULT_INJECTION; they are compared with the server
# when it runs such a build (as t/run_tests.sh does) and skipped, saying
# so, when it does not.  A string setting has no bounds in pg_settings: the
# values its row names are tried with ALTER SYSTEM, and just outside them.
#
# SQL: every view of the extension (from pg_depend) is documented with its
# columns (pg_attribute), in order, with their types, and nothing else;
# every function of the extension with its arguments (names, types,
# defaults) and result columns; the version documented is the default
# version.  The views have the same columns on every supported server
# version, so the same doc is checked on each.
#
# The checkers are also run on copies of the docs broken on purpose (a
# wrong default, a missing column, ...), each of which must be caught.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BgwJitTest;

my $top = "$FindBin::RealBin/..";

sub slurp
{
	my ($file) = @_;
	open(my $fh, '<', $file) or die "$file: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

my $settings_md = slurp("$top/doc/settings.md");
my $sql_md = slurp("$top/doc/sql.md");
my $source = slurp("$top/bgw_jit.c");

# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------

sub unquote
{
	my ($s) = @_;
	$s =~ s/`//g;
	$s =~ s/^\s+|\s+$//g;
	return $s;
}

sub split_row
{
	my ($line) = @_;
	$line =~ s/^\s*\|//;
	$line =~ s/\|\s*$//;
	return map { my $c = $_; $c =~ s/^\s+|\s+$//g; $c } split /\|/, $line, -1;
}

# The tables of a markdown text, outside fenced code: each with the
# headings above it (level => text), its header cells and its rows.
sub md_tables
{
	my ($text) = @_;
	my @lines = split /\n/, $text;
	my (@tables, %heading, $fence);
	for (my $i = 0; $i < @lines; $i++)
	{
		my $l = $lines[$i];
		if ($l =~ /^```/) { $fence = !$fence; next; }
		next if $fence;
		if ($l =~ /^(#+)\s+(.*?)\s*$/)
		{
			my $level = length $1;
			$heading{$level} = $2;
			delete $heading{$_} for grep { $_ > $level } keys %heading;
			next;
		}
		next
		  unless $l =~ /^\|/
		  && $i + 1 < @lines
		  && $lines[ $i + 1 ] =~ /^\|\s*:?-+/;
		my @header = split_row($l);
		my @rows;
		$i += 2;
		while ($i < @lines && $lines[$i] =~ /^\|/)
		{
			push @rows, [ split_row($lines[$i]) ];
			$i++;
		}
		$i--;
		push @tables,
		  {
			heading => {%heading},
			header => \@header,
			rows => \@rows
		  };
	}
	return @tables;
}

# Headings outside fenced code, as [level, text].
sub md_headings
{
	my ($text) = @_;
	my ($fence, @h);
	for my $l (split /\n/, $text)
	{
		if ($l =~ /^```/) { $fence = !$fence; next; }
		push @h, [ length $1, $2 ] if !$fence && $l =~ /^(#+)\s+(.*?)\s*$/;
	}
	return @h;
}

# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------

my @settings_header = ('setting', 'type', 'default', 'unit', 'range or values', 'context');

# The settings bgw_jit.c defines only in fault-injection builds.
sub test_only_in_source
{
	my ($c) = @_;
	my %names;
	while ($c =~ /^#ifdef BGW_JIT_FAULT_INJECTION\n(.*?)^#endif/msg)
	{
		my $block = $1;
		$names{$1} = 1 while $block =~ /DefineCustom\w+Variable\(\s*"(bgw_jit\.\w+)"/g;
	}
	return \%names;
}

# Problems of a settings doc against the server's settings (name =>
# pg_settings row), as [setting, problem].  $source_test_only: the
# test-only settings of the source; $string_ranges gets the documented
# values of string settings, for checks on the server.
sub settings_problems
{
	my ($md, $server, $source_test_only, $string_ranges) = @_;
	my (@p, %doc);
	my @tables = grep { @{ $_->{header} } && $_->{header}[0] eq 'setting' } md_tables($md);
	push @p, [ 'doc/settings.md', 'no settings table' ] unless @tables;
	for my $t (@tables)
	{
		my $test_only = grep { /Test builds only/i } values %{ $t->{heading} };
		if (join('|', @{ $t->{header} }) ne join('|', @settings_header))
		{
			push @p, [ 'doc/settings.md', "table header is '@{$t->{header}}'" ];
			next;
		}
		for my $r (@{ $t->{rows} })
		{
			my ($name, $type, $default, $unit, $range, $context) = @$r;
			if (@$r != @settings_header || $name !~ /^`(bgw_jit\.\w+)`$/)
			{
				push @p, [ 'doc/settings.md', "malformed row: " . join(' | ', @$r) ];
				next;
			}
			$name = $1;
			push @p, [ $name, 'documented twice' ] if $doc{$name};
			$doc{$name} = {
				test_only => $test_only ? 1 : 0,
				type => unquote($type),
				default => unquote($default),
				unit => unquote($unit),
				range => $range,
				context => unquote($context)
			};
		}
	}

	# a section of its own for every setting, and none for another
	my %section = map { $_->[1] =~ /^`(bgw_jit\.\w+)`$/ ? ($1 => 1) : () } md_headings($md);
	for my $name (sort keys %doc)
	{
		push @p, [ $name, 'no section describes it' ] unless $section{$name};
	}
	for my $name (sort keys %section)
	{
		push @p, [ $name, 'a section describes it but no table lists it' ] unless $doc{$name};
	}

	# test-only settings: exactly those of the source
	for my $name (sort keys %doc)
	{
		my $src = $source_test_only->{$name} ? 1 : 0;
		push @p, [ $name, 'listed under "Test builds only" but defined in every build' ]
		  if $doc{$name}{test_only} && !$src;
		push @p, [ $name, 'defined only in fault-injection builds but not listed under "Test builds only"' ]
		  if !$doc{$name}{test_only} && $src;
	}
	for my $name (sort keys %$source_test_only)
	{
		push @p, [ $name, 'test-only setting of bgw_jit.c not documented' ] unless $doc{$name};
	}

	for my $name (sort keys %$server)
	{
		push @p, [ $name, 'exists on the server but is not documented' ] unless $doc{$name};
	}
	for my $name (sort keys %doc)
	{
		my $d = $doc{$name};
		my $s = $server->{$name};
		if (!$s)
		{
			# a test-only setting absent from a production build is fine
			push @p, [ $name, 'documented but the server has no such setting' ]
			  unless $d->{test_only};
			next;
		}
		for my $f (qw(type default context))
		{
			my $want = $f eq 'type' ? $s->{vartype} : $f eq 'default' ? $s->{boot_val} : $s->{context};
			push @p, [ $name, "$f is '$d->{$f}' in the doc, '$want' on the server" ]
			  if $d->{$f} ne $want;
		}
		my $unit = $d->{unit} eq '–' ? '' : $d->{unit};
		push @p, [ $name, "unit is '$d->{unit}' in the doc, '" . ($s->{unit} || '–') . "' on the server" ]
		  if $unit ne $s->{unit};

		my $range = $d->{range};
		if ($s->{vartype} eq 'integer' || $s->{vartype} eq 'real')
		{
			if ($range =~ /^`(-?[0-9.e+]+)` to `(-?[0-9.e+]+)`$/)
			{
				push @p, [ $name, "minimum is $1 in the doc, $s->{min_val} on the server" ]
				  if $1 ne $s->{min_val};
				push @p, [ $name, "maximum is $2 in the doc, $s->{max_val} on the server" ]
				  if $2 ne $s->{max_val};
			}
			else
			{
				push @p, [ $name, "range '$range' is not '`MIN` to `MAX`'" ];
			}
		}
		elsif ($s->{vartype} eq 'enum' || $s->{vartype} eq 'bool')
		{
			my $want = $s->{vartype} eq 'bool' ? 'on, off' : join(', ', @{ $s->{enumvals} });
			my $got = join(', ', map { unquote($_) } split /,\s*/, $range);
			push @p, [ $name, "values are '$got' in the doc, '$want' on the server" ]
			  if $got ne $want || $range !~ /^`[^`]+`(, `[^`]+`)*$/;
		}
		elsif ($s->{vartype} eq 'string')
		{
			# words in backticks, and optionally "a number from `A` to `B`"
			my %r = (words => [], from => undef, to => undef);
			my $rest = $range;
			if ($rest =~ s/,? or a number from `(-?[0-9.]+)` to `(-?[0-9.]+)`$//)
			{
				@r{qw(from to)} = ($1, $2);
			}
			if ($rest =~ /^`[^`]+`(, `[^`]+`)*$/)
			{
				$r{words} = [ map { unquote($_) } split /,\s*/, $rest ];
			}
			else
			{
				push @p, [ $name, "values '$range' are not '`word`, ... [or a number from `A` to `B`]'" ];
			}
			push @p, [ $name, "the default '$s->{boot_val}' is not among the documented values" ]
			  unless grep({ $_ eq $s->{boot_val} } @{ $r{words} })
			  || (defined $r{from} && $s->{boot_val} =~ /^-?[0-9.]+$/
				&& $s->{boot_val} >= $r{from} && $s->{boot_val} <= $r{to});
			$string_ranges->{$name} = \%r if $string_ranges;
		}
	}
	return @p;
}

# ---------------------------------------------------------------------------
# SQL objects
# ---------------------------------------------------------------------------

my %type_alias = (
	float8 => 'double precision',
	float4 => 'real',
	int => 'integer',
	int4 => 'integer',
	int8 => 'bigint',
	bool => 'boolean',
	timestamptz => 'timestamp with time zone',
	varchar => 'character varying');

sub norm_type
{
	my ($t) = @_;
	$t = lc unquote($t);
	$t =~ s/\s+/ /g;
	my $array = $t =~ s/\[\]$// ? '[]' : '';
	return ($type_alias{$t} // $t) . $array;
}

sub norm_default
{
	my ($d) = @_;
	return undef unless defined $d;
	$d =~ s/^\s+|\s+$//g;
	# casts the catalog adds: 'auto'::text, NULL::bigint[], '0'::double precision
	$d =~ s/::[a-z_]+(?: [a-z_]+)*(?:\[\])?//g;
	$d =~ s/^\((.*)\)$/$1/;
	$d =~ s/^'(-?[0-9.]+)'$/$1/;
	$d = 0 + $d if $d =~ /^-?[0-9]+(\.[0-9]+)?$/;
	return "$d";
}

# Split at the commas outside parentheses and quotes.
sub split_args
{
	my ($s) = @_;
	my @items;
	my ($cur, $depth, $quote) = ('', 0, 0);
	for my $ch (split //, $s)
	{
		if ($quote) { $quote = 0 if $ch eq "'"; }
		elsif ($ch eq "'") { $quote = 1; }
		elsif ($ch eq '(') { $depth++; }
		elsif ($ch eq ')') { $depth--; }
		elsif ($ch eq ',' && $depth == 0) { push @items, $cur; $cur = ''; next; }
		$cur .= $ch;
	}
	push @items, $cur if $cur =~ /\S/;
	return map { my $x = $_; $x =~ s/^\s+|\s+$//g; $x } @items;
}

# One argument, "[MODE] name type [DEFAULT expr]", as "MODE name type
# [= default]".
sub norm_arg
{
	my ($a, $mode) = @_;
	$a =~ s/\s+/ /g;
	my $m = $mode // 'IN';
	$m = uc $1 if $a =~ s/^(IN|OUT|INOUT|VARIADIC) //i;
	my ($name, $rest) = $a =~ /^(\w+) (.+)$/ or return "unparsable '$a'";
	my $default;
	$default = $1 if $rest =~ s/ DEFAULT (.+)$//i;
	my $s = "$m $name " . norm_type($rest);
	$s .= ' = ' . norm_default($default) if defined $default;
	return $s;
}

# A signature "name(args) RETURNS result" as (name, [args], retset,
# result), OUT columns of RETURNS TABLE among the args.
sub parse_signature
{
	my ($sig) = @_;
	$sig =~ s/--[^\n]*//g;
	$sig =~ s/\s+/ /g;
	$sig =~ s/^\s+|\s+$//g;
	return unless $sig =~ /^(\w+)\s*\((.*)\)\s*RETURNS\s+(.+)$/is;
	my ($name, $args, $result) = ($1, $2, $3);
	my @args = map { norm_arg($_) } split_args($args);
	my $retset = 0;
	if ($result =~ /^TABLE\s*\((.*)\)$/is)
	{
		push @args, map { norm_arg($_, 'OUT') } split_args($1);
		($retset, $result) = (1, 'record');
	}
	elsif ($result =~ s/^SETOF\s+//i)
	{
		$retset = 1;
	}
	return ($name, \@args, $retset, norm_type($result));
}

# The columns documented for each view: name => [[column, type], ...].
sub doc_view_columns
{
	my ($md, $problems) = @_;
	my %views;
	for my $t (md_tables($md))
	{
		next unless ($t->{heading}{2} // '') eq 'Views';
		my $h3 = $t->{heading}{3} // '';
		my ($view) = $h3 =~ /^`(\w+)`$/;
		if (!$view)
		{
			push @$problems, [ 'doc/sql.md', "a table under Views in section '$h3'" ];
			next;
		}
		if (join('|', @{ $t->{header} }) ne 'column|type|meaning')
		{
			push @$problems, [ $view, "table header is '@{$t->{header}}'" ];
			next;
		}
		push @$problems, [ $view, 'documented twice' ] if $views{$view};
		my @cols;
		for my $r (@{ $t->{rows} })
		{
			if (@$r != 3 || $r->[0] !~ /^`\w+`(, `\w+`)*$/)
			{
				push @$problems, [ $view, "malformed row: " . join(' | ', @$r) ];
				next;
			}
			push @cols, [ unquote($_), norm_type($r->[1]) ] for split /,\s*/, $r->[0];
		}
		$views{$view} = \@cols;
	}
	return \%views;
}

# Where two lists first differ, in words.
sub first_difference
{
	my ($what, $doc, $cat) = @_;
	my $i = 0;
	$i++ while $i < @$doc && $i < @$cat && $doc->[$i] eq $cat->[$i];
	return sprintf("%s %d is '%s' in the doc, '%s' in the catalog (%d in the doc, %d in the catalog)",
		$what, $i + 1, $doc->[$i] // '(none)', $cat->[$i] // '(none)', scalar @$doc, scalar @$cat);
}

# Problems of an SQL doc against the catalog: $cat->{views}{name} =>
# [[column, type]], $cat->{functions}{name} => [args, retset, result],
# $cat->{version}.
sub sql_problems
{
	my ($md, $cat) = @_;
	my @p;

	my ($version) = $md =~ /extension version (\d+(?:\.\d+)+)/;
	push @p, [ 'doc/sql.md', "documents version " . ($version // 'none') . ", the default is $cat->{version}" ]
	  unless defined $version && $version eq $cat->{version};

	my $views = doc_view_columns($md, \@p);
	for my $v (sort keys %{ $cat->{views} })
	{
		my $doc = $views->{$v};
		if (!$doc)
		{
			push @p, [ $v, 'view not documented' ];
			next;
		}
		my @want = map { $_->[0] } @{ $cat->{views}{$v} };
		my @got = map { $_->[0] } @$doc;
		push @p, [ $v, first_difference('column', \@got, \@want) ]
		  if "@got" ne "@want";
		my $n = @$doc < @{ $cat->{views}{$v} } ? @$doc : @{ $cat->{views}{$v} };
		for my $i (0 .. $n - 1)
		{
			my ($dc, $dt) = @{ $doc->[$i] };
			my ($cc, $ct) = @{ $cat->{views}{$v}[$i] };
			push @p, [ $v, "column $cc is $dt in the doc, $ct in the catalog" ]
			  if $dc eq $cc && $dt ne $ct;
		}
	}
	push @p, [ $_, 'documented as a view, but the extension has no such view' ]
	  for grep { !$cat->{views}{$_} } sort keys %$views;

	# functions: signature blocks, and the list of the views' functions
	my %doc_fn;
	my ($fence, $block) = (0, '');
	for my $l (split /\n/, $md)
	{
		if ($l =~ /^```/)
		{
			if ($fence)
			{
				my ($name, $args, $retset, $result) = parse_signature($block);
				if (defined $name)
				{
					push @p, [ "$name()", 'documented twice' ] if $doc_fn{$name};
					$doc_fn{$name} = [ $args, $retset, $result ];
				}
				$block = '';
			}
			$fence = !$fence;
			next;
		}
		$block .= "$l\n" if $fence;
		if (!$fence && $l =~ /^\* `(\w+)\(\)`: the columns of `(\w+)`(?: but (.+?), which [^;.]*)?[;.]/)
		{
			my ($fn, $view, $but) = ($1, $2, $3 // '');
			my %except = map { unquote($_) => 1 } split /,\s*|\s+and\s+/, $but;
			if (!$views->{$view})
			{
				push @p, [ "$fn()", "refers to the columns of $view, which is not documented" ];
				next;
			}
			push @p, [ "$fn()", 'documented twice' ] if $doc_fn{$fn};
			my @out = map { "OUT $_->[0] $_->[1]" } grep { !$except{ $_->[0] } } @{ $views->{$view} };
			push @p, [ "$fn()", "excepts $_, which is not a column of $view" ]
			  for grep { my $e = $_; !grep { $_->[0] eq $e } @{ $views->{$view} } } sort keys %except;
			$doc_fn{$fn} = [ \@out, undef, 'record' ];
		}
	}
	for my $f (sort keys %{ $cat->{functions} })
	{
		my $doc = $doc_fn{$f};
		if (!$doc)
		{
			push @p, [ "$f()", 'function not documented' ];
			next;
		}
		my ($cargs, $cretset, $cresult) = @{ $cat->{functions}{$f} };
		my ($dargs, $dretset, $dresult) = @$doc;
		push @p, [ "$f()", first_difference('argument', $dargs, $cargs) ]
		  if join("\n", @$dargs) ne join("\n", @$cargs);
		push @p, [ "$f()", "returns $dresult in the doc, $cresult in the catalog" ]
		  if $dresult ne $cresult;
		push @p, [ "$f()", 'set-returning or not, the doc disagrees with the catalog' ]
		  if defined $dretset && $dretset != $cretset;
	}
	push @p, [ "$_()", 'documented, but the extension has no such function' ]
	  for grep { !$cat->{functions}{$_} } sort keys %doc_fn;
	return @p;
}

# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------

my $node = new_bgw_jit_node('docs');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION bgw_jit');
my $version_num = $node->safe_psql('postgres', 'SHOW server_version_num');
note("PostgreSQL $version_num");

my %server;
for my $line (split /\n/, $node->safe_psql('postgres', q{
	SELECT concat_ws(E'\t', name, vartype, boot_val, coalesce(unit, ''),
					 coalesce(min_val, ''), coalesce(max_val, ''),
					 coalesce(array_to_string(enumvals, E'\x1f'), ''), context)
	  FROM pg_settings WHERE name LIKE 'bgw\_jit.%' ORDER BY name}))
{
	my @f = split /\t/, $line, -1;
	$server{ $f[0] } = {
		vartype => $f[1],
		boot_val => $f[2],
		unit => $f[3],
		min_val => $f[4],
		max_val => $f[5],
		enumvals => [ split /\x1f/, $f[6] ],
		context => $f[7]
	};
}
cmp_ok(scalar keys %server, '>=', 10, scalar(keys %server) . ' bgw_jit.* settings on the server');
my $source_test_only = test_only_in_source($source);
ok(%$source_test_only,
	'bgw_jit.c defines test-only settings: ' . join(', ', sort keys %$source_test_only));
my $fault_injection = has_fault_injection($node);
note($fault_injection
	? 'fault-injection build: its test-only settings are compared too'
	: 'production build: the test-only settings are not on the server and are not compared');

# The default version, from the control file (pg_available_extensions does
# not list an extension staged outside the server's share directory).
my ($default_version) = slurp("$top/bgw_jit.control") =~ /^default_version\s*=\s*'([^']+)'/m;
my %cat = (version => $default_version);
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'bgw_jit'"),
	$cat{version}, "the extension is installed at its default version $cat{version}");
my $extension_members = q{
	  d.refclassid = 'pg_extension'::regclass
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bgw_jit')
	  AND d.deptype = 'e'};
for my $v (split /\n/, $node->safe_psql('postgres', qq{
	SELECT c.relname FROM pg_depend d, pg_class c
	 WHERE $extension_members
	   AND d.classid = 'pg_class'::regclass AND c.oid = d.objid AND c.relkind = 'v'
	 ORDER BY 1}))
{
	$cat{views}{$v} = [
		map { [ split /\t/ ] } split /\n/, $node->safe_psql('postgres', qq{
		SELECT attname || E'\t' || format_type(atttypid, atttypmod)
		  FROM pg_attribute
		 WHERE attrelid = '$v'::regclass AND attnum > 0 AND NOT attisdropped
		 ORDER BY attnum})
	];
}
cmp_ok(scalar keys %{ $cat{views} }, '>=', 4,
	'the extension has views: ' . join(', ', sort keys %{ $cat{views} }));
for my $line (split /\n/, $node->safe_psql('postgres', qq{
	SELECT concat_ws(E'\t', p.proname, pg_get_function_arguments(p.oid),
					 p.proretset, pg_get_function_result(p.oid))
	  FROM pg_depend d, pg_proc p
	 WHERE $extension_members
	   AND d.classid = 'pg_proc'::regclass AND p.oid = d.objid
	 ORDER BY p.proname}))
{
	my ($name, $args, $retset, $result) = split /\t/, $line, -1;
	ok(!$cat{functions}{$name}, "$name: one function of that name (the doc names functions by name)");
	my @args = map { norm_arg($_) } split_args($args);
	if ($result =~ /^TABLE\((.*)\)$/s)
	{
		push @args, map { norm_arg($_, 'OUT') } split_args($1);
		$result = 'SETOF record';
	}
	$result =~ s/^SETOF //;
	$cat{functions}{$name} = [ \@args, $retset eq 't' ? 1 : 0, norm_type($result) ];
}
cmp_ok(scalar keys %{ $cat{functions} }, '>=', 5,
	'the extension has functions: ' . join(', ', sort keys %{ $cat{functions} }));

# ---------------------------------------------------------------------------
# The docs as they are
# ---------------------------------------------------------------------------

sub report
{
	my (@problems) = @_;
	my %by;
	push @{ $by{ $_->[0] } }, $_->[1] for @problems;
	return \%by;
}

my %string_ranges;
my $problems = report(
	settings_problems($settings_md, \%server, $source_test_only, \%string_ranges));
for my $name (sort(keys %server), sort grep { !$server{$_} } keys %$source_test_only)
{
	ok(!$problems->{$name}, "doc/settings.md: $name as pg_settings shows it")
	  or diag(join("\n", @{ $problems->{$name} }));
}
for my $item (sort grep { !$server{$_} && !$source_test_only->{$_} } keys %$problems)
{
	fail("doc/settings.md: $item") or diag(join("\n", @{ $problems->{$item} }));
}

# string settings: what the doc says is accepted is, and just outside not
for my $name (sort keys %string_ranges)
{
	my $r = $string_ranges{$name};
	my $try = sub {
		my ($value) = @_;
		my ($ret) = $node->psql('postgres', "ALTER SYSTEM SET $name = '$value'");
		$node->safe_psql('postgres', "ALTER SYSTEM RESET $name");
		return $ret == 0;
	};
	ok($try->($_), "$name accepts '$_', as documented") for @{ $r->{words} };
	next unless defined $r->{from};
	ok($try->($r->{from}), "$name accepts $r->{from}, the documented minimum");
	ok($try->($r->{to}), "$name accepts $r->{to}, the documented maximum");
	ok(!$try->($r->{from} - 0.01), "$name refuses " . ($r->{from} - 0.01));
	ok(!$try->($r->{to} + 0.01), "$name refuses " . ($r->{to} + 0.01));
}

$problems = report(sql_problems($sql_md, \%cat));
for my $item ((sort keys %{ $cat{views} }), (map { "$_()" } sort keys %{ $cat{functions} }))
{
	ok(!$problems->{$item}, "doc/sql.md: $item as the catalog has it")
	  or diag(join("\n", @{ $problems->{$item} }));
}
my %reported = map { $_ => 1 } keys %{ $cat{views} }, map { "$_()" } keys %{ $cat{functions} };
for my $item (sort grep { !$reported{$_} } keys %$problems)
{
	fail("doc/sql.md: $item") or diag(join("\n", @{ $problems->{$item} }));
}

# ---------------------------------------------------------------------------
# The checkers catch a broken doc
# ---------------------------------------------------------------------------

sub broken
{
	my ($text, $from, $to) = @_;
	my $n = ($text =~ s/\Q$from\E/$to/);
	return $n ? $text : undef;
}

my @settings_breaks = (
	[ 'a wrong default', '| `bgw_jit.delay` | integer | `200` |', '| `bgw_jit.delay` | integer | `201` |' ],
	[ 'a wrong unit', '| `bgw_jit.delay` | integer | `200` | ms |', '| `bgw_jit.delay` | integer | `200` | s |' ],
	[ 'a wrong maximum', '`-1` to `256`', '`-1` to `255`' ],
	[ 'a wrong context', '| `0` to `1000000` | postmaster |', '| `0` to `1000000` | sighup |' ],
	[ 'a missing enum value', '`jit`, `lap`, `jit+all`', '`jit`, `lap`' ],
	[ 'a setting left out', "| `bgw_jit.smoothing_samples` | integer | `16` | – | `1` to `1000` | sighup |\n", '' ],
	[ 'a setting that does not exist', "| `bgw_jit.delay` |", "| `bgw_jit.nonesuch` | bool | `on` | – | `on`, `off` | sighup |\n| `bgw_jit.delay` |" ],
	[ 'a setting without its section', "## `bgw_jit.delay`\n", "## bgw_jit.delay\n" ],
	[ 'the test-only setting among the others', "## Test builds only\n", "## More settings\n" ]);
# A break is caught when it adds a problem to those of the doc as it is
# (none, if the tests above passed).
sub new_problems
{
	my ($before, @after) = @_;
	my %seen = map { ("$_->[0]: $_->[1]" => 1) } @$before;
	return grep { !$seen{$_} } map { "$_->[0]: $_->[1]" } @after;
}

my @settings_as_is = settings_problems($settings_md, \%server, $source_test_only);
for my $b (@settings_breaks)
{
	my ($what, $from, $to) = @$b;
	my $text = broken($settings_md, $from, $to);
	if (!defined $text)
	{
		fail("doc/settings.md with $what: '$from' not found to break");
		next;
	}
	my @p = new_problems(\@settings_as_is,
		settings_problems($text, \%server, $source_test_only));
	ok(@p > 0, "doc/settings.md with $what is caught")
	  and note(join("\n", map { "  $_" } @p));
}

my @sql_breaks = (
	[ 'a missing column', "| `buf_all_clean` | bigint | Buffers the all-buffers scan of `jit+all` wrote. |\n", '' ],
	[ 'two columns swapped', "| `evicted`, `redirtied` |", "| `redirtied`, `evicted` |" ],
	[ 'a column too many', "| `pid` | integer |", "| `pid2` | integer | x |\n| `pid` | integer |" ],
	[ 'a wrong column type', "| `cycle` | bigint | Cycle number", "| `cycle` | integer | Cycle number" ],
	[ 'a view left out', "### `bgw_jit_advice`\n", "### bgw_jit_advice\n" ],
	[ 'a wrong function default', 'start_margin float8 DEFAULT 1.5', 'start_margin float8 DEFAULT 2' ],
	[ 'a function argument left out', "                     start_backend_writes bigint DEFAULT NULL)", ')' ],
	[ 'a wrong result column', 'write_budget integer,', 'write_budget bigint,' ],
	[ 'a wrong exception', 'but `cleaner_pct` and `redirtied_pct`, which', 'but `cleaner_pct`, which' ],
	[ 'another version', 'extension version 1.', 'extension version 0.' ]);
my @sql_as_is = sql_problems($sql_md, \%cat);
for my $b (@sql_breaks)
{
	my ($what, $from, $to) = @$b;
	my $text = broken($sql_md, $from, $to);
	if (!defined $text)
	{
		fail("doc/sql.md with $what: '$from' not found to break");
		next;
	}
	my @p = new_problems(\@sql_as_is, sql_problems($text, \%cat));
	ok(@p > 0, "doc/sql.md with $what is caught")
	  and note(join("\n", map { "  $_" } @p));
}

$node->stop;
done_testing();
