# lib.sh - what the tests/test_*.sh scripts share. Source it first: . "$(dirname "$0")/lib.sh"
# Counters and the closing line follow check.h: "N passed, N failed".
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1" >&2; fi
}
# crc FILE: the weights_crc of the last summary line in FILE.
crc() { sed -n 's/.*weights_crc=\([0-9a-f]*\).*/\1/p' "$1" | tail -n 1; }
# field NAME: from standard input, the value NAME= of the last summary line.
field() { sed -n "s/^summary:.* $1=\([^ ]*\).*/\1/p" | tail -n 1; }
# PYTHON: Debian's python3, which make's install step installs (a python3 earlier in PATH, such as
# a pyenv shim, can take half a second to start: the tests start it some fifty times).
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
# free_port: a TCP port on 127.0.0.1 that is free right now.
# free_port: a port on 127.0.0.1 nothing holds, random in [10000, 30000) as ddlrun's
# (tools/ddlrun/env.c): below the ephemeral range, where another process's next outgoing
# connection may take a bind(0) port before the test's rank binds it
free_port() {
    "$PYTHON" -c '
import random, socket
for _ in range(64):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(10000, 30000)))
        break
    except OSError:
        s.close()
else:
    s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1]); s.close()'
}
# plot_setup: for the ddl-plot tests: PLOT (the program), tmp (a directory removed at exit); skips
# the test, saying why, without a ddl-plot built with PNG or without python3.
plot_setup() {
    PLOT=$BUILD/bin/ddl-plot
    if [ ! -x "$PLOT" ] || ! command -v "$PYTHON" > /dev/null; then
        echo "skipped: needs $PLOT (WITH_PNG=1) and python3"; echo "0 passed, 0 failed"; exit 0
    fi
    tmp=$(mktemp -d) || exit 1
    trap 'rm -rf "$tmp"' EXIT
}
