#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# series.sh: what `make series` runs: write build/series/, the patches of
# kernel-config/patches/ as one `git format-patch --cover-letter` series
# per maintainer tree, as kernel-config/series/ splits them (series.py
# plan checks the split: every listed patch exists, every patch is in one
# series). Each series goes to build/series/NAME/: 0000-cover-letter.patch
# (a series of several patches) and NNNN-SLUG.patch, numbered within the
# series, with the To: and Cc: of its series file, authored and signed off
# by the checkout's `git config user.name` / `user.email` (the patches
# carry a placeholder). A patch sent alone gets no cover letter: its
# notes.txt, the sender note and the base go below its "---".
#
# A cover letter is the series' cover-letter.txt prose plus what is
# generated: the numbered list of patches, the prerequisite series (if
# it requires any), the sender note, the base (the kernel version of the
# root's linux-source package), the shortlog, the diffstat of the series
# on its base, and, on the host, one prerequisite-patch-id: line per
# patch of the series it requires (git patch-id --stable, as git
# format-patch --base writes them). Each series is applied to the files it
# touches, taken from the pristine tarball with the series it requires
# applied first, which both checks that it applies on its base and gives
# the diffstat. Every patch must pass the kernel's checkpatch.pl --strict
# (from the unpacked source of `make kernel`), with "does MAINTAINERS
# need updating?" (FILE_PATH_CHANGES) replaced by a check that a
# MAINTAINERS entry covers each file created or deleted; and every address
# the kernel's get_maintainer.pl names for a series must be in its To: or
# Cc:.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ -z "${LP_CACHE_IN:-}" ]; then
	# Host side: the identity (git is the host's; the root has none).
	lp_need_root "$@"
	command -v git >/dev/null ||
		lp_die "make series reads git config user.name and user.email: install git"
	name=$(git -C "$LP_REPO" config user.name || true)
	email=$(git -C "$LP_REPO" config user.email || true)
	how="git config user.name 'Your Name'; git config user.email you@example.org (in this checkout, or --global)"
	[ -n "$name" ] ||
		lp_die "git config user.name is not set: the patches' From: and Signed-off-by: carry your name, and make series never makes one up; set it with: $how"
	[ -n "$email" ] ||
		lp_die "git config user.email is not set: the patches' From: and Signed-off-by: carry your address; set it with: $how"
	case $name in *[\<\>]*) lp_die "git config user.name '$name' holds < or >: give the name alone" ;; esac
	[[ $email =~ ^[^[:space:]\<\>@]+@[^[:space:]\<\>@]+$ ]] ||
		lp_die "git config user.email '$email' is not an address (name@domain)"
	"$LP_REPO/scripts/toolchain.sh"
	"$LP_REPO/scripts/inroot.sh" "$(printf '%q ' scripts/series.sh "$name" "$email")" || exit 1
	# Host side, after the root: the prerequisite-patch-id: lines of each
	# series that requires another (git patch-id is the host's git).
	out=$LP_OUT/series
	while IFS=$'\t' read -r s req _; do
		[ "$req" != - ] || continue
		cover=$out/$s/0000-cover-letter.patch
		[ -f "$cover" ] || cover=$(ls "$out/$s"/0001-*.patch)
		ids=()
		for r in ${req//,/ }; do
			for p in "$out/$r"/[0-9][0-9][0-9][0-9]-*.patch; do
				[ "${p##*/}" != 0000-cover-letter.patch ] || continue
				id=$(git patch-id --stable <"$p" | cut -d' ' -f1)
				[ -n "$id" ] || lp_die "git patch-id found no diff in ${p#"$LP_REPO"/}"
				ids+=("prerequisite-patch-id: $id")
			done
		done
		# At the end of the cover letter (of a patch sent alone: after its
		# diff), as git format-patch --base puts them.
		{
			echo
			printf '%s\n' "${ids[@]}"
		} >>"$cover"
		echo "series: $s: ${#ids[@]} prerequisite-patch-id: lines (the patches of ${req//,/, })"
	done <"$out/plan"
	exit 0
fi
# Inside the root.
name=$1
email=$2
start=$SECONDS
out=$LP_OUT/series
split=$LP_REPO/kernel-config/series
pdir=$LP_REPO/kernel-config/patches
n_all=0
for p in "$pdir"/*.patch; do
	[ -e "$p" ] && n_all=$((n_all + 1))
done
[ "$n_all" -gt 0 ] || lp_die "no kernel-config/patches/*.patch: nothing to make a series of"

# checkpatch.pl, get_maintainer.pl and MAINTAINERS: the unpacked source of
# the current patches if there is one, else any unpacked source (none of
# them is patched, but for MAINTAINERS entries the patches add).
src=
for d in "$LP_CACHE_IN/src-$(lp_src_hash)" "$LP_CACHE_IN"/src-*; do
	if [ -f "$d/.lp-ready" ] && [ -f "$d/scripts/checkpatch.pl" ]; then
		src=$d
		break
	fi
done
[ -n "$src" ] ||
	lp_die "no unpacked kernel source under \$LP_CACHE/work (checkpatch.pl comes from it): run 'make kernel' first"

tmp=$(mktemp -d /tmp/lp-series.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out"
mkdir -p "$out"
# The split: every listed patch exists, every patch is in one series.
python3 scripts/series.py plan --series-dir "$split" --patches "$pdir" >"$out/plan" ||
	lp_die "the split of kernel-config/patches/ into kernel-config/series/ is broken (above)"
declare -A requires=() members=()
lp_read_plan "$out/plan"
lp_say "make series: $n_all patches of kernel-config/patches/ in ${#order[@]} series (${order[*]}), from $name <$email>"

# The files the patches change, before any of them (from the tarball).
top=$(basename "$LP_KERNEL_TARBALL" .tar.xz)
members_tar=("$top/Makefile")
while IFS= read -r f; do
	[ "$f" = Makefile ] || members_tar+=("$top/$f")
done < <(python3 scripts/series.py files "$pdir"/*.patch)
lp_say "series: taking the files they change, and Makefile, from $LP_KERNEL_TARBALL (~10 s)"
mkdir -p "$tmp/pristine"
tar -xJf "$LP_KERNEL_TARBALL" -C "$tmp/pristine" --strip-components=1 "${members_tar[@]}" ||
	lp_die "could not take ${members_tar[*]#"$top"/} from $LP_KERNEL_TARBALL: does a patch change a file the kernel does not have?"

# Each series on its base: the pristine files plus the series it requires
# (theirs first), then its own patches. a/ and b/ give its diffstat.
apply() { # DIR PATCH WHAT
	patch -d "$1" -p1 --forward --batch --quiet --no-backup-if-mismatch <"$pdir/$2" >"$tmp/patch.log" 2>&1 || {
		cat "$tmp/patch.log" >&2
		lp_die "$2 does not apply to $LP_KERNEL_PACKAGE $3: refresh it, or fix the split in kernel-config/series/"
	}
}
for s in "${order[@]}"; do
	mkdir -p "$tmp/trees/$s"
	cp -a "$tmp/pristine" "$tmp/trees/$s/a"
	while IFS= read -r p; do
		[ -n "$p" ] && apply "$tmp/trees/$s/a" "$p" "plus the series ${requires[$s]//,/, } (of which it is a patch)"
	done < <(lp_plan_base "$s")
	cp -a "$tmp/trees/$s/a" "$tmp/trees/$s/b"
	read -ra list <<<"${members[$s]}"
	for p in "${list[@]}"; do
		apply "$tmp/trees/$s/b" "$p" "$([ -n "${requires[$s]}" ] && echo "plus the series ${requires[$s]//,/, }") after the patches of series $s before it"
	done
done

# The base: the root's linux-source package and the release it holds.
kver=$(awk -F' *= *' '$1 == "VERSION" { v = $2 } $1 == "PATCHLEVEL" { p = $2 }
	$1 == "SUBLEVEL" { s = $2 } $1 == "EXTRAVERSION" { e = $2 }
	END { printf "%s.%s%s%s", v, p, (s == "" || s == 0) ? "" : "." s, e }' "$tmp/pristine/Makefile")
debver=$(dpkg-query -W -f='${Version}' "$LP_KERNEL_PACKAGE" 2>/dev/null) ||
	lp_die "$LP_KERNEL_PACKAGE is not installed in the toolchain root: run 'make toolchain'"
case $kver in
*.*.*) release="the stable release v$kver (linux-${kver%.*}.y)" ;;
*) release="the release v$kver" ;;
esac
base="Base: Debian's $LP_KERNEL_PACKAGE $debver ($LP_KERNEL_SUITE), which is $release with Debian's own patches (no public commit of it to name as base-commit:); each patch applies to it with patch -p1 on top of the ones before it. The series has not been rebased onto a newer tree."

lp_say "series: writing ${out#"$LP_REPO"/}/SERIES/"
python3 scripts/series.py write --name "$name" --email "$email" \
	--series-dir "$split" --patches "$pdir" --out "$out" --base "$base" \
	--trees "$tmp/trees" ||
	lp_die "scripts/series.py could not write the series (above)"

# checkpatch --strict, as make lint runs it on kernel-config/patches/:
# GIT_DIR names no repository (the cwd's .git is ours, not the kernel's).
lp_say "series: checkpatch.pl --strict on each patch (${src/#$LP_CACHE_IN/\$LP_CACHE/work}/scripts/checkpatch.pl)"
clean=0
total=0
for f in "$out"/*/[0-9][0-9][0-9][0-9]-*.patch; do
	[ "${f##*/}" != 0000-cover-letter.patch ] || continue
	total=$((total + 1))
	rel=${f#"$out"/}
	if o=$(GIT_DIR=/nonexistent perl "$src/scripts/checkpatch.pl" --strict --quiet \
		--ignore FILE_PATH_CHANGES --root="$src" "$f" 2>&1) && [ -z "$o" ]; then
		clean=$((clean + 1))
		echo "  ok   $rel"
	else
		echo "  FAIL $rel"
		printf '%s\n' "$o" | sed 's/^/       /'
	fi
done
lp_say "series: MAINTAINERS entries of the files the patches create or delete"
maint=ok
python3 scripts/series.py maintainers --tree "$src" "$pdir"/*.patch || maint=FAIL
lp_say "series: get_maintainer.pl's addresses in each series' To: and Cc:"
getm=ok
python3 scripts/series.py get-maintainer --tree "$src" --series-dir "$split" --patches "$pdir" || getm=FAIL

echo "series: ${#order[@]} series of $n_all patches in ${out#"$LP_REPO"/}/, from $name <$email>, on v$kver ($LP_KERNEL_PACKAGE $debver):"
for s in "${order[@]}"; do
	read -ra list <<<"${members[$s]}"
	n=${#list[@]}
	printf '  %-20s %2d %s%s\n' "$s" "$n" \
		"$([ "$n" -eq 1 ] && echo 'patch, no cover letter' || echo "patches and a cover letter ([PATCH 0/$n])")" \
		"$([ -z "${requires[$s]}" ] || echo ", on top of ${requires[$s]//,/, }")"
done
echo "checkpatch --strict: $clean of $total patches clean; MAINTAINERS coverage: $maint; get_maintainer.pl in To:/Cc:: $getm"
echo "make series took $((SECONDS - start)) s; to send one series: git send-email ${out#"$LP_REPO"/}/SERIES/*.patch (its To: and Cc: are in the files)"
[ "$clean" -eq "$total" ] && [ "$maint" = ok ] && [ "$getm" = ok ]
