#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""study.py: `make study`'s page: each lockless pattern, C and Rust side by side.

    study.py OUT_DIR              write OUT_DIR/index.html and index.md
    study.py --check DOM_FILE     judge the DOM chromium rendered from it
                                  (make study-check, scripts/study_check.sh)

One section per pattern of scripts/patterns.py (a refcount flavor's put, a
cmpxchg loop, a jbd2 transaction step): the C function and the Rust function
next to each other, extracted from c-module/ and rust-module/ with the
comment above each and syntax highlighted by pygments (helpers they call
folded below them); the "C API" / "Rust API" columns of the demo rows that
exercise it, each checked against the calls (patterns.py); the APIs each
side calls; instructions per op from the last `make bench`
(build/bench/bench.csv: C, Rust, Rust with helpers inlined) and, if it
ran, `make bench ARCH=arm64` (build/bench/arm64-lse/ and arm64-llsc/);
the litmus
tests whose Code: section names its functions, with the result each
expects and what the last `make litmus` (build/litmus/) said; the mutants
whose diff touches its functions; and the Rust-for-Linux gaps it needed
(kernel-config/patches/ whose APIs it calls, and the abstractions
rust-module/ writes for itself).

A static page: inline CSS, no JavaScript, folded parts are <details>.
Runs inside the toolchain root (python3 and python3-pygments; tools.env).
"""

import csv
import datetime
import html
import os
import re
import sys
from html.parser import HTMLParser

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import litmus_code as lc  # noqa: E402
import patterns as pt  # noqa: E402
from bench_report import LIMIT  # noqa: E402  the goal for Rust inlined / C

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ------------------------------------------------------------ inputs


# make bench ARCH=arm64's instruction tables, beside x86's build/bench/:
# (subdirectory of build/bench/, what the study calls it).
ARM64_BENCH = (('arm64-lse', 'arm64, -cpu max (LSE atomics)'),
               ('arm64-llsc', 'arm64, -cpu cortex-a57 (LL/SC)'))


def bench_data(repo, sub=''):
    """({(run, module, label): insns/op}, {label: (c static, rust static)},
    date) of the last make bench (in build/bench/SUB), or None."""
    path = os.path.join(repo, 'build/bench', sub, 'bench.csv')
    fig = {}
    try:
        with open(path) as f:
            for r in csv.DictReader(f):
                if r.get('clock') == 'icount' and r.get('threads') == '1' \
                        and r.get('sane') == '1':
                    fig[(r['run'], r['module'], r['row'])] = float(r['ns_op_min'])
        date = datetime.datetime.fromtimestamp(os.path.getmtime(path))
    except (OSError, KeyError, ValueError):
        return None
    if not fig:
        return None
    static = {}
    for tag in ('', '-inline'):
        try:
            with open(os.path.join(repo, 'build/bench', sub, 'insns%s.csv' % tag)) as f:
                for r in csv.DictReader(f):
                    static.setdefault(r['row'], {})[tag or 'perf'] = (r['c_insns'], r['rust_insns'])
        except (OSError, KeyError):
            pass
    return fig, static, date.strftime('%Y-%m-%d %H:%M')


def bench_rows(p, bench):
    """[(label, C, Rust, Rust inlined, static)] of pattern P's bench rows."""
    if not bench:
        return []
    fig, static, _ = bench
    labels = []
    for (run, mod, label) in fig:
        if label not in labels and any(label == b or (b.endswith('/') and label.startswith(b))
                                       for b in p.bench):
            labels.append(label)
    order = {b: i for i, b in enumerate(p.bench)}
    labels.sort(key=lambda l: (min(order.get(b, 99) for b in p.bench
                                   if l == b or (b.endswith('/') and l.startswith(b))), l))
    return [(l, fig.get(('icount', 'c', l)), fig.get(('icount', 'rust', l)),
             fig.get(('inline', 'rust', l)), static.get(l, {})) for l in labels]


