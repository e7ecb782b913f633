#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# qemu.sh MODE [KIND]: boot the guest of KIND (default debug) in QEMU with
# /init in lp.mode=MODE (check, demo, bench, shell); serial logs go to
# build/guest-KIND/MODE/. TCG by default, ACCEL=kvm opt-in.
#
# Environment: TIMEOUT (s; default 900 for check, 3600 for check with
# PRESET=full, 900 for bench, 600 otherwise; four times that for the rt
# kernel, twice for arm64), ICOUNT=1 (bench: QEMU's -icount
# shift=0,sleep=off, one vCPU unless SMP says otherwise, logs in
# build/guest-KIND/bench-icount/), SMP (default 4), MEM (default
# 2G), PRESET (quick or full: the driver's sizes, see lockless_test.h),
# TESTS (a glob: only the driver tests it matches, no KUnit, demo or bench
# smoke), KUNIT=1 (with TESTS: the kernel's KUnit suites still run), RACE_PUTS and CHAIN_DEPTH (override one size of the preset),
# FUZZ_SEED (replay one differential-fuzz stream), FUZZ_STREAMS, FUZZ_STEPS,
# BENCH_QUICK, BENCH_MS, BENCH_REPS (the bench driver's, see
# shared-tests/lockless_bench.c).
# TCG_THREAD=multi|single: a TCG thread per vCPU, or one running them in
# turn (default multi; single for arm64).
# ARCH=arm64: qemu-system-aarch64 -M virt, CPU QEMU_CPU (default
# max,pauth-impdef=on: LSE atomics; cortex-a57 for LL/SC), the four
# channels on virtio-console ports hvc0..hvc3 instead of ttyS0..ttyS3.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
lp_in_root "$@"

mode=${1:?usage: qemu.sh check|demo|bench|shell|racy [KIND]}
kind=${2:-debug}
kdir=$(lp_kdir "$kind")
guest=$LP_OUT/guest-$kind$LP_KSUF
bz=$kdir/$LP_KIMAGE
initrd=$guest/initramfs.cpio.gz
case $mode in
check) [ "${PRESET:-quick}" = full ] && timeout=${TIMEOUT:-3600} || timeout=${TIMEOUT:-900} ;;
bench) timeout=${TIMEOUT:-900} ;;
*) timeout=${TIMEOUT:-600} ;;
esac
# The rt kernel runs the same driver several times slower (its locks are
# rtmutexes; the quick driver took 1592 s on a loaded 2-core machine,
# past the default 900 s): four times the default.
[ -n "${TIMEOUT:-}" ] || [ "$kind" != rt ] || timeout=$((timeout * 4))
run=$guest/$(lp_run_name "$mode")
smp=${SMP:-4}
# arm64: twice the time (every instruction translated from another
# architecture's).
[ "$LP_ARCH" = x86_64 ] || [ -n "${TIMEOUT:-}" ] || timeout=$((timeout * 2))

if [ "$LP_ARCH" = arm64 ]; then
	qemu_bin='qemu-system-aarch64'
else
	qemu_bin='qemu-system-x86_64'
fi
command -v $qemu_bin >/dev/null ||
	lp_die "$qemu_bin is missing from the toolchain root: run 'make toolchain${LP_KSUF:+ ARCH=$LP_ARCH}'"
[ -f "$bz" ] || lp_die "no kernel image $bz: run 'make kernel'"
[ -f "$initrd" ] || lp_die "no initramfs $initrd: run scripts/initramfs.sh $kind"

if [ "${ICOUNT:-0}" = 1 ]; then
	[ "$mode" = bench ] || lp_die "ICOUNT=1 is for bench runs"
	[ "${ACCEL:-tcg}" = tcg ] || lp_die "ICOUNT=1 needs TCG, not ACCEL=$ACCEL"
	# The guest clock advances one ns per guest instruction, and the
	# vCPUs run round-robin in one host thread (no thread=multi): a
	# one-thread RUN's elapsed ns are the instructions it executed.
	accel=(-accel tcg -icount shift=0,sleep=off)
	clock="tcg -icount shift=0"
	smp=${SMP:-1}
