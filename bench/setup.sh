# bench/setup.sh - shared set-up for bgw_jit's scripts; source it.
#
# Installs the packages the build and the tests need (when run as root on
# Debian), copies the source to a directory the server account can write,
# builds it there and installs it, either system-wide or into a staging
# directory that only the servers configured for it load from.
# PostgreSQL refuses to run as root, so server-side steps run as the
# "postgres" account when invoked as root.

# PG_MAJOR picks the server version (default 15, this machine's packages;
# 17, 18 and 19 run in a Debian root, see pgroot.sh).
PG_MAJOR=${PG_MAJOR:-15}
PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/$PG_MAJOR/bin}
PG_CONFIG=${PG_CONFIG:-$PG_BINDIR/pg_config}
BGW_JIT_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BGW_JIT_CFLAGS='-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers'

# Install missing Debian packages given as arguments.
bgw_jit_require_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages: ${missing[*]} (run as root or install them)" >&2
		return 1
	fi
	echo "installing: ${missing[*]}"
	# In a Debian root (pgroot.sh) of a rolling suite, the mirror's Release
	# file may be past its Valid-Until date; the root was made from it anyway.
	# Any other failed update leaves the lists as they were: try with those.
	local apt_opts=()
	[ -n "${BGW_JIT_IN_ROOT:-}" ] && apt_opts=(-o Acquire::Check-Valid-Until=false)
	apt-get "${apt_opts[@]}" update -qq ||
		echo "apt-get update failed; installing from the package lists as they are" >&2
	DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq "${missing[@]}" >/dev/null
}

# Install PostgreSQL $1's server and headers beside PG_MAJOR's (for
# t/019_pg_upgrade.pl's old cluster), if apt offers them; false, saying
# so, if it does not.  Debian's packages create no cluster for a major
# older than the newest installed; one made anyway is dropped.
bgw_jit_require_other_server() {
	local v=$1 p candidate
	for p in postgresql-$v postgresql-server-dev-$v; do
		candidate=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
		if [ -z "$candidate" ] || [ "$candidate" = '(none)' ]; then
			echo "apt offers no $p here" >&2
			return 1
		fi
	done
	bgw_jit_require_packages postgresql-$v postgresql-server-dev-$v || return 1
	if [ -d /etc/postgresql/$v/main ] && [ "$(id -u)" -eq 0 ]; then
		pg_dropcluster --stop "$v" main
	fi
	return 0
}

# The account that runs servers: postgres when we are root, else ourselves.
if [ "$(id -u)" -eq 0 ]; then
	BGW_JIT_USER=postgres
else
	BGW_JIT_USER=$(id -un)
fi

as_server_user() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$BGW_JIT_USER" -- env PATH="$PG_BINDIR:$PATH" "$@"
	else
		env PATH="$PG_BINDIR:$PATH" "$@"
	fi
}

# Copy the source tree to $1, owned by the server account (less what
# builds and test runs leave in it).  bench/results, which
# t/031_repository.pl checks, comes along as git tracks it where the
# source is a checkout, so that an untracked run of one's own stays out.
bgw_jit_copy_source() {
	local dir=$1
	mkdir -p "$dir"
	(cd "$BGW_JIT_SRC" && tar --exclude=.git --exclude=tmp_check \
		--exclude=tmp_check_regress --exclude='bench/out' --exclude=stage \
		--anchored --exclude=./results --exclude=./bench/results -cf - .) |
		tar -xf - -C "$dir"
	if git -C "$BGW_JIT_SRC" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$BGW_JIT_SRC" && git ls-files -z -- bench/results |
			tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$dir"
	elif [ -d "$BGW_JIT_SRC/bench/results" ]; then
		(cd "$BGW_JIT_SRC" && tar -cf - bench/results) | tar -xf - -C "$dir"
	fi
	[ "$(id -u)" -eq 0 ] && chown -R "$BGW_JIT_USER" "$dir"
	return 0
}

