#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""patterns.py: the lockless patterns of the two modules, and the functions
behind each, read from the source.

One table (PATTERNS) says, for each pattern (a refcount flavor's put, a
cmpxchg loop, a jbd2 transaction step, ...), which C function and which Rust
function implement it, which rows of `make demo`'s table exercise it and
which rows of `make bench`'s table measure it.  Everything else is read from
the source every time, so it cannot drift: the functions' text (with the
comment above each), the functions they call (module-local helpers,
followed; kernel APIs, listed), the demo's row table (lp_rows[] of
shared-tests/lockless_demo.c), the litmus tests naming the functions in
their Code: sections, the mutants whose diff touches them, and the
Rust-for-Linux patches whose APIs they call.  scripts/study.py renders it
(`make study`); this file, run, is the demo's API check (`make check`):

    patterns.py [-q] REPO     every API a demo row names in its "C API" or
                              "Rust API" column is called by the functions
                              of the row's patterns (or their helpers)

A function is "FILE FUNC" (FUNC as litmus_code.py reads it: Type::method
for a Rust method), "FILE FUNC[LABEL]" for one arm of a switch/match in it
(`case LABEL:` in C, `uapi::LABEL =>` in Rust), and a leading "*" marks one
the pattern shares with others (the get of every flavor): the page folds
it away.

The API check reads a column as API names between separators (" / ", "+",
","; "a_b/c" is a_b and a_c, and "(X)" right after a name applies to each):

  - Type::m(ARGS), Type<T>::m, Type::a().b, name(), name: the function, or a
    helper it calls, calls m (a and b) as a method, Type::m path or function,
    and C calls name() or *_name() (dec_and_test: atomic_dec_and_test());
    an ordering in ARGS (Full, Relaxed, Acquire, Release) must be an
    argument of one such call, a type in ARGS (&Mutex) that of one argument
    (a field or parameter declared so in rust-module/) or named in the body;
  - Type (Rust, CamelCase, "own RwLock"): named in the functions, or the
    type of the receiver of a call in them (as declared in rust-module/);
  - "loop": the functions loop; "x++", "--": C increments, decrements;
  - words of PROSE are the reader's, not checked; a column beginning with
    a word of SKIP ("per flavor (above)", "nothing: ...") names no API.

