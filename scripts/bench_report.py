#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bench_report.py: the host side of `make bench`, run inside the root.

    bench_report.py OUT_DIR HOST_CPUS HOST_REPO NAME=RUN_DIR,MODULES_DIR,KERNEL...

(HOST_REPO: where the repository, /lp/src in the root, is on the host,
for the paths printed at the end.) NAME is one of

  icount  the perf kernel's run under QEMU -icount shift=0: insns/op,
  inline  the same on the perf-inline kernel (Rust's helpers inlined),
  tcg     the multi-threaded wall-clock run (the only one BENCH_QUICK has;
          none on ARCH=arm64, whose report is the instruction table).

Each RUN_DIR/ktap.log holds what shared-tests/lockless_bench.c printed in
the guest: KTAP per cell, then "# === table ===", "# === ratios ===" and
"# === csv ===" sections. This script

  - writes every run's CSV to OUT_DIR/bench.csv, with a first column
    "run", and compares the single-thread instruction counts with the
    bench.csv it replaces (the last make bench's),
  - prints the instruction table: per row C, Rust, Rust inlined, their
    ratios to C and the call sites behind each (counted from the DWARF of
    MODULES_DIR/*.ko, built with modules.sh -g, function by function in
    OUT_DIR/insns.txt and insns-inline.txt),
  - prints the contention run's header, table and ratio lines,
  - plots the headline with gnuplot to OUT_DIR/bench.png: instructions/op
    of Rust and of Rust inlined over C's per row (lines at 1.0 and LIMIT),
    and the contention run as ratios to the locked baseline of the same
    boot (baseline_of()); the contention run's ns/op against threads, TCG
    wall-clock and labelled so, to OUT_DIR/bench-tcg.png; prints the paths.

Instruction counts: see INSNS_HEADER below.
"""
import csv
import datetime
import io
import os
import re
import subprocess
import sys

INSNS_HEADER = """\
Instructions of the functions behind each row of make bench's table, per
module, from the DWARF of the .ko files the bench ran.

A function's instructions are those whose addresses DWARF attributes to
it, its inlined callees included; where the compiler inlined the function
itself, its largest inlined copy counts. A row's count is the union over
its functions. Padding (nop, int3) does not count. Calls (x86's call,
arm64's bl and blr) are counted, not followed, on every path (cold ones
too: panics, WARN, lockdep asserts); their targets are listed below ("?":
an indirect call). Out of line in
vmlinux: mutex_lock and friends, and, on the perf kernel, the
rust_helper_* C functions behind Rust's atomics, refcounts and locks (on
the perf-inline kernel, CONFIG_RUST_INLINE_HELPERS=y, they are inlined).
"""

# The functions behind each row, as C names and Rust (demangled) names.
# README's C <-> Rust mapping: each Rust function mirrors the C one.
RG = 'lockless_rust::gadget::'
RR = 'lockless_rust::rmw::'
RD = 'lockless_rust::device::'
# The get, then the put and its per-flavor dispatch. Rust's gadget
# functions are generic over the flavor (a type, F: Flavor): DWARF names
# each copy with its type, <Lockless<RegLock> as Flavor>::put_one,
# put_ptr::<Lockless<RegLock>>; the rows name the copy of their flavor, in
# the registry mode of the row (LOCK unless "+RCU").
C_GET = ['lp_gadget_get', 'lp_gadget_put', 'lp_put_one']
C_PUT = {
    'LOCKED': ['lp_put_locked'],
    'LOCKLESS': ['lp_put_lockless'],
    'WEAK_CMPXCHG': ['lp_put_weak_cmpxchg'],
    'KREF_MUTEX': ['lp_put_kref_mutex', 'kref_put_mutex', 'lp_release_mutex'],
    'KREF_LOCK': ['lp_put_kref_lock', 'kref_put_lock', 'lp_release_lock'],
    'KREF_RWSEM': ['lp_put_kref_rwsem', 'lp_kref_put_rwsem',
                   'lp_release_rwsem'],
}
R_TYPE = {'LOCKED': 'Locked', 'LOCKLESS': 'Lockless',
          'WEAK_CMPXCHG': 'WeakCmpxchg', 'KREF_MUTEX': 'KrefMutex',
          'KREF_LOCK': 'KrefLock', 'KREF_RWSEM': 'KrefRwsem'}
# The flavor's own 1 -> 0 step, a generic function of gadget.rs.
R_PUT = {'WEAK_CMPXCHG': 'put_weak_cmpxchg', 'KREF_MUTEX': 'put_kref_mutex',
         'KREF_LOCK': 'put_kref_lock', 'KREF_RWSEM': 'put_kref_rwsem'}


def rust_type(flavor, rcu=False):
    """The Rust type of FLAVOR in its registry mode, as DWARF names it."""
    if flavor == 'LOCKED':
        return RG + 'Locked'
    return f'{RG}{R_TYPE[flavor]}<{RG}{"RegRcu" if rcu else "RegLock"}>'


def merge_twins(name):
    """The names under which LLVM may have kept NAME's code (see
    Module.function()), most likely first."""
    regs = ('RegLock', 'RegRcu')
    out = [name.replace(RG + a + '>', RG + b + '>')
           for a, b in zip(regs, reversed(regs)) if RG + a + '>' in name]
    for a, b in (('WeakCmpxchg', 'KrefMutex'), ('KrefMutex', 'WeakCmpxchg')):
        if RG + a + '<' in name:
            peer = name.replace(RG + a + '<', RG + b + '<')
            out += [peer] + [peer.replace(RG + r + '>', RG + t + '>')
                             for r, t in zip(regs, reversed(regs))
                             if RG + r + '>' in peer]
    return out


def rust_method(ty, trait, fn):
    return f'<{ty} as {RG}{trait}>::{fn}'


def rust_get_put(flavor):
    """The Rust functions of FLAVOR's get and put (GET_PUT)."""
    ty = rust_type(flavor)
    fns = [rust_method(ty, 'Flavor', 'get'), f'{RG}put_ptr::<{ty}>',
           rust_method(ty, 'Flavor', 'put_one')]
    if flavor in R_PUT:
        fns.append(f'{RG}{R_PUT[flavor]}::<{ty}>')
    return fns


RMW = ['max_cmpxchg', 'max_jbd2', 'max_locked', 'inc_not_zero_cmpxchg',
       'inc_not_zero_try_cmpxchg', 'fetch_inc_cmpxchg']
RT = '<lockless_rust::txn::Txn>::'
TXN = {
    'TXN_START_STOP': (['lp_txn_start', 'lp_txn_stop'],
                       [RT + 'start', RT + 'stop']),
    'TXN_EXTEND': (['lp_txn_extend', 'lp_txn_unextend'],
                   [RT + 'extend', RT + 'unextend']),
}
# What every row runs through: the RUN loop and its dispatch (Rust: the
# copy of the loop for LOCKLESS; every flavor's is the same code).
LOOP = (['lp_run', 'lp_run_one'],
        [RD + 'lp_run', RD + 'lp_run_typed::<' + rust_type('LOCKLESS') + '>',
         RD + 'lp_run_one::<' + rust_type('LOCKLESS') + '>'])


def functions_of(row):
    """(C functions, Rust functions) behind a row label, or None."""
    op, _, flavor = row.partition('/')
    rcu = flavor.endswith('+RCU')
    flavor = flavor.removesuffix('+RCU')
    if op == 'GET_PUT' and flavor in C_PUT:
        return C_GET + C_PUT[flavor], rust_get_put(flavor)
    if op == 'GET_PUT_REFCOUNT':
        return (['lp_gadget_get_refcount', 'lp_gadget_put_refcount'],
                rust_get_put('LOCKLESS'))
    if op == 'LOOKUP_PUT' and flavor in R_TYPE:
        ty = rust_type(flavor)
        return ['lp_gadget_lookup'], [f'<{RG}Gadget<{ty}>>::lookup',
                                      f'{RG}upgrade::<{ty}>']
    if op == 'TRYGET_PUT' and flavor in R_TYPE:
        ty = rust_type(flavor, rcu)
        reg = RG + ('RegRcu' if rcu else 'RegLock')
        rust = [f'{RG}tryget::<{ty}>', f'{RG}tryget_any::<{ty}>',
                rust_method(ty, 'Flavor', 'registry_get')]
        if flavor != 'LOCKED':
            rust += [f'<{reg} as {RG}Registry>::get_unless_zero::<{ty}>',
                     rust_method(ty, 'Counted', 'inc_not_zero')]
        c = ['lp_gadget_tryget']
        return (c + ['lp_gadget_get_unless_zero'] if rcu else c), rust
    if op.lower() in RMW:
        return ['lp_' + op.lower()], [RR + op.lower()]
    if op in TXN:
        return TXN[op]
    return None


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout


# ------------------------------------------------------------------ DWARF

DIE_RE = re.compile(r'^(0x[0-9a-f]+):(\s+)(DW_TAG_\w+|NULL)')
ATTR_RE = re.compile(r'^\s+(DW_AT_\w+)\s+\((.*)$')
RANGE_RE = re.compile(r'\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)(?:\s+"([^"]+)")?')
REF_RE = re.compile(r'^(0x[0-9a-f]+)')
STR_RE = re.compile(r'^"(.*)"\)?$')
PC_RE = re.compile(r'^(0x[0-9a-f]+)(?:\s+"([^"]+)")?\)')


def parse_dies(ko):
    """The DIEs of @ko: {offset: {'tag', 'depth', 'parent', attrs...}}."""
    dies = {}
    stack = []
    cur = None
    attr = None
    for line in run(['llvm-dwarfdump', '--debug-info', ko]).splitlines():
        m = DIE_RE.match(line)
        if m:
            depth = len(m.group(2))
            attr = None
            if m.group(3) == 'NULL':
                cur = None
                continue
            while stack and stack[-1][0] >= depth:
                stack.pop()
            cur = {'tag': m.group(3),
                   'parent': stack[-1][1] if stack else None}
            dies[int(m.group(1), 16)] = cur
            stack.append((depth, int(m.group(1), 16)))
            continue
        if cur is None:
            continue
        m = ATTR_RE.match(line)
        if m:
            attr = m.group(1)
            cur[attr] = m.group(2)
        elif attr and line.strip():
            cur[attr] += '\n' + line.strip()
    return dies


def die_ranges(d):
    """[(lo, hi)] of a concrete DIE in .text, or []."""
    if 'DW_AT_ranges' in d:
        out = []
        for lo, hi, sec in RANGE_RE.findall(d['DW_AT_ranges']):
            if sec in ('', '.text'):
                out.append((int(lo, 16), int(hi, 16)))
        return out
    if 'DW_AT_low_pc' in d and 'DW_AT_high_pc' in d:
        lo = PC_RE.match(d['DW_AT_low_pc'])
        hi = PC_RE.match(d['DW_AT_high_pc'])
        if lo and hi and lo.group(2) in (None, '.text'):
            return [(int(lo.group(1), 16), int(hi.group(1), 16))]
    return []


class Names:
    """Qualified names of DIEs: demangled linkage names, else the scopes."""

    def __init__(self, dies):
        self.dies = dies
        mangled = set()
        for d in dies.values():
            s = STR_RE.match(d.get('DW_AT_linkage_name', ''))
            if s:
                mangled.add(s.group(1))
        mangled = sorted(mangled)
        demangled = run(['llvm-cxxfilt'] + mangled).splitlines() \
            if mangled else []
        self.demangle = dict(zip(mangled, demangled))

    def of(self, off, seen=0):
        d = self.dies.get(off)
        if d is None or seen > 8:
            return None
        for ref in ('DW_AT_abstract_origin', 'DW_AT_specification'):
            if ref in d:
                m = REF_RE.match(d[ref])
                if m:
                    return self.of(int(m.group(1), 16), seen + 1)
        s = STR_RE.match(d.get('DW_AT_linkage_name', ''))
        if s:
            return self.demangle.get(s.group(1), s.group(1))
        s = STR_RE.match(d.get('DW_AT_name', ''))
        if not s:
            return None
        scopes = [s.group(1)]
        p = d['parent']
        while p is not None and self.dies[p]['tag'] != 'DW_TAG_compile_unit':
            n = STR_RE.match(self.dies[p].get('DW_AT_name', ''))
            scopes.append(n.group(1) if n else '?')
            p = self.dies[p]['parent']
        return '::'.join(reversed(scopes))


PREFIXES = ('lock', 'rep', 'repe', 'repne', 'notrack')


def disassemble(ko):
    """{address: (mnemonic, call target or None)} of @ko's .text."""
    insns = {}
    last = None
    out = run(['llvm-objdump', '-d', '-r', '--no-show-raw-insn',
               '--section=.text', ko])
    for line in out.splitlines():
        m = re.match(r'^\s*([0-9a-f]+):\s+(\S+)(.*)$', line)
        if m:
            mnem = m.group(2)
            if mnem in PREFIXES and not m.group(3).strip():
                continue  # a prefix printed alone: part of the next one
            if mnem.startswith(('R_X86_64', 'R_AARCH64')):
                # A relocation line: the target of the call above it.
                tgt = line.split()[-1]
                if last is not None and is_call(insns[last][0]):
                    insns[last] = (insns[last][0],
                                   re.sub(r'[-+]0x[0-9a-f]+$', '', tgt))
                continue
            last = int(m.group(1), 16)
            # A call inside the module needs no relocation: "<sym+0x..>".
            local = re.search(r'<([^>+]+)(\+0x[0-9a-f]+)?>', m.group(3))
            insns[last] = (mnem, local.group(1) if local and
                           is_call(mnem) else None)
    return insns


def is_call(mnem):
    """A call: x86's call (callq), arm64's bl and blr (indirect)."""
    return mnem.startswith('call') or mnem in ('bl', 'blr')


def demangle_calls(insns):
    """@insns with Rust call targets demangled, in one llvm-cxxfilt run."""
    rust = sorted({t for _, t in insns.values() if t and t.startswith('_R')})
    if not rust:
        return insns
    plain = dict(zip(rust, run(['llvm-cxxfilt'] + rust).splitlines()))
    return {a: (mn, plain.get(t, t)) for a, (mn, t) in insns.items()}


def is_padding(mnem):
    return mnem.startswith('nop') or mnem == 'int3'


class Module:
    """Instruction counts of the functions of one .ko."""

    def __init__(self, ko):
        self.insns = demangle_calls(disassemble(ko))
        dies = parse_dies(ko)
        names = Names(dies)
        # name -> [(instance address set, inlined?)]
        self.instances = {}
        for off, d in dies.items():
            if d['tag'] not in ('DW_TAG_subprogram',
                                'DW_TAG_inlined_subroutine'):
                continue
            rng = die_ranges(d)
            if not rng:
                continue
            name = names.of(off)
            if not name:
                continue
            addrs = {a for a, (mn, _) in self.insns.items()
                     if not is_padding(mn)
                     and any(lo <= a < hi for lo, hi in rng)}
            if addrs:
                self.instances.setdefault(name, []).append(
                    (addrs, d['tag'] == 'DW_TAG_inlined_subroutine'))

    def function(self, name):
        """(address set, how) of @name's largest copy, or (None, why)."""
        inst = self.instances.get(name)
        merged = ''
        if not inst:
            # A generic Rust function's copy for one flavor may be missing:
            # LLVM merges copies whose code is identical, and DWARF keeps one
            # name. The candidates: the same flavor in the other registry
            # mode, then the flavor that shares its weak list's lock
            # (WEAK_CMPXCHG and KREF_MUTEX: a Mutex). Their instructions are
            # the same.
            for twin in merge_twins(name):
                if twin in self.instances:
                    inst = self.instances[twin]
                    merged = f', merged into {twin}'
                    break
            else:
                return None, 'not in the DWARF'
        addrs, inlined = max(inst, key=lambda i: len(i[0]))
        if inlined:
            how = f'inlined, largest of {len(inst)} copies' \
                if len(inst) > 1 else 'inlined'
        else:
            how = 'out of line'
        return addrs, how + merged

    def calls(self, addrs):
        return sorted(self.insns[a][1] or '?' for a in addrs
                      if is_call(self.insns[a][0]))

    def count(self, names, legend):
        """(instructions, calls) of @names together; details to @legend."""
        union = set()
        for n in names:
            addrs, how = self.function(n)
            if addrs is None:
                legend.append(f'      {n}: {how}')
                continue
            calls = self.calls(addrs)
            legend.append(f'      {n}: {len(addrs)} instructions, '
                          f'{len(calls)} calls ({how})'
                          + (': ' + ', '.join(calls) if calls else ''))
            union |= addrs
        if not union:
            return None
        return len(union), len(self.calls(union))


def insn_counts(mod_dir, out_dir, rows, tag=''):
    """{row: ((c insns, calls), (rust insns, calls))}, notes; writes
    insns{tag}.csv and insns{tag}.txt."""
    kos = [os.path.join(mod_dir, k) for k in
           ('lockless_c.ko', 'lockless_rust.ko')]
    try:
        mods = [Module(k) for k in kos]
    except (OSError, subprocess.CalledProcessError) as e:
        return {}, [f'instruction counts unavailable: {e}']
    if not any(m.instances for m in mods):
        return {}, ['instruction counts unavailable: the modules carry no '
                    'DWARF (build them with scripts/modules.sh KIND -g)']
    legend = []
    counts = {}
    todo = [(r, functions_of(r)) for r in rows]
    todo.append(('RUN loop (every row)', LOOP))
    for row, fns in todo:
        if fns is None:
            continue
        legend.append(row)
        got = []
        for name, mod, names in zip(('C', 'Rust'), mods, fns):
            legend.append(f'  {name}:')
            got.append(mod.count(names, legend))
        counts[row] = tuple(got)
    with open(os.path.join(out_dir, f'insns{tag}.csv'), 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['row', 'c_insns', 'c_calls', 'rust_insns', 'rust_calls',
                    'c_functions', 'rust_functions'])
        for row, fns in todo:
            if row in counts:
                c, r = counts[row]
                w.writerow([row, c[0] if c else '', c[1] if c else '',
                            r[0] if r else '', r[1] if r else '',
                            ' '.join(fns[0]), ' '.join(fns[1])])
    with open(os.path.join(out_dir, f'insns{tag}.txt'), 'w') as f:
        f.write(INSNS_HEADER + f'\nModules: {mod_dir}\n\n'
                + '\n'.join(legend) + '\n')
    return counts, []


# ------------------------------------------------------------------ report

def sections(lines):
    """{'head': [...], 'table': [...], ...} from the guest's output."""
    out = {'head': []}
    cur = 'head'
    for line in lines:
        m = re.match(r'^# === (\w+) ===$', line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif line.startswith('# '):
            out.setdefault(cur, []).append(line[2:])
        elif line == '#':
            out.setdefault(cur, []).append('')
    return out


def gnuplot(out_dir, name, text):
    """Run gnuplot script @text, kept as OUT_DIR/NAME.gp."""
    script = os.path.join(out_dir, name + '.gp')
    term = subprocess.run(['gnuplot', '-e', 'set terminal pngcairo'],
                          capture_output=True)
    if term.returncode != 0:
        # No cairo: the libgd terminal, which may draw no dashes; the key
        # still says which line is which.
        text = text.replace('set terminal pngcairo', 'set terminal png')
    with open(script, 'w') as f:
        f.write(text)
    subprocess.run(['gnuplot', script], check=True)


def plot_tcg(out_dir, rows, title):
    """bench-tcg.png: TCG wall-clock ns/op against threads, a panel per
    group of rows: the shape of each curve, not a machine's times."""
    groups = [
        ('GET_PUT, all threads on one gadget',
         lambda r: r.startswith('GET_PUT/')),
        ('LOOKUP_PUT, one child of one parent',
         lambda r: r.startswith('LOOKUP_PUT/')),
        ('TRYGET_PUT, one gadget by id',
         lambda r: r.startswith('TRYGET_PUT/')),
        ('RMW ops, one shared variable',
         lambda r: '/' not in r),
        ('ATOMIC_FLOOR: a line per thread, one shared line; EMPTY',
         lambda r: r.startswith(('ATOMIC_FLOOR/', 'EMPTY/'))),
        ('TXN_START_STOP, TXN_EXTEND: one transaction, jbd2 before/after',
         lambda r: r.startswith('TXN_')),
    ]
    threads = sorted({int(r['threads']) for r in rows})
    labels = labels_of(rows)
    png = os.path.join(out_dir, 'bench-tcg.png')
    gp = [
        'set terminal pngcairo noenhanced size 1800,1900 font ",10"',
        f'set output "{png}"',
        f'set multiplot layout 3,2 title "{title}"',
        'set logscale xy 2',
        'set xtics (' + ', '.join(f'"{t}" {t}' for t in threads) + ')',
        f'set xrange [{threads[0] * 0.9}:{threads[-1] * 1.1}]',
        'set xlabel "threads (one per vCPU)"',
        'set ylabel "ns/op, TCG wall-clock (median)"',
        'set ytics format "%g"',
        'set key outside right top font ",8"',
        'set grid',
    ]
    data = []
    for title_, pick in groups:
        plots = []
        for i, label in enumerate(x for x in labels if pick(x)):
            for mod, dt in (('c', 1), ('rust', 2)):
                pts = [(int(r['threads']), float(r['ns_op_median']))
                       for r in rows if r['row'] == label
                       and r['module'] == mod and r['sane'] == '1']
                if not pts:
                    continue
                name = f'd{len(data)}'
                data.append(f'${name} << EOD')
                data += [f'{t} {ns}' for t, ns in sorted(pts)]
                data.append('EOD')
                key = label + (' C' if mod == 'c' else ' Rust')
                plots.append(f'${name} using 1:2 with linespoints lw 2 '
                             f'dt {dt} lc rgb "{COLORS[i % len(COLORS)]}" '
                             f'pt {i % 8 + 1} title "{key}"')
        gp.append(f'set title "{title_}"')
        # An empty panel: gnuplot refuses "plot 1/0" (no point defined).
        gp.append('plot ' + ', \\\n     '.join(plots) if plots else
                  'plot 1 with lines lc rgb "#ffffff" title "no row"')
    gp.append('unset multiplot')
    gnuplot(out_dir, 'bench-tcg', '\n'.join(data + gp) + '\n')
    return png


# One color per row of a panel (a panel has at most 8 rows).
COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
          '#8c564b', '#e377c2', '#17becf']


def baseline_of(label, labels):
    """The locked row a contention row is measured against, or None:
    the flavor LOCKED of GET_PUT and TRYGET_PUT, the same flavor's
    LOCK-mode row for an RCU-registry TRYGET_PUT (FLAVOR+RCU), MAX_LOCKED
    for the lock-free MAX loops, the transaction spinlock's flavor (jbd2
    before the patch) for TXN_ATOMIC."""
    op, _, flavor = label.partition('/')
    if op == 'TRYGET_PUT' and flavor.endswith('+RCU'):
        base = op + '/' + flavor[:-len('+RCU')]
    elif op in ('GET_PUT', 'TRYGET_PUT') and flavor != 'LOCKED':
        base = op + '/LOCKED'
    elif op in ('MAX_CMPXCHG', 'MAX_JBD2'):
        base = 'MAX_LOCKED'
    elif op.startswith('TXN_') and flavor == 'TXN_ATOMIC':
        base = next((x for x in labels if x.startswith(op + '/')
                     and x != label), None)
    else:
        base = None
    return base if base in labels else None


def contention_ratios(rows):
    """{(label, module): [(threads, ns/op over the baseline's)]} of one
    boot's rows, each against its locked baseline at the same thread
    count and in the same module."""
    labels = labels_of(rows)
    med = {(r['row'], r['module'], int(r['threads'])): float(r['ns_op_median'])
           for r in rows if r['sane'] == '1'}
    out = {}
    for label in labels:
        base = baseline_of(label, labels)
        if not base:
            continue
        for mod in ('c', 'rust'):
            pts = [(t, v / med[(base, m, t)]) for (l, m, t), v in sorted(med.items())
                   if l == label and m == mod and med.get((base, m, t))]
            if pts:
                out[(label, mod)] = pts
    return out


def plot(out_dir, runs, title):
    """bench.png, the headline: instructions/op of Rust and of Rust with
    its helpers inlined over C's, per row (the goal: inlined/C at most
    LIMIT), and the contention run as ratios to the locked baseline of
    the same boot (below 1: faster than the lock). Returns its path."""
    ic, inl, tcg = runs.get('icount'), runs.get('inline'), runs['tcg']
    png = os.path.join(out_dir, 'bench.png')
    data = ['$ratios << EOD']
    n = 0
    for label in labels_of(ic['rows']) if ic else []:
        c, r = figure(ic, 'c', label), figure(ic, 'rust', label)
        ri = figure(inl, 'rust', label)
        if not c:
            continue
        data.append(f'"{label}" {r / c if r else "?"} '
                    f'{ri / c if ri else "?"}')
        n += 1
    data.append('EOD')
    gp = [
        'set terminal pngcairo noenhanced size 1800,1700 font ",11"',
        f'set output "{png}"',
        f'set multiplot title "{title}"',
        'set datafile missing "?"',
        'set grid ytics',
        # Panel 1: instructions per op over C's, per row.
        'set size 1,0.52', 'set origin 0,0.46',
        'set title "Instructions per op over C\'s, one thread (QEMU -icount: exact counts)'
        + ('' if inl else '; no Rust-inlined run') + '"',
        'set style data histograms',
        'set style histogram clustered gap 1',
        'set style fill solid 0.85 border -1',
        'set boxwidth 0.9',
        'set xtics rotate by -40 scale 0 font ",9"',
        'set ylabel "insns/op over C"',
        f'set xrange [-0.6:{max(n, 1) - 0.4}]',
        'set yrange [0:*]',
        'set key top left',
        (f'plot $ratios using 2:xtic(1) title "Rust / C" lc rgb "#d62728", '
         f'"" using 3 title "Rust, helpers inlined / C" lc rgb "#ff7f0e", '
         f'1.0 with lines lw 2 lc rgb "#000000" title "1.0: as many as C", '
         f'{LIMIT} with lines lw 2 dt 2 lc rgb "#2ca02c" title "{LIMIT}: the goal for inlined"'
         if n else
         'set label 1 "no instruction counts in this run (BENCH_QUICK: the '
         'TCG run only)" at graph 0.5,0.5 center\nset yrange [0:2]\n'
         'plot 1.0 with lines lw 2 lc rgb "#000000" title "1.0"\nunset label 1'),
        'unset style', 'set style data linespoints', 'unset xrange', 'unset yrange',
        'set xtics norotate scale 1 font ",10"',
    ]
    ratios = contention_ratios(tcg['rows'])
    threads = sorted({int(r['threads']) for r in tcg['rows']})
    panels = [('GET_PUT: flavors over LOCKED', ('GET_PUT/',)),
              ('TRYGET_PUT: over LOCKED; +RCU: over its LOCK row', ('TRYGET_PUT/',)),
              ('MAX, TXN_ATOMIC over their locks', ('MAX_', 'TXN_'))]
    for i, (ptitle, prefixes) in enumerate(panels):
        gp += ['set size 0.333,0.45', f'set origin {0.333 * i},0',
               f'set title "Contention, one boot: {ptitle}\\nx: threads (one per vCPU); C solid, Rust dashed"',
               'set logscale x 2', 'set logscale y 2',
               'set xtics (' + ', '.join(f'"{t}" {t}' for t in threads) + ')',
               f'set xrange [{threads[0] * 0.9}:{threads[-1] * 1.1}]',
               'unset xlabel',
               'set ylabel "ns/op over the locked baseline\'s"',
               'set ytics format "%g"', 'set key below font ",9"']
        plots = []
        mine = [k for k in ratios if k[0].startswith(prefixes)]
        names = list(dict.fromkeys(k[0] for k in mine))
        for (label, mod) in mine:
            j = names.index(label)
            name = f'r{len(data)}'
            data.append(f'${name} << EOD')
            data += [f'{t} {v}' for t, v in ratios[(label, mod)]]
            data.append('EOD')
            plots.append(f'${name} using 1:2 with linespoints lw 2 '
                         f'dt {1 if mod == "c" else 2} lc rgb "{COLORS[j % len(COLORS)]}" '
                         f'pt {j % 8 + 1} title "{label} {"C" if mod == "c" else "Rust"}"')
        plots.append('1.0 with lines lw 2 lc rgb "#000000" title "1.0: the lock"')
        gp.append('plot ' + ', \\\n     '.join(plots))
        gp += ['unset logscale x', 'unset logscale y']
    gp.append('unset multiplot')
    gnuplot(out_dir, 'bench', '\n'.join(data + gp) + '\n')
    return png


def read_run(spec):
    """NAME=RUN_DIR,MODULES_DIR,KERNEL -> (NAME, run dict), or exit."""
    name, _, rest = spec.partition('=')
    run_dir, mod_dir, kernel = rest.split(',', 2)
    path = os.path.join(run_dir, 'ktap.log')
    with open(path, errors='replace') as f:
        sec = sections(l.rstrip('\r\n') for l in f)
    if not sec.get('csv'):
        print(f'no CSV in {path}: the bench did not finish (see console.log '
              'there)')
        sys.exit(1)
    rows = list(csv.DictReader(io.StringIO('\n'.join(sec['csv']) + '\n')))
    date = datetime.datetime.fromtimestamp(os.path.getmtime(path))
    return name, {'dir': run_dir, 'mods': mod_dir, 'kernel': kernel,
                  'sec': sec, 'rows': rows,
                  'date': date.strftime('%Y-%m-%d %H:%M')}


def labels_of(rows):
    out = []
    for r in rows:
        if r['row'] not in out:
            out.append(r['row'])
    return out


def figure(run, mod, label):
    """A single-thread cell's figure: the fewest insns/op (icount), or None."""
    for r in run['rows'] if run else []:
        if (r['row'] == label and r['module'] == mod and r['threads'] == '1'
                and r['sane'] == '1'):
            return float(r['ns_op_min'])
    return None


def ratio(a, b):
    return f'{a / b:.2f}' if a and b else 'n/a'


def num(x):
    return f'{x:.1f}' if x is not None else 'n/a'


def previous_icount(csv_path):
    """{(run, module, row): insns/op} of the last make bench's bench.csv."""
    old = {}
    try:
        with open(csv_path) as f:
            for r in csv.DictReader(f):
                if r.get('clock') == 'icount' and r['sane'] == '1':
                    old[(r['run'], r['module'], r['row'])] = \
                        float(r['ns_op_min'])
        date = datetime.datetime.fromtimestamp(os.path.getmtime(csv_path))
        return old, date.strftime('%Y-%m-%d %H:%M')
    except (OSError, KeyError, ValueError):
        return {}, None


LIMIT = 1.05  # the goal for Rust inlined / C


def print_icount(runs, out_dir):
    """The instruction table: C, Rust, Rust inlined, ratios, call sites."""
    ic, inl = runs['icount'], runs.get('inline')
    labels = labels_of(ic['rows'])
    static, notes = insn_counts(ic['mods'], out_dir, labels)
    static_inl = {}
    if inl:
        static_inl, more = insn_counts(inl['mods'], out_dir, labels,
                                       '-inline')
        notes += more
    print('Instructions per op, one thread: QEMU -icount shift=0 (the guest '
          'clock counts instructions), the fewest of each cell\'s '
          f'repetitions; {ic["kernel"]}'
          + (f'; Rust inlined: {inl["kernel"]}' if inl else ''))
    print('calls: call sites in the functions behind the row (static, from '
          'DWARF; cold paths too), C / Rust / Rust inlined')
    head = (f'{"row":<28} {"C":>8} {"Rust":>8} {"Rust inl":>8} | '
            f'{"Rust/C":>6} {"inl/C":>6} | calls')
    print(head)
    print('-' * len(head))
    above = []
    for label in labels:
        c, r = figure(ic, 'c', label), figure(ic, 'rust', label)
        ri = figure(inl, 'rust', label)
        sc = static.get(label, (None, None))
        si = static_inl.get(label, (None, None))
        calls = '/'.join(str(x[1]) if x else '-'
                         for x in (sc[0], sc[1], si[1]))
        flag = ''
        if ri and c and ri / c > LIMIT:
            flag = ' >'
            above.append(label)
        print(f'{label:<28} {num(c):>8} {num(r):>8} {num(ri):>8} | '
              f'{ratio(r, c):>6} {ratio(ri, c):>6} | '
              f'{calls if label in static else "-"}{flag}')
    loop = static.get('RUN loop (every row)')
    if loop and all(loop):
        print(f'(the RUN loop itself, lp_run + lp_run_one, Rust lp_run_typed too: {loop[0][0]} / '
              f'{loop[1][0]} instructions in C / Rust, static)')
    if above:
        print(f'{len(above)} rows above Rust inlined / C = {LIMIT} (">"): '
              + ', '.join(above))
    spread = [(float(r['ns_op_max']) / float(r['ns_op_min']) - 1, r['row'],
               r['module'], name)
              for name, run in (('icount', ic), ('inline', inl)) if run
              for r in run['rows'] if r['sane'] == '1']
    if spread:
        worst = max(spread)
        print('repetitions of a cell: the most is at most '
              f'{100 * worst[0]:.2f} % above the fewest ({worst[1]}, '
              f'{worst[2]}, {worst[3]} run)')
    if inl:
        same = diff = 0
        worst = (0, None)
        for label in labels:
            a, b = figure(ic, 'c', label), figure(inl, 'c', label)
            if a and b:
                if a == b:
                    same += 1
                else:
                    diff += 1
                    worst = max(worst, (abs(b / a - 1), label))
        print('C on the perf-inline kernel (the option is Rust\'s only): '
              f'the same on {same} of {same + diff} rows'
              + (f', at most {100 * worst[0]:.2f} % apart ({worst[1]})'
                 if diff else ''))
    for n in notes:
        print(n)


def compare_previous(runs, old, old_date):
    """Each single-thread cell against the last make bench's."""
    same = n = 0
    worst = 0.0
    for name in ('icount', 'inline'):
        for r in runs.get(name, {}).get('rows', []):
            key = (name, r['module'], r['row'])
            if key in old and r['sane'] == '1':
                n += 1
                new = float(r['ns_op_min'])
                same += new == old[key]
                worst = max(worst, abs(new / old[key] - 1))
    if n:
        print(f'against the previous make bench ({old_date}): {same} of {n} '
              f'single-thread cells the same, all within {100 * worst:.2f} %')


def main():
    out_dir, host_cpus, host_repo = sys.argv[1:4]
    runs = dict(read_run(spec) for spec in sys.argv[4:])
    first = next(iter(runs.values()))

    def shown(path):
        return os.path.join(host_repo, os.path.relpath(path, os.getcwd()))

    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, 'bench.csv')
    old, old_date = previous_icount(csv_path)
    fields = ['run'] + list(first['rows'][0].keys())
    with open(csv_path, 'w', newline='') as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for name, run in runs.items():
            for r in run['rows']:
                w.writerow(dict(r, run=name))

    print()
    print(f'make bench, {first["date"]}, on {host_cpus} host CPUs')
    if 'icount' in runs:
        print()
        print_icount(runs, out_dir)
        compare_previous(runs, old, old_date)
    plots = print_tcg(runs, out_dir, host_cpus, shown) \
        if 'tcg' in runs else []
    print(f'CSV:  {shown(csv_path)}')
    for line in plots:
        print(line)
    if 'icount' in runs:
        print('instruction counts, function by function: '
              f'{shown(os.path.join(out_dir, "insns.txt"))}'
              + (' and insns-inline.txt' if 'inline' in runs else ''))
    for name, run in runs.items():
        summary = [h for h in run['sec'].get('end', []) if 'not sane' in h]
        if summary:
            print(f'{name}: {summary[-1]}')
    return 0


def print_tcg(runs, out_dir, host_cpus, shown):
    """Print the contention run's header, table and ratios; plot. Return
    the lines that name the plots."""
    tcg = runs['tcg']
    accel = os.environ.get('ACCEL', 'tcg')
    smp = os.environ.get('SMP', '4')
    print()
    print(f'Contention: wall clock, {accel.upper()} multi-threaded, {smp} '
          f'vCPUs on {host_cpus} host CPUs; {tcg["kernel"]}')
    for h in tcg['sec']['head']:
        if h.startswith(('lockless_bench:', '/dev/', 'BENCH_QUICK')) \
                or 'repetitions' in h:
            print(f'  guest: {h}')
    if os.environ.get('BENCH_QUICK', '0') != '0':
        print('  BENCH_QUICK: a smoke run with tiny counts: every cell gave a '
              'sane number, and the numbers mean nothing more.')
    if accel == 'tcg':
        print('  TCG emulates every atomic and does not model cache-line '
              'contention: absolute times are inflated and only ratios '
              'within this one boot are claims.')
    if int(smp) > int(host_cpus):
        print(f'  {smp} vCPUs share {host_cpus} host CPUs: cells with more '
              f'than {host_cpus} threads also measure the host time-sharing '
              'the vCPUs.')
    print()
    print('\n'.join(tcg['sec'].get('table', [])))
    print()
    print('\n'.join(tcg['sec'].get('ratios', [])))
    print()
    title = (f'lockless-parity make bench {tcg["date"]}: '
             + (f'{runs["icount"]["kernel"]}; ' if 'icount' in runs else '')
             + f'contention: {tcg["kernel"]}, {accel.upper()}, {smp} vCPUs, '
             'ns/op over the locked baseline of the same boot')
    png = plot(out_dir, runs, title)
    title = (f'{accel.upper()} wall-clock, not a machine\'s: make bench '
             f'{tcg["date"]}, {tcg["kernel"]}, {smp} vCPUs on {host_cpus} '
             'host CPUs. C solid, Rust dashed')
    tcg_png = plot_tcg(out_dir, tcg['rows'], title)
    return [f'plot: {shown(png)} (ratios: insns/op over C, contention over '
            'the locked baseline)',
            f'      {shown(tcg_png)} ({accel.upper()} wall-clock ns/op, '
            'not a machine\'s)']


if __name__ == '__main__':
    sys.exit(main())
