#!/bin/sh
# test_cli.sh - the command line of every program (lenet, unet, custom_model, ddlrun, ddl-bench, ddl-train,
# ddl-ckpt, ddl-sweep, and ddl-plot and ddl-serve where built), as users expect it: --help on stdout with exit 0, --version with the version of
# ddl.h, --opt=value, an unknown flag or a bad value refused with exit 2 and one line naming it
# followed by "try 'PROG --help'", integers and floats parsed strictly, and each example taking
# only its own flags (lenet refuses unet's). ddlrun passes what follows PROGRAM unchanged.
# Then examples/custom_model.c, a layer graph (or with --plugin a model plugin) and a data set
# defined outside the library: on 2 ranks over shm it reaches test_acc > 0.95, with the same
# weights_crc over tcp, on a rerun, and with the plugin.
# The lenet and unet runs need Fashion-MNIST and are skipped, with a message, without it.
# Ends with "N passed, N failed"; exit status non-zero on any failure.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BIN=$BUILD/bin
DATA=/usr/share/datasets/fashion-mnist
PROGS="lenet unet custom_model ddlrun ddl-bench ddl-ckpt ddl-sweep ddl-train"
for p in ddl-plot ddl-serve; do   # built only WITH_PNG=1 / WITH_SERVE=1
    if [ -x "$BIN/$p" ]; then PROGS="$PROGS $p"; else echo "skipped: $p's command line ($p not built)"; fi
done
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

for p in $PROGS; do
    if [ ! -x "$BIN/$p" ]; then echo "no $BIN/$p: build first" >&2; echo "0 passed, 1 failed"; exit 1; fi
done
version=$(awk '/^#define DDL_VERSION_(MAJOR|MINOR|PATCH) /{printf "%s%s", s, $3; s="."}' ddl.h)

# refused PROG TEXT ARGS...: PROG ARGS exits 2, prints nothing on stdout and on stderr exactly two
# lines: one containing TEXT, then "try 'PROG --help'".
refused() {
    p=$1; text=$2; shift 2
    timeout 20 "$BIN/$p" "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?   # a flag taken by mistake may start a run
    if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l < "$tmp/err")" -eq 2 ] &&
        head -n 1 "$tmp/err" | grep -qF -- "$text" && tail -n 1 "$tmp/err" | grep -qxF "try '$p --help'"; then
        ok
    else
        bad "$p $*: expected exit 2 and '$text', got exit $rc:"; sed 's/^/    /' "$tmp/err" | head -n 5
    fi
}

