# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Common helpers for scripts/*.sh: paths, messages, the pinned facts.
# Sourced, never run.

LP_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../kernel-config/kernel.env
. "$LP_REPO/kernel-config/kernel.env"
# shellcheck source=../kernel-config/tools.env
. "$LP_REPO/kernel-config/tools.env"

LP_CACHE=${LP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lockless-parity}
LP_ROOT=$LP_CACHE/root          # the trixie toolchain root
LP_WORK=$LP_CACHE/work          # kernel sources and builds; /lp/cache in the root
LP_OUT=$LP_REPO/build           # project outputs; /lp/src/build in the root

# Where the work dir appears inside the root (the repo is /lp/src).
LP_IN_WORK=/lp/cache

# The guest's architecture: ARCH=x86_64 (the default) or ARCH=arm64
# (qemu-system-aarch64 -M virt; kernel-config/arm64.config over
# base.config). LP_KSUF tells an arm64 kernel's build directory and guest
# apart from x86's: kernel-debug-arm64, build/guest-debug-arm64.
# LP_KARCH is the kernel's ARCH=, LP_KIMAGE its boot image.
# shellcheck disable=SC2034 # LP_KSUF, LP_KARCH, LP_KIMAGE: for the sourcing scripts
case ${ARCH:-x86_64} in
x86_64 | x86)
	LP_ARCH=x86_64 LP_KSUF='' LP_KARCH=x86_64 LP_KIMAGE=arch/x86/boot/bzImage
	;;
arm64 | aarch64)
	LP_ARCH=arm64 LP_KSUF=-arm64 LP_KARCH=arm64 LP_KIMAGE=arch/arm64/boot/Image
	;;
*)
	lp_arch_bad=${ARCH}
	;;
esac

lp_say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
lp_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

[ -z "${lp_arch_bad+x}" ] ||
	lp_die "ARCH=$lp_arch_bad is not one of x86_64 (the default), arm64"

# Root or not. As root, every step runs as it always has:
# mmdebstrap, a private mount namespace, chroot. As an ordinary user, the
# same steps run in an unprivileged user namespace in which the user is
# root (`unshare --user --map-root-user`): uid 0 inside is the user
# outside, so everything written in the cache and build/ is the user's.
# The Debian roots are made by mmdebstrap --mode=unshare (see
# lp_mmdebstrap). No sudo, ever.
# shellcheck disable=SC2034 # LP_ASROOT, LP_UNSHARE: for the sourcing scripts
if [ "$(id -u)" -eq 0 ]; then
	LP_USERNS=0
	LP_ASROOT=()
	LP_UNSHARE=(unshare --mount --propagation private)
else
	LP_USERNS=1
	LP_ASROOT=(unshare --user --map-root-user)
	LP_UNSHARE=(unshare --user --map-root-user --mount --propagation private)
	# chroot, mount and friends live in sbin, which a user's PATH lacks.
	case :$PATH: in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac
fi

# lp_need_root: we create roots, mount and chroot. Root may; an ordinary
# user may in a user namespace, if the host allows them and the cache is
# the user's own.
lp_need_root() {
	[ "$LP_USERNS" = 1 ] || return 0
	lp_userns_check
	local d
	for d in "$LP_CACHE" "$LP_ROOT" "$LP_WORK" "$LP_CACHE/herdroot" "$LP_CACHE/chromeroot" "$LP_OUT"; do
		[ ! -e "$d" ] || [ -O "$d" ] ||
			lp_die "$d belongs to $(stat -c %U "$d"), not to $(id -un): run as that user, or give this one a cache and checkout of its own (LP_CACHE=)"
	done
}

