#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# series.sh: what `make series` runs: write build/series/, the patches of
# kernel-config/patches/ as a `git format-patch --cover-letter` series for
# git send-email: 0000-cover-letter.patch and one NNNN-SLUG.patch per
# patch, in order, authored and signed off by the checkout's
# `git config user.name` / `user.email` (the patches carry a placeholder).
#
# The cover letter is kernel-config/series/cover-letter.txt's prose plus
# what is generated: the numbered list of patches, the base (the kernel
# version of the root's linux-source package), the shortlog and the
# combined diffstat. The series is applied to the files it touches, taken
# from the pristine tarball, which both checks that it applies and gives
# the diffstat (scripts/series.py). Every patch must pass the kernel's
# checkpatch.pl --strict (from the unpacked source of `make kernel`), with
# "does MAINTAINERS need updating?" (FILE_PATH_CHANGES) replaced by a check
# that a MAINTAINERS entry covers each file created or deleted.
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
	set -- "$name" "$email"
fi
lp_in_root "$@"

# Inside the root.
name=$1
email=$2
start=$SECONDS
out=$LP_OUT/series
tmpl=$LP_REPO/kernel-config/series/cover-letter.txt
[ -f "$tmpl" ] || lp_die "no ${tmpl#"$LP_REPO"/}: the cover letter's prose"
patches=()
for p in "$LP_REPO"/kernel-config/patches/*.patch; do
	[ -e "$p" ] && patches+=("$p")
done
[ ${#patches[@]} -gt 0 ] || lp_die "no kernel-config/patches/*.patch: nothing to make a series of"

# checkpatch.pl and MAINTAINERS: the unpacked source of the current
# patches if there is one, else any unpacked source (neither file is
# patched).
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
lp_say "make series: ${#patches[@]} patches of kernel-config/patches/, from $name <$email>"

# The files the series changes, before it (from the tarball) and after it.
top=$(basename "$LP_KERNEL_TARBALL" .tar.xz)
members=("$top/Makefile")
while IFS= read -r f; do
	[ "$f" = Makefile ] || members+=("$top/$f")
done < <(python3 scripts/series.py files "${patches[@]}")
lp_say "series: taking the files it changes, and Makefile, from $LP_KERNEL_TARBALL (~10 s)"
mkdir -p "$tmp/a"
tar -xJf "$LP_KERNEL_TARBALL" -C "$tmp/a" --strip-components=1 "${members[@]}" ||
	lp_die "could not take ${members[*]#"$top"/} from $LP_KERNEL_TARBALL: does a patch change a file the kernel does not have?"
cp -a "$tmp/a" "$tmp/b"
for p in "${patches[@]}"; do
	patch -d "$tmp/b" -p1 --forward --batch --quiet --no-backup-if-mismatch <"$p" >"$tmp/patch.log" 2>&1 || {
		cat "$tmp/patch.log" >&2
		lp_die "${p##*/} does not apply to $LP_KERNEL_PACKAGE after the patches before it: refresh it"
	}
done

# The base: the root's linux-source package and the release it holds.
kver=$(awk -F' *= *' '$1 == "VERSION" { v = $2 } $1 == "PATCHLEVEL" { p = $2 }
	$1 == "SUBLEVEL" { s = $2 } $1 == "EXTRAVERSION" { e = $2 }
	END { printf "%s.%s%s%s", v, p, (s == "" || s == 0) ? "" : "." s, e }' "$tmp/a/Makefile")
debver=$(dpkg-query -W -f='${Version}' "$LP_KERNEL_PACKAGE" 2>/dev/null) ||
	lp_die "$LP_KERNEL_PACKAGE is not installed in the toolchain root: run 'make toolchain'"
case $kver in
*.*.*) release="the stable release v$kver (linux-${kver%.*}.y)" ;;
*) release="the release v$kver" ;;
esac
base="Base: Debian's $LP_KERNEL_PACKAGE $debver ($LP_KERNEL_SUITE), which is $release with Debian's own patches; each patch applies to it with patch -p1 on top of the ones before it. The series has not been rebased onto a newer tree."

lp_say "series: writing ${out#"$LP_REPO"/}/"
rm -rf "$out"
mkdir -p "$out"
python3 scripts/series.py write --name "$name" --email "$email" \
	--template "$tmpl" --out "$out" --base "$base" \
	--pristine "$tmp/a" --patched "$tmp/b" "${patches[@]}" ||
	lp_die "scripts/series.py could not write the series (above)"

# checkpatch --strict, as make lint runs it on kernel-config/patches/:
# GIT_DIR names no repository (the cwd's .git is ours, not the kernel's).
lp_say "series: checkpatch.pl --strict on each patch (${src/#$LP_CACHE_IN/\$LP_CACHE/work}/scripts/checkpatch.pl)"
clean=0
total=0
for f in "$out"/[0-9][0-9][0-9][0-9]-*.patch; do
	[ "${f##*/}" != 0000-cover-letter.patch ] || continue
	total=$((total + 1))
	if o=$(GIT_DIR=/nonexistent perl "$src/scripts/checkpatch.pl" --strict --quiet \
		--ignore FILE_PATH_CHANGES --root="$src" "$f" 2>&1) && [ -z "$o" ]; then
		clean=$((clean + 1))
		echo "  ok   ${f##*/}"
	else
		echo "  FAIL ${f##*/}"
		printf '%s\n' "$o" | sed 's/^/       /'
	fi
done
lp_say "series: MAINTAINERS entries of the files the series creates or deletes"
maint=ok
python3 scripts/series.py maintainers --tree "$src" "${patches[@]}" || maint=FAIL

n=${#patches[@]}
echo "series: $n patches and a cover letter ([PATCH 0/$n]) in ${out#"$LP_REPO"/}/, from $name <$email>, on v$kver ($LP_KERNEL_PACKAGE $debver)"
echo "checkpatch --strict: $clean of $total patches clean; MAINTAINERS coverage: $maint"
echo "make series took $((SECONDS - start)) s; to send: git send-email --to=LIST ${out#"$LP_REPO"/}/*.patch"
[ "$clean" -eq "$total" ] && [ "$maint" = ok ]
