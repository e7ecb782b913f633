#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# litmus.sh: check every shared-tests/litmus/*.litmus with herd7 against the
# kernel's own memory model (tools/memory-model of the pinned kernel) and judge
# each result against the "Result:" line of the test's header comment.
#
# herd7 comes from Debian's herdtools7, which only forky/sid ship (it needs a
# newer libc than trixie's), so it lives in its own small cached forky root,
# never mixed into the trixie toolchain root.  The memory model is taken from
# the kernel source tarball in the toolchain root (only tools/memory-model is
# extracted, once); no kernel build is needed.
#
# usage: scripts/litmus.sh [TEST...]   (TEST: a name or path of a .litmus
#        file; default: all of shared-tests/litmus)
# env:   HERD_TIMEOUT (s per test), HERD_MEM_MB (address-space cap per test),
#        HERD_OPTS (extra herd7 options; default "-optace true", see below)
#
# Then scripts/litmus_code.py checks each test's "Code:" section against the
# functions of c-module/ and rust-module/ it names (one result per pair,
# plus coverage of every function that claims an ordering).
#
# Output: one line per test, "ok NAME" or "FAIL NAME: expected X, herd7 said
# Y", the checker's lines, then "N passed, N failed"; the counts also go to
# build/results/litmus.counts as "P F".  herd7's full output for each test
# is kept in build/litmus/NAME.litmus.out.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

# Pins: where herd7 comes from.
HERD_SUITE=forky
HERD_PACKAGE=herdtools7

HERD_TIMEOUT=${HERD_TIMEOUT:-300}
HERD_MEM_MB=${HERD_MEM_MB:-4096}
# -optace true makes herd7 drop candidate executions that break
# sc-per-location or RMW atomicity while it generates them instead of after.
# LKMM forbids exactly those too (its "coherence" and "atomic" axioms), so
# the results are the same, only faster: the cmpxchg loops go from ~20 s to
# ~5 s.  Set HERD_OPTS= to run without it.
HERD_OPTS=${HERD_OPTS--optace true}

herdroot=$LP_CACHE/herdroot
lkmm=$LP_WORK/lkmm-$LP_KERNEL_SERIES
litdir=$LP_REPO/shared-tests/litmus
outdir=$LP_OUT/litmus
# Where the model and the tests appear inside the herd root.
in_lkmm=/lp/lkmm
in_lit=/lp/litmus

# ---------------------------------------------------------------- bootstrap
# (skipped when we re-enter ourselves inside the private mount namespace)

herd_verify() {
	[ -x "$herdroot/usr/bin/herd7" ] &&
		"${LP_ASROOT[@]}" chroot "$herdroot" /usr/bin/herd7 -version >/dev/null 2>&1
}

ensure_toolchain() {
	if [ ! -f "$LP_ROOT/.lp-stamp" ] || [ ! -f "$LP_ROOT$LP_KERNEL_TARBALL" ]; then
		lp_say "no toolchain root with $LP_KERNEL_PACKAGE yet: making it (the memory model comes from its kernel tarball)"
		"$LP_REPO/scripts/toolchain.sh"
	fi
	[ -f "$LP_ROOT$LP_KERNEL_TARBALL" ] ||
		lp_die "no kernel tarball at $LP_ROOT$LP_KERNEL_TARBALL after toolchain.sh"
}

ensure_herdroot() {
	lp_tool_root "$herdroot" "$HERD_SUITE" "$HERD_PACKAGE" herd_verify herd7 "~30 s, ~360 MB"
	lp_say "herd root ok: $herdroot ($("${LP_ASROOT[@]}" chroot "$herdroot" /usr/bin/herd7 -version 2>/dev/null | head -n1))"
}

ensure_lkmm() {
	local stamp=$lkmm/.lp-stamp want top
	want=$(printf '%s\n' "$LP_KERNEL_TARBALL" "$(stat -c '%s %Y' "$LP_ROOT$LP_KERNEL_TARBALL")" |
		sha256sum | cut -c1-16)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
		[ -f "$lkmm/linux-kernel.cfg" ] && [ -f "$lkmm/linux-kernel.cat" ]; then
		lp_say "memory model ok: $lkmm"
		return 0
	fi
	top=$(basename "$LP_KERNEL_TARBALL" .tar.xz)
	lp_say "extracting $top/tools/memory-model from $LP_KERNEL_TARBALL (~20 s)"
	mkdir -p "$LP_WORK"
	rm -rf "$lkmm" "$lkmm.tmp"
	mkdir -p "$lkmm.tmp"
	tar -xJf "$LP_ROOT$LP_KERNEL_TARBALL" -C "$lkmm.tmp" --strip-components=3 \
		"$top/tools/memory-model" ||
		{ rm -rf "$lkmm.tmp"; lp_die "could not extract $top/tools/memory-model from $LP_ROOT$LP_KERNEL_TARBALL"; }
	[ -f "$lkmm.tmp/linux-kernel.cfg" ] ||
		{ rm -rf "$lkmm.tmp"; lp_die "$LP_KERNEL_TARBALL has no tools/memory-model/linux-kernel.cfg"; }
	mv "$lkmm.tmp" "$lkmm"
	printf '%s\n' "$want" >"$stamp"
}

# ------------------------------------------------------------------- judge

# expected FILE: the "Result:" of the header comment, as the kernel's
# scripts/judgelitmus.sh reads it: "Never", "Sometimes", "Always", with
# " DATARACE" appended when the test predicts a data race.
expected() {
	awk '/^[( ]\* Result: / {
		r = $3; if ($0 ~ / DATARACE/) r = r " DATARACE"; print r; exit }' "$1"
}

