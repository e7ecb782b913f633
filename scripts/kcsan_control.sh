#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# kcsan_control.sh: what `make kcsan-control` runs. KCSAN's negative
# control: boots the KCSAN kernel (kernel-config/kcsan.config) with both
# modules loaded racy_control=1, runs RUN RACY_INC (a plain, unlocked
# counter++ in the kernel) from four threads on one file of each module,
# and shows what KCSAN reported of each. Fails if KCSAN saw nothing of the
# C module's race, which would mean the detector is not working; what it
# sees of the Rust module's is the finding, printed either way.
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
count() { # count DEVICE MODE: reports during that run naming our modules
	awk -v run="$1 $2" '/lockless_racy: \/dev\// { on = index($0, run) > 0; next }
		on && /BUG: KCSAN:.*\[lockless_(c|rust)\]/ { n++ } END { print n + 0 }' "$run/console.log"
}
c_plain=$(count /dev/lockless_c plain)
rust_plain=$(count /dev/lockless_rust plain)
c_marked=$(count /dev/lockless_c marked)
rust_marked=$(count /dev/lockless_rust marked)
echo
echo "reports naming our modules: C plain $c_plain, Rust plain $rust_plain, C marked $c_marked, Rust marked $rust_marked"
[ "$c_plain" -gt 0 ] ||
	lp_die "KCSAN reported nothing of the C module's deliberate data race: is KCSAN on? see build/guest-$kind/racy/console.log"
[ "$c_marked" -eq 0 ] ||
	lp_die "KCSAN reported C's marked increments, which race but are no data race: see build/guest-$kind/racy/kcsan.txt"