Output: "ok demo ROW COLUMN: ..." or "FAIL demo row ROW, COLUMN column
"TEXT": FUNCS never call NAME" per row and column, then "N passed, N
failed"; exit 1 on any failure.
"""

import os
import re
import sys

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import litmus_code as lc  # noqa: E402

# ------------------------------------------------------------ the table

C_G, R_G = 'c-module/gadget.c ', 'rust-module/gadget.rs '
C_M, R_M = 'c-module/rmw.c ', 'rust-module/rmw.rs '
C_T, R_T = 'c-module/txn.c ', 'rust-module/txn.rs '
C_D, R_D = 'c-module/device.c ', 'rust-module/device.rs '
C_A, R_A = 'c-module/arena.c ', 'rust-module/arena.rs '

GROUPS = [
    ('refcount', 'Reference counts: the article\'s gadget flavors'),
    ('rmw', 'Read-modify-write: the cmpxchg loops'),
    ('txn', 'The jbd2 transaction (commit f7f497cb7024)'),
]


def P(key, group, title, what, c, rust, demo=(), bench=()):
    """One pattern: KEY (an anchor), its GROUP, TITLE, WHAT (one sentence
    for the reader), its C and Rust functions, the demo rows that
    exercise it and the bench rows (labels, or prefixes ending in "/")."""
    return {'key': key, 'group': group, 'title': title, 'what': what,
            'c': c, 'rust': rust, 'demo': list(demo), 'bench': list(bench)}


PATTERNS = [
    P('locked', 'refcount', 'LOCKED: refcnt++/-- under a mutex (article v1)',
      'The baseline: every get and put takes the arena mutex.',
      [C_G + 'lp_put_locked', '*' + C_G + 'lp_gadget_get'],
      [R_G + 'Locked::put_one', R_G + 'Locked::get', R_G + 'Locked::registry_get'],
      demo=['LOCKED'], bench=['GET_PUT/LOCKED', 'TRYGET_PUT/LOCKED']),
    P('lockless', 'refcount', 'LOCKLESS: atomic get, fully ordered put (article v2)',
      'A relaxed increment; the put\'s fully ordered decrement lets the last '
      'putter read the parent with plain loads.',
      [C_G + 'lp_put_lockless', '*' + C_G + 'lp_gadget_get'],
      [R_G + 'Lockless::put_one', R_G + 'RegLock::drop_arc', '*' + R_G + 'Lockless::get'],
      demo=['LOCKLESS'], bench=['GET_PUT/LOCKLESS', 'TRYGET_PUT/LOCKLESS']),
    P('weak-cmpxchg', 'refcount', 'WEAK_CMPXCHG: the cmpxchg put of a weakly listed gadget (article v3)',
      'Lock-free above one; the 1 -> 0 step under the owner\'s mutex, so a '
      'lookup under it never upgrades a dying gadget.',
      [C_G + 'lp_put_weak_cmpxchg', '*' + C_G + 'lp_gadget_get'],
      [R_G + 'put_weak_cmpxchg', '*' + R_G + 'refcount_get'],
      demo=['WEAK_CMPXCHG'],
      bench=['GET_PUT/WEAK_CMPXCHG', 'LOOKUP_PUT/WEAK_CMPXCHG', 'TRYGET_PUT/WEAK_CMPXCHG']),
    P('kref-mutex', 'refcount', 'KREF_MUTEX: kref_put_mutex()',
      'refcount_dec_and_mutex_lock(): lock-free above one, the last put under '
      'the owner\'s mutex.',
      [C_G + 'lp_put_kref_mutex', C_G + 'lp_release_mutex', '*' + C_G + 'lp_gadget_get'],
      [R_G + 'put_kref_mutex', '*' + R_G + 'refcount_get'],
      demo=['KREF_MUTEX'],
      bench=['GET_PUT/KREF_MUTEX', 'LOOKUP_PUT/KREF_MUTEX', 'TRYGET_PUT/KREF_MUTEX']),
    P('kref-lock', 'refcount', 'KREF_LOCK: kref_put_lock()',
      'The same with the owner\'s spinlock: refcount_dec_and_lock().',
      [C_G + 'lp_put_kref_lock', C_G + 'lp_release_lock', '*' + C_G + 'lp_gadget_get'],
      [R_G + 'put_kref_lock', '*' + R_G + 'refcount_get'],
      demo=['KREF_LOCK'],
      bench=['GET_PUT/KREF_LOCK', 'LOOKUP_PUT/KREF_LOCK', 'TRYGET_PUT/KREF_LOCK']),
    P('kref-rwsem', 'refcount', 'KREF_RWSEM: kref_put_rwsem(), the article\'s exercise',
      'The last put takes the rw_semaphore for write, so lookups under its '
      'read side run in parallel.',
      [C_G + 'lp_put_kref_rwsem', C_G + 'lp_kref_put_rwsem', C_G + 'lp_release_rwsem',
       '*' + C_G + 'lp_gadget_get'],
      [R_G + 'put_kref_rwsem', '*' + R_G + 'refcount_get'],
      demo=['KREF_RWSEM'],
      bench=['GET_PUT/KREF_RWSEM', 'LOOKUP_PUT/KREF_RWSEM', 'TRYGET_PUT/KREF_RWSEM']),
    P('put', 'refcount', 'PUT: the cascade up the tree (every flavor)',
      'One put per flavor in a loop, not a recursion: a released gadget\'s '
      'parent reference is put next.',
      [C_G + 'lp_gadget_put', C_G + 'lp_put_one', C_G + 'lp_gadget_free'],
      [R_G + 'put_ptr', R_G + 'put_cascade', R_G + 'release_box', R_G + 'Gadget::release'],
      demo=['GET_PUT']),
    P('get-put-refcount', 'refcount', 'GET_PUT_REFCOUNT: refcount_t against Arc, like for like',
      'LOCKLESS\'s get and put on refcount_t, without the flavor dispatch: '
      'what Rust\'s Arc does, whose LOCKLESS get and put these are.',
      [C_G + 'lp_gadget_get_refcount', C_G + 'lp_gadget_put_refcount'],
      [R_G + 'Lockless::get', R_G + 'RegLock::drop_arc'],
      demo=['GET_PUT_REFCOUNT'], bench=['GET_PUT_REFCOUNT/']),
    P('lookup', 'refcount', 'LOOKUP: upgrade a weak reference under the list\'s lock',
      'A plain get is enough under the lock the final put takes.',
      [C_G + 'lp_gadget_lookup'],
      [R_G + 'Gadget::lookup', R_G + 'upgrade', R_G + 'refcount_get'],
      demo=['LOOKUP_PUT'], bench=['LOOKUP_PUT/']),
    P('tryget', 'refcount', 'TRYGET: get-unless-zero through the registry',
      'No put fences the registry: the upgrade must fail once the count '
      'reached zero, under the registry\'s lock.',
      [C_G + 'lp_gadget_tryget'],
      [R_G + 'tryget', R_G + 'tryget_any', R_G + 'RegLock::get_unless_zero', R_G + 'Found::inc_not_zero'],
      demo=['TRYGET_PUT'], bench=['TRYGET_PUT/']),
    P('tryget-rcu', 'refcount', 'TRYGET with an RCU registry: get-unless-zero under no lock',
      'rcu_read_lock(), xa_load() and the get-unless-zero, no lock taken; the '
      'release path unregisters under the lock and frees after a grace period, '
      'so TRYGET runs in atomic context.',
      [C_G + 'lp_gadget_tryget', C_G + 'lp_gadget_get_unless_zero', C_G + 'lp_gadget_free'],
      [R_G + 'RegRcu::get_unless_zero', R_G + 'Lockless::inc_not_zero', R_G + 'refcount_inc_not_zero',
       R_G + 'RegRcu::drop_arc', R_G + 'RegRcu::free_box'],
      demo=['TRYGET_ATOMIC_PUT']),
    P('new', 'refcount', 'NEW: publish a gadget',
      'A gadget is counted, linked and registered before anyone may find it.',
      [C_G + 'lp_gadget_new', C_G + 'lp_gadget_publish'],
      [R_G + 'Gadget::create', R_G + 'Gadget::publish'],
      demo=['NEW_PUT']),
    P('handle', 'refcount', 'Handles: count before publish',
      'A handle is counted before userspace can see it, so a racing PUT '
      'never drives the count below zero.',
      [C_A + 'lp_handle_publish'],
      [R_A + 'Typed::handle_publish']),
    P('max-cmpxchg', 'rmw', 'MAX_CMPXCHG: the article\'s cmpxchg max loop',
      'Give up once the value seen is larger; retry while another CPU '
      'changed it.',
      [C_M + 'lp_max_cmpxchg'], [R_M + 'max_cmpxchg'],
      demo=['MAX_CMPXCHG'], bench=['MAX_CMPXCHG']),
    P('max-jbd2', 'rmw', 'MAX_JBD2: update_t_max_wait() as commit f7f497cb7024 wrote it',
      'READ_ONCE(), then while (old < new) old = cmpxchg(p, old, new).',
      [C_M + 'lp_max_jbd2'], [R_M + 'max_jbd2'],
      demo=['MAX_JBD2'], bench=['MAX_JBD2']),
    P('max-locked', 'rmw', 'MAX_LOCKED: the same under t_handle_lock (before the patch)',
      'Compare and store under a spinlock.',
      [C_M + 'lp_max_locked'], [R_M + 'max_locked'],
      demo=['MAX_LOCKED'], bench=['MAX_LOCKED']),
    P('inc-not-zero-cmpxchg', 'rmw', 'INC_NOT_ZERO_CMPXCHG: increment unless zero',
      'The lock-free fast path of get-unless-zero.',
      [C_M + 'lp_inc_not_zero_cmpxchg'], [R_M + 'inc_not_zero_cmpxchg'],
      demo=['INC_NOT_ZERO_CMPXCHG'], bench=['INC_NOT_ZERO_CMPXCHG']),
    P('inc-not-zero-try-cmpxchg', 'rmw', 'INC_NOT_ZERO_TRY_CMPXCHG: the library\'s try_cmpxchg loop',
      'atomic_try_cmpxchg() refreshes the expected value on failure.',
      [C_M + 'lp_inc_not_zero_try_cmpxchg'], [R_M + 'inc_not_zero_try_cmpxchg'],
      demo=['INC_NOT_ZERO_TRY_CMPXCHG'], bench=['INC_NOT_ZERO_TRY_CMPXCHG']),
    P('fetch-inc-cmpxchg', 'rmw', 'FETCH_INC_CMPXCHG: fetch-and-increment as a cmpxchg loop',
      'The article\'s first listing, saturating at INT_MAX.',
      [C_M + 'lp_fetch_inc_cmpxchg'], [R_M + 'fetch_inc_cmpxchg'],
      demo=['FETCH_INC_CMPXCHG'], bench=['FETCH_INC_CMPXCHG']),
    P('set', 'rmw', 'SET: store the operand in every copy',
      'A fully ordered exchange of the atomic, a marked store of jbd2\'s.',
      [C_M + 'lp_rmw[LP_OP_SET]'], [R_M + 'rmw[LP_OP_SET]'],
      demo=['SET'], bench=['SET']),
    P('read', 'rmw', 'READ: a relaxed load',
      'atomic_read(): no ordering at all.',
      [C_M + 'lp_rmw[LP_OP_READ]'], [R_M + 'rmw[LP_OP_READ]'],
      demo=['READ'], bench=['READ']),
    P('atomic-floor', 'rmw', 'ATOMIC_FLOOR: one unordered atomic increment',
      'The floor every other row stands on.',
      [C_D + 'lp_run_one[LP_OP_ATOMIC_FLOOR]'], [R_D + 'lp_run_one[LP_OP_ATOMIC_FLOOR]'],
      demo=['ATOMIC_FLOOR'], bench=['ATOMIC_FLOOR/']),
    P('empty', 'rmw', 'EMPTY: the RUN loop alone',
      'What every row\'s figure includes besides its op.',
      [C_D + 'lp_run_one[LP_OP_EMPTY]'], [R_D + 'lp_run_one[LP_OP_EMPTY]'],
      demo=['EMPTY'], bench=['EMPTY/']),
    P('txn-start', 'txn', 'TXN START: start_this_handle()',
      'The state check and the t_updates increment under the shared '
      'j_state_lock; credits added, the wait recorded.',
      [C_T + 'lp_txn_start'], [R_T + 'Txn::start'],
      demo=['TXN_START_STOP'], bench=['TXN_START_STOP/']),
    P('txn-stop', 'txn', 'TXN STOP: stop_this_handle(), under no lock',
      'Credits given back, then a fully ordered decrement of t_updates; the '
      'last one wakes the committer.',
      [C_T + 'lp_txn_stop'], [R_T + 'Txn::stop'],
      demo=['TXN_START_STOP'], bench=['TXN_START_STOP/']),
    P('txn-extend', 'txn', 'TXN EXTEND: jbd2_journal_extend()',
      'Add, check, undo: the sum may overshoot for a moment, what is granted '
      'never does.',
      [C_T + 'lp_txn_extend', C_T + 'lp_txn_unextend'],
      [R_T + 'Txn::extend', R_T + 'Txn::unextend'],
      demo=['TXN_EXTEND'], bench=['TXN_EXTEND/']),
    P('txn-commit', 'txn', 'TXN COMMIT: lock, drain t_updates, open the next',
      'The committer queues itself before it reads t_updates, so a lock-free '
      'STOP never loses its wakeup.',
      [C_T + 'lp_txn_commit', C_T + 'lp_txn_wait_updates'],
      [R_T + 'Txn::commit', R_T + 'Txn::wait_updates']),
]

# ------------------------------------------------------------ source

KEYWORDS_C = {'if', 'while', 'for', 'switch', 'return', 'sizeof', 'typeof',
              'case', 'do', 'else', '__typeof__', 'defined'}
KEYWORDS_R = {'if', 'while', 'for', 'match', 'return', 'loop', 'Some', 'Ok',
              'Err', 'None', 'fn', 'in', 'as', 'let', 'move', 'unsafe', 'Self'}


class Source:
    """The two modules' files, stripped (comments and strings blanked)."""

    def __init__(self, repo):
        self.repo = repo
        self.text, self.bare = {}, {}
        for d, ext in (('c-module', '.c'), ('rust-module', '.rs')):
            full = os.path.join(repo, d)
            for fn in sorted(os.listdir(full)):
                if fn.endswith(ext) and not fn.endswith(('.mod.c', '_generated.rs')):
                    path = d + '/' + fn
                    with open(os.path.join(full, fn), encoding='utf-8') as f:
                        self.text[path] = f.read()
                    self.bare[path] = lc.strip(self.text[path], ext == '.rs')
        self.c_funcs = self._c_index()
        self.r_free, self.r_methods = self._rust_index()
        self.rw, self.rc = lc.rust_lock_names(repo)
        lc.RUST_NAMES = (self.rw, self.rc)
        self.declared = {}

    def _c_index(self):
        """{name: file} of every function defined in c-module/."""
        out = {}
        for path, bare in self.bare.items():
            if not path.endswith('.c'):
                continue
            for m in re.finditer(r'^[A-Za-z_][^;{}()=]*?\b(\w+)\(', bare, re.M):
                name = m.group(1)
                if name in KEYWORDS_C or name in out:
                    continue
                span, err = lc.find_definition(path, bare, name)
                if span and not err:
                    out[name] = path
        return out

    def _rust_index(self):
        """{name: file} of free functions and {(Type, name): file} of
        methods defined in rust-module/."""
        free, methods = {}, {}
        for path, bare in self.bare.items():
            if not path.endswith('.rs'):
                continue
            impls = [(m.start(), lc.match_close(bare, m.end() - 1, '{', '}'),
                      m.group(1))
                     for m in re.finditer(r'^(?:unsafe\s+)?impl\b(?:<[^{]*?>)?[^{]*?\b(\w+)(?:<[^{]*>)?\s*(?:where[^{]*)?\{',
                                          bare, re.M)]
            for m in re.finditer(r'^(\s*)(?:pub(?:\([a-z]+\))?\s+)?(?:unsafe\s+)?fn\s+(\w+)',
                                 bare, re.M):
                owner = next((t for s, e, t in impls if s < m.start() < e), None)
                if owner:
                    methods.setdefault((owner, m.group(2)), path)
                elif not m.group(1).rsplit('\n', 1)[-1]:
                    free.setdefault(m.group(2), path)
        return free, methods

    def declared_as(self, ty):
        """Field and parameter names declared with type TY in rust-module/."""
        if ty not in self.declared:
            names = set()
            pat = re.compile(r'\b(\w+)\s*:\s*&?\s*(?:\'\w+\s+)?(?:mut\s+)?(?:\w+::)*%s\b'
                             % re.escape(ty))
            for path, bare in self.bare.items():
                if path.endswith('.rs'):
                    names |= set(pat.findall(bare))
            self.declared[ty] = names
        return self.declared[ty]

    def owner_of(self, path, func):
        return func.rsplit('::', 1)[0] if '::' in func else None


