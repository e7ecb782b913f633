#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# mutants.sh [NAME...]: make mutants, the suite's negative controls: apply
# each deliberate bug of shared-tests/mutants/*.patch to a scratch copy of
# the checkout, build it, boot it with only the tests that must catch it,
# judge, and print a table (mutant, what killed it, seconds). Every mutant
# must be killed: exit status is non-zero if one survives or errors.
#
# Each patch is a `git diff` with a header above its first "diff --git":
# its first line says what the bug is, and a line "Tests: GLOB" names the
# driver tests that must catch it (one shell glob matched by the guest's
# /init against FIXTURE.VARIANT.TEST, as TESTS= does for make check).
#
# A copy is build/mutants/NAME/src: the checkout's tracked and untracked
# files that git does not ignore, no build outputs. Its own scripts build
# and boot it (modules.sh, initramfs.sh, qemu.sh, judge.sh), with build/
# inside the copy and the toolchain root and kernel from LP_CACHE, so the
# debug kernel must exist already (make kernel). The log of each mutant
# is build/mutants/NAME/log, the table build/mutants/table.md.
#
# A patch that does not apply, a mutant that does not build or a guest
# that cannot be started is an error, never a kill. The mutant is killed
# when the judge fails the run; what killed it is a splat on the console
# (with the test that was running), else the first failed test, else the
# judge's first FAIL line. A run restricted to one module's tests leaves
# the other module's twins unrun; the judge's "ran for C/Rust only" lines
# are that restriction, not a kill, and are ignored.
#
# Each mutant is judged as make check would, cheapest stage first: the
# litmus code check (scripts/litmus_code.py on the copy, seconds: an
# operation of a modelled function gone, added, reordered or given
# another ordering), then the boot with its Tests: glob. The first stage
# that fails kills it. "Tests: none" names a mutant that only the litmus
# check can kill (an ordering x86 and TCG hide): no boot; it survives if
# that check passes.
#
# A mutant with a "Stage: boot" line skips the litmus code check: its
# claim is that the boot sees it (KASAN, with the window widened in the
# mutant itself), which a kill by the litmus check would hide.
#
# A mutant with a "Compile-error: EXXXX" line in its header is one the
# Rust compiler must reject (a borrow that would outlive the lock or RCU
# read-side critical section it came from): it is built and nothing
# else, and killed only if the build fails with that error code; a
# build that succeeds is a survivor, another build error an error.
#
# A mutant whose diff changes kernel-config/patches/ (a bug in one of our
# Rust-for-Linux patches) needs its own kernel: after the litmus check it
# builds the copy's debug kernel in a scratch cache, build/mutants/NAME/
# cache (its toolchain root a symlink to LP_CACHE's, its kernel tree and
# build its own, about 15 minutes on two cores), then boots it with its
# Tests: glob and the kernel's KUnit suites (KUNIT=1: the patches'
# doctests and #[test]s), so that either can kill it; "Tests: none" then
# boots with KUnit alone. The scratch kernel tree and build (~2.5 GB) are
# removed after the run; the build's log is kept as kernel.log. These
# mutants run only with MUTANT_KERNEL=1 and are otherwise listed as
# skipped.
#
# First a baseline: the unmutated checkout, copied and booted the same
# way, must pass (else every kill would be that failure, and the run
# stops there). MUTANT_BASELINE=quick (default) boots it once with two
# cheap tests, one per module; full boots it with each mutant's Tests:
# glob (proof that those tests pass without the bug, twice the time);
# none skips it.
#
# NAME...: only the mutants whose file name starts with one of them.
# MUTANT_TIMEOUT: seconds one mutant's guest may run (default 420).
# MUTANT_KERNEL=1: run the kernel-patch mutants too.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

kind=debug
# On arm64, make ordering applies the ordering mutants (scripts/ordering.sh).
[ "$LP_ARCH" = x86_64 ] ||
	lp_die "make mutants is x86_64 only (ARCH=$LP_ARCH): on arm64, make ordering runs the ordering mutants"
mdir=$LP_REPO/shared-tests/mutants
out=$LP_OUT/mutants
table=$out/table.md
timeout=${MUTANT_TIMEOUT:-420}
# Cheap, and runs both modules: what a failure of every run would show.
baseline_tests='dev.*.identify_names_module_and_abi'

[ -f "$(lp_kdir_host "$kind")/arch/x86/boot/bzImage" ] || [ -n "${KDIR:-}" ] ||
	lp_die "no $kind kernel in $(lp_kdir_host "$kind"): run 'make kernel' first"
