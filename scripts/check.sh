#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check.sh: what `make check` (and, with PRESET=full, `make soak`) runs.
# Bootstraps whatever is missing (toolchain root, debug kernel), builds both
# modules and the guest, boots it once under QEMU for the driver, the
# demo's C-vs-Rust comparison and the bench's smoke run, lints, runs
# the litmus tests and checks the demo's API columns against the code
# meanwhile (they need no guest), judges everything, and
# prints the wall time of each step and the total as the last line: "N
# passed, N failed". Exit status is non-zero on any failure.
#
# PRESET=quick (make check) or full (make soak): the driver's sizes.
# TESTS=GLOB: only the driver tests whose name matches, against both
# modules, without KUnit, demo, bench smoke, lint, litmus or API columns: the
# development loop.
# KIND=debug (KASAN), kcsan (KCSAN instead of KASAN), preempt (debug with
# CONFIG_PREEMPT instead of PREEMPT_LAZY) or rt (debug with PREEMPT_RT):
# the guest kernel.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

S=$LP_REPO/scripts
results=$LP_OUT/results
kind=${KIND:-debug}
case $kind in
debug | kcsan | preempt | rt) ;;
*) lp_die "KIND=$kind is not one of debug, kcsan, preempt, rt" ;;
esac
[ "$kind" != kcsan ] || [ "$LP_ARCH" = x86_64 ] ||
	lp_die "KIND=kcsan is x86_64 only: rustc's aarch64 kernel target has no thread sanitizer, so the Rust module cannot be built for KCSAN on ARCH=$LP_ARCH"
preset=${PRESET:-quick}
what="make check"
[ "$preset" = full ] && what="make soak"
mkdir -p "$results"
rm -f "$results"/*.counts "$results"/*.out
extra_fail=0
start=$SECONDS
times=()

# step NAME CMD...: run one step, remember its wall time.
step() {
	local name=$1 t0=$SECONDS rc=0
	shift
	"$@" || rc=$?
	times+=("$name $((SECONDS - t0))")
	return $rc
}

# Each step leaves "PASSED FAILED [SKIPPED]" in results/STEP.counts.
total() {
	local p=0 f=$extra_fail s=0 a b c d t
	for c in "$results"/*.counts; do
		[ -e "$c" ] || continue
		read -r a b d <"$c"
		p=$((p + a))
		f=$((f + b))
		s=$((s + ${d:-0}))
	done
	for t in "${times[@]}"; do
		printf '%s\n' "$t"
	done | awk '{ t = $NF; $NF = ""; printf "%s%s %d s", n++ ? ", " : "wall time per step: ", $0, t } END { print "" }'
	echo "$what took $((SECONDS - start)) s (PRESET=$preset${TESTS:+, TESTS=$TESTS})"
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
	if ! step "$what" "$@"; then
		echo "FAIL $what: cannot go on (see the error above)"
		extra_fail=$((extra_fail + 1))
		total
		exit 1
	fi
}

case $preset in
quick | full) ;;
*) lp_die "PRESET=$preset is not one of quick, full" ;;
esac
lp_say "$what: toolchain root, $kind kernel, modules, guest (driver, demo, bench smoke), lint, litmus"
lp_say "sizes: PRESET=$preset${RACE_PUTS:+ RACE_PUTS=$RACE_PUTS}${CHAIN_DEPTH:+ CHAIN_DEPTH=$CHAIN_DEPTH}${FUZZ_STREAMS:+ FUZZ_STREAMS=$FUZZ_STREAMS}${FUZZ_STEPS:+ FUZZ_STEPS=$FUZZ_STEPS}${FUZZ_SEED:+ FUZZ_SEED=$FUZZ_SEED} (the guest prints each size below)"
need "toolchain" "$S/toolchain.sh"
if [ -z "${KDIR:-}" ]; then
	need "kernel" "$S/kernel.sh" "$kind"
fi
# arm64: with DWARF, which make ordering reads (below).
need "modules" "$S/modules.sh" "$kind" ${LP_KSUF:+-g}
need "guest build" "$S/initramfs.sh" "$kind"

# Lint and litmus need no guest: they run while it does, and print after,
# at the lowest CPU priority: the guest's four TCG vCPU threads share these
# two host cores with them, and a slowed guest is what makes make check slow
# (they still end well before it).
bg=()
if [ -z "${TESTS:-}" ]; then
	lp_say "lint, LKMM litmus tests and the demo's API columns start in the background (output after the guest's)"
	(
		t0=$SECONDS
		nice -n 19 "$S/lint.sh" "$kind" >"$results/lint.out" 2>&1
		echo "lint $((SECONDS - t0))" >"$results/lint.time"
	) &
	bg+=($!)
	(
		t0=$SECONDS
		nice -n 19 "$S/litmus.sh" >"$results/litmus.out" 2>&1
		echo "litmus $((SECONDS - t0))" >"$results/litmus.time"
	) &
	bg+=($!)
	# The demo's "C API" / "Rust API" columns against the calls of the
	# functions behind each row (scripts/patterns.py; ~2 s, no guest).
	(
		t0=$SECONDS
		nice -n 19 "$S/inroot.sh" "python3 scripts/patterns.py -q /lp/src" \
			>"$results/demo-api.out" 2>&1
		sed -n '$s/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' \
			"$results/demo-api.out" >"$results/demo-api.counts"
		[ -s "$results/demo-api.counts" ] || rm -f "$results/demo-api.counts"
		echo "demo-api $((SECONDS - t0))" >"$results/demo-api.time"
	) &
	bg+=($!)
	# arm64: make ordering's check of the modules just built (its
	# mutants are make ordering's alone).
	if [ "$LP_ARCH" = arm64 ]; then
		(
			t0=$SECONDS
			nice -n 19 env ORDERING_MUTANTS=0 ORDERING_PREBUILT=1 "$S/ordering.sh" "$kind" \
				>"$results/ordering.out" 2>&1
			echo "ordering $((SECONDS - t0))" >"$results/ordering.time"
		) &
		bg+=($!)
	fi
else
	lp_say "TESTS=$TESTS: only the matching driver tests (no KUnit, demo, bench smoke, lint, litmus)"
fi
trap 'kill "${bg[@]}" 2>/dev/null' EXIT

need "guest run" "$S/qemu.sh" check "$kind"
lp_say "judging the guest run"
step "judge" "$S/judge.sh" check "$kind"
[ -f "$results/guest.counts" ] || extra_fail=$((extra_fail + 1))

for pid in "${bg[@]}"; do
	wait "$pid"
done
trap - EXIT
steps=(lint litmus demo-api)
[ "$LP_ARCH" = x86_64 ] || steps+=(ordering)
for s in "${steps[@]}"; do
	[ -z "${TESTS:-}" ] || continue
	lp_say "$s (ran alongside the guest)"
	cat "$results/$s.out"
	[ -f "$results/$s.time" ] && times+=("$(cat "$results/$s.time")")
	[ -f "$results/$s.counts" ] || extra_fail=$((extra_fail + 1))
done

total
