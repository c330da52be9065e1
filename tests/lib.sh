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
# free_port: a TCP port on 127.0.0.1 that is free right now (python3).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
