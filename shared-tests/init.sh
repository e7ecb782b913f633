#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# init.sh: the guest's /init. Loads both modules, runs what lp.mode= on the
# kernel command line asks for, checks for leaks, unloads, powers off.
#
#   lp.mode=check  the test driver (KTAP on /dev/ttyS1), then the demo's
#                  C-vs-Rust comparison (/dev/ttyS2) and the bench's smoke
#                  run (BENCH_QUICK=1, KTAP on /dev/ttyS3); with
#                  lp.env.LP_TESTS=GLOB only the driver tests it matches
#   lp.mode=demo   run the side-by-side report (on /dev/ttyS1)
#   lp.mode=bench  run the bench driver (KTAP, table, CSV on /dev/ttyS1)
#   lp.mode=shell  an interactive shell on the console, nothing else
#   lp.mode=racy   KCSAN's negative control: both modules loaded with
#                  racy_control=1, /bin/lockless_racy (on /dev/ttyS1);
#                  the KCSAN reports are on the console
#
# lp.tty=hvc (arm64's virt machine): the channels are the virtio-console
# ports /dev/hvc1..hvc3 instead of /dev/ttyS1..ttyS3.
#
# Lines starting "lp-init:" are for the judge (scripts/judge.py): a
# "lp-init: FAIL" line fails the run, "lp-init: done" proves it finished,
# "lp-init: expect NAME" names a driver test that must report a result,
# "lp-init: t=SECONDS STEP" times the steps (guest uptime).
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp

mode=check
tty=ttyS
for arg in $(cat /proc/cmdline); do
	case $arg in
	lp.mode=*) mode=${arg#lp.mode=} ;;
	lp.tty=*) tty=${arg#lp.tty=} ;;
	# lp.env.NAME=VALUE: an environment variable for the driver.
	lp.env.*=*) export "${arg#lp.env.}" ;;
	esac
done

fail() { echo "lp-init: FAIL $*"; }
stamp() { echo "lp-init: t=$(cut -d' ' -f1 /proc/uptime) $*"; }
port() { if [ -c "$1" ]; then echo "$1"; else echo /dev/console; fi; }
out=$(port /dev/${tty}1)

# expected_tests: every test of the driver as FIXTURE.VARIANT.TEST, from its
# own listing (kselftest_harness -l: per fixture, a column of variants and
# a column of tests, each test running once per variant).
expected_tests() {
	/bin/lockless_test -l 2>&1 >/dev/null | awk '
	function flush(	i, j) {
		for (i = 0; i < nv; i++)
			for (j = 0; j < nt; j++)
				print f "." v[i] "." t[j]
		nv = 0; nt = 0
	}
	function trim(x) { gsub(/^ +| +$/, "", x); return x }
	/^#/ { next }
	/^---/ { flush(); next }
	{
		a = trim(substr($0, 1, 20)); b = trim(substr($0, 22, 25))
		c = trim(substr($0, 48))
		if (a != "") f = a
		if (b != "") v[nv++] = b
		if (c != "") t[nt++] = c
	}
	END { flush() }'
}

# selected: the expected tests LP_TESTS matches, by test name or full name.
selected() {
	local name
	for name in $(expected_tests); do
		# shellcheck disable=SC2254
		case ${name##*.} in $LP_TESTS) echo "$name"; continue ;; esac
		# shellcheck disable=SC2254
		case $name in $LP_TESTS) echo "$name" ;; esac
	done
}

kmemleak=/sys/kernel/debug/kmemleak
stamp "init started"
echo "lp-init: mode=$mode cpus=$(nproc)"
if [ "$mode" = check ]; then
	# The known-leak control: its objects must show up in kmemleak's
	# report at the end, proving that kmemleak works in this guest.
	if [ -w $kmemleak ]; then
		echo "lp-init: kmemleak on"
		echo clear >$kmemleak
		insmod /modules/lp_kmemleak_control.ko || fail "insmod lp_kmemleak_control"
	else
		fail "kmemleak is absent or disabled ($kmemleak not writable)"
	fi
