"""layering.py - the library's layers as the linker and the preprocessor see them, for tests/test_layering.sh.

    layering.py OBJ_DIR KNOWN_FILE

Reads `nm -g` of every object of the library (OBJ_DIR/src/**, models/, transports/): an object
uses another when it calls or reads a symbol the other defines. Prints one line per finding:

  cycle A B ...        objects that reach one another (a strongly connected set of 2 or more)
                       whose files are not of one idea: one folder and one name stem (conv and
                       conv_depthwise, zmq and zmq_handshake, the onnx_* files of the importer)
  folder X -> Y        an object of folder X uses one of folder Y, which docs/DESIGN.md's layers do
                       not allow (ALLOWED below)
  header FILE -> H     a source includes another folder's private header (each folder's impl.h
                       is its own; core/impl.h, the library's common helpers, is everyone's)
  floor A (F) -> B (G) an object of src/comm uses one on a floor above its own (FLOORS below,
                       src/comm/impl.h and docs/DESIGN.md: calls go down; a floor below reaches
                       membership only through its hook table, a pointer the linker does not see)
  floor A unplaced     an object of src/comm that FLOORS does not place
  include FILE -> H    a program's source includes what its side may not (include_findings below):
                       a file under tools/ anything under examples/ (a tool stands on no example),
                       a file under examples/ or common/ anything but ddl.h and common/ (an
                       example is copied out of the tree with common/, the programs' kit, and
                       builds from an installed ddl)

Each finding is checked against KNOWN_FILE, the findings the house still has (issue 48 removes
them): a finding not listed is NEW (the test fails), a listed one no longer found is STALE (the
test fails too: take it off the list). Exit 0 when neither.
"""
import collections
import glob
import os
import re
import subprocess
import sys

# folder -> the folders its objects may use (docs/DESIGN.md, "The layers": calls go down)
ALLOWED = {
    "transports": {"src/core"},
    "src/comm": {"src/core", "transports"},
    "src/core": set(),
    "src/data": {"src/core"},
    "src/graph": {"src/core", "src/formats"},
    "models": {"src/core", "src/graph"},
    "src/observe": {"src/core", "src/comm"},
    "src/formats": {"src/core"},
    "src/infer": {"src/core", "src/data", "src/formats", "src/graph", "src/observe", "models"},
    "src/train": {"src/core", "src/comm", "src/data", "src/formats", "src/graph", "src/observe", "models"},
}

# src/comm's floors, from the ground up: a file uses only its own floor and those below
FLOORS = {
    "links": ["comm", "transport", "heartbeat"],
    "collectives": ["ring", "halving", "hier", "collectives", "shards", "compress"],
    "membership": ["replay", "elastic", "join", "heartbeat_start"],
    "making": ["create", "create_hier", "env", "slurm", "tfconfig"],
}
FLOOR_OF = {"src/comm/" + f: (i, name) for i, (name, fs) in enumerate(FLOORS.items()) for f in fs}


def floor_findings(edges):
    got = set()
    for a, bs in edges.items():
        if not a.startswith("src/comm/"):
            continue
        if a not in FLOOR_OF:
            got.add("floor %s unplaced" % a)
            continue
        for b in bs:
            if b in FLOOR_OF and FLOOR_OF[b][0] > FLOOR_OF[a][0]:
                got.add("floor %s (%s) -> %s (%s)" % (a, FLOOR_OF[a][1], b, FLOOR_OF[b][1]))
    return got


def folder(name):
    p = name.split("/")
    return "/".join(p[:2]) if p[0] == "src" else p[0]


def stem(name):
    base = os.path.basename(name)
    return base.split("_")[0]


TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def objects(root):
    """the objects of the library's sources: an object whose source is gone (a file moved since the
    build directory was made) is left out, as a clean build would not have it."""
    pats = ("src/**/*.o", "models/*.o", "transports/*.o")
    found = sorted({o for p in pats for o in glob.glob(os.path.join(root, p), recursive=True)})
    named = [(os.path.relpath(o, root)[:-2], o) for o in found]
    return [(n, o) for n, o in named if os.path.exists(os.path.join(TREE, n + ".c"))]


