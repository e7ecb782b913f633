#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ordering.sh [KIND]: make ordering, the machine-code ordering check on
# arm64 (ARCH=arm64; default KIND debug): both modules built with DWARF
# against the arm64 kernel, then scripts/ordering.py reads every ordered
# function's instructions (C and Rust side by side, claims -> forms).
#
# Then, unless ORDERING_MUTANTS=0 (make check ARCH=arm64 runs the check
# alone, on the modules it built: ORDERING_PREBUILT=1), the negative controls: each mutant of shared-tests/mutants/ that
# weakens an ordering (MUTANTS below) is applied to a copy of the
# checkout (build/ordering/NAME/src), its module rebuilt, and the check
# run on it: it must fail. Writes results/ordering.counts (passed,
# failed: the HEAD check's functions, plus one per mutant killed or not).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kind=${1:-debug}
[ "$LP_ARCH" = arm64 ] ||
	lp_die "make ordering reads arm64 code: run it with ARCH=arm64 (the Makefile does)"

# The mutants that weaken an ordering (their headers say how), and the
# module each changes.
MUTANTS=(
	02-c-tryget-plain-increment:c-module
	29-c-txn-commit-without-rmb:c-module
	30-rust-txn-commit-without-rmb:rust-module
	31-c-txn-stop-relaxed-decrement:c-module
	32-rust-txn-stop-relaxed-decrement:rust-module
)
declare -A MOD
for m in "${MUTANTS[@]}"; do
	MOD[${m%%:*}]=${m#*:}
done

mroot=$LP_OUT/ordering
if [ -z "${LP_CACHE_IN:-}" ]; then
	"$LP_REPO/scripts/toolchain.sh"
	[ -n "${KDIR:-}" ] || "$LP_REPO/scripts/kernel.sh" "$kind"
	# The mutants' copies are made here: the root has no git.
	if [ "${ORDERING_MUTANTS:-1}" != 0 ]; then
		command -v git >/dev/null || lp_die "git is needed to copy the checkout and apply the mutants"
		for m in "${MUTANTS[@]}"; do
			name=${m%%:*}
			patch=$LP_REPO/shared-tests/mutants/$name.patch
			[ -f "$patch" ] || lp_die "mutant $name.patch is gone: update MUTANTS in scripts/ordering.sh"
			dir=$mroot/$name
			rm -rf "$dir"
			mkdir -p "$dir/src"
			git -C "$LP_REPO" ls-files -co --exclude-standard -z |
				while IFS= read -r -d '' f; do
					[ -e "$LP_REPO/$f" ] && printf '%s\0' "$f"
				done | tar -C "$LP_REPO" --null -T - -cf - | tar -C "$dir/src" -xf -
			# git apply patches the files of the current directory (as
			# in mutants.sh): the checkout above must not be its repo.
			(cd "$dir/src" && GIT_CEILING_DIRECTORIES=$dir git apply "$patch") \
				2>"$dir/apply.err" ||
				lp_die "mutant $name does not apply: $(head -n1 "$dir/apply.err")"
			git -C "$LP_REPO" diff --no-index --quiet -- "$LP_REPO/${MOD[$name]}" \
				"$dir/src/${MOD[$name]}" 2>/dev/null &&
				lp_die "mutant $name changed nothing in ${MOD[$name]}"
		done
	fi
	lp_in_root "$@"
fi

kdir=$(lp_kdir "$kind")
results=$LP_OUT/results
mkdir -p "$results"
out=$LP_OUT/guest-$kind$LP_KSUF/modules

# make check ARCH=arm64 built them with DWARF already (ORDERING_PREBUILT=1),
# and its lint rebuilds the Rust module in place meanwhile: only the
# copies in $out are read.
if [ "${ORDERING_PREBUILT:-0}" != 1 ]; then
	lp_say "ordering: the modules with DWARF (scripts/modules.sh $kind -g)"
	"$LP_REPO/scripts/modules.sh" "$kind" -g >/dev/null
fi
start=$SECONDS
rc=0
python3 "$LP_REPO/scripts/ordering.py" "$LP_REPO" "$out" "$kdir/vmlinux" \
	>"$results/ordering.txt" || rc=$?
cat "$results/ordering.txt"
read -r passed failed < <(sed -n '$s/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' \
	"$results/ordering.txt")
[ -n "${passed:-}" ] || { passed=0 failed=1; }
[ $rc -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
lp_say "ordering: HEAD checked in $((SECONDS - start)) s: $passed passed, $failed failed"

if [ "${ORDERING_MUTANTS:-1}" != 0 ]; then
	table=()
	for m in "${MUTANTS[@]}"; do
		name=${m%%:*} mod=${m#*:}
		dir=$mroot/$name
		[ -d "$dir/src" ] || lp_die "no copy of the checkout in $dir (made on the host)"
		lp_say "ordering: mutant $name: rebuilding $mod"
		mout=$dir/modules
		mkdir -p "$mout"
		if ! make -s -C "$kdir" M="$dir/src/$mod" LLVM=1 KCFLAGS=-g \
			KRUSTFLAGS=-Cdebuginfo=2 modules >"$dir/build.log" 2>&1; then
			table+=("$name: ERROR, does not build (see ${dir#"$LP_OUT"/}/build.log)")
			failed=$((failed + 1))
			continue
		fi
		cp "$out"/lockless_c.ko "$out"/lockless_rust.ko "$mout/"
		cp "$dir/src/$mod"/*.ko "$mout/"
		mrc=0
		python3 "$LP_REPO/scripts/ordering.py" "$dir/src" "$mout" "$kdir/vmlinux" \
			>"$dir/ordering.txt" || mrc=$?
		if [ $mrc -ne 0 ]; then
			why=$(grep -m1 -B0 '^ *FAIL ' "$dir/ordering.txt" | sed 's/^ *FAIL //; s/  */ /g')
			fn=$(grep -m1 '\[FAIL' "$dir/ordering.txt" | awk '{print $3}')
			table+=("$name: killed: $fn: $why")
			passed=$((passed + 1))
		else
			table+=("$name: SURVIVED (the check passes on it)")
			failed=$((failed + 1))
		fi
	done
	echo "ordering mutants (each must make the check fail):"
	printf '  %s\n' "${table[@]}"
fi
echo "$passed $failed" >"$results/ordering.counts"
echo "ordering: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
