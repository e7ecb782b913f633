# shellcheck shell=bash
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

lp_say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
lp_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# lp_need_root: we create roots, mount and chroot; all of that needs root.
lp_need_root() {
	[ "$(id -u)" -eq 0 ] && return 0
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		exec sudo -E LP_CACHE="$LP_CACHE" "$0" "$@"
	fi
	lp_die "this step needs root (mmdebstrap, mount, chroot): run as root or give this user password-less sudo"
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

# lp_hash FILES...: a short content hash of the given files, in order.
lp_hash() {
	cat "$@" | sha256sum | cut -c1-16
}

# lp_kernel_hash KIND: what decides whether kernel KIND must be rebuilt.
# KIND is "debug" (make check) or another fragment in kernel-config/.
lp_src_hash() {
	local files=("$LP_REPO/kernel-config/kernel.env")
	local p
	for p in "$LP_REPO"/kernel-config/patches/*.patch; do
		[ -e "$p" ] && files+=("$p")
	done
	lp_hash "${files[@]}"
}

# lp_kind_fragments KIND: the config fragments of kernel KIND, in the
# order they are applied: base.config, the fragment KIND.config names in a
# "# lp-extends: OTHER" line (perf-inline extends perf), then KIND.config.
lp_kind_fragments() {
	local kind=$1 base
	printf '%s\n' "$LP_REPO/kernel-config/base.config"
	base=$(sed -n 's/^# lp-extends: *\([a-z-]*\) *$/\1/p' \
		"$LP_REPO/kernel-config/$kind.config")
	[ -z "$base" ] || printf '%s\n' "$LP_REPO/kernel-config/$base.config"
	printf '%s\n' "$LP_REPO/kernel-config/$kind.config"
}

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
lp_kdir_host() { printf '%s\n' "$LP_WORK/kernel-$1"; }
lp_kdir_root() { printf '%s\n' "$LP_IN_WORK/kernel-$1"; }

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