class Func:
    """One function (or switch arm) of a pattern, read from the source."""

    def __init__(self, src, spec):
        self.shared = spec.startswith('*')
        spec = spec.lstrip('*')
        self.spec = spec
        self.path, self.func = spec.split(' ', 1)
        self.arm = None
        m = re.fullmatch(r'(\S+)\[(\w+)\]', self.func)
        if m:
            self.func, self.arm = m.group(1), m.group(2)
        self.rust = self.path.endswith('.rs')
        self.lang = 'rust' if self.rust else 'c'
        self.name = self.func + ('[%s]' % self.arm if self.arm else '')
        self.err = None
        text = src.text.get(self.path)
        bare = src.bare.get(self.path)
        if text is None:
            self.err = 'no file %s' % self.path
            return
        span, err = lc.find_definition(self.path, bare, self.func)
        if err:
            self.err = err
            return
        start, b0, b1 = span
        self.line = text.count('\n', 0, start) + 1
        if self.arm:
            arm = find_arm(bare, b0, b1, self.arm, self.rust)
            if not arm:
                self.err = 'no arm %s in %s' % (self.arm, self.func)
                return
            a0, a1 = arm
            # The arm as written, from its line's start.
            a0 = text.rfind('\n', 0, a0) + 1
            self.code = dedent(text[a0:a1].rstrip())
            self.body = bare[a0:a1]
            self.line = text.count('\n', 0, a0) + 1
        else:
            # The comment right above, as the reader wants it.
            c0 = comment_start(text, start)
            self.code = dedent(text[c0:b1 + 1])
            self.line = text.count('\n', 0, c0) + 1
            self.body = bare[b0:b1]
            self.signature = bare[start:b0]
        try:
            self.ops = (lc.extract_rust(self.body) if self.rust
                        else lc.extract_c(self.body))
        except (ValueError, IndexError):
            self.ops = []