# observed OUT RC: what herd7 said, in the same form, or why it said nothing.
observed() {
	local out=$1 rc=$2 obs err
	obs=$(awk '/^Observation / { print $3 " " $4 " " $5; exit }' "$out")
	if [ -z "$obs" ]; then
		if [ "$rc" -eq 124 ]; then
			echo "nothing (timed out after ${HERD_TIMEOUT}s)"
		elif grep -q 'allocation failure\|Out of memory' "$out"; then
			echo "nothing (ran out of memory, cap ${HERD_MEM_MB} MB)"
		else
			err=$(grep -m1 -E 'Warning|rror' "$out" | sed 's/^Warning: //' || true)
			echo "nothing (exit $rc${err:+: $err})"
		fi
		return
	fi
	local verdict pos neg
	read -r verdict pos neg <<<"$obs"
	# "Never 0 0": no execution at all (a deadlock or an impossible test),
	# the kernel's scripts call it DEADLOCK.
	if [ "$verdict" = Never ] && [ "$pos" = 0 ] && [ "$neg" = 0 ]; then
		obs=DEADLOCK
	else
		obs=$verdict
	fi
	grep -q '^Flag data-race$' "$out" && obs="$obs DATARACE"
	echo "$obs"
}

# ---------------------------------------------------------------- the run

if [ "${LP_LITMUS_NS:-}" != 1 ]; then
	# No stale counts for make check if anything below fails.
	rm -f "$LP_OUT/results/litmus.counts"
	ensure_toolchain
	ensure_herdroot
	ensure_lkmm
	mkdir -p "$outdir" "$LP_OUT/results"
	# Re-enter in a private mount namespace: the bind mounts below vanish
	# with the last process in it, on success, error, Ctrl-C or kill -9.
	# (Run by an ordinary user, in a user namespace in which the user is
	# root: lib.sh's LP_UNSHARE.)
	exec "${LP_UNSHARE[@]}" -- \
		env LP_LITMUS_NS=1 "$0" "$@"
fi

# Tests to run: arguments (names or paths) or every file in the directory.
tests=()
tests_named=("$@")
if [ $# -gt 0 ]; then
	for t in "$@"; do
		t=$(basename "$t" .litmus)
		[ -f "$litdir/$t.litmus" ] || lp_die "no test $litdir/$t.litmus"
		tests+=("$t")
	done
else
	for f in "$litdir"/*.litmus; do
		[ -e "$f" ] && tests+=("$(basename "$f" .litmus)")
	done
fi
[ ${#tests[@]} -gt 0 ] || { echo "0 passed, 0 failed"; lp_die "no litmus test in $litdir"; }

mkdir -p "$herdroot$in_lkmm" "$herdroot$in_lit"
mount --bind "$lkmm" "$herdroot$in_lkmm"
mount -o remount,bind,ro "$herdroot$in_lkmm"
mount --bind "$litdir" "$herdroot$in_lit"
mount -o remount,bind,ro "$herdroot$in_lit"

lp_say "herd7 -conf linux-kernel.cfg $HERD_OPTS on ${#tests[@]} tests (model: $LP_KERNEL_PACKAGE tools/memory-model)"
# On Ctrl-C or kill, take the running herd7 down with us (timeout passes
# the signal on); the mounts go with the namespace.
herd_pid=
trap '[ -z "$herd_pid" ] || kill "$herd_pid" 2>/dev/null; exit 130' INT TERM HUP
pass=0 fail=0
for t in "${tests[@]}"; do
	out=$outdir/$t.litmus.out
	rc=0
	# herd7 runs from the model's directory, as the kernel's scripts do;
	# ulimit and timeout keep a test that blows up from taking the machine.
	# shellcheck disable=SC2086,SC2016 # HERD_OPTS splits; $1.. are sh's
	chroot "$herdroot" /usr/bin/env -i PATH=/usr/bin:/bin LANG=C.UTF-8 \
		/bin/sh -c 'cd "$1" && ulimit -v "$2" && shift 2 && exec timeout --foreground "$@"' \
		herd "$in_lkmm" $((HERD_MEM_MB * 1024)) "$HERD_TIMEOUT" \
		herd7 -conf linux-kernel.cfg $HERD_OPTS "$in_lit/$t.litmus" \
		>"$out" 2>&1 &
	herd_pid=$!
	wait "$herd_pid" || rc=$?
	herd_pid=
	want=$(expected "$litdir/$t.litmus")
	got=$(observed "$out" "$rc")
	if [ -z "$want" ]; then
		echo "FAIL $t: no \"Result:\" line in its header comment, herd7 said $got"
		fail=$((fail + 1))
	elif [ "$want" = "$got" ]; then
		echo "ok $t"
		pass=$((pass + 1))
	else
		echo "FAIL $t: expected $want, herd7 said $got"
		fail=$((fail + 1))
	fi
done

# The link from each proof to our code (scripts/litmus_code.py): every
# test's "Code:" section against the functions it names, and every
# function with an ordering claim covered.  One result per (test,
# function) pair, plus the coverage check.
lp_say "checking each test's Code: section against c-module/ and rust-module/"
code_out=$outdir/code.out
python3 "$LP_REPO/scripts/litmus_code.py" "$LP_REPO" "${tests_named[@]}" >"$code_out" 2>&1 || true
sed '$d' "$code_out"
code_counts=$(tail -n1 "$code_out")
if [[ $code_counts =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
	pass=$((pass + BASH_REMATCH[1]))
	fail=$((fail + BASH_REMATCH[2]))
else
	echo "FAIL litmus_code.py: no result line; its output: $(tail -n3 "$code_out")"
	fail=$((fail + 1))
fi

printf '%s %s\n' "$pass" "$fail" >"$LP_OUT/results/litmus.counts"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
