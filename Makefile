# SPDX-License-Identifier: GPL-2.0
# lockless-parity: the front door. `make help` lists what you can do.
#
# Everything runs inside a Debian toolchain root kept in $(LP_CACHE), as
# root (mmdebstrap, a mount namespace, chroot) or as an ordinary user (the
# same in an unprivileged user namespace; no sudo); nothing is installed on
# the host except mmdebstrap (and uidmap, for users). Variables: LP_CACHE,
# KDIR, ACCEL=kvm, TIMEOUT, SMP, MEM, JOBS, BENCH_QUICK, TESTS, PRESET,
# RACE_PUTS, CHAIN_DEPTH, SEED, FUZZ_STREAMS, FUZZ_STEPS, ARCH=arm64
# (see README.md).

S := scripts

.PHONY: help check ordering soak fuzz kcsan-control mutants pin-experiment demo bench study study-check series series-check shell lint litmus toolchain kernel modules guest clean distclean

help:
	@echo "make demo       boot the guest, load both modules, print their answers side by side"
	@echo "make check      build everything needed, run all tests in QEMU (the kernel's KUnit suites too),"
	@echo "                lint, litmus and the demo's API columns against the code; ends 'N passed, N failed'"
	@echo "                TESTS=GLOB: only the matching driver tests, against both modules"
	@echo "                ARCH=arm64: the same on an arm64 guest (qemu-system-aarch64 -M virt),"
	@echo "                with make ordering"
	@echo "make ordering   the arm64 machine code of every ordered function, C and Rust side by side:"
	@echo "                each ordering docs/mapping.md or a litmus Code: list claims must be its"
	@echo "                instructions (ldar/stlr, LSE *al/*a/*l forms, dmb); always ARCH=arm64"
	@echo "make soak       make check with the full sizes (PRESET=full: 10^5 racing puts, 10^5-deep chains),"
	@echo "                on the KCSAN kernel, the debug (KASAN) kernel, the debug kernel with"
	@echo "                full preemption (CONFIG_PREEMPT, not PREEMPT_LAZY), then with PREEMPT_RT;"
	@echo "                ARCH=arm64: the last three, on arm64 (no KCSAN there)"
	@echo "make fuzz SEED=N  replay one stream of the differential fuzz, printing every step"
	@echo "make kcsan-control  KCSAN's negative control: a deliberate data race in each module, what KCSAN sees"
	@echo "make mutants    apply each deliberate bug of shared-tests/mutants/, every one must be caught"
	@echo "                (the litmus code check first, then a boot with the tests it names);"
	@echo "                MUTANT_KERNEL=1: also the kernel-patch mutants (a kernel build each, ~15 min)"
	@echo "make pin-experiment  KREF_MUTEX and KREF_LOCK with and without the owner pin, on the debug"
	@echo "                and rt kernels: does the unlock's own code touch a lock a racing final put freed?"
	@echo "make bench      instructions/op of every op (C, Rust, Rust with helpers inlined), and ns/op"
	@echo "                at 1..N vCPUs, on perf kernels: tables, ratios, CSV, PNG;"
	@echo "                ARCH=arm64: instructions/op on an LSE CPU and on an LL/SC one"
	@echo "make study      build/study/index.html: each pattern's C and Rust functions side by side, read from"
	@echo "                the source, with the demo's API columns, insns/op, litmus tests, mutants, Rust gaps"
	@echo "make study-check  render that page in headless chromium (its own cached Debian root) and check"
	@echo "                every pattern's section and code panes; screenshot: build/study/screenshot.png"
	@echo "make series     build/series/SERIES/: kernel-config/patches/ as one git format-patch series per"
	@echo "                maintainer tree (kernel-config/series/), cover letters, To:/Cc:, signed off as"
	@echo "                your git config user.name/user.email; checkpatch --strict, get_maintainer.pl"
	@echo "make series-check  every prefix of each series applies (git am) on its base, builds (debug"
	@echo "                config) and boots with its KUnit doctests passing; not in make check;"
	@echo "                SERIES_KEEP=1 keeps (and the next run reuses) its scratch tree, SERIES=A,B"
	@echo "make shell      boot the guest to a busybox shell with both .ko files and the test driver"
	@echo "make lint       checkpatch --strict, sparse (C=2), rustfmt --check, clippy"
	@echo "make litmus     check the article's ordering claims with herd7 and the kernel's memory model,"
	@echo "                and each litmus test's Code: section against the modules (litmus_code.py)"
	@echo "make toolchain  create/verify the Debian toolchain root (mmdebstrap)"
	@echo "make kernel     build the debug guest kernel (KASAN, lockdep, kmemleak, Rust)"
	@echo "make modules    build lockless_c.ko and lockless_rust.ko"
	@echo "make guest      build the initramfs (modules, driver, /init)"
	@echo "make clean      remove project build outputs (build/, module objects)"
	@echo "make distclean  clean, and remove the cache (toolchain root, kernel trees)"
	@echo ""
	@echo "Variables (README.md says more): TESTS=GLOB, KIND=debug|kcsan|preempt|rt, PRESET=quick|full,"
	@echo "  ARCH=x86_64|arm64 (QEMU_CPU=, TCG_THREAD=multi|single), SEED=N (make fuzz), RACE_PUTS=N,"
	@echo "  CHAIN_DEPTH=N, FUZZ_STREAMS=N, FUZZ_STEPS=N,"
	@echo "  LP_CACHE=DIR (toolchain root and kernels), LP_MIRROR=URL (Debian mirror), KDIR=DIR (your"
	@echo "  own kernel tree), ACCEL=kvm, TIMEOUT=S, SMP=N, MEM=SIZE, JOBS=N, BENCH_QUICK=1,"
	@echo "  BENCH_MS=N, BENCH_REPS=N, KUNIT=1 (with TESTS=: KUnit too), MUTANT_BASELINE=quick|full|none,"
	@echo "  MUTANT_TIMEOUT=S, MUTANT_KERNEL=1"

