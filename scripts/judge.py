#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""judge.py: judge one guest run from its serial logs.

    judge.py RUN_DIR KSRC COUNTS_FILE [--kernel-ktap]

RUN_DIR holds console.log (ttyS0: the kernel and /init) and ktap.log
(ttyS1: the test driver). KTAP is parsed with the kernel's own parser,
tools/testing/kunit/kunit_parser.py from KSRC. The run fails on:

  - any kernel splat on the console (the line is named),
  - a "lp-init: FAIL" or "lp-host: FAIL" line (insmod, rmmod, timeout),
  - a guest that never printed "lp-init: done" (crash, hang, timeout),
  - missing KTAP, a missing plan, fewer results than the plan, a failed
    or crashed test, in the driver's KTAP and, with --kernel-ktap, in the
    kernel's own KUnit KTAP on the console (the Rust doctests).

Writes "PASSED FAILED SKIPPED" to COUNTS_FILE and prints "N passed, N failed".
"""
import os
import re
import sys

SPLATS = [
    r'WARNING:', r'BUG:', r'KASAN:', r'UBSAN:', r'possible circular locking',
    r'possible recursive locking', r'inconsistent lock state',
    r'suspicious RCU usage', r'unreferenced object',
    r'suspected memory leak', r'Oops', r'Kernel panic', r'kernel BUG',
    r'general protection fault', r'RCU stall', r'rcu_.* detected stall',
    r'soft lockup', r'hard LOCKUP', r'hung task', r'blocked for more than',
    r'Call Trace:', r'refcount_t: ',
]
SPLAT_RE = re.compile('|'.join(SPLATS))


def read_lines(path):
    try:
        with open(path, errors='replace') as f:
            return [l.rstrip('\r\n') for l in f]
    except FileNotFoundError:
        return []


def judge_ktap(kunit_parser, kunit_printer, label, lines, problems):
    """Parse one KTAP stream with the kernel's parser; print what failed.

    Returns (passed, failed, skipped); parse problems go to @problems.
    """
    quiet = kunit_printer.Printer(print=False)
    test = kunit_parser.parse_run_tests(lines, quiet)
    counts = test.counts

    def walk(t, path):
        if not t.name:
            name = f'{path or label}: a result its plan promised never came'
        else:
            name = f'{path}.{t.name}' if path else t.name
        if not t.subtests and t.status not in (
                kunit_parser.TestStatus.SUCCESS,
                kunit_parser.TestStatus.SKIPPED):
            print(f'  FAIL {name}: {t.status.name}')
            for l in t.log[-15:]:
                print(f'       {l}')
        for s in t.subtests:
            walk(s, t.name)
    for s in test.subtests:
        walk(s, '')

    if test.status in (kunit_parser.TestStatus.FAILURE_TO_PARSE_TESTS,
                       kunit_parser.TestStatus.NO_TESTS):
        problems.append(f'no {label} KTAP results')
    elif counts.errors and not counts.crashed:
        problems.append(f'{label} KTAP: {counts.errors} parse error(s): '
                        'missing plan or fewer results than planned')
    return counts.passed, counts.failed + counts.crashed, counts.skipped


def main():
    run, ksrc, counts_file = sys.argv[1:4]
    # --kernel-ktap: the kernel runs KUnit suites at boot (the Rust
    # doctests); their KTAP on the console must be there and pass too.
    kernel_ktap = '--kernel-ktap' in sys.argv[4:]
    sys.path.insert(0, os.path.join(ksrc, 'tools/testing/kunit'))
    import kunit_parser
    import kunit_printer

    console = read_lines(os.path.join(run, 'console.log'))
    ktap = read_lines(os.path.join(run, 'ktap.log'))
    problems = []

    last_splat = -1000
    for n, line in enumerate(console, 1):
        m = SPLAT_RE.search(line)
        if m and m.group(0) == 'Call Trace:' and n - last_splat < 80:
            continue  # the trace of a splat already named
        if m:
            problems.append(f'kernel splat, console.log:{n}: {line.strip()}')
            last_splat = n
        elif 'lp-init: FAIL' in line or 'lp-host: FAIL' in line:
            problems.append(f'console.log:{n}: {line.strip()}')
    if not any('lp-init: done' in l for l in console):
        problems.append('the guest never reached "lp-init: done" '
                        '(crash, hang or timeout): see console.log')

    passed = failed = skipped = 0
    for label, lines in (('driver', ktap),) + \
            ((('kernel', console),) if kernel_ktap else ()):
        p, f, sk = judge_ktap(kunit_parser, kunit_printer, label, lines,
                              problems)
        print(f'{label} KTAP ({"ttyS1" if label == "driver" else "console"}):'
              f' {p} passed, {f} failed, {sk} skipped')
        passed += p
        failed += f
        skipped += sk

    for p in problems:
        print(f'  FAIL {p}')
    # Every problem outside the KTAP counts is one more failure.
    failed += len(problems)
    with open(counts_file, 'w') as f:
        f.write(f'{passed} {failed} {skipped}\n')
    sk = f', {skipped} skipped' if skipped else ''
    print(f'guest: {passed} passed, {failed} failed{sk}')
    return 1 if failed or not passed else 0


if __name__ == '__main__':
    sys.exit(main())
