#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# study.sh: what `make study` runs: write build/study/index.html (and its
# Markdown twin index.md), one section per lockless pattern with the C and
# the Rust function side by side, read from the source (scripts/study.py,
# inside the toolchain root, whose python3-pygments highlights the code).
# Uses what the last make bench (build/bench/) and make litmus
# (build/litmus/) left, if anything; boots nothing, builds nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

"$LP_REPO/scripts/toolchain.sh"
t0=$SECONDS
"$LP_REPO/scripts/inroot.sh" "python3 scripts/study.py build/study" ||
	lp_die "scripts/study.py failed (above)"
lp_say "make study took $((SECONDS - t0)) s; open $LP_OUT/study/index.html (make study-check renders it in chromium)"
