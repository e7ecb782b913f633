#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# study_check.sh: what `make study-check` runs: render build/study/index.html
# (make study's page) in a real headless browser, Debian's chromium, and
# check the rendered DOM: one section per pattern of scripts/patterns.py,
# both code panes of each non-empty. Leaves build/study/screenshot.png and
# build/study/dom.html (what chromium rendered).
#
# chromium lives in its own small cached Debian root ($LP_CACHE/chromeroot,
# made with mmdebstrap like litmus.sh's herd root), never in the toolchain
# root (whose packages make the kernel's tools) nor on the host. It runs
# there in a private mount namespace and a PID namespace of its own, with
# a fresh /proc that shows only its processes; headless, without its
# sandbox (it runs as root of those namespaces), with nothing but
# build/study bound in. As root or as an ordinary user alike: a user
# namespace that owns a PID namespace may mount that namespace's proc.
#
# usage: scripts/study_check.sh   (make study first; make study-check does)
# env:   STUDY_WIDTH, STUDY_HEIGHT: the screenshot's size (1500x2200)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
lp_need_root "$@"

# Pins: where chromium comes from, and the fonts it draws with.
CHROME_SUITE=$LP_SUITE
CHROME_PACKAGES="chromium fonts-dejavu-core"

chromeroot=$LP_CACHE/chromeroot
study=$LP_OUT/study
# Where build/study appears inside the chromium root.
in_study=/lp/study
width=${STUDY_WIDTH:-1500}
height=${STUDY_HEIGHT:-2200}

# The browser itself: /usr/bin/chromium is Debian's wrapper script, which
# reads /proc/cpuinfo (mounted only in the namespace below).
chrome_verify() {
	[ -x "$chromeroot/usr/lib/chromium/chromium" ] &&
		"${LP_ASROOT[@]}" chroot "$chromeroot" /usr/lib/chromium/chromium --version >/dev/null 2>&1
}

ensure_chromeroot() {
	lp_tool_root "$chromeroot" "$CHROME_SUITE" "$CHROME_PACKAGES" chrome_verify chromium "~2 min, ~870 MB"
}

if [ "${LP_STUDY_NS:-}" != 1 ]; then
	[ -f "$study/index.html" ] ||
		lp_die "no $study/index.html: run make study first (make study-check does)"
	ensure_chromeroot
	rm -f "$study/screenshot.png" "$study/dom.html"
	t0=$SECONDS
	# Re-enter in a private mount namespace: the mounts below vanish with
	# its last process, on success, error, Ctrl-C or kill -9. And in a PID
	# namespace (the re-entered script is its init): its own proc can be
	# mounted below, and when it ends, or unshare dies (--kill-child), the
	# kernel kills every chromium process left.
	"${LP_UNSHARE[@]}" --pid --fork --kill-child -- env LP_STUDY_NS=1 "$0" "$@"
	lp_say "chromium rendered the page twice in $((SECONDS - t0)) s"
	# The judge: the rendered DOM against the patterns (inside the
	# toolchain root, whose python3 runs every other generator).
	"$LP_REPO/scripts/inroot.sh" "python3 scripts/study.py --check build/study/dom.html"
	exit
fi

# ------------------------------------- inside the mount and PID namespaces
# (LP_USERNS is 0 here even for a user: uid 0 of the user namespace.)
mkdir -p "$chromeroot$in_study" "$chromeroot/dev" "$chromeroot/proc" "$chromeroot/tmp"
# The proc of our PID namespace. A user namespace may not mount a fresh
# proc where the host's /proc has mounts over parts of it (lxcfs's
# /proc/cpuinfo, a container's masked paths); then the host's, bound,
# as inroot.sh does.
mount -t proc -o nosuid,nodev,noexec proc "$chromeroot/proc" 2>/dev/null ||
	mount --rbind /proc "$chromeroot/proc" ||
	lp_die "cannot mount a proc in the chromium root $chromeroot (neither a fresh one in its PID namespace nor the host's, bound)"
mount --rbind /dev "$chromeroot/dev"
# chromium's shared memory: a tmpfs of its own, not the host's /dev/shm.
mkdir -p "$chromeroot/dev/shm"
mount -t tmpfs -o size=512m tmpfs "$chromeroot/dev/shm"
mount -t tmpfs tmpfs "$chromeroot/tmp"
mount --bind "$study" "$chromeroot$in_study"

chrome() {
	# --no-sandbox: we are root here, which chromium's sandbox refuses;
	# the page is our own static file, with no script, read from disk.
	timeout --foreground 120 chroot "$chromeroot" /usr/bin/env -i \
		PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 \
		/usr/bin/chromium --headless --no-sandbox --disable-gpu \
		--disable-dev-shm-usage --no-first-run --no-default-browser-check \
		--disable-extensions --disable-background-networking \
		--hide-scrollbars --force-device-scale-factor=1 \
		--user-data-dir=/tmp/profile "$@"
}

log=$study/chromium.log
: >"$log"
chrome --dump-dom "file://$in_study/index.html" >"$study/dom.html" 2>>"$log" ||
	lp_die "chromium --dump-dom failed (exit $?); its messages: $log"
chrome --window-size="$width,$height" --screenshot="$in_study/screenshot.png" \
	"file://$in_study/index.html" >>"$log" 2>&1 ||
	lp_die "chromium --screenshot failed (exit $?); its messages: $log"
[ -s "$study/screenshot.png" ] || lp_die "chromium wrote no screenshot; its messages: $log"
[ -s "$study/dom.html" ] || lp_die "chromium dumped no DOM; its messages: $log"
