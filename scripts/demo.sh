#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# demo.sh: what `make demo` runs. Bootstraps, boots the guest, loads both
# modules, prints what each answered side by side, unloads both. Fails
# when the two modules answered a row's script differently.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

S=$LP_REPO/scripts
kind=debug
"$S/toolchain.sh"
[ -n "${KDIR:-}" ] || "$S/kernel.sh" "$kind"
"$S/modules.sh" "$kind"
"$S/initramfs.sh" "$kind"
"$S/qemu.sh" demo "$kind"

run=$LP_OUT/guest-$kind$LP_KSUF/demo
echo
echo "What each module answered in the guest: IDENTIFY, then C vs Rust per flavor and op:"
echo
cat "$run/ktap.log"
echo
# The demo is no test, but a guest that splats or fails to unload is news.
# A difference between the modules is the demo's own verdict, judged below.
if grep -nE 'WARNING:|BUG:|KASAN:|Oops|Kernel panic' "$run/console.log" ||
	grep -n 'lp-init: FAIL' "$run/console.log" | grep -v 'lp-init: FAIL lockless_demo exited'; then
	lp_die "the guest reported the problem above; full log: build/guest-$kind$LP_KSUF/demo/console.log"
fi
grep -q 'lp-init: done' "$run/console.log" ||
	lp_die "the guest did not finish; see build/guest-$kind$LP_KSUF/demo/console.log"
status=$(sed -n 's/.*lp-init: FAIL lockless_demo exited \([0-9]*\).*/\1/p' "$run/console.log" | head -n1)
case ${status:-0} in
0) ;;
1) lp_die "C and Rust did not answer the same: see the rows marked DIFFERS or - in the table above (also in build/guest-$kind$LP_KSUF/demo/ktap.log)" ;;
*) lp_die "lockless_demo exited $status before finishing its table; see build/guest-$kind$LP_KSUF/demo/ktap.log and console.log" ;;
esac
lp_say "both modules loaded, gave the same answers in every row and unloaded cleanly"
