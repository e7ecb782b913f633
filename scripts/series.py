#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""series.py: the files of `make series` (scripts/series.sh runs it).

    series.py plan --series-dir DIR --patches DIR
        read the split, DIR/*/series (see kernel-config/series/README),
        check it against the patches in --patches (every listed patch
        exists, every patch is in exactly one series, every required
        series exists, no cycle, a cover letter for a series of several
        patches) and print one line per series, a series after the ones
        it requires: NAME<TAB>REQUIRES<TAB>PATCH... (the names of the
        patch files; REQUIRES a comma-separated list of series, or "-")
    series.py files PATCH...
        print the paths the patches change that exist before them (what
        to take from the pristine tarball), one per line
    series.py write --name NAME --email EMAIL --series-dir DIR --patches DIR
                    --out DIR --base TEXT --trees DIR
        write OUT/SERIES/0000-cover-letter.patch (a series of several
        patches) and OUT/SERIES/NNNN-SLUG.patch, numbered within the
        series, in `git format-patch --cover-letter` shape; TREES/SERIES/a
        and b are the files the series touches before and after it
    series.py maintainers --tree KSRC PATCH...
        for every file a patch creates or deletes, name the MAINTAINERS
        entry that covers it; fail if none does
    series.py get-maintainer --tree KSRC --series-dir DIR --patches DIR
        run KSRC's scripts/get_maintainer.pl on each series' patches;
        fail if it names an address that is not a to: or cc: of the
        series

`write`: each patch keeps its body (commit message and diff) byte for
byte, except that the placeholder identity in From: and Signed-off-by:
becomes NAME <EMAIL> (and a Signed-off-by: of NAME is added, as
`git format-patch -s` would, to a patch that has none). Its subject gets
"[PATCH n/N]" within its series ("[PATCH]" for a patch alone), and To:
and Cc: from the series file follow it, as `git format-patch --to --cc`
writes them. No Message-Id, In-Reply-To or References: git send-email
makes the thread. A patch sent alone gets no cover letter: its series'
notes.txt, the sender note and the base go below its "---" line. A
cover letter is the hand-written prose of the series' cover-letter.txt
(@intro, one @patch paragraph per patch keyed by the patch's file name
without its number, optional @prior and @results; {patch:TEXT} in them
becomes the number, within the series, of the one patch whose file name
has TEXT), then the prerequisite series, the sender note, the base
TEXT, the shortlog and the diffstat of TREES/SERIES/a against b,
computed with diff(1) and printed as `git diff --stat=72 --summary`
prints it. series.sh appends the prerequisite-patch-id: lines on the
host (git patch-id).
"""

import email.header
import email.utils
import fnmatch
import os
import re
import subprocess
import sys
import textwrap
import time

PLACEHOLDER = 'lockless-parity developers <lockless-parity@users.noreply.example>'
MBOX_FROM = 'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n'
WIDTH = 72              # git format-patch's diffstat and shortlog width
SUBJECT_WIDTH = 78      # git folds Subject: lines at 78 columns
DROP_HEADERS = ('message-id', 'in-reply-to', 'references')


def die(msg):
    print(f'error: {msg}', file=sys.stderr)
    sys.exit(1)


class Patch:
    """One format-patch file: its headers, its subject, its body."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        stem = self.name[:-len('.patch')] if self.name.endswith('.patch') else self.name
        self.slug = re.sub(r'^\d+-', '', stem)
        with open(path, encoding='utf-8', newline='') as f:
            lines = f.read().splitlines(keepends=True)
        if lines and lines[0].startswith('From ') and not lines[0].startswith('From:'):
            lines = lines[1:]
        headers = []            # [name, value lines]
        i = 0
        while i < len(lines) and lines[i].strip('\r\n'):
            line = lines[i]
            if line[0] in ' \t' and headers:
                headers[-1][1].append(line)
            elif ':' in line:
                headers.append([line.split(':', 1)[0], [line]])
            else:
                die(f'{self.name}: line {i + 1} is not a mail header: {line.rstrip()}')
            i += 1
        if i == len(lines):
            die(f'{self.name}: no blank line after the mail headers')
        self.headers = headers
        self.body = lines[i:]   # from the blank line on
        subject = self.header('subject')
        if subject is None:
            die(f'{self.name}: no Subject: header')
        # Unfold, then drop "[PATCH ...]" prefixes as git mailinfo does.
        subject = ' '.join(l.strip() for l in subject)
        subject = subject.split(':', 1)[1].strip()
        self.subject = re.sub(r'^(\[[^]]*\]\s*)+', '', subject)
        author = self.header('from')
        if author is None:
            die(f'{self.name}: no From: header')
        self.author = ' '.join(l.strip() for l in author).split(':', 1)[1].strip()
        # The diff starts at the first "diff --git"; the message ends at
        # the first "---" line before it.
        self.diff_at = next((n for n, l in enumerate(self.body)
                             if l.startswith('diff --git ')), len(self.body))
        self.msg_end = next((n for n, l in enumerate(self.body[:self.diff_at])
                             if l.rstrip('\r\n') == '---'), self.diff_at)

    def header(self, name):
        for h, value in self.headers:
            if h.lower() == name:
                return value
        return None

    def files(self):
        """(path, created, deleted, mode) for each file the diff changes."""
        out = []
        for n in range(self.diff_at, len(self.body)):
            line = self.body[n]
            m = re.match(r'^diff --git a/(\S+) b/(\S+)', line)
            if m:
                out.append([m.group(2), False, False, '100644'])
                continue
            m = re.match(r'^(new|deleted) file mode (\d+)', line)
            if m and out:
                out[-1][1 if m.group(1) == 'new' else 2] = True
                out[-1][3] = m.group(2)
        return out


def split_identity(ident):
    m = re.match(r'^(.*?)\s*<([^>]*)>$', ident)
    return (m.group(1), m.group(2)) if m else (ident, '')


def mail_address(name, addr):
    """NAME <ADDR> for a mail header: RFC 2047 or quoted, as git does."""
    if any(ord(c) > 127 for c in name):
        name = email.header.Header(name, 'utf-8').encode()
    elif re.search(r'[()<>@,;:\\".\[\]]', name):
        name = '"' + name.replace('\\', '\\\\').replace('"', '\\"') + '"'
    return f'{name} <{addr}>'


def subject_header(text):
    """A folded Subject: header line, as git format-patch writes it."""
    if any(ord(c) > 127 for c in text):
        return 'Subject: ' + email.header.Header(
            text, 'utf-8', header_name='Subject').encode(maxlinelen=SUBJECT_WIDTH) + '\n'
    return textwrap.fill('Subject: ' + text, width=SUBJECT_WIDTH,
                         subsequent_indent=' ', break_long_words=False,
                         break_on_hyphens=False) + '\n'


def git_date(t=None):
    """Date: as git writes it: 'Sun, 6 Dec 2026 23:10:00 +0000'."""
    t = time.time() if t is None else t
    lt = time.localtime(t)
    return (time.strftime('%a, ', lt) + str(lt.tm_mday) +
            time.strftime(' %b %Y %H:%M:%S ', lt) + time.strftime('%z', lt))


def mime_headers(text):
    if all(ord(c) < 128 for c in text):
        return ''
    return ('MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n'
            'Content-Transfer-Encoding: 8bit\n')


def address_headers(to, cc):
    """To: and Cc: as git format-patch --to/--cc writes them."""
    out = ''
    for key, addrs in (('To', to), ('Cc', cc)):
        if addrs:
            out += f'{key}: ' + ',\n    '.join(
                mail_address(*split_identity(a.replace('"', ''))) if '<' in a else a
                for a in addrs) + '\n'
    return out


def rewrite(patch, n, total, name, email_addr, notes, to=(), cc=(), below=''):
    """The series' file for one patch: new subject and identity, same body;
    To: and Cc: after the subject; BELOW, for a patch sent alone, after its
    "---" line (where git format-patch --notes puts notes)."""
    me = f'{name} <{email_addr}>'
    width = len(str(total))
    prefix = '[PATCH]' if total == 1 else f'[PATCH {n:0{width}d}/{total}]'
    out = [MBOX_FROM]
    for h, value in patch.headers:
        key = h.lower()
        if key in DROP_HEADERS:
            notes.append(f'{patch.name}: dropped its {h}: header (git send-email threads the series)')
            continue
        if key == 'subject':
            out.append(subject_header(f'{prefix} {patch.subject}'))
            out.append(address_headers(to, cc))
        elif key == 'from' and patch.author == PLACEHOLDER:
            out.append(f'From: {mail_address(name, email_addr)}\n')
        elif key in ('mime-version', 'content-type', 'content-transfer-encoding'):
            continue    # written below, if the result needs them
        else:
            out.extend(value)
    body = list(patch.body)
    msg = body[:patch.msg_end]
    sob = f'Signed-off-by: {me}'
    seen_me = any(l.rstrip('\r\n') == sob for l in msg)
    kept = []
    for line in msg:
        if line.rstrip('\r\n') == f'Signed-off-by: {PLACEHOLDER}':
            if seen_me:
                continue        # the committer already signed off here
            line = sob + line[len(line.rstrip('\r\n')):]
            seen_me = True
        kept.append(line)
    if not seen_me:
        # As `git format-patch -s`: the sender's sign-off, last trailer.
        while kept and not kept[-1].strip():
            kept.pop()
        last = kept[-1].rstrip('\r\n') if kept else ''
        if not re.match(r'^[A-Za-z-]+: ', last):
            kept.append('\n')
        kept.append(sob + '\n')
        kept.append('\n')
        notes.append(f'{patch.name}: had no Signed-off-by: of {name}; added one, as git format-patch -s does')
    rest = body[patch.msg_end:]
    if below and rest and rest[0].rstrip('\r\n') == '---':
        rest = [rest[0], below.rstrip('\n') + '\n', '\n'] + rest[1:]
    elif below:
        die(f'{patch.name}: no "---" line after the commit message to put the notes below')
    body = kept + rest
    text = ''.join(out) + ''.join(body)
    for line in (''.join(out) + ''.join(kept)).splitlines():
        if PLACEHOLDER in line:
            die(f'{patch.name}: the placeholder identity is still in: {line} '
                '(only From: and Signed-off-by: are rewritten)')
    # After the other headers, as git puts them, if the text needs them.
    return ''.join(out) + mime_headers(text) + ''.join(body)


def parse_template(path):
    """@subject, @intro, @results blocks and @patch SLUG paragraphs."""
    blocks = {'patch': {}}
    cur = None
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            if line.startswith('#'):
                continue
            m = re.match(r'^@(\w+)\s*(.*?)\s*$', line)
            if m:
                kind, arg = m.groups()
                if kind == 'subject':
                    blocks['subject'] = arg
                    cur = None
                elif kind == 'patch':
                    if not arg:
                        die(f'{path}:{n}: @patch needs the patch file name without its number')
                    cur = blocks['patch'].setdefault(arg, [])
                elif kind in ('intro', 'prior', 'results'):
                    cur = blocks.setdefault(kind, [])
                else:
                    die(f'{path}:{n}: unknown directive @{kind}')
                continue
            if cur is None:
                if line.strip():
                    die(f'{path}:{n}: text outside a block (@intro, @patch, @prior, @results)')
                continue
            cur.append(line.rstrip('\n'))
    for key in ('subject', 'intro'):
        if key not in blocks:
            die(f'{path}: no @{key}')

    def trim(lines):
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        return '\n'.join(lines)
    for key in ('intro', 'prior', 'results'):
        blocks[key] = trim(blocks.get(key, []))
    blocks['patch'] = {k: trim(v) for k, v in blocks['patch'].items()}
    return blocks


def number_refs(text, patches, where):
    """{patch:TEXT} -> the series number of the one patch whose slug has TEXT."""
    def sub(m):
        key = m.group(1)
        hits = [n for n, p in enumerate(patches, 1) if key in p.slug]
        if len(hits) != 1:
            die(f'{where}: {{patch:{key}}} names {len(hits)} patches of the '
                'series, not one: fix the reference in the template')
        return str(hits[0])
    return re.sub(r'\{patch:([^}]+)\}', sub, text)


def reflow(text):
    """Rewrap the prose paragraphs of TEXT at WIDTH, keeping their indent
    and "- " bullets; a paragraph with a line indented by 4 or more (a
    table) or with an underline (a heading) stays as written."""
    out = []
    for para in re.split(r'\n[ \t]*\n', text):
        lines = para.split('\n')
        if any(re.match(r'^ {4}', l) or re.match(r'^\s*[-=]{3,}\s*$', l)
               for l in lines):
            out.append(para)
            continue
        lead = re.match(r'^(\s*(?:[-*] )?)', lines[0]).group(1)
        words = ' '.join(l.strip() for l in lines)[len(lead.strip()):].split()
        out.append(textwrap.fill(' '.join(words), width=WIDTH,
                                 initial_indent=lead,
                                 subsequent_indent=' ' * len(lead),
                                 break_long_words=False,
                                 break_on_hyphens=False))
    return '\n\n'.join(out)


def scale_linear(it, width, max_change):
    return 0 if not it else 1 + it * (width - 1) // max_change


def diffstat(stats, summary, width=WIDTH):
    """git's --stat=WIDTH --summary of [(path, added, deleted)]."""
    if not stats:
        return ' 0 files changed\n'
    max_len = max(len(p) for p, _, _ in stats)
    max_change = max(a + d for _, a, d in stats)
    number_width = len(str(max_change))
    width = max(width, 16 + 6 + number_width)
    graph_width = max_change
    name_width = max_len
    if name_width + number_width + 6 + graph_width > width:
        if graph_width > width * 3 // 8 - number_width - 6:
            graph_width = max(width * 3 // 8 - number_width - 6, 6)
        if name_width > width - number_width - 6 - graph_width:
            name_width = width - number_width - 6 - graph_width
        else:
            graph_width = width - number_width - 6 - name_width
    out = []
    adds = dels = 0
    for path, add, dele in stats:
        adds += add
        dels += dele
        prefix, name = '', path
        if len(name) > name_width:
            prefix = '...'
            name = name[len(name) - max(name_width - 3, 0):]
            if '/' in name:
                name = name[name.index('/'):]
        pad = max(name_width - len(prefix) - len(name), 0)
        a, d = add, dele
        if graph_width <= max_change:
            total = scale_linear(a + d, graph_width, max_change)
            if total < 2 and a and d:
                total = 2
            if a < d:
                a = scale_linear(a, graph_width, max_change)
                d = total - a
            else:
                d = scale_linear(d, graph_width, max_change)
                a = total - d
        n = add + dele
        out.append(f' {prefix}{name}{" " * pad} | {n:>{number_width}}'
                   f'{" " if n else ""}{"+" * a}{"-" * d}\n')
    files = len(stats)
    line = f' {files} file{"" if files == 1 else "s"} changed'
    if adds or not dels:
        line += f', {adds} insertion{"" if adds == 1 else "s"}(+)'
    if dels or not adds:
        line += f', {dels} deletion{"" if dels == 1 else "s"}(-)'
    out.append(line + '\n')
    out.extend(summary)
    return ''.join(out)


def combined_stat(patches, pristine, patched):
    """The diffstat of the whole series: each file before and after it."""
    paths = {}
    for p in patches:
        for path, created, deleted, mode in p.files():
            paths.setdefault(path, mode if created or deleted else None)
            if created or deleted:
                paths[path] = mode
    stats, summary = [], []
    for path in sorted(paths):
        a = os.path.join(pristine, path)
        b = os.path.join(patched, path)
        old = a if os.path.exists(a) else '/dev/null'
        new = b if os.path.exists(b) else '/dev/null'
        if old == new == '/dev/null':
            continue
        r = subprocess.run(['diff', '-u', old, new], capture_output=True,
                           text=True, errors='replace')
        if r.returncode > 1:
            die(f'diff -u {old} {new} failed: {r.stderr.strip()}')
        add = dele = 0
        in_hunks = False
        for line in r.stdout.splitlines():
            if line.startswith('@@'):
                in_hunks = True
            elif in_hunks and line.startswith('+'):
                add += 1
            elif in_hunks and line.startswith('-'):
                dele += 1
        if add or dele or old != new:
            stats.append((path, add, dele))
        mode = paths[path] or '100644'
        if old == '/dev/null':
            summary.append(f' create mode {mode} {path}\n')
        elif new == '/dev/null':
            summary.append(f' delete mode {mode} {path}\n')
    return diffstat(stats, summary)


def shortlog(patches):
    """`git shortlog` of the series, as format-patch's cover letter has it."""
    by = {}
    for p in patches:
        by.setdefault(split_identity(p.out_author)[0], []).append(p.subject)
    out = []
    for name in sorted(by):
        out.append(f'{name} ({len(by[name])}):\n')
        for s in by[name]:
            out.append(textwrap.fill(s, width=WIDTH, initial_indent='  ',
                                     subsequent_indent='    ',
                                     break_long_words=False,
                                     break_on_hyphens=False) + '\n')
        out.append('\n')
    return ''.join(out)


class Series:
    """One kernel-config/series/NAME/: its series file, cover letter, notes."""

    KEYS = ('to', 'cc', 'requires', 'message-id')

    def __init__(self, top, name):
        self.name = name
        self.dir = os.path.join(top, name)
        self.file = os.path.join(self.dir, 'series')
        self.to, self.cc, self.requires, self.patches = [], [], [], []
        self.message_id = None
        if not os.path.isfile(self.file):
            die(f'{self.dir}/ has no series file: each directory of '
                f'{top}/ is one series (see its README)')
        with open(self.file, encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith('#'):
                    continue
                where = f'{self.file}:{n}'
                m = re.match(r'^([a-z-]+):\s*(.*)$', line)
                if m:
                    key, value = m.groups()
                    if key not in self.KEYS:
                        die(f'{where}: unknown key {key}: (one of {", ".join(self.KEYS)})')
                    if not value:
                        die(f'{where}: {key}: needs a value')
                    if key in ('to', 'cc'):
                        if not re.match(r'^([^<>]*<[^<>@\s]+@[^<>@\s]+>|[^<>@\s]+@[^<>@\s]+)$', value):
                            die(f'{where}: {key}: {value} is not "Name <address>" or an address')
                        getattr(self, key).append(value)
                    elif key == 'requires':
                        self.requires.append(value)
                    elif self.message_id is not None:
                        die(f'{where}: a second message-id:')
                    else:
                        self.message_id = value.strip('<>')
                elif line.endswith('.patch') and '/' not in line and ' ' not in line:
                    if line in self.patches:
                        die(f'{where}: {line} is listed twice')
                    self.patches.append(line)
                else:
                    die(f'{where}: neither "key: value" nor a patch file name: {line}')
        if not self.patches:
            die(f'{self.file} lists no patch')
        if not self.to:
            die(f'{self.file} has no to: (the maintainers who take the series)')
        self.cover = os.path.join(self.dir, 'cover-letter.txt')
        self.notes = os.path.join(self.dir, 'notes.txt')
        if len(self.patches) > 1 and not os.path.isfile(self.cover):
            die(f'series {name} has {len(self.patches)} patches and no '
                f'{self.cover}: a series of several patches needs a cover letter')
        if len(self.patches) == 1 and os.path.isfile(self.cover):
            die(f'series {name} is a single patch, which gets no cover letter: '
                f'move {self.cover} to {self.notes} (printed below the patch\'s "---")')
        if len(self.patches) > 1 and os.path.isfile(self.notes):
            die(f'series {name} has several patches: its notes belong in '
                f'the cover letter, not in {self.notes}')

    def addresses(self):
        return self.to + self.cc


def load_split(top, patch_dir):
    """The series of TOP, in order (a series after those it requires),
    checked against the patch files of PATCH_DIR."""
    if not os.path.isdir(top):
        die(f'no {top}/: the split of the patches into series')
    names = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d)))
    if not names:
        die(f'{top}/ holds no series (one directory per series)')
    split = {n: Series(top, n) for n in names}
    for sr in split.values():
        sr.patch_dir = patch_dir
    have = sorted(f for f in os.listdir(patch_dir) if f.endswith('.patch'))
    owner = {}
    for s in split.values():
        for p in s.patches:
            if p in owner:
                die(f'{p} is in two series: {owner[p]} and {s.name} '
                    f'({top}/*/series): a patch goes to one tree')
            owner[p] = s.name
            if p not in have:
                die(f'{top}/{s.name}/series lists {p}, which is not in '
                    f'{patch_dir}/: renamed or dropped? list its current name, or drop the line')
        for r in s.requires:
            if r not in split:
                die(f'{top}/{s.name}/series requires {r}, which is no series of {top}/')
    orphans = [p for p in have if p not in owner]
    if orphans:
        die(f'{", ".join(orphans)} {"is" if len(orphans) == 1 else "are"} in no series: '
            f'add {"it" if len(orphans) == 1 else "each"} to one of {top}/*/series '
            '(make series and make series-check send or check only what a series lists)')
    order, state = [], {}

    def visit(n, path):
        if state.get(n) == 'done':
            return
        if state.get(n) == 'open':
            die(f'the series require each other in a cycle: {" -> ".join(path + [n])}')
        state[n] = 'open'
        for r in split[n].requires:
            visit(r, path + [n])
        state[n] = 'done'
        order.append(split[n])
    for n in names:
        visit(n, [])
    return order


