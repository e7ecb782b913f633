#!/bin/bash
# demo.sh: what `make demo` runs. Bootstraps, boots the guest, loads both
# modules, prints what each answered side by side, unloads both.
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

run=$LP_OUT/guest-$kind/demo
echo
echo "What each module answered in the guest (LP_IOC_IDENTIFY):"
echo
cat "$run/ktap.log"
echo
# The demo is no test, but a guest that splats or fails to unload is news.
if grep -nE 'lp-init: FAIL|WARNING:|BUG:|KASAN:|Oops|Kernel panic' "$run/console.log"; then
	lp_die "the guest reported the problem above; full log: build/guest-$kind/demo/console.log"
fi
grep -q 'lp-init: done' "$run/console.log" ||
	lp_die "the guest did not finish; see build/guest-$kind/demo/console.log"
lp_say "both modules loaded, answered and unloaded cleanly"
