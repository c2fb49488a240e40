#!/usr/bin/env bash
# t/package_tests.sh - bgw_jit as a DBA gets it: the Debian package and,
# on 15, the PGXN zip, each built, installed into the server's own
# directories, tried on a throw-away cluster and removed without a trace.
#
# For PG_MAJOR (default 15, this machine's packages; 17, 18 or 19 in a
# Debian root made on first use, see bench/pgroot.sh), as root:
# - META.json: the PGXN Meta Spec's required keys, and one version in
#   META.json, bgw_jit.control and debian/changelog;
# - builds postgresql-$PG_MAJOR-bgw-jit from a copy of the source, for
#   that major only (PG_SUPPORTED_VERSIONS), with dpkg-buildpackage -us -uc
#   -b as the server account; the build runs the pg_regress suite against
#   the built package (pg_buildext installcheck).  No line of the build's
#   output may warn, and lintian may report no error and no warning;
# - installs it with apt-get, starts a throw-away cluster that preloads the
#   library, CREATE EXTENSION bgw_jit and a 10 s pgbench update load (scale
#   5, shared_buffers 16MB, 2 clients, bgwriter_lru_maxpages = 0), and
#   checks that the worker cleaned (bgw_jit_stats.buf_clean > 0); then
#   two TAP files (not preloaded, start-up and shutdown) on servers that
#   load the installed library (the pg_regress suite ran in the build);
# - stops the server, removes the package (apt-get remove) and checks that
#   none of its files is left;
# - on 15, from a git checkout: "make dist", pgxn install from the zip,
#   the server checks but the load (the package showed the same library
#   cleaning), with pgxn check, which runs make installcheck; pgxn
#   uninstall, and nothing left.
# It refuses to start where bgw_jit is installed in the server's
# directories already (a package, or "make install"): it would remove it,
# or take its files for leftovers.
# Prints "N passed, N failed" last; exits non-zero if any check failed.
# BGW_JIT_KEEP=1 keeps the work directory (kept anyway after a failure).
set -euo pipefail

. "$(dirname "$0")/../bench/pgroot.sh"
bgw_jit_pgroot_run "$0" "$@"
. "$(dirname "$0")/../bench/setup.sh"

[ "$(id -u)" -eq 0 ] || {
	echo "run as root: the test installs and removes packages" >&2
	exit 2
}

pkg=postgresql-$PG_MAJOR-bgw-jit
port=${BGW_JIT_PKG_PORT:-54332}
# PGXN: on 15, where the source is a git checkout (make dist archives HEAD)
pgxn=0
if [ "$PG_MAJOR" = 15 ] && git -C "$BGW_JIT_SRC" rev-parse --verify -q HEAD >/dev/null 2>&1; then
	pgxn=1
fi

# (debhelper, postgresql-server-dev-all and postgresql-all: the package's
# Build-Depends; lintian checks the result)
bgw_jit_require_packages postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
	postgresql-server-dev-all postgresql-all debhelper build-essential \
	lintian make gcc libipc-run-perl
if [ $pgxn = 1 ]; then
	bgw_jit_require_packages pgxnclient unzip
else
	echo "== no PGXN checks: they run on 15, from a git checkout"
fi
echo "== PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //')"
pkglibdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)

work=$(mktemp -d /tmp/bgw_jit_pkg.XXXXXX)
chmod 755 "$work"
chown "$BGW_JIT_USER" "$work"
data=$work/data
keep=${BGW_JIT_KEEP:-0}
passed=0 failed=0
pkg_installed=0 pgxn_installed=0 dist=

pass() {
	passed=$((passed + 1))
	echo "ok - $*"
}
fail() {
	failed=$((failed + 1))
	echo "not ok - $*" >&2
}
# check DESCRIPTION COMMAND...: one check, passed if COMMAND succeeds.
check() {
	local what=$1
	shift
	if "$@"; then
		pass "$what"
	else
		fail "$what"
		return 1
	fi
}
# A check whose failure leaves nothing to test after it.
abort() {
	echo "== stopping here: nothing after it can be tested" >&2
	exit 1
}