def graph(root):
    defs, uses = {}, collections.defaultdict(set)
    objs = objects(root)
    by_path = {path: name for name, path in objs}
    # one nm for every object (-A: each line starts with its file), not one process each
    out = subprocess.run(["nm", "-g", "-A"] + [path for _, path in objs], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        path, _, rest = line.partition(".o:")
        name, f = by_path.get(path + ".o"), rest.split()
        if name is None:
            continue
        if len(f) == 3 and f[1] in "TDBRVWC":
            defs[f[2]] = name
        elif len(f) == 2 and f[0] == "U":
            uses[name].add(f[1])
    edges = {name: set() for name, _ in objs}
    for a, syms in uses.items():
        for s in syms:
            b = defs.get(s)
            if b and b != a:
                edges[a].add(b)
    return edges


def cycles(edges):
    """strongly connected sets of 2 or more (Tarjan's, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                c = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    c.append(w)
                    if w == v:
                        break
                if len(c) > 1:
                    out.append(sorted(c))
    return out


# ---- the programs: who may include what (docs/DESIGN.md, "Programs"; docs/STYLE.md, Layout) ----

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def include_target(src, inc, exists):
    """the tree path a quoted include of src names: beside src first, then from the tree's root
    (the build's -I.), as the preprocessor looks."""
    beside = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    return beside if exists(beside) else os.path.normpath(inc)


def include_findings(sources, exists):
    """sources: {tree path: text} of the programs' files; exists(path): a file of the tree."""
    got = set()
    for src, text in sorted(sources.items()):
        for inc in INCLUDE.findall(text):
            to = include_target(src, inc, exists)
            if src.startswith("tools/") and to.split("/")[0] == "examples":
                got.add("include %s -> %s" % (src, to))
            if src.split("/")[0] in ("examples", "common") and to != "ddl.h" and not to.startswith("common/"):
                got.add("include %s -> %s" % (src, to))
    return got


def program_sources():
    files = [f for pat in ("tools/**/*.[ch]", "examples/**/*.[ch]", "common/*.h")
             for f in glob.glob(os.path.join(TREE, pat), recursive=True)]
    return {os.path.relpath(f, TREE): open(f, errors="replace").read() for f in files}


def findings(root):
    return findings_of(graph(root)) | include_findings(program_sources(),
                                                       lambda p: os.path.isfile(os.path.join(TREE, p)))


def findings_of(edges):
    got = set()
    for c in cycles(edges):
        if len({folder(x) for x in c}) == 1 and len({stem(x) for x in c}) == 1:
            continue  # one idea: a file and its helpers
        got.add("cycle " + " ".join(c))
    for a, bs in edges.items():
        for b in bs:
            fa, fb = folder(a), folder(b)
            if fa != fb and fa in ALLOWED and fb not in ALLOWED[fa]:
                got.add("folder %s -> %s" % (fa, fb))
    got |= floor_findings(edges)
    for src in sorted(glob.glob("src/**/*.[ch]", recursive=True) + glob.glob("models/*.[ch]") +
                      glob.glob("transports/*.[ch]")):
        own = folder(src[:-2])
        for m in re.finditer(r'#include "(?:\.\./)?([a-z]+)/impl\.h"', open(src).read()):
            other = "src/" + m.group(1)
            if other != own and other != "src/core":
                got.add("header %s -> %s/impl.h" % (src, other))
    return got


def main():
    root, known_file = sys.argv[1], sys.argv[2]
    known = {l.strip() for l in open(known_file) if l.strip() and not l.startswith("#")}
    got = findings(root)
    for f in sorted(got - known):
        print("NEW   " + f)
    for f in sorted(known - got):
        print("STALE " + f)
    for f in sorted(got & known):
        print("known " + f)
    return 1 if got ^ known else 0


if __name__ == "__main__":
    sys.exit(main())
