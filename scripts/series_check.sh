#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# series_check.sh: what `make series-check` runs: is the series of
# kernel-config/patches/ bisectable? For k = 1..N: patch k applies (for
# real) on top of patches 1..k-1 in a pristine source tree, the kernel
# builds, and booted, its KUnit suites pass: the Rust doctests, the
# patches' examples among them.
#
# One scratch source tree and one O= build directory under
# $LP_CACHE/work/series-check/ serve every step: patch k is applied, and
# make rebuilds what it touched (the first step is a whole build, ~13 min
# on 2 cores; a patch to the kernel crate rebuilds that crate, its
# doctests and the link). The config is the debug kind's, made as
# kernel.sh makes it (allnoconfig with base.config + debug.config as
# KCONFIG_ALLCONFIG, less the options whose Kconfig entry a later patch
# adds: the samples'), and made again after a patch that changes a
# Kconfig file. Every step boots, C-only patches too: scripts/qemu.sh with
# KDIR= the scratch build and a minimal initramfs (busybox and an /init
# that reports and reboots: no modules, no driver), judged by
# scripts/series_judge.py with judge.py's parser. A boot holds
# /tmp/lp-guest.lock (flock), which serializes guests on a shared machine.
#
# The patches are copied first (build/series-check/patches/), so that
# one edited meanwhile does not change the run. Logs per step in
# build/series-check/. The scratch tree (~2.5 GB) is removed at the end
# unless SERIES_KEEP=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

logs=$LP_OUT/series-check
snap=$logs/patches
work_in=$LP_IN_WORK/series-check    # the scratch tree, inside the root
guest=$LP_OUT/guest-series          # qemu.sh's build/guest-KIND, KIND=series

