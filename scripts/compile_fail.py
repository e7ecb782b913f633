#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""compile_fail.py KDIR OUTDIR: the compile-fail tests of shared-tests/compile-fail/.

Each snippet there is a short Rust file whose header says what rustc must
do with it, built with Kbuild against the kernel in KDIR (its `kernel`
crate, the flags Kbuild gives an out-of-tree module):

    // compile-fail: E0308 expected `*mut RcuHead`
        rustc must reject it, with that error code and that text in its
        message, and with no error of another code (so that a typo, an
        E0425 or E0432, cannot pass for the expected failure)
    // compile-pass
        rustc must accept it (the twin of a compile-fail snippet)
    // module-file: gadget.rs
        the snippet is appended to a copy of rust-module/gadget.rs and the
        whole module is built: for the module's own guarantees, whose
        types are private to it

The kernel snippets build in one Kbuild run (obj-m of all of them, -j1 so
that each rustc's messages follow its RUSTC line; -k so that one failure
does not stop the others), each module snippet in a run of its own.
Prints `ok N NAME: ...` or `not ok N NAME: ...` per snippet, KTAP-like;
exits 0 when all are ok.
"""

import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNIPPETS = os.path.join(REPO, "shared-tests", "compile-fail")

ERR = re.compile(r"^error(?:\[(E\d{4})\])?: (.*)$")
RUSTC = re.compile(r"^\s*(?:RUSTC|CLIPPY) \[M\] (\S+)\.o$")
IGNORED = re.compile(r"^error: aborting due to|^error: could not compile")


def header(path):
    """The snippet's expectation: ('fail', code, text, file) or ('pass', ...)."""
    want = None
    mfile = None
    with open(path) as f:
        for line in f:
            if not line.startswith("//"):
                break
            m = re.match(r"// compile-fail: (E\d{4}) (.+)$", line.rstrip("\n"))
            if m:
                want = ("fail", m.group(1), m.group(2))
            elif line.rstrip("\n") == "// compile-pass":
                want = ("pass", None, None)
            m = re.match(r"// module-file: (\S+)$", line.rstrip("\n"))
            if m:
                mfile = m.group(1)
    return want, mfile


def make(kdir, mdir):
    """One Kbuild run over an M= directory; its combined output."""
    r = subprocess.run(
        ["make", "-C", kdir, f"M={mdir}", "LLVM=1", "-k", "-j1", "modules"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.stdout


def judge(want, out, built):
    """(ok, why) for a snippet's rustc output and whether its object was built."""
    kind, code, text = want
    errors = [ERR.match(l) for l in out.splitlines()]
    errors = [m for m in errors if m and not IGNORED.match(m.group(0))]
    if kind == "pass":
        if built and not errors:
            return True, "compiled, as it must"
        first = errors[0].group(0) if errors else "no object"
        return False, f"did not compile: {first}"
    if built:
        return False, f"compiled, but rustc must reject it with {code}"
    if not errors:
        return False, "not built, but rustc reported no error (see the log)"
    other = [m.group(0) for m in errors if m.group(1) != code]
    if other:
        return False, f"rejected, but not (only) with {code}: {other[0]}"
    flat = " ".join(out.split())
    if " ".join(text.split()) not in flat:
        return False, f"rejected with {code}, but no message holds '{text}'"
    return True, f"rejected with {code} ({errors[0].group(2)})"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compile_fail.py KDIR OUTDIR")
    kdir, out = sys.argv[1], os.path.abspath(sys.argv[2])
    names = sorted(f[:-3] for f in os.listdir(SNIPPETS) if f.endswith(".rs"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    kernel = []
    modules = []
    wants = {}
    for n in names:
        want, mfile = header(os.path.join(SNIPPETS, n + ".rs"))
        if want is None:
            sys.exit(f"{n}.rs: no '// compile-fail: EXXXX TEXT' or '// compile-pass' header")
        wants[n] = want
        (modules if mfile else kernel).append((n, mfile))

    results = {}
    logs = []
    if kernel:
        kd = os.path.join(out, "kernel")
        os.makedirs(kd)
        for n, _ in kernel:
            shutil.copy(os.path.join(SNIPPETS, n + ".rs"), kd)
        with open(os.path.join(kd, "Kbuild"), "w") as f:
            f.write("obj-m := " + " ".join(n + ".o" for n, _ in kernel) + "\n")
        text = make(kdir, kd)
        logs.append(f"== kernel snippets\n{text}")
        per = {}
        cur = None
        for line in text.splitlines():
            m = RUSTC.match(line)
            if m:
                cur = os.path.basename(m.group(1))
                per[cur] = []
            elif cur is not None:
                per[cur].append(line)
        for n, _ in kernel:
            built = os.path.exists(os.path.join(kd, n + ".o"))
            results[n] = judge(wants[n], "\n".join(per.get(n, [])), built)

    # The module's Kbuild finds the UAPI header at $(src)/../shared-tests.
    os.symlink(os.path.join(REPO, "shared-tests"), os.path.join(out, "shared-tests"))
    mod = os.path.join(REPO, "rust-module")
    for n, mfile in modules:
        md = os.path.join(out, "module-" + n)
        os.makedirs(md)
        for f in os.listdir(mod):
            if re.search(r"\.(rs|h)$|^Kbuild$", f) and not f.endswith("_generated.rs"):
                shutil.copy(os.path.join(mod, f), md)
        if not os.path.exists(os.path.join(md, mfile)):
            results[n] = (False, f"module-file {mfile} is not a file of rust-module/")
            continue
        with open(os.path.join(SNIPPETS, n + ".rs")) as s, open(os.path.join(md, mfile), "a") as d:
            d.write("\n" + s.read())
        text = make(kdir, md)
        logs.append(f"== {n} (rust-module/{mfile})\n{text}")
        built = os.path.exists(os.path.join(md, "lockless_rust.o"))
        results[n] = judge(wants[n], text, built)

    with open(os.path.join(out, "build.log"), "w") as f:
        f.write("\n".join(logs))
    print(f"1..{len(names)}")
    bad = 0
    for i, n in enumerate(names, 1):
        ok, why = results[n]
        bad += not ok
        print(f"{'ok' if ok else 'not ok'} {i} {n}: {why}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
