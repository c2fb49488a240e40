#!/usr/bin/env bash
# t/core_recovery_tests.sh - PostgreSQL's own recovery tests that remove
# and create again data files under running processes, on servers with
# bgw_jit preloaded: 032_relfilenode_reuse (a database dropped and created
# again with the same OID, moved between tablespaces, while a standby
# replays), 033_replay_tsp_drops and 034_create_database.  Each runs twice:
# with bgw_jit at its defaults and at its most aggressive (jit+all every
# 10 ms).  bgw_jit 1.3 failed 032 on a standby (lost writes).
#
# The tests come from Debian's source package of the server under test,
# fetched with apt through a temporary source list (the machine's apt
# configuration is left alone) and cached under /var/cache/bgw_jit.
# bookworm carries the source of 15 only; for another version, or when
# no source package can be had, this says so and runs nothing.
#
# Usage, as root, from t/run_tests.sh: t/core_recovery_tests.sh WORKDIR
# STAGE_CONF, where STAGE_CONF makes a server load the build under test.
set -euo pipefail

work=$1
stage_conf=$2
. "$(dirname "$0")/../bench/pgroot.sh"
. "$(dirname "$0")/../bench/setup.sh"

tests='032_relfilenode_reuse 033_replay_tsp_drops 034_create_database'
cache=${BGW_JIT_ROOT_CACHE:-/var/cache/bgw_jit}/src
package=postgresql-$PG_MAJOR
installed=$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null || true)

# The upstream tarball of $package in $cache, downloaded if missing:
# the installed version's source if apt has it, else the nearest it has.
fetch_source() {
	local found codename mirror apt_dir v
	found=$(ls "$cache"/"${package}"_*.orig.tar.* 2>/dev/null | tail -n 1)
	if [ -n "$found" ]; then
		echo "$found"
		return 0
	fi
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	mirror=$(bgw_jit_pgroot_mirror) || return 1
	apt_dir=$(mktemp -d /tmp/bgw_jit_apt.XXXXXX)
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$cache"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $codename main" \
		>"$apt_dir/sources.list"
	local opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list"
		-o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists="$apt_dir/lists"
		-o Dir::Cache="$apt_dir" -o APT::Sandbox::User=root)
	if apt-get "${opts[@]}" update -qq >/dev/null 2>&1; then
		# the installed version first, then the others apt lists
		for v in "$installed" $(apt-cache "${opts[@]}" showsrc "$package" 2>/dev/null |
			sed -n 's/^Version: //p' | sort -rV); do
			[ -n "$v" ] || continue
			(cd "$apt_dir" && apt-get "${opts[@]}" source --download-only -qq \
				"$package=$v" >/dev/null 2>&1) || continue
			mv "$apt_dir"/"${package}"_*.orig.tar.* "$cache"/
			break
		done
	fi
	rm -rf "$apt_dir"
	found=$(ls "$cache"/"${package}"_*.orig.tar.* 2>/dev/null | tail -n 1)
	[ -n "$found" ] && echo "$found"
}

if ! tarball=$(fetch_source); then
	echo "== no source package of $package at hand: PostgreSQL's recovery tests ${tests// /, } not run"
	exit 0
fi
source_version=$(basename "$tarball" | sed -E 's/^[^_]+_([^_]+)\.orig\..*/\1/')
echo "== PostgreSQL's recovery tests from the $package $source_version source (server $installed), bgw_jit preloaded"

dir=$work/core_recovery
mkdir -p "$dir/t"
patterns=()
for t in $tests; do patterns+=("*/src/test/recovery/t/$t.pl"); done
tar -xf "$tarball" -C "$dir/t" --strip-components=5 --wildcards "${patterns[@]}"
[ "$(ls "$dir/t" | wc -l)" -eq 3 ] || { echo "the source lacks some of $tests" >&2; exit 1; }
chown -R "$BGW_JIT_USER" "$dir"

pgxs_dir=$(dirname "$("$PG_CONFIG" --pgxs)")/..
status=0
for config in defaults aggressive; do
	conf=$dir/$config.conf
	{
		cat "$stage_conf"
		echo "shared_preload_libraries = 'bgw_jit'"
		echo "bgwriter_lru_maxpages = 0"
		if [ $config = aggressive ]; then
			echo "bgw_jit.strategy = 'jit+all'"
			echo "bgw_jit.delay = 10ms"
		fi
	} >"$conf"
	chmod 644 "$conf"
	rm -rf "$dir/tmp_check"
	echo "-- bgw_jit at its $([ $config = defaults ] && echo defaults || echo most aggressive)"
	(cd "$dir" && as_server_user env TESTDIR="$dir" TEMP_CONFIG="$conf" \
		PG_REGRESS="$pgxs_dir/test/regress/pg_regress" \
		prove -I "$pgxs_dir/test/perl" t/*.pl) || {
		status=1
		for f in "$dir"/tmp_check/log/*; do
			echo "---- $f (tail)" >&2
			tail -n 30 "$f" >&2
		done
	}
	# every server of the tests loaded bgw_jit, and its worker started
	for f in "$dir"/tmp_check/log/0*.log; do
		grep -q 'bgw_jit worker started' "$f" && continue
		echo "no bgw_jit worker in $f" >&2
		status=1
	done
done
exit $status
