#!/usr/bin/python3
"""lenet_torch.py - the PyTorch peer of examples/lenet for benchmarks.

Trains classic LeNet-5 on Fashion-MNIST read from the same gzip IDX files ddl reads (no
torchvision, no download), with the same recipe as ddl's defaults (SGD lr 0.01 momentum 0.9,
batch 64, inputs normalised with mean 0.2860 std 0.3530), and ends with the same machine-readable
summary line as the ddl examples, so tools/bench can put the two side by side.

    /usr/bin/python3 tools/bench/lenet_torch.py --epochs 5 --threads 1

Only the training loop is timed for images/s; evaluation is not.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import torch_modes
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


# ---- data ----

def load_idx(path, want_dims):
    """Read a (gzip or raw) IDX file of unsigned bytes; return a numpy array of shape dims."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4:
        sys.exit("%s: truncated header: expected 4 bytes, found %d" % (path, len(raw)))
    magic = struct.unpack(">I", raw[:4])[0]
    want = 0x800 | want_dims
    if magic != want:
        sys.exit("%s: bad magic 0x%08x, expected 0x%08x (unsigned bytes, %d dims)" % (path, magic, want, want_dims))
    hdr = 4 + 4 * want_dims
    if len(raw) < hdr:
        sys.exit("%s: truncated header: expected %d bytes, found %d" % (path, hdr, len(raw)))
    dims = struct.unpack(">%dI" % want_dims, raw[4:hdr])
    count = int(np.prod(dims))
    if len(raw) - hdr != count:
        sys.exit("%s: expected %d bytes of data, found %d" % (path, count, len(raw) - hdr))
    return np.frombuffer(raw, dtype=np.uint8, offset=hdr).reshape(dims)


def find(data_dir, name):
    p = os.path.join(data_dir, name)
    return p + ".gz" if os.path.exists(p + ".gz") else p


def load_split(data_dir, split):
    """Images as a normalised float tensor (n, 1, 28, 28) and labels as int64 (n,)."""
    x = load_idx(find(data_dir, "%s-images-idx3-ubyte" % split), 3)
    y = load_idx(find(data_dir, "%s-labels-idx1-ubyte" % split), 1)
    if x.shape[0] != y.shape[0]:
        sys.exit("%s: %d images but %d labels" % (split, x.shape[0], y.shape[0]))
    xt = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    xt = (xt - MEAN) / STD
    return xt.contiguous(), torch.from_numpy(y.astype(np.int64))


# ---- model ----

class LeNet5(nn.Module):
    """Classic LeNet-5 with ReLU and max pooling: (B, 1, 28, 28) -> (B, 10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)  # (B, 6, 28, 28) -> pool (B, 6, 14, 14)
        self.conv2 = nn.Conv2d(6, 16, 5)            # (B, 16, 10, 10) -> pool (B, 16, 5, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


# ---- training and evaluation ----

def train_epoch(model, opt, loss_fn, x, y, batch, gen, mode="nchw"):
    """One epoch over a fresh permutation; returns (mean loss, samples, seconds of training)."""
    model.train()
    n = x.shape[0]
    perm = torch.randperm(n, generator=gen)
    total, seen = 0.0, 0
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        idx = perm[i:i + batch]
        xb, yb = torch_modes.prepare(model, x[idx], mode)[1], y[idx]
        opt.zero_grad(set_to_none=True)
        with torch_modes.autocast(mode):
            loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        total += loss.item() * idx.shape[0]
        seen += idx.shape[0]
    return total / seen, seen, time.perf_counter() - t0


@torch.no_grad()
def evaluate(model, loss_fn, x, y, batch=1000):
    model.eval()
    total, correct = 0.0, 0
    for i in range(0, x.shape[0], batch):
        out = model(x[i:i + batch])
        total += loss_fn(out, y[i:i + batch]).item() * out.shape[0]
        correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    return total / x.shape[0], correct / x.shape[0]


def main():
    ap = argparse.ArgumentParser(description="PyTorch LeNet-5 on Fashion-MNIST (ddl benchmark peer)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--train-limit", type=int, default=0, help="use only the first N training samples (0: all)")
    torch_modes.add_mode_arg(ap)
    a = ap.parse_args()
    if a.epochs < 1 or a.batch < 1 or a.threads < 1 or a.train_limit < 0:
        ap.error("epochs, batch and threads must be >= 1, train-limit >= 0")

    wall0 = time.perf_counter()
    torch_modes.set_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    xtr, ytr = load_split(a.data, "train")
    xte, yte = load_split(a.data, "t10k")
    if a.train_limit:
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]

    model = torch_modes.prepare(LeNet5(), None, a.mode)[0]
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    loss_fn = nn.CrossEntropyLoss()
    print("torch %s threads %d train %d test %d batch %d lr %g momentum %g" %
          (torch.__version__, torch.get_num_threads(), xtr.shape[0], xte.shape[0], a.batch, a.lr, a.momentum))

    train_samples, train_secs = 0, 0.0
    test_loss, test_acc = float("nan"), float("nan")
    for e in range(a.epochs):
        loss, seen, secs = train_epoch(model, opt, loss_fn, xtr, ytr, a.batch, gen, a.mode)
        train_samples += seen
        train_secs += secs
        test_loss, test_acc = evaluate(model, loss_fn, xte, yte)
        print("epoch %d loss %.4f test_loss %.4f test_acc %.4f images_per_sec %.0f" %
              (e + 1, loss, test_loss, test_acc, seen / secs), flush=True)

    print("summary: model=lenet transport=torch world=1 epochs=%d batch=%d test_acc=%.4f test_loss=%.4f "
          "images_per_sec=%.0f wall_s=%.1f mode=%s" % (a.epochs, a.batch, test_acc, test_loss,
                                                       train_samples / train_secs, time.perf_counter() - wall0, a.mode))


if __name__ == "__main__":
    main()
