#!/bin/sh
# test_ckpt_tool.sh - ddl-ckpt: show lists every tensor, verify accepts a good checkpoint and
# refuses damaged ones with a clear message, export writes a .npz that numpy loads and that
# PyTorch's LeNet (tools/bench/lenet_torch.py) turns into the same test accuracy ddl reported.
# The numpy/PyTorch part is skipped, with a message, when /usr/bin/python3 lacks them.
# Checkpoints with hostile tensor names (../evil, /etc/evil, control characters, input_mean),
# written by build/tests/test_checkpoint --write-named: export refuses them, show escapes them.
# Ends with "N passed, N failed"; exit status non-zero on any failure.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
CKPT=$BUILD/bin/ddl-ckpt
LENET=$BUILD/bin/lenet
DATA=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT


if [ ! -x "$CKPT" ] || [ ! -x "$LENET" ]; then
    echo "no $CKPT or $LENET: build first" >&2
    echo "0 passed, 1 failed"; exit 1
fi
# ---- hostile tensor names (no data needed): export refuses them, show escapes them ----
TC=$BUILD/tests/test_checkpoint
if [ -x "$TC" ]; then
    for name in '../evil' '/etc/evil' 'a/b' 'input_mean' "$(printf 'esc\033[2Jx')" "$(printf 'tab\tx')" 'a b'; do
        rm -f "$tmp/named" "$tmp/n.npz"
        shown=$(printf '%s' "$name" | tr -c '[:print:]' '?')
        "$TC" --write-named "$name" "$tmp/named" > /dev/null 2>&1
        check "a checkpoint with a tensor named '$shown' is written" $?
        "$CKPT" export "$tmp/named" "$tmp/n.npz" > "$tmp/e" 2>&1; rc=$?
        [ $rc -eq 1 ] && grep -q 'n.npz: tensor 0 is named "[^"]*": ' "$tmp/e" && grep -q 'nothing exported' "$tmp/e" \
            && [ ! -e "$tmp/n.npz" ]
        check "export refuses the tensor name '$shown' (exit 1, names it, writes nothing)" $?
    done
    "$TC" --write-named '../evil' "$tmp/named" > /dev/null 2>&1
    "$CKPT" export "$tmp/named" "$tmp/n.npz" > "$tmp/e" 2>&1
    grep -q 'n.npz: tensor 0 is named "\.\./evil": export takes only names of letters, digits' "$tmp/e"
    check "export's message for ../evil" $?
    "$TC" --write-named "$(printf 'esc\033[2Jx')" "$tmp/named" > /dev/null 2>&1
    "$CKPT" show "$tmp/named" > "$tmp/s" 2>&1
    [ $? -eq 0 ] && grep -q '^  esc\\x1b\[2Jx ' "$tmp/s" && ! grep -q "$(printf '\033')" "$tmp/s"
    check "show prints a control character in a name as \\x1b" $?
    "$TC" --write-named 'conv1.weight' "$tmp/named" > /dev/null 2>&1
    "$CKPT" export "$tmp/named" "$tmp/n.npz" > "$tmp/e" 2>&1 && grep -q 'conv1\.weight\.npy' "$tmp/n.npz"
    check "export takes a PyTorch name (conv1.weight)" $?
else
    bad "no $TC: build first"
fi