def comment_start(text, start):
    """Where the comment (and attributes) right above START begins."""
    lines = text[:start].split('\n')[:-1]
    i = len(lines)
    while i > 0 and re.match(r'\s*(///|//!|//|/\*\*|/\*|\*|\*/|#\[|__\w+\()',
                             lines[i - 1]):
        i -= 1
    return len('\n'.join(lines[:i])) + (1 if i else 0)


def dedent(code):
    lines = code.split('\n')
    ind = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return '\n'.join(l[ind:] for l in lines)


def find_arm(bare, b0, b1, label, rust):
    """(start, end) of the arm LABEL of a switch/match in bare[b0:b1]."""
    body = bare[b0:b1]
    if rust:
        m = re.search(r'\buapi::%s\b[^=]*=>' % re.escape(label), body)
        if not m:
            return None
        i = m.end()
        while body[i].isspace():
            i += 1
        if body[i] == '{':
            end = lc.match_close(body, i, '{', '}') + 1
        else:
            depth, end = 0, i
            while end < len(body):
                ch = body[end]
                if ch in '([{':
                    depth += 1
                elif ch in ')]}':
                    if depth == 0:
                        break
                    depth -= 1
                elif ch == ',' and depth == 0:
                    end += 1
                    break
                end += 1
        return b0 + m.start(), b0 + end
    m = re.search(r'\bcase\s+%s\s*:' % re.escape(label), body)
    if not m:
        return None
    # To the next case/default label at the same indentation, or the
    # switch's closing brace.
    line0 = body.rfind('\n', 0, m.start()) + 1
    ind = body[line0:m.start()]
    nxt = re.compile(r'\n%s(?:case\b|default\s*:)|\n%s\}' % (re.escape(ind), re.escape(ind[:-1])))
    n = nxt.search(body, m.end())
    end = n.start() if n else len(body)
    return b0 + m.start(), b0 + end