def litmus_tests(repo):
    """{test: {'code': {(file, func)}, 'expected', 'observed', 'claim',
    'twins': [test]}} of shared-tests/litmus/."""
    d = os.path.join(repo, 'shared-tests/litmus')
    tests = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith('.litmus'):
            continue
        name = fn[:-len('.litmus')]
        path = os.path.join(d, fn)
        with open(path, encoding='utf-8') as f:
            text = f.read()
        m = re.search(r'^[( ]\* Result: (.*)$', text, re.M)
        expected = m.group(1).strip() if m else '?'
        # The claim: the header's first paragraph after the Result: line.
        head = text.split('*)', 1)[0]
        paras = [re.sub(r'\s+', ' ', re.sub(r'^\s*\*\s?', '', p, flags=re.M)).strip()
                 for p in re.split(r'\n\s*\*\s*\n', head)]
        claim = next((p for p in paras[1:] if p and not p.startswith(('Result:', 'Code:'))), '')
        code = {(e[1], e[2].rsplit('::', 1)[-1]) for e in lc.parse_code(path) if e[0] != '?'}
        tests[name] = {'code': code, 'expected': expected, 'claim': claim,
                       'observed': observed(repo, name), 'twins': []}
    for name in tests:
        base = name.split('+', 1)[0]
        if '+' in name and base in tests:
            tests[base]['twins'].append(name)
    return tests


def observed(repo, name):
    """What herd7 said in the last make litmus (build/litmus/), as
    litmus.sh judges it, or None."""
    try:
        with open(os.path.join(repo, 'build/litmus/%s.litmus.out' % name), errors='replace') as f:
            out = f.read()
    except OSError:
        return None
    m = re.search(r'^Observation \S+ (\w+) (\d+) (\d+)', out, re.M)
    if not m:
        return 'no result'
    obs = 'DEADLOCK' if m.group(1) == 'Never' and m.group(2) == '0' and m.group(3) == '0' \
        else m.group(1)
    if re.search(r'^Flag data-race$', out, re.M):
        obs += ' DATARACE'
    return obs


def function_spans(src, path):
    """[(start, end, name)] of every function defined in PATH."""
    bare = src.bare[path]
    names = []
    if path.endswith('.c'):
        names = [n for n, p in src.c_funcs.items() if p == path]
    else:
        names = [n for n, p in src.r_free.items() if p == path] + \
            ['%s::%s' % (t, n) for (t, n), p in src.r_methods.items() if p == path]
    out = []
    for n in names:
        span, err = lc.find_definition(path, bare, n)
        if span:
            out.append((span[0], span[2], n))
    return out


def mutants(repo, src):
    """[{'name', 'title', 'pattern', 'tests', 'touches': [(file, func)],
    'kpatch': [patch file names]}] of shared-tests/mutants/."""
    d = os.path.join(repo, 'shared-tests/mutants')
    out = []
    for fn in sorted(os.listdir(d)):
        if not fn.endswith('.patch'):
            continue
        with open(os.path.join(d, fn), encoding='utf-8') as f:
            text = f.read()
        head = text.split('\ndiff --git', 1)[0]
        lines = head.split('\n')
        title = lines[0].strip()
        m = re.search(r'^Pattern: (.*?)(?:\n\n|\nTests:|\Z)', head, re.M | re.S)
        pattern = re.sub(r'\s+', ' ', m.group(1)).strip() if m else ''
        m = re.search(r'^Tests: (.*)$', head, re.M)
        tests = m.group(1).strip() if m else ''
        touches, kpatch = [], []
        for fm in re.finditer(r'^\+\+\+ b/(\S+)\n(.*?)(?=^diff --git|\Z)', text, re.M | re.S):
            path, diff = fm.group(1), fm.group(2)
            if path.startswith('kernel-config/patches/'):
                kpatch.append(os.path.basename(path))
                continue
            if path not in src.text:
                continue
            spans = function_spans(src, path)
            for hunk in re.split(r'^@@[^\n]*\n', diff, flags=re.M)[1:]:
                off = hunk_offset(src.text[path], hunk)
                if off is None:
                    continue
                for s, e, n in spans:
                    if s <= off <= e and (path, n) not in touches:
                        touches.append((path, n))
        out.append({'name': fn[:-len('.patch')], 'title': title, 'pattern': pattern,
                    'tests': tests, 'touches': touches, 'kpatch': kpatch})
    return out


def hunk_offset(text, hunk):
    """Where in TEXT (the current source) the hunk's first change is, or
    None: its old side is looked up whole, then its first changed line."""
    old, first = [], None
    for line in hunk.split('\n'):
        if line.startswith((' ', '-')) or line == '':
            if line.startswith('-') and first is None:
                first = len(old)
            old.append(line[1:])
        elif line.startswith('+') and first is None:
            first = len(old)
    if first is None:
        return None
    block = '\n'.join(old).rstrip('\n')
    i = text.find(block)
    if i >= 0:
        return i + len('\n'.join(old[:first])) + (1 if first else 0)
    # The file moved on since the mutant was written: its first changed
    # (or, for an addition, preceding) line, if the file has it once.
    probe = old[first] if first < len(old) and old[first].strip() else \
        (old[first - 1] if first else '')
    if probe.strip() and text.count(probe) == 1:
        return text.find(probe)
    return None