else
	clock=${ACCEL:-tcg}
	case ${ACCEL:-tcg} in
	tcg)
		# One host thread per vCPU (multi), or one for all, running
		# them in turn (single: arm64's default). On this 2-core host
		# loaded by other builds, an arm64 guest with a thread per vCPU
		# hands a contended spinlock over only when the host runs the
		# next waiter's thread: MAX_LOCKED's race crawled (20,000 ops in
		# 257 s; x86: under a second) and the check could not finish.
		# In turn, a waiter's wfe yields to the next vCPU (200,000 ops
		# in 2.7 s), but races are rarer (docs/testing.md).
		thread=multi
		[ "$LP_ARCH" = x86_64 ] || thread=single
		case ${TCG_THREAD:-$thread} in
		multi | single) accel=(-accel "tcg,thread=${TCG_THREAD:-$thread}") ;;
		*) lp_die "TCG_THREAD=$TCG_THREAD is not one of multi, single" ;;
		esac
		;;
	kvm)
		[ "$LP_ARCH" = x86_64 ] || lp_die "ACCEL=kvm runs x86_64 guests only; ARCH=$LP_ARCH runs under TCG"
		[ -w /dev/kvm ] || lp_die "ACCEL=kvm but /dev/kvm is not usable here; use the default TCG"
		accel=(-accel kvm -cpu host)
		;;
	*) lp_die "ACCEL=${ACCEL} is not one of tcg, kvm" ;;
	esac
fi

# The guest leaves by `reboot -f`, which -no-reboot turns into QEMU's
# exit: this PCI-less kernel reads ACPI's tables (the MADT is how it finds
# its vCPUs) but cannot load QEMU's DSDT (it needs PCI config space; two
# "ACPI Error" lines at boot say so), so it has no ACPI power-off.
append="console=ttyS0 panic=-1 panic_on_warn=1 softlockup_panic=1 lp.mode=$mode"
# KCSAN's negative control must survive its reports (each is a warning).
[ "$mode" != racy ] || append=${append/panic_on_warn=1/panic_on_warn=0}
# arm64: the console is virtio-console port hvc0 (the PL011 only shows
# earlycon's lines, until hvc0 is up), /init's channels hvc1..hvc3.
[ "$LP_ARCH" = x86_64 ] ||
	append=${append/console=ttyS0/earlycon=pl011,0x9000000 console=hvc0 lp.tty=hvc}
# The rt kernel runs two of the four KUnit suites, rust_kernel_fmt and
# rust_kernel_sync_arc: two examples of 7.3's own Rust code assume
# spinlocks that do not sleep, which PREEMPT_RT's do. The Rust doctests
# (rust_doctests_kernel) lock a SpinLockIrq with lock_with() inside
# local_interrupt_disable(), a sleeping lock taken with interrupts off
# (spinlock.rs; "BUG: sleeping function called from invalid context"), and rust_spinlock_irq_condvar asserts that a
# SpinLockIrq guard has interrupts off, which spin_lock_irqsave() there
# leaves on (a WARN). The series' samples still run at boot.
[ "$kind" != rt ] || append+=" kunit.filter_glob=rust_kernel_*"
if [ "$mode" = check ]; then
	case ${PRESET:-quick} in
	quick | full) append+=" lp.env.LP_PRESET=${PRESET:-quick}" ;;
	*) lp_die "PRESET=$PRESET is not one of quick, full" ;;
	esac
	[ -z "${RACE_PUTS:-}" ] || append+=" lp.env.LP_RACE_PUTS=$RACE_PUTS"
	[ -z "${CHAIN_DEPTH:-}" ] || append+=" lp.env.LP_CHAIN_DEPTH=$CHAIN_DEPTH"
	# The differential fuzz (shared-tests/lockless_fuzz.c): a seed to
	# replay (make fuzz SEED=N), or other sizes than the preset's.
	for v in FUZZ_SEED FUZZ_STREAMS FUZZ_STEPS; do
		[ -n "${!v:-}" ] || continue
		[[ ${!v} =~ ^[0-9]+$ ]] || lp_die "$v=${!v}: a decimal number, please"
		append+=" lp.env.LP_$v=${!v}"
	done
	if [ -n "${TESTS:-}" ]; then
		case $TESTS in *[[:space:]]*) lp_die "TESTS='$TESTS': one glob, no spaces" ;; esac
		# The development loop: only the matching tests, no KUnit at boot
		# unless KUNIT=1 (make mutants' kernel-patch mutants).
		append+=" lp.env.LP_TESTS=$TESTS"
		[ "${KUNIT:-0}" = 1 ] || append+=" kunit.enable=0"
	fi
