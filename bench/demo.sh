#!/usr/bin/env bash
# bench/demo.sh - watch bgw_jit clean under load, next to the built-in
# background writer, on a throw-away cluster.
#
# Builds the extension and stages it where only the demo's server loads
# it (nothing is installed system-wide), creates a cluster with the
# server's default buffer pool, 128 MB, and a ~400 MB pgbench database
# (scale 25), then runs the update-only
# workload twice: once with the built-in writer's defaults, once with
# bgw_jit's defaults (switched by reload, no restart), each measured as
# bench/run measures: after a VACUUM and a CHECKPOINT (both phases start
# from a clean pool and the same table) and 5 s of the same load
# unmeasured (the cleaner just switched on starts from the clock hand).
# Prints both side by side.
# Usage: bench/demo.sh [seconds per phase, default 20] [clients, default 2]
#                      [shared_buffers, default 128MB]
# PG_MAJOR=17 (or 18, 19) runs it on that version, in a Debian root made
# on first use (bench/pgroot.sh); default 15.
set -euo pipefail

. "$(dirname "$0")/pgroot.sh"
bgw_jit_pgroot_run "$0" "$@"
. "$(dirname "$0")/setup.sh"

seconds=${1:-20}
clients=${2:-2}
shared_buffers=${3:-128MB}
warmup=5
port=${BGW_JIT_DEMO_PORT:-54329}

bgw_jit_require_packages postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
	make gcc bsdextrautils

work=$(mktemp -d /tmp/bgw_jit_demo.XXXXXX)
chmod 755 "$work"
[ "$(id -u)" -eq 0 ] && chown "$BGW_JIT_USER" "$work"
data=$work/data
stop_server() {
	[ -f "$data/postmaster.pid" ] &&
		as_server_user pg_ctl -D "$data" -m immediate stop >/dev/null 2>&1
	rm -rf "$work"
}
trap stop_server EXIT
trap 'exit 130' INT TERM

echo "== building bgw_jit (staged in $work/build/stage)"
bgw_jit_build_stage "$work/build"

echo "== creating a throw-away cluster in $data"
as_server_user initdb -k -D "$data" >/dev/null
cat >>"$data/postgresql.conf" <<EOC
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'bgw_jit'
shared_buffers = '$shared_buffers'
synchronous_commit = off
max_wal_size = 8GB
checkpoint_timeout = 1h
autovacuum = off
# bgw_jit with its defaults: nothing tuned
EOC
cat "$BGW_JIT_STAGE_CONF" >>"$data/postgresql.conf"
[ "$(id -u)" -eq 0 ] && chown "$BGW_JIT_USER" "$data/postgresql.conf"
as_server_user pg_ctl -D "$data" -l "$work/server.log" -w start >/dev/null

psql_() { as_server_user psql -X -q -h "$work" -p "$port" -d postgres "$@"; }
vnum=$(psql_ -At -c 'SHOW server_version_num')
echo "== PostgreSQL $(psql_ -At -c 'SHOW server_version')"
core_backend=$(bgw_jit_core_backend_writes_sql "$vnum")

echo "== loading pgbench scale 25 (~400 MB, buffer pool $(psql_ -At -c 'SHOW shared_buffers'))"
as_server_user pgbench -h "$work" -p "$port" -i -q -s 25 postgres 2>&1 | tail -1
psql_ -c 'CREATE EXTENSION bgw_jit'

cat >"$work/update.sql" <<'EOS'
\set aid random(1, 100000 * :scale)
\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
EOS
chmod 644 "$work/update.sql"

