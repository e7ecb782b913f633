#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kcsan_control.sh: what `make kcsan-control` runs. KCSAN's negative
# control: boots the KCSAN kernel (kernel-config/kcsan.config, Rust
# instrumented by patches/0007) with both modules loaded racy_control=1,
# runs RUN RACY_INC from four threads on one file of each module in three
# modes (plain unlocked counter++, marked READ_ONCE/WRITE_ONCE or relaxed
# Atomic, plain under a spinlock), and shows what KCSAN reported of each.
# Fails unless KCSAN reported the plain race of each module, naming the
# function of that module it is in, and nothing in the marked and locked
# runs: the first would mean the detector does not see that language, the
# others that it reports what is no data race.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

S=$LP_REPO/scripts
kind=kcsan
"$S/toolchain.sh"
"$S/kernel.sh" "$kind"
"$S/modules.sh" "$kind"
"$S/initramfs.sh" "$kind"
"$S/qemu.sh" racy "$kind"

run=$LP_OUT/guest-$kind/racy
# The instrumentation itself: calls into KCSAN's __tsan_*() entry points
# in the Rust module this kernel's build produced.
tsan=$("$S/inroot.sh" "llvm-objdump -dr rust-module/lockless_rust.ko" |
	grep -o 'R_X86_64_PLT32[[:space:]]*__tsan_[a-z_]*[0-9]*' |
	sed 's/.*\(__tsan_\)/\1/' | sort | uniq -c | sort -rn) || true
echo
echo "lockless_rust.ko calls KCSAN at $(awk '{ n += $1 } END { print n + 0 }' <<<"$tsan") sites:" \
	"$(awk '{ printf "%s%s %d", sep, $2, $1; sep = ", " }' <<<"$tsan")"
[ -n "$tsan" ] ||
	lp_die "lockless_rust.ko has no __tsan_ calls: the Rust module was built without KCSAN's instrumentation (patches/0007)"
echo
cat "$run/ktap.log"
grep -q 'lp-init: done' "$run/console.log" ||
	lp_die "the guest did not finish; see build/guest-$kind/racy/console.log"
if grep -n 'lp-init: FAIL' "$run/console.log"; then
	lp_die "the control did not run; see build/guest-$kind/racy/console.log"
fi
# One report: from its "BUG: KCSAN:" line to the closing "=====" line.
awk '/BUG: KCSAN:/ { on = 1 } on { print } on && /==========/ { on = 0 }' \
	"$run/console.log" | sed 's/^\[ *[0-9.]*\] //' >"$run/kcsan.txt"
echo
echo "KCSAN's reports, under the run each came in (all of them in build/guest-$kind/racy/kcsan.txt):"
# Each run's marker line, then the first line of each report after it.
awk '/lockless_racy: \/dev\// { sub(/.*lockless_racy: /, ""); print "  during " $0; next }
	/BUG: KCSAN:/ { sub(/.*BUG: KCSAN: /, ""); print "    " $0 }' "$run/console.log" |
	uniq -c | sed 's/^ *1 //'
count() { # count DEVICE MODE [PATTERN]: reports during that run naming our modules
	awk -v run="$1 $2" -v pat="${3:-.}" '/lockless_racy: \/dev\// { on = index($0, run) > 0; next }
		on && /BUG: KCSAN:.*\[lockless_(c|rust)\]/ && $0 ~ pat { n++ } END { print n + 0 }' "$run/console.log"
}
echo
for mode in plain marked locked; do
	c=$(count /dev/lockless_c $mode)
	rust=$(count /dev/lockless_rust $mode)
	echo "reports naming our modules, $mode: C $c, Rust $rust"
	case $mode in
	plain)
		[ "$c" -gt 0 ] ||
			lp_die "KCSAN reported nothing of the C module's deliberate data race: is KCSAN on? see build/guest-$kind/racy/console.log"
		[ "$rust" -gt 0 ] ||
			lp_die "KCSAN reported nothing of the Rust module's deliberate data race: is Rust instrumented (patches/0007)? see build/guest-$kind/racy/console.log"
		# The race is in RUN's lp_run_one(), or in what the compiler
		# inlined it into: C's lp_run() or lp_ioctl() (lp_ioctl on this
		# kernel), Rust's lp_run_one::<Locked>, lp_run_typed::<Locked>,
		# lp_run or <Arena as MiscDevice>::ioctl in lockless_rust::device
		# (v0-mangled; on this kernel lp_run_one::<Locked>, out of line).
		[ "$(count /dev/lockless_c plain '(lp_run_one|lp_run|lp_ioctl) [[]lockless_c[]]')" -gt 0 ] ||
			lp_die "no report of the C race names lp_run_one, lp_run or lp_ioctl in lockless_c: see build/guest-$kind/racy/kcsan.txt"
		[ "$(count /dev/lockless_rust plain '13lockless_rust6device(10lp_run_one|12lp_run_typed|6lp_run|[^ ]*5ioctl)[^ ]* [[]lockless_rust[]]')" -gt 0 ] ||
			lp_die "no report of the Rust race names lockless_rust::device's lp_run_one, lp_run_typed, lp_run or ioctl: see build/guest-$kind/racy/kcsan.txt"
		;;
	*)
		[ "$c" -eq 0 ] && [ "$rust" -eq 0 ] ||
			lp_die "KCSAN reported the $mode increments, which are no data race: see build/guest-$kind/racy/kcsan.txt"
		;;
	esac
done
echo "kcsan-control ok: KCSAN reports the plain race in both modules, and neither the marked nor the locked increments"
