#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# series_check.sh: what `make series-check` runs: is each series of
# kernel-config/series/ bisectable on its own base? For each series (a
# series after those it requires), its base is the pristine tree plus the
# series it requires; for k = 1..N: patch k applies with git am on top of
# the base and patches 1..k-1, the kernel builds, and booted, its KUnit
# suites pass: the Rust doctests, the patches' examples among them.
#
# One scratch source tree and one O= build directory under
# $LP_CACHE/work/series-check/ serve every step of every series. The
# scratch tree is a git repository of the pristine tarball (git on the
# host; the toolchain root has none): a patch is applied with git am, as
# a maintainer applies it, and going back to another series' base is
# git reset --hard + git clean, which rewrites only the files that differ,
# so make rebuilds only what changed (the first step is a whole build,
# ~13 min on 2 cores; a patch to the kernel crate rebuilds that crate,
# its doctests and the link). A series whose base is the tree as the
# previous series left it starts without a reset. The config is the
# debug kind's, made as kernel.sh makes it (allnoconfig with base.config +
# debug.config as KCONFIG_ALLCONFIG, less the options whose Kconfig entry
# an unapplied patch adds: the samples'), and made again at each series'
# first step and after a patch that changes a Kconfig file. Every step
# boots, C-only patches too: scripts/qemu.sh with KDIR= the scratch build
# and a minimal initramfs (busybox and an /init that reports and reboots:
# no modules, no driver), judged by scripts/series_judge.py with
# judge.py's parser. A boot holds /tmp/lp-guest.lock (flock), which
# serializes guests on a shared machine.
#
# The patches and the split are copied first (build/series-check/), so
# that one edited meanwhile does not change the run. Logs per step in
# build/series-check/SERIES/. The scratch tree (~3 GB with its git
# objects) is removed at the end unless SERIES_KEEP=1, and a kept one is
# reused by the next run (reset to pristine; its build directory rebuilds
# only what differs). SERIES=NAME,... checks only those series (on their
# bases all the same). Series that change only C are checked first, those
# that change the build (scripts/) last, to rebuild less.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

logs=$LP_OUT/series-check
snap=$logs/patches
work_in=$LP_IN_WORK/series-check    # the scratch tree, inside the root
guest=$LP_OUT/guest-series          # qemu.sh's build/guest-KIND, KIND=series