command -v git >/dev/null || lp_die "git is needed to copy the checkout and apply the patches"

patches=()
for p in "$mdir"/*.patch; do
	[ -e "$p" ] || continue
	n=$(basename "$p" .patch)
	if [ $# -gt 0 ]; then
		keep=0
		for want in "$@"; do
			case $n in "$want"*) keep=1 ;; esac
		done
		[ $keep -eq 1 ] || continue
	fi
	patches+=("$p")
done
[ ${#patches[@]} -gt 0 ] || lp_die "no mutants in shared-tests/mutants/${1:+ matching $*}"

# is_kernel_mutant PATCH: true if it changes one of our kernel patches.
is_kernel_mutant() { grep -q '^diff --git a/kernel-config/patches/' "$1"; }

# Kernel-patch mutants build a kernel each: only with MUTANT_KERNEL=1.
skipped=()
kernel_mutants=0
if [ "${MUTANT_KERNEL:-0}" != 1 ]; then
	kept=()
	for p in "${patches[@]}"; do
		if is_kernel_mutant "$p"; then
			skipped+=("$(basename "$p" .patch)")
		else
			kept+=("$p")
		fi
	done
	patches=("${kept[@]}")
	[ ${#patches[@]} -gt 0 ] ||
		lp_die "only kernel-patch mutants match (${skipped[*]}): they run with MUTANT_KERNEL=1 (~15 min each, a kernel build)"
else
	for p in "${patches[@]}"; do
		! is_kernel_mutant "$p" || kernel_mutants=$((kernel_mutants + 1))
	done
fi

# header PATCH: the text above the first "diff --git".
header() { sed '/^diff --git /,$d' "$1"; }

# copy_tree DST: the checkout's tracked and untracked-not-ignored files.
copy_tree() {
	local dst=$1
	mkdir -p "$dst"
	git -C "$LP_REPO" ls-files -co --exclude-standard -z |
		while IFS= read -r -d '' f; do
			# A tracked file deleted in the work tree is not copied.
			[ -e "$LP_REPO/$f" ] && printf '%s\0' "$f"
		done |
		tar -C "$LP_REPO" --null -T - -cf - | tar -C "$dst" -xf -
}

# first_check KTAP TEST: the first check TEST failed in the driver's
# KTAP, with the message logged with it ("Expected A (1) == B (2): why").
first_check() {
	awk -v t="$2" '
	function text(l) { sub(/^# [^:]*:[0-9]+:[^:]*:/, "", l); return l }
	function lineno(l) { split(l, f, ":"); return f[2] + 0 }
	$0 ~ "^#  RUN +" t " " { on = 1; next }
	!on { next }
	$0 ~ "^# +(FAIL|OK) +" t "$" { exit }
	got && lineno($0) > 0 && lineno($0) <= at + 2 && $0 !~ /:Expected / {
		printf ": %s", text($0); exit
	}
	got { exit }
	/:Expected / { printf "%s", text($0); got = 1; at = lineno($0); next }
	/^# / { last = $0 }
	END { if (!got && last != "") printf "%s", substr(last, 3) }' "$1"
}

# killed_by DIR: what killed the mutant, from its judge output and logs;
# empty if the judge found nothing but the restriction's own lines.
killed_by() {
	local dir=$1 fails splat n msg test fn end
	local con=$dir/src/build/guest-$kind/check/console.log
	fails=$(grep '^  FAIL ' "$dir/judge.out" | sed 's/^  FAIL //' |
		grep -vE '^driver: .* ran for (C|Rust) only' || true)
	[ -n "$fails" ] || return 0
	# A failed KUnit case (a kernel-patch mutant's run): KUnit runs at
	# boot, before the driver and before any later splat (a kmemleak
	# report of what the failed case left behind), with its assertion.
	test=$(printf '%s\n' "$fails" | sed -nE 's/^kernel: ([^ ]+): FAILURE$/\1/p' | head -n1)
	if [ -n "$test" ]; then
		msg=$(awk -v t="  FAIL kernel: $test: FAILURE" '
			$0 == t { on = 1; next }
			on && !/^       / { exit }
			on && /Expected/ { sub(/^ +/, ""); print; exit }' "$dir/judge.out")
		printf 'KUnit %s%s\n' "$test" "${msg:+: ${msg:0:140}}"
		return 0
	fi
	splat=$(printf '%s\n' "$fails" | grep -m1 '^kernel splat, ' || true)
	if [ -n "$splat" ]; then
		n=$(printf '%s\n' "$splat" | sed -E 's/^kernel splat, console\.log:([0-9]+):.*/\1/')
		msg=$(printf '%s\n' "$splat" | sed -E 's/^kernel splat, console\.log:[0-9]+: //;
			s/^\[ *[0-9.]+\] ?//; s/CPU: [0-9]+ PID: [0-9]+ at //;
			s/\+0x[0-9a-f]+\/0x[0-9a-f]+//g; s/ \(size [0-9]+\)://;
			s/ at _R[0-9A-Za-z_]+//; s/, CPU#[0-9]+: .*$//')
		case $msg in
		"unreferenced object"*)
			# kmemleak: name the allocation site of our module.
			fn=$(tail -n +"$n" "$con" |
				head -n 40 | grep -m1 -oE '[a-z_0-9]+(\+0x[0-9a-f]+/0x[0-9a-f]+)? \[(lockless_c|lockless_rust)\]' |
				sed -E 's/\+0x[0-9a-f]+\/0x[0-9a-f]+//' || true)
			msg="kmemleak: unreferenced object${fn:+ from $fn}"
			;;
		esac
		# When: during the last test the driver started, or after it
		# exited (rmmod, kmemleak's scan).
		end=$(grep -n -m1 'lp-init: lockless_test exited' "$con" | cut -d: -f1 || true)
		if [ -n "$end" ] && [ "$n" -gt "$end" ]; then
			case $msg in
			kmemleak:*) test="after the driver, by the kmemleak scan" ;;
			*) test="after the driver, at module unload" ;;
			esac
		else
			test=$(grep -oE '#  RUN +[^ ]+' "$dir/src/build/guest-$kind/check/ktap.log" 2>/dev/null |
				tail -n1 | awk '{ print "during " $3 }' || true)
		fi
		printf 'splat: %s%s\n' "${msg:0:90}" "${test:+ ($test)}"
		return 0
	fi
	test=$(printf '%s\n' "$fails" | sed -nE 's/^driver: ([^ :]+\.[^ :]+\.[^ :]+): [A-Z_]+$/\1/p' | head -n1)
	if [ -n "$test" ]; then
		msg=$(first_check "$dir/src/build/guest-$kind/check/ktap.log" "$test")
		printf '%s%s\n' "$test" "${msg:+: ${msg:0:160}}"
		return 0
	fi
	msg=$(printf '%s\n' "$fails" | head -n1)
	printf '%s\n' "${msg:0:110}"
}

