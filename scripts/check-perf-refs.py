#!/usr/bin/env python3
"""check-perf-refs.py - checks that every citation of the perf log names one section.

usage: check-perf-refs.py [ROOT]

ROOT is the repository root (default: the folder above this script). The log
is ROOT/docs/perf-log.md; each of its section headings carries an id,
P<nn> (the log's preface says why). A citation is the log's file name followed
by one or more ids, separated by spaces, commas or "and"; the ids may follow
on the next comment line. docs/perf.md, the current-numbers page, cites the
log by bare ids: every P<nn> there is a citation too. Errors:

  - a citation names an id that no heading of the log carries;
  - two headings carry the same id;
  - a level-2 heading (a section) carries no id, so it cannot be cited;
  - a date right after perf.md or perf-log.md: a date is not a section id
    (one date matches many sections, which is why the ids exist).

Files read: .c .h .cu .l .y .md .test .py .sh .fa .tile .txt .cmake and
Makefiles below ROOT, but not .git, build* folders, hidden folders or lit
fixture folders (Inputs: a fixture tree is checked when given as ROOT).
Exit status: 0 clean, 1 errors (one line each on stderr: `file:line:
citation: why`), 2 no log or usage.
"""
import os
import re
import sys

SUFFIXES = (".c", ".h", ".cu", ".l", ".y", ".md", ".test", ".py", ".sh", ".fa", ".tile", ".txt",
            ".cmake")
NAMES = ("Makefile",)
LOG = "docs/perf-log.md"
PAGE = "docs/perf.md"

HEADING_RE = re.compile(r"^(#{1,6})\s+(P\d+)?\b")
ID_RE = re.compile(r"\bP\d+\b")
# The ids after the file name, separated by spaces, commas, "and", "/" and,
# across a line break, comment leaders (* // #).
CITE_RE = re.compile(r"perf-log\.md((?:(?:\s|[*/#,]|\band\b)+P\d+\b)+)")
DATE_RE = re.compile(r"perf(?:-log)?\.md,?\s+\d{4}-\d{2}-\d{2}")


def read_headings(path):
    """Returns ({id: first line}, errors) for the log's headings."""
    ids, errors = {}, []
    in_fence = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                in_fence = not in_fence
            m = None if in_fence else HEADING_RE.match(line)
            if not m:
                continue
            pid = m.group(2)
            if pid is None:
                if m.group(1) == "##":
                    errors.append("%s:%d: %s: a section without an id (give it the next one)"
                                  % (LOG, n, line.strip()))
            elif pid in ids:
                errors.append("%s:%d: %s: id %s also heads line %d" % (LOG, n, line.strip(), pid, ids[pid]))
            else:
                ids[pid] = n
    return ids, errors


def files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith(".") and not d.startswith("build") and d != "Inputs")
        for name in sorted(filenames):
            if name.endswith(SUFFIXES) or name in NAMES:
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, root), path


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check(root, ids):
    errors, ncites = [], 0
    for rel, path in files(root):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError as e:
            errors.append("%s: cannot read: %s" % (rel, e.strerror))
            continue
        cites = [(m.start(), "perf-log.md " + ", ".join(ID_RE.findall(m.group(1))),
                  ID_RE.findall(m.group(1))) for m in CITE_RE.finditer(text)]
        if rel.replace(os.sep, "/") == PAGE:
            cites = [(m.start(), m.group(0), [m.group(0)]) for m in ID_RE.finditer(text)]
        for pos, cite, pids in cites:
            ncites += 1
            for pid in pids:
                if pid not in ids:
                    errors.append("%s:%d: %s: no heading of %s carries %s"
                                  % (rel, line_of(text, pos), cite, LOG, pid))
        for m in DATE_RE.finditer(text):
            errors.append("%s:%d: %s: a date is not a section id (cite perf-log.md P<nn>)"
                          % (rel, line_of(text, m.start()), " ".join(m.group(0).split())))
    return errors, ncites


def main(argv):
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[0] if argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    log = os.path.join(root, *LOG.split("/"))
    if not os.path.isfile(log):
        print("check-perf-refs: %s: no such file" % log, file=sys.stderr)
        return 2
    ids, errors = read_headings(log)
    more, ncites = check(root, ids)
    errors += more
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print("check-perf-refs: %d error%s" % (len(errors), "" if len(errors) == 1 else "s"), file=sys.stderr)
        return 1
    print("check-perf-refs: OK, %d citations of %d sections" % (ncites, len(ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