# lp_userns_check: dies, in one line naming the setting, when this host
# does not let an ordinary user create a user namespace.
lp_userns_check() {
	unshare --user --map-root-user --mount true 2>/dev/null && return 0
	local why="unshare --user --map-root-user --mount fails; the sysctls that allow it: kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0, kernel.apparmor_restrict_unprivileged_userns=0" v
	v=$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || true)
	[ "$v" != 0 ] || why="sysctl kernel.unprivileged_userns_clone is 0 (1 allows them)"
	v=$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || true)
	[ "$v" != 0 ] || why="sysctl user.max_user_namespaces is 0 (e.g. 10000 allows them)"
	v=$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null || true)
	[ "$v" != 1 ] || why="sysctl kernel.apparmor_restrict_unprivileged_userns is 1 (0 allows them)"
	lp_die "this host does not allow unprivileged user namespaces ($why): run as root, or have an administrator allow them"
}

# lp_mmdebstrap TARGET ARG...: make a Debian root at TARGET with
# `mmdebstrap ARG...`, where ARG... holds TARGET as its target argument.
# As root, in a private mount namespace (none of mmdebstrap's mounts
# outlive it, even on kill). As a user, in mmdebstrap's unshare mode,
# which needs newuidmap/newgidmap and a subordinate id range: its root
# is owned by those subordinate ids, so it is streamed out as a tarball
# and unpacked by the user, every file the user's (uid 0 in our user
# namespace). File owners other than root are lost; nothing in the root
# runs as anyone else (apt is told not to drop to _apt).
lp_mmdebstrap() {
	local target=$1 a args=()
	shift
	if [ "$LP_USERNS" = 0 ]; then
		if ! command -v mmdebstrap >/dev/null; then
			command -v apt-get >/dev/null ||
				lp_die "mmdebstrap is missing and this host has no apt-get: install mmdebstrap by hand"
			lp_say "host lacks mmdebstrap: installing it with apt-get (the only host package we need)"
			apt-get -o Acquire::Check-Valid-Until=false update -qq ||
				lp_die "apt-get update failed on the host: check network access to the Debian archive"
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null ||
				lp_die "apt-get install mmdebstrap failed on the host"
		fi
		unshare --mount --propagation private -- mmdebstrap "$@"
		return
	fi
	lp_userns_host_check
	for a in "$@"; do
		[ "$a" = "$target" ] && args+=(-) || args+=("$a")
	done
	mkdir -p "$target"
	# The unpacking tar needs no namespace: --no-same-owner makes every
	# file the user's; /dev stays empty (no mknod without root), inroot.sh
	# binds the host's /dev there.
	mmdebstrap --mode=unshare "${args[@]}" |
		tar -x -p --no-same-owner --exclude='./dev/*' -C "$target" || return 1
	# No group adm either: apt's terminal log, which it would chown to
	# root:adm (a warning on every install), goes nowhere.
	mkdir -p "$target/etc/apt/apt.conf.d"
	printf '%s\n' 'APT::Sandbox::User "root";' 'Dir::Log::Terminal "/dev/null";' \
		>"$target/etc/apt/apt.conf.d/99lp-userns"
}

# lp_tool_root DIR SUITE PACKAGES VERIFY WHAT SIZE: a small cached Debian
# root holding PACKAGES (space-separated) from SUITE, for a tool that runs
# chrooted (herd7, chromium). Made with mmdebstrap unless DIR's stamp says
# it holds exactly those; VERIFY, a command, must succeed in it afterwards.
# WHAT names the tool in messages, SIZE is the hint printed while making it.
lp_tool_root() {
	local dir=$1 suite=$2 packages=$3 verify=$4 what=$5 size=$6
	local stamp=$dir/.lp-stamp want mirror
	want=$(printf '%s\n' "$suite" "$packages" | sha256sum | cut -c1-16)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		"$verify" ||
			lp_die "$what root $dir is stamped but $what does not run in it: remove it and rerun"
		return 0
	fi
	mirror=$(lp_mirror)
	lp_say "creating the $suite $what root ($packages) with mmdebstrap from $mirror ($size)"
	mkdir -p "$LP_CACHE"
	touch "$LP_CACHE/.lockless-parity-cache"
	rm -rf --one-file-system "$dir" "$dir.tmp"
	# A private mount namespace (lp_mmdebstrap): none of mmdebstrap's
	# mounts outlive it.
	if ! lp_mmdebstrap "$dir.tmp" --variant=apt --quiet \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--include="${packages// /,}" \
		"$suite" "$dir.tmp" "deb $mirror $suite main"; then
		rm -rf --one-file-system "$dir.tmp"
		lp_die "mmdebstrap of $suite with $packages failed: is $mirror reachable, and does $suite still ship $packages?"
	fi
	mv "$dir.tmp" "$dir"
	"$verify" || lp_die "$what does not run in the fresh root $dir"
	printf '%s\n' "$want" >"$stamp"
	lp_say "$what root ready: $dir ($(du -sh "$dir" | cut -f1))"
}