def base_of(split, series):
    """The series that SERIES applies on, prerequisites' prerequisites
    first, each once."""
    by = {s.name: s for s in split}
    out = []

    def add(name):
        for r in by[name].requires:
            add(r)
        if by[name] not in out:
            out.append(by[name])
    for r in series.requires:
        add(r)
    return out


def cmd_plan(top, patch_dir):
    for s in load_split(top, patch_dir):
        print(f'{s.name}\t{",".join(s.requires) or "-"}\t{" ".join(s.patches)}')


def cmd_files(paths):
    patches = [Patch(p) for p in paths]
    seen = set()
    for p in patches:
        for path, created, _, _ in p.files():
            if path not in seen and not created:
                print(path)
            seen.add(path)


SENDER_NOTE = (
    'The patches come from lockless-parity, where they are kept with a '
    'placeholder author; their From: and Signed-off-by: are those of the '
    'sender (make series writes them from the git config user.name and '
    'user.email of whoever runs it), who certifies the Developer\'s '
    'Certificate of Origin for them.')


def prerequisite_text(series, split):
    """What a series that needs others says of them (its cover letter, or
    its notes if sent alone)."""
    if not series.requires:
        return ''
    by = {s.name: s for s in split}
    parts = []
    for r in series.requires:
        req = by[r]
        subject = (parse_template(req.cover)['subject'] if os.path.isfile(req.cover)
                   else Patch(os.path.join(req.patch_dir, req.patches[0])).subject)
        n = len(req.patches)
        where = (f'Link: https://lore.kernel.org/r/{req.message_id}' if req.message_id
                 else 'posted separately, before this one')
        parts.append(f'"{subject}" ({n} patch{"es" if n > 1 else ""}; {where})')
    return ('Prerequisite: this series applies on top of the series ' +
            ' and '.join(parts) + ', in that order, on the base below; the '
            'prerequisite-patch-id: lines at the end name its patches.')


