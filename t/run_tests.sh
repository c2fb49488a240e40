#!/usr/bin/env bash
# t/run_tests.sh - the whole bgw_jit test suite on a fresh Debian 12 box.
#
# Installs the packages it needs, builds with warnings as errors (the
# production build, as a check, and the test build with fault injection),
# installs the test build into a staging directory only the test servers
# load from, then runs the pg_regress suite and the TAP tests (each on
# throw-away clusters of its own) as an unprivileged account.  Nothing is
# installed into the system's PostgreSQL, so an interrupted run leaves
# nothing behind there.
# PG_MAJOR=17 (or 18, 19) runs it all against that version instead, in a
# Debian root made on first use (bench/pgroot.sh); default 15.
set -euo pipefail

. "$(dirname "$0")/../bench/pgroot.sh"
# PG_MAJOR=17: t/019_pg_upgrade.pl upgrades from this machine's 15 (no
# Debian suite has 15 and 17).  bgw_jit is built for 15 here, and 15's
# server, with the few libraries of Debian 12's it needs that trixie lacks
# (ICU 72, OpenLDAP 2.5, libunistring 2), is bound into the 17 root
# read-only, the libraries found by t/019 alone (LD_LIBRARY_PATH).
# bench/run --slow-device makes and removes a throttled device on the
# host (t/slow_device_tests.sh, as root): with the whole suite on 15, and
# on 17, whose run goes through its root.
slowdev_status=0
if [ -z "${BGW_JIT_IN_ROOT:-}" ] && [ -z "${PROVE_TESTS:-}" ] &&
	[ -z "${BGW_JIT_UPGRADE_FROM+set}" ] && [ "$(id -u)" -eq 0 ] &&
	{ [ "${PG_MAJOR:-15}" = 15 ] || [ "${PG_MAJOR:-15}" = 17 ]; }; then
	echo "== bench/run --slow-device (t/slow_device_tests.sh)"
	PG_MAJOR=${PG_MAJOR:-15} bash "$(dirname "$0")/slow_device_tests.sh" ||
		slowdev_status=1
fi
pg15=/usr/lib/postgresql/15
if [ "${PG_MAJOR:-15}" = 17 ] && [ -z "${BGW_JIT_IN_ROOT:-}" ] &&
	[ -z "${BGW_JIT_UPGRADE_FROM+set}" ]; then
	# (whichever version ran first: 15's server and headers from apt)
	(. "$(dirname "$0")/../bench/setup.sh" &&
		bgw_jit_require_packages postgresql-15 postgresql-server-dev-15) ||
		echo "== no PostgreSQL 15 server and headers: t/019_pg_upgrade.pl will skip"
fi
if [ "${PG_MAJOR:-15}" = 17 ] && [ -z "${BGW_JIT_IN_ROOT:-}" ] &&
	[ -z "${BGW_JIT_UPGRADE_FROM+set}" ] && [ -x $pg15/bin/pg_config ] &&
	[ -d /usr/include/postgresql/15/server ]; then
	from15=$(mktemp -d /tmp/bgw_jit_from15.XXXXXX)
	chmod 755 "$from15"
	rc=0
	(
		set -e
		PG_MAJOR=15 PG_BINDIR=$pg15/bin PG_CONFIG=$pg15/bin/pg_config
		. "$(dirname "$0")/../bench/setup.sh"
		echo "== build for PostgreSQL 15 (t/019's old cluster), staged in $from15/old/stage"
		bgw_jit_build_stage "$from15/old"
		mkdir "$from15/lib"
		for bin in postgres pg_ctl initdb pg_controldata pg_resetwal; do
			ldd "$pg15/bin/$bin"
		done | awk '$3 ~ /^\// && $1 ~ /^lib(icu[a-z0-9]*|ldap-2\.5|lber-2\.5|unistring)\.so/ { print $3 }' |
			sort -u | xargs -r cp -L -t "$from15/lib"
	) && (
		export BGW_JIT_UPGRADE_FROM=15 BGW_JIT_UPGRADE_FROM_DIR=$from15
		bgw_jit_pgroot_run --bind "$from15:$from15:ro" --bind "$pg15:$pg15:ro" \
			--bind "/usr/share/postgresql/15:/usr/share/postgresql/15:ro" "$0" "$@"
	) || rc=$?
	rm -rf "$from15"
	[ $slowdev_status = 0 ] || rc=1
	exit $rc
fi
if bgw_jit_pgroot_wanted; then
	rc=0
	(bgw_jit_pgroot_run "$0" "$@") || rc=$?
	[ $slowdev_status = 0 ] || rc=1
	exit $rc
fi
. "$(dirname "$0")/../bench/setup.sh"

# (prometheus-postgres-exporter: t/012 scrapes it; python3 and gnuplot-nox:
# t/013 runs bench/plot-history; strace: t/014, 020, 021, 022 and 029
# trace the worker's system calls)
bgw_jit_require_packages postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
	libipc-run-perl make gcc prometheus-postgres-exporter python3 gnuplot-nox \
	strace
echo "== PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //')"

