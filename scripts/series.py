#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""series.py: the files of `make series` (scripts/series.sh runs it).

    series.py files PATCH...
        print the paths the patches change that exist before the series
        (what to take from the pristine tarball), one per line
    series.py write --name NAME --email EMAIL --template FILE --out DIR
                    --base TEXT --pristine DIR --patched DIR PATCH...
        write DIR/0000-cover-letter.patch and one DIR/NNNN-SLUG.patch per
        PATCH, in `git format-patch --cover-letter` shape
    series.py maintainers --tree KSRC PATCH...
        for every file a patch creates or deletes, name the MAINTAINERS
        entry that covers it; fail if none does

`write`: each patch keeps its body (commit message and diff) byte for
byte, except that the placeholder identity in From: and Signed-off-by:
becomes NAME <EMAIL> (and a Signed-off-by: of NAME is added, as
`git format-patch -s` would, to a patch that has none). Its subject gets
"[PATCH n/N]". No Message-Id, In-Reply-To or References: git send-email
makes the thread. The cover letter is the hand-written prose of the
template (the motivation, one paragraph per patch keyed by the patch's
file name without its number, the results; {patch:TEXT} in them becomes
the number of the one patch whose file name has TEXT), the base TEXT, the shortlog
and the combined diffstat of PRISTINE against PATCHED (the files the
series touches, before and after it), computed with diff(1) and printed
as `git diff --stat=72 --summary` prints it.
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


def rewrite(patch, n, total, name, email_addr, notes):
    """The series' file for one patch: new subject and identity, same body."""
    me = f'{name} <{email_addr}>'
    width = len(str(total))
    out = [MBOX_FROM]
    for h, value in patch.headers:
        key = h.lower()
        if key in DROP_HEADERS:
            notes.append(f'{patch.name}: dropped its {h}: header (git send-email threads the series)')
            continue
        if key == 'subject':
            out.append(subject_header(f'[PATCH {n:0{width}d}/{total}] {patch.subject}'))
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
    body = kept + body[patch.msg_end:]
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
                elif kind in ('intro', 'results'):
                    cur = blocks.setdefault(kind, [])
                else:
                    die(f'{path}:{n}: unknown directive @{kind}')
                continue
            if cur is None:
                if line.strip():
                    die(f'{path}:{n}: text outside a block (@intro, @patch, @results)')
                continue
            cur.append(line.rstrip('\n'))
    for key in ('subject', 'intro', 'results'):
        if key not in blocks:
            die(f'{path}: no @{key}')

    def trim(lines):
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        return '\n'.join(lines)
    blocks['intro'] = trim(blocks['intro'])
    blocks['results'] = trim(blocks['results'])
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


def cmd_files(paths):
    patches = [Patch(p) for p in paths]
    seen = set()
    for p in patches:
        for path, created, _, _ in p.files():
            if path not in seen and not created:
                print(path)
            seen.add(path)


def cmd_write(args, paths):
    name, email_addr = args['--name'], args['--email']
    out_dir, tmpl = args['--out'], parse_template(args['--template'])
    patches = [Patch(p) for p in paths]
    total = len(patches)
    notes = []
    os.makedirs(out_dir, exist_ok=True)
    me = f'{name} <{email_addr}>'
    for n, p in enumerate(patches, 1):
        text = rewrite(p, n, total, name, email_addr, notes)
        p.out_author = me if p.author == PLACEHOLDER else p.author
        p.out_name = f'{n:04d}-{p.slug}.patch'
        with open(os.path.join(out_dir, p.out_name), 'w', encoding='utf-8',
                  newline='') as f:
            f.write(text)
        print(f'  {p.out_name}')

    # The cover letter.
    width = len(str(total))
    tname = args['--template']
    body = [reflow(number_refs(tmpl['intro'], patches, f'{tname} @intro')), '']
    slugs = {p.slug for p in patches}
    for n, p in enumerate(patches, 1):
        para = tmpl['patch'].get(p.slug)
        if para is None:
            notes.append(f'{p.name}: no "@patch {p.slug}" paragraph in '
                         f'{args["--template"]}: the cover letter gives its subject only')
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
        notes.append(f'{args["--template"]}: "@patch {slug}" matches no file of '
                     'kernel-config/patches/ (renamed or dropped?)')
    body += ['', reflow(number_refs(tmpl['results'], patches, f'{tname} @results')), '',
             textwrap.fill(' '.join(args['--base'].split()), width=WIDTH,
                           break_long_words=False, break_on_hyphens=False),
             '']
    text = (''.join(body_line + '\n' for body_line in body) +
            shortlog(patches) +
            combined_stat(patches, args['--pristine'], args['--patched']))
    head = (MBOX_FROM + f'From: {mail_address(name, email_addr)}\n' +
            f'Date: {git_date()}\n' +
            subject_header(f'[PATCH {0:0{width}d}/{total}] {tmpl["subject"]}'))
    text = head + mime_headers(head + text) + '\n' + text
    with open(os.path.join(out_dir, '0000-cover-letter.patch'), 'w',
              encoding='utf-8') as f:
        f.write(text)
    print('  0000-cover-letter.patch')
    for note in notes:
        print(f'note: {note}')


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
    if not paths:
        die('no patches given')
    if cmd == 'files':
        cmd_files(paths)
    elif cmd == 'write':
        for a in ('--name', '--email', '--template', '--out', '--base',
                  '--pristine', '--patched'):
            if a not in args:
                die(f'series.py write: {a} is missing')
        cmd_write(args, paths)
    elif cmd == 'maintainers':
        if '--tree' not in args:
            die('series.py maintainers: --tree is missing')
        return cmd_maintainers(args['--tree'], paths)
    else:
        die(f'unknown command {cmd}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