def write_series(args, series, split, notes):
    """build/series/NAME/: the cover letter (several patches) and the
    patches, numbered within the series."""
    name, email_addr = args['--name'], args['--email']
    out_dir = os.path.join(args['--out'], series.name)
    os.makedirs(out_dir, exist_ok=True)
    patches = [Patch(os.path.join(series.patch_dir, p)) for p in series.patches]
    total = len(patches)
    me = f'{name} <{email_addr}>'
    base = textwrap.fill(' '.join(args['--base'].split()), width=WIDTH,
                         break_long_words=False, break_on_hyphens=False)
    prereq = prerequisite_text(series, split)
    note = SENDER_NOTE
    if total == 1:
        # One patch: the same sentences, in the singular.
        for many, one in (('The patches come', 'The patch comes'),
                          ('where they are kept', 'where it is kept'),
                          ('their From:', 'its From:'), ('for them.', 'for it.')):
            note = note.replace(many, one)
        base = textwrap.fill(' '.join(args['--base'].replace(
            'each patch applies to it with patch -p1 on top of the ones before it. '
            'The series has', 'the patch applies to it with patch -p1. It has').split()),
            width=WIDTH, break_long_words=False, break_on_hyphens=False)
    sender = textwrap.fill(note, width=WIDTH, break_long_words=False,
                           break_on_hyphens=False)
    below = ''
    if total == 1:
        # A patch sent alone: its notes, the sender and the base go below
        # its "---", as the kernel's submitting-patches.rst asks.
        parts = []
        if os.path.isfile(series.notes):
            with open(series.notes, encoding='utf-8') as f:
                text = '\n'.join(l.rstrip('\n') for l in f if not l.startswith('#'))
            parts.append(reflow(number_refs(text.strip(), patches, series.notes)))
        if prereq:
            parts.append(textwrap.fill(prereq, width=WIDTH, break_long_words=False,
                                       break_on_hyphens=False))
        parts += [sender, base]
        below = '\n\n'.join(parts) + '\n'
    for n, p in enumerate(patches, 1):
        text = rewrite(p, n, total, name, email_addr, notes, series.to, series.cc, below)
        p.out_author = me if p.author == PLACEHOLDER else p.author
        p.out_name = f'{n:04d}-{p.slug}.patch'
        with open(os.path.join(out_dir, p.out_name), 'w', encoding='utf-8',
                  newline='') as f:
            f.write(text)
        print(f'  {series.name}/{p.out_name}')
    if total == 1:
        return

    # The cover letter.
    tname = series.cover
    tmpl = parse_template(tname)
    width = len(str(total))
    body = [reflow(number_refs(tmpl['intro'], patches, f'{tname} @intro')), '']
    slugs = {p.slug for p in patches}
    for n, p in enumerate(patches, 1):
        para = tmpl['patch'].get(p.slug)
        if para is None:
            notes.append(f'{series.name}/{p.name}: no "@patch {p.slug}" paragraph in '
                         f'{tname}: the cover letter gives its subject only')
            para = p.subject + '.'
        para = number_refs(para, patches, f'{tname} @patch {p.slug}')
        label = f'{n:>{width}}. '
        if n > 1:
            body.append('')
        body.append(textwrap.fill(' '.join(para.split()), width=WIDTH,
                                  initial_indent=label,
                                  subsequent_indent=' ' * len(label),
                                  break_long_words=False,
                                  break_on_hyphens=False))
    for slug in sorted(set(tmpl['patch']) - slugs):
        notes.append(f'{tname}: "@patch {slug}" matches no patch of the series '
                     f'(kernel-config/series/{series.name}/series): renamed, moved or dropped?')
    for key in ('prior', 'results'):
        if tmpl[key]:
            body += ['', reflow(number_refs(tmpl[key], patches, f'{tname} @{key}'))]
    if prereq:
        body += ['', textwrap.fill(prereq, width=WIDTH, break_long_words=False,
                                   break_on_hyphens=False)]
    body += ['', sender, '', base, '']
    trees = os.path.join(args['--trees'], series.name)
    text = (''.join(body_line + '\n' for body_line in body) +
            shortlog(patches) +
            combined_stat(patches, os.path.join(trees, 'a'), os.path.join(trees, 'b')))
    head = (MBOX_FROM + f'From: {mail_address(name, email_addr)}\n' +
            f'Date: {git_date()}\n' +
            subject_header(f'[PATCH {0:0{width}d}/{total}] {tmpl["subject"]}') +
            address_headers(series.to, series.cc))
    text = head + mime_headers(head + text) + '\n' + text
    with open(os.path.join(out_dir, '0000-cover-letter.patch'), 'w',
              encoding='utf-8') as f:
        f.write(text)
    print(f'  {series.name}/0000-cover-letter.patch')


