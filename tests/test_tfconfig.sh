#!/bin/sh
# test_tfconfig.sh - two ranks that learn their place from TensorFlow's TF_CONFIG alone (as
# Kubeflow's TFJob sets it for MultiWorkerMirroredStrategy), with no DDL_ variable but the token:
# over tcp on loopback (each rank listening on its own cluster.worker entry) and over shm (the
# default when every address is on one host), they train to the weights of ddlrun -n 2; with a
# chief, the chief is rank 0; a malformed TF_CONFIG is refused by name, exit 1. The parser's
# cases are tests/test_tfconfig.c's.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ARGS="--epochs 1 --train-limit 2000 --seed 3 --quiet"
ref=$("$BUILD/bin/ddlrun" -n 2 "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
[ -n "$ref" ] && ok || bad "ddlrun -n 2 gave no summary"

# workers CLUSTER TYPE0 INDEX0 TYPE1 INDEX1 EXTRA...: two ranks, each with TF_CONFIG's cluster
# CLUSTER and its own task; outputs in $tmp/w0 and $tmp/w1; exit status: the worse of the two
workers() {
    cluster=$1; t0=$2; i0=$3; t1=$4; i1=$5; shift 5
    for r in 0 1; do
        eval "t=\$t$r; i=\$i$r"
        env -i PATH="$PATH" HOME="$HOME" OPENBLAS_NUM_THREADS=1 DDL_TOKEN=tf-config-test-secret-0123456789 \
            TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"$t\", \"index\": $i}}" \
            "$@" timeout 60 "$BUILD/bin/lenet" $ARGS > "$tmp/w$r" 2>&1 &
        eval "pid$r=\$!"
    done
    wait "$pid0"; a=$?; wait "$pid1"; b=$?
    [ $a -ne 0 ] && return $a; return $b
}

p0=$(free_port); p1=$(free_port)
workers "{\"worker\": [\"127.0.0.1:$p0\", \"127.0.0.1:$p1\"]}" worker 0 worker 1 DDL_TRANSPORT=tcp DDL_JOB=tf-$$-tcp
rc=$?; crc=$(field weights_crc < "$tmp/w0"); w=$(field world < "$tmp/w0"); tr=$(field transport < "$tmp/w0")
echo "TF_CONFIG, tcp: exit $rc, transport=$tr world=$w weights_crc=$crc (ddlrun: $ref)"
[ $rc -eq 0 ] && [ "$w" = 2 ] && [ "$tr" = tcp ] && [ "$crc" = "$ref" ] && ok ||
    { bad "TF_CONFIG over tcp"; tail -n 4 "$tmp/w0" "$tmp/w1"; }

# a chief and one worker, the worker's process started first: the chief is rank 0 (it prints the summary)
p0=$(free_port); p1=$(free_port)
workers "{\"chief\": [\"127.0.0.1:$p0\"], \"worker\": [\"127.0.0.1:$p1\"]}" worker 0 chief 0 DDL_JOB=tf-$$-shm
rc=$?; crc=$(field weights_crc < "$tmp/w1"); w=$(field world < "$tmp/w1"); tr=$(field transport < "$tmp/w1")
echo "TF_CONFIG with a chief, shm (one host): exit $rc, transport=$tr world=$w weights_crc=$crc"
[ $rc -eq 0 ] && [ "$w" = 2 ] && [ "$tr" = shm ] && [ "$crc" = "$ref" ] && ! grep -q summary "$tmp/w0" && ok ||
    { bad "TF_CONFIG with a chief over shm"; tail -n 4 "$tmp/w0" "$tmp/w1"; }

# malformed: refused, naming TF_CONFIG and what was wrong
env -i PATH="$PATH" TF_CONFIG='{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}' \
    "$BUILD/bin/lenet" $ARGS > "$tmp/e" 2>&1; rc=$?
echo "an index past the list: exit $rc: $(cat "$tmp/e")"
[ $rc -eq 1 ] && grep -q "cannot join the job: TF_CONFIG: task worker 3: cluster.worker has 1 address" "$tmp/e" && ok ||
    bad "a bad TF_CONFIG was not refused by name"
env -i PATH="$PATH" TF_CONFIG='{"cluster": {"worker": ["a:1"]}' "$BUILD/bin/lenet" $ARGS > "$tmp/e" 2>&1; rc=$?
echo "malformed JSON: exit $rc: $(cat "$tmp/e")"
[ $rc -eq 1 ] && grep -q "TF_CONFIG: expected ',' or '}' at byte 31" "$tmp/e" && ok || bad "malformed TF_CONFIG"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