fi
if [ "$mode" = bench ]; then
	# The debug kernel's KUnit suites (make check judges them) would only
	# slow the bench's boot.
	append+=" kunit.enable=0"
	for v in BENCH_QUICK BENCH_MS BENCH_REPS; do
		[ -z "${!v:-}" ] || append+=" lp.env.$v=${!v}"
	done
	[ "${ICOUNT:-0}" != 1 ] || append+=" lp.env.BENCH_ICOUNT=1"

fi
qemu=("$qemu_bin" "${accel[@]}" -smp "$smp" -m "${MEM:-2G}"
	-no-reboot -kernel "$bz" -initrd "$initrd" -append "$append")
if [ "$LP_ARCH" = arm64 ]; then
	cpu=${QEMU_CPU:-max,pauth-impdef=on}
	qemu+=(-M virt -cpu "$cpu")
	clock+=", -cpu $cpu"
fi

rm -rf "$run"
mkdir -p "$run"

if [ "$mode" = shell ]; then
	lp_say "booting $kind$LP_KSUF kernel to a shell (${ACCEL:-tcg}); 'reboot -f' leaves, Ctrl-A X kills"
	if [ "$LP_ARCH" = arm64 ]; then
		exec "${qemu[@]}" -nographic -serial null -device virtio-serial-device \
			-chardev stdio,id=c0,mux=on,signal=off -device virtconsole,chardev=c0 -mon c0
	fi
	exec "${qemu[@]}" -nographic -serial mon:stdio
fi

lp_say "booting $kind$LP_KSUF kernel, lp.mode=$mode, $clock, $smp vCPUs, timeout ${timeout}s"
for f in console ktap demo bench times; do : >"$run/$f.log"; done
# ttyS0 the kernel and /init, ttyS1 the driver (or the demo, the bench),
# ttyS2 the demo and ttyS3 the bench smoke run of a check run. On arm64
# the same four are hvc0..hvc3, virtconsole ports in this order.
if [ "$LP_ARCH" = arm64 ]; then
	: >"$run/early.log"
	chans=(-serial file:"$run/early.log" -device virtio-serial-device)
	i=0
	for f in console ktap demo bench; do
		chans+=(-chardev "file,id=c$i,path=$run/$f.log" -device "virtconsole,chardev=c$i")
		i=$((i + 1))
	done
else
	chans=(-serial file:"$run/console.log" -serial file:"$run/ktap.log"
		-serial file:"$run/demo.log" -serial file:"$run/bench.log")
fi
"${qemu[@]}" -display none -monitor none "${chans[@]}" &
qpid=$!
# QEMU is always reaped: on timeout, on error, on Ctrl-C.
trap 'kill -KILL $qpid 2>/dev/null || true' EXIT INT TERM

# Progress: echo test results as the guest prints them, and keep their
# arrival times (times.log: the judge's slowest tests).
if [ "$mode" = check ] || { [ "$mode" = bench ] && [ "${BENCH_QUICK:-0}" = 0 ]; }; then
	tail -n +1 -F --pid=$qpid "$run/ktap.log" 2>/dev/null |
		while IFS= read -r line; do
			printf '%s %s\n' "$EPOCHREALTIME" "$line" >>"$run/times.log"
			case $line in
			"ok "* | "not ok "* | "# sizes:"*) printf '  guest: %s\n' "$line" ;;
			esac
		done &
fi

start=$SECONDS
while kill -0 $qpid 2>/dev/null; do
	if [ $((SECONDS - start)) -ge "$timeout" ]; then
		kill -KILL $qpid 2>/dev/null || true
		echo "lp-host: FAIL guest timed out after ${timeout}s" >>"$run/console.log"
		lp_say "guest timed out after ${timeout}s (raise TIMEOUT=, or see $run/console.log)"
		break
	fi
	sleep 1
done
wait $qpid 2>/dev/null || true
wait 2>/dev/null || true
trap - EXIT INT TERM
# arm64: what the kernel printed before hvc0 came up (earlycon, on the
# PL011) goes in front of the console's log, which begins where it ends:
# the judge reads one log, from the first line.
if [ "$LP_ARCH" != x86_64 ]; then
	cat "$run/early.log" "$run/console.log" >"$run/console.log.tmp"
	mv "$run/console.log.tmp" "$run/console.log"
fi
lp_say "guest stopped after $((SECONDS - start)) s; logs in ${run#"$LP_OUT"/}/"
