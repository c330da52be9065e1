#!/bin/sh
# sweep_fake.sh - a stand-in training program for tests/test_sweep.sh: prints lenet's per-epoch
# lines and summary line, with a test_acc that is a fixed function of --lr and --batch (best at
# lr 0.01, batch 64; the same order at every epoch), fast. Test hooks from the environment:
#   FAKE_FAIL_SLOT=K   exit 1 when run on ddl-sweep's slot K (DDL_SWEEP_SLOT)
#   FAKE_HANG_TRIAL=N  trial N (DDL_SWEEP_TRIAL) sleeps for ever
#   FAKE_PIDS=DIR      write the pid to DIR/trial-N.attempt-A, wait FAKE_WAIT seconds first
#   FAKE_SLEEP=S       seconds per epoch (default 0.05)
#   FAKE_NAN_LR=X      with --lr X the run diverges: loss and test_loss nan, test_acc 0.1
#   FAKE_CHANCE_LR=X   with --lr X test_acc is 0.11 (chance for 10 classes), the losses finite
# A --lr or --batch that is not a number is a usage error: exit 2, as the ddl programs do.
lr=0.01 batch=64 epochs=3
while [ $# -gt 0 ]; do
    case "$1" in
    --lr) lr=$2; shift ;;
    --batch) batch=$2; shift ;;
    --epochs) epochs=$2; shift ;;
    --logdir|--checkpoint|--train-limit|--seed) shift ;;
    *) echo "fake: unknown flag $1" >&2; echo "try 'fake --help'" >&2; exit 2 ;;
    esac
    shift
done
for v in "$lr" "$batch" "$epochs"; do
    case "$v" in ''|*[!0-9.e-]*) echo "fake: '$v': expected a number" >&2; exit 2 ;; esac
done
if [ -n "$FAKE_PIDS" ]; then
    echo $$ > "$FAKE_PIDS/trial-$DDL_SWEEP_TRIAL.attempt-$DDL_SWEEP_ATTEMPT"
    sleep "${FAKE_WAIT:-0}"
fi
if [ -n "$FAKE_FAIL_SLOT" ] && [ "$DDL_SWEEP_SLOT" = "$FAKE_FAIL_SLOT" ]; then
    echo "fake: failing on slot $DDL_SWEEP_SLOT as FAKE_FAIL_SLOT says" >&2
    exit 1
fi
[ -n "$FAKE_HANG_TRIAL" ] && [ "$DDL_SWEEP_TRIAL" = "$FAKE_HANG_TRIAL" ] && exec sleep 1000
e=1
while [ $e -le "$epochs" ]; do
    sleep "${FAKE_SLEEP:-0.05}"
    awk -v lr="$lr" -v b="$batch" -v e="$e" -v n="$epochs" -v nanlr="${FAKE_NAN_LR:-none}" -v chancelr="${FAKE_CHANCE_LR:-none}" 'BEGIN {
        d = log(lr) / log(10) + 2; d = d < 0 ? -d : 1.2 * d
        k = log(b / 64) / log(2); if (k < 0) k = -k
        acc = (0.9 - 0.1 * d - 0.05 * k) * e / (e + 1); loss = sprintf("%.4f", 1 - acc)
        if (lr == nanlr) { acc = 0.1; loss = "nan" }
        if (lr == chancelr) { acc = 0.11; loss = "2.3026" }
        printf "epoch %d/%d  loss %s  train_acc %.4f  test_loss %s  test_acc %.4f  100 images/s  (0.1 s)\n",
            e, n, loss, acc, loss, acc
        if (e == n) printf "summary: model=fake transport=none world=1 epochs=%d batch=%d test_acc=%.4f test_loss=%s wall_s=0.1\n", n, b, acc, loss
    }'
    e=$((e + 1))
done
