#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# modules.sh [KIND] [-g]: build lockless_c.ko, lockless_rust.ko and the
# kmemleak control lp_kmemleak_control.ko out of tree against kernel KIND
# (default debug) with Kbuild and LLVM=1.
#
# -g adds DWARF to both modules (KCFLAGS=-g, KRUSTFLAGS=-Cdebuginfo=2),
# which make bench reads to count each op's instructions, inlined or not.
# clang's code is the same with or without it; rustc's differs slightly
# (measured: 16 bytes of 14 KB of .text), so make bench measures the very
# binaries it counts.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_in_root "$@"

kind=${1:-debug}
dwarf=()
if [ "${2:-}" = -g ]; then
	dwarf=(KCFLAGS=-g KRUSTFLAGS=-Cdebuginfo=2)
elif [ -n "${2:-}" ]; then
	lp_die "usage: modules.sh [KIND] [-g]"
fi
kdir=$(lp_kdir "$kind")
[ -f "$kdir/Module.symvers" ] ||
	lp_die "no built kernel in $kdir: run 'make kernel' (or check KDIR=)"

out=$LP_OUT/guest-$kind$LP_KSUF/modules
mkdir -p "$out"
for m in c-module rust-module shared-tests/kmemleak_control; do
	lp_say "building $m against $kdir${LP_KSUF:+ (ARCH=$LP_KARCH)}"
	make -s -C "$kdir" M="$LP_REPO/$m" LLVM=1 W=1 "${dwarf[@]}" modules ||
		lp_die "building $m failed (messages above)"
done
cp c-module/lockless_c.ko rust-module/lockless_rust.ko \
	shared-tests/kmemleak_control/lp_kmemleak_control.ko "$out/"
lp_say "modules ready: $(cd "$out" && echo *.ko)"
