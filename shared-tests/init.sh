#!/bin/sh
# init.sh: the guest's /init. Loads both modules, runs what lp.mode= on the
# kernel command line asks for, checks for leaks, unloads, powers off.
#
#   lp.mode=check  run the test driver (KTAP on /dev/ttyS1)
#   lp.mode=demo   run the side-by-side report (on /dev/ttyS1)
#   lp.mode=bench  run the bench driver (KTAP, table, CSV on /dev/ttyS1;
#                  lp.env.BENCH_QUICK=1 for make check's smoke run)
#   lp.mode=shell  an interactive shell on the console, nothing else
#
# Lines starting "lp-init:" are for the judge (scripts/judge.py): a
# "lp-init: FAIL" line fails the run, "lp-init: done" proves it finished.
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp

mode=check
for arg in $(cat /proc/cmdline); do
	case $arg in
	lp.mode=*) mode=${arg#lp.mode=} ;;
	# lp.env.NAME=VALUE: an environment variable for the driver.
	lp.env.*=*) export "${arg#lp.env.}" ;;
	esac
done

fail() { echo "lp-init: FAIL $*"; }
out=/dev/ttyS1
[ -c $out ] || out=/dev/console

kmemleak=/sys/kernel/debug/kmemleak
# Forget what boot allocated: only what happens from here on can leak.
[ -w $kmemleak ] && echo clear >$kmemleak

echo "lp-init: mode=$mode cpus=$(nproc)"
for m in lockless_c lockless_rust; do
	insmod /modules/$m.ko || fail "insmod $m"
done

case $mode in
check)
	/bin/lockless_test >$out 2>&1
	echo "lp-init: lockless_test exited $?"
	;;
demo)
	/bin/lockless_demo >$out 2>&1 || fail "lockless_demo exited $?"
	;;
bench)
	/bin/lockless_bench >$out 2>&1 || fail "lockless_bench exited $?"
	;;
shell)
	echo "lp-init: both modules are loaded; /bin/lockless_test runs the tests,"
	echo "lp-init: /bin/lockless_bench the bench (BENCH_QUICK=1 for a quick one)."
	echo "lp-init: rmmod/insmod /modules/*.ko by hand; 'poweroff -f' leaves."
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
	# kmemleak ignores objects younger than 5 s; scan twice as its
	# documentation advises to weed out transient false positives.
	sleep 6
	echo scan >$kmemleak
	echo scan >$kmemleak
	cat $kmemleak
fi

echo "lp-init: done"
sync
poweroff -f