def kernel_patches(repo, src):
    """[{'file', 'subject', 'apis', 'kind': 'Refcount'|'Arc'|'sync'|'helpers',
    'users': own files that name it}] of kernel-config/patches/."""
    d = os.path.join(repo, 'kernel-config/patches')
    out = []
    for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not fn.endswith('.patch'):
            continue
        with open(os.path.join(d, fn), encoding='utf-8') as f:
            text = f.read()
        m = re.search(r'^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n [^\n]*)*)', text, re.M)
        subject = re.sub(r'\s+', ' ', m.group(1)).strip() if m else fn
        files = re.findall(r'^\+\+\+ b/(\S+)', text, re.M)
        kind = 'Refcount' if any(f.endswith('refcount.rs') for f in files) else \
            'Arc' if any(f.endswith('arc.rs') for f in files) else \
            'sync' if any(f.startswith(('rust/kernel/sync/lock', 'rust/kernel/sync/condvar',
                                        'rust/kernel/task')) for f in files) else 'helpers'
        apis = sorted(set(re.findall(r'^\+\s+pub (?:unsafe )?fn (\w+)', text, re.M)))
        users = [p for p in src.text if p.endswith('.rs') and fn in src.text[p]]
        out.append({'file': fn, 'subject': subject, 'apis': apis, 'kind': kind,
                    'users': users})
    return out


# Abstractions the module writes for itself, shown as gaps: none since the
# rw locks, the wait-queue entry and fatal_signal_pending() became kernel
# patches (0013-0017); a file listed here counts again.
OWN_FILES = ()


def own_abstractions(src):
    """{file: (first sentence of its //! doc, types it defines, free fns)}."""
    out = {}
    for path in OWN_FILES:
        text = src.text.get(path)
        if text is None:
            continue
        doc = ' '.join(l[3:].strip() for l in text.split('\n') if l.startswith('//!'))
        first = re.split(r'(?<=\.)\s', doc, maxsplit=1)[0] if doc else path
        types = set(re.findall(r'^pub(?:\(crate\))? struct (\w+)', text, re.M))
        fns = {n for n, p in src.r_free.items() if p == path}
        methods = {n for (t, n), p in src.r_methods.items() if p == path and t in types}
        out[path] = (first, types, fns, methods)
    return out


def gaps_of(p, src, kpatches, own):
    """[(what, why)] of the Rust-for-Linux gaps pattern P needed."""
    fs = p.everything('rust')
    calls = [c for f in fs for c in pt.calls_rust(f.body)]
    out = []
    used_own = []
    for path, (first, types, fns, methods) in own.items():
        decl = set()
        for t in types:
            decl |= src.declared_as(t)
        # A call of one of its types' methods on a receiver declared with
        # one of its types, a call of one of its functions, or a type named.
        if any((k == 'method' and q in decl and n in methods) or (k == 'fn' and n in fns)
               for k, n, q, a, _ in calls) \
                or any(re.search(r'\b(%s)\b' % '|'.join(types), f.body) for f in fs if types):
            used_own.append(path)
    for kp in kpatches:
        hit = []
        for k, n, q, a, _ in calls:
            if n not in kp['apis']:
                continue
            if kp['kind'] == 'Arc' and k == 'path' and q.split('::')[-1] == 'Arc':
                hit.append('Arc::%s' % n)
            elif kp['kind'] == 'Refcount' and k == 'method' and \
                    (n != 'read' or q in src.rc):
                hit.append('Refcount::%s' % n)
            elif kp['kind'] == 'sync' and k == 'method' and \
                    (n not in ('read', 'write', 'new') or q in src.rw):
                hit.append(n)
        if not hit and any(u in used_own for u in kp['users']):
            hit = ['C helpers used by %s' % (', '.join(
                os.path.basename(u) for u in kp['users'] if u in used_own))]
        if hit:
            out.append(('kernel-config/patches/' + kp['file'],
                        '%s: %s' % (kp['subject'], ', '.join(dict.fromkeys(hit)))))
    for path in used_own:
        out.append((path, own[path][0]))
    return out

# ------------------------------------------------------------ rendering


