#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""litmus_code.py: check that the litmus tests are about our code.

Each shared-tests/litmus/*.litmus header has a "Code:" section naming, for
processes of the test, the functions of c-module/ and rust-module/ that
they model, each with the ordered list of memory-model operations the
function is expected to perform, in source order:

    * Code:
    * P1 c-module/gadget.c lp_put_lockless
    *	fetch_sub.full(refcnt)
    * P1 rust-module/gadget.rs put_lockless
    *	fetch_sub.release+acquire(a)

This script extracts the same list from each named function's source and
fails, naming file, function and operation, when code and model disagree:
an operation missing, added, reordered or with another ordering.  It then
checks coverage: every function of both modules whose comment makes an
ordering claim must be named by some test, or listed, with the reason, in
shared-tests/litmus/unmodeled.txt.

Tokens are KIND[.ORDERING][(NAME)]: NAME is the last identifier of the
variable or lock operated on.  The vocabulary (which C and Rust calls map
to which token) is the VOCABULARY section below and README.md of the
litmus directory.  Tokens in [brackets] in a header are on another
flavor's branch of the same function: they must be in the source all the
same (the list is the whole function's), the brackets tell the reader the
model leaves them out.  The same holds for another registry mode's branch
(LOCK or RCU, see tryget-rcu.litmus).

Structure tokens.  Besides the operations, the list holds the branches,
loops and pins the models depend on (README "Branches, loops and
pins"): if(COND) else endif and switch(X) case(A,B) endswitch (Rust
match(X) case(PAT) endmatch, COND.then(|| ...) as if(COND) ... endif)
for a condition that names the registry mode, the flavor, locked,
was_rcu or PREEMPT_RT (RELEVANT; canon_cond() writes it), loop endloop
around every loop holding an operation, registry(T) for a Rust call of a
Registry method through type T, and pin for lp_owner_pin()/owner_pin().
So an inverted RCU test, a cmpxchg retry loop turned into one try or a
deleted pin fails the check.  They are checked against the code only:
code_for_body() drops them, as a model runs one path, loops unrolled.

A local assigned a RELEVANT test before the branch is read as that
test (resolve_locals()): locked = READ_ONCE(arena->flavor) ==
LP_FLAVOR_LOCKED; if (!locked) is if(!(flavor==LOCKED)).

Stalls.  The debug-only delay points (lp_delay(), lp_delay_atomic(),
.delay(), .delay_atomic(), Arena::delay*(), .stall(), .stall_atomic(),
any call whose arguments name an LP_DELAY_ point) and the blocks they
guard (if (lp_delay_on(...)) { ... }) order nothing: blank_delays()
removes them, call and arguments, block and all, before anything is
read, and the coverage scan does not count a stall function's comment
as a claim.

The body.  Each Code: operation of process Pn must also be in Pn's C
body in the litmus test, in the same order: a subsequence (the body may
do more, and an unrolled loop may match operations of several of its
iterations).  parse_body() reads the body into the same tokens (the LKMM
calls of BODY_CALLS and C_ATOMIC; a plain access *x to a parameter x is
read.plain(x) or set.plain(x); a call it does not know fails the test).
Where the model stands for a Code: operation with other operations, under
another name or not at all, the header says so, with the reason, in an
"Abstracted:" section after the Code: section, one rule per entry (a line
at the margin, continued on indented lines), "PROCESSES SPEC: REASON":

    * Abstracted:
    * P0,P1 mutex=list_lock count=refcnt: the owner's mutex, LKMM's
    *	spinlock, and Rust's name for the count
    * P0 unlink -> set.plain(onlist): list_del() is a plain store
    * P2 read.once(t_outstanding_credits) rmb read.once(t_outstanding_credits):
    *	the credits are jbd2-stop-credits-vs-commit.litmus's business

PROCESSES is P0 or P0,P2,...; SPEC is one of
  rename     NAME=BODYNAME ...    the code's NAME is the body's BODYNAME
  rewrite    RUN[, RUN...] -> TOKENS   each RUN stands for TOKENS
  leave-out  RUN[, RUN...]        the body does not have RUN
where a RUN is consecutive operations of a Code: list, written as there,
and TOKENS are the body's.  For each Code: entry of the process, the
[bracketed] operations (another flavor's branch) are dropped; then every
rewrite and leave-out, in header order, replaces each occurrence of its
runs among the operations no earlier rule replaced; then DEFINITIONS (the
kernel's own bodies of refcount_dec_and_test(), refcount_dec_not_one()
and smp_acquire__after_ctrl_dep()) and the renames apply to the rest.
A rule, run or rename that changes no operation fails, as does a rule
without a reason, so the section cannot go stale.

Rust lock guards unlock where Rust 2021 (the kernel's edition) drops
them: RustDrops says where, and SELFTEST holds Rust bodies with the lists
they must give (let _ = x.lock(); unlocks at once, a temporary guard at
the end of its statement, condition or match arm, a named one at drop()
or the end of its block, a let-borrowed one at the end of its block).
Every run checks them first, as one result; --selftest prints each.
A .read() or .write() is a lock only on a receiver declared RwLock or
RwSem in rust-module/ (a Refcount's .read() is refcount_read()).

usage: litmus_code.py REPO [TEST...]   check every test (make litmus does)
       litmus_code.py --selftest      the extractor's Rust drop points
       litmus_code.py REPO --show FILE FUNC   print the list extracted
       litmus_code.py REPO --body TEST        print each process's body
                      list and what each Code: entry asks of it
Output: "ok selftest ..." (or a FAIL per case), "ok TEST: Pn FILE FUNC"
/ "FAIL TEST: Pn FILE FUNC: reason" per (test, function) pair, "ok TEST:
Pn body ..." / "FAIL TEST: Pn body lacks TOKEN after TOKEN (line N)
(Code: FILE FUNC op K, ...)" per (test, process), a coverage line, then
"N passed, N failed"; exit 1 on any failure.
"""

import os
import re
import sys

# ------------------------------------------------------------ VOCABULARY

ORDER_SUFFIX = {"": "full", "_relaxed": "relaxed", "_acquire": "acquire",
                "_release": "release"}
RUST_ORDER = {"Relaxed": "relaxed", "Acquire": "acquire",
              "Release": "release", "Full": "full"}

# C atomic_t/atomic64_t/atomic_long_t ops: the canonical kind.  Void ops
# (add, sub) are unordered whatever their suffix; value-returning ops are
# fully ordered unless suffixed.  dec_and_test and add_return are the same
# RMW as fetch_sub/fetch_add (only the value returned differs).
C_ATOMIC = {
    "read": ("read", "once"), "set": ("set", "once"),
    "read_acquire": ("read", "acquire"), "set_release": ("set", "release"),
    "inc": ("add", "relaxed"), "add": ("add", "relaxed"),
    "dec": ("sub", "relaxed"), "sub": ("sub", "relaxed"),
    "inc_return": ("fetch_add", None), "add_return": ("fetch_add", None),
    "fetch_inc": ("fetch_add", None), "fetch_add": ("fetch_add", None),
    "dec_return": ("fetch_sub", None), "sub_return": ("fetch_sub", None),
    "fetch_dec": ("fetch_sub", None), "fetch_sub": ("fetch_sub", None),
    "dec_and_test": ("fetch_sub", None), "sub_and_test": ("fetch_sub", None),
    "cmpxchg": ("cmpxchg", None), "try_cmpxchg": ("cmpxchg", None),
    "xchg": ("xchg", None),
    "inc_not_zero": ("inc_not_zero", None),
    "add_unless": ("inc_not_zero", None),
}

# Other C calls: name -> list of (kind, ordering or None, arg index of the
# name or None).  kref_put_mutex()/kref_put_lock() are
# refcount_dec_and_mutex_lock()/refcount_dec_and_lock(): dec_not_one, the
# lock, dec_and_test under it, the unlock if that was not the last.
REL_ACQ = "release+acquire"
C_CALLS = {
    "READ_ONCE": [("read", "once", 0)], "WRITE_ONCE": [("set", "once", 0)],
    "smp_load_acquire": [("read", "acquire", 0)],
    "smp_store_release": [("set", "release", 0)],
    "cmpxchg": [("cmpxchg", "full", 0)], "xchg": [("xchg", "full", 0)],
    "cmpxchg_relaxed": [("cmpxchg", "relaxed", 0)],
    "try_cmpxchg": [("cmpxchg", "full", 0)],
    "try_cmpxchg_relaxed": [("cmpxchg", "relaxed", 0)],
    "try_cmpxchg_acquire": [("cmpxchg", "acquire", 0)],
    "try_cmpxchg_release": [("cmpxchg", "release", 0)],
    "smp_mb": [("mb", None, None)], "smp_rmb": [("rmb", None, None)],
    "smp_wmb": [("wmb", None, None)],
    "smp_acquire__after_ctrl_dep": [("acquire_ctrl", None, None)],
    "refcount_inc": [("add", "relaxed", 0)],
    "refcount_inc_not_zero": [("inc_not_zero", "relaxed", 0)],
    "refcount_dec_not_one": [("dec_not_one", "release", 0)],
    "refcount_dec_and_test": [("fetch_sub", REL_ACQ, 0)],
    "refcount_dec": [("sub", "release", 0)],
    "refcount_read": [("read", "once", 0)],
    "kref_get": [("add", "relaxed", 0)],
    "kref_get_unless_zero": [("inc_not_zero", "relaxed", 0)],
    "kref_put": [("fetch_sub", REL_ACQ, 0)],
    "kref_read": [("read", "once", 0)],
    "kref_put_mutex": [("dec_not_one", "release", 0), ("lock", None, 2),
                       ("fetch_sub", REL_ACQ, 0), ("unlock", None, 2)],
    "kref_put_lock": [("dec_not_one", "release", 0), ("lock", None, 2),
                      ("fetch_sub", REL_ACQ, 0), ("unlock", None, 2)],
    "mutex_lock": [("lock", None, 0)], "mutex_unlock": [("unlock", None, 0)],
    "mutex_lock_killable": [("lock", None, 0)],
    "spin_lock": [("lock", None, 0)], "spin_unlock": [("unlock", None, 0)],
    "xa_lock": [("lock", None, 0)], "xa_unlock": [("unlock", None, 0)],
    "down_write": [("lock", None, 0)], "up_write": [("unlock", None, 0)],
    "write_lock": [("lock", None, 0)], "write_unlock": [("unlock", None, 0)],
    "down_read": [("lock_read", None, 0)], "up_read": [("unlock_read", None, 0)],
    "read_lock": [("lock_read", None, 0)],
    "read_unlock": [("unlock_read", None, 0)],
    # xa_erase() takes the xarray's own lock around the erase.
    "xa_erase": [("lock", None, 0), ("erase", None, 0), ("unlock", None, 0)],
    "xa_store": [("store_entry", None, 0)],
    # RCU: xa_load() reads the slot with rcu_dereference(); kfree_rcu()
    # frees after a grace period, which a model writes synchronize_rcu()
    # before the free's stores.
    "xa_load": [("read", "once", 0)],
    "rcu_read_lock": [("rcu_read_lock", None, None)],
    "rcu_read_unlock": [("rcu_read_unlock", None, None)],
    "synchronize_rcu": [("synchronize_rcu", None, None)],
    "kfree_rcu": [("synchronize_rcu", None, None)],
    # Ours: the get-unless-zero of TRYGET, atomic_inc_not_zero() or
    # kref_get_unless_zero() by flavor (its own Code: entry has both).
    "lp_gadget_get_unless_zero": [("inc_not_zero", "relaxed", 0)],
    "list_del": [("unlink", None, None)],
    # Ours: lp_kids_lock() takes the lock of the flavor's weak list.
    "lp_kids_lock": [("lock", None, 0)],
    "lp_kids_unlock": [("unlock", None, 0)],
    "list_del_init": [("unlink", None, None)],
    "prepare_to_wait": [("prepare_to_wait", None, 0)],
    # The same queueing under the wait-queue lock, for a killable or
    # interruptible wait (it also checks for a signal) and an exclusive one.
    "prepare_to_wait_event": [("prepare_to_wait", None, 0)],
    "prepare_to_wait_exclusive": [("prepare_to_wait", None, 0)],
    "wake_up": [("wake_up", None, 0)],
}

# Rust method calls: name -> (kind, ordering source).  "arg" takes the
# ordering from the call's last argument (Relaxed/Acquire/Release/Full).
RUST_METHODS = {
    "load": ("read", "arg"), "store": ("set", "arg"),
    "cmpxchg": ("cmpxchg", "arg"), "xchg": ("xchg", "arg"),
    "fetch_add": ("fetch_add", "arg"), "fetch_sub": ("fetch_sub", "arg"),
    "add": ("add", "relaxed"),
    # Refcount (refcount.h through bindings and patch 0001)
    "inc": ("add", "relaxed"), "inc_not_zero": ("inc_not_zero", "relaxed"),
    "dec_not_one": ("dec_not_one", "release"),
    "dec": ("sub", "release"),
    "dec_and_test": ("fetch_sub", REL_ACQ),
    # the registry's XArray, under its lock (Gadget::release)
    "remove": ("erase", None),
    # CondVar::with_wait()'s entry (kernel::sync::WaitEntry) and
    # CondVar::notify_one(), which is C's wake_up()
    "prepare_to_wait": ("prepare_to_wait", None),
    "notify_one": ("wake_up", None),
}
# Rust path calls: name -> list of (kind, ordering, arg index of the name).
RUST_PATHS = {
    "Arc::clone": [("add", "relaxed", 0)],
    # From<ArcBorrow> for Arc: a clone of the borrowed Arc (refcount_inc()).
    "Arc::from": [("add", "relaxed", 0)],
    "Arc::drop_with": [("fetch_sub", REL_ACQ, 0)],
    # Patches 0009/0010: the free after a grace period (see kfree_rcu).
    "Arc::drop_with_rcu": [("fetch_sub", REL_ACQ, 0), ("synchronize_rcu", None, None)],
    "KBox::drop_rcu": [("synchronize_rcu", None, None)],
    "Arc::from_raw_inc_not_zero": [("inc_not_zero", "relaxed", 0)],
    "core::ptr::read_volatile": [("read", "once", 0)],
    "list_remove": [("unlink", None, None)],
}
RUST_BARRIER = {"Read": "rmb", "Write": "wmb", "Full": "mb"}

# ------------------------------------------------------------ source text


def strip(src, rust):
    """Blank out comments and string/char literals, keeping offsets."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('"' + " " * (j - i - 1) + '"')
            i = j + 1
        elif c == "'" and not rust:
            j = i + 1
            while j < n and src[j] != "'":
                j += 2 if src[j] == "\\" else 1
            out.append(" " * (j - i + 1))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def match_close(text, i, open_c, close_c):
    """Index of the bracket closing the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced %s" % open_c)


def find_function(path, text, func):
    """(start, end) of the body (inside the braces) of FUNC in TEXT."""
    span, err = find_definition(path, text, func)
    return (span[1:] if span else None), err


def find_definition(path, text, func):
    """(definition start, body start, body end) of FUNC in TEXT: where
    its definition's first line starts, and its body (inside the braces),
    as find_function() gives it (scripts/patterns.py shows the whole
    definition)."""
    rust = path.endswith(".rs")
    owner = None
    if "::" in func:
        owner, func = func.rsplit("::", 1)
    if rust:
        pat = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:unsafe\s+)?fn\s+%s\b"
                         % re.escape(func), re.M)
    else:
        pat = re.compile(r"^[A-Za-z_][^;{}()]*\b%s\(" % re.escape(func), re.M)
    hits = []
    for m in pat.finditer(text):
        if rust and owner:
            impls = [x for x in re.finditer(r"^\s*(?:unsafe\s+)?impl\b[^{;]*\{", text[:m.start()], re.M)]
            if not impls or not re.search(r"\b%s\b" % re.escape(owner), impls[-1].group(0)):
                continue
        # The body: the first "{" after the parameter list (C: at column 0).
        if rust:
            paren = text.index("(", m.end())
            close = match_close(text, paren, "(", ")")
            brace = text.index("{", close)
            if ";" in text[close:brace]:
                continue
        else:
            paren = m.end() - 1
            close = match_close(text, paren, "(", ")")
            brace = text.find("\n{", close)
            # A prototype ends in ";" before any body: not a definition.
            if brace < 0 or ";" in text[close:brace]:
                continue
            brace += 1
        start = text.rfind("\n", 0, m.start() + len(m.group(0)) - len(m.group(0).lstrip())) + 1
        hits.append((start, brace + 1, match_close(text, brace, "{", "}")))
    if not hits:
        return None, "no function %s%s" % (owner + "::" if owner else "", func)
    if len(hits) > 1 and rust and not owner:
        # A bare name is the free function, if methods share its name.
        free = [h for h in hits if not any(
            b.start() < h[0] < match_close(text, b.end() - 1, "{", "}")
            for b in re.finditer(r"^(?:unsafe\s+)?(?:impl|trait|pub(?:\([a-z]+\))?\s+"
                                 r"(?:unsafe\s+)?trait)\b[^{;]*\{", text[:h[0]], re.M))]
        hits = free if len(free) == 1 else hits
    if len(hits) > 1:
        return None, "%d functions named %s: qualify it as Type::%s" % (len(hits), func, func)
    return hits[0], None


def last_ident(expr):
    ids = re.findall(r"[A-Za-z_]\w*", expr)
    return ids[-1] if ids else None


def split_args(argtext):
    args, depth, cur = [], 0, []
    for c in argtext:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        args.append("".join(cur).strip())
    return args


NONAME = {"erase", "unlink"}


def tok(kind, order, name):
    """KIND[.ORDER][(NAME)], canonical: a relaxed load or store is LKMM's
    READ_ONCE()/WRITE_ONCE() ("once"), a relaxed fetch_add/fetch_sub is
    the same RMW as the void atomic_add()/atomic_sub()."""
    if kind in NONAME:
        name = None
    if kind in ("read", "set") and order == "relaxed":
        order = "once"
    if kind in ("fetch_add", "fetch_sub") and order == "relaxed":
        kind = kind[len("fetch_"):]
    t = kind
    if order:
        t += "." + order
    if name:
        t += "(%s)" % name
    return t

# ------------------------------------------------------------ structure

# The debug-only stalls that widen race windows (lp_delay(arena,
# LP_DELAY_...), lp_delay_atomic(); arena.delay(), arena.delay_atomic(),
# Arena::delay*(), a Delay's stall()/stall_atomic(): any call named so, or
# whose arguments name an LP_DELAY_ point) and the debug-only blocks they
# guard (if (lp_delay_on(arena, LP_DELAY_...)) { ... }, if d.on(...) {
# ... }: an if without else whose condition names a delay point): they
# order nothing, so the check reads past them, call and arguments, block
# and all, as if they were not there.
C_DELAY = re.compile(r"\blp_delay\w*\s*\(")
RUST_DELAY = re.compile(r"(?:\.\s*|(?<![\w:])(?:\w+::)*(?:Arena|Delay)::)(?:delay|stall)\w*\s*\(")
DELAY_POINT = re.compile(r"\bLP_DELAY_[A-Z_]+|\bdelay\w*_on\b")
ANY_CALL = re.compile(r"(?:\.\s*)?\b[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*\s*\(")


def blank_delays(body, rust):
    """BODY with every stall call and every block a stall guards blanked
    (C_DELAY, RUST_DELAY, DELAY_POINT), offsets kept."""
    spans = []
    for m in re.finditer(r"\bif\b", body):
        if rust:
            k = body.find("{", m.end())
            if k < 0 or not DELAY_POINT.search(body[m.end():k]) or ";" in body[m.end():k]:
                continue
            end = match_close(body, k, "{", "}") + 1
        else:
            p = body.find("(", m.end())
            if p < 0 or body[m.end():p].strip():
                continue
            q = match_close(body, p, "(", ")")
            if not DELAY_POINT.search(body[p:q]):
                continue
            k = q + 1
            while k < len(body) and body[k].isspace():
                k += 1
            if k < len(body) and body[k] == "{":
                end = match_close(body, k, "{", "}") + 1
            else:
                end = body.find(";", k) + 1
        if re.match(r"\s*else\b", body[end:]):
            continue
        spans.append((m.start(), end))
    pat = RUST_DELAY if rust else C_DELAY
    for m in list(pat.finditer(body)) + [c for c in ANY_CALL.finditer(body)]:
        close = match_close(body, m.end() - 1, "(", ")")
        args = body[m.end():close]
        # A call whose arguments hold a block (a closure) is not a stall:
        # the stall is a call inside the block, blanked on its own.
        if pat.match(body, m.start()) or (DELAY_POINT.search(args) and "{" not in args):
            spans.append((m.start(), close + 1))
    out, last = [], 0
    for a, b in sorted(spans):
        if b <= last:
            continue
        a = max(a, last)
        out.append(body[last:a])
        out.append(re.sub(r"[^\n]", " ", body[a:b]))
        last = b
    out.append(body[last:])
    return "".join(out)


# A branch the models depend on: its condition (or switch/match scrutinee)
# names the registry mode, the flavor, the txn's "locked" or PREEMPT_RT
# (the Rust flavor's KIDS, a Registry type).
RELEVANT = re.compile(r"registry_mode|\bregistry\b|\bwas_rcu\b|\brcu\b|flavor|\blocked\b|is_locked|PREEMPT_RT|\bKIDS\b|\bRegistry\b")
# The tokens of the structure (README "Branches, loops and pins"): checked
# against the code, never against a litmus body.
STRUCTURE = re.compile(r"(?:if|switch|case|match|registry)\(.*\)$|"
                       r"(?:else|endif|endswitch|endmatch|loop|endloop|pin)$")


def resolve_locals(cond, body, pos, rust):
    """COND with each local named in it that BODY assigned (last before
    POS) a RELEVANT test (== or !=) written as that test, in parentheses:
    rcu = READ_ONCE(arena->registry_mode) == LP_REGISTRY_RCU; if (rcu)
    is if((READ_ONCE(arena->registry_mode) == LP_REGISTRY_RCU)), so an
    inverted test in the assignment is an inverted test too."""
    def value(m):
        name = m.group(0)
        pat = (r"\blet\s+(?:mut\s+)?%s\s*(?::[^=;]*)?=(?!=)([^;]*);" if rust else
               r"(?<![\w.>])%s\s*=(?!=)([^;]*);") % re.escape(name)
        found = [a for a in re.finditer(pat, body[:pos])]
        if not found or not RELEVANT.search(found[-1].group(1)) or \
                not re.search(r"[=!]=", found[-1].group(1)):
            return name
        return "(%s)" % found[-1].group(1).strip()
    return re.sub(r"(?<![\w.>:])[a-z_]\w*(?!\s*[(\w])", value, cond)


def canon_cond(cond):
    """A condition as a token's NAME: no spaces, READ_ONCE() and paths
    read through to the field, lp_flavor_of() as flavor, is_locked() as
    locked, IS_ENABLED()/cfg!() as the option, LP_*_ prefixes off:
    READ_ONCE(arena->registry_mode) == LP_REGISTRY_RCU is
    registry_mode==RCU."""
    s = re.sub(r"\s+", "", cond)
    s = re.sub(r"\b(?:IS_ENABLED|cfg!)\(CONFIG_(\w+)\)", r"\1", s)
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r"\b(?:READ_ONCE|smp_load_acquire)\(([^()]*)\)", r"\1", s)
        s = re.sub(r"\blp_flavor_of\([^()]*\)", "flavor", s)
        s = re.sub(r"\bis_locked\([^()]*\)", "locked", s)
    s = re.sub(r"(?:[A-Za-z_]\w*(?:\(\))?(?:->|\.))+(?=[A-Za-z_])", "", s)
    s = re.sub(r"\b(?:uapi::)?LP_(?:REGISTRY|FLAVOR|TXN)_", "", s)
    s = re.sub(r"\blp_", "", s)
    while s.startswith("(") and s.endswith(")") and match_close(s, 0, "(", ")") == len(s) - 1:
        s = s[1:-1]
    return s


class CStructure:
    """The branch and loop tokens of a C function body: if(COND) else
    endif and switch(X) case(A,B) endswitch for a RELEVANT condition,
    loop endloop around every for/while/do and *for_each*() { } (kept by
    keep_structure() only if an operation is inside).  A backward goto is
    not seen as a loop, nor a return as the end of a branch."""

    def __init__(self, body):
        self.b, self.ev, self.switch, self.label_end = body, [], [], -1

    def ws(self, i):
        while i < len(self.b) and self.b[i].isspace():
            i += 1
        return i

    def word(self, i):
        m = re.match(r"[A-Za-z_]\w*", self.b[i:i + 64])
        return m.group(0) if m else None

    def run(self):
        i = 0
        while i < len(self.b):
            j = self.stmt(i, 0)
            i = j if j > i else i + 1
        return self.ev

    def block(self, i, depth):
        i += 1
        while True:
            i = self.ws(i)
            if i >= len(self.b):
                return i
            if self.b[i] == "}":
                return i + 1
            j = self.stmt(i, depth)
            i = j if j > i else i + 1

    def paren(self, i):
        p = self.b.index("(", i)
        return p, match_close(self.b, p, "(", ")")

    def loop(self, start, end, depth):
        g = ("loop", start, end)
        self.ev.append((start, 0, "loop", g))
        self.ev.append((end, 100 - depth, "endloop", g))

    def stmt(self, i, depth):
        b = self.b
        i = self.ws(i)
        if i >= len(b):
            return i
        c = b[i]
        if c == "{":
            return self.block(i, depth)
        if c in ";}":
            return i + 1 if c == ";" else i
        if c == "#":
            j = b.find("\n", i)
            return len(b) if j < 0 else j
        w = self.word(i)
        if w == "if":
            p, q = self.paren(i)
            cond = resolve_locals(b[p + 1:q], b, i, False)
            rel = RELEVANT.search(cond)
            if rel:
                self.ev.append((q, 0, "if(%s)" % canon_cond(cond), None))
            e = self.stmt(q + 1, depth + 1)
            j = self.ws(e)
            if self.word(j) == "else":
                if rel:
                    self.ev.append((j, 0, "else", None))
                e = self.stmt(j + 4, depth + 1)
            if rel:
                self.ev.append((e - 1, 100 - depth, "endif", None))
            return e
        if w in ("while", "for"):
            p, q = self.paren(i)
            e = self.stmt(q + 1, depth + 1)
            self.loop(i, e - 1, depth)
            return e
        if w == "do":
            e = self.stmt(i + 2, depth + 1)
            p, q = self.paren(self.ws(e))
            k = b.index(";", q)
            self.loop(i, k, depth)
            return k + 1
        if w == "switch":
            p, q = self.paren(i)
            rel = bool(RELEVANT.search(b[p + 1:q]))
            if rel:
                self.ev.append((q, 0, "switch(%s)" % canon_cond(b[p + 1:q]), None))
            self.switch.append(rel)
            e = self.block(self.ws(q + 1), depth + 1)
            self.switch.pop()
            if rel:
                self.ev.append((e - 1, 100 - depth, "endswitch", None))
            return e
        if w in ("case", "default"):
            k = b.index(":", i)
            if self.switch and self.switch[-1]:
                label = "default" if w == "default" else canon_cond(b[i + 4:k])
                if self.label_end >= 0 and not b[self.label_end:i].strip() and \
                        self.ev and self.ev[-1][2].startswith("case("):
                    pos, rank, t, g = self.ev.pop()
                    self.ev.append((pos, rank, t[:-1] + "," + label + ")", g))
                else:
                    self.ev.append((i, 0, "case(%s)" % label, None))
                self.label_end = k + 1
            return k + 1
        m = re.match(r"[A-Za-z_]\w*\s*:(?!:)", b[i:i + 80])
        if m and w not in ("return", "else"):
            return i + m.end()     # a label
        # A simple statement, up to its ";"; a *for_each*(...) { } is a loop.
        j, par = i, 0
        while j < len(b):
            ch = b[j]
            if ch in "([":
                par += 1
            elif ch in ")]":
                par -= 1
            elif ch == ";" and par == 0:
                return j + 1
            elif ch == "}" and par == 0:
                return j
            elif ch == "{" and par == 0:
                if re.search(r"\w*for_each\w*\s*\(.*\)\s*$", b[i:j], re.S):
                    e = self.block(j, depth + 1)
                    self.loop(i, e - 1, depth)
                    return e
                j = match_close(b, j, "{", "}")
            j += 1
        return j


def c_structure(body):
    return CStructure(body).run()


def keep_structure(events, positions):
    """(pos, rank, token) of EVENTS: a loop's tokens only if an operation
    (one of POSITIONS) is inside it."""
    out = []
    for pos, rank, t, g in events:
        if g and not any(g[1] <= p <= g[2] for p in positions):
            continue
        out.append((pos, rank, t))
    return out


def rust_structure(body):
    """As CStructure for Rust: if COND {} else {} (not if let) and match X
    {} with arms case(PAT), for a RELEVANT condition; COND.then(|| ...)
    as if(COND) ... endif; loop/while/for (kept only if an operation is
    inside).  Events (pos, rank, seq, token, group): the if/match token
    after the condition's temporaries drop (rank 5), the end tokens after
    the block's own drops (rank 10), inner before outer."""
    toks = [(m.group(0), m.start(), m.end()) for m in RUST_TOKEN.finditer(body)]
    at = {s: k for k, (_, s, _) in enumerate(toks)}
    ev = []

    def find_open(k):
        depth = 0
        while k < len(toks):
            t = toks[k][0]
            if t in "([" and depth >= 0:
                depth += 1
            elif t in ")]":
                depth -= 1
            elif t == "{" and depth == 0:
                return k
            elif t in (";", "=>") and depth == 0:
                return None
            k += 1
        return None

    def if_end(k):
        j = find_open(k + 1)
        close = match_close(body, toks[j][1], "{", "}")
        n = at.get(close, 0) + 1
        if n < len(toks) and toks[n][0] == "else":
            if n + 1 < len(toks) and toks[n + 1][0] == "if":
                return if_end(n + 1)
            return match_close(body, toks[n + 1][1], "{", "}")
        return close

    for k, (t, s, e) in enumerate(toks):
        prev = toks[k - 1][0] if k else ""
        if t in ("loop", "while", "for") and prev not in (".", "::"):
            j = k + 1 if t == "loop" else find_open(k + 1)
            if j is None or toks[j][0] != "{":
                continue
            close = match_close(body, toks[j][1], "{", "}")
            g = ("loop", s, close)
            ev.append((s, 0, 0, "loop", g))
            ev.append((close, 10, -s, "endloop", g))
        elif t == "if" and k + 1 < len(toks) and toks[k + 1][0] != "let":
            j = find_open(k + 1)
            if j is None:
                continue
            cond = resolve_locals(body[e:toks[j][1]], body, s, True)
            if not RELEVANT.search(cond):
                continue
            close = match_close(body, toks[j][1], "{", "}")
            ev.append((toks[j][1], 5, 0, "if(%s)" % canon_cond(cond), None))
            n = at.get(close, 0) + 1
            if n < len(toks) and toks[n][0] == "else":
                ev.append((toks[n][1], 0, 0, "else", None))
            ev.append((if_end(k), 10, -s, "endif", None))
        elif t == "match":
            j = find_open(k + 1)
            if j is None or not RELEVANT.search(body[e:toks[j][1]]):
                continue
            close = match_close(body, toks[j][1], "{", "}")
            ev.append((toks[j][1], 5, 0, "match(%s)" % canon_cond(body[e:toks[j][1]]), None))
            a = j + 1
            while a < len(toks) and toks[a][1] < close:
                depth, b = 0, a
                while b < len(toks) and not (depth == 0 and toks[b][0] == "=>"):
                    depth += toks[b][0] in "([{"
                    depth -= toks[b][0] in ")]}"
                    b += 1
                ev.append((toks[a][1], 0, 0, "case(%s)" % canon_cond(
                    body[toks[a][1]:toks[b][1]]), None))
                b += 1
                if toks[b][0] == "{":
                    b = at[match_close(body, toks[b][1], "{", "}")] + 1
                    if toks[b][0] == ",":
                        b += 1
                else:
                    depth = 0
                    while toks[b][1] < close and not (depth == 0 and toks[b][0] == ","):
                        depth += toks[b][0] in "([{"
                        depth -= toks[b][0] in ")]}"
                        b += 1
                    if toks[b][1] < close:
                        b += 1
                a = b
            ev.append((close, 10, -s, "endmatch", None))
        elif t == "then" and prev == "." and k + 1 < len(toks) and toks[k + 1][0] == "(":
            m = re.search(r"([A-Za-z_]\w*(?:\([^()]*\))?)\s*\.\s*$", body[:s])
            if not m or not RELEVANT.search(m.group(1)):
                continue
            close = match_close(body, toks[k + 1][1], "(", ")")
            ev.append((s, 0, 0, "if(%s)" % canon_cond(m.group(1)), None))
            ev.append((close, 10, -s, "endif", None))
    for m in re.finditer(r"(?<![\w:])((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)::"
                         r"(?:free_box|drop_arc|get_unless_zero)\s*\(", body):
        ev.append((m.start(), 0, 0, "registry(%s)" % m.group(1), None))
    for m in re.finditer(r"(?<![\w:.])owner_pin\s*\(", body):
        ev.append((m.start(), 0, 0, "pin", None))
    return ev


# ------------------------------------------------------------ extraction


def atomic_name(name):
    """The match of an atomic_t call's NAME: group 1 the operation (a key
    of C_ATOMIC: atomic_read_acquire() is read_acquire, not read with a
    suffix), group 2 its ordering suffix."""
    return (re.fullmatch(r"atomic(?:64|_long)?_(read_acquire|set_release)()", name) or
            re.fullmatch(r"atomic(?:64|_long)?_(\w+?)(_relaxed|_acquire|_release)?", name))


def extract_c(body, structure=False):
    """Tokens in source order; with STRUCTURE, the branch, loop and pin
    tokens too (c_structure())."""
    body = blank_delays(body, False)
    ops = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", body):
        name = m.group(1)
        paren = m.end() - 1
        args = split_args(body[paren + 1:match_close(body, paren, "(", ")")])
        am = atomic_name(name)
        if am and am.group(1) in C_ATOMIC and name not in C_CALLS:
            kind, order = C_ATOMIC[am.group(1)]
            if order is None:
                order = ORDER_SUFFIX[am.group(2) or ""]
            # atomic_add(i, v), atomic_cmpxchg(v, o, n): the atomic is the
            # argument that takes an address (or the first).
            var = next((a for a in args if a.startswith("&")), args[0] if args else "")
            if am.group(1) in ("try_cmpxchg",):
                var = args[0]
            ops.append((m.start(), tok(kind, order, last_ident(var))))
        elif name in C_CALLS:
            for kind, order, idx in C_CALLS[name]:
                nm = last_ident(args[idx]) if idx is not None and idx < len(args) else None
                ops.append((m.start(), tok(kind, order, nm)))
    if not structure:
        return [t for _, t in sorted(ops, key=lambda x: x[0])]
    events = [(p, 0, t) for p, t in ops]
    events += [(m.start(), 0, "pin") for m in re.finditer(r"\blp_owner_pin\s*\(", body)]
    events += keep_structure(c_structure(body), [p for p, _ in ops])
    return [t for _, _, t in sorted(events, key=lambda e: e[:2])]


TRANSPARENT = {"as_atomic", "as_ref", "get_ref", "arena", "as_ptr", "get", "lock"}


def receiver(body, dot):
    """The name a method call at BODY[dot] == '.' operates on: the last
    field of its receiver, looking through calls that only convert
    (self.refcnt.as_atomic().load() operates on refcnt)."""
    j = dot
    while True:
        while j > 0 and body[j - 1].isspace():
            j -= 1
        if j > 0 and body[j - 1] == ")":
            k = body.rfind("(", 0, j - 1)
            m = re.search(r"\.\s*([A-Za-z_]\w*)\s*$", body[:k])
            if m and m.group(1) in TRANSPARENT:
                j = m.start()
                continue
            j = k
        m = re.search(r"([A-Za-z_]\w*)\s*$", body[:j])
        return m.group(1) if m else None


def arg_name(expr):
    """The name an argument expression stands for (through converting calls)."""
    expr = expr.strip()
    if expr.endswith(")"):
        return receiver(expr + ".", len(expr))
    return last_ident(expr)


# Rust tokens: char literals, lifetimes, identifiers, numbers, the
# multi-character operators that matter here, any other character.
RUST_TOKEN = re.compile(r"'(?:\\.|[^\\'\n])'|'[A-Za-z_]\w*|[A-Za-z_]\w*|\d\w*|"
                        r"::|=>|->|==|!=|<=|>=|&&|\|\||\.\.=|\.\.|<<=|>>=|[-+*/%^&|]=|\S")