# build_and_judge DIR TESTS: build the copy DIR/src, boot it with TESTS,
# judge it into DIR/judge.out. Sets judge_rc, or why (and returns 1) when
# something before the judge failed.
# ENV... (VAR=VALUE words before the call, for every step): LP_CACHE= of a
# kernel-patch mutant's scratch cache, KUNIT=1.
build_and_judge() {
	local dir=$1 tests=$2 src=$1/src
	shift 2
	local env=(env "$@")
	judge_rc=
	if ! "${env[@]}" "$src/scripts/modules.sh" "$kind" >>"$dir/log" 2>&1; then
		why="does not build: $(grep -m1 -E 'error' "$dir/log" | cut -c1-100)"
		return 1
	fi
	if ! "${env[@]}" "$src/scripts/initramfs.sh" "$kind" >>"$dir/log" 2>&1; then
		why="the guest does not build (see $dir/log)"
		return 1
	fi
	if ! "${env[@]}" TESTS="$tests" TIMEOUT="$timeout" "$src/scripts/qemu.sh" check "$kind" >>"$dir/log" 2>&1; then
		why="the guest could not be run (see $dir/log)"
		return 1
	fi
	judge_rc=0
	"${env[@]}" TESTS="$tests" "$src/scripts/judge.sh" check "$kind" >"$dir/judge.out" 2>&1 || judge_rc=$?
	cat "$dir/judge.out" >>"$dir/log"
	if grep -q '^Traceback' "$dir/judge.out"; then
		why="the judge crashed (see $dir/judge.out)"
		return 1
	fi
}

# fresh_copy DIR: an empty DIR with the checkout copied to DIR/src.
fresh_copy() {
	rm -rf "$1"
	mkdir -p "$1"
	: >"$1/log"
	copy_tree "$1/src"
}

# tests_of PATCH: its Tests: glob.
tests_of() { header "$1" | sed -n 's/^Tests:[[:space:]]*//p' | head -n1; }

