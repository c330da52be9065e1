"""torch_trains.py - PyTorch's side of "trains as PyTorch trains" (issue 45, item 6), for
tests/test_torch_trains.sh and tools/bench/torch_trains.sh; the networks are nets.py's, the data
data.py's (which also reads ddl's losses back and compares them).

  export NET DIR CLASSES SIZE [DROPOUT]
      the network from seed 0, trained 3 steps in PyTorch on random data so that its running
      statistics are its own, then exported as DIR/NET.onnx by
      torch.onnx.export(..., training=TrainingMode.TRAINING, do_constant_folding=False) (a copy
      is exported: a training-mode export runs the network, which moves its running statistics).
  steps NET DATADIR MODEL.onnx BATCH LR OUT [EPOCHS]
      from MODEL.onnx's weights and running statistics, SGD with momentum 0.9 (no weight decay, a
      constant rate) on DATADIR's data (data.py) in its order, batches of BATCH, inputs normalised
      as ddl-train does (x / 255 minus the training set's per-channel mean, over its std:
      population statistics in double, then float32), the mean cross-entropy (over the pixels too
      for a U-Net); dropout off. OUT gets each step's loss, one a line; OUT.npz the state at the
      end, OUT.1.npz after the first step.
  eval NET MODEL.onnx DATADIR OUT.txt
      PyTorch's eval-mode outputs of DATADIR's first 8 images (raw pixels, as the ONNX file takes
      them, and as DATADIR/eval/img holds them for test_infer --reference) with MODEL.onnx's
      weights and running statistics, one image a line (for data.py logits).
  prepare DIR BATCH LR NET:DATADIR:CLASSES:SIZE...
      for each: export (but tiny, tiny.py's), then eval into DIR/NET.eval.txt and steps into
      DIR/NET.torch, and again in float64 into DIR/NET.torch64, in one process."""
import copy
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nets  # noqa: E402


# ---- the network and its ONNX file ----

def export(name, d, classes, size, dropout):
    torch.manual_seed(0)
    m = nets.make(name, classes, dropout)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):  # running statistics of its own, not 0 and 1
        x = torch.randn(4, 3, size, size) * 0.8 + 0.1
        out = m(x)
        t = torch.randint(0, out.shape[1], (4,) + tuple(out.shape[2:]))
        loss = nn.functional.cross_entropy(out, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = torch.rand(2, 3, size, size) * 255
    torch.onnx.export(copy.deepcopy(m), x, "%s/%s.onnx" % (d, name), training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}})


def load(name, model, dropout=0.0, seed=0):
    """The network with the ONNX file's initializers as its state (state_dict's names); seed None
    leaves torch's random state as the caller set it (tools/bench/acc5_torch.py: its dropout)."""
    import onnx
    from onnx import numpy_helper
    g = onnx.load(model).graph
    out = [o for o in g.output if o.name == "logits"][0]
    classes = out.type.tensor_type.shape.dim[1].dim_value
    if seed is not None:
        torch.manual_seed(seed)
    m = nets.make(name, classes, dropout)
    state = m.state_dict()
    got = 0
    for t in g.initializer:
        if t.name in state:
            state[t.name] = torch.from_numpy(numpy_helper.to_array(t).copy()).reshape(state[t.name].shape)
            got += 1
    want = sum(1 for k in state if not k.endswith("num_batches_tracked"))
    if got != want:
        raise SystemExit("%s holds %d of the network's %d tensors under state_dict's names" % (model, got, want))
    m.load_state_dict(state)
    return m


# ---- training ----

def norm_stats(x):
    """ddl's ddl_dataset_stats_channels: per channel, of x / 255, in double; population std."""
    v = x.astype(np.float64) / 255.0
    return v.mean((0, 1, 2)).astype(np.float32), v.std((0, 1, 2)).astype(np.float32)


def arrays(path):
    """x (N, H, W, 3) uint8 and y of a data.py directory or of an .npz with x and y."""
    if path.endswith(".npz"):
        z = np.load(path)
        return z["x"], z["y"]
    return np.load(path + "/x.npy"), np.load(path + "/y.npy")


def inputs(x, mean, std):
    return (torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255.0 - torch.from_numpy(mean)[:, None, None]) / \
        torch.from_numpy(std)[:, None, None]


def steps(name, d, model, batch, lr, out, epochs, dtype=torch.float32):
    torch.set_num_threads(1)
    x, y = arrays(d)
    y = torch.from_numpy(y.astype(np.int64))
    mean, std = norm_stats(x)
    xs = inputs(x, mean, std).to(dtype)
    m = load(name, model).to(dtype)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    losses = []
    for _ in range(epochs):
        for lo in range(0, len(x), batch):
            loss = nn.functional.cross_entropy(m(xs[lo:lo + batch]), y[lo:lo + batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if len(losses) == 1:  # the running statistics of one step (data.py state)
                np.savez(out + ".1.npz", **{k: v.numpy() for k, v in m.state_dict().items()})
    with open(out, "w") as f:
        f.write("".join("%.9g\n" % v for v in losses))
    np.savez(out + ".npz", **{k: v.numpy() for k, v in m.state_dict().items()})


# ---- eval mode ----

def evaluate(name, model, d, out):
    """PyTorch's eval-mode outputs of the first 8 images of d (raw pixels, as data.py's PNGs hold
    them and the ONNX file takes them), one image a line in out."""
    m = load(name, model).eval()
    x = torch.from_numpy(np.load(d + "/x.npy")[:8]).permute(0, 3, 1, 2).float()
    with torch.no_grad():
        want = m(x).numpy().reshape(len(x), -1)
    np.savetxt(out, want, "%.9g")


def prepare(d, batch, lr, entries):
    """Each of entries, NET:DATADIR:CLASSES:SIZE, exported (but tiny: tiny.py's file), evaluated
    and trained, in one process (PyTorch takes seconds to start on a loaded machine)."""
    for e in entries:
        name, data, classes, size = e.split(":")
        model = "%s/%s.onnx" % (d, name)
        if name != "tiny":
            export(name, d, int(classes), int(size), 0.0)
        evaluate(name, model, data, "%s/%s.eval.txt" % (d, name))
        steps(name, data, model, batch, lr, "%s/%s.torch" % (d, name), 1)
        # the same in float64: how far PyTorch's own float32 rounding takes it (data.py compare)
        steps(name, data, model, batch, lr, "%s/%s.torch64" % (d, name), 1, dtype=torch.float64)


def main(a):
    if a and a[0] == "export" and len(a) >= 5:
        export(a[1], a[2], int(a[3]), int(a[4]), float(a[5]) if len(a) > 5 else 0.0)
    elif a and a[0] == "steps" and len(a) >= 7:
        steps(a[1], a[2], a[3], int(a[4]), float(a[5]), a[6], int(a[7]) if len(a) > 7 else 1)
    elif a and a[0] == "eval" and len(a) == 5:
        evaluate(a[1], a[2], a[3], a[4])
    elif a and a[0] == "prepare" and len(a) >= 5:
        prepare(a[1], int(a[2]), float(a[3]), a[4:])
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