RUST_BLOCKLIKE = {"if", "match", "loop", "while", "for", "unsafe"}
RUST_ITEMS = {"fn", "struct", "enum", "impl", "use", "mod", "static", "type", "trait"}
# After these an expression expects an operand: "|" there opens a closure,
# "{" a block, and after anything else "|" is an operator and "{" a
# struct literal's.
RUST_OPERAND_AFTER = {"=", "==", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "%",
                      "&", "&&", "|", "||", "^", "!", "..", "..=", "=>", ":", "return",
                      "break", "in", "as", "mut", "move", "+=", "-=", "*=", "/=", "%=",
                      "&=", "|=", "^=", "<<=", ">>=", "->", "else"}


class RustDrops:
    """Where Rust (edition 2021, the kernel's --edition) drops each lock
    guard of a function body.  A guard is the value of a lock call, as
    given in CALLS: {start: (end, unlock token)}.  It is dropped

    - bound by let/if let/while let to a name (NAME, mut NAME, Some(NAME)),
      the call's value reaching the binding through nothing but closing
      parentheses (x.lock(), cond.then(|| x.lock())): at drop(NAME) in
      its scope, else at the end of the block the binding is in;
    - bound to "_" (let _ = x.lock();), or a temporary (x.lock().f = 1,
      *x.lock() += 1, upgrade(&x.lock(), id)): at the end of its
      temporary scope: the statement, an if/while condition, a match
      guard or arm, the body of an if/else/while/loop/for, a closure body
      or the function body; the scrutinee of if let, while let and match
      is not one (its temporaries live to the end of the enclosing
      statement, while let's to the end of each iteration), nor is a plain
      block's tail expression (to the end of the enclosing statement, after
      the block's own bindings);
    - borrowed by a let, let x = &x.lock().f; or &*x.lock(): extended to
      the end of the let's block.

    Not seen: early exits (return, ?, break, continue drop what is live
    there too; the list shows the drop at the block's end only), the
    second operand of && and ||, and a guard moved elsewhere than a
    binding (returned from a match arm or block, passed by value)."""

    def __init__(self, body, calls):
        self.body, self.calls = body, calls
        self.toks = [(m.group(0), m.start(), m.end()) for m in RUST_TOKEN.finditer(body)]
        self.i, self.seq = 0, 0
        self.events = []   # (pos, seq, token)
        self.frames = []   # [kind, [guard start...]]
        self.blocks = []   # [[name or None, unlock token, dropped]...]

    # -- helpers
    def tok(self, k=0):
        j = self.i + k
        return self.toks[j][0] if 0 <= j < len(self.toks) else None

    def pos(self):
        return self.toks[self.i][1] if self.i < len(self.toks) else len(self.body)

    def emit(self, pos, token):
        self.seq += 1
        self.events.append((pos, self.seq, token))

    def flows(self, start, end):
        """The guard of the call at START is the value of what ends at END."""
        return re.fullmatch(r"[)\s]*", self.body[self.calls[start][0]:end]) is not None

    def push_frame(self, kind):
        self.frames.append([kind, []])

    def close_frame(self, pos, lift=None):
        """End the innermost temporary scope at POS: its guards are
        dropped, last made first, but those LIFT(start) says live on."""
        kind, guards = self.frames.pop()
        for g in reversed(guards):
            if lift and lift(g) and self.frames:
                self.frames[-1][1].append(g)
            else:
                self.emit(pos, self.calls[g][1])

    def close_block(self, pos):
        for name, token, dropped in reversed(self.blocks.pop()):
            if not dropped:
                self.emit(pos, token)

    def bind(self, pattern, start, end, guards):
        """Guards of GUARDS (made between START and END, the initializer
        or scrutinee) that PATTERN binds by name, or that a let extends:
        returns them as block bindings, leaving the rest in GUARDS."""
        m = re.fullmatch(r"\s*(?:Some\s*\(\s*)?(?:mut\s+)?([A-Za-z_]\w*)\s*\)?\s*", pattern)
        name = m.group(1) if m and m.group(1) != "_" else None
        init = self.body[start:end]
        bound = []
        for g in list(guards):
            if not start <= g < end:
                continue
            ext = init[:g - start] + ".GUARD" + self.body[self.calls[g][0]:end]
            if name and self.flows(g, end):
                bound.append([name, self.calls[g][1], False])
            elif re.fullmatch(r"\s*&\s*(?:mut\s+)?[*\s]*[\w.()\s]*\.GUARD"
                              r"(?:\s*\.\s*\w+(?!\s*\())*\s*", ext):
                bound.append([None, self.calls[g][1], False])
            else:
                continue
            guards.remove(g)
        return bound

    def skip_to(self, stops):
        """Skip balanced tokens up to one of STOPS at depth 0."""
        depth = 0
        while self.i < len(self.toks):
            t = self.tok()
            if depth == 0 and t in stops:
                return
            if t in "([{":
                depth += 1
            elif t in ")]}":
                if depth == 0:
                    return
                depth -= 1
            self.i += 1

    # -- grammar
    def run(self):
        self.push_frame("fn")
        self.blocks.append([])
        self.statements()
        end = len(self.body)
        while len(self.blocks):
            self.close_block(end)
        while self.frames:
            self.close_frame(end)
        return self.events

    def statements(self):
        while self.i < len(self.toks) and self.tok() != "}":
            before = self.i
            self.statement()
            if self.i == before:
                self.i += 1

    def statement(self):
        t = self.tok()
        if t == ";":
            self.i += 1
        elif t == "#":
            self.i += 1
            if self.tok() == "!":
                self.i += 1
            if self.tok() == "[":
                self.group("[", "]")
        elif t in RUST_ITEMS or (t == "const" and self.tok(1) != "{"):
            self.skip_to({";", "{"})
            if self.tok() == "{":
                self.group("{", "}", skip=True)
            elif self.tok() == ";":
                self.i += 1
        elif t == "let":
            self.let()
        else:
            self.push_frame("stmt")
            if t in RUST_BLOCKLIKE or t == "{" or (t.startswith("'") and self.tok(1) == ":"):
                end = self.blocklike()
                if self.tok() not in (".", "?"):
                    if self.tok() == ";":
                        self.close_frame(self.pos())
                        self.i += 1
                    elif self.tok() == "}" or self.tok() is None:
                        self.close_frame(end, lift=lambda g: True)   # the tail
                    else:
                        self.close_frame(end)
                    return
            self.expr({";"})
            if self.tok() == ";":
                self.close_frame(self.pos())
                self.i += 1
            else:
                self.close_frame(self.pos(), lift=lambda g: True)   # the tail

    def let(self):
        self.i += 1
        start = self.i
        self.skip_to({"=", ";", ":"})
        pattern = self.body[self.toks[start][1]:self.pos()]
        if self.tok() == ":":
            self.i += 1
            self.skip_to({"=", ";"})
        self.push_frame("stmt")
        if self.tok() == "=":
            self.i += 1
            init = self.pos()
            self.expr({";", "else"})
            end = self.toks[self.i - 1][2]
            self.blocks[-1].extend(self.bind(pattern, init, end, self.frames[-1][1]))
            if self.tok() == "else":
                self.i += 1
                self.block()
        self.close_frame(self.pos())
        if self.tok() == ";":
            self.i += 1

    def blocklike(self):
        """Parse if/match/loop/while/for/unsafe {}/{}; return the position
        of its closing brace."""
        t = self.tok()
        if t.startswith("'"):
            self.i += 2
            return self.blocklike()
        if t == "if":
            return self.if_()
        if t == "match":
            return self.match()
        if t == "loop":
            self.i += 1
            return self.block("body")
        if t == "while":
            return self.while_()
        if t == "for":
            self.i += 1
            self.skip_to({"in"})
            self.i += 1
            self.expr({"{"})
            return self.block("body")
        if t == "unsafe":
            self.i += 1
        return self.block()

    def block(self, frame=None, bound=()):
        """A { } block (a temporary scope if FRAME), with BOUND bindings
        made by an if let/while let head; returns the '}' position."""
        if self.tok() != "{":
            return self.pos()
        self.i += 1
        if frame:
            self.push_frame(frame)
        self.blocks.append(list(bound))
        self.statements()
        end = self.pos()
        self.close_block(end)
        if frame:
            self.close_frame(end)
        if self.tok() == "}":
            self.i += 1
        return end

    def let_head(self):
        """"let PAT =" of if let/while let: returns PAT's text."""
        self.i += 1
        start = self.i
        self.skip_to({"="})
        pattern = self.body[self.toks[start][1]:self.pos()]
        self.i += 1
        return pattern

    def if_(self):
        self.i += 1
        if self.tok() == "let":
            pattern = self.let_head()
            start = self.pos()
            self.expr({"{"}, head=True)
            bound = self.bind(pattern, start, self.toks[self.i - 1][2], self.frames[-1][1])
            end = self.block("body", bound)
        else:
            self.push_frame("cond")
            self.expr({"{"}, head=True)
            self.close_frame(self.pos())
            end = self.block("body")
        if self.tok() == "else":
            self.i += 1
            end = self.if_() if self.tok() == "if" else self.block("body")
        return end

    def while_(self):
        self.i += 1
        if self.tok() == "let":
            pattern = self.let_head()
            self.push_frame("body")   # the scrutinee's temporaries: each iteration
            start = self.pos()
            self.expr({"{"}, head=True)
            bound = self.bind(pattern, start, self.toks[self.i - 1][2], self.frames[-1][1])
            end = self.block(None, bound)
            self.close_frame(end)
            return end
        self.push_frame("cond")
        self.expr({"{"}, head=True)
        self.close_frame(self.pos())
        return self.block("body")

    def match(self):
        self.i += 1
        self.expr({"{"}, head=True)
        if self.tok() != "{":
            return self.pos()
        self.i += 1
        while self.i < len(self.toks) and self.tok() != "}":
            self.skip_to({"=>", "if"})
            if self.tok() == "if":
                self.push_frame("guard")
                self.i += 1
                self.expr({"=>"})
                self.close_frame(self.pos())
            self.i += 1   # =>
            self.push_frame("arm")
            if self.tok() == "{":
                end = self.block()
                self.close_frame(end)
            else:
                self.expr({",", "}"})
                self.close_frame(self.pos())
            if self.tok() == ",":
                self.i += 1
        end = self.pos()
        self.i += 1
        return end

    def closure(self, stops):
        if self.tok() == "||":
            self.i += 1
        else:
            self.i += 1
            self.skip_to({"|"})
            self.i += 1
        if self.tok() == "->":
            self.skip_to({"{"})
        if self.tok() == "{":
            self.push_frame("closure")
            end = self.block()
            self.close_frame(end)
            return
        self.push_frame("closure")
        self.expr(stops | {","})
        end = self.toks[self.i - 1][2]
        # A guard that is the closure's value is returned, not dropped.
        self.close_frame(end, lift=lambda g: self.flows(g, end))

    def group(self, open_c, close_c, skip=False):
        self.i += 1
        while self.i < len(self.toks) and self.tok() != close_c:
            before = self.i
            if skip:
                self.skip_to({close_c})
            else:
                self.expr({",", close_c})
            if self.i == before or self.tok() not in (close_c,):
                self.i += 1
        self.i += 1

    def expr(self, stops, head=False):
        """An expression, up to one of STOPS or a closing bracket at its
        depth; in an if/while/match HEAD, "{" ends it."""
        operand = True
        while self.i < len(self.toks):
            t, p = self.tok(), self.pos()
            if t in stops or t in (")", "]", "}", ";"):
                return
            if p in self.calls:
                self.frames[-1][1].append(p)
            if t == "drop" and self.tok(1) == "(" and self.tok(3) == ")" and \
                    self.tok(-1) not in (".",):
                for block in reversed(self.blocks):
                    mine = [b for b in block if b[0] == self.tok(2)]
                    if mine:
                        # In another branch after the same guard was
                        # dropped, drop() unlocks there too.
                        self.emit(p, mine[-1][1])
                        mine[-1][2] = True
                        break
            if t in ("(", "["):
                self.group(t, ")" if t == "(" else "]")
                operand = False
            elif t == "{":
                if operand:
                    self.block()
                else:
                    self.group("{", "}")
                operand = False
            elif operand and (t in ("if", "match", "loop", "while", "for") or
                              (t == "unsafe" and self.tok(1) == "{")):
                self.blocklike()
                operand = False
            elif t.startswith("'") and self.tok(1) == ":":
                self.i += 2
            elif operand and t in ("|", "||"):
                self.closure(stops)
                operand = False
            else:
                operand = t in RUST_OPERAND_AFTER or t in (",", "(", "[")
                self.i += 1