# stage_of PATCH: its Stage: line ("boot": no litmus code check).
stage_of() { header "$1" | sed -n 's/^Stage:[[:space:]]*//p' | head -n1; }

# compile_error_of PATCH: its Compile-error: code, if the compiler must reject it.
compile_error_of() { header "$1" | sed -n 's/^Compile-error:[[:space:]]*//p' | head -n1; }

# baseline TESTS: the unmutated checkout must pass TESTS, or no kill
# proves anything (a failure it shares with every mutant is not a kill).
# With kernel-patch mutants to judge, the kernel's KUnit suites run too.
baseline() {
	local tests=$1 dir=$out/${2:-baseline} t0=$SECONDS env=()
	[ "$kernel_mutants" -eq 0 ] || env=(KUNIT=1)
	lp_say "baseline: the unmutated checkout with TESTS=$tests${env[*]:+ and the KUnit suites of the kernel}"
	fresh_copy "$dir"
	why=
	build_and_judge "$dir" "$tests" "${env[@]}" || lp_die "baseline: the unmutated checkout $why"
	if ! python3 "$dir/src/scripts/litmus_code.py" "$dir/src" >"$dir/litmus.out" 2>&1; then
		sed 's/^/    /' "$dir/litmus.out" | grep -v '^    ok ' >&2
		lp_die "baseline: the unmutated checkout fails the litmus code check (above): fix that first"
	fi
	if [ -n "$(killed_by "$dir")" ]; then
		sed 's/^/    /' "$dir/judge.out" >&2
		lp_die "baseline: the unmutated checkout fails TESTS=$tests (above, and $dir/): fix that first, no mutant can be judged against it"
	fi
	lp_say "  baseline passed in $((SECONDS - t0))s"
}

# run_mutant PATCH: sets status (killed, SURVIVED, ERROR) and why.
run_mutant() {
	local patch=$1 name dir src tests
	name=$(basename "$patch" .patch)
	dir=$out/$name
	src=$dir/src
	tests=$(tests_of "$patch")
	status=ERROR
	why=
	if [ -z "$tests" ]; then
		why="no 'Tests: GLOB' line in its header"
		return
	fi
	case $tests in *[[:space:]]*)
		why="Tests: '$tests' is not one glob without spaces"
		return
		;;
	esac

	fresh_copy "$dir"
	# Outside any repository (the copy sits in this checkout's build/),
	# git apply patches the files of the current directory.
	if ! (cd "$src" && GIT_CEILING_DIRECTORIES=$dir git apply --check "$patch" &&
		GIT_CEILING_DIRECTORIES=$dir git apply "$patch") >>"$dir/log" 2>&1; then
		why="the patch does not apply: $(tail -n1 "$dir/log")"
		return
	fi
	local cerr
	cerr=$(compile_error_of "$patch")
	if [ -n "$cerr" ]; then
		# Its claim is that the compiler rejects it: the build, nothing else.
		if "$src/scripts/modules.sh" "$kind" >>"$dir/log" 2>&1; then
			status=SURVIVED
			why="it builds: the compiler was to reject it with error[$cerr]"
		elif grep -q "error\[$cerr\]" "$dir/log"; then
			status=killed
			why="rustc $(grep -m1 "error\[$cerr\]" "$dir/log" | cut -c1-140)"
		else
			why="the build fails, but not with error[$cerr]: $(grep -m1 -E 'error' "$dir/log" | cut -c1-100)"
		fi
		return
	fi
	# Stage 1, seconds: the litmus code check.
	if [ "$(stage_of "$patch")" != boot ] &&
		! python3 "$src/scripts/litmus_code.py" "$src" >"$dir/litmus.out" 2>&1; then
		status=killed
		why="litmus code check: $(grep -m1 '^FAIL' "$dir/litmus.out" | sed 's/^FAIL //' |
			tr '\r\n|' '  /' | cut -c1-150)"
		[ "$why" != "litmus code check: " ] || why="litmus code check: $(tail -n1 "$dir/litmus.out")"
		return
	fi
	local env=() boot=$tests
	if is_kernel_mutant "$patch"; then
		# Stage 2: its kernel, in a scratch cache that shares the root.
		local cache=$dir/cache t0=$SECONDS
		mkdir -p "$cache"
		ln -sfn "$LP_ROOT" "$cache/root"
		lp_say "  building its debug kernel in $cache (~15 min; log: $dir/kernel.log)"
		if ! LP_CACHE=$cache "$src/scripts/kernel.sh" "$kind" >>"$dir/log" 2>&1; then
			cp "$cache/work/kernel-$kind.log" "$dir/kernel.log" 2>/dev/null || true
			rm -rf "$cache"
			why="its kernel does not build: $(grep -m1 -E 'error' "$dir/kernel.log" "$dir/log" 2>/dev/null |
				cut -d: -f2- | cut -c1-100)"
			return
		fi
		lp_say "  kernel built in $((SECONDS - t0))s"
		env=(LP_CACHE="$cache" KUNIT=1)
		[ "$tests" != none ] || boot=$baseline_tests
	elif [ "$tests" = none ]; then
		status=SURVIVED
		why="the litmus code check passed, and Tests: none boots nothing"
		return
	fi
	# Stage 3: the driver tests of its Tests: glob (and, with its own
	# kernel, the kernel's KUnit suites).
	if ! build_and_judge "$dir" "$boot" "${env[@]}"; then
		why="the mutant $why"
		drop_cache "$dir"
		return
	fi
	drop_cache "$dir"
	# One table cell: no line breaks (the serial KTAP ends lines with \r\n),
	# no column separators.
	why=$(killed_by "$dir" | tr '\r\n|' '  /' | sed 's/  */ /g; s/ $//')
	if [ "$judge_rc" -ne 0 ] && [ -n "$why" ]; then
		status=killed
	else
		status=SURVIVED
		why="the judge passed TESTS=$boot${env[*]:+ and KUnit on its own kernel} (see $dir/src/build/guest-$kind/check/)"
	fi
}

