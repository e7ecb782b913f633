#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# bench.sh: what `make bench` runs.
#
# Builds (once each) two performance kernels, allnoconfig + base.config +
# perf.config ("perf") and the same with CONFIG_RUST_INLINE_HELPERS
# ("perf-inline"), both modules against each with DWARF, and their guests;
# then boots three times:
#
#   1. perf, QEMU -icount shift=0, one vCPU: instructions per op, one
#      thread, C and Rust (the guest clock counts instructions exactly);
#   2. perf-inline, the same: Rust with its helpers inlined (and C again,
#      which must not move);
#   3. perf, multi-threaded TCG, SMP vCPUs: wall-clock ns/op at 1..N
#      threads, the contention shape (lockless against locked).
#
# Each run is judged (every cell sane, no kernel splat). Then
# bench_report.py prints the instruction table (C, Rust, Rust inlined and
# their ratios), the contention table and ratio lines, and writes
# build/bench/bench.csv, insns.csv, insns.txt, bench.png (the ratios) and
# bench-tcg.png (TCG wall-clock ns/op).
#
# BENCH_QUICK=1: the smoke run on the debug kernel that make check already
# built (no other kernel, one multi-threaded boot): tiny counts, sanity
# only, no claims and no instruction counts. BENCH_MS, BENCH_REPS: see
# lockless_bench.c (they apply to the multi-threaded run). ACCEL, SMP, MEM,
# TIMEOUT: as for make check; KDIR is not supported here (three kernels).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

S=$LP_REPO/scripts
# arm64's perf kernels, its two CPUs (LSE, LL/SC) and bench_report.py's
# arm64 call relocations are not written yet.
[ "$LP_ARCH" = x86_64 ] ||
	lp_die "make bench is x86_64 only for now (ARCH=$LP_ARCH): no arm64 cost table yet"
start=$SECONDS
"$S/toolchain.sh"

kdesc() {
	printf '%s %s (allnoconfig + %s)' \
		"$(cat "$(lp_kdir_host "$1")/include/config/kernel.release")" "$1" \
		"$(lp_kind_fragments "$1" | sed 's|.*/||' | paste -sd+ | sed 's/+/ + /g')"
}

if [ "${BENCH_QUICK:-0}" != 0 ]; then
	if [ -n "${KDIR:-}" ]; then
		kernel="KDIR=$KDIR"
	else
		"$S/kernel.sh" debug
		kernel=$(kdesc debug)
	fi
	"$S/modules.sh" debug
	"$S/initramfs.sh" debug
	"$S/qemu.sh" bench debug
	judged=0
	"$S/judge.sh" bench debug || judged=$?
	"$S/inroot.sh" "$(printf '%q ' python3 scripts/bench_report.py \
		build/bench "$(nproc)" "$LP_REPO" \
		"tcg=build/guest-debug/bench,build/guest-debug/modules,$kernel")" ||
		lp_die "no report: see build/guest-debug/bench/ktap.log and console.log"
	[ "$judged" -eq 0 ] || lp_die "the bench run was not clean (judged above)"
	exit 0
fi

[ -z "${KDIR:-}" ] || lp_die "make bench builds its own kernels: unset KDIR"
for kind in perf perf-inline; do
	"$S/kernel.sh" "$kind"
	"$S/modules.sh" "$kind" -g
	"$S/initramfs.sh" "$kind"
done
built=$SECONDS

judged=0
for kind in perf perf-inline; do
	ICOUNT=1 "$S/qemu.sh" bench "$kind"
	ICOUNT=1 "$S/judge.sh" bench "$kind" || judged=1
done
"$S/qemu.sh" bench perf
"$S/judge.sh" bench perf || judged=1
guest=$SECONDS

"$S/inroot.sh" "$(printf '%q ' python3 scripts/bench_report.py \
	build/bench "$(nproc)" "$LP_REPO" \
	"icount=build/guest-perf/bench-icount,build/guest-perf/modules,$(kdesc perf)" \
	"inline=build/guest-perf-inline/bench-icount,build/guest-perf-inline/modules,$(kdesc perf-inline)" \
	"tcg=build/guest-perf/bench,build/guest-perf/modules,$(kdesc perf)")" ||
	lp_die "no report: see the ktap.log and console.log of build/guest-perf*/bench*/"

lp_say "make bench took $((SECONDS - start)) s (kernels, modules, guests: $((built - start)) s; the three boots: $((guest - built)) s)"
[ "$judged" -eq 0 ] ||
	lp_die "a bench run was not clean (judged above; logs in build/guest-perf*/bench*/)"