def cmd_write(args):
    split = load_split(args['--series-dir'], args['--patches'])
    notes = []
    for series in split:
        write_series(args, series, split, notes)
    for note in notes:
        print(f'note: {note}')


def cmd_get_maintainer(ksrc, top, patch_dir):
    """Every address scripts/get_maintainer.pl names for a series' patches
    must be among its to: and cc:."""
    bad = 0
    for series in load_split(top, patch_dir):
        paths = [os.path.abspath(os.path.join(patch_dir, p)) for p in series.patches]
        r = subprocess.run(['perl', 'scripts/get_maintainer.pl', '--no-git',
                            '--no-git-fallback', '--no-rolestats'] + paths,
                           cwd=ksrc, capture_output=True, text=True)
        if r.returncode != 0:
            die(f'get_maintainer.pl failed for series {series.name}: {r.stderr.strip()}')
        have = {split_identity(a)[1].lower() or a.lower() for a in series.addresses()}
        missing = []
        for line in r.stdout.splitlines():
            addr = split_identity(line.strip())[1] or line.strip()
            if addr and addr.lower() not in have:
                missing.append(line.strip())
        if missing:
            bad += 1
            print(f'  FAIL {series.name}: get_maintainer.pl names, and '
                  f'{top}/{series.name}/series lacks (add as to: or cc:):')
            for m in missing:
                print(f'       {m}')
        else:
            print(f'  ok   {series.name}: {len(series.to)} to, {len(series.cc)} cc; '
                  'everyone get_maintainer.pl names is among them')
    return 1 if bad else 0


