#!/bin/sh
# test_layering.sh - the library's layers as its objects and headers show them (tests/layering.py):
# no cycle of objects beyond one idea's files, no folder using one that docs/DESIGN.md puts above
# it, no other folder's private header, no call up a floor of src/comm, no program including what
# its side may not (a tool from examples/; an example, or the programs' kit common/, beyond ddl.h and
# common/); the findings the house still has are listed in
# tests/layering_known.txt (issue 48 takes them off), and a new one or a stale line fails. Then
# the checker itself: a finding left off the list, and a line that no longer holds, each fail.
# Ends with "N passed, N failed".
# ddl-test: beside (reads object files: a second, no time bound)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; exit 0; }
[ -d "$BUILD/pic/src/core" ] || skip "no $BUILD/pic (make)"
command -v nm > /dev/null || skip "no nm (binutils)"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

"$PYTHON" tests/layering.py "$BUILD/pic" tests/layering_known.txt > "$tmp/out"; rc=$?
grep -E '^(NEW|STALE)' "$tmp/out"
[ $rc -eq 0 ]; check "no new cycle, folder crossing or private header, and no stale line in tests/layering_known.txt" $?
n=$(grep -c '^known' "$tmp/out")
echo "$n known findings left (tests/layering_known.txt)"

# the checker: a finding left off the list is NEW; a line that holds no more is STALE. The finding
# is made here (a folder crossing in a copy of the objects' graph), so the check outlives the list.
obj=$(cd "$BUILD/pic" && pwd)
out=$(cd tests && "$PYTHON" -c 'import layering as l, sys
edges = l.graph(sys.argv[1]); edges.setdefault("src/core/x", set()).add("src/train/train")
got = l.findings_of(edges)
print("crossing named" if "folder src/core -> src/train" in got else "missed")' "$obj")
[ "$out" = "crossing named" ]; check "a crossing is found, named ($out)" $?
{ cat tests/layering_known.txt; echo "folder src/core -> src/train"; } > "$tmp/more"
"$PYTHON" tests/layering.py "$BUILD/pic" "$tmp/more" > "$tmp/o3"; rc=$?
[ $rc -ne 0 ] && grep -q '^STALE folder src/core -> src/train' "$tmp/o3"; check "a line that no longer holds fails, named" $?
# src/comm's floors: a call up from the links to membership, and a file no floor holds, are named
out=$(cd tests && "$PYTHON" -c 'import layering as l
print(sorted(l.floor_findings({"src/comm/comm": {"src/comm/replay", "src/comm/transport"}, "src/comm/new": set(),
                               "src/comm/elastic": {"src/comm/ring"}})))')
[ "$out" = "['floor src/comm/comm (links) -> src/comm/replay (membership)', 'floor src/comm/new unplaced']" ]
check "a call up a floor of src/comm, and an unplaced file, are named ($out)" $?
# the programs: a tool including from examples/, an example including a tool's header and the kit
# including the library's private one are named; ddl.h and the kit's own headers are not
out=$(cd tests && "$PYTHON" -c 'import layering as l
files = {"tools/x.c": "#include \"ddl.h\"\n#include \"common/example_cli.h\"\n#include \"examples/lenet.c\"\n",
         "examples/a.c": "#include \"ddl.h\"\n#include \"common/example_loop.h\"\n#include \"tools/cli.h\"\n",
         "common/example_loop.h": "#  include \"example_common.h\"\n#include \"../src/core/impl.h\"\n"}
have = set(files) | {"common/example_common.h", "common/example_cli.h", "examples/lenet.c", "src/core/impl.h"}
print(sorted(l.include_findings(files, lambda p: p in have)))')
[ "$out" = "['include common/example_loop.h -> src/core/impl.h', 'include examples/a.c -> tools/cli.h', 'include tools/x.c -> examples/lenet.c']" ]
check "a tool including from examples/, and an example or the kit including beyond ddl.h and common/, are named ($out)" $?
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
