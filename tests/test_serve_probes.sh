#!/bin/sh
# test_serve_probes.sh - ddl-serve as Kubernetes and TF Serving clients expect it, with a token:
#  - the health and readiness probes (GET /ping, /v2/health/live, /v2/health/ready,
#    /v2/models/NAME/ready, /v1/models/NAME) answer 200 without the token, which probes cannot
#    send; everything else (metadata, predict, infer, metrics) still answers 401 without it;
#  - the versioned paths /v1/models/NAME/versions/N[/metadata|:predict] and
#    /v2/models/NAME/versions/N[/ready|/infer] serve the loaded version and answer 404 naming the
#    version served for another;
#  - the metadata says the input is raw pixels 0..255; the default port is 8501.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'kill $spid 2> /dev/null; rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
[ -x "$BUILD/bin/ddl-serve" ] || skip "ddl-serve not built (WITH_SERVE=0)"
[ -d /usr/share/datasets/fashion-mnist ] || skip "no Fashion-MNIST"
"$BUILD/bin/lenet" --epochs 1 --train-limit 640 --quiet --save "$tmp/m.ckpt" > /dev/null 2>&1; check "a model to serve" $?
printf 'probe-test-token-0123456789\n' > "$tmp/tok"; chmod 600 "$tmp/tok"
port=$(free_port)
"$BUILD/bin/ddl-serve" --model fashion="$tmp/m.ckpt" --listen "127.0.0.1:$port" --token-file "$tmp/tok" > "$tmp/log" 2>&1 &
spid=$!
for i in $(seq 1 50); do curl -s "127.0.0.1:$port/ping" > /dev/null 2>&1 && break; sleep 0.1; done
code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
A="Authorization: Bearer probe-test-token-0123456789"
U=127.0.0.1:$port
for p in /ping /v2/health/live /v2/health/ready /v2/models/fashion/ready /v1/models/fashion; do
    [ "$(code "$U$p")" = 200 ]; check "GET $p without the token: 200 (a probe)" $?
done
for p in /v1/models/fashion/metadata /metrics /v2/models/fashion /v1/models/fashion/versions/1 /api/models; do
    [ "$(code "$U$p")" = 401 ]; check "GET $p without the token: 401" $?
done
[ "$(code -X POST -d '{"instances":[[0]]}' "$U/v1/models/fashion:predict")" = 401 ]; check "POST :predict without the token: 401" $?
[ "$(code -H "$A" "$U/v1/models/fashion/versions/1")" = 200 ] && grep -q '"version":"1"' "$tmp/body"
check "GET /v1/models/fashion/versions/1: the loaded version" $?
[ "$(code -H "$A" "$U/v1/models/fashion/versions/1/metadata")" = 200 ] &&
    grep -q '"input_scale":"raw pixels 0..255' "$tmp/body"; check "versioned metadata, saying the input is raw pixels" $?
pix=$("$PYTHON" -c 'print("[" + ",".join(["0"] * 784) + "]")')
[ "$(code -H "$A" -d "{\"instances\":[$pix]}" "$U/v1/models/fashion/versions/1:predict")" = 200 ] &&
    grep -q '"predictions"' "$tmp/body"; check "POST /v1/models/fashion/versions/1:predict" $?
[ "$(code -H "$A" "$U/v2/models/fashion/versions/1/ready")" = 200 ]; check "GET /v2/models/fashion/versions/1/ready" $?
[ "$(code -H "$A" "$U/v1/models/fashion/versions/7")" = 404 ] && grep -q "version 7 is not served (version 1 is" "$tmp/body"
check "another version: 404 naming the one served" $?
[ "$(code -H "$A" "$U/v1/models/fashion/versions/x")" = 404 ]; check "a version that is no number: 404" $?
kill $spid; wait $spid 2> /dev/null
# the default port is TF Serving's REST port, 8501 (when nothing else holds it here)
if ! curl -s -o /dev/null 127.0.0.1:8501/ 2> /dev/null; then
    "$BUILD/bin/ddl-serve" --model fashion="$tmp/m.ckpt" > "$tmp/log2" 2>&1 &
    spid=$!
    for i in $(seq 1 50); do curl -s 127.0.0.1:8501/ping > /dev/null 2>&1 && break; sleep 0.1; done
    [ "$(code 127.0.0.1:8501/ping)" = 200 ]; check "without --listen: 127.0.0.1:8501, TF Serving's REST port" $?
else
    echo "skipped: the default port (something else answers on 127.0.0.1:8501)"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
