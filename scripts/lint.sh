#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# lint.sh [KIND]: checkpatch --strict on every C file and patch of ours,
# sparse (Kbuild C=2) on the C module, rustfmt --check and clippy (Kbuild
# CLIPPY=1) on the Rust module, and the compile-fail tests
# (shared-tests/compile-fail/, scripts/compile_fail.py): each snippet
# that rustc must reject is rejected with its named error.
# One line per check; fails on any finding.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_in_root "$@"

kind=${1:-debug}
kdir=$(lp_kdir "$kind")
ksrc=$(lp_ksrc "$kdir")
[ -f "$ksrc/scripts/checkpatch.pl" ] || lp_die "no checkpatch.pl under $ksrc: run 'make kernel'"
results=$LP_OUT/results
mkdir -p "$results"
log=$results/lint.log
: >"$log"
pass=0
fail=0

check() {
	local name=$1
	shift
	if out=$("$@" 2>&1); then
		pass=$((pass + 1))
		echo "  ok   $name"
	else
		fail=$((fail + 1))
		echo "  FAIL $name"
		printf '%s\n' "$out" | sed 's/^/       /' | head -n 40
	fi
	printf '== %s\n%s\n' "$name" "$out" >>"$log"
}

checkpatch=(perl "$ksrc/scripts/checkpatch.pl" --no-tree --strict --quiet
	--show-types)
for f in c-module/*.[ch] rust-module/*.h shared-tests/*.[ch] shared-tests/kmemleak_control/*.c; do
	case $f in *.mod.c) continue ;; esac # Kbuild's, not ours
	[ -e "$f" ] || continue
	check "checkpatch --strict $f" "${checkpatch[@]}" -f "$f"
done
# The patches against the kernel tree: GIT_DIR names no repository, since
# the cwd's .git is ours, not the kernel's (checkpatch would look kernel
# commit ids up in it, and run spdxcheck.py, which wants the kernel's git
# and python3-ply). FILE_PATH_CHANGES ("does MAINTAINERS need updating?")
# is ignored: a new file under rust/ or samples/rust/ is the RUST entry's
# (F: rust/, F: samples/rust/).
for p in kernel-config/patches/*.patch; do
	[ -e "$p" ] || continue
	check "checkpatch --strict $p" env GIT_DIR=/nonexistent \
		perl "$ksrc/scripts/checkpatch.pl" --strict --quiet \
		--ignore FILE_PATH_CHANGES --root="$ksrc" "$p"
done

# sparse checks address spaces (__user, __iomem, __rcu), endianness and
# bitwise types. In 7.3 it no longer checks lock contexts: __acquires()/
# __releases() are empty under __CHECKER__ (compiler-context-analysis.h),
# and only Clang >= 23's context analysis reads them (trixie has clang 19).
sparse_check() {
	local out
	out=$(make -s -C "$kdir" M="$LP_REPO/c-module" LLVM=1 C=2 \
		CHECK=/opt/lp-sparse/usr/bin/sparse modules 2>&1) || {
		printf '%s\n' "$out"
		return 1
	}
	printf '%s\n' "$out"
	! printf '%s\n' "$out" | grep -qE '(warning|error):|not available'
}
check "sparse (C=2) c-module" sparse_check

rs=()
for f in rust-module/*.rs; do
	case $f in *_generated.rs) ;; *) rs+=("$f") ;; esac
done
check "rustfmt --check rust-module" rustfmt --check --edition 2021 \
	--config-path "$ksrc/.rustfmt.toml" "${rs[@]}"
check "rustfmt --check shared-tests/compile-fail" rustfmt --check --edition 2021 \
	--config-path "$ksrc/.rustfmt.toml" shared-tests/compile-fail/*.rs

clippy() {
	# Force a rebuild of the crate so that clippy actually looks at it.
	rm -f rust-module/lockless_rust.o
	local out
	out=$(make -s -C "$kdir" M="$LP_REPO/rust-module" LLVM=1 CLIPPY=1 modules 2>&1) || {
		printf '%s\n' "$out"
		return 1
	}
	printf '%s\n' "$out"
	! printf '%s\n' "$out" | grep -qE '^(warning|error)'
}
check "clippy (CLIPPY=1) rust-module" clippy

# The compile-fail tests: one result per snippet. compile_fail.py builds
# them all (the kernel's in one Kbuild run, the module's each in one) and
# prints "ok N NAME: WHY" or "not ok N NAME: WHY".
cf_one() { # STATUS WHY: the verdict compile_fail.py gave one snippet
	printf '%s\n' "$2"
	[ "$1" = ok ]
}
cf_out=$(python3 scripts/compile_fail.py "$kdir" "$LP_OUT/compile-fail" 2>&1) || true
printf '== compile_fail.py\n%s\n' "$cf_out" >>"$log"
ncf=0
while IFS= read -r line; do
	if [[ $line =~ ^(ok|not\ ok)\ [0-9]+\ ([A-Za-z0-9_]+):\ (.*)$ ]]; then
		ncf=$((ncf + 1))
		check "compile-fail ${BASH_REMATCH[2]}" cf_one "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]}"
	fi
done <<<"$cf_out"
if [ "$ncf" -eq 0 ]; then
	check "compile-fail (no result)" cf_one "not ok" "$cf_out"
fi

echo "lint: $pass passed, $fail failed (full output: build/results/lint.log)"
echo "$pass $fail" >"$results/lint.counts"
[ "$fail" -eq 0 ]
