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
# ARCH=arm64: the same two kernels for QEMU's virt machine, and only the
# instruction counts: each kernel boots under -icount twice, on a CPU with
# LSE atomics (-cpu max,pauth-impdef=on: ldadd, cas, swp and their
# acquire/release forms) and on a v8.0 CPU (-cpu cortex-a57: LL/SC loops,
# ldxr/stxr); the kernel patches the choice in at boot. Two instruction
# tables, build/bench/arm64-lse/ and build/bench/arm64-llsc/. No
# wall-clock run: arm64's vCPUs run in turn in one TCG thread.
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
if [ "$LP_ARCH" = arm64 ]; then
	g=build/guest-perf$LP_KSUF gi=build/guest-perf-inline$LP_KSUF
	for cpu in lse:max,pauth-impdef=on llsc:cortex-a57; do
		tag=${cpu%%:*}
		for kind in perf perf-inline; do
			ICOUNT=1 QEMU_CPU=${cpu#*:} "$S/qemu.sh" bench "$kind"
			ICOUNT=1 "$S/judge.sh" bench "$kind" || judged=1
			rm -rf "build/guest-$kind$LP_KSUF/bench-icount-$tag"
			mv "build/guest-$kind$LP_KSUF/bench-icount" \
				"build/guest-$kind$LP_KSUF/bench-icount-$tag"
		done
		"$S/inroot.sh" "$(printf '%q ' python3 scripts/bench_report.py \
			"build/bench/arm64-$tag" "$(nproc)" "$LP_REPO" \
			"icount=$g/bench-icount-$tag,$g/modules,$(kdesc perf), -cpu ${cpu#*:}" \
			"inline=$gi/bench-icount-$tag,$gi/modules,$(kdesc perf-inline), -cpu ${cpu#*:}")" ||
			lp_die "no report: see the ktap.log and console.log of $g*/bench-icount-$tag/"
	done
	lp_say "make bench ARCH=arm64 took $((SECONDS - start)) s (kernels, modules, guests: $((built - start)) s; the four boots and the two reports: $((SECONDS - built)) s)"
	[ "$judged" -eq 0 ] ||
		lp_die "a bench run was not clean (judged above; logs in build/guest-perf*$LP_KSUF/bench-icount-*/)"
	exit 0
fi
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