check:
	@$(S)/check.sh

ordering:
	@ARCH=arm64 $(S)/ordering.sh

soak:
	@kinds="kcsan debug preempt rt"; \
	if [ "$(ARCH)" = arm64 ]; then \
		echo "make soak ARCH=arm64: no KCSAN pass (rustc's aarch64 kernel target has no thread sanitizer)"; \
		kinds="debug preempt rt"; \
	fi; \
	for k in $$kinds; do PRESET=full KIND=$$k $(S)/check.sh || exit 1; done

fuzz:
	@if [ -z "$(SEED)" ]; then echo "make fuzz SEED=N: the seed a fuzz run printed" >&2; exit 2; fi
	@FUZZ_SEED=$(SEED) TESTS=fuzz.lockstep.streams $(S)/check.sh

kcsan-control:
	@$(S)/kcsan_control.sh

mutants:
	@$(S)/mutants.sh

pin-experiment:
	@$(S)/pin_experiment.sh

demo:
	@$(S)/demo.sh

bench:
	@$(S)/bench.sh

study:
	@$(S)/study.sh

study-check: study
	@$(S)/study_check.sh

series:
	@$(S)/series.sh

series-check:
	@$(S)/series_check.sh

shell: guest
	@$(S)/qemu.sh shell debug

lint: modules
	@$(S)/lint.sh debug

litmus:
	@$(S)/litmus.sh

toolchain:
	@$(S)/toolchain.sh

kernel: toolchain
	@if [ -n "$(KDIR)" ]; then echo "KDIR=$(KDIR): using that kernel tree, not building one"; \
	else $(S)/kernel.sh debug; fi

modules: kernel
	@$(S)/modules.sh debug

guest: modules
	@$(S)/initramfs.sh debug

clean:
	rm -rf build
	find c-module rust-module shared-tests/kmemleak_control \( -name '*.o' -o -name '*.ko' -o -name '*.mod' \
		-o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.rmeta' -o -name '*.d' \
		-o -name '*_generated.rs' -o -name '*.bc' -o -name modules.order -o -name Module.symvers \) \
		-delete

distclean: clean
	@$(S)/distclean.sh
