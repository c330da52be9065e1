"""data.py - the torch-free half of "trains as PyTorch trains" (issue 45, item 6): python3-numpy,
python3-pil and nothing else, so that tests/test_torch_trains.sh's fixture runs where PyTorch is not.

  data DIR N SIZE CLASSES SEED [segment]
      DIR/x.npy (N, SIZE, SIZE, 3) uint8 and DIR/y.npy: labels (N,) of CLASSES classes, or with
      `segment` masks (N, SIZE, SIZE) of CLASSES + 1 classes (0 the background); each image a noisy
      background of random colour with one shape (one to three for masks) whose colour, form and
      texture follow its class. DIR/eval/img/NNN.png: its first 8 images, lossless, for
      test_infer --reference. The same seed gives the same bytes.
  compare OUT LOGDIR [TOL [OUT64]]
      ddl's per-step losses (train/loss of the TensorBoard event files in LOGDIR, ddl-train
      --log-every 1) against PyTorch's in OUT, one a line: prints the largest relative difference;
      exit 0 when it is <= TOL (1e-3) at every step and both took the same steps. With OUT64 (the
      same run of PyTorch in float64): only the steps before PyTorch's float32 loss first leaves its
      own float64 one by more than TOL count (at least the first): past that point PyTorch
      does not agree with itself to TOL, and no float32 run can be held to it (in these networks a
      float32 rounding grows past 1e-3 within a few steps, in PyTorch as in ddl); and at such a
      step, ddl's loss within TOL of PyTorch's float32 one, or within max(TOL, 3 x PyTorch's own
      gap) of the float64 one (two float32 runs part by more than either from float64 where a
      step multiplies a rounding). Prints both gaps over all the steps.
  logits WANT.txt REFDIR [TOL]
      ddl's outputs REFDIR/logits.f32 (test_infer --reference) against PyTorch's in WANT.txt (one
      image a line): exit 0 when they are within TOL (1e-4) of each image's largest output.
  state A.npz B.npz WORD [TOL]
      the arrays whose names hold WORD in both (ddl-ckpt export's and PyTorch's state_dict):
      exit 0 when each is within TOL (1e-3) of its largest value in B (a running mean: or of the
      largest standard deviation of its running variance, if larger), and there is one."""
import glob
import os
import struct
import sys

import numpy as np


# ---- data ----

