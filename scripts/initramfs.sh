#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# initramfs.sh [KIND]: build the static guest programs and pack the guest:
# busybox-static, both modules, the test driver, the demo, the bench and
# /init.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_in_root "$@"

kind=${1:-debug}
kdir=$(lp_kdir "$kind")
ksrc=$(lp_ksrc "$kdir")
guest=$LP_OUT/guest-$kind$LP_KSUF
stage=$guest/rootfs
[ -f "$guest/modules/lockless_c.ko" ] && [ -f "$guest/modules/lockless_rust.ko" ] ||
	lp_die "modules for $kind are not built: run scripts/modules.sh $kind first"
[ -f "$ksrc/tools/testing/selftests/kselftest_harness.h" ] ||
	lp_die "no kselftest_harness.h under $ksrc (KDIR must be a full kernel tree)"

rm -rf "$stage"
mkdir -p "$stage"/{bin,dev,proc,sys,tmp,modules}
cflags=(-static -O2 -Wall -Werror -pthread
	-I"$ksrc/tools/testing/selftests" -I"$LP_REPO/shared-tests")
# arm64: the cross compiler and arm64's busybox (toolchain.sh ARCH=arm64).
cc=gcc busybox=/bin/busybox
if [ "$LP_ARCH" = arm64 ]; then
	cc=aarch64-linux-gnu-gcc busybox=/opt/lp-arm64/bin/busybox
fi
lp_say "compiling the guest programs (static${LP_KSUF:+, $cc})"
for p in lockless_test lockless_demo lockless_racy lockless_bench; do
	$cc "${cflags[@]}" -o "$stage/bin/$p" "shared-tests/$p.c" ||
		lp_die "compiling shared-tests/$p.c failed"
done

cp "$busybox" "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"
cp "$guest"/modules/*.ko "$stage/modules/"
install -m 0755 shared-tests/init.sh "$stage/init"
# The kernel opens /dev/console before it runs /init. Without root (in a
# user namespace, lib.sh) there is no mknod: the node then goes in as an
# archive of its own after the staging directory's, which the kernel
# unpacks in turn (initramfs may be several concatenated cpio archives).
console=
mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || console=dev/console

# newc_entry NAME MODE RDEVMAJOR RDEVMINOR: one empty newc cpio entry
# (the header is ASCII: magic, then 13 fields of 8 hex digits, then the
# NUL-terminated name, padded to 4 bytes).
newc_entry() {
	local n=$((${#1} + 1))
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%s\0' \
		0 "$2" 0 0 1 0 0 0 0 "$3" "$4" "$n" 0 "$1"
	head -c $(((4 - (110 + n) % 4) % 4)) /dev/zero
}

{
	(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet)
	if [ -n "$console" ]; then
		newc_entry "$console" $((8#20600)) 5 1 # S_IFCHR | 0600
		newc_entry 'TRAILER!!!' 0 0 0
	fi
} | gzip -1 >"$guest/initramfs.cpio.gz.tmp"
mv "$guest/initramfs.cpio.gz.tmp" "$guest/initramfs.cpio.gz"
lp_say "guest ready: build/guest-$kind$LP_KSUF/initramfs.cpio.gz ($(du -h "$guest/initramfs.cpio.gz" | cut -f1))"
