#!/usr/bin/python3
"""cnn_torch.py - the PyTorch peer of `ddl-train --arch cnn` for benchmarks.

The same network as src/graph/presets.c's cnn (width 16): three stages of two
Conv2d(3x3, padding 1, bias) + ReLU and a MaxPool2d(2), widths 16, 32, 64, then global average
pooling and Linear(64 -> classes). Cross-entropy, SGD lr 0.01 momentum 0.9, batch 64, as
ddl-train's defaults (the cosine schedule changes no timing). Data: RANDOM inputs (N, 3, S, S)
and labels: only the speed is compared, and a conv costs the same whatever the pixels are. The
training steps alone are timed (one untimed warm-up step); ends with ddl's summary line.

    /usr/bin/python3 tools/bench/cnn_torch.py --images 3000 --size 64 --threads 1
"""
import argparse
import time

import torch
import torch.nn as nn

import torch_modes


def cnn(in_c, classes, width=16):
    layers, c = [], in_c
    for s in range(3):
        w = width << s
        layers += [nn.Conv2d(c, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1), nn.ReLU(),
                   nn.MaxPool2d(2)]
        c = w
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes))


def main():
    ap = argparse.ArgumentParser(description="PyTorch cnn training speed (ddl benchmark peer)")
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    torch_modes.add_mode_arg(ap)
    a = ap.parse_args()
    wall0 = time.perf_counter()
    torch_modes.set_threads(a.threads)
    torch.manual_seed(42)
    x = torch.randn(a.images, 3, a.size, a.size)
    y = torch.randint(0, a.classes, (a.images,))
    model, x = torch_modes.prepare(cnn(3, a.classes), x, a.mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch_modes.autocast(a.mode):
            loss = loss_fn(model(x[i:i + a.batch]), y[i:i + a.batch])
        loss.backward()
        opt.step()
        return loss.item()

    step(0)
    seen, t0 = 0, time.perf_counter()
    for i in range(0, a.images - a.batch + 1, a.batch):
        step(i)
        seen += a.batch
    secs = time.perf_counter() - t0
    print("summary: model=cnn transport=torch world=1 epochs=1 batch=%d images_per_sec=%.0f wall_s=%.1f mode=%s"
          % (a.batch, seen / secs, time.perf_counter() - wall0, a.mode))


if __name__ == "__main__":
    main()