def calls_c(body):
    """[(name, args)] of the calls in a stripped C body, in order."""
    out = []
    for m in re.finditer(r'\b([A-Za-z_]\w*)\s*\(', body):
        if m.group(1) in KEYWORDS_C:
            continue
        p = m.end() - 1
        try:
            args = lc.split_args(body[p + 1:lc.match_close(body, p, '(', ')')])
        except ValueError:
            args = []
        out.append((m.group(1), args, m.start()))
    return out


def calls_rust(body):
    """[(kind, name, qualifier, args, pos)] of a stripped Rust body:
    kind "method" (.name(), qualifier: the receiver's name), "path"
    (A::b(), qualifier "A"), "fn" (name()), "macro" (name!)."""
    out = []
    for m in re.finditer(r'(\.\s*|(?:\b[A-Za-z_]\w*(?:<[^<>()]*>)?::)+|\b)([A-Za-z_]\w*)(!?)\s*(?:::<[^()]*>)?\(',
                         body):
        pre, name, bang = m.group(1), m.group(2), m.group(3)
        p = body.index('(', m.end() - 1)
        try:
            args = lc.split_args(body[p + 1:lc.match_close(body, p, '(', ')')])
        except ValueError:
            args = []
        start = m.start(2) - len(pre)
        if bang:
            out.append(('macro', name, None, args, m.start()))
        elif pre.startswith('.'):
            out.append(('method', name, lc.receiver(body, m.start(1)), args, m.start()))
        elif pre:
            qual = re.sub(r'<[^<>]*>', '', pre[:-2])
            out.append(('path', name, qual, args, start))
        elif name not in KEYWORDS_R and not name[0].isupper():
            out.append(('fn', name, None, args, m.start()))
    return out


# Methods of traits (and constructors) that many types have: never
# followed by their name alone.
TRAIT_METHODS = {'drop', 'deref', 'deref_mut', 'new', 'init', 'clone', 'from',
                 'into', 'inc_ref', 'dec_ref', 'open', 'release', 'ioctl'}


