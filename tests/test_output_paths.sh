#!/bin/sh
# test_output_paths.sh - the output paths of lenet and unet (and so of ddl-train, which shares
# common/example_common.h): --save, --checkpoint and --logdir in directories that do not exist
# yet are made (mode 0755) and the run ends as it would without them (the same weights_crc); a
# path that cannot be written (its parent is a file, or is /proc) fails before the first step,
# exit 2, naming the flag and the path, with no summary; --keep-checkpoints 3 keeps PATH,
# PATH.1, PATH.2 of the last three saves, newest first. Needs Fashion-MNIST (skipped without).
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}; B=$BUILD/bin
DATA=${DDL_DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -d "$DATA" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
lenet() { "$B/lenet" --data "$DATA" --epochs 1 --train-limit 256 --quiet "$@"; }
unet() { "$B/unet" --data "$DATA" --epochs 1 --scenes 64 --test-scenes 8 --size 32 --batch 16 --quiet "$@"; }

# ---- missing directories are made; the weights are those of a run without outputs ----
want=$(lenet 2>&1 | crc /dev/stdin) # refused() below keeps its own variables
(cd "$tmp" && "$OLDPWD/$B/lenet" --data "$DATA" --epochs 1 --train-limit 256 --quiet --save out/final.ckpt \
    --checkpoint ck/a/run.ckpt --logdir runs/first) > "$tmp/lenet.out" 2>&1
check "lenet --save out/final.ckpt --checkpoint ck/a/run.ckpt --logdir runs/first: $(tail -n 2 "$tmp/lenet.out")" $?
[ -f "$tmp/out/final.ckpt" ] && [ -f "$tmp/ck/a/run.ckpt" ] && ls "$tmp/runs/first" | grep -q '^events\.out\.tfevents\.'
check "the final model, the checkpoint and the event file are there" $?
[ "$(stat -c %a "$tmp/out")" = 755 ] && [ "$(stat -c %a "$tmp/ck/a")" = 755 ]; check "directories made 0755" $?
[ -n "$want" ] && [ "$(crc "$tmp/lenet.out")" = "$want" ]; check "the same weights_crc as without outputs ($want)" $?
unet --save "$tmp/u/n/final.ckpt" --logdir "$tmp/u/runs" > "$tmp/unet.out" 2>&1 && [ -f "$tmp/u/n/final.ckpt" ]
check "unet --save into a missing directory: $(tail -n 1 "$tmp/unet.out")" $?

# ---- a path that cannot be written fails at once, naming it ----
touch "$tmp/file"
# refused PROG WANT ARGS...: exit 2 within 2 s, WANT on stderr, no summary line
refused() {
    prog=$1; msg=$2; shift 2
    start=$(date +%s)
    out=$("$prog" "$@" 2>&1); rc=$?
    secs=$(( $(date +%s) - start ))
    [ $rc -eq 2 ] && [ $secs -le 2 ] && printf '%s\n' "$out" | grep -qF -- "$msg" && ! printf '%s\n' "$out" | grep -q '^summary:'
    check "$(basename "$prog") $*: exit $rc after $secs s, expected 2 and '$msg': $out" $?
}
refused lenet "lenet: --save $tmp/file/final.ckpt: $tmp/file is not a directory" --save "$tmp/file/final.ckpt"
refused lenet "lenet: --save /proc/ddl-none/final.ckpt: cannot create directory /proc/ddl-none" --save /proc/ddl-none/final.ckpt
refused lenet "lenet: --checkpoint $tmp/file/x/ck: $tmp/file is not a directory" --checkpoint "$tmp/file/x/ck"
refused lenet "lenet: --checkpoint $tmp/out: a directory, not a file" --checkpoint "$tmp/out"
refused lenet "lenet: --logdir $tmp/file/runs: $tmp/file is not a directory" --logdir "$tmp/file/runs"
refused unet "unet: --save $tmp/file/u.ckpt: $tmp/file is not a directory" --save "$tmp/file/u.ckpt"
refused lenet "lenet: --keep-checkpoints needs --checkpoint PATH" --keep-checkpoints 2
"$B/lenet" --help | grep -q -- '--keep-checkpoints K'; check "lenet --help names --keep-checkpoints" $?
"$B/unet" --help | grep -q -- '--keep-checkpoints K'; check "unet --help names --keep-checkpoints" $?

# ---- --keep-checkpoints 3: the last three saves, newest first ----
lenet --checkpoint "$tmp/k/run.ckpt" --checkpoint-every 1 --keep-checkpoints 3 > "$tmp/keep.out" 2>&1
check "lenet --keep-checkpoints 3: $(tail -n 1 "$tmp/keep.out")" $?
step() { "$B/ddl-ckpt" show "$1" 2>/dev/null | sed -n 's/^progress *step \([0-9]*\),.*/\1/p'; }
got="$(step "$tmp/k/run.ckpt") $(step "$tmp/k/run.ckpt.1") $(step "$tmp/k/run.ckpt.2")"
[ "$got" = "4 3 2" ] && [ ! -e "$tmp/k/run.ckpt.3" ]; check "run.ckpt, .1, .2 at steps '$got', expected '4 3 2', no .3" $?
lenet --checkpoint "$tmp/one/run.ckpt" --checkpoint-every 1 > /dev/null 2>&1 && [ -z "$(ls "$tmp/one" | grep -v '^run\.ckpt$')" ]
check "without --keep-checkpoints: only PATH ($(ls "$tmp/one" | tr '\n' ' '))" $?
[ "$(crc "$tmp/keep.out")" = "$want" ]; check "--keep-checkpoints: the same weights_crc" $?

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
