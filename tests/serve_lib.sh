# serve_lib.sh - what the ddl-serve tests share, sourced after tests/lib.sh (check, PYTHON,
# free_port) from the tree's root with BUILD set: B, the programs' folder; skip REASON, which
# ends the test saying "skipped: REASON" with the counts so far; the programs and Python modules
# every such test needs; serve_wait PORT, until a ddl-serve on PORT answers /ping (at most 10 s;
# status 1 if it never did).
B=$BUILD/bin
export OPENBLAS_NUM_THREADS=1
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
[ -x "$B/ddl-serve" ] || skip "ddl-serve not built (WITH_SERVE=0)"
[ -x "$B/ddl-train" ] || skip "ddl-train not built"
command -v curl > /dev/null || skip "no curl"
"$PYTHON" -c 'import PIL, numpy' 2> /dev/null || skip "no python3-pil or python3-numpy (make deps)"
serve_wait() {
    for _ in $(seq 100); do curl -s "127.0.0.1:$1/ping" > /dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}