# ---- every program: --help, --version, an unknown flag ----
for p in $PROGS; do
    "$BIN/$p" --help > "$tmp/out" 2> "$tmp/err"; rc=$?
    [ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && head -n 1 "$tmp/out" | grep -q "^usage: $p "; check "$p --help: usage on stdout, exit 0 ($rc)" $?
    "$BIN/$p" -h 2>&1 | cmp -s - "$tmp/out"; check "$p -h is --help" $?
    out=$("$BIN/$p" --version 2>&1); rc=$?
    [ $rc -eq 0 ] && [ "$out" = "$p (ddl) $version" ]; check "$p --version: '$out', exit $rc" $?
    refused "$p" "unrecognized option '--no-such-flag'" --no-such-flag
done
refused ddl-ckpt "option '--help' doesn't allow an argument" --help=yes

# ---- strict numbers: the error names the flag, the value and what was expected ----
refused lenet "lenet: --batch 1.5: expected an integer from 1 to 1048576" --batch 1.5
refused lenet "lenet: --batch 12abc: expected an integer from 1 to 1048576" --batch=12abc
refused lenet "lenet: --batch '': expected an integer" --batch=
refused lenet "lenet: --batch 0: expected an integer from 1" --batch 0
refused lenet "lenet: --epochs 99999999999999999999: expected an integer" --epochs 99999999999999999999
refused lenet "lenet: --epochs  5: expected an integer" --epochs " 5"
refused lenet "lenet: --lr nan: expected a number from 0 to 100" --lr nan
refused lenet "lenet: --lr 1e999: expected a number" --lr=1e999
refused lenet "lenet: --lr 0.1x: expected a number" --lr 0.1x
refused lenet "lenet: --optimizer adamw: expected sgd or adam" --optimizer adamw
refused lenet "lenet: --schedule linear: expected constant, step or cosine" --schedule=linear
refused lenet "lenet: option '--batch' requires an argument" --batch
refused lenet "lenet: unexpected argument 'extra'" --quiet extra
refused lenet "lenet: --resume and --checkpoint-every need --checkpoint PATH" --resume
refused unet "unet: --scenes 1.5: expected an integer" --scenes 1.5
refused unet "unet: --dice-weight inf: expected a number" --dice-weight inf
refused custom_model "custom_model: --epochs 1.5: expected an integer" --epochs 1.5
refused custom_model "custom_model: --hidden 12abc: expected an integer" --hidden=12abc
refused custom_model "custom_model: --classes 1: expected an integer from 2 to 1024" --classes 1
refused ddlrun "ddlrun: -n 1.5: expected an integer from 1 to 1024" -n 1.5 true
refused ddlrun "ddlrun: --timeout 1e999: expected a number" -n 1 --timeout=1e999 true
refused ddlrun "ddlrun: -t carrier-pigeon: expected shm, tcp, zmq or mpi" -n 1 -t carrier-pigeon true
refused ddl-bench "ddl-bench: --iters 1.5: expected an integer from 1 to 1000000" allreduce -n 2 --iters 1.5
refused ddl-bench "ddl-bench: -b 1.5K: expected a size in bytes" allreduce -n 2 -b 1.5K
refused ddl-bench "ddl-bench: command reduce: expected allreduce" reduce -n 2
refused ddl-ckpt "ddl-ckpt: command frobnicate: expected show, verify or export" frobnicate x
refused ddl-ckpt "ddl-ckpt: export needs CKPT OUT.npz|OUT.onnx" export x
if [ -x "$BIN/ddl-serve" ]; then
    refused ddl-serve "ddl-serve: --idle-timeout 0: expected an integer from 1 to 86400" --model a=b --idle-timeout 0
    refused ddl-serve "ddl-serve: --body-timeout 2.5: expected an integer from 1 to 3600" --model a=b --body-timeout=2.5
fi

# ---- each example takes only its own flags ----
for f in --scenes --test-scenes --size --items --depth --width --dice-weight; do
    refused lenet "lenet: unrecognized option '$f'" "$f" 1
done
refused lenet "lenet: --images goes with --predict" --images 1
refused lenet "lenet: --predict needs --model CHECKPOINT" --predict
refused lenet "lenet: --model, --out, --labels and --db go with --predict" --out x.csv
refused unet "unet: --out and --labels are lenet's" --predict --model x --out x.csv
refused unet "unet: unrecognized option '--dropout'" --dropout 0.1
refused custom_model "custom_model: unrecognized option '--data'" --data "$DATA"
refused custom_model "custom_model: unrecognized option '--checkpoint'" --checkpoint "$tmp/ck"

# ---- --opt=value, and ddlrun's PROGRAM keeps its own flags ----
out=$("$BIN/ddlrun" -n 1 --job=cli-job --timeout=2.5 sh -c 'echo "$DDL_JOB $DDL_TIMEOUT_MS"' 2>&1)
[ "$out" = "cli-job 2500" ]; check "ddlrun --job=cli-job --timeout=2.5: '$out'" $?
out=$("$BIN/ddlrun" -n 1 echo --epochs 3 -n 5 --help -- x 2>&1)
[ "$out" = "--epochs 3 -n 5 --help -- x" ]; check "ddlrun passes PROGRAM's flags unchanged: '$out'" $?
out=$("$BIN/ddlrun" -n 1 -- echo -n 2>&1; echo "rc=$?")
[ "$out" = "rc=0" ]; check "ddlrun -- PROGRAM: '$out'" $?
out=$("$BIN/ddlrun" -np 2 sh -c 'echo "$DDL_WORLD_SIZE"' 2>&1 | sort -u)
[ "$out" = 2 ]; check "ddlrun -np 2 as mpirun spells it: '$out'" $?
"$BIN/ddl-bench" allreduce -n 2 -b 4K -e 16K --iters=1 --warmup=0 > "$tmp/bench" 2>&1
[ $? -eq 0 ] && [ "$(grep -c ' ok$' "$tmp/bench")" -eq 2 ]; check "ddl-bench --iters=1 --warmup=0: two rows ok" $?
out=$("$BIN/custom_model" --epochs=2 --samples=200 --batch=20 --quiet 2>&1)
printf '%s\n' "$out" | grep -q '^summary: model=custom transport=none world=1 epochs=2 batch=20 '
check "custom_model --epochs=2 --batch=20: '$out'" $?
if [ -d "$DATA" ]; then
    out=$("$BIN/lenet" --epochs=1 --train-limit=300 --batch=50 --data="$DATA" --quiet 2>&1)
    printf '%s\n' "$out" | grep -q '^summary: model=lenet .* epochs=1 batch=50 '; check "lenet --epochs=1 --batch=50: '$out'" $?
    out=$("$BIN/unet" --scenes=40 --test-scenes=8 --size=32 --depth=2 --width=4 --epochs=1 --batch=8 --quiet 2>&1)
    printf '%s\n' "$out" | grep -q '^summary: model=unet .* epochs=1 batch=8 .* dice='; check "unet --scenes=40 --size=32: '$out'" $?
else
    echo "skipped the lenet and unet runs: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
fi

# ---- custom_model: a plugin of its own, trained on 2 ranks ----
"$BIN/ddlrun" -n 2 -t shm "$BIN/custom_model" > "$tmp/shm" 2>&1; check "custom_model on 2 ranks over shm exits 0" $?
[ "$(grep -c '^epoch ' "$tmp/shm")" -eq 40 ]; check "custom_model: rank 0 prints each of 40 epochs once" $?
acc=$(field test_acc < "$tmp/shm")
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.95) }'; check "custom_model: test_acc $acc > 0.95" $?
[ "$(field world < "$tmp/shm")" = 2 ] && [ "$(field transport < "$tmp/shm")" = shm ]; check "custom_model: summary says 2 ranks over shm" $?
"$BIN/ddlrun" -n 2 -t tcp "$BIN/custom_model" --quiet > "$tmp/tcp" 2>&1; check "custom_model over tcp exits 0" $?
"$BIN/ddlrun" -n 2 -t shm "$BIN/custom_model" --quiet > "$tmp/shm2" 2>&1; check "custom_model rerun exits 0" $?
ref=$(crc "$tmp/shm")
[ -n "$ref" ] && [ "$(crc "$tmp/tcp")" = "$ref" ]; check "custom_model: same weights_crc over shm and tcp ($ref, $(crc "$tmp/tcp"))" $?
[ -n "$ref" ] && [ "$(crc "$tmp/shm2")" = "$ref" ]; check "custom_model: same weights_crc on a rerun ($ref, $(crc "$tmp/shm2"))" $?
"$BIN/ddlrun" -n 2 -t shm "$BIN/custom_model" --plugin --quiet > "$tmp/plugin" 2>&1
[ -n "$ref" ] && [ "$(crc "$tmp/plugin")" = "$ref" ]
check "custom_model: the hand-written plugin gives the layer graph's weights ($ref, $(crc "$tmp/plugin"))" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
