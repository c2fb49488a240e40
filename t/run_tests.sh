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
bgw_jit_pgroot_run "$0" "$@"
. "$(dirname "$0")/../bench/setup.sh"

# (prometheus-postgres-exporter: t/012 scrapes it; python3 and gnuplot-nox:
# t/013 runs bench/plot-history)
bgw_jit_require_packages postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
	libipc-run-perl make gcc prometheus-postgres-exporter python3 gnuplot-nox
echo "== PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //')"

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

status=0
echo "== pg_regress and TAP tests"
# TEMP_CONFIG: appended to every test server's postgresql.conf (by the
# Makefile for pg_regress, by PostgreSQL::Test::Cluster for TAP).
as_server_user env TEMP_CONFIG="$BGW_JIT_STAGE_CONF" \
	make -C "$work/test/src" PG_CONFIG="$PG_CONFIG" installcheck \
	${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"} || status=$?

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