fi
params=
[ "$mode" != racy ] || params=racy_control=1
for m in lockless_c lockless_rust; do
	# shellcheck disable=SC2086
	insmod /modules/$m.ko $params || fail "insmod $m"
done

case $mode in
check)
	args=
	if [ -n "${LP_TESTS:-}" ]; then
		echo "lp-init: filter LP_TESTS=$LP_TESTS (no demo, no bench smoke)"
		names=$(selected)
		for name in $names; do
			args="$args -r $name"
		done
		[ -n "$args" ] || fail "LP_TESTS=$LP_TESTS matches no driver test"
	else
		names=$(expected_tests)
	fi
	[ -n "$names" ] || fail "the driver lists no tests (lockless_test -l)"
	for name in $names; do
		echo "lp-init: expect $name"
	done
	stamp "driver started"
	# shellcheck disable=SC2086
	[ -z "$names" ] || /bin/lockless_test $args >$out 2>&1
	echo "lp-init: lockless_test exited $?"
	stamp "driver done"
	if [ -z "${LP_TESTS:-}" ]; then
		/bin/lockless_demo >"$(port /dev/${tty}2)" 2>&1
		echo "lp-init: lockless_demo exited $?"
		stamp "demo done"
		BENCH_QUICK=1 /bin/lockless_bench >"$(port /dev/${tty}3)" 2>&1
		echo "lp-init: lockless_bench exited $?"
		stamp "bench smoke done"
	fi
	;;
demo)
	/bin/lockless_demo >$out 2>&1 || fail "lockless_demo exited $?"
	;;
bench)
	/bin/lockless_bench >$out 2>&1 || fail "lockless_bench exited $?"
	;;
racy)
	/bin/lockless_racy >$out 2>&1 || fail "lockless_racy exited $?"
	# KCSAN prints a report once it is sure; give it a moment.
	sleep 2
	;;
shell)
	echo "lp-init: both modules are loaded; /bin/lockless_test runs the tests,"
	echo "lp-init: /bin/lockless_bench the bench (BENCH_QUICK=1 for a quick one)."
	echo "lp-init: rmmod/insmod /modules/*.ko by hand; 'reboot -f' leaves."
	setsid cttyhack sh
	;;
*)
	fail "unknown lp.mode=$mode"
	;;
esac

for m in lockless_rust lockless_c; do
	if grep -q "^$m " /proc/modules; then
		rmmod $m || fail "rmmod $m (still referenced?)"
	fi
done

if [ -w $kmemleak ] && [ "$mode" != demo ]; then
	# kmemleak reports an object once it is 5 s old at the start of a
	# scan, and lists those the last scan still found unreferenced.
	# Scan at once (what the driver left), then again once the last
	# allocations (the demo, the bench smoke, the rmmod just now) are
	# over 5 s old: that scan finds their leaks, and weeds out transient
	# false positives, as kmemleak's documentation advises.
	t0=$(cut -d. -f1 /proc/uptime)
	echo scan >$kmemleak
	t=$(cut -d. -f1 /proc/uptime)
	[ $((t - t0)) -ge 6 ] || sleep $((6 - (t - t0)))
	echo scan >$kmemleak
	# Each record starts "unreferenced object"; the control's name its
	# allocating function. Every other record goes to the console, where
	# the judge fails the run on it.
	awk -v ctl=lp_kmemleak_control '
	function flush() {
		if (rec == "") return
		if (index(rec, ctl)) known++; else printf "%s", rec
		rec = ""
	}
	/^unreferenced object/ { flush() }
	{ rec = rec $0 "\n" }
	END { flush(); print "lp-init: kmemleak: " known + 0 " known leak(s) of the control" }' $kmemleak
	if [ "$mode" = check ] && ! grep -q lp_kmemleak_control $kmemleak; then
		fail "kmemleak did not report the known leak of lp_kmemleak_control"
	fi
	stamp "kmemleak scan done"
fi

echo "lp-init: done"
sync
# No ACPI interpreter, so no power-off: QEMU's -no-reboot ends the run.
reboot -f
