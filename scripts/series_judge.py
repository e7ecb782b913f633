#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""series_judge.py: judge one boot of `make series-check`: KUnit alone.

    series_judge.py RUN_DIR KSRC COUNTS_FILE

The boot (scripts/series_check.sh) has no modules and no driver: the
kernel runs its KUnit suites (the Rust doctests, the patches' examples
among them) and a minimal /init prints "lp-init: done" and reboots. The
console is judged with judge.py's own pieces: its splat list, the
kernel's KTAP parser (tools/testing/kunit of KSRC) and the check that
every suite the top-level plan announced reported. Writes "PASSED FAILED
SKIPPED" to COUNTS_FILE; prints "kunit: N passed, N failed".
"""
import os
import sys

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge  # noqa: E402


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().split('\n\n')[0], file=sys.stderr)
        return 2
    run, ksrc, counts_file = sys.argv[1:4]
    sys.path.insert(0, os.path.join(ksrc, 'tools/testing/kunit'))
    import kunit_parser
    import kunit_printer

    console = judge.read_lines(os.path.join(run, 'console.log'))
    problems = []
    last_splat = -1000
    for n, line in enumerate(console, 1):
        m = judge.SPLAT_RE.search(line)
        if m and m.group(0) == 'Call Trace:' and n - last_splat < 80:
            continue  # the trace of a splat already named
        if m:
            problems.append(f'kernel splat, console.log:{n}: {line.strip()}')
            last_splat = n
        elif 'lp-host: FAIL' in line:
            problems.append(f'console.log:{n}: {line.strip()}')
    if not any('lp-init: done' in l for l in console):
        problems.append('the guest never reached "lp-init: done" '
                        '(crash, hang or timeout): see console.log')
    passed, failed, skipped = judge.judge_ktap(
        kunit_parser, kunit_printer, 'kernel', console, problems)
    judge.kernel_suites_complete(console, problems)
    for p in problems:
        print(f'  FAIL {p}')
    failed += len(problems)
    with open(counts_file, 'w') as f:
        f.write(f'{passed} {failed} {skipped}\n')
    print(f'kunit: {passed} passed, {failed} failed'
          f'{f", {skipped} skipped" if skipped else ""}')
    return 1 if failed or not passed else 0


if __name__ == '__main__':
    sys.exit(main())
