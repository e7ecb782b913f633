#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# inroot.sh: run one command inside the toolchain root, with /proc, /dev,
# the repo (/lp/src) and the cache (/lp/cache) mounted.
#
# The mounts live in a private mount namespace (unshare -m): the kernel
# drops them when the last process in it exits, so no exit path -- error,
# Ctrl-C, kill -9 -- can leave a mount behind on the host. Run by an
# ordinary user, that namespace belongs to a user namespace in which the
# user is root (lib.sh's LP_UNSHARE): what the command writes is the
# user's, and /proc is the host's, bound (a fresh proc mount would need a
# PID namespace of its own).
#
# usage: scripts/inroot.sh [--net] COMMAND...   (COMMAND runs under bash -c
#        in /lp/src; --net copies the host's resolv.conf for apt)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

net=0
if [ "${1:-}" = --net ]; then
	net=1
	shift
fi
[ $# -gt 0 ] || lp_die "usage: scripts/inroot.sh [--net] COMMAND..."
[ -x "$LP_ROOT/usr/bin/apt-get" ] ||
	lp_die "no toolchain root at $LP_ROOT: run 'make toolchain' first"

mkdir -p "$LP_WORK" "$LP_OUT" "$LP_ROOT/lp/src" "$LP_ROOT/lp/cache"
[ $net -eq 1 ] && cp -L /etc/resolv.conf "$LP_ROOT/etc/resolv.conf" 2>/dev/null || true

# Variables the steps inside may use; everything else stays outside.
passenv=(HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
	TERM="${TERM:-dumb}" LP_CACHE_IN="$LP_IN_WORK")
for v in JOBS ACCEL TIMEOUT SMP MEM KDIR V CI BENCH_QUICK BENCH_MS BENCH_REPS \
	LP_VERBOSE RACE_PUTS CHAIN_DEPTH PRESET TESTS KUNIT ICOUNT FUZZ_SEED FUZZ_STREAMS \
	FUZZ_STEPS ORDERING_MUTANTS ORDERING_PREBUILT QEMU_CPU TCG_THREAD; do
	[ -n "${!v:-}" ] && passenv+=("$v=${!v}")
done
# The kernel's make reads ARCH from the environment: set only for arm64,
# so that an x86 build sees exactly what it always has.
[ "$LP_ARCH" = x86_64 ] || passenv+=("ARCH=$LP_ARCH")

# A kernel tree of the user's own (KDIR=) appears at /lp/kdir.
kdir=
if [ -n "${KDIR:-}" ]; then
	kdir=$(cd "$KDIR" 2>/dev/null && pwd -P) || lp_die "KDIR=$KDIR is not a directory"
	[ -f "$kdir/Makefile" ] || lp_die "KDIR=$KDIR does not look like a kernel build tree"
	mkdir -p "$LP_ROOT/lp/kdir"
fi

exec "${LP_UNSHARE[@]}" -- /bin/bash -c '
	set -e
	root=$1 repo=$2 work=$3 kdir=$4 userns=$5
	shift 5
	if [ "$userns" = 1 ]; then
		mount --rbind /proc "$root/proc"
	else
		mount -t proc proc "$root/proc"
	fi
	mount --rbind /dev "$root/dev"
	mount --bind "$repo" "$root/lp/src"
	mount --bind "$work" "$root/lp/cache"
	[ -z "$kdir" ] || mount --bind "$kdir" "$root/lp/kdir"
	exec chroot "$root" /usr/bin/env -i "$@"
' inroot "$LP_ROOT" "$LP_REPO" "$LP_WORK" "$kdir" "$LP_USERNS" "${passenv[@]}" \
	/bin/bash -c 'cd /lp/src && eval "$1"' inroot "$*"