def shape_mask(rng, size, kind):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    r = size * rng.uniform(0.15, 0.3)
    cx, cy = rng.uniform(r, size - r), rng.uniform(r, size - r)
    if kind % 3 == 0:  # a disc
        return (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
    if kind % 3 == 1:  # a square
        return (np.abs(xx - cx) <= r * 0.85) & (np.abs(yy - cy) <= r * 0.85)
    return np.abs(xx - cx) + np.abs(yy - cy) <= r * 1.1  # a diamond


def make_data(d, n, size, classes, seed, segment):
    rng = np.random.default_rng(seed)
    hues = rng.integers(40, 216, (classes, 3))
    x = np.zeros((n, size, size, 3), np.uint8)
    y = np.zeros((n, size, size) if segment else (n,), np.uint8)
    for i in range(n):
        img = rng.integers(30, 226, 3) + rng.normal(0, 30, (size, size, 3))
        for _ in range(rng.integers(1, 4) if segment else 1):
            k = int(rng.integers(0, classes))
            m = shape_mask(rng, size, k)
            img[m] = hues[k] + rng.normal(0, 20 + 10 * (k % 2), (int(m.sum()), 3))
            if segment:
                y[i][m] = k + 1
            else:
                y[i] = k
        x[i] = np.clip(img, 0, 255).astype(np.uint8)
    os.makedirs(d, exist_ok=True)
    np.save(d + "/x.npy", x)
    np.save(d + "/y.npy", y)
    from PIL import Image
    os.makedirs(d + "/eval/img", exist_ok=True)
    for i in range(min(8, n)):
        Image.fromarray(x[i], "RGB").save("%s/eval/img/%03d.png" % (d, i))



# ---- ddl's losses from its event files ----

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """The (field, wire type, value) of a protobuf message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 1:
            v, i = b[i:i + 8], i + 8
        elif t == 5:
            v, i = b[i:i + 4], i + 4
        else:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        yield f, t, v


def event_scalars(logdir, tag):
    """{step: value} of tag in the event files under logdir (TFRecords of Event protos)."""
    out = {}
    for path in sorted(glob.glob(logdir + "/**/events.out.tfevents.*", recursive=True)):
        b = open(path, "rb").read()
        i = 0
        while i + 12 <= len(b):
            n = struct.unpack("<Q", b[i:i + 8])[0]
            rec = b[i + 12:i + 12 + n]
            i += 12 + n + 4
            step = 0
            vals = []
            for f, _, v in fields(rec):
                if f == 2:
                    step = v
                elif f == 5:  # summary: its values
                    for vf, _, vv in fields(v):
                        if vf == 1:
                            kv = {ff: x for ff, _, x in fields(vv)}
                            if kv.get(1) == tag.encode() and 2 in kv:
                                vals.append(struct.unpack("<f", kv[2])[0])
            for v in vals:
                out[step] = v
    return out


def compare(out, logdir, tol, out64=None):
    want = [float(v) for v in open(out).read().split()]
    got = event_scalars(logdir, "train/loss")
    steps_ = sorted(got)
    if steps_ != list(range(1, len(want) + 1)):
        print("compare: ddl logged steps %s, PyTorch took %d" % (steps_[:30], len(want)))
        return 1
    rel = [abs(got[s] - want[s - 1]) / abs(want[s - 1]) for s in steps_]
    n = len(want)
    extra = ""
    if out64:  # only the steps before PyTorch's float32 leaves its own float64 run by cond
        w64 = [float(v) for v in open(out64).read().split()]
        gap = [abs(a - b) / abs(b) for a, b in zip(want, w64)]
        n = next((i for i, g in enumerate(gap) if g > tol), len(gap))
        extra = " float32_vs_float64=%.2g ddl_vs_float64=%.2g conditioned_steps=%d" % (
            max(gap), max(abs(got[s] - w64[s - 1]) / abs(w64[s - 1]) for s in steps_), n)
    worst = int(np.argmax(rel[:n])) if n else 0
    ok = [r <= tol for r in rel[:n]]
    if out64:  # or as near the float64 run as PyTorch's float32 is, within 3x: where one step
        # multiplies a rounding 10-100 fold (MobileNet's third and fourth steps), two float32
        # runs part by more than either parts from float64
        ok = [o or abs(got[s + 1] - w64[s]) / abs(w64[s]) <= max(tol, 3 * gap[s]) for s, o in enumerate(ok)]
    print("steps=%d loss_first=%.5f/%.5f loss_last=%.5f/%.5f max_rel_diff=%.2g (step %d)%s%s" %
          (len(want), got[1], want[0], got[len(want)], want[-1], max(rel[:n] or [0]), worst + 1, extra,
           "" if all(ok) else " failing_steps=%s" % [i + 1 for i, o in enumerate(ok) if not o]))
    return 0 if n >= 1 and all(ok) else 1


def logits(want_path, ref, tol):
    want = np.loadtxt(want_path, ndmin=2)
    ddl = np.fromfile(ref + "/logits.f32", np.float32).reshape(want.shape[0], -1)
    if ddl.shape != want.shape:
        print("logits: ddl's %s, PyTorch's %s" % (ddl.shape, want.shape))
        return 1
    rel = (np.abs(ddl - want).max(1) / np.abs(want).max(1)).max()
    print("eval: images=%d outputs=%d max_rel_diff=%.2g" % (want.shape[0], want.shape[1], rel))
    return 0 if rel <= tol else 1


def state(a, b, word, tol):
    a, b = np.load(a), np.load(b)
    names = sorted(k for k in a.files if word in k and k in b.files)
    worst, where = 0.0, "-"
    for k in names:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64).reshape(a[k].shape)
        scale = np.abs(y).max()
        if k.endswith("running_mean") and k[:-4] + "var" in b.files:  # a mean of 1e-9 is rounding: its spread's scale
            scale = max(scale, np.sqrt(b[k[:-4] + "var"].astype(np.float64)).max())
        r = np.abs(x - y).max() / max(scale, 1e-30)
        if r >= worst:
            worst, where = r, k
    print("state: %d arrays of %s, max_rel_diff=%.2g (%s)" % (len(names), word, worst, where))
    return 0 if names and worst <= tol else 1


def main(a):
    if a and a[0] == "data" and len(a) >= 6:
        make_data(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]), len(a) > 6 and a[6] == "segment")
        return 0
    if a and a[0] == "compare" and len(a) >= 3:
        return compare(a[1], a[2], float(a[3]) if len(a) > 3 else 1e-3, a[4] if len(a) > 4 else None)
    if a and a[0] == "logits" and len(a) >= 3:
        return logits(a[1], a[2], float(a[3]) if len(a) > 3 else 1e-4)
    if a and a[0] == "state" and len(a) >= 4:
        return state(a[1], a[2], a[3], float(a[4]) if len(a) > 4 else 1e-3)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
