#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# patches_regen.sh: keep kernel-config/patches/ as `git format-patch` output
# of a real git tree of the patched kernel, so that every patch carries
# index lines and git's diffstat (and `git am -3` can fall back).
#
#   scripts/patches_regen.sh init DIR    make DIR a git tree: the pristine
#                                        $LP_KERNEL_TARBALL (from the toolchain
#                                        root) as one commit, then each
#                                        kernel-config/patches/*.patch as one
#                                        commit (git am, or patch -p1 and a
#                                        commit with the patch's own From:,
#                                        Date: and message where am fails)
#   scripts/patches_regen.sh write DIR [REV]
#                                        rewrite kernel-config/patches/ from
#                                        DIR's commits after the base (the root
#                                        commit) up to REV (HEAD): edit the
#                                        series in DIR (rebase -i, fixups),
#                                        then run this
#
# A regenerated patch keeps its file's number (gaps included) and, if its
# subject is unchanged, its file name (see "Names" below); a new patch
# gets the next number after the highest, so it goes at the end of the
# commits in DIR too (kernel.sh applies the files in name order). The author, date and
# "From 000..." line are kept as the commits have them (--zero-commit:
# the stored patches carry a placeholder author, not a sender).
# Runs on the host (git is the host's); DIR stays out of the repository.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

usage() { lp_die "usage: scripts/patches_regen.sh init DIR | write DIR [REV]"; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
cmd=$1
dir=$2
rev=${3:-HEAD}
command -v git >/dev/null || lp_die "patches_regen.sh needs git on the host"
pdir=$LP_REPO/kernel-config/patches

case $cmd in
init)
	[ ! -e "$dir" ] || lp_die "$dir exists: give a new directory"
	tarball=$LP_ROOT$LP_KERNEL_TARBALL
	[ -f "$tarball" ] || lp_die "no $tarball: run 'make toolchain' first"
	mkdir -p "$dir"
	lp_say "unpacking $LP_KERNEL_TARBALL into $dir (~20 s)"
	tar -xf "$tarball" -C "$dir" --strip-components=1
	cd "$dir"
	git init -q
	# Debian's top-level .gitignore ignores everything at the top level
	# (it is meant for its packaging repository): add with -f.
	lp_say "committing the pristine tree (~1 min)"
	git add -Af .
	git -c user.name="lockless-parity" -c user.email="lockless-parity@users.noreply.example" \
		commit -q -m "$LP_KERNEL_PACKAGE: the pristine $(basename "$LP_KERNEL_TARBALL")"
	for p in "$pdir"/*.patch; do
		[ -e "$p" ] || continue
		if git am -q --committer-date-is-author-date "$p" 2>/dev/null; then
			lp_say "git am ${p##*/}"
			continue
		fi
		git am --abort
		lp_say "git am failed on ${p##*/}: patch -p1 and a commit with its own header"
		patch -p1 --forward --batch --quiet <"$p" ||
			lp_die "${p##*/} does not apply to the tree of the patches before it"
		git add -Af .
		# The header of a git mbox: From:, Date:, Subject: (maybe folded).
		author=$(sed -n 's/^From: //p;/^$/q' "$p" | head -n1)
		date=$(sed -n 's/^Date: //p;/^$/q' "$p" | head -n1)
		{
			sed -n '/^Subject: /,/^$/p' "$p" | sed -e 's/^Subject: \[PATCH[^]]*\] //' \
				-e '/^$/d' | paste -sd' ' | sed 's/  */ /g'
			echo
			sed -n '/^$/,/^---$/p' "$p" | sed -e '1d' -e '$d'
		} >"$dir/.git/lp-msg"
		GIT_COMMITTER_DATE=$date git -c user.name="lockless-parity" \
			-c user.email="lockless-parity@users.noreply.example" \
			commit -q --author="$author" --date="$date" -F "$dir/.git/lp-msg"
	done
	lp_say "$dir: $(git rev-list --count HEAD) commits (the base and $(($(git rev-list --count HEAD) - 1)) patches)"
	;;
