#!/usr/bin/env bash
# t/run_tests.sh - the whole bgw_jit test suite on a fresh Debian 12 box.
#
# Installs what it needs, builds with warnings as errors, installs the
# extension, then runs the pg_regress suite and the TAP tests (each on
# throw-away clusters of its own) as an unprivileged account.
set -euo pipefail

. "$(dirname "$0")/../bench/setup.sh"

bgw_jit_require_packages postgresql-15 postgresql-server-dev-15 \
	libipc-run-perl make gcc

work=$(mktemp -d /tmp/bgw_jit_test.XXXXXX)
chmod 755 "$work"
keep=${BGW_JIT_KEEP:-0}
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

echo "== build (warnings are errors) and install, in $work"
bgw_jit_build_install "$work"

status=0
echo "== pg_regress and TAP tests"
as_server_user make -C "$work" PG_CONFIG="$PG_CONFIG" installcheck \
	${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"} || status=$?

if [ $status -ne 0 ]; then
	keep=1
	echo "== failed; logs kept in $work" >&2
	for f in "$work"/regression.diffs "$work"/tmp_check/log/regress_log_*; do
		[ -f "$f" ] || continue
		echo "---- $f (tail)" >&2
		tail -n 60 "$f" >&2
	done
fi
exit $status
