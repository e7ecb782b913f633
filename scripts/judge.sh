#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# judge.sh MODE [KIND]: judge the guest run build/guest-KIND/MODE (with
# ICOUNT=1, MODE-icount) with scripts/judge.py and the kernel's KTAP
# parser; writes results/guest.counts (check) or
# results/guest-RUN-KIND.counts (bench: its cells).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_in_root "$@"

mode=${1:-check}
kind=${2:-debug}
kdir=$(lp_kdir "$kind")
ksrc=$(lp_ksrc "$kdir")
mkdir -p "$LP_OUT/results"
run=$(lp_run_name "$mode")
counts=$LP_OUT/results/guest.counts
[ "$mode" = check ] || counts=$LP_OUT/results/guest-$run-$kind.counts
# A kernel with KUnit runs its suites (the Rust doctests) at boot: judge
# their KTAP on the console as well, once (in a full check run, or a
# TESTS= run with KUNIT=1; other TESTS= runs boot with kunit.enable=0).
kunit=()
if [ "$mode" = check ] && { [ -z "${TESTS:-}" ] || [ "${KUNIT:-0}" = 1 ]; } &&
	grep -qx 'CONFIG_KUNIT=y' "$kdir/.config"; then
	kunit=(--kernel-ktap)
fi
exec python3 "$LP_REPO/scripts/judge.py" "$LP_OUT/guest-$kind$LP_KSUF/$run" "$ksrc" \
	"$counts" --mode "$mode" "${kunit[@]}"
