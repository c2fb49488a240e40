# bench/slowdev.sh - a throttled block device for bench/run --slow-device.
#
# Sourced.  bgw_jit_slowdev_setup SPEC makes, as root, a file system on a
# loop device over a sparse file, with the loop device's own direct I/O
# (so that the page cache in front of it does not absorb the throttle
# twice), a cgroup v1 blkio throttle on it (SPEC: BPS[,IOPS], bytes per
# second with an optional K, M or G suffix, powers of 1024, and write
# operations per second), and a per-device dirty limit
# (/sys/class/bdi/MAJ:MIN/max_bytes with strict_limit, so that writers
# into the page cache are made to wait once that much of it is dirty, as
# on a capped cloud volume).  It sets BGW_JIT_SLOWDEV_MNT, the mount point.
# bgw_jit_slowdev_teardown undoes every step that was done, in reverse,
# and is safe to call twice.  Where the kernel lacks a control, setup
# refuses (returns 1, saying why) before changing anything.

BGW_JIT_SLOWDEV_DIRTY_BYTES=${BGW_JIT_SLOWDEV_DIRTY_BYTES:-268435456}
BGW_JIT_SLOWDEV_SIZE=${BGW_JIT_SLOWDEV_SIZE:-8G}
BGW_JIT_SLOWDEV_THROTTLE=/sys/fs/cgroup/blkio/blkio.throttle
BGW_JIT_SLOWDEV_DIR= BGW_JIT_SLOWDEV_LOOP= BGW_JIT_SLOWDEV_MNT=
BGW_JIT_SLOWDEV_MAJMIN= BGW_JIT_SLOWDEV_MOUNTED=0 BGW_JIT_SLOWDEV_THROTTLED=0

bgw_jit_slowdev_refuse() {
	echo "--slow-device: $*" >&2
	return 1
}

# SPEC -> "BPS IOPS" (IOPS 0: no limit), or fail saying why.
bgw_jit_slowdev_parse() {
	local spec=$1 bps iops=0
	bps=${spec%%,*}
	[ "$bps" = "$spec" ] || iops=${spec#*,}
	[[ $bps =~ ^[1-9][0-9]*[KMG]?$ ]] ||
		bgw_jit_slowdev_refuse "BPS[,IOPS]: bytes a second (K, M or G: powers of 1024) and write operations a second, such as 60M,4000; not '$spec'" ||
		return 1
	[[ $iops =~ ^[0-9]+$ ]] ||
		bgw_jit_slowdev_refuse "IOPS must be a whole number, not '$iops'" || return 1
	case $bps in
	*K) bps=$((${bps%K} * 1024)) ;;
	*M) bps=$((${bps%M} * 1024 * 1024)) ;;
	*G) bps=$((${bps%G} * 1024 * 1024 * 1024)) ;;
	esac
	echo "$bps $iops"
}

# What the kernel must offer; nothing is changed.
bgw_jit_slowdev_check() {
	[ "$(id -u)" -eq 0 ] ||
		bgw_jit_slowdev_refuse "needs root: it makes a loop device, a file system and a write throttle" ||
		return 1
	local t
	for t in losetup mkfs.ext4 mount umount truncate; do
		command -v $t >/dev/null ||
			bgw_jit_slowdev_refuse "$t not found" || return 1
	done
	[ -w "${BGW_JIT_SLOWDEV_THROTTLE}.write_bps_device" ] &&
		[ -w "${BGW_JIT_SLOWDEV_THROTTLE}.write_iops_device" ] ||
		bgw_jit_slowdev_refuse "this kernel offers no blkio write throttle (${BGW_JIT_SLOWDEV_THROTTLE}.write_bps_device, cgroup v1)" ||
		return 1
	# (max_bytes and strict_limit: Linux 6.2 and later; checked on the
	# first loop device's bdi, which every loop device has alike)
	[ -e /sys/class/bdi/7:0/max_bytes ] && [ -e /sys/class/bdi/7:0/strict_limit ] ||
		bgw_jit_slowdev_refuse "this kernel offers no per-device dirty limit (/sys/class/bdi/MAJ:MIN/max_bytes and strict_limit, Linux 6.2+)" ||
		return 1
	losetup --help 2>&1 | grep -q -- --direct-io ||
		bgw_jit_slowdev_refuse "losetup has no --direct-io" || return 1
}