# One phase: settings by ALTER SYSTEM + reload, VACUUM, CHECKPOINT, reset
# counters, the load unmeasured for $warmup s, settle the backend write
# counts and read the counters, run the load with a line of bgw_jit_stats
# every 5 s, settle and read again, record the difference.
phase() {
	local name=$1 lru_maxpages=$2 enabled=$3
	echo
	echo "== $name: bgwriter_lru_maxpages = $lru_maxpages, bgw_jit.enabled = $enabled"
	psql_ -c "ALTER SYSTEM SET bgwriter_lru_maxpages = $lru_maxpages" \
		-c "ALTER SYSTEM SET bgw_jit.enabled = $enabled" \
		-c 'SELECT pg_reload_conf()' >/dev/null
	sleep 1
	psql_ -c 'VACUUM' -c 'CHECKPOINT'
	psql_ -c "SELECT $(bgw_jit_core_reset_sql "$vnum"), bgw_jit_reset()" >/dev/null
	as_server_user pgbench -h "$work" -p "$port" -n -f "$work/update.sql" \
		-s 25 -c "$clients" -j "$clients" -T "$warmup" postgres >/dev/null 2>&1
	bgw_jit_settle_stats "$vnum" psql_
	snapshot start
	as_server_user pgbench -h "$work" -p "$port" -n -f "$work/update.sql" \
		-s 25 -c "$clients" -j "$clients" -T "$seconds" postgres \
		>"$work/$name.pgbench" 2>&1 &
	local bench=$!
	while kill -0 $bench 2>/dev/null; do
		sleep 5
		psql_ -At -F ' ' -c "SELECT to_char(now(), 'HH24:MI:SS'),
			'bgw_jit wrote', buf_clean, 'allocs', buf_alloc,
			'smoothed_alloc', round(smoothed_alloc::numeric, 1),
			'estimate', upcoming_alloc_est FROM bgw_jit_stats" || true
	done
	wait $bench
	grep -E '^tps' "$work/$name.pgbench"
	bgw_jit_settle_stats "$vnum" psql_
	snapshot end
	psql_ -At -F '|' -c "SELECT '$name',
		(regexp_match(\$\$$(grep -E '^tps' "$work/$name.pgbench")\$\$,
			'tps = ([0-9.]+)'))[1]::numeric(10,0),
		e.b_clean - s.b_clean, e.b_backend - s.b_backend, e.b_alloc - s.b_alloc,
		round(100.0 * (e.b_clean - s.b_clean) /
			nullif(e.b_clean - s.b_clean + e.b_backend - s.b_backend, 0), 2),
		e.j_clean - s.j_clean, e.j_backend - s.j_backend, e.j_alloc - s.j_alloc,
		round(100.0 * (e.j_clean - s.j_clean) /
			nullif(e.j_clean - s.j_clean + e.j_backend - s.j_backend, 0), 2)
		FROM demo_counts s, demo_counts e
		WHERE s.point = 'start' AND e.point = 'end'" >>"$work/summary"
}

# The counters now, as 'start' or 'end' of the measured run.  The run is
# measured as the difference of two readings, each after the counts have
# settled, rather than from a reset right before it: on 15 the backends'
# count reaches the statistics only when the checkpointer absorbs its
# queue, and the worker's own writes still queued at a reset would be
# counted after it as others'.  (The resets above come right after a
# CHECKPOINT, which absorbs the queue, so that the totals bgw_jit_stats
# shows at the end are close too.)
snapshot() {
	psql_ -c "DELETE FROM demo_counts WHERE point = '$1'" \
		-c "INSERT INTO demo_counts SELECT '$1',
		b.buffers_clean, b.backend, b.buffers_alloc,
		s.buf_clean, s.buf_backend, s.buf_alloc
		FROM (SELECT *, $core_backend AS backend FROM pg_stat_bgwriter) b,
			bgw_jit_stats s" >/dev/null
}
psql_ -c 'CREATE TABLE demo_counts (point text, b_clean bigint,
	b_backend bigint, b_alloc bigint, j_clean bigint, j_backend bigint,
	j_alloc bigint)'

phase builtin 100 off
phase bgw_jit 0 on

echo
echo "== side by side ($clients clients, ${seconds}s each; figures over each measured run)"
{
	echo "phase|tps|pg_stat_bgwriter: buffers_clean|backend writes*|buffers_alloc|cleaner_pct|bgw_jit_stats: buf_clean|buf_backend|buf_alloc|cleaner_pct"
	cat "$work/summary"
} | column -t -s '|'
if [ "$vnum" -ge 160000 ]; then
	echo "* pg_stat_io: normal-context relation writes by all but the checkpointer and the bgwriter (bgw_jit's included)"
else
	echo "* pg_stat_bgwriter.buffers_backend (bgw_jit's writes included)"
fi
echo
echo "== bgw_jit_stats after the bgw_jit phase"
psql_ -x -c 'SELECT * FROM bgw_jit_stats'
