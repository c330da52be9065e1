"""acc5_torch.py - PyTorch's side of make bench's accuracy comparison on a five-class folder
(acc5.sh; issue 45, item 6), one thread:

  export NET OUT.onnx CLASSES SIZE DROPOUT SEED
      tests/torch/nets.py's NET from torch's seed SEED, exported as torch.onnx.export(...,
      training=TrainingMode.TRAINING, do_constant_folding=False) writes it: the initial weights of
      both sides.
  order IN.npz OUT.npz SEED
      IN.npz's x and y in an order drawn from SEED: the batches of an --in-order run.
  fit NET MODEL.onnx TRAIN TEST EPOCHS BATCH LR SCHEDULE DROPOUT SEED [JITTER]
      from MODEL.onnx's weights (state_dict's names), SGD with momentum 0.9, no weight decay, the
      rate constant or cosine to 0 by step (SCHEDULE; ddl-train's --schedule cosine: lr (1 + cos(pi
      t / T)) / 2 at step t of T), the mean cross-entropy, BatchNorm in training mode and the
      network's Dropout DROPOUT (PyTorch's own masks, from torch's seed SEED); then the accuracy on
      TEST in eval mode (running statistics, no dropout). TRAIN and TEST are folders of class
      folders (classes and files in sorted name order, as ddl-train and torchvision's ImageFolder
      read them; PNGs of the network's size, decoded by PIL) or .npz files of x and y. SEED 0:
      the training set in its order every epoch (ddl-train --in-order); else shuffled every epoch
      by a generator of seed SEED. Inputs as ddl-train normalises a network without its own
      normalisation: x / 255 minus the training set's per-channel mean, over its standard
      deviation (population, in double, then float32). JITTER (0): every weight moved by JITTER
      relative, at random (torch's seed SEED + 1000): 1e-7, the size of a float32 rounding, gives
      PyTorch against itself, the floor of any float32 comparison. Prints "pytorch: test_acc=A
      train_loss=L".
"""
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "torch"))
import nets  # noqa: E402
from torch_trains import load  # noqa: E402  (nets.py's network with an ONNX file's weights)


def export(name, out, classes, size, dropout, seed):
    torch.manual_seed(seed)
    m = nets.make(name, classes, dropout)
    x = torch.rand(2, 3, size, size) * 255
    torch.onnx.export(copy.deepcopy(m), x, out, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}})


def arrays(path):
    """x (N, H, W, 3) uint8 and y (N,) of a folder of class folders or an .npz of x and y."""
    if path.endswith(".npz"):
        z = np.load(path)
        return z["x"], z["y"].astype(np.int64)
    from PIL import Image
    x, y = [], []
    for k, c in enumerate(sorted(d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d)))):
        for f in sorted(os.listdir(os.path.join(path, c))):
            with Image.open(os.path.join(path, c, f)) as im:
                x.append(np.asarray(im.convert("RGB")))
            y.append(k)
    return np.stack(x), np.array(y, np.int64)


def fit(name, model, train, test, epochs, batch, lr, schedule, dropout, seed, jitter=0.0):
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x, y = arrays(train)
    v = x.astype(np.float64) / 255.0
    mean = torch.from_numpy(v.mean((0, 1, 2)).astype(np.float32))[:, None, None]
    std = torch.from_numpy(v.std((0, 1, 2)).astype(np.float32))[:, None, None]
    del v

    def inputs(a):
        return (torch.from_numpy(a).permute(0, 3, 1, 2).float() / 255.0 - mean) / std

    xs, ys = inputs(x), torch.from_numpy(y)
    m = load(name, model, dropout, seed=None).train()  # the seed set above draws the dropout
    if jitter:
        g = torch.Generator().manual_seed(seed + 1000)
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(1 + jitter * torch.randn(p.shape, generator=g))
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    total = epochs * ((len(x) + batch - 1) // batch)
    if schedule == "cosine":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 * (1.0 + math.cos(math.pi * min(t, total) / total)))
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen) if seed else torch.arange(len(x))
        for lo in range(0, len(x), batch):
            i = order[lo:lo + batch]
            loss = nn.functional.cross_entropy(m(xs[i]), ys[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    tx, ty = arrays(test)
    m.eval()
    with torch.no_grad():
        pred = torch.cat([m(inputs(tx[i:i + 500])).argmax(1) for i in range(0, len(tx), 500)])
    last = losses[-(len(x) // batch):]
    print("pytorch: test_acc=%.4f train_loss=%.4f" % (float((pred.numpy() == ty).mean()), sum(last) / len(last)))


def main(a):
    if len(a) == 7 and a[0] == "export":
        export(a[1], a[2], int(a[3]), int(a[4]), float(a[5]), int(a[6]))
    elif len(a) == 4 and a[0] == "order":
        z = np.load(a[1])
        p = np.random.default_rng(int(a[3])).permutation(len(z["y"]))
        np.savez(a[2], x=z["x"][p], y=z["y"][p])
    elif len(a) in (11, 12) and a[0] == "fit":
        fit(a[1], a[2], a[3], a[4], int(a[5]), int(a[6]), float(a[7]), a[8], float(a[9]), int(a[10]),
            float(a[11]) if len(a) > 11 else 0.0)
    else:
        raise SystemExit(__doc__)
    return 0


sys.exit(main(sys.argv[1:]))