def local_callees(src, f):
    """Specs of the module-local functions F's body calls or names (C
    function pointers too), in order of first appearance."""
    out = []
    if not f.rust:
        for m in re.finditer(r'\b([A-Za-z_]\w*)\b', f.body):
            name = m.group(1)
            if name in src.c_funcs and name != f.func:
                spec = '%s %s' % (src.c_funcs[name], name)
                if spec not in out:
                    out.append(spec)
        return out
    owner = src.owner_of(f.path, f.func)
    for kind, name, qual, args, pos in calls_rust(f.body):
        spec = None
        if kind == 'fn' and name in src.r_free:
            spec = '%s %s' % (src.r_free[name], name)
        elif kind == 'method' and qual == 'self' and owner and (owner, name) in src.r_methods:
            spec = '%s %s::%s' % (src.r_methods[(owner, name)], owner, name)
        elif kind == 'method' and name not in TRAIT_METHODS:
            # Another receiver: ours if one type of rust-module/ alone
            # has the method (arena.txn.commit()), not if several do; a
            # kernel type's (.read() of RwLock, RwSem) is none of ours.
            types = [t for (t, n) in src.r_methods if n == name]
            if len(types) == 1:
                spec = '%s %s::%s' % (src.r_methods[(types[0], name)], types[0], name)
        elif kind == 'path':
            ty = qual.split('::')[-1]
            ty = owner if ty == 'Self' else ty
            if (ty, name) in src.r_methods:
                spec = '%s %s::%s' % (src.r_methods[(ty, name)], ty, name)
            elif qual.split('::')[0] in ('gadget', 'rmw', 'txn', 'arena', 'device') \
                    and name in src.r_free:
                spec = '%s %s' % (src.r_free[name], name)
        if spec and spec.split(' ', 1)[1] != f.func and spec not in out:
            out.append(spec)
    return out


def closure(src, funcs, depth=3):
    """FUNCS and the module-local helpers they call, DEPTH levels down:
    (entry Funcs, helper Funcs)."""
    seen = {f.spec for f in funcs}
    helpers = []
    todo = [f for f in funcs if not f.err]
    for _ in range(depth):
        nxt = []
        for f in todo:
            for spec in local_callees(src, f):
                if spec in seen:
                    continue
                seen.add(spec)
                h = Func(src, spec)
                if not h.err:
                    helpers.append(h)
                    nxt.append(h)
        todo = nxt
    return helpers


class Pattern:
    """A PATTERNS entry, with its functions read."""

    def __init__(self, src, d):
        self.__dict__.update(d)
        self.cf = [Func(src, s) for s in d['c']]
        self.rf = [Func(src, s) for s in d['rust']]
        self.ch = closure(src, self.cf)
        self.rh = closure(src, self.rf)

    def funcs(self, lang):
        return self.cf if lang == 'c' else self.rf

    def everything(self, lang):
        """Entry functions and helpers: what the pattern runs."""
        return [f for f in self.funcs(lang) if not f.err] + \
            (self.ch if lang == 'c' else self.rh)

    def names(self, lang):
        """(file, function) pairs, entry functions and helpers."""
        return {(f.path, f.func.rsplit('::', 1)[-1]) for f in self.everything(lang)}


def load(repo):
    src = Source(repo)
    return src, [Pattern(src, d) for d in PATTERNS]

# ------------------------------------------------------------ APIs called

# Calls the page does not list among "APIs called": Rust's plumbing.
NOISE_R = {'as_ref', 'get_ref', 'as_mut', 'project', 'then_some', 'ok_or',
           'then', 'map_err', 'try_from', 'unwrap_or', 'unwrap_or_else',
           'is_ok', 'is_some', 'is_none', 'from_raw', 'into_raw', 'forget',
           'as_ptr', 'iter', 'find', 'max', 'min', 'wrapping_add',
           'wrapping_sub', 'as_nanos', 'get_mut', 'take', 'cast', 'ok',
           'from_ref', 'new_unchecked', 'of', 'allocation', 'refcnt', 'drop',
           'access', 'elapsed', 'into'}
NOISE_C = {'container_of', 'lp_u32', 'min_t', 'max_t', 'IS_ENABLED', 'likely',
           'unlikely'}


def apis(src, fs, lang):
    """The non-local APIs FS call, in order, as a reader writes them."""
    out = []
    for f in fs:
        if f.rust:
            for kind, name, qual, args, pos in calls_rust(f.body):
                if name in NOISE_R:
                    continue
                if kind == 'method':
                    if any(name == n for (t, n) in src.r_methods) and \
                            qual not in (src.rw | src.rc) and name not in ('lock', 'read', 'write'):
                        continue    # ours, followed as a helper or not
                    s = '.%s()' % name
                elif kind == 'path':
                    ty = qual.split('::')[-1]
                    if (ty, name) in src.r_methods or ty in ('Self', 'uapi', 'gadget', 'rmw',
                                                            'txn', 'arena', 'device'):
                        continue
                    s = '%s::%s' % (ty, name)
                elif kind == 'macro':
                    s = name + '!'
                else:
                    if name in src.r_free:
                        continue
                    s = name + '()'
                if s not in out:
                    out.append(s)
        else:
            for name, args, pos in calls_c(f.body):
                if name in src.c_funcs or name in NOISE_C:
                    continue
                s = name + '()'
                if s not in out:
                    out.append(s)
    return out

# ------------------------------------------------------------ demo rows


