#!/usr/bin/env bash
# t/slow_device_tests.sh - bench/run --slow-device, as root, on the host:
# on 15 a short run (nobgw, 1 client, 3 s) on the throttled device, then
# on every version a run that fails once the device is made (a setting the
# server refuses; from 17 inside the version's root, which the device is
# bound into), and the same for bench/latency-diag --slow-device.
# During the first, the kernel must show the device's write throttle and
# the cluster's files on it; after each, nothing may be left behind: no
# loop device over a file of the run's, no mount, no throttle line for the
# device, no dirty limit on it, no directory.  (The refusals, without root
# and for a malformed size, are t/033_direct_io.pl's, as the server
# account.)  PG_MAJOR as for bench/run; prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || {
	echo "run as root" >&2
	exit 2
}
throttle=/sys/fs/cgroup/blkio/blkio.throttle
passed=0 failed=0
ok() {
	if [ "$1" = 0 ]; then
		passed=$((passed + 1))
		echo "ok - $2"
	else
		failed=$((failed + 1))
		echo "not ok - $2" >&2
	fi
}

# The loop devices whose backing file is one of the runs' (MAJ:MIN lines).
run_loops() {
	local b
	for b in /sys/block/loop*/loop/backing_file; do
		[ -r "$b" ] || continue
		case $(cat "$b") in /var/tmp/bgw_jit_slowdev.*)
			cat "${b%/loop/backing_file}/dev" ;;
		esac
	done
}

# Nothing of a run left: $1 is the device's MAJ:MIN as seen during it.
nothing_left() {
	local what=$1 majmin=$2
	ok "$([ -z "$(run_loops)" ]; echo $?)" "$what: no loop device over a run's file"
	ok "$(! grep -q bgw_jit_slowdev /proc/mounts; echo $?)" "$what: nothing mounted"
	ok "$(! ls -d /var/tmp/bgw_jit_slowdev.* >/dev/null 2>&1; echo $?)" \
		"$what: no directory left in /var/tmp"
	if [ -n "$majmin" ]; then
		ok "$(! grep -qs "^$majmin " "$throttle.write_bps_device" \
			"$throttle.write_iops_device"; echo $?)" "$what: no throttle on $majmin"
		ok "$([ "$(cat "/sys/class/bdi/$majmin/strict_limit")" = 0 ]; echo $?)" \
			"$what: no strict dirty limit on $majmin"
	fi
}

[ -z "$(run_loops)" ] || {
	echo "a run's loop device exists already: $(run_loops)" >&2
	exit 2
}
out=$(mktemp -d /tmp/bgw_jit_slowdev_test.XXXXXX)
trap 'rm -rf "$out"' EXIT

# --- a short run (on 15: the same code runs the device for every version) ---
majmin=
if [ "${PG_MAJOR:-15}" = 15 ]; then
	bash bench/run --slow-device 30M,2000 --configs nobgw --clients 1 \
		--duration 3 --rounds 1 --warmup 0 --scale 1 --shared-buffers 16MB \
		--out "$out/run" >"$out/run.log" 2>&1 &
	pid=$!
	# what the kernel shows while the run goes on
	majmin= seen_throttle=1 seen_files=1
	for _ in $(seq 600); do
		majmin=$(run_loops | head -n 1)
		if [ -n "$majmin" ] && [ $seen_throttle != 0 ]; then
			grep -qs "^$majmin 31457280$" "$throttle.write_bps_device" &&
				grep -qs "^$majmin 2000$" "$throttle.write_iops_device" && seen_throttle=0
		fi
		if [ -n "$majmin" ] && [ $seen_files != 0 ]; then
			# (the mount's device, and the cluster's control file on it)
			mnt=$(awk -v d="/dev/loop${majmin#*:}" '$1 == d { print $2 }' /proc/mounts)
			[ -n "$mnt" ] && [ -f "$mnt/data/global/pg_control" ] && seen_files=0
		fi
		[ $seen_throttle = 0 ] && [ $seen_files = 0 ] && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	rc=0
	wait $pid || rc=$?
	ok $rc "a run on the slow device passes" || true
	[ $rc = 0 ] || tail -n 20 "$out/run.log" >&2
	ok $seen_throttle "during it, the kernel throttles the device's writes (30M, 2000/s)"
	ok $seen_files "during it, the cluster's files are on the device"
	ok "$(grep -qx 'slow_device=30M,2000' "$out/run/meta.env"; echo $?)" \
		"meta.env records the device"
	ok "$(test -s "$out/run/results.csv"; echo $?)" "results.csv written"
	nothing_left "after the run" "$majmin"
fi

# --- a run that fails after the device was made ---
rc=0
bash bench/run --slow-device 30M --no-build --configs nobgw --clients 1 \
	--duration 3 --rounds 1 --warmup 0 --scale 1 --shared-buffers 16MB \
	--set 'shared_buffers = nonsense' --out "$out/fail" >"$out/fail.log" 2>&1 || rc=$?
ok "$([ $rc != 0 ]; echo $?)" "a run whose server cannot start fails"
majmin=$(sed -n 's/^== --slow-device: [^ ]* (\([0-9]*:[0-9]*\)).*/\1/p' "$out/fail.log")
ok "$([ -n "$majmin" ]; echo $?)" "(after making the device)"
nothing_left "after the failed run" "$majmin"

# --- bench/latency-diag's device (made and removed by the same code):
# a run that fails once the device is made (pgbench refuses scale 0) ---
rc=0
bash bench/latency-diag --slow-device 30M --scale 0 --out "$out/diag" \
	>"$out/diag.log" 2>&1 || rc=$?
ok "$([ $rc != 0 ]; echo $?)" "a latency-diag run that cannot load its data fails"
majmin=$(sed -n 's/^== --slow-device: [^ ]* (\([0-9]*:[0-9]*\)).*/\1/p' "$out/diag.log")
ok "$([ -n "$majmin" ]; echo $?)" "(after making the device)"
nothing_left "after the failed latency-diag run" "$majmin"

echo "$passed passed, $failed failed"
[ $failed = 0 ]