CSS = """
body { font-family: "DejaVu Sans", sans-serif; margin: 0 1.5em 3em; color: #1a1a1a;
       background: #fff; font-size: 15px; line-height: 1.4; }
h1 { font-size: 1.7em; margin: .6em 0 .2em; }
h2.group { font-size: 1.35em; border-bottom: 3px solid #444; margin-top: 1.8em; }
section.pattern { border: 1px solid #ccc; border-radius: 6px; margin: 1.2em 0;
                  padding: .4em 1em 1em; background: #fcfcfc; }
section.pattern h3 { font-size: 1.2em; margin: .4em 0 .1em; }
p.what { margin: 0 0 .5em; color: #333; }
.panes { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; }
.pane { min-width: 0; }
.pane h4 { margin: .3em 0; font-size: 1em; }
.pane.c h4 { color: #1f4e8c; } .pane.rust h4 { color: #a3420e; }
.code { border: 1px solid #ddd; border-radius: 4px; margin: .3em 0 .6em;
        background: #f8f8f8; overflow-x: auto; }
.code .where { font: 12px "DejaVu Sans Mono", monospace; color: #555;
               background: #eee; padding: 2px 6px; border-bottom: 1px solid #ddd; }
.code pre { margin: 0; padding: 4px 6px; font: 12.5px/1.35 "DejaVu Sans Mono", monospace; }
details > summary { cursor: pointer; color: #333; font-size: .92em; margin: .2em 0; }
table { border-collapse: collapse; margin: .3em 0 .6em; font-size: .92em; }
th, td { border: 1px solid #ccc; padding: 2px 7px; text-align: left; vertical-align: top; }
th { background: #eee; }
td.num { text-align: right; font-family: "DejaVu Sans Mono", monospace; }
.ok { color: #11691b; font-weight: bold; } .bad { color: #b00020; font-weight: bold; }
.warn { color: #8a5a00; font-weight: bold; }
code, .api { font-family: "DejaVu Sans Mono", monospace; font-size: .92em; }
.apis { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; }
.apis div { font-family: "DejaVu Sans Mono", monospace; font-size: .85em; color: #333; }
.facts h4 { margin: .6em 0 .1em; font-size: 1em; }
.facts ul { margin: .1em 0; padding-left: 1.3em; }
.none { color: #777; font-style: italic; }
nav table td, nav table th { font-size: .9em; }
"""


def esc(s):
    return html.escape(str(s), quote=True)