def demo_rows(repo):
    """[(name, c_api, rust_api, line)] of the row table of lockless_demo.c
    (lp_rows[], lpu_rows[]: the array of the struct with c_api and
    rust_api), or raise ValueError naming what it cannot read."""
    path = os.path.join(repo, 'shared-tests/lockless_demo.c')
    with open(path, encoding='utf-8') as f:
        text = f.read()
    bare = lc.strip(text, False)
    # The row type: the struct with members c_api and rust_api, whatever
    # its name (lp_row, lpu_row); its members' order for positional
    # initialisers; then the one array of it.
    st = re.search(r'\bstruct\s+(\w+)\s*\{([^{}]*\bc_api\s*;[^{}]*\brust_api\s*;[^{}]*)\}', bare)
    if not st:
        raise ValueError('no struct with members c_api and rust_api in '
                         'shared-tests/lockless_demo.c')
    members = re.findall(r'(\w+)\s*;', st.group(2))
    m = re.search(r'\bstruct\s+%s\s+(\w+)\s*\[\s*\]\s*=\s*\{' % st.group(1), bare)
    if not m:
        raise ValueError('no array of struct %s in shared-tests/lockless_demo.c' % st.group(1))
    end = lc.match_close(bare, m.end() - 1, '{', '}')
    rows = []
    i = m.end()
    while True:
        j = bare.find('{', i, end)
        if j < 0:
            break
        k = lc.match_close(bare, j, '{', '}')
        fields = {}
        pos = []
        for a, raw in zip(lc.split_args(bare[j + 1:k]), split_raw(text, bare, j + 1, k)):
            d = re.match(r'\.(\w+)\s*=\s*', a)
            if d:
                fields[d.group(1)] = raw[raw.index('=') + 1:].strip()
            else:
                pos.append(raw.strip())
        for n, v in zip(members, pos):
            fields.setdefault(n, v)
        which = fields.get('which', '')
        name = re.sub(r'^LP_(?:FLAVOR|OP)_', '', which)
        strs = []
        for key in ('c_api', 'rust_api'):
            lits = re.findall(r'"((?:\\.|[^"\\])*)"', fields.get(key, ''))
            if not lits:
                raise ValueError('%s[] entry at line %d: no %s string'
                                 % (m.group(1), text.count('\n', 0, j) + 1, key))
            strs.append(''.join(lits))
        rows.append((name, strs[0], strs[1], text.count('\n', 0, j) + 1))
        i = k + 1
    if not rows:
        raise ValueError('%s[] in shared-tests/lockless_demo.c has no entry' % m.group(1))
    return rows


def split_raw(text, bare, a, b):
    """The top-level comma-separated pieces of text[a:b], split where
    bare (comments and strings blanked) has its commas."""
    out, depth, cur = [], 0, a
    for i in range(a, b):
        c = bare[i]
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        elif c == ',' and depth == 0:
            out.append(text[cur:i])
            cur = i + 1
    if text[cur:b].strip():
        out.append(text[cur:b])
    return out

# ------------------------------------------------------------ API check

ORDERINGS = {'Full', 'Relaxed', 'Acquire', 'Release'}
SKIP = ('per flavor', 'nothing')
PROSE = {
    'c': {'own', 'the', 'compare', 'store', 'ulong', 'and', 'then'},
    'rust': {'own', 'guard', 'count', 'the', 'and', 'then'},
}
# C words that stand for a family of calls.
C_NOUNS = {'mutex': ('mutex_lock', 'mutex_lock_killable'),
           'spinlock': ('spin_lock',)}
# Rust type words and the type they are declared as.
TYPE_ALIAS = {'WaitQueue': 'CondVar'}


def column_terms(text, lang):
    """The terms of one column: [(kind, name, args, as written)], or None
    when the column names no API (SKIP)."""
    if text.strip().lower().startswith(SKIP):
        return None

    def sibling(m):
        a, pre, b, args = m.group(1), m.group(2), m.group(3), m.group(4) or ''
        if '_' in b or not pre:
            return '%s%s + %s%s' % (a, args, b, args)
        return '%s%s + %s%s%s' % (a, args, pre, b, args)
    text = re.sub(r'\b((\w+_)?\w+)/(\w+)(\([^)]*\))?', sibling, text)
    terms = []
    for w in re.split(r'\s*(?<!\+)\+(?!\+)\s*|\s*/\s*|\s*,\s*|\s+', text):
        w = w.strip()
        if not w or re.fullmatch(r'\(.*\)', w):
            continue    # a note in parentheses: "(own)", "(ulong)"
        if '++' in w or '--' in w:
            for op in ('++', '--'):
                if op in w:
                    terms.append(('op', op, [], w))
            continue
        if w == 'loop':
            terms.append(('loop', 'loop', [], w))
            continue
        m = re.fullmatch(r'([A-Za-z_][\w]*(?:<[^>]*>)?(?:::[A-Za-z_]\w*(?:\(\))?)*'
                         r'(?:\.[A-Za-z_]\w*(?:\(\))?)*)(?:\(([^)]*)\))?', w)
        if not m:
            terms.append(('?', w, [], w))
            continue
        path, args = m.group(1), [a.strip() for a in (m.group(2) or '').split(',') if a.strip()]
        parts = [re.sub(r'<.*?>|\(\)', '', p) for p in re.split(r'::|\.', path)]
        if lang == 'c':
            if path in PROSE['c']:
                continue
            if path in C_NOUNS:
                terms.append(('calls', path, list(C_NOUNS[path]), w))
            else:
                terms.append(('call', parts[-1], args, w))
            continue
        if len(parts) == 1 and parts[0] in PROSE['rust']:
            continue
        if len(parts) == 1 and parts[0][:1].isupper():
            terms.append(('type', parts[0], [], w))
            continue
        # Type::a().b: every method after the type; its last takes ARGS.
        first = 1 if parts[0][:1].isupper() else 0
        if first:
            terms.append(('type', parts[0], [], w))
        for k, name in enumerate(parts[first:]):
            last = k == len(parts) - first - 1
            terms.append(('method', name, args if last else [], w))
    return terms


