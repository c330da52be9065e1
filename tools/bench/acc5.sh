#!/bin/sh
# acc5.sh - make bench's accuracy against PyTorch on a five-class folder (issue 45, item 6;
# BENCH_ONLY=acc5): "ddl's test accuracy is within 0.01 of PyTorch's after the same epochs and
# recipe", for the issue's network as PyTorch users write it (tests/torch/nets.py resnet:
# Conv-BN-ReLU, residual blocks, AdaptiveAvgPool2d, Dropout, Linear), exported by torch.onnx.export
# in training mode and trained by ddl-train from that file.
#   The folder: folder5.py, 800 training and 500 test images a class at 32x32 (patterns under
#   noise: the network reaches about 0.76, not 1.0). The recipe on both sides: EPOCHS_ACC5 (8)
#   epochs of batch 32, SGD lr 0.02 momentum 0.9, cosine to 0 by step, no weight decay, no
#   augmentation, inputs normalised with the training set's per-channel mean and std (the network
#   has no normalisation of its own), the test set in eval mode (running statistics); one thread
#   each (acc5_torch.py is PyTorch's side).
#   1. Paired, in order: for each seed S of ACC5_SEEDS (1 2 3 4 5) the network's initial weights
#      from torch's seed S (one ONNX file for both) and the training set in an order drawn from S
#      (an .npz; ddl-train --in-order), dropout off: the same batches from the same weights, so
#      the runs differ by float32 rounding alone (which these networks amplify: the losses part
#      after some steps, tests/test_torch_trains.sh). Beside them PyTorch against itself: the same
#      run with every initial weight moved by 1e-7 (relative, at random: a float32 rounding's
#      size), the floor of how close two float32 runs of this recipe can be.
#   2. As a user runs it: the PNG folders themselves (ddl-train decodes them; PyTorch through PIL),
#      shuffled every epoch by each side's own generator from seed S, the network's Dropout at 0.2
#      (each side's own masks).
# ACC5_PARTS ("inorder shuffled") chooses the parts. Each seed's two accuracies, then per part:
# the mean and standard deviation over the seeds of each side, and the mean difference ddl -
# PyTorch with its standard error (the paired differences' deviation over sqrt(seeds) in part 1;
# both sides' deviations in part 2). Needs /usr/bin/python3 with torch (make deps). Each seed of
# a part takes 2 to 4 minutes on a shared machine, PyTorch's run the longer (ddl's about 25 s);
# ddl and PyTorch run side by side, one thread each.
set -u
BUILD=${BUILD:-build}
here=$(dirname "$0")
. "$here/lib.sh"
PY=/usr/bin/python3
T=$BUILD/bin/ddl-train
EP=${EPOCHS_ACC5:-8}
SEEDS=${ACC5_SEEDS:-1 2 3 4 5}
PARTS=${ACC5_PARTS:-inorder shuffled}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"$PY" -c 'import torch' 2> /dev/null || { echo "== accuracy on a five-class folder: skipped (no python3-torch)"; exit 0; }
[ -x "$T" ] || { echo "acc5.sh: no $T: build first" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
P="$PY $here/acc5_torch.py"
RECIPE="--epochs $EP --batch 32 --lr 0.02 --momentum 0.9 --schedule cosine --threads 1 --quiet"
"$PY" "$here/folder5.py" "$tmp/f" 800 500 32 1 || exit 1

# stats FILE [COLUMN]: "n mean_ddl sd_ddl mean_pt sd_pt mean_diff sd_diff" of FILE's "ddl pytorch
# [pytorch_moved]" lines (with COLUMN 3: of PyTorch moved against PyTorch)
stats() {
    awk -v c="${2:-1}" '{ $1 = $c; n++; a += $1; aa += $1 * $1; b += $2; bb += $2 * $2; d = $1 - $2; s += d; ss += d * d }
        function sd(sum, sq) { return n > 1 ? sqrt((sq - sum * sum / n) / (n - 1)) : 0 }
        END { printf "%d %.4f %.4f %.4f %.4f %+.4f %.4f\n", n, a / n, sd(a, aa), b / n, sd(b, bb), s / n, sd(s, ss) }' "$1"
}

# part NAME DESCRIPTION: the summary lines and table rows of $tmp/NAME.txt
part() {
    set -- "$1" "$2" $(stats "$tmp/$1.txt")
    # standard error of the mean difference: paired (in order) or of two independent means
    se=$(awk -v n="$3" -v sa="$5" -v sb="$7" -v sd="$9" -v paired="$([ "$1" = inorder ] && echo 1 || echo 0)" \
        'BEGIN { printf "%.4f", paired ? sd / sqrt(n) : sqrt((sa * sa + sb * sb) / n) }')
    echo "   $2: ddl $4 (sd $5), PyTorch $6 (sd $7) over $3 seeds; ddl - PyTorch $8 (standard error $se)"
    record "item 6: five-class folder, $2, test accuracy after $EP epochs, mean of $3 seeds (sd $5; PyTorch's $7; difference $8, standard error $se)" \
        "$4" "PyTorch 1.13" "$6" "$8" "within 0.01"
    [ "$1" = inorder ] || return 0
    set -- $(stats "$tmp/inorder.txt" 3)
    se=$(awk -v n="$1" -v sd="$7" 'BEGIN { printf "%.4f", sd / sqrt(n) }')
    echo "   PyTorch against itself (weights moved by 1e-7): $2 (sd $3) against $4; difference $6 (sd $7, standard error $se)"
    record "item 6: five-class folder, PyTorch against itself (same batches, weights moved by 1e-7), mean of $1 seeds (difference $6, sd $7, standard error $se)" \
        "$2" "PyTorch 1.13" "$4" "$6" "-"
}

echo "== accuracy on a five-class folder (folder5.py, 4000 + 2500 images, 32x32): the issue's network, $EP epochs"
: > "$tmp/inorder.txt"
: > "$tmp/shuffled.txt"
case " $PARTS " in *" inorder "*) ;; *) SEEDS_IN="" ;; esac
for s in ${SEEDS_IN-$SEEDS}; do
    $P export resnet "$tmp/m$s.onnx" 5 32 0 "$s" > /dev/null 2>&1 && $P order "$tmp/f/train.npz" "$tmp/tr$s.npz" "$s" || exit 1
    "$T" --data "$tmp/tr$s.npz:x" --targets "$tmp/tr$s.npz:y" --test "$tmp/f/test.npz:x" \
        --test-targets "$tmp/f/test.npz:y" --arch "$tmp/m$s.onnx" $RECIPE --in-order > "$tmp/ddl.out" 2>&1 &
    pid=$!
    $P fit resnet "$tmp/m$s.onnx" "$tmp/tr$s.npz" "$tmp/f/test.npz" "$EP" 32 0.02 cosine 0 0 1e-7 > "$tmp/ptj.out" 2>&1 &
    pid2=$!
    $P fit resnet "$tmp/m$s.onnx" "$tmp/tr$s.npz" "$tmp/f/test.npz" "$EP" 32 0.02 cosine 0 0 > "$tmp/pt.out" 2>&1
    wait $pid $pid2
    a=$(field test_acc < "$tmp/ddl.out") b=$(field test_acc < "$tmp/pt.out") c=$(field test_acc < "$tmp/ptj.out")
    echo "   in order, seed $s: ddl $a  PyTorch $b  PyTorch with its weights moved by 1e-7 $c"
    [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && echo "$a $b $c" >> "$tmp/inorder.txt"
done
case " $PARTS " in *" shuffled "*) ;; *) SEEDS_SH="" ;; esac
for s in ${SEEDS_SH-$SEEDS}; do
    $P export resnet "$tmp/d$s.onnx" 5 32 0.2 "$s" > /dev/null 2>&1 || exit 1
    "$T" --data "$tmp/f/train" --test "$tmp/f/test" --arch "$tmp/d$s.onnx" $RECIPE --seed "$s" > "$tmp/ddl.out" 2>&1 &
    pid=$!
    $P fit resnet "$tmp/d$s.onnx" "$tmp/f/train" "$tmp/f/test" "$EP" 32 0.02 cosine 0.2 "$s" > "$tmp/pt.out" 2>&1
    wait $pid
    a=$(field test_acc < "$tmp/ddl.out") b=$(field test_acc < "$tmp/pt.out")
    echo "   shuffled folder, dropout 0.2, seed $s: ddl $a  PyTorch $b"
    [ -n "$a" ] && [ -n "$b" ] && echo "$a $b" >> "$tmp/shuffled.txt"
done
[ -s "$tmp/inorder.txt" ] && part inorder "same batches (npz, --in-order), dropout off"
[ -s "$tmp/shuffled.txt" ] && part shuffled "PNG folders shuffled, dropout 0.2"
exit 0