# bgw_jit's files in the server's directories (and the package's doc
# directory), one path a line.
installed_files() {
	{
		find "$pkglibdir" "$sharedir/extension" -name '*bgw_jit*'
		[ ! -e "/usr/share/doc/$pkg" ] || echo "/usr/share/doc/$pkg"
	} | sort
}

stop_server() {
	if [ -f "$data/postmaster.pid" ]; then
		as_server_user pg_ctl -D "$data" -m fast -w stop >/dev/null ||
			as_server_user pg_ctl -D "$data" -m immediate stop >/dev/null 2>&1 || true
	fi
	rm -rf "$data"
}

# However the run ends: stop the server, take away what it installed,
# report.
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	stop_server
	if [ $pkg_installed = 1 ] &&
		[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" = installed ]; then
		echo "== removing $pkg" >&2
		DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "$pkg" >/dev/null || true
	fi
	if [ $pgxn_installed = 1 ] && [ -n "$(installed_files)" ]; then
		echo "== pgxn uninstall" >&2
		(cd "$work/dist" && pgxn uninstall --pg_config "$PG_CONFIG" "./$dist.zip" >/dev/null) || true
	fi
	[ $failed -gt 0 ] && keep=1
	if [ "$keep" = 1 ]; then
		# (in a Debian root, $work is below the root's directory)
		echo "== logs kept in ${BGW_JIT_HOST_ROOT:-}$work" >&2
	else
		rm -rf "$work"
	fi
	[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
	echo "$passed passed, $failed failed"
	[ $failed -eq 0 ] || exit 1
	exit 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The output of a command, kept in $work/NAME.log; its tail on failure.
logged() {
	local name=$1
	shift
	if "$@" >"$work/$name.log" 2>&1; then
		return 0
	fi
	echo "---- $work/$name.log (tail)" >&2
	tail -n 40 "$work/$name.log" >&2
	return 1
}

# Nothing of bgw_jit in the server's directories yet.
nothing_installed() {
	local files
	if [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" = installed ]; then
		echo "$pkg is installed already: remove it first" >&2
		return 1
	fi
	files=$(installed_files)
	if [ -n "$files" ]; then
		echo "bgw_jit is installed already (make install?); remove these first:" >&2
		echo "$files" | sed 's/^/  /' >&2
		return 1
	fi
}
check "no bgw_jit in PostgreSQL $PG_MAJOR's directories before the test" \
	nothing_installed || abort

# META.json: the keys the PGXN Meta Spec 1.0.0 requires, a semantic
# version, the files it names, and the version everywhere: META.json's
# (and its extension's) is bgw_jit.control's default_version x.y with a
# patch level, x.y.z (a fix to the library alone raises z), and debian/
# changelog's.
meta_ok() {
	local control_version changelog_version
	control_version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$BGW_JIT_SRC/bgw_jit.control")
	changelog_version=$(cd "$BGW_JIT_SRC" && dpkg-parsechangelog -S Version)
	perl -MJSON::PP -e '
		my ($dir, $control, $changelog) = @ARGV;
		open my $f, "<", "$dir/META.json" or die "META.json: $!\n";
		my $m = decode_json(do { local $/; <$f> });
		my @bad;
		for my $key (qw(name abstract version maintainer license provides meta-spec)) {
			push @bad, "no $key" unless defined $m->{$key};
		}
		my $semver = qr/^\d+\.\d+\.\d+$/;
		my $v = $m->{version} // "";
		push @bad, "version $v is not x.y.z" unless $v =~ $semver;
		push @bad, "version $v, bgw_jit.control default_version $control"
		  unless $v =~ /^\Q$control\E\.\d+$/;
		push @bad, "version $v, debian/changelog $changelog" unless $v eq $changelog;
		push @bad, "meta-spec version is not 1.0.0"
		  unless ($m->{"meta-spec"}{version} // "") eq "1.0.0";
		push @bad, "name is not bgw_jit" unless ($m->{name} // "") eq "bgw_jit";
		my $e = $m->{provides}{bgw_jit};
		if (!$e) {
			push @bad, "provides has no bgw_jit";
		} else {
			push @bad, "provides.bgw_jit.version $e->{version}, not $v"
			  unless ($e->{version} // "") eq $v;
			for my $k (qw(file docfile)) {
				push @bad, "provides.bgw_jit.$k: no such file"
				  unless defined $e->{$k} && -f "$dir/$e->{$k}";
			}
			push @bad, "provides.bgw_jit.file is not bgw_jit--$control.sql"
			  unless ($e->{file} // "") eq "bgw_jit--$control.sql";
		}
		print STDERR "META.json: $_\n" for @bad;
		exit(@bad ? 1 : 0);
	' "$BGW_JIT_SRC" "$control_version" "$changelog_version"
}
check "META.json: the Meta Spec's keys; one version in META.json, bgw_jit.control and debian/changelog" \
	meta_ok || true

# ---- the Debian package

echo "== building $pkg in $work/build"
build=$work/build
mkdir -p "$build"
chown "$BGW_JIT_USER" "$build"
bgw_jit_copy_source "$build/src"
version=$(cd "$build/src" && dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
deb=$build/${pkg}_${version}_$arch.deb
# debian/control for this major only (as on a release whose only
# supported major it is), then the build, as the server account;
# DEB_BUILD_OPTIONS=nocheck in the environment would skip its tests.
# (PGPORT: the build's test server, pg_virtualenv's, listens on localhost
# there rather than on the first port free of clusters it knows, 5432 in
# a root.)
t0=$(date +%s)
check "dpkg-buildpackage -us -uc -b builds $(basename "$deb")" \
	logged build as_server_user env -u DEB_BUILD_OPTIONS \
	PG_SUPPORTED_VERSIONS="$PG_MAJOR" PGPORT=$((port + 1)) sh -c \
	'cd "$1" && pg_buildext updatecontrol && dpkg-buildpackage -us -uc -b' \
	sh "$build/src" || abort
echo "   ($(($(date +%s) - t0)) s)"
check "the package build ran the pg_regress suite against the built package" \
	grep -Eq '^#? All [0-9]+ tests passed' "$work/build.log" || true
build_warnings() {
	if grep -in 'warn' "$work/build.log" >&2; then
		return 1
	fi
}
check "no warning in the build's output" build_warnings || true
check "the package is $(basename "$deb") (one binary package, this major's)" \
	test -f "$deb" || abort
ls -l "$build"/*.deb | sed 's/^/   /'
lint() {
	local out
	out=$(cd "$build" && as_server_user lintian "bgw-jit_${version}_$arch.changes" 2>&1) || {
		echo "$out" >&2
		return 1
	}
	[ -z "$out" ] || echo "$out" | sed 's/^/   /'
	! echo "$out" | grep -E '^[EW]: ' >/dev/null
}
check "lintian: no error, no warning" lint || true

echo "== installing $pkg"
pkg_installed=1
check "apt-get install ./$(basename "$deb")" logged install \
	env DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" || abort
# (dpkg -L lists the root directory as "/.")
dpkg -L "$pkg" | grep -vx '/\.' | sort >"$work/package-files"
# every file of it in the server's directories (or its doc directory)
in_server_dirs() {
	local p others
	while read -r p; do
		[ -d "$p" ] && continue
		case $p in
		"$pkglibdir"/* | "$sharedir"/extension/* | /usr/share/doc/"$pkg"/*) ;;
		*) others+="$p " ;;
		esac
	done <"$work/package-files"
	if [ -n "${others:-}" ]; then
		echo "outside the server's directories: $others" >&2
		return 1
	fi
	grep -qx "$pkglibdir/bgw_jit.so" "$work/package-files" &&
		grep -qx "$sharedir/extension/bgw_jit.control" "$work/package-files"
}
check "its files are in $pkglibdir and $sharedir/extension" in_server_dirs || true

# A throw-away cluster that preloads the library, started.
start_server() {
	as_server_user initdb -k -A trust -D "$data" >"$work/initdb.log" 2>&1 || {
		cat "$work/initdb.log" >&2
		return 1
	}
	cat >>"$data/postgresql.conf" <<EOC
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'bgw_jit'
bgwriter_lru_maxpages = 0
shared_buffers = 16MB
synchronous_commit = off
max_wal_size = 1GB
autovacuum = off
EOC
	as_server_user pg_ctl -D "$data" -l "$work/server.log" -w start >/dev/null
}
psql_() { as_server_user psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -d postgres "$@"; }

# The library the postmaster mapped is the one in the server's own
# directory (what was installed, not a copy somewhere else).
loaded_from_pkglibdir() {
	local pid libs
	pid=$(head -n 1 "$data/postmaster.pid")
	libs=$(awk '$6 ~ /bgw_jit/ { print $6 }' "/proc/$pid/maps" | sort -u)
	[ "$libs" = "$pkglibdir/bgw_jit.so" ] || {
		echo "the postmaster mapped: ${libs:-no bgw_jit library}" >&2
		return 1
	}
}

# CREATE EXTENSION, the worker, the production build, and the worker
# cleaning under a pgbench update load.
worker_runs() {
	[ "$(psql_ -At -c 'SELECT pid IS NOT NULL FROM bgw_jit_stats')" = t ]
}
production_build() {
	[ "$(psql_ -At -c "SELECT count(*) FROM pg_settings WHERE name = 'bgw_jit.inject_error'")" = 0 ]
}
cleans_under_load() {
	local clean
	cat >"$work/update.sql" <<'EOS'
\set aid random(1, 100000 * :scale)
\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
EOS
	chmod 644 "$work/update.sql"
	logged pgbench-init as_server_user pgbench -h "$work" -p "$port" -i -q -s 5 postgres &&
		logged pgbench as_server_user pgbench -h "$work" -p "$port" -n \
			-f "$work/update.sql" -s 5 -c 2 -j 2 -T 10 postgres || return 1
	grep -E '^(tps|number of transactions actually)' "$work/pgbench.log" | sed 's/^/   /'
	psql_ -At -F ' ' -c "SELECT 'bgw_jit_stats: buf_clean', buf_clean,
		'buf_backend', buf_backend, 'buf_alloc', buf_alloc, 'cleaner_pct',
		cleaner_pct FROM bgw_jit_stats" | sed 's/^/   /'
	clean=$(psql_ -At -c 'SELECT buf_clean FROM bgw_jit_stats')
	[ "${clean:-0}" -gt 0 ]
}
# server_checks LABEL load|noload [INSTALLCHECK-COMMAND...]
server_checks() {
	local label=$1 load=$2
	shift 2
	echo "== $label: a throw-away cluster preloading bgw_jit, in $data"
	check "$label: the server starts with shared_preload_libraries = 'bgw_jit'" \
		start_server || return 1
	check "$label: the postmaster loaded $pkglibdir/bgw_jit.so" loaded_from_pkglibdir || true
	[ $# -eq 0 ] ||
		check "$label: make installcheck against the running server" "$@" || true
	check "$label: CREATE EXTENSION bgw_jit" psql_ -c 'CREATE EXTENSION bgw_jit' || return 1
	check "$label: the worker runs (bgw_jit_stats.pid)" worker_runs || true
	check "$label: the production build (no bgw_jit.inject_error)" production_build || true
	[ "$load" = noload ] ||
		check "$label: pgbench update load, 2 clients 10 s: bgw_jit_stats.buf_clean > 0" \
			cleans_under_load || true
	stop_server
}

# (no installcheck: the build ran the suite against the built package)
server_checks "$pkg" load

# TAP tests against the installed package: servers that load the library
# from the server's own directory (no TEMP_CONFIG, no staged build).  The
# views without the library preloaded, start-up and shutdown: what a
# packaging mistake would break (the worker under load: server_checks).
# The whole TAP suite runs in t/run_tests.sh, against the staged test
# build.
tap_files="t/002_not_preloaded.pl t/025_startup_shutdown.pl"
tap_against_package() {
	# (a copy of the source the server account can write to: tmp_check/)
	rm -rf "$work/check"
	bgw_jit_copy_source "$work/check"
	logged tap-package as_server_user env -u TEMP_CONFIG \
		make -C "$work/check" PG_CONFIG="$PG_CONFIG" installcheck \
		TAP_TESTS=1 REGRESS= PROVE_TESTS="$tap_files" || {
		tail -n 40 "$work"/check/tmp_check/log/regress_log_* 2>/dev/null >&2
		return 1
	}
	grep -E '^(t/|Files=|Result)' "$work/tap-package.log" | sed 's/^/   /'
}
check "$pkg: TAP tests against the installed package ($tap_files)" \
	tap_against_package || true

echo "== removing $pkg"
check "apt-get remove $pkg" logged remove \
	env DEBIAN_FRONTEND=noninteractive apt-get remove -y "$pkg" || abort
check "dpkg: $pkg is not installed (nothing kept, not even its record)" \
	test "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || echo not-installed)" = not-installed || true
# Every path the package had is gone, but directories another package owns.
nothing_left() {
	local p left=()
	while read -r p; do
		[ -e "$p" ] || [ -L "$p" ] || continue
		[ -d "$p" ] && [ ! -L "$p" ] && dpkg-query -S "$p" >/dev/null 2>&1 && continue
		left+=("$p")
	done <"$work/package-files"
	left+=($(installed_files))
	if [ ${#left[@]} -gt 0 ]; then
		echo "left after removal:" >&2
		printf '  %s\n' "${left[@]}" >&2
		return 1
	fi
}
check "no file of the package left ($(wc -l <"$work/package-files") paths of dpkg -L checked)" \
	nothing_left || true
pkg_installed=0

# ---- the PGXN zip (15)

if [ $pgxn = 1 ]; then
	dist=bgw_jit-$(perl -MJSON::PP -e 'local $/; print decode_json(<>)->{version}' "$BGW_JIT_SRC/META.json")
	echo "== PGXN: make dist, $dist.zip"
	mkdir -p "$work/dist"
	check "make dist makes $dist.zip" logged dist \
		make -C "$work/dist" -f "$BGW_JIT_SRC/Makefile" PG_CONFIG="$PG_CONFIG" dist || abort
	zip_ok() {
		local z=$work/dist/$dist.zip f
		ls -l "$z" | sed 's/^/   /'
		unzip -Z1 "$z" >"$work/zip-files"
		if grep -v "^$dist/" "$work/zip-files" >&2; then
			echo "outside $dist/ in the zip" >&2
			return 1
		fi
		for f in META.json Makefile bgw_jit.control bgw_jit--1.4.sql LICENSE \
			expected/bgw_jit.out sql/bgw_jit.sql t/run_tests.sh bench/setup.sh \
			debian/rules doc/install.md; do
			grep -qx "$dist/$f" "$work/zip-files" || {
				echo "no $f in the zip" >&2
				return 1
			}
		done
		! grep "^$dist/\.ci/" "$work/zip-files" >&2
	}
	check "$dist.zip: all under $dist/, with the build and the tests, without .ci/" \
		zip_ok || true
	pgxn_installed=1
	check "pgxn install ./$dist.zip" logged pgxn-install \
		sh -c 'cd "$1" && pgxn install --pg_config "$2" "./$3.zip"' \
		sh "$work/dist" "$PG_CONFIG" "$dist" || abort
	check "pgxn install: bgw_jit.so and bgw_jit.control in the server's directories" \
		test -f "$pkglibdir/bgw_jit.so" -a -f "$sharedir/extension/bgw_jit.control" || true
	pgxn_check() {
		logged pgxn-check sh -c 'cd "$1" && pgxn check --pg_config "$2" \
			-h "$3" -p "$4" -U "$5" "./$6.zip"' \
			sh "$work/dist" "$PG_CONFIG" "$work" "$port" "$BGW_JIT_USER" "$dist" &&
			grep -Eq '^#? All [0-9]+ tests passed' "$work/pgxn-check.log"
	}
	server_checks "PGXN $dist" noload pgxn_check
	check "pgxn uninstall ./$dist.zip" logged pgxn-uninstall \
		sh -c 'cd "$1" && pgxn uninstall --pg_config "$2" "./$3.zip"' \
		sh "$work/dist" "$PG_CONFIG" "$dist" || true
	pgxn_left() {
		local files
		files=$(installed_files)
		[ -z "$files" ] || {
			echo "left after pgxn uninstall:" >&2
			echo "$files" | sed 's/^/  /' >&2
			return 1
		}
	}
	check "no bgw_jit file left after pgxn uninstall" pgxn_left || true
	pgxn_installed=0
fi
