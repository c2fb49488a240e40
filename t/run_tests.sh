#!/usr/bin/env bash
# t/run_tests.sh - the whole bgw_jit test suite on a fresh Debian 12 box.
#
# Installs what it needs, builds with warnings as errors, installs the
# extension, then runs the pg_regress suite and the TAP tests (each on
# throw-away clusters of its own) as an unprivileged account.
# PG_MAJOR=17 (or 18, 19) runs it all against that version instead, in a
# Debian root made on first use (bench/pgroot.sh); default 15.
set -euo pipefail

. "$(dirname "$0")/../bench/pgroot.sh"
bgw_jit_pgroot_run "$0" "$@"
. "$(dirname "$0")/../bench/setup.sh"

bgw_jit_require_packages postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
	libipc-run-perl make gcc
echo "== PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //')"

work=$(mktemp -d /tmp/bgw_jit_test.XXXXXX)
chmod 755 "$work"
keep=${BGW_JIT_KEEP:-0}
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

echo "== build (warnings are errors), in $work"
# the production build must be warning-free too, not only the test build
bgw_jit_build_install "$work/prod"
echo "== build with fault injection for the tests, and install"
bgw_jit_build_install "$work/test" FAULT_INJECTION=1

status=0
echo "== pg_regress and TAP tests"
as_server_user make -C "$work/test" PG_CONFIG="$PG_CONFIG" installcheck \
	${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"} || status=$?

echo "== reinstall the production build"
make -C "$work/prod" -s PG_CONFIG="$PG_CONFIG" install >/dev/null

if [ $status -ne 0 ]; then
	keep=1
	echo "== failed; logs kept in $work" >&2
	for f in "$work"/test/regression.diffs "$work"/test/tmp_check/log/regress_log_*; do
		[ -f "$f" ] || continue
		echo "---- $f (tail)" >&2
		tail -n 60 "$f" >&2
	done
fi
exit $status
