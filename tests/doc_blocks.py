"""doc_blocks.py - the fenced blocks of the docs, for tests/test_docs.sh.

  doc_blocks.py plan OUT TMP FILE...   every fenced block of the FILEs: those to run written to
                                       OUT (OUT/plan, a line each; OUT/N.sh, N.sql, N.console);
                                       prints "FAIL: FILE:LINE: why" for each block that breaks
                                       the convention, and "skip: FILE:LINE: reason" for each skip
  doc_blocks.py console BLOCK LOG      run a console block's "$ " commands in bash -e, its output
                                       in LOG; every output line the block shows must follow in
                                       the output, in order (a number or "..." matches any)

The convention (test_docs.sh's header says why): a block's info string is its language. sh,
console and sql blocks are commands, and each is run, unless the line just above its fence is
  <!-- doc-test: skip (REASON) -->
Other languages (c, text, json, python, js) are not commands and are not run; a block without a
language, or with another, is an error. The comment above a block that runs may also hold, joined
by ";":
  setup NAME...         environments test_docs.sh prepares first (its setup_NAME functions)
  replace 'OLD' 'NEW'   run the block with OLD replaced by NEW ({tmp}: the test's temporary
                        directory); OLD must be in the block
  background PORT       start the block in the background and wait until 127.0.0.1:PORT takes a
                        connection; it is stopped when its document's blocks are done
"""
import os
import re
import subprocess
import sys

COMMANDS = {"sh", "console", "sql"}
NOT_COMMANDS = {"c", "text", "json", "python", "js"}
FENCE = re.compile(r"^( {0,3})```\s*([A-Za-z0-9_+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")


def blocks(path):
    """(line, lang, marker or None, body) of each fenced block of path; line counts from 1."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^ {0,3}```\s*$", lines[i]):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        yield start + 1, lang, marker.group(1) if marker else None, "\n".join(body) + "\n"
        i += 1


def directives(text):
    """The marker's directives as (word, rest) pairs; raises ValueError on a malformed one."""
    out = []
    for part in [p.strip() for p in re.split(r";(?![^(]*\))", text) if p.strip()]:  # a reason may hold ";"
        word, _, rest = part.partition(" ")
        rest = rest.strip()
        if word == "skip":
            if not re.fullmatch(r"\(.*\S.*\)", rest):
                raise ValueError("skip needs a reason in parentheses: skip (REASON)")
        elif word == "setup":
            if not re.fullmatch(r"[a-z0-9_]+( [a-z0-9_]+)*", rest):
                raise ValueError("setup needs names: setup NAME...")
        elif word == "replace":
            m = re.fullmatch(r"'([^']+)' '([^']*)'", rest)
            if not m:
                raise ValueError("replace needs two quoted strings: replace 'OLD' 'NEW'")
            rest = (m.group(1), m.group(2))
        elif word == "background":
            if not re.fullmatch(r"[0-9]+", rest):
                raise ValueError("background needs a port: background PORT")
        else:
            raise ValueError("unknown directive %r (skip, setup, replace, background)" % word)
        out.append((word, rest))
    return out


def plan(out, tmp, files):
    n, bad = 0, 0
    with open(os.path.join(out, "plan"), "w") as pl:
        for f in files:
            for line, lang, marker, body in blocks(f):
                where = "%s:%d" % (f, line)
                if lang not in COMMANDS:
                    if lang not in NOT_COMMANDS:
                        print("FAIL: %s: a block %s: name its language (sh, console, sql: run; %s: not)"
                              % (where, "without a language" if not lang else "in %r" % lang,
                                 ", ".join(sorted(NOT_COMMANDS))))
                        bad += 1
                    continue
                if lang == "console" and not re.search(r"^\$ ", body, re.M):
                    print("FAIL: %s: a console block without a command (a line \"$ COMMAND\")" % where)
                    bad += 1
                    continue
                try:
                    ds = directives(marker) if marker is not None else []
                except ValueError as e:
                    print("FAIL: %s: <!-- doc-test: %s -->: %s" % (where, marker, e))
                    bad += 1
                    continue
                skip = [r for w, r in ds if w == "skip"]
                if skip:
                    print("skip: %s: %s" % (where, skip[0][1:-1]))
                    continue
                setups, port = [], ""
                for w, r in ds:
                    if w == "setup":
                        setups += r.split()
                    elif w == "background":
                        port = r
                    elif w == "replace":
                        if r[0] not in body:
                            print("FAIL: %s: replace '%s': not in the block" % (where, r[0]))
                            bad += 1
                        body = body.replace(r[0], r[1].replace("{tmp}", tmp))
                n += 1
                with open(os.path.join(out, "%03d.%s" % (n, lang)), "w") as b:
                    b.write(body)
                os.chmod(os.path.join(out, "%03d.%s" % (n, lang)), 0o644)
                pl.write("%03d\t%s\t%s\t%s\t%s\t%s\n" % (n, where, lang, re.sub(r"[^A-Za-z0-9]", "_", f),
                                                         ",".join(setups) or "-", port or "-"))
    return bad


def shape(line):
    """A shown output line as a regular expression: numbers and "..." match anything."""
    parts = re.split(r"(\.\.\.|[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)", line.strip())
    rx = "".join(".*" if p == "..." else r"-?[0-9.e+-]+" if re.match(r"[0-9]", p) else re.escape(p)
                 for p in parts)
    return re.compile(rx + r"\Z")


def run_console(path, log):
    cmds, shown, cont = [], [], False
    for line in open(path, encoding="utf-8").read().split("\n"):
        if cont or line.startswith("$ "):
            cmds.append(line if cont else line[2:])
            cont = line.endswith("\\")
            if not cont:  # output that ends without a newline (curl's) on a line of its own
                cmds.append("echo")
        elif line.strip():
            shown.append(line)
    p = subprocess.run(["bash", "-e", "-c", "\n".join(cmds)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300)
    text = p.stdout.decode("utf-8", "replace")
    open(log, "w").write(text)
    if p.returncode != 0:
        print("exit status %d" % p.returncode)
        return 1
    got, at = text.split("\n"), 0
    for s in shown:
        rx = shape(s)
        while at < len(got) and not rx.match(got[at].strip()):
            at += 1
        if at == len(got):
            print("the output has no line like %r (after the lines before it)" % s.strip())
            return 1
        at += 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "plan":
        sys.exit(min(plan(sys.argv[2], sys.argv[3], sys.argv[4:]), 100))
    sys.exit(run_console(sys.argv[2], sys.argv[3]))