# Inside the root: one subcommand per call (prepare, apply, build).
if [ -n "${LP_CACHE_IN:-}" ]; then
	src=$work_in/src
	bld=$work_in/build
	case ${1:-} in
	prepare)
		rm -rf "$work_in"
		mkdir -p "$src" "$bld"
		lp_say "series-check: unpacking $LP_KERNEL_TARBALL into \$LP_CACHE/work/series-check/src (~30 s)"
		tar -xf "$LP_KERNEL_TARBALL" -C "$src" --strip-components=1 ||
			lp_die "could not unpack $LP_KERNEL_TARBALL"
		# The guest: busybox and an /init that says it got there. The
		# kernel's KUnit suites have run by then; /dev/console may not
		# exist (no mknod without root), so /init writes to ttyS0.
		rm -rf "$guest"
		mkdir -p "$guest/rootfs"/{bin,dev,proc,sys}
		cp /bin/busybox "$guest/rootfs/bin/busybox"
		cat >"$guest/rootfs/init" <<-'EOF'
			#!/bin/busybox sh
			/bin/busybox mount -t devtmpfs devtmpfs /dev
			exec >/dev/ttyS0 2>&1
			echo "lp-init: done"
			/bin/busybox reboot -f
		EOF
		chmod 0755 "$guest/rootfs/init"
		(cd "$guest/rootfs" && find . -print0 | cpio --null -o -H newc --quiet) |
			gzip -1 >"$guest/initramfs.cpio.gz"
		;;
	apply)
		patch -d "$src" -p1 --forward --batch --no-backup-if-mismatch <"$snap/$2"
		;;
	build)
		name=$2
		log=$logs/${name%.patch}.build.log
		jobs=${JOBS:-$(nproc)}
		: >"$log"
		if [ ! -f "$bld/.config" ] || grep -qE '^diff --git a/(\S*/)?Kconfig' "$snap/$name"; then
			mapfile -t frags < <(lp_kind_fragments debug)
			lp_say "  configuring: allnoconfig + $(printf '%s\n' "${frags[@]##*/}" | paste -sd+ | sed 's/+/ + /g')"
			# The options whose Kconfig entry a later patch of the series
			# adds (the samples') cannot be set yet: left out, and said.
			later=$(for p in "$snap"/*.patch; do
				if [[ ${p##*/} > $name ]]; then cat "$p"; fi
			done | sed -n 's/^+\(menu\)\{0,1\}config \([A-Za-z0-9_]*\)$/\2/p' | sort -u)
			cat "${frags[@]}" |
				awk -v later="$later" 'BEGIN { n = split(later, l, "\n"); for (i = 1; i <= n; i++) skip["CONFIG_" l[i]] = 1 }
				{ o = $0; sub(/^# /, "", o); sub(/[= ].*/, "", o) }
				!(o in skip)' >"$bld/lp-fragments.config"
			[ -z "$later" ] ||
				lp_say "  left out until a later patch adds them: CONFIG_${later//$'\n'/ CONFIG_}"
			make -C "$src" -s O="$bld" LLVM=1 KCONFIG_ALLCONFIG="$bld/lp-fragments.config" \
				allnoconfig >>"$log" 2>&1 || lp_die "allnoconfig failed, see $log"
			# Each option's last line in the fragments must survive Kconfig.
			dropped=$(awk 'FNR == NR {
				if (match($0, /^CONFIG_[A-Za-z0-9_]+=/)) want[substr($0, 1, RLENGTH - 1)] = $0
				else if ($0 ~ /^# CONFIG_[A-Za-z0-9_]+ is not set$/) want[$2] = ""
				next
			}
			match($0, /^CONFIG_[A-Za-z0-9_]+=/) { have[substr($0, 1, RLENGTH - 1)] = $0 }
			END {
				for (o in want)
					if (want[o] == "" ? (o in have) : have[o] != want[o])
						print "  " (want[o] == "" ? "# " o " is not set" : want[o])
			}' "$bld/lp-fragments.config" "$bld/.config")
			[ -z "$dropped" ] || {
				printf '%s\n' "$dropped" >&2
				lp_die "the options above did not survive Kconfig"
			}
		fi
		lp_make_watched "  $name" "$log" -C "$src" O="$bld" LLVM=1 -j"$jobs"
		[ -f "$bld/arch/x86/boot/bzImage" ] || lp_die "make succeeded but left no bzImage"
		;;
	*) lp_die "usage (inside the root): series_check.sh prepare | apply PATCH | build PATCH" ;;
	esac
	exit 0
fi

# On the host: the steps, the boots (the guest lock is the host's /tmp).
lp_need_root "$@"
S=$LP_REPO/scripts
"$S/toolchain.sh"
mkdir -p "$LP_WORK"
exec 8>"$LP_WORK/series-check.lock"
flock -n 8 || lp_die "another make series-check holds $LP_WORK/series-check.lock"
work=$LP_WORK/series-check

rm -rf "$logs"
mkdir -p "$snap"
names=()
for p in "$LP_REPO"/kernel-config/patches/*.patch; do
	[ -e "$p" ] || continue
	cp "$p" "$snap/"
	names+=("${p##*/}")
done
n=${#names[@]}
[ "$n" -gt 0 ] || lp_die "no kernel-config/patches/*.patch: nothing to check"

inroot() { "$S/inroot.sh" "$(printf '%q ' scripts/series_check.sh "$@")"; }
cleanup() {
	if [ "${SERIES_KEEP:-0}" = 1 ]; then
		lp_say "series-check: SERIES_KEEP=1: the scratch tree stays in $work"
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT

start=$SECONDS
lp_say "series-check: $n patches; each applied, built (debug config) and booted in turn in $work"
inroot prepare || lp_die "could not prepare the scratch tree (above)"

rows=()
ok=0
waited=0
for k in $(seq "$n"); do
	name=${names[k - 1]}
	stem=${name%.patch}
	t0=$SECONDS
	built=- kunit=- tb=- tq=- tw=-
	lp_say "[$k/$n] $name: applying (at +$((SECONDS - start)) s)"
	if ! inroot apply "$name" >"$logs/$stem.apply.log" 2>&1; then
		sed 's/^/  /' "$logs/$stem.apply.log" >&2
		lp_say "[$k/$n] $name does not apply on top of the patches before it"
		rows+=("$name no - - - - - $((SECONDS - t0))")
		for j in $(seq $((k + 1)) "$n"); do
			rows+=("${names[j - 1]} (not-tried) - - - - - -")
		done
		break
	fi
	lp_say "[$k/$n] building$([ "$k" -gt 1 ] || echo ', from scratch (~13 min on 2 cores)')"
	t1=$SECONDS
	if inroot build "$name"; then
		built=yes
		tb=$((SECONDS - t1))
		objs=$(grep -cE '^  (CC|AS|RUSTC|RUSTDOC|HOSTCC|HOSTRUSTC) ' "$logs/$stem.build.log" || true)
		lp_say "[$k/$n] built in $tb s ($objs objects compiled); booting its KUnit suites"
		# Guests take turns on this machine (another engineer's too).
		t2=$SECONDS
		exec 7>/tmp/lp-guest.lock
		if ! flock -n 7; then
			lp_say "[$k/$n] waiting for /tmp/lp-guest.lock (another guest is running)"
			flock 7
		fi
		tw=$((SECONDS - t2))
		waited=$((waited + tw))
		t2=$SECONDS
		KDIR=$work/build "$S/qemu.sh" kunit series || true
		exec 7>&-
		cp "$guest/kunit/console.log" "$logs/$stem.console.log" 2>/dev/null || true
		"$S/inroot.sh" "$(printf '%q ' python3 scripts/series_judge.py \
			"build/guest-series/kunit" "$work_in/src" "build/series-check/$stem.counts")" |
			sed 's/^/  /' || true
		tq=$((SECONDS - t2))
		if [ -s "$logs/$stem.counts" ]; then
			read -r kp kf _ <"$logs/$stem.counts"
			kunit=$kp/$kf
			[ "$kf" -eq 0 ] && [ "$kp" -gt 0 ] && ok=$((ok + 1))
		else
			kunit=none
		fi
	else
		built=no
		tb=$((SECONDS - t1))
	fi
	rows+=("$name yes $built $kunit $tb $tw $tq $((SECONDS - t0))")
	lp_say "[$k/$n] $name: applied yes, built $built, KUnit passed/failed $kunit, $((SECONDS - t0)) s"
done

echo "series-check: every prefix of the series applied to a pristine $LP_KERNEL_PACKAGE, built, booted"
row='%-64s %-7s %-5s %-15s %7s %7s %7s %7s\n'
# shellcheck disable=SC2059 # the format is the row's
printf "$row" patch applied built 'KUnit pass/fail' 'build s' 'wait s' 'boot s' 'total s'
for r in "${rows[@]}"; do
	# shellcheck disable=SC2059,SC2086 # the format; the row's fields
	printf "$row" $r
done
echo "series-check: $ok of $n steps passed in $((SECONDS - start)) s, of which $waited s waiting for other guests (/tmp/lp-guest.lock); logs: ${logs#"$LP_REPO"/}/"
[ "$ok" -eq "$n" ]