class Render:
    def __init__(self, repo):
        self.repo = repo
        self.src, self.pats = pt.load(repo)
        self.rows = {r[0]: r for r in pt.demo_rows(repo)}
        self.bench = bench_data(repo)
        self.bench_arm64 = [(title, b) for sub, title in ARM64_BENCH
                            for b in [bench_data(repo, sub)] if b]
        self.tests = litmus_tests(repo)
        self.mutants = mutants(repo, self.src)
        self.kpatches = kernel_patches(repo, self.src)
        self.own = own_abstractions(self.src)
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import CLexer, RustLexer
        except ImportError:
            sys.exit('study.py: python3-pygments is missing: make toolchain installs it '
                     '(kernel-config/tools.env)')
        self.highlight = highlight
        self.fmt = HtmlFormatter(cssclass='hl', nowrap=False)
        self.lexers = {'c': CLexer(), 'rust': RustLexer()}
        # A mutant belongs where it touches an entry function; failing
        # that, a helper; a kernel-patch mutant where the patch's APIs are.
        self.placed = {}
        for m in self.mutants:
            touched = {(path, n.rsplit('::', 1)[-1]) for path, n in m['touches']}
            keys = [p.key for p in self.pats
                    if touched & {(f.path, f.func.rsplit('::', 1)[-1])
                                  for f in p.cf + p.rf if not f.err and not f.shared}]
            if not keys:
                keys = [p.key for p in self.pats
                        if touched & (p.names('c') | p.names('rust'))]
            if not keys and m['kpatch']:
                keys = [p.key for p in self.pats
                        if any(g[0].endswith(tuple(m['kpatch'])) for g in self.gaps(p))]
            self.placed[m['name']] = keys

    def stale(self, name, lang, text):
        """What demo row NAME's LANG column TEXT names that the functions
        of its patterns never call, None if nothing, '' if it names no API."""
        terms = pt.column_terms(text, lang)
        if not terms:
            return ''
        fs = [f for q in self.pats if name in q.demo for f in q.everything(lang)]
        return next((m for m in (pt.check_term(self.src, fs, t) for t in terms) if m), None)

    def gaps(self, p):
        if not hasattr(p, '_gaps'):
            p._gaps = gaps_of(p, self.src, self.kpatches, self.own)
        return p._gaps

    def tests_of(self, p):
        names = p.names('c') | p.names('rust')
        return [t for t, d in self.tests.items() if d['code'] & names]

    def mutants_of(self, p):
        return [m for m in self.mutants if p.key in self.placed[m['name']]]

    def code_html(self, f):
        where = '%s:%d &nbsp;<b>%s</b>' % (esc(f.path), f.line, esc(f.name))
        if f.err:
            return ('<div class="code missing"><div class="where">%s</div><pre class="bad">'
                    'not found: %s</pre></div>' % (where, esc(f.err)))
        body = self.highlight(f.code, self.lexers[f.lang], self.fmt)
        return '<div class="code" data-func="%s"><div class="where">%s</div>%s</div>' % (
            esc(f.name), where, body)

    def pane(self, p, lang):
        main = [f for f in p.funcs(lang) if not f.shared]
        shared = [f for f in p.funcs(lang) if f.shared]
        helpers = p.ch if lang == 'c' else p.rh
        out = ['<div class="pane %s" data-lang="%s">' % (lang, lang),
               '<h4>%s</h4>' % ('C: c-module/' if lang == 'c' else 'Rust: rust-module/')]
        out += [self.code_html(f) for f in main]
        for title, fs in (('shared with other patterns', shared), ('helpers it calls', helpers)):
            if fs:
                out.append('<details><summary>%s: %s</summary>%s</details>' % (
                    title, esc(', '.join(f.name for f in fs)),
                    ''.join(self.code_html(f) for f in fs)))
        out.append('</div>')
        return '\n'.join(out)

    def demo_html(self, p):
        if not p.demo:
            return '<p class="none">No row of make demo\'s table exercises it alone.</p>'
        out = ['<table class="demo"><tr><th>make demo row</th><th>C API column</th>'
               '<th>Rust API column</th></tr>']
        for name in p.demo:
            row = self.rows.get(name)
            if not row:
                out.append('<tr><td>%s</td><td colspan="2" class="bad">not in the row table of '
                           'shared-tests/lockless_demo.c</td></tr>' % esc(name))
                continue
            cells = []
            for lang, text in (('c', row[1]), ('rust', row[2])):
                miss = self.stale(name, lang, text)
                verdict = ('<span class="bad">stale: the code never calls %s</span>' % esc(miss)
                           if miss else '<span class="none">names no API</span>' if miss == ''
                           else '<span class="ok">called</span>')
                cells.append('<code>%s</code><br>%s' % (esc(text), verdict))
            out.append('<tr><td><b>%s</b></td><td>%s</td><td>%s</td></tr>' % (
                esc(name), cells[0], cells[1]))
        out.append('</table>')
        return '\n'.join(out)

    def apis_html(self, p):
        c = pt.apis(self.src, p.everything('c'), 'c')
        r = pt.apis(self.src, p.everything('rust'), 'rust')
        return ('<h4>APIs called (with the helpers)</h4><div class="apis">'
                '<div><b>C:</b> %s</div><div><b>Rust:</b> %s</div></div>' % (
                    esc(', '.join(c)) or '<span class="none">none</span>',
                    esc(', '.join(r)) or '<span class="none">none</span>'))

    def bench_html(self, p):
        if not p.bench:
            return '<p class="none">No row of make bench measures it alone.</p>'
        if not self.bench and not self.bench_arm64:
            return '<p class="none">No bench run yet (make bench writes build/bench/bench.csv).</p>'
        out = [self.bench_table(p, self.bench, 'x86_64')] if self.bench else []
        out += [self.bench_table(p, b, title) for title, b in self.bench_arm64]
        return '\n'.join(out)

    def bench_table(self, p, bench, arch):
        rows = bench_rows(p, bench)
        if not rows:
            return ('<p class="none">The last make bench (%s, %s) has no row %s.</p>'
                    % (esc(arch), bench[2], esc(', '.join(p.bench))))
        out = ['<table class="bench"><tr><th>make bench row (%s, %s)</th><th>C</th><th>Rust</th>'
               '<th>Rust inlined</th><th>Rust/C</th><th>inlined/C</th>'
               '<th>static: C / Rust / Rust inl.</th></tr>' % (esc(arch), esc(bench[2]))]
        for label, c, r, ri, st in rows:
            def ratio(a, b):
                if not a or not b:
                    return '<td class="num">n/a</td>'
                cls = 'ok' if a / b <= LIMIT else 'warn'
                return '<td class="num %s">%.2f</td>' % (cls, a / b)
            static = ' / '.join([st.get('perf', ('-', '-'))[0] or '-', st.get('perf', ('-', '-'))[1] or '-',
                                 st.get('-inline', ('-', '-'))[1] or '-'])
            out.append('<tr><td>%s</td>%s%s%s%s%s<td class="num">%s</td></tr>' % (
                esc(label), *['<td class="num">%s</td>' % ('%.1f' % x if x else 'n/a')
                              for x in (c, r, ri)], ratio(r, c), ratio(ri, c), esc(static)))
        out.append('</table><p class="none" style="margin-top:-.4em">instructions per op, one '
                   'thread, QEMU -icount (exact); static: instructions of the functions '
                   '(DWARF, cold paths too)</p>')
        return '\n'.join(out)

    def litmus_html(self, p):
        tests = self.tests_of(p)
        if not tests:
            return '<p class="none">No litmus test names these functions.</p>'
        out = ['<table class="litmus"><tr><th>test</th><th>the claim</th><th>expected</th>'
               '<th>last make litmus</th></tr>']
        for t in tests:
            for name in [t] + self.tests[t]['twins']:
                d = self.tests[name]
                obs = d['observed']
                cls = 'none' if obs is None else 'ok' if obs == d['expected'] else 'bad'
                claim = d['claim'] if name == t else 'negative twin: ' + re.sub(
                    r'^Negative twin of \S+\.litmus\.\s*', '', d['claim'])
                if len(claim) > 260:
                    claim = claim[:257].rsplit(' ', 1)[0] + ' ...'
                out.append('<tr><td><code>%s</code></td><td>%s</td><td>%s</td>'
                           '<td class="%s">%s</td></tr>' % (
                               esc(name), esc(claim), esc(d['expected']), cls,
                               esc(obs if obs is not None else 'not run yet')))
        out.append('</table>')
        return '\n'.join(out)

    def mutants_html(self, p):
        ms = self.mutants_of(p)
        if not ms:
            return '<p class="none">No mutant touches these functions.</p>'
        return '<ul>%s</ul>' % ''.join(
            '<li><code>%s</code>: %s <br><span class="none">touches %s; caught by %s</span></li>' % (
                esc(m['name']), esc(m['title']),
                esc(', '.join(n for _, n in m['touches']) or ', '.join(m['kpatch'])),
                esc(m['tests'] or '?')) for m in ms)

    def gaps_html(self, p):
        g = self.gaps(p)
        if not g:
            return '<p class="none">None: Rust-for-Linux 7.3 as it is.</p>'
        return '<ul>%s</ul>' % ''.join('<li><code>%s</code>: %s</li>' % (esc(a), esc(b))
                                       for a, b in g)

    def section(self, p):
        return '\n'.join([
            '<section class="pattern" id="%s" data-pattern="%s">' % (esc(p.key), esc(p.key)),
            '<h3>%s</h3><p class="what">%s</p>' % (esc(p.title), esc(p.what)),
            '<div class="panes">', self.pane(p, 'c'), self.pane(p, 'rust'), '</div>',
            '<div class="facts">',
            self.apis_html(p),
            '<h4>make demo</h4>', self.demo_html(p),
            '<h4>Instructions per op</h4>', self.bench_html(p),
            '<h4>Litmus tests that prove its ordering</h4>', self.litmus_html(p),
            '<h4>Mutants that break it</h4>', self.mutants_html(p),
            '<h4>Rust-for-Linux gaps it needed</h4>', self.gaps_html(p),
            '</div></section>'])

    def toc(self):
        out = ['<nav><table><tr><th>pattern</th><th>demo rows</th><th>insns/op C / Rust / '
               'inlined (first bench row)</th><th>litmus</th><th>mutants</th><th>RfL gaps</th></tr>']
        for gkey, gtitle in pt.GROUPS:
            out.append('<tr><th colspan="6">%s</th></tr>' % esc(gtitle))
            for p in [q for q in self.pats if q.group == gkey]:
                rows = bench_rows(p, self.bench)
                ins = ('%s / %s / %s' % tuple('%.0f' % x if x else 'n/a' for x in rows[0][1:4])
                       if rows else '-' if p.bench and self.bench else
                       'no bench run yet' if p.bench else '-')
                out.append('<tr><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td>'
                           '<td class="num">%d</td><td class="num">%d</td><td class="num">%d</td></tr>' % (
                               esc(p.key), esc(p.title.split(':')[0]), esc(', '.join(p.demo) or '-'),
                               esc(ins), len(self.tests_of(p)), len(self.mutants_of(p)),
                               len(self.gaps(p))))
        out.append('</table></nav>')
        return '\n'.join(out)

    def unplaced(self):
        left = [m for m in self.mutants if not self.placed[m['name']]]
        if not left:
            return ''
        return ('<h2 class="group">Mutants of no pattern above</h2><ul>%s</ul>' % ''.join(
            '<li><code>%s</code>: %s <span class="none">(touches %s)</span></li>' % (
                esc(m['name']), esc(m['title']),
                esc(', '.join('%s %s' % t for t in m['touches']) or ', '.join(m['kpatch']) or '?'))
            for m in left))

    def page(self):
        now = datetime.datetime.now().strftime('%Y-%m-%d %H:%M')
        bench = ('instructions from make bench of %s' % self.bench[2] if self.bench
                 else 'no bench run yet')
        if self.bench_arm64:
            bench += ' and from make bench ARCH=arm64 of %s' % self.bench_arm64[0][1][2]
        ran = sum(1 for d in self.tests.values() if d['observed'] is not None)
        body = ['<h1>lockless-parity: the patterns, C and Rust side by side</h1>',
                '<p>Every function below is read from <code>c-module/</code> and '
                '<code>rust-module/</code> when the page is made (make study, %s): '
                '%d patterns; %s; litmus results of the last make litmus (%d of %d tests '
                'ran); %d mutants, %d kernel patches.</p>' % (
                    esc(now), len(self.pats), esc(bench), ran, len(self.tests),
                    len(self.mutants), len(self.kpatches)),
                self.toc()]
        for gkey, gtitle in pt.GROUPS:
            body.append('<h2 class="group" id="group-%s">%s</h2>' % (esc(gkey), esc(gtitle)))
            body += [self.section(p) for p in self.pats if p.group == gkey]
        body.append(self.unplaced())
        return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                '<title>lockless-parity: the patterns, C and Rust</title>'
                '<style>%s\n%s</style></head><body>\n%s\n</body></html>\n' % (
                    CSS, self.fmt.get_style_defs('.hl'), '\n'.join(body)))

    def md_verdict(self, name, lang, text):
        miss = self.stale(name, lang, text)
        return ' (stale: the code never calls %s)' % miss if miss else ''

    def markdown(self):
        out = ['# lockless-parity: the patterns, C and Rust side by side', '',
               'Made by `make study` from the sources; the HTML page has the same, '
               'highlighted, and the tables.', '']
        for gkey, gtitle in pt.GROUPS:
            out += ['## ' + gtitle, '']
            for p in [q for q in self.pats if q.group == gkey]:
                out += ['### ' + p.title, '', p.what, '']
                for lang, label in (('c', 'C'), ('rust', 'Rust')):
                    for f in p.funcs(lang):
                        out += ['%s, `%s:%s` `%s`%s:' % (label, f.path, getattr(f, 'line', '?'),
                                                        f.name, ' (shared)' if f.shared else ''),
                                '', '```' + lang, f.code if not f.err else 'not found: ' + f.err,
                                '```', '']
                for name in p.demo:
                    row = self.rows.get(name)
                    if row:
                        out.append('- make demo row %s: C API `%s`%s, Rust API `%s`%s' % (
                            name, row[1], self.md_verdict(name, 'c', row[1]),
                            row[2], self.md_verdict(name, 'rust', row[2])))
                for arch, bench in [('x86_64', self.bench)] + self.bench_arm64:
                    for label, c, r, ri, st in bench_rows(p, bench):
                        out.append('- insns/op %s (%s): C %s, Rust %s, Rust inlined %s' % (
                            label, arch, *('%.1f' % x if x else 'n/a' for x in (c, r, ri))))
                if p.bench and not self.bench:
                    out.append('- insns/op: no bench run yet')
                for t in self.tests_of(p):
                    for n in [t] + self.tests[t]['twins']:
                        d = self.tests[n]
                        out.append('- litmus `%s`: expected %s, last run %s' % (
                            n, d['expected'], d['observed'] or 'not run yet'))
                for m in self.mutants_of(p):
                    out.append('- mutant `%s`: %s' % (m['name'], m['title']))
                for a, b in self.gaps(p):
                    out.append('- gap `%s`: %s' % (a, b))
                out.append('')
        return '\n'.join(out) + '\n'