def maintainers_sections(ksrc):
    """[(title, [F: patterns], [X: patterns])] from KSRC/MAINTAINERS."""
    sections = []
    with open(os.path.join(ksrc, 'MAINTAINERS'), encoding='utf-8',
              errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            m = re.match(r'^([A-Z]):\s*(.*)$', line)
            if not line.strip():
                continue
            if m:
                if sections and m.group(1) in 'FX':
                    sections[-1][1 if m.group(1) == 'F' else 2].append(m.group(2))
            elif not line[0].isspace():
                sections.append((line, [], []))
    return sections


def pattern_covers(pattern, path):
    """MAINTAINERS F:/X: semantics: dir/ (all below), globs within a dir."""
    if pattern.endswith('/'):
        return path.startswith(pattern)
    if any(c in pattern for c in '*?['):
        # A glob matches within its directory only ("dir/*": not below).
        rx = fnmatch.translate(pattern).replace('.*', '[^/]*')
        return re.match(rx, path) is not None
    return path == pattern or path.startswith(pattern + '/')


def cmd_maintainers(ksrc, paths):
    sections = maintainers_sections(ksrc)
    bad = 0
    for p in (Patch(x) for x in paths):
        for path, created, deleted, _ in p.files():
            if not (created or deleted):
                continue
            hits = [t for t, fs, xs in sections
                    if any(pattern_covers(f, path) for f in fs) and
                    not any(pattern_covers(x, path) for x in xs)]
            what = 'creates' if created else 'deletes'
            if hits:
                print(f'  {p.name} {what} {path}: covered by MAINTAINERS "{hits[0]}"')
            else:
                print(f'  FAIL {p.name} {what} {path}: no MAINTAINERS entry covers it')
                bad += 1
    return 1 if bad else 0


def main():
    if len(sys.argv) < 2:
        die(__doc__.strip().split('\n\n')[0])
    cmd, rest = sys.argv[1], sys.argv[2:]
    args, paths = {}, []
    i = 0
    while i < len(rest):
        if rest[i].startswith('--'):
            if i + 1 >= len(rest):
                die(f'{rest[i]} needs a value')
            args[rest[i]] = rest[i + 1]
            i += 2
        else:
            paths.append(rest[i])
            i += 1
    if cmd == 'plan':
        for a in ('--series-dir', '--patches'):
            if a not in args:
                die(f'series.py plan: {a} is missing')
        cmd_plan(args['--series-dir'], args['--patches'])
        return 0
    if cmd == 'write':
        for a in ('--name', '--email', '--series-dir', '--patches', '--out',
                  '--base', '--trees'):
            if a not in args:
                die(f'series.py write: {a} is missing')
        cmd_write(args)
        return 0
    if cmd == 'get-maintainer':
        for a in ('--tree', '--series-dir', '--patches'):
            if a not in args:
                die(f'series.py get-maintainer: {a} is missing')
        return cmd_get_maintainer(args['--tree'], args['--series-dir'], args['--patches'])
    if not paths:
        die('no patches given')
    if cmd == 'files':
        cmd_files(paths)
    elif cmd == 'maintainers':
        if '--tree' not in args:
            die('series.py maintainers: --tree is missing')
        return cmd_maintainers(args['--tree'], paths)
    else:
        die(f'unknown command {cmd}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
