#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kernel.sh KIND: build (once per config hash) the guest kernel of KIND
# ("debug" for make check) from the root's Debian source tarball.
#
# Source: $LP_CACHE/work/src-<hash of kernel.env + patches>, shared by every
# kind. Build: $LP_CACHE/work/kernel-KIND (O=), rebuilt when the hash of
# kernel.env + patches + base.config + KIND.config changes.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kind=${1:-debug}
[ -f "$LP_REPO/kernel-config/$kind.config" ] ||
	lp_die "no kernel-config/$kind.config: unknown kernel kind '$kind'"
# Rust under KCSAN (patch 0007) needs rustc's thread sanitizer, which its
# aarch64 kernel target does not list.
[ "$kind" != kcsan ] || [ "$LP_ARCH" = x86_64 ] ||
	lp_die "KIND=kcsan is x86_64 only: rustc's aarch64-unknown-none-softfloat target has no thread sanitizer, so Rust cannot be built for KCSAN on $LP_ARCH (patch 0007 is gated on CONFIG_X86_64)"

if [ -z "${LP_CACHE_IN:-}" ]; then
	# Host side: decide whether there is anything to do.
	lp_need_root "$@"
	# One builder per kernel kind: a second make check waits, then finds
	# the kernel up to date. The lock is inherited by the build below.
	mkdir -p "$LP_WORK"
	exec 9>"$LP_WORK/kernel-$kind$LP_KSUF.lock"
	if ! flock -n 9; then
		lp_say "kernel ($kind$LP_KSUF): another build holds $LP_WORK/kernel-$kind$LP_KSUF.lock, waiting"
		flock 9
	fi
	khash=$(lp_kernel_hash "$kind")
	kdir=$(lp_kdir_host "$kind")
	if [ -f "$kdir/.lp-stamp" ] && [ "$(cat "$kdir/.lp-stamp")" = "$khash" ] &&
		[ -f "$kdir/$LP_KIMAGE" ]; then
		lp_say "kernel ($kind$LP_KSUF) up to date: $kdir"
		exit 0
	fi
	exec "$LP_REPO/scripts/inroot.sh" "scripts/kernel.sh $kind"
fi

# Inside the root.
shash=$(lp_src_hash)
khash=$(lp_kernel_hash "$kind")
src=$LP_CACHE_IN/src-$shash
kdir=$(lp_kdir_root "$kind")
log=$kdir.log
jobs=${JOBS:-$(nproc)}

if [ ! -f "$src/.lp-ready" ]; then
	lp_say "unpacking $LP_KERNEL_TARBALL (~15 s)"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -xf "$LP_KERNEL_TARBALL" -C "$src.tmp" --strip-components=1 ||
		lp_die "could not unpack $LP_KERNEL_TARBALL"
	for p in "$LP_REPO"/kernel-config/patches/*.patch; do
		[ -e "$p" ] || continue
		lp_say "applying patch $(basename "$p")"
		patch -d "$src.tmp" -p1 --forward --batch --quiet <"$p" ||
			lp_die "patch $(basename "$p") does not apply to $LP_KERNEL_PACKAGE: refresh it"
	done
	touch "$src.tmp/.lp-ready"
	mv "$src.tmp" "$src"
fi

# A build directory made from another source tree cannot be reused.
if [ -f "$kdir/.lp-src" ] && [ "$(cat "$kdir/.lp-src")" != "$shash" ]; then
	lp_say "kernel ($kind): source changed, starting a fresh build directory"
	rm -rf "$kdir"
fi
mkdir -p "$kdir"
echo "$shash" >"$kdir/.lp-src"
rm -f "$kdir/.lp-stamp"

# Older sources are dead weight (~1.5 GB each), unless a kernel of
# another kind was built from one: a check on that kind may be running,
# and its judge reads kunit_parser from that tree. This kind's kernel now
# names $src, whether this run unpacked it or another kind had, so the
# tree it was built from before goes unless another kind names it too.
for old in "$LP_CACHE_IN"/src-*; do
	[ "$old" = "$src" ] && continue
	grep -qsxF "${old##*/src-}" "$LP_CACHE_IN"/kernel-*/.lp-src ||
		rm -rf "$old"
done

cd "$src"
mk() { make -s O="$kdir" LLVM=1 "$@"; }
[ "$LP_ARCH" = x86_64 ] || lp_say "kernel ($kind): ARCH=$LP_KARCH, build directory ${kdir##*/}"

mapfile -t frags < <(lp_kind_fragments "$kind")
lp_say "kernel ($kind): configuring (allnoconfig + $(printf '%s\n' "${frags[@]##*/}" | paste -sd+ | sed 's/+/ + /g'))"
# One Kconfig pass: allnoconfig with the fragments as KCONFIG_ALLCONFIG
# turns off everything they do not ask for (with EXPERT=y in base.config,
# that includes io_uring, the block layer and the other default-y options
# a test guest never uses). allnoconfig + merge_config.sh + olddefconfig
# took three passes (~60 s) and left those options on.
cat "${frags[@]}" >"$kdir/lp-fragments.config"
mk KCONFIG_ALLCONFIG="$kdir/lp-fragments.config" allnoconfig >"$log" 2>&1 ||
	lp_die "allnoconfig with the $kind fragments failed, see $log"

# Kconfig drops what it cannot satisfy, silently: refuse that. A later
# fragment may override an earlier one's line for the same option (as
# Kconfig itself does): only each option's last line is checked.
dropped=()
while IFS= read -r line; do
	case $line in
	CONFIG_*=*)
		grep -qxF -- "$line" "$kdir/.config" || dropped+=("$line")
		;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }
		opt=${opt%% *}
		grep -q "^$opt=" "$kdir/.config" && dropped+=("$line")
		;;
	esac
done < <(sed -n -e 's/^\(CONFIG_[A-Za-z0-9_]*\)=.*/\1 &/p' \
	-e 's/^# \(CONFIG_[A-Za-z0-9_]*\) is not set$/\1 &/p' "$kdir/lp-fragments.config" |
	tac | awk '!seen[$1]++' | tac | cut -d' ' -f2-)
if [ ${#dropped[@]} -gt 0 ]; then
	printf '  %s\n' "${dropped[@]}" >&2
	# CONFIG_RUST depends on RUST_IS_AVAILABLE: say why it is not.
	if printf '%s\n' "${dropped[@]}" | grep -qx 'CONFIG_RUST=y'; then
		mk rustavailable >>"$log" 2>&1 || true
		tail -n 5 "$log" >&2
		lp_die "Rust is not available to this kernel build (make rustavailable above; log: $log)"
	fi
	lp_die "kernel ($kind): the options above did not survive Kconfig (unmet dependencies); fix the fragments"
fi

lp_say "kernel ($kind): building with LLVM=1 -j$jobs (~10 min cold; log: ${log/#$LP_CACHE_IN/\$LP_CACHE/work})"
start=$SECONDS
lp_make_watched "kernel ($kind)" "$log" O="$kdir" LLVM=1 -j"$jobs"
echo "$khash" >"$kdir/.lp-stamp"
lp_say "kernel ($kind) built in $((SECONDS - start)) s: $kdir/$LP_KIMAGE"