# ------------------------------------------------------------ the check


class DomSections(HTMLParser):
    """Sections of class "pattern" and the text of their code panes."""

    def __init__(self):
        super().__init__()
        self.sections = {}
        self.stack = []     # (tag, section key or None, pane lang or None)
        self.sec = None
        self.pane = None
        self.title = ''

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get('class') or '').split()
        sec, pane = self.sec, self.pane
        if tag == 'section' and 'pattern' in cls:
            self.sec = a.get('data-pattern') or a.get('id')
            self.sections[self.sec] = {'c': '', 'rust': '', 'code': {'c': 0, 'rust': 0}}
        elif tag == 'div' and 'pane' in cls and self.sec:
            self.pane = a.get('data-lang')
        elif tag == 'div' and 'code' in cls and self.sec and self.pane:
            if 'missing' in cls:
                self.pane = 'missing'   # a function not found: no code
            else:
                self.sections[self.sec]['code'][self.pane] += 1
        if tag not in ('br', 'meta', 'img', 'hr', 'input', 'link'):
            self.stack.append((tag, sec, pane))

    def handle_endtag(self, tag):
        while self.stack:
            t, sec, pane = self.stack.pop()
            if t == tag:
                self.sec, self.pane = sec, pane
                break

    def handle_data(self, data):
        if self.sec and self.pane in ('c', 'rust') and \
                any(t == 'pre' for t, _, _ in self.stack):
            self.sections[self.sec][self.pane] += data


