# bench/pgroot.sh - run bgw_jit's scripts against another PostgreSQL major
# version, in a cached Debian root; source it (or run it, see the end).
#
# Debian 12 ships only PostgreSQL 15.  For PG_MAJOR 17, 18 or 19 a script
# that calls bgw_jit_pgroot_run re-runs itself inside a Debian root holding
# that version's server and server-dev packages:
#   17: trixie;  18: sid;  19: sid plus experimental (19~rc packages).
# The root is made once with debootstrap, from the mirror this machine's
# apt sources name (or $BGW_JIT_MIRROR), under $BGW_JIT_ROOT_CACHE
# (default /var/cache/bgw_jit), and reused.  It is built in a temporary
# directory and renamed only when complete, so an interrupted set-up is
# never reused.  Each run mounts /proc, /dev, /dev/pts, a fresh /dev/shm
# and the source (read-only, at /bgw_jit) into the root, and undoes every
# mount however the run ends; a lock keeps runs on one root apart.
# PG_MAJOR unset or 15: nothing changes, the host's packages are used.

BGW_JIT_ROOT_CACHE=${BGW_JIT_ROOT_CACHE:-/var/cache/bgw_jit}
BGW_JIT_ROOT_SRC=/bgw_jit		# the source, as seen inside a root

# Debian suite that carries each version (19 from experimental on top).
bgw_jit_pgroot_suite() {
	case $1 in
	17) echo trixie ;;
	18 | 19) echo sid ;;
	*) return 1 ;;
	esac
}

bgw_jit_pgroot_die() {
	echo "pgroot: $*" >&2
	exit 2
}

# Check PG_MAJOR; true when it names a version that runs in a root.
bgw_jit_pgroot_wanted() {
	case ${PG_MAJOR:-15} in
	15) return 1 ;;
	17 | 18 | 19) ;;
	16) bgw_jit_pgroot_die "PostgreSQL 16 is in no Debian suite; PG_MAJOR may be 15 (this machine's packages), 17, 18 or 19" ;;
	*) bgw_jit_pgroot_die "unknown PG_MAJOR '$PG_MAJOR'; it may be 15 (this machine's packages), 17, 18 or 19" ;;
	esac
	# inside a root already: the script runs on that root's packages
	[ -z "${BGW_JIT_IN_ROOT:-}" ]
}