if [ ! -d "$DATA" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    echo "0 passed, 0 failed"; exit 0
fi

# ---- a model to look at ----
"$LENET" --epochs 2 --train-limit 6000 --quiet --save "$tmp/ck" > "$tmp/run" 2>&1
check "lenet --save exits 0" $?
acc=$(sed -n 's/.*test_acc=\([0-9.]*\).*/\1/p' "$tmp/run")
[ -n "$acc" ]; check "lenet reports test_acc ($acc)" $?

# ---- show ----
"$CKPT" show "$tmp/ck" > "$tmp/show" 2>&1
check "show exits 0" $?
grep -q '^model      lenet, signature [0-9a-f]\{8\}' "$tmp/show"; check "show: model line" $?
grep -q '^progress   step 188, epoch 2, position 6000 of 6000 samples' "$tmp/show"; check "show: progress line" $?
[ "$(grep -c '^  [a-z0-9]*\.\(weight\|bias\) .* min [-+][0-9.]*  mean [-+][0-9.]*  max [-+][0-9.]*$' "$tmp/show")" -eq 10 ]
check "show: 10 tensors with min/mean/max" $?
grep -q '^  conv1.weight  *\[6,1,5,5\]' "$tmp/show"; check "show: conv1.weight [6,1,5,5]" $?

# ---- verify ----
"$CKPT" verify "$tmp/ck" > "$tmp/v" 2>&1
check "verify good -> 0" $?
grep -q ': ok (lenet, 10 tensors, 61706 parameters, step 188' "$tmp/v"; check "verify says ok" $?
head -c 5000 "$tmp/ck" > "$tmp/cut"
"$CKPT" verify "$tmp/cut" > "$tmp/v" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'cut: truncated: section WGTS (weights) needs' "$tmp/v"; check "verify truncated -> 1 + message" $?
cp "$tmp/ck" "$tmp/flip"
printf '\377' | dd of="$tmp/flip" bs=1 seek=100000 conv=notrunc 2>/dev/null
"$CKPT" verify "$tmp/flip" > "$tmp/v" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'CRC-32C 0x[0-9a-f]*, expected 0x[0-9a-f]*: the data is corrupt' "$tmp/v"; check "verify bit flip -> 1 + CRC message" $?
"$CKPT" verify "$tmp/missing" > "$tmp/v" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'missing: cannot open: No such file' "$tmp/v"; check "verify missing -> 1" $?
"$CKPT" verify "$tmp" > "$tmp/v" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'is a directory' "$tmp/v"; check "verify directory -> 1" $?
"$CKPT" show "$DATA/t10k-labels-idx1-ubyte.gz" > "$tmp/v" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'not a ddl checkpoint' "$tmp/v"; check "show of another file -> 1" $?
"$CKPT" frobnicate "$tmp/ck" > /dev/null 2>&1; [ $? -eq 2 ]; check "unknown command -> 2" $?

# ---- export ----
"$CKPT" export "$tmp/ck" "$tmp/m.npz" > "$tmp/e" 2>&1
check "export exits 0" $?
if /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then
    /usr/bin/python3 - "$tmp/m.npz" "$DATA" "$acc" > "$tmp/py" 2>&1 <<'EOF'
import os, sys
import numpy as np, torch
sys.path.insert(0, os.path.join(os.getcwd(), "tools", "bench"))
import lenet_torch as lt
npz, data, ddl_acc = sys.argv[1], sys.argv[2], float(sys.argv[3])
z = np.load(npz)
model = lt.LeNet5()
state = {k: torch.from_numpy(z[k]) for k in z.files if not k.startswith("input_")}
model.load_state_dict(state, strict=True)           # every name and shape must match PyTorch's
x = lt.load_idx(lt.find(data, "t10k-images-idx3-ubyte"), 3)
y = lt.load_idx(lt.find(data, "t10k-labels-idx1-ubyte"), 1)
xt = (torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1) - float(z["input_mean"])) / float(z["input_std"])
with torch.no_grad():
    acc = (model(xt).argmax(1).numpy() == y).mean()
print("torch_acc=%.4f ddl_acc=%.4f" % (acc, ddl_acc))
sys.exit(0 if abs(acc - ddl_acc) <= 0.005 else 1)
EOF
    rc=$?
    cat "$tmp/py"
    check "PyTorch LeNet from the .npz matches ddl's test accuracy" $rc
else
    echo "skipped: /usr/bin/python3 has no numpy and torch: the .npz was not loaded (apt-get install python3-numpy python3-torch)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
