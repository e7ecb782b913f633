#!/bin/bash
# check.sh: what `make check` runs. Bootstraps whatever is missing
# (toolchain root, debug kernel), builds both modules and the guest, boots
# it under QEMU, judges the run, boots it again for the bench's smoke run
# (BENCH_QUICK=1: every cell must give a sane number), lints, runs the
# litmus tests, and prints the total as the last line: "N passed, N
# failed". Exit status is non-zero on any failure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

S=$LP_REPO/scripts
results=$LP_OUT/results
kind=debug
mkdir -p "$results"
rm -f "$results"/*.counts
extra_fail=0
start=$SECONDS

# Each step leaves "PASSED FAILED [SKIPPED]" in results/STEP.counts.
total() {
	local p=0 f=$extra_fail s=0 a b c d
	for c in "$results"/*.counts; do
		[ -e "$c" ] || continue
		read -r a b d <"$c"
		p=$((p + a))
		f=$((f + b))
		s=$((s + ${d:-0}))
	done
	lp_say "make check took $((SECONDS - start)) s"
	if [ "$s" -gt 0 ]; then
		echo "$p passed, $f failed, $s skipped"
	else
		echo "$p passed, $f failed"
	fi
	[ "$f" -eq 0 ] && [ "$p" -gt 0 ]
}

# A step the rest depends on: on failure, count it and stop here.
need() {
	local what=$1
	shift
	if ! "$@"; then
		echo "FAIL $what: cannot go on (see the error above)"
		extra_fail=$((extra_fail + 1))
		total
		exit 1
	fi
}

lp_say "make check: toolchain root, $kind kernel, modules, guest, judge, bench smoke, lint, litmus"
need "toolchain root" "$S/toolchain.sh"
if [ -z "${KDIR:-}" ]; then
	need "$kind kernel" "$S/kernel.sh" "$kind"
fi
need "module build" "$S/modules.sh" "$kind"
need "guest build" "$S/initramfs.sh" "$kind"
need "QEMU run" "$S/qemu.sh" check "$kind"

lp_say "judging the guest run"
"$S/judge.sh" check "$kind" || true
[ -f "$results/guest.counts" ] || extra_fail=$((extra_fail + 1))

# Keeps make bench's path from rotting, on the kernel already built: tiny
# counts, one repetition, no claims about speed (~1 min).
lp_say "bench smoke run (BENCH_QUICK=1, $kind kernel): every cell a sane number"
if BENCH_QUICK=1 "$S/qemu.sh" bench "$kind"; then
	"$S/judge.sh" bench "$kind" || true
fi
[ -f "$results/guest-bench.counts" ] || extra_fail=$((extra_fail + 1))

lp_say "lint"
"$S/lint.sh" "$kind" || true
[ -f "$results/lint.counts" ] || extra_fail=$((extra_fail + 1))

lp_say "LKMM litmus tests"
"$S/litmus.sh" || true
[ -f "$results/litmus.counts" ] || extra_fail=$((extra_fail + 1))

total