# The Debian mirror this machine's apt sources use for its own release.
bgw_jit_pgroot_mirror() {
	if [ -n "${BGW_JIT_MIRROR:-}" ]; then
		echo "$BGW_JIT_MIRROR"
		return
	fi
	local codename uri
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	# apt-cache policy: " 500 URI SUITE/main amd64 Packages" and then
	# "release ...,n=SUITE,l=Debian,c=main,..." for each source
	uri=$(apt-cache policy 2>/dev/null | awk -v n="n=$codename," '
		$1 ~ /^[0-9]+$/ && $2 ~ /:\/\// { uri = $2; next }
		/release / && index($0, n) && /l=Debian,/ && /c=main/ { print uri; exit }')
	[ -n "$uri" ] ||
		bgw_jit_pgroot_die "no Debian mirror for '$codename' in this machine's apt sources; set BGW_JIT_MIRROR"
	echo "$uri"
}

# Mount points at or below directory $1, deepest first.
bgw_jit_pgroot_mounts_below() {
	local d
	d=$(realpath -m "$1")
	awk -v d="$d" '$5 == d || index($5, d "/") == 1 { print $5 }' \
		/proc/self/mountinfo | sort -r
}

# Whether anything is mounted at or below directory $1.
bgw_jit_pgroot_has_mounts() {
	[ -n "$(bgw_jit_pgroot_mounts_below "$1")" ]
}

# Pids of processes whose root directory is $1 (so: ones a run started).
bgw_jit_pgroot_pids() {
	local p r
	for p in /proc/[0-9]*; do
		r=$(readlink "$p/root" 2>/dev/null) || continue
		[ "$r" = "$1" ] && echo "${p#/proc/}"
	done
	return 0
}

# Stop what still runs in root $1: TERM, up to 10 s, then KILL.
bgw_jit_pgroot_stop_processes() {
	local root=$1 pids i
	pids=$(bgw_jit_pgroot_pids "$root")
	[ -z "$pids" ] && return 0
	kill -TERM $pids 2>/dev/null
	for i in $(seq 100); do
		pids=$(bgw_jit_pgroot_pids "$root")
		[ -z "$pids" ] && return 0
		sleep 0.1
	done
	echo "pgroot: killing processes still running in $root: $pids" >&2
	kill -KILL $pids 2>/dev/null
	sleep 0.5
}

# Mount what a root needs; each mount point is recorded (innermost last)
# in BGW_JIT_PGROOT_MOUNTS for bgw_jit_pgroot_umount.
BGW_JIT_PGROOT_MOUNTS=()
bgw_jit_pgroot_mount() {
	local root=$1
	shift
	local spec host inner
	mkdir -p "$root/proc" "$root/dev" "$root/sys"
	mount -t proc proc "$root/proc" &&
		BGW_JIT_PGROOT_MOUNTS+=("$root/proc") || return 1
	mount --bind /dev "$root/dev" &&
		BGW_JIT_PGROOT_MOUNTS+=("$root/dev") || return 1
	mount --bind /dev/pts "$root/dev/pts" &&
		BGW_JIT_PGROOT_MOUNTS+=("$root/dev/pts") || return 1
	# a /dev/shm of its own: the servers' posix shared memory lives there
	mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm" &&
		BGW_JIT_PGROOT_MOUNTS+=("$root/dev/shm") || return 1
	# further "host:inner" binds (read-only if inner ends in ":ro")
	for spec in "$@"; do
		host=${spec%%:*}
		inner=${spec#*:}
		local ro=0
		case $inner in *:ro) ro=1; inner=${inner%:ro} ;; esac
		if [ -d "$host" ]; then
			mkdir -p "$root$inner"
		else
			mkdir -p "$(dirname "$root$inner")"
			: >"$root$inner"
		fi
		mount --bind "$host" "$root$inner" &&
			BGW_JIT_PGROOT_MOUNTS+=("$root$inner") || return 1
		if [ $ro = 1 ]; then
			mount -o remount,bind,ro "$root$inner" || return 1
		fi
	done
	# name resolution for apt-get inside the root
	cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

# Undo bgw_jit_pgroot_mount, innermost first, and whatever else is still
# mounted below the root (debootstrap's own /proc and /sys, if it was
# interrupted).  Refuses to go on (returns 1) if something stays mounted,
# so no caller deletes through a mount.
bgw_jit_pgroot_umount() {
	local root=$1 i m
	bgw_jit_pgroot_stop_processes "$root"
	for ((i = ${#BGW_JIT_PGROOT_MOUNTS[@]} - 1; i >= 0; i--)); do
		m=${BGW_JIT_PGROOT_MOUNTS[i]}
		umount "$m" 2>/dev/null || {
			sleep 1
			umount "$m" || umount -l "$m" ||
				echo "pgroot: could not unmount $m" >&2
		}
	done
	BGW_JIT_PGROOT_MOUNTS=()
	for m in $(bgw_jit_pgroot_mounts_below "$root"); do
		[ "$m" = "$(realpath -m "$root")" ] && continue
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	if bgw_jit_pgroot_has_mounts "$root"; then
		echo "pgroot: mounts remain under $root:" >&2
		bgw_jit_pgroot_mounts_below "$root" | sed 's/^/  /' >&2
		return 1
	fi
	return 0
}

# Remove a root directory tree; never through a mount point.
bgw_jit_pgroot_remove() {
	local dir=$1
	[ -d "$dir" ] || return 0
	if bgw_jit_pgroot_has_mounts "$dir"; then
		echo "pgroot: not removing $dir: something is mounted below it" >&2
		return 1
	fi
	rm -rf --one-file-system "$dir"
}

# Packages each root holds: the server and what the build, the tests
# (pgbench, pg_amcheck and contrib come with postgresql-NN, IPC::Run with
# libipc-run-perl, JSON::PP with perl; bench/plot-history needs python3 and
# gnuplot-nox) and the demo (column) need.  (A root made before a package
# was added here gets it from the test runner's bgw_jit_require_packages.)
bgw_jit_pgroot_packages() {
	echo "postgresql-$1 postgresql-server-dev-$1 make gcc libipc-run-perl bsdextrautils python3 gnuplot-nox"
}

# Make the root for version $1 at $2 (which must not exist).  Prints the
# time it took.
bgw_jit_pgroot_create() {
	local major=$1 final=$2 suite mirror tmp start pkgs base_pkgs
	suite=$(bgw_jit_pgroot_suite "$major")
	mirror=$(bgw_jit_pgroot_mirror)
	pkgs=$(bgw_jit_pgroot_packages "$major")

	if ! command -v debootstrap >/dev/null; then
		echo "== installing debootstrap"
		apt-get update -qq || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
			bgw_jit_pgroot_die "could not install debootstrap with apt-get"
	fi
	# a clear message rather than debootstrap's when the mirror is unreachable
	/usr/lib/apt/apt-helper download-file "$mirror/dists/$suite/InRelease" \
		"$BGW_JIT_ROOT_CACHE/.probe-$$" >/dev/null 2>&1 ||
		bgw_jit_pgroot_die "cannot reach the Debian mirror $mirror (suite $suite): no network? (set BGW_JIT_MIRROR to use another)"
	rm -f "$BGW_JIT_ROOT_CACHE/.probe-$$"

	tmp=$(mktemp -d "$BGW_JIT_ROOT_CACHE/.pg$major.new.XXXXXX")
	chmod 755 "$tmp"
	BGW_JIT_PGROOT_CREATING=$tmp
	start=$(date +%s)
	echo "== creating the PostgreSQL $major root (Debian $suite from $mirror) in $tmp"

	base_pkgs=$pkgs
	[ "$major" = 19 ] && base_pkgs="make gcc libipc-run-perl bsdextrautils"
	# debootstrap's output stays in the cache directory if it fails
	if ! nice -n 19 debootstrap --variant=minbase --include="${base_pkgs// /,}" \
		"$suite" "$tmp" "$mirror" >"$BGW_JIT_ROOT_CACHE/.pg$major.debootstrap.log" 2>&1; then
		tail -n 20 "$BGW_JIT_ROOT_CACHE/.pg$major.debootstrap.log" >&2
		bgw_jit_pgroot_die "debootstrap of $suite failed (log: $BGW_JIT_ROOT_CACHE/.pg$major.debootstrap.log)"
	fi
	rm -f "$BGW_JIT_ROOT_CACHE/.pg$major.debootstrap.log"

	if [ "$major" = 19 ]; then
		# experimental's Release file on the mirror has expired
		echo "deb $mirror experimental main" >"$tmp/etc/apt/sources.list.d/experimental.list"
		echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99bgw_jit"
		bgw_jit_pgroot_mount "$tmp" || bgw_jit_pgroot_die "mounting into $tmp failed"
		chroot "$tmp" apt-get update -qq &&
			chroot "$tmp" env DEBIAN_FRONTEND=noninteractive \
				nice -n 19 apt-get install -y -qq --no-install-recommends \
				-t experimental $pkgs >/dev/null ||
			{
				bgw_jit_pgroot_umount "$tmp"
				bgw_jit_pgroot_die "installing PostgreSQL 19 from experimental failed"
			}
		bgw_jit_pgroot_umount "$tmp" || bgw_jit_pgroot_die "could not unmount from $tmp"
	fi
	# the cluster the packages make is never used: only throw-away ones are
	if [ -d "$tmp/etc/postgresql/$major/main" ]; then
		chroot "$tmp" pg_dropcluster "$major" main ||
			bgw_jit_pgroot_die "could not drop the packages' cluster in $tmp"
	fi
	chroot "$tmp" apt-get clean

	for p in $pkgs; do
		chroot "$tmp" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			bgw_jit_pgroot_die "package $p missing from the new root $tmp"
	done
	[ -x "$tmp/usr/lib/postgresql/$major/bin/pg_config" ] ||
		bgw_jit_pgroot_die "no pg_config for $major in the new root $tmp"
	{
		echo "suite=$suite"
		echo "created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "seconds=$(($(date +%s) - start))"
		echo "postgresql=$(chroot "$tmp" dpkg-query -W -f='${Version}' "postgresql-$major")"
	} >"$tmp/etc/bgw_jit-root"
	mv -T "$tmp" "$final"
	BGW_JIT_PGROOT_CREATING=
	echo "== PostgreSQL $major root ready in $(($(date +%s) - start)) s:" \
		"$(grep ^postgresql= "$final/etc/bgw_jit-root")"
}

# Make sure the root for PG_MAJOR exists; its path in BGW_JIT_PGROOT.
# Needs the version's lock (bgw_jit_pgroot_lock) held.
bgw_jit_pgroot_ensure() {
	local major=$1 stale
	BGW_JIT_PGROOT=$BGW_JIT_ROOT_CACHE/pg$major
	if [ -f "$BGW_JIT_PGROOT/etc/bgw_jit-root" ]; then
		return 0
	fi
	# leftovers of an interrupted set-up (this lock excludes a live one)
	for stale in "$BGW_JIT_ROOT_CACHE"/.pg$major.new.*; do
		[ -d "$stale" ] || continue
		echo "== removing the unfinished root $stale"
		# (what a killed set-up left running or mounted there goes first)
		bgw_jit_pgroot_umount "$stale" && bgw_jit_pgroot_remove "$stale" ||
			bgw_jit_pgroot_die "cannot remove $stale"
	done
	bgw_jit_pgroot_create "$major" "$BGW_JIT_PGROOT"
}

# Hold version $1's lock on fd 9 until this shell exits.
bgw_jit_pgroot_lock() {
	exec 9>"$BGW_JIT_ROOT_CACHE/pg$1.lock"
	if ! flock -n 9; then
		echo "== waiting for another run in the PostgreSQL $1 root to finish"
		flock 9
	fi
}

# On any exit of the outer script: stop and unmount, remove a half-made root.
bgw_jit_pgroot_cleanup() {
	local status=$?
	trap - INT TERM HUP
	if [ -n "${BGW_JIT_PGROOT_ACTIVE:-}" ]; then
		bgw_jit_pgroot_umount "$BGW_JIT_PGROOT_ACTIVE" || status=1
		BGW_JIT_PGROOT_ACTIVE=
	fi
	if [ -n "${BGW_JIT_PGROOT_CREATING:-}" ]; then
		bgw_jit_pgroot_umount "$BGW_JIT_PGROOT_CREATING" &&
			bgw_jit_pgroot_remove "$BGW_JIT_PGROOT_CREATING"
		BGW_JIT_PGROOT_CREATING=
	fi
	# the caller's own clean-up of what it bound into the root
	if [ -n "${BGW_JIT_PGROOT_ON_EXIT:-}" ]; then
		$BGW_JIT_PGROOT_ON_EXIT || status=1
		BGW_JIT_PGROOT_ON_EXIT=
	fi
	exit $status
}

# On INT/TERM/HUP: stop what runs in the root (the script inside first),
# then exit, which unmounts.
bgw_jit_pgroot_interrupt() {
	local root=${BGW_JIT_PGROOT_ACTIVE:-${BGW_JIT_PGROOT_CREATING:-}}
	echo "pgroot: interrupted; stopping what runs in the root" >&2
	[ -n "${BGW_JIT_PGROOT_CHILD:-}" ] && kill -TERM "$BGW_JIT_PGROOT_CHILD" 2>/dev/null
	[ -n "$root" ] && bgw_jit_pgroot_stop_processes "$root"
	exit 130
}

# bgw_jit_pgroot_run [--bind HOST:INNER[:ro]]... SCRIPT [ARG...]
#
# If PG_MAJOR asks for a root: run SCRIPT (a path in the source tree)
# with ARGs inside it, as root, and exit with its status.  Otherwise
# return at once, and the caller goes on here with the host's packages.
bgw_jit_pgroot_run() {
	local binds=() script rel status var
	local envs=()
	while [ "${1:-}" = --bind ]; do
		binds+=("$2")
		shift 2
	done
	script=$1
	shift
	bgw_jit_pgroot_wanted || return 0
	[ "$(id -u)" -eq 0 ] ||
		bgw_jit_pgroot_die "PG_MAJOR=$PG_MAJOR runs in a Debian root (chroot, mounts): run as root"
	for var in chroot flock mount; do
		command -v $var >/dev/null || bgw_jit_pgroot_die "$var not found"
	done

	local src
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	rel=$(realpath "$script")
	rel=${rel#"$src"/}

	mkdir -p "$BGW_JIT_ROOT_CACHE"
	trap bgw_jit_pgroot_cleanup EXIT
	trap bgw_jit_pgroot_interrupt INT TERM HUP
	bgw_jit_pgroot_lock "$PG_MAJOR"
	bgw_jit_pgroot_ensure "$PG_MAJOR"

	BGW_JIT_PGROOT_ACTIVE=$BGW_JIT_PGROOT
	bgw_jit_pgroot_mount "$BGW_JIT_PGROOT" "$src:$BGW_JIT_ROOT_SRC:ro" \
		${binds[@]+"${binds[@]}"} ||
		bgw_jit_pgroot_die "mounting into $BGW_JIT_PGROOT failed"

	# the environment the scripts read, and nothing else of the host's
	while IFS='=' read -r var _; do
		case $var in BGW_JIT_ROOT_* | BGW_JIT_PGROOT* | BGW_JIT_HOST_ROOT | BGW_JIT_IN_ROOT) continue ;; esac
		case $var in BGW_JIT_* | PROVE_* | PG_TEST_* | TERM) envs+=("$var=${!var}") ;; esac
	done < <(env)
	echo "== PostgreSQL $PG_MAJOR ($(grep ^postgresql= "$BGW_JIT_PGROOT/etc/bgw_jit-root" | cut -d= -f2)) in $BGW_JIT_PGROOT"
	chroot "$BGW_JIT_PGROOT" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 PG_MAJOR="$PG_MAJOR" BGW_JIT_IN_ROOT="$PG_MAJOR" \
		BGW_JIT_HOST_ROOT="$BGW_JIT_PGROOT" \
		${envs[@]+"${envs[@]}"} \
		bash "$BGW_JIT_ROOT_SRC/$rel" "$@" &
	BGW_JIT_PGROOT_CHILD=$!
	status=0
	wait "$BGW_JIT_PGROOT_CHILD" || status=$?
	BGW_JIT_PGROOT_CHILD=
	exit $status
}

# Run directly: bash bench/pgroot.sh create|shell|remove VERSION
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	[ $# -eq 2 ] || {
		echo "usage: $0 create|shell|remove 17|18|19" >&2
		exit 2
	}
	PG_MAJOR=$2
	bgw_jit_pgroot_wanted ||
		bgw_jit_pgroot_die "PostgreSQL $PG_MAJOR needs no root: this machine's packages serve it"
	[ "$(id -u)" -eq 0 ] || bgw_jit_pgroot_die "run as root"
	mkdir -p "$BGW_JIT_ROOT_CACHE"
	trap bgw_jit_pgroot_cleanup EXIT
	trap bgw_jit_pgroot_interrupt INT TERM HUP
	bgw_jit_pgroot_lock "$PG_MAJOR"
	case $1 in
	create) bgw_jit_pgroot_ensure "$PG_MAJOR"; cat "$BGW_JIT_PGROOT/etc/bgw_jit-root" ;;
	shell)
		bgw_jit_pgroot_ensure "$PG_MAJOR"
		BGW_JIT_PGROOT_ACTIVE=$BGW_JIT_PGROOT
		src=$(cd "$(dirname "$0")/.." && pwd)
		bgw_jit_pgroot_mount "$BGW_JIT_PGROOT" "$src:$BGW_JIT_ROOT_SRC:ro"
		chroot "$BGW_JIT_PGROOT" /usr/bin/env -i TERM="${TERM:-dumb}" \
			PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 bash -i || true
		;;
	remove) bgw_jit_pgroot_remove "$BGW_JIT_ROOT_CACHE/pg$PG_MAJOR" ;;
	*) bgw_jit_pgroot_die "unknown command $1" ;;
	esac
fi
