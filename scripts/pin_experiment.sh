#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# pin_experiment.sh [KIND...]: make pin-experiment. Does a slow put of
# KREF_MUTEX or KREF_LOCK need its owner pin when nothing but the lock's
# own unlock code can touch the lock after the unlock? For each kernel
# KIND (default: debug rt) and each variant (pinned, unpinned), copies the
# checkout to build/pin-experiment/KIND-VARIANT/src, applies
# shared-tests/experiments/pin/window.patch (and, unpinned, unpin.patch),
# builds both modules, boots the guest with only
# dev.*.pin_experiment_final_put_meets_the_unlock and prints one table row
# per module and flavor: whether KASAN reported, and how many racing final
# puts met the window (queued on the lock the slow put held after its
# decrement that was not the last, then handed it by that put's unlock).
# A kernel not built yet is built first (scripts/kernel.sh KIND, cached).
#
# A KASAN report stops the guest (panic_on_warn): the rows of a run that
# reported show what the run printed before it. Logs:
# build/pin-experiment/KIND-VARIANT/log, the table
# build/pin-experiment/table.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(debug rt)
xdir=$LP_REPO/shared-tests/experiments/pin
out=$LP_OUT/pin-experiment
table=$out/table.md
tests='dev.*.pin_experiment_final_put_meets_the_unlock'
timeout=${TIMEOUT:-600}

"$LP_REPO/scripts/toolchain.sh"
for kind in "${kinds[@]}"; do
	"$LP_REPO/scripts/kernel.sh" "$kind"
done
command -v git >/dev/null || lp_die "git is needed to copy the checkout and apply the patches"

# copy_tree DST: the checkout's tracked and untracked-not-ignored files.
copy_tree() {
	mkdir -p "$1"
	git -C "$LP_REPO" ls-files -co --exclude-standard -z |
		while IFS= read -r -d '' f; do
			[ -e "$LP_REPO/$f" ] && printf '%s\0' "$f"
		done |
		tar -C "$LP_REPO" --null -T - -cf - | tar -C "$1" -xf -
}

# run KIND VARIANT: build and boot one variant; appends its rows.
run() {
	local kind=$1 variant=$2 dir=$out/$1-$2 src p kasan mod flavor line met racer pin
	src=$dir/src
	rm -rf "$dir"
	mkdir -p "$dir"
	: >"$dir/log"
	copy_tree "$src"
	local patches=("$xdir/window.patch")
	[ "$variant" = pinned ] || patches+=("$xdir/unpin.patch")
	for p in "${patches[@]}"; do
		(cd "$src" && GIT_CEILING_DIRECTORIES=$dir git apply "$p") >>"$dir/log" 2>&1 ||
			lp_die "$(basename "$p") does not apply (see $dir/log)"
	done
	lp_say "$kind, $variant: building the modules and booting with $tests"
	"$src/scripts/modules.sh" "$kind" >>"$dir/log" 2>&1 ||
		lp_die "$kind, $variant: the modules do not build (see $dir/log)"
	"$src/scripts/initramfs.sh" "$kind" >>"$dir/log" 2>&1 ||
		lp_die "$kind, $variant: the guest does not build (see $dir/log)"
	TESTS=$tests TIMEOUT=$timeout "$src/scripts/qemu.sh" check "$kind" >>"$dir/log" 2>&1 ||
		lp_die "$kind, $variant: the guest could not be run (see $dir/log)"
	TESTS=$tests "$src/scripts/judge.sh" check "$kind" >"$dir/judge.out" 2>&1 || true
	local con=$src/build/guest-$kind/check/console.log ktap=$src/build/guest-$kind/check/ktap.log
	kasan=$(grep -m1 -oE 'BUG: KASAN: [a-z-]+ in [A-Za-z0-9_.]+' "$con" || true)
	lp_say "  judge: $(tail -n1 "$dir/judge.out")${kasan:+; $kasan}"
	for mod in c rust; do
		for flavor in 3:KREF_MUTEX 4:KREF_LOCK; do
			# A test's log lines come before its result line.
			line=$(awk -v m="$mod" -v f="${flavor%%:*}" '
				/pin experiment: flavor / { sub(/^.*pin experiment: /, ""); seen[n++] = $0; next }
				/^(not )?ok [0-9]+ dev\./ {
					if (index($0, "dev." m ".pin_experiment"))
						for (i = 0; i < n; i++)
							if (index(seen[i], "flavor " f ":") == 1) { print seen[i]; exit }
					n = 0
				}' "$ktap" 2>/dev/null || true)
			met=$(printf '%s\n' "$line" | sed -nE 's/.*: ([0-9]+) of ([0-9]+) racing final puts met the window.*/\1 of \2/p')
			racer=$(printf '%s\n' "$line" | sed -nE 's/.*the racer freed the parent ([0-9]+) times, the pin ([0-9]+).*/\1/p')
			pin=$(printf '%s\n' "$line" | sed -nE 's/.*the racer freed the parent ([0-9]+) times, the pin ([0-9]+).*/\2/p')
			rows+=("| $mod | ${flavor#*:} | $kind | $variant | ${kasan:-none} | ${met:-not reported} | ${racer:--} | ${pin:--} | $(tail -n1 "$dir/judge.out") |")
		done
	done
}

main() {
	local kind variant start=$SECONDS
	rows=()
	mkdir -p "$out"
	for kind in "${kinds[@]}"; do
		for variant in pinned unpinned; do
			run "$kind" "$variant"
		done
	done
	{
		echo "| module | flavor | kernel | owner pin | KASAN | racing final puts that met the window | parent freed by the racer | by the pin | judge |"
		echo "|---|---|---|---|---|---|---|---|---|"
		printf '%s\n' "${rows[@]}"
		echo
		echo "pin experiment: ${#rows[@]} rows in $((SECONDS - start)) s"
	} >"$table"
	echo
	cat "$table"
}

main