# lp_userns_host_check: what mmdebstrap --mode=unshare needs of the host.
# A user cannot install it: say what an administrator must run, once.
lp_userns_host_check() {
	local pkgs=() user f start
	user=$(id -un)
	command -v mmdebstrap >/dev/null || pkgs+=(mmdebstrap)
	{ command -v newuidmap && command -v newgidmap; } >/dev/null || pkgs+=(uidmap)
	[ ${#pkgs[@]} -eq 0 ] ||
		lp_die "making the Debian roots without root needs ${pkgs[*]} on the host; an administrator must run, once: apt-get install ${pkgs[*]}"
	for f in /etc/subuid /etc/subgid; do
		awk -F: -v u="$user" '$1 == u && $3 >= 65536 { ok = 1 } END { exit !ok }' \
			"$f" 2>/dev/null && continue
		# Suggest a range above every range given out so far.
		start=$(cat /etc/subuid /etc/subgid 2>/dev/null |
			awk -F: 'BEGIN { m = 100000 } $2 + $3 > m { m = $2 + $3 } END { print m }')
		lp_die "$f gives $user no range of 65536 subordinate ids (mmdebstrap --mode=unshare maps the root's users to them); an administrator must run, once: usermod --add-subuids $start-$((start + 65535)) --add-subgids $start-$((start + 65535)) $user"
	done
}

# lp_mirror: the Debian mirror, LP_MIRROR or the one the host's apt uses.
lp_mirror() {
	local m=$LP_MIRROR f
	if [ -z "$m" ]; then
		for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -r "$f" ] || continue
			m=$(sed -nE 's#^[[:space:]]*(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)((https?|file)://[^[:space:]]*/debian/?)([[:space:]].*)?$#\3#p' "$f" | head -n1)
			[ -n "$m" ] && break
		done
	fi
	[ -n "$m" ] || m=http://deb.debian.org/debian
	printf '%s\n' "${m%/}"
}

# lp_read_plan FILE: `series.py plan`'s lines (a series, the series it
# requires or -, its patches) into the caller's order array and its
# requires and members associative arrays (declared with declare -A).
lp_read_plan() {
	local s req list
	order=()
	while IFS=$'\t' read -r s req list; do
		order+=("$s")
		requires[$s]=${req/#-/}
		members[$s]=$list
	done <"$1"
}

# lp_plan_base SERIES: after lp_read_plan, the patches of the series that
# SERIES requires, theirs first, each once, one per line.
lp_plan_base() {
	local r m
	for r in ${requires[$1]//,/ }; do
		lp_plan_base "$r"
		read -ra m <<<"${members[$r]}"
		printf '%s\n' "${m[@]}"
	done | awk '!seen[$0]++'
}

# lp_src_hash: what decides the patched source tree: kernel.env and each
# patch's name and diff, not its commit message (from the first
# "diff --git" on), so that rewording a patch rebuilds nothing.
lp_src_hash() {
	local p
	{
		cat "$LP_REPO/kernel-config/kernel.env"
		for p in "$LP_REPO"/kernel-config/patches/*.patch; do
			[ -e "$p" ] || continue
			printf '%s\n' "${p##*/}"
			sed -n '/^diff --git /,$p' "$p"
		done
	} | sha256sum | cut -c1-16
}

# lp_kind_fragments KIND: the config fragments of kernel KIND, in the
# order they are applied: base.config, arm64.config for ARCH=arm64, the
# fragment KIND.config names in a "# lp-extends: OTHER" line (perf-inline
# extends perf), then KIND.config.
lp_kind_fragments() {
	local kind=$1 base
	printf '%s\n' "$LP_REPO/kernel-config/base.config"
	[ "$LP_ARCH" = x86_64 ] || printf '%s\n' "$LP_REPO/kernel-config/$LP_ARCH.config"
	base=$(sed -n 's/^# lp-extends: *\([a-z-]*\) *$/\1/p' \
		"$LP_REPO/kernel-config/$kind.config")
	[ -z "$base" ] || printf '%s\n' "$LP_REPO/kernel-config/$base.config"
	printf '%s\n' "$LP_REPO/kernel-config/$kind.config"
}

# lp_make_watched WHAT LOG MAKE_ARGS...: make MAKE_ARGS in the background,
# output appended to LOG, with a line each minute ("WHAT: still building,
# N min, at: <LOG's last line>"); on failure, LOG's errors and die.
lp_make_watched() {
	local what=$1 log=$2 start=$SECONDS pid
	shift 2
	make "$@" >>"$log" 2>&1 &
	pid=$!
	# shellcheck disable=SC2064 # the pid now, not at exit
	trap "kill $pid 2>/dev/null" EXIT
	while kill -0 "$pid" 2>/dev/null; do
		for _ in $(seq 60); do
			sleep 1
			kill -0 "$pid" 2>/dev/null || break
		done
		kill -0 "$pid" 2>/dev/null || break
		lp_say "$what: still building, $(((SECONDS - start) / 60)) min, at: $(tail -n1 "$log" | cut -c1-70)"
	done
	if ! wait "$pid"; then
		trap - EXIT
		grep -E 'error|Error' "$log" | head -n 20 >&2 || true
		lp_die "$what: build failed after $((SECONDS - start)) s; full log: $log"
	fi
	trap - EXIT
}

# lp_kernel_hash KIND: what decides whether kernel KIND must be rebuilt.
# KIND is "debug" (make check) or another fragment in kernel-config/.
lp_kernel_hash() {
	local kind=$1 frags
	mapfile -t frags < <(lp_kind_fragments "$kind")
	{ lp_src_hash; cat "${frags[@]}"; } | sha256sum | cut -c1-16
}

# lp_run_name MODE: the guest run's directory name under build/guest-KIND/:
# MODE, or MODE-icount when ICOUNT=1 (make bench's instruction counts).
lp_run_name() {
	if [ "${ICOUNT:-0}" = 1 ]; then
		printf '%s-icount\n' "$1"
	else
		printf '%s\n' "$1"
	fi
}

# Paths of one kernel kind, as seen from the host and from inside the root.
lp_kdir_host() { printf '%s\n' "$LP_WORK/kernel-$1$LP_KSUF"; }
lp_kdir_root() { printf '%s\n' "$LP_IN_WORK/kernel-$1$LP_KSUF"; }

# lp_in_root SCRIPT ARGS...: when called on the host, re-run this script
# inside the toolchain root (exec, so it never returns there).
lp_in_root() {
	if [ -z "${LP_CACHE_IN:-}" ]; then
		lp_need_root "$@"
		local rel=${0#"$LP_REPO"/}
		[ "$rel" != "$0" ] || rel=scripts/$(basename "$0")
		exec "$LP_REPO/scripts/inroot.sh" "$(printf '%q ' "$rel" "$@")"
	fi
}

# lp_kdir KIND: the kernel build directory to use, as seen from inside the
# root: the user's KDIR (mounted at /lp/kdir by inroot.sh) or our own.
lp_kdir() {
	if [ -n "${KDIR:-}" ]; then
		printf '/lp/kdir\n'
	else
		lp_kdir_root "$1"
	fi
}

# lp_ksrc KDIR: the source tree behind a build directory (O= or in-tree).
lp_ksrc() {
	if [ -d "$1/source/tools" ]; then
		(cd "$1/source" && pwd -P)
	else
		printf '%s\n' "$1"
	fi
}
