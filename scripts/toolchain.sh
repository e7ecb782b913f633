#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# toolchain.sh: make (once) and verify the Debian toolchain root that every
# build and QEMU run executes in. The host needs only mmdebstrap (and, to
# run without root, uidmap and subordinate ids: see lp_mmdebstrap).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

stamp=$LP_ROOT/.lp-stamp
packages="$LP_ROOT_PACKAGES $LP_ROOT_TOOLS"
want=$(printf '%s\n' "$LP_SUITE" "$LP_KERNEL_SUITE" "$LP_KERNEL_PACKAGE" \
	"$packages" "sparse from $LP_SPARSE_SUITE" | sha256sum | cut -c1-16)
mirror=$(lp_mirror)
noexpire='Acquire::Check-Valid-Until "false";'

verify() {
	local missing=()
	local t
	for t in rustc bindgen clang ld.lld llvm-objdump rustfmt clippy-driver \
		llvm-dwarfdump llvm-cxxfilt busybox qemu-system-x86_64 python3 cpio gcc \
		gnuplot-nox; do
		[ -x "$LP_ROOT/usr/bin/$t" ] || missing+=("$t")
	done
	[ -f "$LP_ROOT/usr/lib/python3/dist-packages/pygments/__init__.py" ] ||
		missing+=(python3-pygments)
	[ -f "$LP_ROOT$LP_KERNEL_TARBALL" ] || missing+=("$LP_KERNEL_TARBALL")
	[ -x "$LP_ROOT/opt/lp-sparse/usr/bin/sparse" ] || missing+=(/opt/lp-sparse/usr/bin/sparse)
	[ ${#missing[@]} -eq 0 ] ||
		lp_die "toolchain root $LP_ROOT lacks: ${missing[*]} (remove it with 'make distclean' and retry)"
}

# arm64_verify: what an ARCH=arm64 run needs on top (tools.env).
arm64_verify() {
	local missing=() t
	for t in qemu-system-aarch64 aarch64-linux-gnu-gcc; do
		[ -x "$LP_ROOT/usr/bin/$t" ] || missing+=("$t")
	done
	[ -f "$LP_ROOT/usr/aarch64-linux-gnu/lib/libc.a" ] || missing+=(libc6-dev-arm64-cross)
	[ -x "$LP_ROOT/opt/lp-arm64/bin/busybox" ] || missing+=(/opt/lp-arm64/bin/busybox)
	[ ${#missing[@]} -eq 0 ] ||
		lp_die "toolchain root $LP_ROOT lacks, for ARCH=arm64: ${missing[*]} (remove $LP_ROOT/.lp-stamp-arm64 and retry)"
}

# arm64_extras: for ARCH=arm64 only, the packages of tools.env's
# LP_ROOT_ARM64_PACKAGES (without their recommends: qemu-system-arm's
# pull in the GTK GUI and dbus, whose system user and group a user's
# root cannot create, so their configuration fails there), and arm64's
# busybox unpacked into /opt/lp-arm64
# (apt fetches and verifies its .deb with arm64 lists of its own, as for
# sparse below). Stamped apart from the root: an x86 run neither
# fetches them nor sees its root change.
arm64_extras() {
	local stamp64=$LP_ROOT/.lp-stamp-arm64 want64
	[ "$LP_ARCH" = arm64 ] || return 0
	want64=$(printf '%s\n' "$want" "$LP_ROOT_ARM64_PACKAGES" "$LP_ARM64_BUSYBOX" |
		sha256sum | cut -c1-16)
	if [ -f "$stamp64" ] && [ "$(cat "$stamp64")" = "$want64" ]; then
		arm64_verify
		lp_say "toolchain root ok for arm64"
		return 0
	fi
	lp_say "adding what ARCH=arm64 needs to the root: $LP_ROOT_ARM64_PACKAGES, $LP_ARM64_BUSYBOX:arm64 (~1 min, once)"
	"$LP_REPO/scripts/inroot.sh" --net "apt-get update -qq" ||
		lp_die "apt-get update inside the root failed: is $mirror reachable?"
	"$LP_REPO/scripts/inroot.sh" --net \
		"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $LP_ROOT_ARM64_PACKAGES >/dev/null" ||
		lp_die "installing $LP_ROOT_ARM64_PACKAGES inside the root failed"
	"$LP_REPO/scripts/inroot.sh" --net "set -e
		d=\$(mktemp -d)
		mkdir -p \$d/lists/partial \$d/cache/archives/partial
		echo 'deb $mirror $LP_SUITE main' >\$d/sources.list
		o='-q -o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false -o APT::Architectures=arm64
		   -o APT::Architecture=arm64 -o Dir::Etc::SourceList='\$d'/sources.list
		   -o Dir::Etc::SourceParts=- -o Dir::State::Lists='\$d'/lists -o Dir::Cache='\$d'/cache'
		apt-get \$o update -qq
		cd \$d && apt-get \$o download $LP_ARM64_BUSYBOX:arm64 2>/dev/null
		rm -rf /opt/lp-arm64 /opt/lp-arm64.tmp && dpkg-deb -x \$d/${LP_ARM64_BUSYBOX}_*.deb /opt/lp-arm64.tmp
		mkdir -p /opt/lp-arm64/bin && mv /opt/lp-arm64.tmp/usr/bin/busybox /opt/lp-arm64/bin/
		rm -rf \$d /opt/lp-arm64.tmp" || lp_die "fetching $LP_ARM64_BUSYBOX:arm64 from $LP_SUITE failed"
	arm64_verify
	printf '%s\n' "$want64" >"$stamp64"
	lp_say "toolchain root ready for arm64"
}

mkdir -p "$LP_CACHE"
exec 9>"$LP_CACHE/root.lock"
if ! flock -n 9; then
	lp_say "another run is making the toolchain root ($LP_CACHE/root.lock), waiting"
	flock 9
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	verify
	lp_say "toolchain root ok: $LP_ROOT"
	arm64_extras
	exit 0
fi

# A user's root maps one id (lib.sh): dpkg there cannot give a file to
# any owner but root, so a package shipping one (passwd, with group
# shadow, does) fails to install into it later. A user's root that is
# not up to date is therefore made anew (~3 min), never patched.
if [ "$LP_USERNS" = 1 ] && [ -e "$LP_ROOT" ]; then
	lp_say "toolchain root $LP_ROOT is not up to date: making it anew (without root, packages cannot be added to it)"
	"${LP_ASROOT[@]}" rm -rf --one-file-system "$LP_ROOT"
fi

mkdir -p "$LP_CACHE"
touch "$LP_CACHE/.lockless-parity-cache"
avail_kb=$(df -Pk "$LP_CACHE" | awk 'NR==2 {print $4}')
if [ ! -d "$LP_ROOT" ] && [ "$avail_kb" -lt $((8 * 1024 * 1024)) ]; then
	lp_die "only $((avail_kb / 1024)) MiB free under $LP_CACHE; the root and kernel need ~8 GiB (set LP_CACHE to a bigger disk)"
fi

if [ ! -x "$LP_ROOT/usr/bin/apt-get" ]; then
	lp_say "creating the $LP_SUITE toolchain root with mmdebstrap from $mirror (~2 min)"
	rm -rf --one-file-system "$LP_ROOT.tmp"
	# mmdebstrap mounts /proc, /dev, ... in the new root while it works;
	# lp_mmdebstrap runs it in a private mount namespace (as a user: in
	# its unshare mode), so none outlives it, even on kill.
	# shellcheck disable=SC2086
	if ! lp_mmdebstrap "$LP_ROOT.tmp" --variant=apt --quiet \
		--aptopt="$noexpire" \
		--include="$(echo $packages | tr ' ' ,)" \
		"$LP_SUITE" "$LP_ROOT.tmp" \
		"deb $mirror $LP_SUITE main" "deb $mirror $LP_KERNEL_SUITE main"; then
		rm -rf --one-file-system "$LP_ROOT.tmp"
		lp_die "mmdebstrap failed: is $mirror reachable, and does it serve $LP_SUITE?"
	fi
	mv "$LP_ROOT.tmp" "$LP_ROOT"
fi
printf '%s\n' "$noexpire" >"$LP_ROOT/etc/apt/apt.conf.d/99lp-no-valid-until"

lp_say "refreshing the root's package lists"
"$LP_REPO/scripts/inroot.sh" --net "apt-get update -qq" ||
	lp_die "apt-get update inside the root failed: is $mirror reachable?"

lp_say "installing $packages (where missing)"
"$LP_REPO/scripts/inroot.sh" --net \
	"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null" ||
	lp_die "installing the toolchain packages inside the root failed"

cand=$("$LP_REPO/scripts/inroot.sh" "apt-cache policy $LP_KERNEL_PACKAGE" |
	awk '/Candidate:/ {print $2}')
if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
	newest=$("$LP_REPO/scripts/inroot.sh" "apt-cache pkgnames linux-source-" |
		grep -E '^linux-source-[0-9.]+$' | sort -V | tail -n1 || true)
	lp_die "$LP_KERNEL_PACKAGE is no longer in $LP_SUITE/$LP_KERNEL_SUITE at $mirror; newest available: ${newest:-none}. Update LP_KERNEL_PACKAGE/LP_KERNEL_SERIES in kernel-config/kernel.env"
fi
lp_say "installing $LP_KERNEL_PACKAGE $cand from $LP_KERNEL_SUITE"
"$LP_REPO/scripts/inroot.sh" --net \
	"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t $LP_KERNEL_SUITE $LP_KERNEL_PACKAGE >/dev/null" ||
	lp_die "installing $LP_KERNEL_PACKAGE inside the root failed"

# sparse (see tools.env): apt fetches and verifies the .deb from
# $LP_SPARSE_SUITE with lists of its own, so the root's sources stay trixie.
lp_say "unpacking sparse from $LP_SPARSE_SUITE into /opt/lp-sparse (make lint)"
"$LP_REPO/scripts/inroot.sh" --net "set -e
	d=\$(mktemp -d)
	mkdir -p \$d/lists/partial \$d/cache/archives/partial
	echo 'deb $mirror $LP_SPARSE_SUITE main' >\$d/sources.list
	o='-q -o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false -o Dir::Etc::SourceList='\$d'/sources.list
	   -o Dir::Etc::SourceParts=- -o Dir::State::Lists='\$d'/lists -o Dir::Cache='\$d'/cache'
	apt-get \$o update -qq
	cd \$d && apt-get \$o download sparse 2>/dev/null
	rm -rf /opt/lp-sparse && dpkg-deb -x \$d/sparse_*.deb /opt/lp-sparse
	rm -rf \$d" || lp_die "fetching sparse from $LP_SPARSE_SUITE failed"

verify
printf '%s\n' "$want" >"$stamp"
lp_say "toolchain root ready: $LP_ROOT ($(du -sh "$LP_ROOT" | cut -f1))"
arm64_extras
