#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# distclean.sh: remove the cache (toolchain root, kernel sources and builds).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ ! -e "$LP_CACHE" ]; then
	lp_say "no cache at $LP_CACHE"
	exit 0
fi
[ -e "$LP_CACHE/.lockless-parity-cache" ] ||
	lp_die "$LP_CACHE has no .lockless-parity-cache marker: not removing a directory we did not make"
lp_need_root "$@"
lp_say "removing $LP_CACHE ($(du -sh "$LP_CACHE" 2>/dev/null | cut -f1))"
# A user's cache is all the user's, but a root may hold directories
# without write permission: rm runs as root of a user namespace, where
# the user's files give way as root's do.
"${LP_ASROOT[@]}" rm -rf --one-file-system "$LP_CACHE"
