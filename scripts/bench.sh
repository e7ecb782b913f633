#!/bin/bash
# bench.sh: what `make bench` runs. Builds (once) the performance kernel
# (allnoconfig + base.config + perf.config), both modules against it with
# DWARF and the guest; boots it with lp.mode=bench; judges the run (every
# cell sane, no kernel splat); then prints the run header, the table with
# each op's instruction counts from the .ko files, the ratio lines, and
# the paths of build/bench/bench.csv and bench.png.
#
# BENCH_QUICK=1: the smoke run on the debug kernel that make check already
# built (no second kernel build): tiny counts, sanity only, no claims and
# no instruction counts. BENCH_MS, BENCH_REPS: see lockless_bench.c.
# ACCEL, SMP, MEM, TIMEOUT, KDIR: as for make check.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

S=$LP_REPO/scripts
start=$SECONDS
if [ "${BENCH_QUICK:-0}" != 0 ]; then
	kind=debug
	dwarf=()
else
	kind=perf
	dwarf=(-g)
fi

"$S/toolchain.sh"
if [ -n "${KDIR:-}" ]; then
	kernel="KDIR=$KDIR"
else
	"$S/kernel.sh" "$kind"
	kernel="$(cat "$(lp_kdir_host "$kind")/include/config/kernel.release") $kind"
	kernel+=" (allnoconfig + base.config + $kind.config)"
fi
"$S/modules.sh" "$kind" "${dwarf[@]}"
"$S/initramfs.sh" "$kind"
"$S/qemu.sh" bench "$kind"
guest=$SECONDS

lp_say "judging the guest run (every cell sane, no kernel splat)"
judged=0
"$S/judge.sh" bench "$kind" || judged=$?

"$S/inroot.sh" "$(printf '%q ' python3 scripts/bench_report.py \
	"build/guest-$kind/bench" "build/guest-$kind/modules" build/bench \
	"$kernel" "$(nproc)" "$LP_REPO")" ||
	lp_die "no report: see build/guest-$kind/bench/ktap.log and console.log"

lp_say "make bench took $((SECONDS - start)) s (guest run and build: $((guest - start)) s)"
[ "$judged" -eq 0 ] ||
	lp_die "the bench run was not clean (judged above; logs in build/guest-$kind/bench/)"