# Copy the source tree to $1 (owned by the server account) and build it
# there with warnings as errors.  Further arguments go to make (e.g. the
# test suite's FAULT_INJECTION=1).
bgw_jit_build() {
	local dir=$1
	shift
	bgw_jit_copy_source "$dir"
	as_server_user make -C "$dir" -s PG_CONFIG="$PG_CONFIG" clean >/dev/null
	as_server_user make -C "$dir" -s PG_CONFIG="$PG_CONFIG" \
		COPT="$BGW_JIT_CFLAGS -Werror" "$@"
}

# Build in $1/src and install into the staging directory $1/stage
# (make install DESTDIR=...), where only servers told to look there load
# it: nothing is installed system-wide.  Writes $1/stage.conf, the
# postgresql.conf lines that make a server use the staged build, and sets
# BGW_JIT_STAGE_CONF to its path.  CREATE EXTENSION finds the staged
# control and script files through extension_destdir, a Debian patch, up
# to 17, and through extension_control_path from 18 (where Debian dropped
# the patch for it); shared_preload_libraries and '$libdir/' module paths
# are resolved through dynamic_library_path.
bgw_jit_build_stage() {
	local dir=$1 pkglibdir find_extension
	shift
	mkdir -p "$dir"
	[ "$(id -u)" -eq 0 ] && chown "$BGW_JIT_USER" "$dir"
	bgw_jit_build "$dir/src" "$@"
	as_server_user make -C "$dir/src" -s PG_CONFIG="$PG_CONFIG" \
		DESTDIR="$dir/stage" "$@" install >/dev/null
	pkglibdir=$("$PG_CONFIG" --pkglibdir)
	if [ "$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')" -ge 18 ]; then
		find_extension="extension_control_path = '$dir/stage$("$PG_CONFIG" --sharedir):\$system'"
	else
		find_extension="extension_destdir = '$dir/stage'"
	fi
	BGW_JIT_STAGE_CONF=$dir/stage.conf
	cat >"$BGW_JIT_STAGE_CONF" <<EOC
# load bgw_jit from the staging directory $dir/stage
$find_extension
dynamic_library_path = '$dir/stage$pkglibdir:\$libdir'
EOC
	chmod 644 "$BGW_JIT_STAGE_CONF"
}

# The server's own count of backend writes, as SQL, for server_version_num
# $1: pg_stat_bgwriter.buffers_backend on 15; from 16 (where that column
# is gone or going) the normal-context relation writes that pg_stat_io
# counts for every process type but the checkpointer and the bgwriter.
# Both include bgw_jit's writes (16+: as a background worker's).
bgw_jit_core_backend_writes_sql() {
	if [ "$1" -ge 160000 ]; then
		echo "(SELECT coalesce(sum(writes), 0)::bigint FROM pg_stat_io
			WHERE object = 'relation' AND context = 'normal'
			AND backend_type NOT IN ('checkpointer', 'background writer'))"
	else
		echo "(SELECT buffers_backend FROM pg_stat_bgwriter)"
	fi
}

# SQL that zeroes the server's counters behind the figures above.
bgw_jit_core_reset_sql() {
	if [ "$1" -ge 160000 ]; then
		echo "pg_stat_reset_shared('bgwriter'), pg_stat_reset_shared('io')"
	else
		echo "pg_stat_reset_shared('bgwriter')"
	fi
}

# Let backend write counts settle after a load (server_version_num $1,
# then the command that runs psql).  15: the checkpointer absorbs them on
# SIGHUP.  16+: sessions report their I/O when they end, bgw_jit about once
# a second, and bgw_jit samples pg_stat_io at most once a second.
bgw_jit_settle_stats() {
	local vnum=$1
	shift
	if [ "$vnum" -ge 160000 ]; then
		sleep 2.5
	else
		"$@" -c 'SELECT pg_reload_conf()' >/dev/null
		sleep 1.5
	fi
}