def rust_lock_names(repo):
    """Names declared as an RwLock/RwSem (fields, parameters) and as a
    Refcount, in rust-module/: the receivers whose .read() is a lock and
    a refcount_read() respectively."""
    rw, rc = set(), set()
    d = os.path.join(repo, "rust-module")
    for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if fn.endswith(".rs"):
            with open(os.path.join(d, fn), encoding="utf-8") as f:
                text = strip(f.read(), True)
            ty = r"\b(\w+)\s*:\s*&?\s*(?:'\w+\s+)?(?:mut\s+)?(?:\w+::)*%s\b"
            rw |= set(re.findall(ty % r"(?:RwLock|RwSem)", text))
            rc |= set(re.findall(ty % r"Refcount", text))
    return rw, rc


RUST_NAMES = None   # (rwlock/rwsem names, Refcount names), set by main()


def extract_rust(body, names=None, structure=False):
    """Tokens in source order.  A lock guard unlocks where Rust drops it
    (RustDrops).  With STRUCTURE, the branch, loop, registry and pin
    tokens too (rust_structure())."""
    rw, rc = names or RUST_NAMES or (set(), set())
    body = blank_delays(body, True)
    events = []   # (pos, rank, seq, token); rank orders events at one position
    calls = {}    # start -> (end, unlock token): the guards
    for m in re.finditer(r"\.(lock|lock_killable|read|write)\(\)", body):
        nm = receiver(body, m.start())
        how = "lock" if m.group(1) == "lock_killable" else m.group(1)
        if how == "read" and nm in rc:
            events.append((m.start(), 0, 0, tok("read", "once", nm)))   # refcount_read()
            continue
        if how != "lock" and nm not in rw:
            continue    # not a lock: a UserSliceReader's read(), ...
        events.append((m.start(), 0, 0, tok("lock_read" if how == "read" else "lock", None, nm)))
        # A fallible lock's `?` yields the guard: the binding takes that.
        end = m.end() + 1 if body[m.end():m.end() + 1] == "?" else m.end()
        calls[m.start()] = (end, tok("unlock_read" if how == "read" else "unlock", None, nm))
    # The RCU read lock's guard (patch 0011's XArray::load takes it).
    for m in re.finditer(r"(?<![\w:])rcu::read_lock\(\)", body):
        events.append((m.start(), 0, 0, tok("rcu_read_lock", None, None)))
        calls[m.start()] = (m.end(), tok("rcu_read_unlock", None, None))
    for m in re.finditer(r"\.dec_and_lock\(", body):
        pos, paren = m.start(), m.end() - 1
        close = match_close(body, paren, "(", ")")
        nm = last_ident(body[paren + 1:close])
        var = receiver(body, pos)
        # refcount_dec_and_mutex_lock()'s body, as patch 0005 writes it.
        events.append((pos, 0, 0, tok("dec_not_one", "release", var)))
        events.append((pos, 1, 0, tok("lock", None, nm)))
        events.append((pos, 2, 0, tok("fetch_sub", REL_ACQ, var)))
        events.append((pos, 3, 0, tok("unlock", None, nm)))
        calls[pos] = (close + 1, tok("unlock", None, nm))
    for m in re.finditer(r"\.([a-z_]\w*)\(", body):
        name = m.group(1)
        if name not in RUST_METHODS:
            continue
        paren = m.end() - 1
        args = split_args(body[paren + 1:match_close(body, paren, "(", ")")])
        kind, order = RUST_METHODS[name]
        if order == "arg":
            order = RUST_ORDER.get(args[-1] if args else "", "?")
            if name == "load" and order == "?" and len(args) == 2:
                order = "once"      # XArray::load(&rcu::Guard, i): xa_load()
            if name == "store" and order == "?" and len(args) == 3:
                kind, order = "store_entry", None   # XArray's store(i, p, gfp): xa_store()
        events.append((m.start(), 0, 0, tok(kind, order, receiver(body, m.start()))))
    for path, spec in RUST_PATHS.items():
        for m in re.finditer(r"(?<![\w:])%s\(" % re.escape(path), body):
            paren = m.end() - 1
            args = split_args(body[paren + 1:match_close(body, paren, "(", ")")])
            for kind, order, idx in spec:
                nm = arg_name(args[idx]) if idx is not None and idx < len(args) else None
                events.append((m.start(), 0, 0, tok(kind, order, nm)))
    for m in re.finditer(r"\bsmp_mb\((\w*)\)", body):
        events.append((m.start(), 0, 0, RUST_BARRIER.get(m.group(1) or "Full", "mb?")))
    for m in re.finditer(r"\.do_unlocked\(", body):
        nm = receiver(body, m.start())
        events.append((m.start(), 0, 0, tok("unlock", None, nm)))
        events.append((match_close(body, m.end() - 1, "(", ")"), 0, 0, tok("lock", None, nm)))
    if structure:
        ops = [e[0] for e in events]
        st = rust_structure(body)
        ops += [p for p, _, _, t, g in st if not g and t in ("pin",) or t.startswith("registry(")]
        for pos, rank, seq, t, g in st:
            if g and not any(g[1] <= p <= g[2] for p in ops):
                continue
            events.append((pos, rank, seq, t))
    for pos, seq, t in RustDrops(body, calls).run():
        events.append((pos, 4, seq, t))
    return [t for _, _, _, t in sorted(events, key=lambda e: e[:3])]