# t/019_pg_upgrade.pl upgrades to PG_MAJOR from an older major version
# where apt has both servers: in the 19 root (sid and experimental), 18.
# (trixie has only 17, and sid no 17.)  BGW_JIT_UPGRADE_FROM names another;
# empty: none, and the test skips.
case $PG_MAJOR in
19) upgrade_from=18 ;;
*) upgrade_from= ;;
esac
upgrade_from=${BGW_JIT_UPGRADE_FROM-$upgrade_from}
if [ -n "${BGW_JIT_UPGRADE_FROM_DIR:-}" ]; then
	: # built outside the root, see the top
elif [ -n "$upgrade_from" ] && ! bgw_jit_require_other_server "$upgrade_from"; then
	echo "== no PostgreSQL $upgrade_from to upgrade from: t/019_pg_upgrade.pl skips"
	upgrade_from=
fi

work=$(mktemp -d /tmp/bgw_jit_test.XXXXXX)
chmod 755 "$work"
keep=${BGW_JIT_KEEP:-0}
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== production build (warnings are errors), in $work/prod"
bgw_jit_build "$work/prod"
echo "== test build with fault injection, staged in $work/test/stage"
bgw_jit_build_stage "$work/test" FAULT_INJECTION=1
upgrade_env=()
if [ -n "${BGW_JIT_UPGRADE_FROM_DIR:-}" ]; then
	upgrade_env=(BGW_JIT_UPGRADE_FROM_INSTALL="/usr/lib/postgresql/$upgrade_from"
		BGW_JIT_UPGRADE_FROM_CONF="$BGW_JIT_UPGRADE_FROM_DIR/old/stage.conf"
		BGW_JIT_UPGRADE_FROM_LIBS="$BGW_JIT_UPGRADE_FROM_DIR/lib")
elif [ -n "$upgrade_from" ]; then
	# the old cluster's bgw_jit: built for that server, staged apart
	echo "== build for PostgreSQL $upgrade_from (t/019's old cluster), staged in $work/old/stage"
	(
		PG_BINDIR=/usr/lib/postgresql/$upgrade_from/bin
		PG_CONFIG=$PG_BINDIR/pg_config
		bgw_jit_build_stage "$work/old"
	)
	upgrade_env=(BGW_JIT_UPGRADE_FROM_INSTALL="/usr/lib/postgresql/$upgrade_from"
		BGW_JIT_UPGRADE_FROM_CONF="$work/old/stage.conf")
fi

status=0
echo "== pg_regress and TAP tests"
# TEMP_INSTANCE=1: pg_regress on a server of its own, not the running one
# that a plain "make installcheck" uses; TAP_TESTS=1: the TAP tests after
# it.  TEMP_CONFIG: appended to every test server's postgresql.conf (by the
# Makefile for pg_regress, by PostgreSQL::Test::Cluster for TAP).
# PROVE_FLAGS=--timer: each TAP file's time in the output; -j: TAP files
# run side by side (BGW_JIT_PROVE_JOBS, default 2: most of a file's time
# is spent waiting for a server, a load or the worker, and each file has
# clusters, ports and directories of its own).
prove_jobs=${BGW_JIT_PROVE_JOBS:-2}
# The whole suite starts with the files that take longest (about a minute
# each, CI 2026-12-07), so that no long file is left to run alone at the
# end while the other job slot idles; the rest in name order.
prove_tests=${PROVE_TESTS:-}
if [ -z "$prove_tests" ]; then
	slow_first="t/024_columns.pl t/008_soak.pl t/013_advice.pl t/018_bounded.pl
		t/030_relfilenode_reuse.pl t/006_drop_under_load.pl t/021_settings.pl"
	prove_tests=$(
		cd "$(dirname "$0")/.."
		for f in $slow_first; do [ -f "$f" ] && echo "$f"; done
		for f in t/[0-9]*.pl; do
			case " $(echo $slow_first) " in *" $f "*) ;; *) echo "$f" ;; esac
		done
	)
	prove_tests=$(echo $prove_tests)
fi
as_server_user env TEMP_CONFIG="$BGW_JIT_STAGE_CONF" ${upgrade_env[@]+"${upgrade_env[@]}"} \
	make -C "$work/test/src" PG_CONFIG="$PG_CONFIG" installcheck \
	TEMP_INSTANCE=1 TAP_TESTS=1 "PROVE_FLAGS=--timer -j$prove_jobs" \
	PROVE_TESTS="$prove_tests" || status=$?

# PostgreSQL's own recovery tests 032-034 with bgw_jit preloaded, where
# apt has the server's source package (bookworm: 15's only; not when
# PROVE_TESTS picks TAP files)
if [ "$PG_MAJOR" = 15 ] && [ -z "${PROVE_TESTS:-}" ]; then
	bash "$(dirname "$0")/core_recovery_tests.sh" "$work" "$BGW_JIT_STAGE_CONF" || status=$?
fi

[ $slowdev_status = 0 ] || status=1
if [ $status -ne 0 ]; then
	keep=1
	# (in a Debian root, $work is below the root's directory)
	echo "== failed; logs kept in ${BGW_JIT_HOST_ROOT:-}$work" >&2
	for f in "$work"/test/src/regression.diffs "$work"/test/src/tmp_check/log/regress_log_*; do
		[ -f "$f" ] || continue
		echo "---- $f (tail)" >&2
		tail -n 60 "$f" >&2
	done
fi
exit $status
