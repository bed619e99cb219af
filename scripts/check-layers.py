#!/usr/bin/env python3
"""check-layers.py - checks that every quoted #include goes down the layers.

usage: check-layers.py [--rules FILE] [--which PATH ...] [ROOT]

ROOT is the repository root (default: the folder above this script); the
rules come from ROOT/scripts/layers.txt unless --rules names another file.
The rules file documents its format at its top (docs/layers.md has the
picture). In short:

    LAYER GLOB [isolated]   files matching GLOB are at LAYER
    ignore GLOB             files matching GLOB are not checked (fixtures)
    search DIR              quoted includes are also looked up in ROOT/DIR

LAYER is a dotted number (4, 4.2), compared component by component. The
longest matching GLOB gives a file its layer. A file may include a file whose
layer is at most its own; two files of one `isolated` rule may not include
each other (a file its own header, x.c -> x.h, excepted); a quoted include
that resolves to a repository file with no rule is an error. Angle-bracket
includes and quoted ones that resolve to no repository file (generated
headers, the LLVM/MLIR C API) are not checked.

Every .c, .h, .l and .y file below the top-level folders that the globs name
is checked. Exit status: 0 clean, 1 violations (one line each, on stderr:
`file:line: #include "x": why`), 2 a bad rules file or usage.
"""
import argparse
import os
import re
import sys

SOURCE_EXTS = (".c", ".h", ".l", ".y")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
LAYER_RE = re.compile(r"^\d+(\.\d+)*$")


class RulesError(Exception):
    pass


def glob_regex(glob):
    """A path glob as a regex: `*` and `?` stay inside one path component,
    `**` spans components (`a/**/b` also matches `a/b`), [...] is a class."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = glob.find("]", i + 1)
            if j < 0:
                raise ValueError("unclosed [")
            body = glob[i + 1:j]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


class Rule:
    def __init__(self, lineno, text, layer, glob, isolated):
        self.lineno = lineno
        self.text = text  # the rule as written, for messages
        self.layer = layer
        self.key = tuple(int(x) for x in layer.split("."))
        self.glob = glob
        self.isolated = isolated
        self.regex = glob_regex(glob)


def layer_le(a, b):
    """a <= b, component by component (4 == 4.0 < 4.2 < 5)."""
    n = max(len(a), len(b))
    return a + (0,) * (n - len(a)) <= b + (0,) * (n - len(b))


def read_rules(path):
    rules, ignores, search = [], [], []
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise RulesError("%s: %s" % (path, e.strerror))
    seen = {}
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        where = "%s:%d" % (path, n)
        try:
            if words[0] == "ignore" and len(words) == 2:
                ignores.append(glob_regex(words[1]))
                continue
            if words[0] == "search" and len(words) == 2:
                search.append(words[1].strip("/"))
                continue
            if not LAYER_RE.match(words[0]):
                raise RulesError("%s: expected LAYER GLOB [isolated], ignore GLOB or "
                                 "search DIR; got '%s'" % (where, line))
            if len(words) not in (2, 3) or (len(words) == 3 and words[2] != "isolated"):
                raise RulesError("%s: expected LAYER GLOB [isolated]; got '%s'" % (where, line))
            glob = words[1]
            if glob.startswith("/") or glob.split("/")[0] in ("", ".", "..") \
                    or any(ch in glob.split("/")[0] for ch in "*?["):
                raise RulesError("%s: a glob starts with a folder of the repository; "
                                 "got '%s'" % (where, glob))
            if glob in seen:
                raise RulesError("%s: '%s' already has a rule (line %d)" % (where, glob, seen[glob]))
            seen[glob] = n
            rules.append(Rule(n, line, words[0], glob, len(words) == 3))
        except ValueError as e:
            raise RulesError("%s: bad glob: %s" % (where, e))
    if not rules:
        raise RulesError("%s: no rules" % path)
    return rules, ignores, search


def rule_for(rules, rel):
    """The rule with the longest glob matching rel (None if none). Two
    matching globs of one length are ambiguous: an error in the rules."""
    best = [r for r in rules if r.regex.match(rel)]
    if not best:
        return None
    longest = max(len(r.glob) for r in best)
    best = [r for r in best if len(r.glob) == longest]
    if len(best) > 1:
        raise RulesError("%s matches rules of one length: %s" %
                         (rel, ", ".join("'%s' (line %d)" % (r.text, r.lineno) for r in best)))
    return best[0]


def source_files(root, rules, ignores):
    tops = sorted({r.glob.split("/")[0] for r in rules})
    for top in tops:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in sorted(filenames):
                if not f.endswith(SOURCE_EXTS):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                if not any(g.match(rel) for g in ignores):
                    yield rel


def resolve(root, rel, inc, search):
    """The repository path a quoted include names, as the compiler finds it:
    the including file's folder, the root (-I ROOT), then the search folders."""
    for d in [os.path.dirname(rel), ""] + search:
        cand = os.path.normpath(os.path.join(d, inc)).replace(os.sep, "/")
        if cand.startswith("../") or cand == "..":
            continue
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def describe(rule):
    return "layer %s (%s)" % (rule.layer, rule.glob)


def check(root, rules, ignores, search):
    errors, nfiles, nincs = [], 0, 0
    for rel in source_files(root, rules, ignores):
        nfiles += 1
        mine = rule_for(rules, rel)
        if mine is None:
            errors.append("%s: no layer for %s" % (rel, rel))
            continue
        try:
            lines = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read().splitlines()
        except OSError as e:
            errors.append("%s: cannot read: %s" % (rel, e.strerror))
            continue
        for n, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = resolve(root, rel, m.group(1), search)
            if target is None:
                continue
            nincs += 1
            where = '%s:%d: #include "%s"' % (rel, n, m.group(1))
            theirs = rule_for(rules, target)
            if theirs is None:
                errors.append("%s: no layer for %s" % (where, target))
            elif not layer_le(theirs.key, mine.key):
                errors.append("%s: %s may not include %s" % (where, describe(mine), describe(theirs)))
            elif theirs is mine and mine.isolated and target != rel \
                    and os.path.splitext(target)[0] != os.path.splitext(rel)[0]:
                errors.append("%s: %s and %s are both of the isolated %s" %
                              (where, rel, target, describe(mine)))
    return errors, nfiles, nincs


def main(argv):
    ap = argparse.ArgumentParser(description="Checks #include lines against scripts/layers.txt.")
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--rules", help="the rules file (default ROOT/scripts/layers.txt)")
    ap.add_argument("--which", action="append", default=[], metavar="PATH",
                    help="print the rule that gives PATH (relative to ROOT) its layer, and stop")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    rules_path = args.rules or os.path.join(root, "scripts", "layers.txt")
    try:
        rules, ignores, search = read_rules(rules_path)
        if args.which:
            for p in args.which:
                r = rule_for(rules, p)
                print("%s: %s" % (p, "%s, line %d: %s" % (describe(r), r.lineno, r.text) if r else "no layer"))
            return 0
        errors, nfiles, nincs = check(root, rules, ignores, search)
    except RulesError as e:
        print("check-layers: %s" % e, file=sys.stderr)
        return 2
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        shown = os.path.relpath(rules_path, root)
        if shown.startswith(".."):
            shown = rules_path
        print("check-layers: %d violation%s (rules: %s)" % (len(errors), "" if len(errors) == 1 else "s",
                                                           shown), file=sys.stderr)
        return 1
    print("check-layers: OK, %d files, %d includes of repository files" % (nfiles, nincs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