bgw_jit_slowdev_setup() {
	local parsed bps iops bdi
	parsed=$(bgw_jit_slowdev_parse "$1") || return 1
	read -r bps iops <<<"$parsed"
	bgw_jit_slowdev_check || return 1

	BGW_JIT_SLOWDEV_DIR=$(mktemp -d /var/tmp/bgw_jit_slowdev.XXXXXX) || return 1
	truncate -s "$BGW_JIT_SLOWDEV_SIZE" "$BGW_JIT_SLOWDEV_DIR/disk.img" || return 1
	BGW_JIT_SLOWDEV_LOOP=$(losetup --find --show --direct-io=on \
		"$BGW_JIT_SLOWDEV_DIR/disk.img") || return 1
	BGW_JIT_SLOWDEV_MAJMIN=$(lsblk -dno MAJ:MIN "$BGW_JIT_SLOWDEV_LOOP" | tr -d ' ') ||
		return 1
	mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$BGW_JIT_SLOWDEV_LOOP" ||
		return 1
	mkdir "$BGW_JIT_SLOWDEV_DIR/mnt" || return 1
	mount "$BGW_JIT_SLOWDEV_LOOP" "$BGW_JIT_SLOWDEV_DIR/mnt" || return 1
	BGW_JIT_SLOWDEV_MOUNTED=1
	chmod 755 "$BGW_JIT_SLOWDEV_DIR" "$BGW_JIT_SLOWDEV_DIR/mnt"

	BGW_JIT_SLOWDEV_THROTTLED=1
	echo "$BGW_JIT_SLOWDEV_MAJMIN $bps" >"${BGW_JIT_SLOWDEV_THROTTLE}.write_bps_device" ||
		return 1
	if [ "$iops" -gt 0 ]; then
		echo "$BGW_JIT_SLOWDEV_MAJMIN $iops" >"${BGW_JIT_SLOWDEV_THROTTLE}.write_iops_device" ||
			return 1
	fi
	bdi=/sys/class/bdi/$BGW_JIT_SLOWDEV_MAJMIN
	echo "$BGW_JIT_SLOWDEV_DIRTY_BYTES" >"$bdi/max_bytes" || return 1
	echo 1 >"$bdi/strict_limit" || return 1
	BGW_JIT_SLOWDEV_MNT=$BGW_JIT_SLOWDEV_DIR/mnt
	echo "== --slow-device: $BGW_JIT_SLOWDEV_LOOP ($BGW_JIT_SLOWDEV_MAJMIN) at $BGW_JIT_SLOWDEV_MNT: writes at most $bps bytes/s$([ "$iops" -gt 0 ] && echo " and $iops/s"), $BGW_JIT_SLOWDEV_DIRTY_BYTES bytes dirty"
}

# For bench/run and bench/latency-diag: on the host, check, make the
# device and arrange its removal when the script (or its run in a root,
# bench/pgroot.sh) exits; inside a root, find it at /bgw_jit_slow, where
# the host's run bound it.  Sets BGW_JIT_SLOWDEV_MNT.  Returns 1 when
# refused (nothing changed), 2 when the set-up failed.
bgw_jit_slowdev_open() {
	if [ -n "${BGW_JIT_IN_ROOT:-}" ]; then
		BGW_JIT_SLOWDEV_MNT=/bgw_jit_slow
		[ -d "$BGW_JIT_SLOWDEV_MNT" ] ||
			bgw_jit_slowdev_refuse "$BGW_JIT_SLOWDEV_MNT is not mounted in this root" ||
			return 1
		return 0
	fi
	bgw_jit_slowdev_parse "$1" >/dev/null && bgw_jit_slowdev_check || return 1
	trap bgw_jit_slowdev_teardown EXIT
	BGW_JIT_PGROOT_ON_EXIT=bgw_jit_slowdev_teardown
	bgw_jit_slowdev_setup "$1" || return 2
}

# The throttle lines in force for the device, as the kernel reports them.
bgw_jit_slowdev_throttles() {
	[ -n "$BGW_JIT_SLOWDEV_MAJMIN" ] || return 0
	grep -h "^$BGW_JIT_SLOWDEV_MAJMIN " "${BGW_JIT_SLOWDEV_THROTTLE}.write_bps_device" \
		"${BGW_JIT_SLOWDEV_THROTTLE}.write_iops_device" 2>/dev/null || true
}

bgw_jit_slowdev_teardown() {
	local status=0 bdi
	if [ -n "$BGW_JIT_SLOWDEV_MAJMIN" ]; then
		bdi=/sys/class/bdi/$BGW_JIT_SLOWDEV_MAJMIN
		if [ $BGW_JIT_SLOWDEV_THROTTLED = 1 ]; then
			# (0 removes a device's throttle)
			echo "$BGW_JIT_SLOWDEV_MAJMIN 0" >"${BGW_JIT_SLOWDEV_THROTTLE}.write_bps_device" || status=1
			echo "$BGW_JIT_SLOWDEV_MAJMIN 0" >"${BGW_JIT_SLOWDEV_THROTTLE}.write_iops_device" || status=1
			BGW_JIT_SLOWDEV_THROTTLED=0
		fi
		# the defaults, for whoever gets this loop device next
		[ -e "$bdi/strict_limit" ] && { echo 0 >"$bdi/strict_limit" || status=1; }
		[ -e "$bdi/max_ratio" ] && { echo 100 >"$bdi/max_ratio" || status=1; }
	fi
	if [ $BGW_JIT_SLOWDEV_MOUNTED = 1 ]; then
		umount "$BGW_JIT_SLOWDEV_DIR/mnt" || status=1
		BGW_JIT_SLOWDEV_MOUNTED=0
	fi
	if [ -n "$BGW_JIT_SLOWDEV_LOOP" ]; then
		losetup -d "$BGW_JIT_SLOWDEV_LOOP" || status=1
		BGW_JIT_SLOWDEV_LOOP=
	fi
	# (only once nothing is mounted there: never delete through a mount)
	if [ -n "$BGW_JIT_SLOWDEV_DIR" ] && [ $BGW_JIT_SLOWDEV_MOUNTED = 0 ]; then
		rm -rf "$BGW_JIT_SLOWDEV_DIR" || status=1
		BGW_JIT_SLOWDEV_DIR=
	fi
	BGW_JIT_SLOWDEV_MAJMIN= BGW_JIT_SLOWDEV_MNT=
	[ $status = 0 ] || echo "--slow-device: clean-up incomplete (see above)" >&2
	return $status
}