def check_term(src, fs, term):
    """None if FS (with their helpers) do what TERM names, else what is
    missing."""
    kind, name, args, raw = term
    bodies = [f.body for f in fs]
    if kind == '?':
        return 'cannot read %r (scripts/patterns.py reads API names: see its docstring)' % raw
    if kind == 'loop':
        pat = r'\bloop\s*\{|\bwhile\b|\bfor\b' if fs and fs[0].rust else \
            r'\bfor\s*\(|\bwhile\s*\(|\bdo\s*\{'
        return None if any(re.search(pat, b) for b in bodies) else 'a loop'
    if kind == 'op':
        return None if any(name in b for b in bodies) else name
    if kind == 'calls':
        got = {c[0] for f in fs for c in calls_c(f.body)}
        return None if got & set(args) else name + ' (' + '/'.join(a + '()' for a in args) + ')'
    if kind == 'call':
        for f in fs:
            for cname, cargs, pos in calls_c(f.body):
                if cname == name or cname.endswith('_' + name):
                    return None
        return name + '()'
    if kind == 'type':
        ty = TYPE_ALIAS.get(name, name)
        decl = src.declared_as(ty)
        for f in fs:
            if re.search(r'\b%s\b' % re.escape(ty), f.body + getattr(f, 'signature', '')):
                return None
            for k, n, qual, a, pos in calls_rust(f.body):
                if k == 'method' and qual in decl:
                    return None
        return 'anything of type %s' % ty
    # A method (or path call, or function) NAME, with ARGS to match.
    found = []
    for f in fs:
        for k, n, qual, a, pos in calls_rust(f.body):
            if n == name and k in ('method', 'path', 'fn'):
                found.append((f, a))
    if not found:
        return raw if re.search(r'::|\.', raw) else name
    for arg in args:
        if arg in ORDERINGS:
            if not any(arg in [x.strip() for x in a] for f, a in found):
                return '%s(..., %s) (it calls %s only with %s)' % (
                    name, arg, name, ', '.join(sorted({x.strip() for f, a in found for x in a
                                                       if x.strip() in ORDERINGS})) or
                    'no ordering')
        elif re.fullmatch(r'&?\s*[A-Z]\w*(?:<.*>)?', arg):
            ty = TYPE_ALIAS.get(arg.lstrip('&').strip(), arg.lstrip('&').strip())
            ty = re.sub(r'<.*', '', ty)
            decl = src.declared_as(ty)
            if not any(lc.arg_name(x) in decl for f, a in found for x in a) and \
                    not any(re.search(r'\b%s\b' % ty, f.body) for f, a in found):
                return '%s(%s) (no argument of type %s)' % (name, arg, ty)
    return None


def check_demo(repo, out=print, rows=None):
    """The demo's API check; returns (passed, failed)."""
    src, pats = load(repo)
    passed = failed = 0
    try:
        rows = rows if rows is not None else demo_rows(repo)
    except ValueError as e:
        out('FAIL demo API columns: %s' % e)
        return 0, 1
    for p in pats:
        for f in p.cf + p.rf:
            if f.err:
                out('FAIL patterns.py %s: %s %s: %s' % (p.key, f.path, f.name, f.err))
                failed += 1
    for name, c_api, rust_api, line in rows:
        mine = [p for p in pats if name in p.demo]
        if not mine:
            out('FAIL demo row %s (lockless_demo.c:%d): no pattern of scripts/patterns.py '
                'names it in its demo rows' % (name, line))
            failed += 1
            continue
        for lang, col, text in (('c', 'C API', c_api), ('rust', 'Rust API', rust_api)):
            terms = column_terms(text, lang)
            fs = [f for p in mine for f in p.everything(lang)]
            entry = ', '.join(dict.fromkeys(f.func for p in mine for f in p.funcs(lang)))
            if terms is None:
                out('ok demo row %s, %s column "%s": names no API' % (name, col, text))
                passed += 1
                continue
            missing = [m for m in (check_term(src, fs, t) for t in terms) if m]
            if missing:
                out('FAIL demo row %s, %s column "%s": %s (and their helpers) never call %s'
                    % (name, col, text, entry, missing[0]))
                failed += 1
            else:
                out('ok demo row %s, %s column: %d name%s, all called by %s'
                    % (name, col, len(terms), '' if len(terms) == 1 else 's', entry))
                passed += 1
    return passed, failed


def main(argv):
    quiet = '-q' in argv[1:]
    argv = [a for a in argv if a != '-q']
    if len(argv) != 2:
        sys.exit('usage: patterns.py [-q] REPO   (the demo\'s API check; -q: failures only)')
    lines = []
    passed, failed = check_demo(argv[1], lines.append)
    for line in lines:
        if not quiet or not line.startswith('ok '):
            print(line)
    if quiet and passed:
        print('ok demo API columns: %d of %d columns name only APIs that the functions of '
              'their row call (scripts/patterns.py)' % (passed, passed + failed))
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
