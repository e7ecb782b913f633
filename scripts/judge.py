#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""judge.py: judge one guest run from its serial logs.

    judge.py RUN_DIR KSRC COUNTS_FILE [--kernel-ktap] [--mode check|bench]

RUN_DIR holds the guest's serial logs: console.log (ttyS0: the kernel and
/init), ktap.log (ttyS1: the test driver, or the bench in --mode bench),
and in --mode check demo.log (ttyS2: the C-vs-Rust demo) and bench.log
(ttyS3: the bench's smoke run), plus times.log (the host's arrival time of
each driver result). KTAP is parsed with the kernel's own parser,
tools/testing/kunit/kunit_parser.py from KSRC. The run fails, each with a
one-line reason, on:

  - any kernel splat on the console (the line is named),
  - a "lp-init: FAIL" or "lp-host: FAIL" line (insmod, rmmod, timeout,
    kmemleak missing or blind to the known leak),
  - a guest that never printed "lp-init: done" (crash, hang, timeout),
  - missing KTAP, a missing plan, fewer results than the plan, a failed
    or crashed test, in the driver's KTAP and, with --kernel-ktap, in the
    kernel's own KUnit KTAP on the console (fewer suite results than its
    top-level plan announced counts too),
  - in --mode check: a driver test that /init expected ("lp-init: expect",
    from the driver's own listing) but that reported nothing; any skipped
    driver test; a driver that exited non-zero; C and Rust pass sets that
    differ (test names compared with the variant's module stripped); a demo
    whose two modules answered differently; a bench smoke cell that is not
    sane; a debug guest without working kmemleak. A TESTS= run (the
    driver tests /init was told to select) skips the C-vs-Rust comparison,
    the demo and the bench smoke.

Writes "PASSED FAILED SKIPPED" to COUNTS_FILE and every driver test's
wall time to RUN_DIR/test-times.txt, prints the guest's steps, the
slowest tests and "guest: N passed, N failed".
"""
import os
import re
import sys

SPLATS = [
    r'WARNING:', r'BUG:', r'KASAN:', r'UBSAN:', r'possible circular locking',
    r'possible recursive locking', r'inconsistent lock state',
    r'suspicious RCU usage', r'unreferenced object',
    r'Oops', r'Kernel panic', r'kernel BUG',
    r'general protection fault', r'RCU stall', r'rcu_.* detected stall',
    r'soft lockup', r'hard LOCKUP', r'hung task', r'blocked for more than',
    r'Call Trace:', r'refcount_t: ',
    # arm64's spellings of an oops and its backtrace.
    r'Call trace:', r'Unable to handle kernel',
]
# kmemleak's own "N new suspected memory leaks" after a scan is not one:
# the known-leak control always makes it, and /init prints every record
# that is not the control's ("unreferenced object ...", a splat above).
SPLAT_RE = re.compile('|'.join(SPLATS))
RESULT_RE = re.compile(r'^(not )?ok \d+ (\S+)(.*)$')
PRINTK_RE = re.compile(r'^\[\s*(\d+\.\d+)\]\s?')


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
            print(f'  FAIL {label}: {name}: {t.status.name}')
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


def kernel_suites_complete(console, problems):
    """The kernel's KUnit run: as many top-level suite results as its plan."""
    plan = None
    results = 0
    for line in console:
        line = PRINTK_RE.sub('', line)
        if plan is None:
            m = re.match(r'^1\.\.(\d+)$', line)
            if m:
                plan = int(m.group(1))
            continue
        if re.match(r'^(not )?ok \d+ ', line):
            results += 1
    if plan is None:
        problems.append('kernel KUnit: no top-level plan on the console')
    elif results < plan:
        problems.append(f'kernel KUnit: {results} suite results, '
                        f'its plan announced {plan}')
    return plan or 0, results


def twin_name(name):
    """fixture.c_x.test -> (module, fixture.x.test); None if no module."""
    parts = name.split('.')
    if len(parts) != 3:
        return None, name
    fixture, variant, test = parts
    for mod in ('c', 'rust'):
        if variant == mod:
            return mod, f'{fixture}.{test}'
        if variant.startswith(mod + '_'):
            return mod, f'{fixture}.{variant[len(mod) + 1:]}.{test}'
    return None, name


def judge_driver_results(ktap, console, problems, full):
    """What the kernel's parser cannot know: expected, skipped, twins.

    The C-vs-Rust comparison needs the whole suite: a TESTS= run may
    select one module's tests on purpose (make mutants does).
    """
    expected = [l.split('lp-init: expect ', 1)[1].strip()
                for l in console if 'lp-init: expect ' in l]
    results = {}
    for line in ktap:
        m = RESULT_RE.match(line)
        if m:
            ok = not m.group(1)
            skip = '# SKIP' in m.group(3)
            results[m.group(2)] = 'skip' if skip else ('ok' if ok else 'fail')
    if not expected:
        problems.append('/init announced no expected driver tests')
    for name in expected:
        if name not in results:
            problems.append(f'driver: {name} was expected but reported nothing')
    for name, r in results.items():
        if r == 'skip':
            problems.append(f'driver: {name} was skipped (make check allows no skips)')

    exits = [l.split('lp-init: lockless_test exited ', 1)[1].strip()
             for l in console if 'lp-init: lockless_test exited ' in l]
    if not exits:
        problems.append('the driver never finished (no exit status from /init)')
    elif exits[0] != '0':
        problems.append(f'the driver exited {exits[0]}')

    if not full:
        return
    passed = {'c': set(), 'rust': set()}
    seen = {'c': set(), 'rust': set()}
    for name, r in results.items():
        mod, twin = twin_name(name)
        if mod is None:
            continue
        seen[mod].add(twin)
        if r == 'ok':
            passed[mod].add(twin)
    for twin in sorted(seen['c'] ^ seen['rust']):
        have = 'C' if twin in seen['c'] else 'Rust'
        problems.append(f'driver: {twin} ran for {have} only: '
                        'every test must run against both modules')
    for twin in sorted((passed['c'] ^ passed['rust']) & seen['c'] & seen['rust']):
        who = 'C' if twin in passed['c'] else 'Rust'
        problems.append(f'driver: {twin} passed for {who} only')


def judge_demo(run, console, problems):
    """The demo's C-vs-Rust comparison on one identical script per row."""
    exits = [l.split('lp-init: lockless_demo exited ', 1)[1].strip()
             for l in console if 'lp-init: lockless_demo exited ' in l]
    demo = read_lines(os.path.join(run, 'demo.log'))
    summary = [l for l in demo if l.startswith('C vs Rust:')]
    print(f'demo (ttyS2): {summary[-1] if summary else "no summary"}')
    if not exits:
        problems.append('the demo never ran or never finished')
        return 0, 1
    if exits[0] != '0':
        rows = [l.strip() for l in demo if 'DIFFERS' in l or l.startswith('    ')]
        problems.append(f'demo: C and Rust answered differently (exit '
                        f'{exits[0]}): ' + ('; '.join(rows[:4]) or
                                            'see demo.log'))
        return 0, 1
    return 1, 0


def report_times(run, console):
    """The guest's steps (its uptime) and the slowest driver tests."""
    stamps = []
    for line in console:
        m = re.search(r'lp-init: t=(\d+\.\d+) (.*)$', line)
        if m:
            stamps.append((float(m.group(1)), m.group(2)))
    kunit = [float(PRINTK_RE.match(l).group(1)) for l in console
             if PRINTK_RE.match(l) and re.search(r'KTAP version|ok \d+ ', l)]
    steps = []
    if stamps:
        steps.append(('boot (kernel, KUnit suites)', stamps[0][0]))
    if kunit:
        steps.append(('  of which the KUnit suites', kunit[-1] - kunit[0]))
    for (t0, _), (t1, what) in zip(stamps, stamps[1:]):
        # "X done" closes X; "X started" closes the setup before X.
        if what.endswith(' started'):
            what = 'setup before ' + what[:-len(' started')]
        steps.append((what.replace(' done', ''), t1 - t0))
    if steps:
        print('guest steps (guest uptime, s): ' +
              ', '.join(f'{w} {t:.0f}' for w, t in steps))
    times = []
    prev = None
    for line in read_lines(os.path.join(run, 'times.log')):
        t, _, rest = line.partition(' ')
        m = RESULT_RE.match(rest)
        if prev is not None and m:
            times.append((float(t) - prev, m.group(2)))
        if m or 'TAP version' in rest:
            prev = float(t)
    times.sort(reverse=True)
    if times:
        print('slowest driver tests (host wall, s): ' +
              ', '.join(f'{n} {t:.0f}' for t, n in times[:6]))
        with open(os.path.join(run, 'test-times.txt'), 'w') as f:
            f.writelines(f'{t:8.1f} s  {n}\n' for t, n in times)


def main():
    run, ksrc, counts_file = sys.argv[1:4]
    args = sys.argv[4:]
    # --kernel-ktap: the kernel runs KUnit suites at boot (the Rust
    # doctests); their KTAP on the console must be there and pass too.
    kernel_ktap = '--kernel-ktap' in args
    mode = args[args.index('--mode') + 1] if '--mode' in args else 'check'
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

    streams = [('driver' if mode == 'check' else mode, 'ttyS1', ktap)]
    full = mode == 'check' and not any('lp-init: filter ' in l for l in console)
    if mode == 'check' and full:
        streams.append(('bench smoke', 'ttyS3',
                        read_lines(os.path.join(run, 'bench.log'))))
    if kernel_ktap:
        streams.append(('kernel', 'console', console))

    passed = failed = skipped = 0
    for label, port, lines in streams:
        p, f, sk = judge_ktap(kunit_parser, kunit_printer, label, lines,
                              problems)
        print(f'{label} KTAP ({port}): {p} passed, {f} failed, {sk} skipped')
        passed += p
        failed += f
        skipped += sk
    if kernel_ktap:
        kernel_suites_complete(console, problems)

    if mode == 'check':
        judge_driver_results(ktap, console, problems, full)
        if full:
            p, f = judge_demo(run, console, problems)
            passed += p
            if not any('lp-init: lockless_bench exited 0' in l for l in console):
                problems.append('the bench smoke run did not exit 0: see bench.log')
        if not any(re.search(r'lp-init: kmemleak: [1-9]\d* known leak', l)
                   for l in console):
            problems.append('kmemleak did not prove itself on the known leak')
        report_times(run, console)

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