# --selftest: Rust function bodies and the lists extract_rust() must give,
# with "rw" an RwLock and "rc" a Refcount (see RustDrops).
SELFTEST_NAMES = ({"rw"}, {"rc"})
SELFTEST = [
    ("let _ = a.lock(); x.store(1, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("let _g = a.lock(); x.store(1, Relaxed);",
     "lock(a) set.once(x) unlock(a)"),
    ("a.lock().f = 1; x.store(1, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("*a.lock() += 1; x.store(1, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("let v = a.lock().f; x.store(v, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("let r = &a.lock().f; x.store(*r, Relaxed);",
     "lock(a) set.once(x) unlock(a)"),
    ("let r = &mut *a.lock(); x.store(1, Relaxed);",
     "lock(a) set.once(x) unlock(a)"),
    ("let g = a.lock(); x.store(1, Relaxed); drop(g); y.store(1, Relaxed);",
     "lock(a) set.once(x) unlock(a) set.once(y)"),
    ("let g = a.lock(); let g = b.lock(); drop(g); x.store(1, Relaxed);",
     "lock(a) lock(b) unlock(b) set.once(x) unlock(a)"),
    ("{ let g = a.lock(); x.store(1, Relaxed); } y.store(1, Relaxed);",
     "lock(a) set.once(x) unlock(a) set.once(y)"),
    ("if c { let _ = a.lock(); x.store(1, Relaxed); } y.store(1, Relaxed);",
     "lock(a) unlock(a) set.once(x) set.once(y)"),
    ("let g = c.then(|| a.lock()); x.store(1, Relaxed);",
     "lock(a) set.once(x) unlock(a)"),
    ("let v = c.then(|| a.lock().f); x.store(1, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("if a.lock().ready { x.store(1, Relaxed); } y.store(1, Relaxed);",
     "lock(a) unlock(a) set.once(x) set.once(y)"),
    ("if let Some(v) = a.lock().get(0) { x.store(*v, Relaxed); } else { y.store(1, Relaxed); }"
     " z.store(1, Relaxed);",
     "lock(a) set.once(x) set.once(y) unlock(a) set.once(z)"),
    ("if let Some(mut l) = r.dec_and_lock(&m) { x.store(1, Relaxed); } y.store(1, Relaxed);",
     "dec_not_one.release(r) lock(m) fetch_sub.release+acquire(r) unlock(m) set.once(x) "
     "unlock(m) set.once(y)"),
    ("while let Some(v) = q.lock().pop() { x.store(v, Relaxed); } y.store(1, Relaxed);",
     "lock(q) set.once(x) unlock(q) set.once(y)"),
    ("match a.lock().state { 0 => x.store(1, Relaxed), _ => {} } y.store(1, Relaxed);",
     "lock(a) set.once(x) unlock(a) set.once(y)"),
    ("match k { 0 => a.lock().f = 1, _ => x.store(1, Relaxed) }",
     "lock(a) unlock(a) set.once(x)"),
    ("let n = match k { 0 => f(&a.lock(), 1), _ => 0 }; x.store(n, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("let n = { let g = b.lock(); a.lock().len() }; x.store(n, Relaxed);",
     "lock(b) lock(a) unlock(b) unlock(a) set.once(x)"),
    ("let s = S { v: a.lock().f }; x.store(s.v, Relaxed);",
     "lock(a) unlock(a) set.once(x)"),
    ("x.store(1, Relaxed); a.lock().f",
     "set.once(x) lock(a) unlock(a)"),
    ("let s = rw.read(); let n = rc.read(); let b = reader.read()?; x.store(n, Relaxed);",
     "lock_read(rw) read.once(rc) set.once(x) unlock_read(rw)"),
    ("let mut w = rw.write(); w.f = 1; drop(w); x.store(1, Relaxed);",
     "lock(rw) unlock(rw) set.once(x)"),
    ("let g = rcu::read_lock(); let p = xa.load(&g, i); drop(g); x.store(1, Relaxed);",
     "rcu_read_lock read.once(xa) rcu_read_unlock set.once(x)"),
]


# The structure tokens (README "Branches, loops and pins") and the stalls
# the checker reads past: (language, body, list with structure).
SELFTEST_STRUCTURE = [
    ("c", "if (READ_ONCE(a->registry_mode) == LP_REGISTRY_RCU) kfree_rcu(g, rcu);"
     " else kmem_cache_free(c, g);",
     "read.once(registry_mode) if(registry_mode==RCU) synchronize_rcu else endif"),
    ("c", "while (!atomic_try_cmpxchg(&v, &old, old + 1)) ;", "loop cmpxchg.full(v) endloop"),
    ("c", "if (!atomic_try_cmpxchg(&v, &old, old + 1)) return;", "cmpxchg.full(v)"),
    ("c", "do { old = atomic_cmpxchg(&v, e, n); } while (old != e);",
     "loop cmpxchg.full(v) endloop"),
    ("c", "for (i = 0; i < n; i++) x++; atomic_inc(&v);", "add.relaxed(v)"),
    ("c", "switch (lp_flavor_of(g)) { case LP_FLAVOR_LOCKED: case LP_FLAVOR_LOCKLESS:"
     " atomic_inc(&g->refcnt); break; default: kref_get(&g->kref); }",
     "switch(flavor) case(LOCKED,LOCKLESS) add.relaxed(refcnt) case(default) "
     "add.relaxed(kref) endswitch"),
    ("c", "if (locked && x) { mutex_lock(&a->lock); } again: atomic_read_acquire(&f);",
     "if(locked&&x) lock(lock) endif read.acquire(f)"),
    ("c", "*pin = lp_owner_pin(g); lp_delay(arena, LP_DELAY_PUT_DEC);"
     " lp_delay_atomic(arena, atomic_read(&x)); mutex_lock(&o->mutex);",
     "pin lock(mutex)"),
    ("c", "list_for_each_entry(c, &k->head, node) { kref_get(&c->kref); }",
     "loop add.relaxed(kref) endloop"),
    ("c", "rcu = READ_ONCE(a->registry_mode) == LP_REGISTRY_RCU; if (!rcu) x = 1;"
     " locked = f; if (locked) y = 1;",
     "read.once(registry_mode) if(!(registry_mode==RCU)) endif if(locked) endif"),
    ("c", "if (kref_put_mutex(&g->kref, r, &o->mutex)) return true;"
     " if (lp_delay_on(arena, LP_DELAY_PUT_UNLOCKED)) { lp_delay(arena, LP_DELAY_PUT_UNLOCKED);"
     " if (mutex_trylock(&o->mutex)) mutex_unlock(&o->mutex); } lp_stall(a, LP_DELAY_X);",
     "dec_not_one.release(kref) lock(mutex) fetch_sub.release+acquire(kref) unlock(mutex)"),
    ("rust", "loop { if x.cmpxchg(1, 2, Full).is_ok() { break; } }",
     "loop cmpxchg.full(x) endloop"),
    ("rust", "while old < new { old = x.cmpxchg(old, new, Full); }",
     "loop cmpxchg.full(x) endloop"),
    ("rust", "if old < new { x.cmpxchg(old, new, Full); }", "cmpxchg.full(x)"),
    ("rust", "arena.delay(uapi::LP_DELAY_X); x.store(1, Relaxed);"
     " self.arena().delay_atomic(y.load(Relaxed)); Arena::delay(a, 1);",
     "set.once(x)"),
    ("rust", "g.delays().stall_atomic(uapi::LP_DELAY_TRYGET_MODE); x.store(1, Relaxed);"
     " if d.on(uapi::LP_DELAY_PUT_UNLOCKED) { d.stall(p); let _ = m.lock(); }"
     " Delay::stall(d, 1); wait_here(uapi::LP_DELAY_Y);",
     "set.once(x)"),
    ("rust", "F::Registry::free_box(b); R::drop_arc(a, |g| ());",
     "registry(F::Registry) registry(R)"),
    ("rust", "let o = unsafe { owner_pin(g, pin) }; let l = o.rw.write();",
     "pin lock(rw) unlock(rw)"),
    ("rust", "let h = is_locked(s).then(|| a.lock()); x.store(1, Relaxed);",
     "if(locked) lock(a) endif set.once(x) unlock(a)"),
    ("rust", "if cfg!(CONFIG_PREEMPT_RT) { rc.dec_not_one(); } else { }",
     "if(PREEMPT_RT) dec_not_one.release(rc) else endif"),
    ("rust", "match F::KIDS { None => (), Some(_) => a.lock().f = 1 }",
     "match(F::KIDS) case(None) case(Some(_)) lock(a) unlock(a) endmatch"),
]


def selftest():
    """[(ok, line)]: extract_rust() on each SELFTEST body, and
    SELFTEST_STRUCTURE's bodies with structure."""
    out = []
    cases = [("rust", src, want, False) for src, want in SELFTEST] + \
        [(lang, src, want, True) for lang, src, want in SELFTEST_STRUCTURE]
    for n, (lang, src, want, st) in enumerate(cases, 1):
        try:
            if lang == "rust":
                got = " ".join(extract_rust(strip(src, True), SELFTEST_NAMES, structure=st))
            else:
                got = " ".join(extract_c(strip(src, False), structure=st))
        except (ValueError, IndexError) as e:
            got = "error: %s" % e
        if got == want:
            out.append((True, "ok selftest %d: %s" % (n, src)))
        else:
            out.append((False, "FAIL selftest %d: %s\n     want: %s\n     got:  %s"
                        % (n, src, want, got)))
    return out


def extract(repo, path, func):
    full = os.path.join(repo, path)
    try:
        with open(full, encoding="utf-8") as f:
            text = strip(f.read(), path.endswith(".rs"))
    except OSError as e:
        return None, "cannot read: %s" % e.strerror
    span, err = find_function(path, text, func)
    if err:
        return None, err
    body = text[span[0]:span[1]]
    try:
        return (extract_rust(body, structure=True) if path.endswith(".rs")
                else extract_c(body, structure=True)), None
    except (ValueError, IndexError, KeyError) as e:
        return None, "cannot read its body: %s" % e


# ------------------------------------------------------------ headers


def header_sections(litpath):
    """{section: [(line, first line, [continuation lines])]} of the header
    comment's sections: a line "NAME:" alone opens one ("Code:",
    "Abstracted:"); it ends at an empty comment line, another section or
    the end of the comment.  An entry is a line at the comment's margin
    and the lines indented (tab or spaces) under it."""
    with open(litpath, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, cur = {}, None
    for no, line in enumerate(lines, 1):
        body = re.sub(r"^\s*\* ?", "", line) if re.match(r"^\s*\*", line) else None
        if body is None or body.strip().startswith(")"):
            if cur is not None:
                break
            continue
        m = re.match(r"([A-Z][A-Za-z ]*):\s*$", body.strip())
        if m and not body.startswith(("\t", " ")):
            cur = out.setdefault(m.group(1), [])
            continue
        if cur is None:
            continue
        if not body.strip():
            cur = None
            continue
        if body.startswith(("\t", " ")) and cur:
            cur[-1][2].append(body.strip())
        else:
            cur.append((no, body.strip(), []))
    return out


def section_entries(litpath, name):
    """[(line, text)] of one header section, each entry's lines joined."""
    return [(no, " ".join([first] + more))
            for no, first, more in header_sections(litpath).get(name, [])]


def parse_code(litpath):
    """[(process, file, function, [tokens], line)] from the header."""
    entries = []
    for no, first, more in header_sections(litpath).get("Code", []):
        m = re.match(r"(P\d+)\s+(\S+)\s+(\S+)\s*$", first)
        if m:
            entries.append([m.group(1), m.group(2), m.group(3),
                            " ".join(more).split(), no])
        else:
            entries.append(["?", "?", "?", ["unparsable:", first], no])
    return entries


def expected_tokens(tokens):
    """The header's list without the [ ] marks (see the module docstring)."""
    return [re.sub(r"^\[|\]$", "", t) for t in tokens]


def diff(want, got):
    """One line: the first place where the two lists part."""
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            if g in want[i + 1:]:
                return "operation %d: the model has %s, the code has %s (missing or reordered)" % (i + 1, w, g)
            if w in got[i + 1:]:
                return "operation %d: the code has %s, not in the model here (added or reordered)" % (i + 1, g)
            return "operation %d: the model has %s, the code has %s" % (i + 1, w, g)
    if len(want) > len(got):
        return "the code ends before operation %d, %s (missing)" % (len(got) + 1, want[len(got)])
    return "the code has more: operation %d, %s (added)" % (len(want) + 1, got[len(want)])

# ------------------------------------------------------------ litmus bodies

# LKMM C calls of a litmus body: name -> list of (kind, ordering, arg index
# of the variable).  The atomic_*() family goes through C_ATOMIC as in the
# modules' C.  A call in no table fails the check: the body's list is
# complete or the test is not checked.
BODY_CALLS = {
    "READ_ONCE": [("read", "once", 0)], "WRITE_ONCE": [("set", "once", 0)],
    "smp_load_acquire": [("read", "acquire", 0)],
    "smp_store_release": [("set", "release", 0)],
    # smp_store_mb(): WRITE_ONCE() then smp_mb() (asm-generic/barrier.h).
    "smp_store_mb": [("set", "once", 0), ("mb", None, None)],
    "cmpxchg": [("cmpxchg", "full", 0)], "xchg": [("xchg", "full", 0)],
    "cmpxchg_relaxed": [("cmpxchg", "relaxed", 0)],
    "cmpxchg_acquire": [("cmpxchg", "acquire", 0)],
    "cmpxchg_release": [("cmpxchg", "release", 0)],
    "xchg_relaxed": [("xchg", "relaxed", 0)],
    "xchg_acquire": [("xchg", "acquire", 0)],
    "xchg_release": [("xchg", "release", 0)],
    "smp_mb": [("mb", None, None)], "smp_rmb": [("rmb", None, None)],
    "smp_wmb": [("wmb", None, None)],
    "smp_mb__before_atomic": [("mb_before_atomic", None, None)],
    "smp_mb__after_atomic": [("mb_after_atomic", None, None)],
    "smp_mb__after_spinlock": [("mb_after_spinlock", None, None)],
    "spin_lock": [("lock", None, 0)], "spin_unlock": [("unlock", None, 0)],
    "spin_trylock": [("trylock", None, 0)],
    "barrier": [("barrier", None, None)],
    "rcu_read_lock": [("rcu_read_lock", None, None)],
    "rcu_read_unlock": [("rcu_read_unlock", None, None)],
    "synchronize_rcu": [("synchronize_rcu", None, None)],
    "rcu_dereference": [("read", "once", 0)],
    "rcu_assign_pointer": [("set", "release", 0)],
}
C_KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof"}

# What the kernel defines these operations as, applied to every Code:
# operation that no Abstracted: line rewrote (README "Modeling choices"):
# refcount_dec_and_test() is atomic_fetch_sub_release() then, on 1 -> 0,
# smp_acquire__after_ctrl_dep(), itself smp_rmb() (asm-generic/barrier.h);
# refcount_dec_not_one() is atomic_read() then an
# atomic_try_cmpxchg_release() loop (lib/refcount.c).
DEFINITIONS = {
    ("fetch_sub", REL_ACQ): [("fetch_sub", "release", True), ("rmb", None, False)],
    ("dec_not_one", "release"): [("read", "once", True), ("cmpxchg", "release", True)],
    ("acquire_ctrl", None): [("rmb", None, False)],
}


def split_tok(t):
    """(kind, order or None, name or None) of KIND[.ORDER][(NAME)]."""
    m = re.fullmatch(r"([A-Za-z_]\w*)(?:\.([\w+]+))?(?:\((\w+)\))?", t)
    if not m:
        return None
    return m.group(1), m.group(2), m.group(3)


def join_tok(kind, order, name):
    return kind + ("." + order if order else "") + ("(%s)" % name if name else "")


def parse_body(litpath):
    """{process: [(token, line)]} from the litmus test's C body, or
    (None, error).  Marked accesses and fences map to the Code: vocabulary
    (BODY_CALLS, C_ATOMIC); a plain access *x to a parameter x of the
    process is read.plain(x) or set.plain(x) (both for x op= v)."""
    with open(litpath, encoding="utf-8") as f:
        text = f.read()
    end = text.find("*)")
    text = text[:end + 2] + strip(text[end + 2:], False) if end >= 0 else strip(text, False)
    procs = {}
    for m in re.finditer(r"^P(\d+)\s*\(([^)]*)\)\s*\{", text, re.M):
        proc = "P" + m.group(1)
        params = {last_ident(a) for a in m.group(2).split(",")} - {None}
        start = m.end()
        body = text[start:match_close(text, m.end() - 1, "{", "}")]
        ops = []
        calls = []
        for c in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", body):
            name, paren = c.group(1), c.end() - 1
            if name in C_KEYWORDS:
                continue
            close = match_close(body, paren, "(", ")")
            args = split_args(body[paren + 1:close])
            line = text.count("\n", 0, start + c.start()) + 1
            calls.append((c.start(), close))
            am = atomic_name(name)
            if am and am.group(1) in C_ATOMIC:
                kind, order = C_ATOMIC[am.group(1)]
                if order is None:
                    order = ORDER_SUFFIX[am.group(2) or ""]
                var = [last_ident(a) for a in args if last_ident(a) in params]
                # Or a pointer the process read (int *found; found = ...).
                var = var or [last_ident(a) for a in args[:1] if re.search(
                    r"\bint\s*\*\s*%s\s*;" % re.escape(last_ident(a) or "-"), body)]
                if not var:
                    return None, "line %d: %s() on no variable of %s's parameters" % (
                        line, name, proc)
                ops.append((c.start(), 0, tok(kind, order, var[0]), line))
            elif name in BODY_CALLS:
                for rank, (kind, order, idx) in enumerate(BODY_CALLS[name]):
                    nm = last_ident(args[idx]) if idx is not None and idx < len(args) else None
                    ops.append((c.start(), rank, tok(kind, order, nm), line))
            else:
                return None, "line %d: %s(): no token for it (litmus_code.py BODY_CALLS)" % (
                    line, name)
        for d in re.finditer(r"\*\s*([A-Za-z_]\w*)", body):
            if d.group(1) not in params or any(s < d.start() < e for s, e in calls):
                continue
            before = body[:d.start()].rstrip()
            if before.endswith(")"):
                # "if (c) *x = 1;" is a store, "(a) * x" a product.
                depth, k = 0, len(before) - 1
                while k >= 0:
                    depth += {")": 1, "(": -1}.get(body[k], 0)
                    if depth == 0:
                        break
                    k -= 1
                head = body[:max(k, 0)]
                if not re.search(r"\b(if|while|for)\s*$", head):
                    continue
            elif before and (before[-1].isalnum() or before[-1] in "_]"):
                continue    # a product, or a declaration "int *r"
            line = text.count("\n", 0, start + d.start()) + 1
            after = body[d.end():]
            if re.match(r"\s*=(?!=)", after):
                ops.append((d.start(), 0, tok("set", "plain", d.group(1)), line))
            elif re.match(r"\s*([-+*/%&|^]|<<|>>)=", after):
                ops.append((d.start(), 0, tok("read", "plain", d.group(1)), line))
                ops.append((d.start(), 1, tok("set", "plain", d.group(1)), line))
            else:
                ops.append((d.start(), 0, tok("read", "plain", d.group(1)), line))
        procs[proc] = [(t, ln) for _, _, t, ln in sorted(ops)]
    return procs, None


def parse_abstracted(litpath):
    """[(processes, form, lhs, rhs, reason, line)] from the header's
    "Abstracted:" section (see the module docstring); form is "rename"
    (lhs: [(code name, body name)]), "rewrite" or "leave-out" (lhs, rhs:
    token lists), or "?" (rhs: why it cannot be read)."""
    out = []
    for no, text in section_entries(litpath, "Abstracted"):
        m = re.match(r"(P\d+(?:,P\d+)*)\s+(.*)$", text)
        if not m:
            out.append(([], "?", [], "no process: start the line with P0, P1, ... or P0,P1",
                        "", no))
            continue
        procs = m.group(1).split(",")
        spec, sep, reason = m.group(2).partition(":")
        if not sep or not reason.strip():
            out.append((procs, "?", [], "no reason: the operations, then \": why\"", "", no))
            continue
        words = spec.split()
        if "->" in words:
            left, _, right = spec.partition("->")
            runs, rhs = [r.split() for r in left.split(",")], right.split()
            bad = [t for t in sum(runs, []) + rhs if not split_tok(t)]
            if not all(runs) or not rhs or bad:
                out.append((procs, "?", [], "a rewrite is RUN[, RUN...] -> BODY-TOKENS%s" % (
                    ", not %s" % bad[0] if bad else ""), "", no))
                continue
            out.append((procs, "rewrite", runs, rhs, reason.strip(), no))
        elif words and all(re.fullmatch(r"\w+=\w+", w) for w in words):
            out.append((procs, "rename", [tuple(w.split("=")) for w in words], [],
                        reason.strip(), no))
        elif words and all(split_tok(w) for w in spec.replace(",", " ").split()):
            runs = [r.split() for r in spec.split(",")]
            if not all(runs):
                out.append((procs, "?", [], "an empty run between commas", "", no))
                continue
            out.append((procs, "leave-out", runs, [], reason.strip(), no))
        else:
            out.append((procs, "?", [], "cannot read %r: NAME=BODYNAME..., RUN[, RUN...] -> "
                        "TOKENS or RUN[, RUN...]" % spec.strip(), "", no))
    return out


def code_for_body(tokens, rules, used):
    """The Code: operations of one entry as the body must have them, in
    order: [(token for the body, Code: operation number, Code: token)].
    Bracketed operations (another flavor's) are dropped; then each rewrite
    and leave-out rule, in header order, replaces every run of its Code:
    tokens not yet rewritten; then DEFINITIONS and the renames apply to
    what is left.  USED collects what applied: (line, run index) of a
    rewrite or leave-out, (line, code name) of a rename."""
    items, inside = [], False
    for no, t in enumerate(tokens, 1):
        if t.startswith("["):
            inside = True
        bare = re.sub(r"^\[|\]$", "", t)
        if not inside and not STRUCTURE.match(bare):
            items.append([t, no, t, False])
        if t.endswith("]"):
            inside = False
    for procs, form, runs, rhs, _, line in rules:
        if form not in ("rewrite", "leave-out"):
            continue
        for k, lhs in enumerate(runs):
            i, out = 0, []
            while i < len(items):
                run = items[i:i + len(lhs)]
                if len(run) == len(lhs) and not any(x[3] for x in run) and \
                        [x[0] for x in run] == lhs:
                    used.add((line, k))
                    out.extend([r, run[0][1], " ".join(lhs), True] for r in rhs)
                    i += len(lhs)
                else:
                    out.append(items[i])
                    i += 1
            items = out
    renames = {}
    for procs, form, lhs, rhs, _, line in rules:
        if form == "rename":
            for code, body in lhs:
                renames.setdefault(code, (body, line))
    out = []
    for t, no, orig, final in items:
        if final:
            out.append((t, no, orig))
            continue
        kind, order, name = split_tok(t)
        if name in renames:
            used.add((renames[name][1], name))
            name = renames[name][0]
        for k2, o2, named in DEFINITIONS.get((kind, order), [(kind, order, True)]):
            out.append((join_tok(k2, o2, name if named else None), no, orig))
    return out


def check_bodies(litpath, test, entries):
    """One (ok, line) per process of the test that a Code: entry names:
    each entry's operations (as code_for_body() gives them) must be a
    subsequence of the process's body operations; plus a failure for each
    Abstracted: line that cannot be read or changes nothing."""
    results = []
    procs, err = parse_body(litpath)
    rules = parse_abstracted(litpath)
    if err:
        return [(False, "FAIL %s: body: %s" % (test, err))]
    used = set()
    for procs_, form, lhs, rhs, reason, line in rules:
        if form == "?":
            results.append((False, "FAIL %s:%d: Abstracted: %s" % (test, line, rhs)))
    byproc = {}
    for proc, path, func, tokens, line in entries:
        if proc != "?":
            byproc.setdefault(proc, []).append((path, func, tokens))
    for proc in sorted(byproc, key=lambda p: int(p[1:])):
        mine = [r for r in rules if proc in r[0] and r[1] != "?"]
        if proc not in procs:
            results.append((False, "FAIL %s: %s body: the test has no process %s" % (
                test, proc, proc)))
            continue
        body = procs[proc]
        misses = []
        for path, func, tokens in byproc[proc]:
            want = code_for_body(tokens, mine, used)
            j, prev = 0, None
            for t, no, orig in want:
                k = next((k for k in range(j, len(body)) if body[k][0] == t), None)
                if k is None:
                    misses.append((t, no, orig, prev, path, func,
                                   any(b[0] == t for b in body[:j])))
                    break
                prev, j = body[k], k + 1
        if not misses:
            results.append((True, "ok %s: %s body has the Code: operations of %d functions" % (
                test, proc, len(byproc[proc]))))
            continue
        t, no, orig, prev, path, func, earlier = misses[0]
        same = [m for m in misses if m[0] == t]
        where = ", ".join("%s %s op %d%s" % (m[4], m[5], m[1], "" if m[2] == m[0] else " " + m[2])
                          for m in same)
        after = " after %s (line %d)" % prev if prev else ""
        results.append((False, "FAIL %s: %s body lacks %s%s%s (Code: %s)%s" % (
            test, proc, t, after, ", it comes only before" if earlier else "", where,
            "; %d more Code: entries lack another" % (len(misses) - len(same))
            if len(misses) > len(same) else "")))
    for procs_, form, lhs, rhs, reason, line in rules:
        if form == "rename":
            stale = ["%s=%s" % x for x in lhs if (line, x[0]) not in used]
        elif form != "?":
            stale = [" ".join(r) for k, r in enumerate(lhs) if (line, k) not in used]
        else:
            stale = []
        if stale:
            results.append((False, "FAIL %s:%d: Abstracted: %s %s changes no Code: operation "
                            "of %s" % (test, line, ",".join(procs_), ", ".join(stale),
                                       " or ".join(procs_))))
    return results

# ------------------------------------------------------------ coverage

# A comment that makes a claim about memory ordering (or about a grace
# period, RCU, a release or a dependency); "release" as a function's name
# (Gadget::release, release()) is not one.
CLAIM = re.compile(r"fully ordered|\bordering\b|\bordered\b|\border\b|\bacquire\b|"
                   r"(?<![:.])\brelease\b(?!\(\))|\bbarrier\b|happens before|litmus|fence|1 -> 0|"
                   r"grace period|\brcu\b|\brcu_\w+|\bdependency\b|\bdependent\b|"
                   r"unless (?:it is )?(?:already )?(?:zero|dying)|"
                   r"`(?:Full|Acquire|Release)`", re.I)
# The stalls (blank_delays()): what their comments say is no claim.
STALL_FUNCTIONS = {"lp_delay", "lp_delay_atomic", "lp_delay_on", "delay", "delay_atomic",
                   "stall", "stall_atomic"}
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def body_comments(text, stripped, start):
    """The comments inside the body of the function whose definition
    starts at START (TEXT as written, STRIPPED as strip() gives it), or
    "" for a declaration without a body."""
    paren = stripped.find("(", start)
    if paren < 0:
        return ""
    try:
        close = match_close(stripped, paren, "(", ")")
    except ValueError:
        return ""
    brace = stripped.find("{", close)
    if brace < 0 or ";" in stripped[close:brace]:
        return ""
    try:
        end = match_close(stripped, brace, "{", "}")
    except ValueError:
        return ""
    return "\n".join(COMMENT.findall(text[brace:end]))


def claim_functions(repo):
    """(file, function) for every function whose comment claims ordering:
    the comment right above it or a comment inside its body."""
    found = []
    for d, ext in (("c-module", ".c"), ("rust-module", ".rs")):
        for fn in sorted(os.listdir(os.path.join(repo, d))):
            if not fn.endswith(ext) or fn.endswith(".mod.c") or fn == "uapi_generated.rs":
                continue
            path = "%s/%s" % (d, fn)
            with open(os.path.join(repo, path), encoding="utf-8") as f:
                text = f.read()
            stripped = strip(text, ext == ".rs")
            lines = text.split("\n")
            offset = [0]
            for line in lines:
                offset.append(offset[-1] + len(line) + 1)
            for i, line in enumerate(lines):
                if ext == ".rs":
                    m = re.match(r"\s*(?:pub(?:\([a-z]+\))?\s+)?(?:unsafe\s+)?fn\s+(\w+)", line)
                else:
                    m = re.match(r"[A-Za-z_][^;{}()=]*?\b(\w+)\(", line)
                    if m and (line.startswith(("return", "if ", "else", "#")) or
                              m.group(1) in ("if", "while", "for", "switch")):
                        m = None
                if not m or m.group(1) in STALL_FUNCTIONS:
                    continue
                # The comment right above (doc lines, attributes skipped).
                j, comment = i - 1, []
                while j >= 0 and re.match(r"\s*(///|//!|\*|/\*\*|/\*|\*/|#\[)", lines[j]):
                    comment.append(lines[j])
                    j -= 1
                if CLAIM.search("\n".join(comment)) or \
                        CLAIM.search(body_comments(text, stripped, offset[i])):
                    found.append((path, m.group(1)))
    return found


def load_unmodeled(repo):
    path = os.path.join(repo, "shared-tests/litmus/unmodeled.txt")
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                parts = line.split(None, 2)
                out[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else ""
    return out

# ------------------------------------------------------------ main


def main(argv):
    if len(argv) >= 2 and (not argv[1].startswith("--") or argv[1] == "--selftest"):
        repo = argv[1]
    else:
        sys.exit("usage: litmus_code.py REPO [TEST...] | REPO --show FILE FUNC | REPO --body TEST")
    global RUST_NAMES
    if argv[1:2] == ["--selftest"] or argv[2:3] == ["--selftest"]:
        results = selftest()
        for ok, line in results:
            print(line)
        bad = len([r for r in results if not r[0]])
        print("%d passed, %d failed" % (len(results) - bad, bad))
        return 1 if bad else 0
    RUST_NAMES = rust_lock_names(repo)
    if argv[2:3] == ["--show"]:
        if len(argv) != 5:
            sys.exit("usage: litmus_code.py REPO --show FILE FUNC")
        ops, err = extract(repo, argv[3], argv[4])
        if err:
            sys.exit("%s %s: %s" % (argv[3], argv[4], err))
        print(" ".join(ops))
        return 0
    litdir = os.path.join(repo, "shared-tests/litmus")
    if argv[2:3] == ["--body"]:
        if len(argv) != 4:
            sys.exit("usage: litmus_code.py REPO --body TEST")
        test = os.path.basename(argv[3])
        test = test[:-len(".litmus")] if test.endswith(".litmus") else test
        path = os.path.join(litdir, test + ".litmus")
        procs, err = parse_body(path)
        if err:
            sys.exit("%s: body: %s" % (test, err))
        rules = [r for r in parse_abstracted(path) if r[1] != "?"]
        for proc in sorted(procs, key=lambda p: int(p[1:])):
            print("%s body: %s" % (proc, " ".join(t for t, _ in procs[proc])))
            for p, path_, func, tokens, _ in parse_code(path):
                if p == proc:
                    want = code_for_body(tokens, [r for r in rules if proc in r[0]], set())
                    print("  %s %s: %s" % (path_, func, " ".join(t for t, _, _ in want)
                                           or "(every operation abstracted)"))
        return 0
    passed = failed = nbody = 0
    covered = set()
    # The extractor's own test first: a wrong drop point is a wrong list.
    results = selftest()
    for ok, line in results:
        if not ok:
            print(line)
    if all(ok for ok, _ in results):
        print("ok selftest: %d bodies give their lists (--selftest)" % len(results))
        passed += 1
    else:
        failed += 1
    only = [os.path.basename(t)[:-len(".litmus")] if t.endswith(".litmus") else
            os.path.basename(t) for t in argv[2:]]
    for fn in sorted(os.listdir(litdir)):
        if not fn.endswith(".litmus"):
            continue
        test = fn[:-len(".litmus")]
        if only and test not in only:
            continue
        entries = parse_code(os.path.join(litdir, fn))
        for proc, path, func, tokens, line in entries:
            where = "%s: %s %s %s" % (test, proc, path, func)
            if proc == "?":
                print("FAIL %s:%d: cannot parse the Code: line %r" % (test, line, " ".join(tokens[1:])))
                failed += 1
                continue
            covered.add((path, func.rsplit("::", 1)[-1]))
            ops, err = extract(repo, path, func)
            want = expected_tokens(tokens)
            if err:
                print("FAIL %s: %s" % (where, err))
                failed += 1
            elif not want:
                print("FAIL %s: the header lists no operation" % where)
                failed += 1
            elif ops != want:
                print("FAIL %s: %s" % (where, diff(want, ops)))
                print("     model: %s" % " ".join(want))
                print("     code:  %s" % " ".join(ops))
                failed += 1
            else:
                print("ok %s (%d operations)" % (where, len(ops)))
                passed += 1
        # The body: each Code: entry's operations are in its process's body.
        if entries or section_entries(os.path.join(litdir, fn), "Abstracted"):
            for ok, line in check_bodies(os.path.join(litdir, fn), test, entries):
                print(line)
                nbody += 1
                if ok:
                    passed += 1
                else:
                    failed += 1
    if only:
        print("code: %d (test, function) pairs and %d body results (coverage: only with every test)"
              % (passed + failed - 1 - nbody, nbody))
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0
    # Coverage: every function with an ordering claim is modeled or excused.
    unmodeled = load_unmodeled(repo)
    claims = claim_functions(repo)
    missing = [c for c in claims if c not in covered and c not in unmodeled]
    stale = [u for u in unmodeled if u not in claims or u in covered]
    nmodeled = len([c for c in claims if c in covered])
    if missing or stale:
        for path, func in missing:
            print("FAIL coverage: %s %s claims an ordering in its comment, but no litmus "
                  "test names it (add it to a test's Code: or to unmodeled.txt with why)" % (path, func))
        for path, func in stale:
            print("FAIL coverage: unmodeled.txt lists %s %s, which %s" % (
                path, func, "a test now names" if (path, func) in covered
                else "makes no ordering claim (or no longer exists)"))
        failed += 1
    else:
        print("ok coverage: %d functions claim an ordering: %d modeled, %d excused in unmodeled.txt"
              % (len(claims), nmodeled, len(claims) - nmodeled))
        passed += 1
    print("code: %d (test, function) pairs, %d body results, selftest and coverage"
          % (passed + failed - 2 - nbody, nbody))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
