#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""ordering.py: the arm64 machine code of every ordered function.

    ordering.py REPO MODDIR VMLINUX [--quiet]

For every function that a litmus test's Code: section names
(shared-tests/litmus/*.litmus) or that docs/mapping.md's pattern table
maps C to Rust without a litmus test (MAPPING below), in both modules,
this reads its ordering claims (the operations its Code: list names,
which make litmus checks against the source with scripts/litmus_code.py;
MAPPING's for the rest) and finds, in the arm64 code of MODDIR's
lockless_c.ko and lockless_rust.ko (built with DWARF: scripts/modules.sh
KIND -g), the instruction forms each claim needs:

  claim                       LSE form           LL/SC form
  RMW .full                   *al (ldaddal, casal, swpal, ...)
                                                 stlxr, then dmb ish
  RMW .acquire                *a or *al          ldaxr
  RMW .release                *l or *al          stlxr
  RMW .release+acquire        (refcount_dec_and_test: release RMW, then
                              smp_acquire__after_ctrl_dep()) a release
                              form, and dmb ishld
  RMW .relaxed                plain (ldadd, stadd, cas, swp)
                                                 ldxr/stxr, no dmb
  read.acquire / set.release  ldar or ldapr / stlr
  rmb / wmb / mb              dmb ishld / dmb ishst / dmb ish

A function's code is the instructions DWARF attributes to it, its inlined
callees included (scripts/bench_report.py's DWARF reader; every copy of
a generic Rust function is checked, and a claim on a branch a copy
compiled away counts if another copy has it), and, per call site, the
bodies of the calls that stand for an operation: in VMLINUX the
rust_helper_* functions behind Rust's Atomic, Refcount and Arc when they
are not inlined (CONFIG_RUST_INLINE_HELPERS=n) and lib/refcount.c's
refcount_dec_and_*lock() and refcount_dec_not_one() (FOLLOW, two calls
deep), in the module the kernel crate's generic sync code and
lp_gadget_get_unless_zero() (LOCAL, one call deep).

The arm64 kernel compiles both forms of each atomic and picks one at
boot (LSE on -cpu max, LL/SC on a v8.0 CPU): the LL/SC form, always
inline, must hold the claim, and so must the LSE form if the function
has one for that operation (an alternative's replacement, xchg's LSE
form, is assembled outside the function and may be missing). The claims
are counted: two fully ordered RMWs need two sites of each form; a
stronger form may stand in for an acquire or a release, only a plain
form for a relaxed RMW.

Printed: one table, each C function above its Rust twin (the same
process of the same litmus test, or the same MAPPING row), claims ->
forms found; then the places where C and Rust compile the same claim to
different instructions (findings, not failures), and how many claims
differ only in Rust's being in a helper; then "N passed, N failed" (one
per function copy checked). Exit status 1 on a failure.
"""
import bisect
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_report as br  # noqa: E402  (DWARF: the functions' addresses)
import litmus_code as lc  # noqa: E402  (the Code: lists and tokens)

# docs/mapping.md's "What each pattern became" rows with no litmus test
# of their own, and their claims: SET is atomic_xchg() /
# Atomic::xchg(.., Full) (READ is a plain read in both).
MAPPING = [((('c-module/rmw.c', 'lp_rmw'), ('rust-module/rmw.rs', 'rmw')),
            ['xchg.full(var)'])]

# Out-of-line kernel code that implements an atomic for a caller: its body
# is the caller's ordering. Followed from the module and, two calls deep,
# inside vmlinux. Locks are not followed: their ordering is the lock's.
FOLLOW = re.compile(r'^(rust_helper_(atomic|refcount|smp|__?refcount|kref)\w*|'
                    r'refcount_dec_not_one|refcount_dec_if_one|'
                    r'refcount_dec_and_(mutex_)?lock(_irqsave)?|'
                    r'refcount_dec_and_rwsem\w*|__refcount_\w+)$')

# Calls inside a module to code that stands for one of the claim's
# operations: litmus_code.py's C helpers of ours (lp_gadget_get_unless_zero
# is TRYGET's get-unless-zero), and the kernel crate's generic sync code
# that rustc compiles into the module (Refcount::dec_and_lock(),
# Arc::drop_with(), ...). Followed one call deep.
LOCAL = re.compile(r'^(lp_gadget_get_unless_zero|lp_kref_put_rwsem|'
                   r'<?kernel::sync::\S*)')

RMW_KINDS = {'fetch_add', 'fetch_sub', 'add', 'sub', 'cmpxchg', 'xchg',
             'inc_not_zero', 'dec_not_one', 'fetch_and', 'fetch_or',
             'and', 'or'}

LSE = re.compile(r'^(ld(?:add|clr|eor|set|smax|smin|umax|umin)|'
                 r'st(?:add|clr|eor|set|smax|smin|umax|umin)|swp|casp?)'
                 r'(al|a|l)?(b|h)?$')


def claims(tokens):
    """The checkable claims of an extracted token list: [(token, need)]."""
    out = []
    for t in tokens:
        parts = lc.split_tok(t)
        if parts is None:
            continue    # a branch or loop marker (litmus_code.py)
        kind, order, _ = parts
        if kind in RMW_KINDS and order:
            out.append((t, 'rmw.' + order))
        elif kind == 'read' and order == 'acquire':
            out.append((t, 'load.acquire'))
        elif kind == 'set' and order == 'release':
            out.append((t, 'store.release'))
        elif kind in ('rmb', 'wmb', 'mb', 'acquire_ctrl'):
            out.append((t, kind if kind != 'acquire_ctrl' else 'rmb'))
    return out


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout


INSN = re.compile(r'^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$')


def disassemble_ko(ko):
    """{address: (mnemonic, operands, call target)} of @ko's .text."""
    insns, last = {}, None
    out = run(['llvm-objdump', '-d', '-r', '--no-show-raw-insn',
               '--section=.text', ko])
    for line in out.splitlines():
        m = INSN.match(line)
        if not m:
            continue
        mnem = m.group(2)
        if mnem.startswith('R_AARCH64'):
            if last is not None and insns[last][0] == 'bl':
                tgt = re.sub(r'[-+]0x[0-9a-f]+$', '', line.split()[-1])
                insns[last] = (insns[last][0], insns[last][1], tgt)
            continue
        last = int(m.group(1), 16)
        local = re.search(r'<([^>+]+)(\+0x[0-9a-f]+)?>', m.group(3))
        insns[last] = (mnem, m.group(3).split('//')[0].strip(),
                       local.group(1) if local and mnem == 'bl' else None)
    return insns


def disassemble_syms(vmlinux, names):
    """{name: [(mnemonic, operands, call target)]} of @names in vmlinux."""
    if not names:
        return {}
    out = run(['llvm-objdump', '-d', '--no-show-raw-insn',
               '--disassemble-symbols=' + ','.join(sorted(names)), vmlinux])
    bodies, cur = {}, None
    for line in out.splitlines():
        m = re.match(r'^[0-9a-f]+ <([^>]+)>:$', line)
        if m:
            cur = bodies.setdefault(m.group(1), [])
            continue
        m = INSN.match(line)
        if m and cur is not None:
            call = re.search(r'<([^>+]+)(\+0x[0-9a-f]+)?>', m.group(3))
            cur.append((m.group(2), m.group(3).split('//')[0].strip(),
                        call.group(1) if call and m.group(2) == 'bl' else None))
    return bodies


def sites(seq, where):
    """The ordering sites of an instruction sequence: [(form, text)].

    form is lse.{full,acquire,release,relaxed}, llsc.{...},
    load.acquire, store.release, dmb.{ish,ishld,ishst}."""
    out = []
    for i, (mn, ops, _) in enumerate(seq):
        m = LSE.match(mn)
        if m:
            order = {'al': 'full', 'a': 'acquire', 'l': 'release',
                     None: 'relaxed'}[m.group(2)]
            out.append(('lse.' + order, mn + where))
        elif re.match(r'^st(l)?xp?(r)?[bh]?$', mn) and mn.startswith(('stxr', 'stlxr', 'stxp', 'stlxp')):
            rel = mn.startswith('stl')
            # The loop's load-exclusive: the nearest one before.
            acq = False
            for j in range(i - 1, max(i - 12, -1), -1):
                if seq[j][0].startswith(('ldxr', 'ldaxr', 'ldxp', 'ldaxp')):
                    acq = seq[j][0].startswith('lda')
                    break
            dmb = any(seq[j][0] == 'dmb' and seq[j][1] == 'ish'
                      for j in range(i + 1, min(i + 4, len(seq))))
            if dmb:
                order = 'full'
            elif rel and acq:
                order = 'acq_rel'
            elif rel:
                order = 'release'
            elif acq:
                order = 'acquire'
            else:
                order = 'relaxed'
            out.append(('llsc.' + order, ('ldaxr/' if acq else 'ldxr/') + mn
                        + ('+dmb ish' if dmb else '') + where))
        elif re.match(r'^(ldar|ldapr|ldapur)[bh]?$', mn):
            out.append(('load.acquire', mn + where))
        elif re.match(r'^(stlr|stlur)[bh]?$', mn):
            out.append(('store.release', mn + where))
        elif mn == 'dmb':
            out.append(('dmb.' + ops, 'dmb ' + ops + where))
    return out


# What a claim accepts, strongest-fitting first, per family.
ACCEPT = {
    'rmw.full': {'lse': ['full'], 'llsc': ['full']},
    'rmw.acquire': {'lse': ['acquire', 'full'],
                    'llsc': ['acquire', 'acq_rel', 'full']},
    'rmw.release': {'lse': ['release', 'full'],
                    'llsc': ['release', 'acq_rel', 'full']},
    'rmw.relaxed': {'lse': ['relaxed'], 'llsc': ['relaxed']},
}
# Single-form claims: the forms that satisfy them.
SINGLE = {
    'load.acquire': ['load.acquire'],
    'store.release': ['store.release'],
    'rmb': ['dmb.ishld', 'dmb.ish'],
    'wmb': ['dmb.ishst', 'dmb.ish'],
    'mb': ['dmb.ish'],
}
STRENGTH = {'rmw.full': 0, 'mb': 0, 'rmw.release+acquire': 1,
            'rmw.acquire': 2, 'rmw.release': 2, 'load.acquire': 2,
            'store.release': 2, 'rmb': 3, 'wmb': 3, 'rmw.relaxed': 4}


# The LSE instruction a claim's operation compiles to, where it has one
# (a cmpxchg loop or a get-unless-zero is a cas; an add or sub an ldadd
# or stadd): such a site is matched first.
PREFER = {'fetch_add': 'add', 'fetch_sub': 'add', 'add': 'add', 'sub': 'add',
          'cmpxchg': 'cas', 'inc_not_zero': 'cas', 'dec_not_one': 'cas',
          'xchg': 'swp', 'fetch_and': 'clr', 'and': 'clr', 'fetch_or': 'set',
          'or': 'set'}


def take(pool, form, pref, where=None):
    """Remove and return a site of @form from @pool. An LSE site must be
    @pref's instruction (an xchg is a swp, never a cas); an LL/SC site
    is looked for first in @where (the body the LSE site was in), then
    in a helper named after the operation."""
    hits = [s for s in pool if s[0] == form]
    if pref:
        hits = [s for s in hits if pref in s[1].split()[0]]
    hit = None
    if where is not None:
        hit = next((s for s in hits if s[1].partition(' in ')[2] == where), None)
    if hit is None and op_name:
        hit = next((s for s in hits if re.search(r'(?<!cmp)' + op_name[0] + r'(_|$)',
                                                  s[1].partition(' in ')[2])), None)
    hit = hit or (hits[0] if hits else None)
    if hit:
        pool.remove(hit)
    return hit


op_name = []    # the operation being matched (check())


def check(want, found):
    """Match claims to sites: [(token, need, [sites used], ok)]."""
    pool = list(found)
    # release+acquire (refcount_dec_and_test): a release RMW, then the
    # acquire of smp_acquire__after_ctrl_dep() (dmb ishld).
    expanded = []
    for t, need in want:
        if need == 'rmw.release+acquire':
            expanded.append((t, need, ['rmw.release', 'rmb']))
        else:
            expanded.append((t, need, [need]))
    result = []
    for t, need, parts in sorted(expanded, key=lambda x: STRENGTH.get(x[1], 5)):
        used, ok = [], True
        kind = lc.split_tok(t)[0]
        pref = PREFER.get(kind)
        op_name[:] = [{'inc_not_zero': 'inc_not_zero', 'dec_not_one': 'dec_not_one',
                       'xchg': 'xchg', 'cmpxchg': 'cmpxchg'}.get(kind, kind)]
        for p in parts:
            if p in ACCEPT:
                # The kernel builds both forms and picks one at boot: both
                # must hold the claim. The LL/SC form is always inline;
                # an LSE form may be missing (an alternative's
                # replacement, outside the function: see copies()), but
                # one that is there and too weak fails.
                got = 0
                where = None
                for fam in ('lse', 'llsc'):
                    hit = None
                    for order in ACCEPT[p][fam]:
                        hit = take(pool, fam + '.' + order,
                                   pref if fam == 'lse' else None,
                                   where if fam == 'llsc' else None)
                        if hit:
                            break
                    if hit and fam == 'lse':
                        where = hit[1].partition(' in ')[2]
                    if hit:
                        used.append(hit[1])
                        got += 1
                        continue
                    weaker = [x for x in pool if x[0].startswith(fam + '.')
                              and (fam == 'llsc' or not pref or pref in x[1].split()[0])]
                    if fam == 'llsc' or weaker:
                        ok = False
                        used.append('no %s %s form%s' % (
                            'LL/SC' if fam == 'llsc' else 'LSE', p[4:],
                            ' (found: %s)' % weaker[0][1] if weaker else ''))
                    else:
                        used.append('no LSE form here (an alternative outside the function)')
            else:
                hit = None
                for form in SINGLE[p]:
                    hit = take(pool, form, None)
                    if hit:
                        break
                if hit:
                    used.append(hit[1])
                else:
                    ok = False
                    used.append('no ' + ' or '.join(f.replace('.', ' ') for f in SINGLE[p]))
        result.append((t, need, used, ok))
    return result


# ------------------------------------------------------------- names

def norm(name):
    """A DWARF function name as the litmus Code: sections write it: the
    generic arguments and the trait of <T as Trait>::f dropped, the
    crate and modules too: Type::method or function."""
    s = name
    # <T as Trait>::f -> T::f ; <T>::f -> T::f
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r'<([^<>]*?) as [^<>]*>::', r'\1::', s)
        s = re.sub(r'^<([^<>]*)>::', r'\1::', s)
        s = re.sub(r'<[^<>]*>', '', s)   # innermost generic arguments
        s = s.replace('::::', '::')
    parts = [p for p in s.split('::') if p]
    while len(parts) > 1 and parts[0] in ('lockless_rust', 'gadget', 'txn',
                                          'arena', 'rmw', 'device'):
        parts.pop(0)
    return '::'.join(parts)


class Code:
    """The arm64 code of one module, per function, with its calls."""

    def __init__(self, ko):
        self.insns = disassemble_ko(ko)
        rust = sorted({c for _, _, c in self.insns.values() if c and c.startswith('_R')})
        if rust:
            plain = dict(zip(rust, run(['llvm-cxxfilt'] + rust).splitlines()))
            self.insns = {a: (m, o, plain.get(c, c)) for a, (m, o, c) in self.insns.items()}
        self.starts = {}
        dies = br.parse_dies(ko)
        names = br.Names(dies)
        self.instances = {}
        order = sorted(self.insns)
        for off, d in dies.items():
            if d['tag'] not in ('DW_TAG_subprogram', 'DW_TAG_inlined_subroutine'):
                continue
            rng = br.die_ranges(d)
            if not rng:
                continue
            name = names.of(off)
            if not name:
                continue
            addrs = set()
            for lo, hi in rng:
                addrs.update(order[bisect.bisect_left(order, lo):
                                   bisect.bisect_left(order, hi)])
            if addrs:
                self.instances.setdefault(name, []).append(
                    (addrs, d['tag'] == 'DW_TAG_inlined_subroutine'))
        # The module's own symbols: what a call inside it reaches.
        out = run(['llvm-nm', '--defined-only', ko])
        syms = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in 'tT':
                syms[f[2]] = int(f[0], 16)
        names = sorted(syms.items(), key=lambda kv: kv[1])
        mangled = [n for n, _ in names if n.startswith('_R')]
        plain = dict(zip(mangled, run(['llvm-cxxfilt'] + mangled).splitlines())) \
            if mangled else {}
        for i, (n, lo) in enumerate(names):
            hi = names[i + 1][1] if i + 1 < len(names) else max(order) + 4
            self.starts[plain.get(n, n)] = order[bisect.bisect_left(order, lo):
                                                 bisect.bisect_left(order, hi)]

    def copies(self, func, rust):
        """[(DWARF name, address set, how)] of @func: for C its largest
        copy; for Rust the largest copy of each monomorphization."""
        if rust:
            names = [n for n in self.instances if norm(n) == func]
        else:
            names = [n for n in self.instances if n == func]
        out = []
        for n in sorted(names):
            addrs, inlined = max(self.instances[n], key=lambda i: len(i[0]))
            if not inlined and n in self.starts:
                # An alternative's replacement (arm64's xchg: its LSE
                # form) is assembled into a subsection after the
                # function, outside its DWARF range, inside its symbol.
                addrs = addrs | set(self.starts[n])
            out.append((n, addrs, 'inlined' if inlined else 'out of line'))
        return out


def main(argv):
    if len(argv) < 4:
        sys.exit('usage: ordering.py REPO MODDIR VMLINUX')
    repo, moddir, vmlinux = argv[1:4]
    lc.RUST_NAMES = lc.rust_lock_names(repo)
    # The pairs: C and Rust functions of one process of one litmus test.
    pairs = []
    claimed = {}
    litdir = os.path.join(repo, 'shared-tests/litmus')
    for fn in sorted(os.listdir(litdir)):
        if not fn.endswith('.litmus'):
            continue
        byproc = {}
        for proc, path, func, toks, _ in lc.parse_code(os.path.join(litdir, fn)):
            side = 0 if path.startswith('c-module/') else 1
            byproc.setdefault(proc, ([], []))[side].append((path, func))
            # The claim is the Code: list (make litmus checks that the
            # source says the same): a mutant that weakens the source
            # leaves it, and its machine code must then fail it.
            claimed.setdefault((path, func), lc.expected_tokens(toks))
        for proc, (cs, rs) in byproc.items():
            for i in range(max(len(cs), len(rs))):
                pair = (cs[i] if i < len(cs) else None,
                        rs[i] if i < len(rs) else None)
                if pair not in pairs:
                    pairs.append(pair)
    for pair, toks in MAPPING:
        for side in pair:
            claimed.setdefault(side, toks)
        if pair not in pairs:
            pairs.append(pair)

    mods = {'c': Code(os.path.join(moddir, 'lockless_c.ko')),
            'rust': Code(os.path.join(moddir, 'lockless_rust.ko'))}
    if not any(m.instances for m in mods.values()):
        sys.exit('the modules carry no DWARF: build them with scripts/modules.sh KIND -g')

    # Which functions have claims, their copies and their callees.
    funcs = {}
    for pair in pairs:
        for side in pair:
            if side is None or side in funcs:
                continue
            path, func = side
            want, err = claims(claimed.get(side, [])), None
            if side not in claimed:
                err = 'no Code: list names it'
            rust = path.endswith('.rs')
            copies = mods['rust' if rust else 'c'].copies(func, rust) if want else []
            funcs[side] = {'want': want, 'err': err, 'copies': copies,
                           'rust': rust}
    # The out-of-line bodies, followed two calls deep into vmlinux.
    called = set()
    for side, f in funcs.items():
        mod = mods['rust' if f['rust'] else 'c']
        for _, addrs, _ in f['copies']:
            called |= {mod.insns[a][2] for a in addrs
                       if mod.insns[a][2] and FOLLOW.match(mod.insns[a][2])}
    for mod in mods.values():
        for name, addrs in mod.starts.items():
            if LOCAL.match(name):
                called |= {mod.insns[a][2] for a in addrs
                           if mod.insns[a][2] and FOLLOW.match(mod.insns[a][2])}
    bodies = {}
    todo = set(called)
    for _ in range(3):
        got = disassemble_syms(vmlinux, todo)
        bodies.update(got)
        todo = {c for b in got.values() for _, _, c in b
                if c and FOLLOW.match(c) and c not in bodies}
        if not todo:
            break

    def body_sites(name, depth=0):
        out = sites(bodies.get(name, []), ' in ' + name)
        if depth < 2:
            for _, _, c in bodies.get(name, []):
                if c and c != name and FOLLOW.match(c):
                    out += body_sites(c, depth + 1)
        return out

    passed = failed = 0
    report = {}
    for side, f in funcs.items():
        if not f['want']:
            continue
        mod = mods['rust' if f['rust'] else 'c']
        rows = []
        if f['err'] or not f['copies']:
            rows.append([side[1], f['err'] or 'not in the DWARF of the .ko', None, False])
        for name, addrs, how in f['copies']:
            seq = [mod.insns[a] for a in sorted(addrs)]
            found = sites(seq, '')
            # Each call site brings its callee's sites once.
            for _, _, c in seq:
                if not c:
                    continue
                if FOLLOW.match(c):
                    found += body_sites(c)
                elif LOCAL.match(c) and c in mod.starts and c != name:
                    body = [mod.insns[a] for a in mod.starts[c]]
                    found += sites(body, ' in ' + short(c))
                    for _, _, cc in body:
                        if cc and FOLLOW.match(cc):
                            found += body_sites(cc)
            res = check(f['want'], found)
            rows.append([name, how, res, all(r[3] for r in res)])
        # A generic Rust function has one copy per flavor, and a copy has
        # only its flavor's branches: a claim holds if some copy has it.
        if len(rows) > 1 and all(r[2] is not None for r in rows):
            held = {}
            for r in rows:
                for t, _, _, k in r[2]:
                    held[t] = held.get(t, False) or k
            for r in rows:
                r[2] = [(t, n, u if k or not held[t] else
                         ['not in this copy (its flavor has no such branch)'], k or held[t])
                        for t, n, u, k in r[2]]
                r[3] = all(x[3] for x in r[2])
        report[side] = rows
        for r in rows:
            if r[3]:
                passed += 1
            else:
                failed += 1

    quiet = '--quiet' in argv
    print('make ordering: claim -> the arm64 instructions found (LSE form; LL/SC form)')
    diffs, helpers, claims_differ = [], [], []
    for c, r in pairs:
        if (c not in report) and (r not in report):
            continue
        print('-' * 78)
        for side in (c, r):
            if side is None:
                continue
            lang = 'Rust' if side[0].endswith('.rs') else 'C'
            if side not in report:
                print('%-4s %s %s: no ordering claim' % (lang, side[0], side[1]))
                continue
            # Copies (a generic Rust function's, one per flavor) whose
            # claims found the same instructions are printed once.
            groups = {}
            for name, how, res, ok in report[side]:
                lines = ['       FAIL ' + str(how)] if res is None else [
                    '       %s%-38s -> %s' % ('' if k else 'FAIL ', t, '; '.join(used))
                    for t, need, used, k in res]
                groups.setdefault((tuple(lines), ok), []).append((name, how))
            for (lines, ok), names in groups.items():
                name, how = names[0]
                more = ' (and %d more copies, alike)' % (len(names) - 1) \
                    if len(names) > 1 else ''
                print('%-4s %s %s%s%s  [%s]' % (
                    lang, side[0], side[1],
                    '' if name == side[1] else ' = ' + name, more,
                    ('ok' if ok else 'FAIL') + (', ' + how if how and res_ok(how) else '')))
                if ok and quiet:
                    continue
                print('\n'.join(lines))
        # C and Rust: the same claim, other forms? The same operation,
        # another claim?
        if c in report and r in report and report[c][0][2] and report[r][0][2]:
            ckinds = {lc.split_tok(t)[:2]: used for t, _, used, _ in report[c][0][2]}
            rkinds = {lc.split_tok(t)[:2]: used for t, _, used, _ in report[r][0][2]}
            for (k, o), used in rkinds.items():
                if (k, o) in ckinds:
                    continue
                other = [(ck, co) for ck, co in ckinds if ck == k]
                if other:
                    ck, co = other[0]
                    claims_differ.append('%s vs %s: %s: C %s (%s), Rust %s (%s)' % (
                        c[1], r[1], k, co, '; '.join(forms(ckinds[(ck, co)])), o,
                        '; '.join(forms(used))))
            cf = {t: used for t, _, used, _ in report[c][0][2]}
            for t, _, used, _ in report[r][0][2]:
                kind, order, _ = lc.split_tok(t)
                for ct, cused in cf.items():
                    ck, co, _ = lc.split_tok(ct)
                    if (ck, co) != (kind, order):
                        continue
                    if comparable(cused, used) and forms(cused) != forms(used):
                        diffs.append('%s vs %s: %s.%s: C %s; Rust %s' % (
                            c[1], r[1], kind, order,
                            '; '.join(cused), '; '.join(used)))
                    elif in_helper(cused) != in_helper(used):
                        helpers.append('%s vs %s: %s.%s: %s' % (
                            c[1], r[1], kind, order, '; '.join(
                                u for u in (used if any(in_helper(used)) else cused)
                                if ' in ' in u)))
                    break
    print('-' * 78)
    if diffs:
        print('C and Rust compile the same claim to different instructions:')
        for d in dict.fromkeys(diffs):
            print('  ' + d)
    else:
        print('C and Rust compile every shared claim to the same instructions')
    if claims_differ:
        print('the same operation claimed with another ordering (docs/mapping.md says why):')
        for d in dict.fromkeys(claims_differ):
            print('  ' + d)
    if helpers:
        print('the same instructions, Rust\'s in an out-of-line helper in vmlinux: %d claims'
              % len(dict.fromkeys(helpers)))
        if not quiet:
            for d in dict.fromkeys(helpers):
                print('  ' + d)
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


def short(name):
    """A demangled name without its generic arguments."""
    return norm(name) if '::' in name else name


def res_ok(how):
    return how in ('inlined', 'out of line')


def forms(used):
    """The instruction forms of a match, without where they sit."""
    return [re.sub(r' in \S+$', '', u) for u in used]


def comparable(a, b):
    """Whether two matches can be compared form by form: both found an
    LSE form (arm64's xchg has its LSE form in an alternative outside the
    function, which a helper's disassembly in vmlinux does not show)."""
    return not any(u.startswith('no ') for u in a + b)


def in_helper(used):
    """Which of a match's sites are in an out-of-line body."""
    return [' in ' in u for u in used]


if __name__ == '__main__':
    sys.exit(main(sys.argv))