# drop_cache DIR: a kernel-patch mutant's scratch kernel tree and build
# go (~2.5 GB); its build log stays, as DIR/kernel.log.
drop_cache() {
	[ -d "$1/cache" ] || return 0
	cp "$1/cache/work/kernel-$kind.log" "$1/kernel.log" 2>/dev/null || true
	rm -rf "$1/cache"
}

# The run itself, in a function: bash reads all of it before it starts,
# so an edit to this file meanwhile cannot change a run under way.
main() {
	local total killed rows start i patch name t0 secs globs
	mkdir -p "$out"
	total=${#patches[@]}
	killed=0
	rows=()
	start=$SECONDS
	case ${MUTANT_BASELINE:-quick} in
	quick) baseline "$baseline_tests" ;;
	full)
		mapfile -t globs < <(for p in "${patches[@]}"; do tests_of "$p"; done | grep -vx none | sort -u)
		for i in "${!globs[@]}"; do
			baseline "${globs[$i]}" "baseline-$((i + 1))"
		done
		;;
	none) lp_say "MUTANT_BASELINE=none: no baseline run, so a kill may be a failure the checkout has anyway" ;;
	*) lp_die "MUTANT_BASELINE=$MUTANT_BASELINE is not one of quick, full, none" ;;
	esac
	lp_say "make mutants: $total mutants, each built and booted with only the tests that must kill it (guest timeout ${timeout}s)"
	[ ${#skipped[@]} -eq 0 ] ||
		lp_say "skipped: ${#skipped[@]} kernel-patch mutants (${skipped[*]}); MUTANT_KERNEL=1 runs them, ~15 min each"
	i=0
	for patch in "${patches[@]}"; do
		i=$((i + 1))
		name=$(basename "$patch" .patch)
		lp_say "mutant $i/$total $name: $(header "$patch" | head -n1)"
		lp_say "  Tests: $(header "$patch" | sed -n 's/^Tests:[[:space:]]*//p' | head -n1)"
		t0=$SECONDS
		run_mutant "$patch"
		secs=$((SECONDS - t0))
		case $status in
		killed)
			killed=$((killed + 1))
			lp_say "  killed in ${secs}s by $why"
			rows+=("| $name | $why | $secs |")
			;;
		*)
			lp_say "  $status after ${secs}s: $why"
			[ -s "$out/$name/log" ] && tail -n 15 "$out/$name/log" | sed 's/^/    /' >&2
			rows+=("| $name | **$status**: $why | $secs |")
			;;
		esac
	done

	{
		echo "| mutant | killed by | seconds |"
		echo "|---|---|---|"
		printf '%s\n' "${rows[@]}"
		echo
		echo "$killed of $total mutants killed in $((SECONDS - start)) s${skipped[*]:+; skipped, without MUTANT_KERNEL=1: ${skipped[*]}}"
	} >"$table"
	echo
	cat "$table"
	[ "$killed" -eq "$total" ]
}

main