# Inside the root: one subcommand per call (prepare, build).
if [ -n "${LP_CACHE_IN:-}" ]; then
	src=$work_in/src
	bld=$work_in/build
	case ${1:-} in
	prepare)
		# prepare fresh|reuse: unpack the tarball (fresh), and the guest.
		if [ "$2" = fresh ]; then
			rm -rf "$work_in"
			mkdir -p "$src" "$bld"
			lp_say "series-check: unpacking $LP_KERNEL_TARBALL into \$LP_CACHE/work/series-check/src (~30 s)"
			tar -xf "$LP_KERNEL_TARBALL" -C "$src" --strip-components=1 ||
				lp_die "could not unpack $LP_KERNEL_TARBALL"
		fi
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
	build)
		# build SERIES PATCH fresh|again: the applied patches are listed
		# in $work_in/applied; "fresh" (a series' first step) configures.
		series=$2 name=$3 when=$4
		log=$logs/$series/${name%.patch}.build.log
		jobs=${JOBS:-$(nproc)}
		: >"$log"
		# The options whose Kconfig entry a patch not applied now adds
		# (the samples' of a later patch or of another series) cannot be
		# set: left out, and said.
		later=$(for p in "$snap"/*.patch; do
			grep -qxF "${p##*/}" "$work_in/applied" || cat "$p"
		done | sed -n 's/^+\(menu\)\{0,1\}config \([A-Za-z0-9_]*\)$/\2/p' | sort -u)
		if [ "$when" = fresh ] || [ ! -f "$bld/.config" ] ||
			grep -qE '^diff --git a/(\S*/)?Kconfig' "$snap/$name"; then
			mapfile -t frags < <(lp_kind_fragments debug)
			lp_say "  configuring: allnoconfig + $(printf '%s\n' "${frags[@]##*/}" | paste -sd+ | sed 's/+/ + /g')"
			cat "${frags[@]}" |
				awk -v later="$later" 'BEGIN { n = split(later, l, "\n"); for (i = 1; i <= n; i++) skip["CONFIG_" l[i]] = 1 }
				{ o = $0; sub(/^# /, "", o); sub(/[= ].*/, "", o) }
				!(o in skip)' >"$bld/lp-fragments.config"
			[ -z "$later" ] ||
				lp_say "  left out until a patch that adds them is applied: CONFIG_${later//$'\n'/ CONFIG_}"
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
	*) lp_die "usage (inside the root): series_check.sh prepare fresh|reuse | build SERIES PATCH fresh|again" ;;
	esac
	exit 0
fi

# On the host: the split, git, the steps, the boots (the guest lock is
# the host's /tmp).
lp_need_root "$@"
S=$LP_REPO/scripts
command -v git >/dev/null ||
	lp_die "make series-check keeps its scratch tree in git (on the host): install git"
"$S/toolchain.sh"
mkdir -p "$LP_WORK"
exec 8>"$LP_WORK/series-check.lock"
flock -n 8 || lp_die "another make series-check holds $LP_WORK/series-check.lock"
work=$LP_WORK/series-check
inroot() { "$S/inroot.sh" "$(printf '%q ' "$@")"; }

rm -rf "$logs"
mkdir -p "$snap"
n_all=0
for p in "$LP_REPO"/kernel-config/patches/*.patch; do
	[ -e "$p" ] || continue
	cp "$p" "$snap/"
	n_all=$((n_all + 1))
done
[ "$n_all" -gt 0 ] || lp_die "no kernel-config/patches/*.patch: nothing to check"
cp -r "$LP_REPO/kernel-config/series" "$logs/split"
# The split, checked: every listed patch exists, every patch is in one
# series (series.py says which is not, and stops).
inroot python3 scripts/series.py plan --series-dir build/series-check/split \
	--patches build/series-check/patches >"$logs/plan" ||
	lp_die "the split of kernel-config/patches/ into kernel-config/series/ is broken (above)"
declare -A requires=() members=()
lp_read_plan "$logs/plan"
# The order of the checks, for fewer rebuilds: series that change only C
# first, then those that change the Rust crates, then those that change
# the build (scripts/: a changed target.json rebuilds every Rust object),
# a series never before one it requires (a series' rank is at least its
# requirements'; plan order, a topological one, breaks ties).
declare -A rank=()
for s in "${order[@]}"; do
	read -ra m <<<"${members[$s]}"
	k=0
	for p in "${m[@]}"; do
		if grep -qE '^diff --git a/scripts/' "$snap/$p"; then
			k=2
		elif grep -qE '^diff --git a/(rust|samples/rust)/' "$snap/$p" && [ "$k" -lt 1 ]; then
			k=1
		fi
	done
	for r in ${requires[$s]//,/ }; do
		[ "${rank[$r]}" -le "$k" ] || k=${rank[$r]}
	done
	rank[$s]=$k
done
mapfile -t order < <(for i in "${!order[@]}"; do
	printf '%s %03d %s\n' "${rank[${order[i]}]}" "$i" "${order[i]}"
done | sort -k1,1n -k2,2n | cut -d' ' -f3)
only=${SERIES:-}
if [ -n "$only" ]; then
	for s in ${only//,/ }; do
		[ -n "${members[$s]+set}" ] || lp_die "SERIES=$only: no series $s in kernel-config/series/ (${order[*]})"
	done
fi

export GIT_DIR=$work/src/.git GIT_WORK_TREE=$work/src
git_q() { git -C "$work/src" -c gc.auto=0 -c advice.detachedHead=false -c user.name=series-check \
	-c user.email=series-check@lockless-parity.invalid "$@"; }
cleanup() {
	if [ "${SERIES_KEEP:-0}" = 1 ]; then
		lp_say "series-check: SERIES_KEEP=1: the scratch tree stays in $work"
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT

start=$SECONDS
lp_say "series-check: ${#order[@]} series, $n_all patches (${order[*]}); each prefix applied, built (debug config) and booted in $work"
# A scratch tree kept by SERIES_KEEP=1 from the same tarball is reused:
# back to pristine, its build directory rebuilds only what differs.
stamp="$LP_KERNEL_PACKAGE $(stat -c %s "$LP_ROOT$LP_KERNEL_TARBALL" 2>/dev/null || echo unknown)"
if [ -f "$work/.lp-stamp" ] && [ "$(cat "$work/.lp-stamp")" = "$stamp" ] &&
	git_q rev-parse -q --verify lp-pristine >/dev/null 2>&1; then
	lp_say "series-check: reusing the scratch tree a SERIES_KEEP=1 run left in $work: back to pristine (git reset --hard)"
	git_q am --abort >/dev/null 2>&1 || true
	git_q reset -q --hard lp-pristine || lp_die "git reset of the kept scratch tree failed: remove $work"
	git_q clean -q -fdx || lp_die "git clean of the kept scratch tree failed: remove $work"
	inroot scripts/series_check.sh prepare reuse || lp_die "could not prepare the guest (above)"
else
	inroot scripts/series_check.sh prepare fresh || lp_die "could not prepare the scratch tree (above)"
	lp_say "series-check: the pristine tree into git, to go back to it between series (~1 min)"
	t0=$SECONDS
	git_q init -q || lp_die "git init in $work/src failed"
	# --force: the tarball's .gitignore ignores most of the tree.
	git_q add -A --force . || lp_die "git add of the pristine tree failed"
	git_q commit -q -m "$LP_KERNEL_PACKAGE, pristine" || lp_die "git commit of the pristine tree failed"
	git_q tag lp-pristine
	printf '%s\n' "$stamp" >"$work/.lp-stamp"
	lp_say "series-check: pristine tree committed in $((SECONDS - t0)) s"
fi
: >"$work/applied"

rows=()
summary=()
ok_all=0
steps_all=0
waited=0
first=1
[ ! -f "$work/build/vmlinux" ] || first=0
for s in "${order[@]}"; do
	if [ -n "$only" ] && ! [[ ,$only, == *,$s,* ]]; then
		continue
	fi
	read -ra list <<<"${members[$s]}"
	n=${#list[@]}
	steps_all=$((steps_all + n))
	mkdir -p "$logs/$s"
	mapfile -t want < <(lp_plan_base "$s")
	ts=$SECONDS
	ok=0
	# Back to this series' base unless the tree is already there.
	if [ "$(cat "$work/applied")" != "$(printf '%s\n' "${want[@]}" | sed '/^$/d')" ]; then
		lp_say "== $s: back to the pristine tree (git reset --hard)"
		git_q reset -q --hard lp-pristine || lp_die "git reset of the scratch tree failed"
		git_q clean -q -fdx || lp_die "git clean of the scratch tree failed"
		: >"$work/applied"
	fi
	if [ ${#want[@]} -gt 0 ] && [ ! -s "$work/applied" ]; then
		lp_say "== $s: its base: the pristine tree + ${requires[$s]//,/, } (${#want[@]} patches, git am)"
		for p in "${want[@]}"; do
			git_q am -q "$snap/$p" >"$logs/$s/base.am.log" 2>&1 || {
				sed 's/^/  /' "$logs/$s/base.am.log" >&2
				git_q am --abort >/dev/null 2>&1 || true
				lp_die "$p, of the series $s requires, does not apply: check that series first"
			}
			printf '%s\n' "$p" >>"$work/applied"
		done
	fi
	lp_say "== $s: $n patch$([ "$n" -eq 1 ] || echo es) on $([ ${#want[@]} -eq 0 ] && echo "the pristine tree" || echo "the pristine tree + ${requires[$s]//,/, }")"
	when=fresh
	for k in $(seq "$n"); do
		name=${list[k - 1]}
		stem=${name%.patch}
		t0=$SECONDS
		built=- kunit=- tb=- tq=- tw=-
		lp_say "[$s $k/$n] $name: applying (git am; at +$((SECONDS - start)) s)"
		if ! git_q am "$snap/$name" >"$logs/$s/$stem.apply.log" 2>&1; then
			sed 's/^/  /' "$logs/$s/$stem.apply.log" >&2
			git_q am --abort >/dev/null 2>&1 || true
			lp_say "[$s $k/$n] $name does not apply on top of the patches before it"
			rows+=("$s $name no - - - - - $((SECONDS - t0))")
			for j in $(seq $((k + 1)) "$n"); do
				rows+=("$s ${list[j - 1]} (not-tried) - - - - - -")
			done
			# The tree is now no known base: the next series resets it.
			echo "(broken)" >"$work/applied"
			break
		fi
		printf '%s\n' "$name" >>"$work/applied"
		lp_say "[$s $k/$n] building$([ "$first" = 0 ] || echo ', from scratch (~13 min on 2 cores)')"
		first=0
		t1=$SECONDS
		if inroot scripts/series_check.sh build "$s" "$name" "$when"; then
			when=again
			built=yes
			tb=$((SECONDS - t1))
			objs=$(grep -cE '^  (CC|AS|RUSTC|RUSTDOC|HOSTCC|HOSTRUSTC) ' "$logs/$s/$stem.build.log" || true)
			lp_say "[$s $k/$n] built in $tb s ($objs objects compiled); booting its KUnit suites"
			# Guests take turns on this machine (another engineer's too).
			# flock() needs only a read-only descriptor: the first user
			# creates the file for everyone (0666), the others open it
			# without O_CREAT, which /tmp's sticky bit refuses them.
			t2=$SECONDS
			[ -e /tmp/lp-guest.lock ] || (umask 0 && : >>/tmp/lp-guest.lock) ||
				lp_die "cannot create /tmp/lp-guest.lock"
			exec 7</tmp/lp-guest.lock
			if ! flock -n 7; then
				lp_say "[$s $k/$n] waiting for /tmp/lp-guest.lock (another guest is running)"
				flock 7
			fi
			tw=$((SECONDS - t2))
			waited=$((waited + tw))
			t2=$SECONDS
			KDIR=$work/build "$S/qemu.sh" kunit series || true
			exec 7>&-
			cp "$guest/kunit/console.log" "$logs/$s/$stem.console.log" 2>/dev/null || true
			inroot python3 scripts/series_judge.py "build/guest-series/kunit" "$work_in/src" \
				"build/series-check/$s/$stem.counts" | sed 's/^/  /' || true
			tq=$((SECONDS - t2))
			if [ -s "$logs/$s/$stem.counts" ]; then
				read -r kp kf _ <"$logs/$s/$stem.counts"
				kunit=$kp/$kf
				[ "$kf" -eq 0 ] && [ "$kp" -gt 0 ] && ok=$((ok + 1))
			else
				kunit=none
			fi
		else
			built=no
			tb=$((SECONDS - t1))
			when=fresh
		fi
		rows+=("$s $name yes $built $kunit $tb $tw $tq $((SECONDS - t0))")
		lp_say "[$s $k/$n] $name: applied yes, built $built, KUnit passed/failed $kunit, $((SECONDS - t0)) s"
	done
	ok_all=$((ok_all + ok))
	summary+=("$s $ok/$n $([ "$ok" -eq "$n" ] && echo passed || echo FAILED) $((SECONDS - ts)) ${requires[$s]:-(pristine)}")
	lp_say "== $s: $ok of $n steps passed in $((SECONDS - ts)) s"
done

echo "series-check: every prefix of each series applied (git am) to a pristine $LP_KERNEL_PACKAGE + the series it requires, built, booted"
row='%-18s %-58s %-7s %-5s %-9s %7s %6s %6s %7s\n'
# shellcheck disable=SC2059 # the format is the row's
printf "$row" series patch applied built KUnit 'build s' 'wait s' 'boot s' 'total s'
for r in "${rows[@]}"; do
	# shellcheck disable=SC2059,SC2086 # the format; the row's fields
	printf "$row" $r
done
echo
srow='%-18s %-6s %-7s %7s  %s\n'
# shellcheck disable=SC2059 # the format is the row's
printf "$srow" series steps result 'time s' 'base: 7.3 +'
for r in "${summary[@]}"; do
	# shellcheck disable=SC2059,SC2086 # the format; the row's fields
	printf "$srow" $r
done
echo "series-check: $ok_all of $steps_all steps passed in $((SECONDS - start)) s, of which $waited s waiting for other guests (/tmp/lp-guest.lock); logs: ${logs#"$LP_REPO"/}/"
[ "$ok_all" -eq "$steps_all" ]