def check(dom_path):
    """One line per failure and a summary; exit status."""
    with open(dom_path, encoding='utf-8', errors='replace') as f:
        dom = f.read()
    parser = DomSections()
    parser.feed(dom)
    want = [p['key'] for p in pt.PATTERNS]
    bad = []
    for key in want:
        s = parser.sections.get(key)
        if s is None:
            bad.append('no section "%s"' % key)
            continue
        for lang, label in (('c', 'C'), ('rust', 'Rust')):
            if not s['code'][lang] or not s[lang].strip():
                bad.append('section "%s": its %s pane is empty' % (key, label))
    extra = [k for k in parser.sections if k not in want]
    if extra:
        bad.append('sections of no pattern: %s' % ', '.join(extra))
    if bad:
        print('study-check FAIL: the page chromium rendered (%s): %s%s' % (
            dom_path, bad[0], ' (and %d more)' % (len(bad) - 1) if len(bad) > 1 else ''))
        return 1
    lines = sum(s['c'].count('\n') + s['rust'].count('\n') for s in parser.sections.values())
    print('study-check ok: chromium rendered %d pattern sections, each with a C and a Rust '
          'pane (%d lines of code)' % (len(want), lines))
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == '--check':
        return check(argv[2])
    if len(argv) != 2 or argv[1].startswith('-'):
        sys.exit('usage: study.py OUT_DIR | study.py --check DOM_FILE')
    out = argv[1]
    r = Render(REPO)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'index.html'), 'w', encoding='utf-8') as f:
        f.write(r.page())
    with open(os.path.join(out, 'index.md'), 'w', encoding='utf-8') as f:
        f.write(r.markdown())
    nt = sum(len(r.tests_of(p)) for p in r.pats)
    stale = ['%s %s' % (name, 'C' if lang == 'c' else 'Rust')
             for name, c_api, rust_api, _ in r.rows.values()
             for lang, text in (('c', c_api), ('rust', rust_api))
             if r.stale(name, lang, text)]
    missing = [f.spec for p in r.pats for f in p.cf + p.rf if f.err]
    print('study: %d patterns in %d groups; %s; %d litmus links, %d of %d mutants placed'
          % (len(r.pats), len(pt.GROUPS),
             'instructions from make bench of %s' % r.bench[2] if r.bench else 'no bench run yet',
             nt, sum(1 for m in r.mutants if r.placed[m['name']]), len(r.mutants)))
    if stale:
        print('study: demo API columns the code does not call (make check fails on them): %s'
              % ', '.join(dict.fromkeys(stale)))
    if missing:
        print('study: functions of scripts/patterns.py not found: %s' % ', '.join(missing))
    print('page: %s (and index.md)' % os.path.join(out, 'index.html'))
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