write)
	[ -d "$dir/.git" ] || [ -f "$dir/.git" ] || lp_die "$dir is not a git tree (scripts/patches_regen.sh init $dir)"
	base=$(git -C "$dir" rev-list --max-parents=0 "$rev")
	[ "$(wc -l <<<"$base")" -eq 1 ] || lp_die "$dir has more than one root commit"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# core.abbrev pinned: "auto" follows the tree's object count, and a
	# fresh, unpacked tree gives shorter index lines than a packed one.
	git -C "$dir" -c core.abbrev=9 format-patch -q --zero-commit --no-signature -N \
		-o "$tmp" "$base..$rev"
	# Names: a commit whose subject is a file's keeps that file's name. The
	# others keep the number of the one unmatched file between the same
	# matched neighbours, if there is exactly one such file and one such
	# commit (a reworded subject), with the new subject's slug; any other
	# commit gets the next number after the highest (an added patch).
	python3 - "$pdir" "$tmp" <<-'PY' || lp_die "could not name the patches"
		import os, re, sys
		pdir, tmp = sys.argv[1:]
		def subject(path):
		    with open(path) as f:
		        lines = f.read().split("\n")
		    out = []
		    for i, l in enumerate(lines):
		        if l.startswith("Subject: "):
		            out.append(l[len("Subject: "):])
		            for m in lines[i + 1:]:
		                if not m.startswith(" "):
		                    break
		                out.append(m.strip())
		            break
		    return re.sub(r"^\[PATCH[^]]*\] ", "", " ".join(out))
		old = sorted(f for f in os.listdir(pdir) if f.endswith(".patch"))
		new = sorted(f for f in os.listdir(tmp) if f.endswith(".patch"))
		osub = [subject(os.path.join(pdir, f)) for f in old]
		nsub = [subject(os.path.join(tmp, f)) for f in new]
		name = [None] * len(new)
		match = {}  # new index -> old index
		for i, s in enumerate(nsub):
		    if s in osub and osub.index(s) not in match.values():
		        match[i] = osub.index(s)
		        name[i] = old[match[i]]
		# The gaps between matched neighbours.
		bounds = sorted(match.items())
		edges = [(-1, -1)] + bounds + [(len(new), len(old))]
		for (ni, oi), (nj, oj) in zip(edges, edges[1:]):
		    ngap = [k for k in range(ni + 1, nj) if k not in match]
		    ogap = [k for k in range(oi + 1, oj) if k not in match.values()]
		    if len(ngap) == 1 and len(ogap) == 1:
		        name[ngap[0]] = old[ogap[0]][:5] + new[ngap[0]][5:]
		top = max([int(f[:4]) for f in old] + [0])
		for i, f in enumerate(new):
		    if name[i] is None:
		        top += 1
		        name[i] = "%04d" % top + f[4:]
		if len(set(n[:4] for n in name)) != len(name):
		    sys.exit("two patches would get one number: %s" % name)
		for f, n in zip(new, name):
		    os.rename(os.path.join(tmp, f), os.path.join(tmp, n + ".new"))
	PY
	removed=0
	for p in "$pdir"/*.patch; do
		[ -e "$p" ] || continue
		f=${p##*/}
		if [ ! -e "$tmp/${f%.patch}.patch.new" ]; then
			git -C "$LP_REPO" rm -q "$p" 2>/dev/null || rm -f "$p"
			lp_say "removed $f (no commit of that subject in $dir)"
			removed=$((removed + 1))
		fi
	done
	for g in "$tmp"/*.new; do
		f=${g##*/}
		mv "$g" "$pdir/${f%.new}"
	done
	lp_say "kernel-config/patches/: $(find "$pdir" -name '*.patch' | wc -l) patches from $dir ($removed removed); see git status"
	;;
*)
	usage
	;;
esac
