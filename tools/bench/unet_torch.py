#!/usr/bin/python3
"""unet_torch.py - the PyTorch peer of examples/unet for benchmarks.

The same architecture as models/unet.c with the unet example's defaults (depth 3, width 8,
64x64 inputs, 1 channel, 11 classes):
    block(cin -> c): conv 3x3 pad 1 no bias -> GroupNorm(groups_for(c), c, eps 1e-5) -> ReLU,
                     conv 3x3 pad 1 no bias -> GroupNorm -> ReLU
    down l: block(c_{l-1} -> c_l), kept as skip, max-pool 2x2;  bottom: block(c_{D-1} -> c_D)
    up l:   ConvTranspose2d(2 c_l -> c_l, 2, stride 2) with bias, cat([skip, up]), block(2 c_l -> c_l)
    head:   conv 1x1 (c_0 -> 11) with bias;                     c_l = width * 2^l
Loss as src/train/train.c: mean pixel cross-entropy + dice_weight (0.5) * mean over samples of
the foreground dice loss 1 - (2 I + 1) / (P + T + 1), p_fg = 1 - softmax[0]. Adam lr 0.002,
betas (0.9, 0.999), eps 1e-8, no weight decay, batch 32.

Data: RANDOM inputs and labels of the same shapes (N, 1, S, S) and (N, S, S), not the
Fashion-MNIST scenes ddl composes: only the timing is compared here, and a conv costs the
same whatever the pixel values are. Only the training steps are timed (a first untimed warm-up
step), and the script ends with the ddl examples' summary line (images_per_sec=).

    /usr/bin/python3 tools/bench/unet_torch.py --scenes 1024 --threads 1
"""
import argparse
import time

import torch
import torch.nn as nn

import torch_modes
import torch.nn.functional as F


def groups_for(c):
    """The largest group count <= 8 that divides c (models/unet.c)."""
    g = min(c, 8)
    while c % g:
        g -= 1
    return g


class Block(nn.Module):
    def __init__(self, cin, c):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(groups_for(c), c, eps=1e-5)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(groups_for(c), c, eps=1e-5)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(x)))


class Up(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.block = Block(2 * c, c)


class UNet(nn.Module):
    """(B, in_c, H, W) -> logits (B, K, H, W)."""

    def __init__(self, in_c=1, n_classes=11, depth=3, width=8):
        super().__init__()
        cs = [width << l for l in range(depth + 1)]
        self.down = nn.ModuleList(Block(in_c if l == 0 else cs[l - 1], cs[l]) for l in range(depth))
        self.bottom = Block(cs[depth - 1], cs[depth])
        self.ups = nn.ModuleList(Up(cs[l]) for l in range(depth))
        self.head = nn.Conv2d(cs[0], n_classes, 1)

    def forward(self, x):
        skips = []
        for blk in self.down:
            x = blk(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for l in reversed(range(len(self.ups))):
            u = self.ups[l]
            x = u.block(torch.cat([skips[l], u.up(x)], 1))
        return self.head(x)


def loss_fn(logits, y, dice_weight):
    """Cross-entropy over pixels + dice_weight * foreground dice, as src/train/train.c."""
    ce = F.cross_entropy(logits, y)
    if dice_weight <= 0:
        return ce
    probs = torch.softmax(logits, 1)
    p = (1.0 - probs[:, 0]).flatten(1)
    t = (y >= 1).float().flatten(1)
    inter, psum, tsum = (p * t).sum(1), p.sum(1), t.sum(1)
    dice = 1.0 - (2.0 * inter + 1.0) / (psum + tsum + 1.0)
    return ce + dice_weight * dice.mean()


def main():
    ap = argparse.ArgumentParser(description="PyTorch U-Net training speed (ddl benchmark peer)")
    ap.add_argument("--scenes", type=int, default=1024, help="training samples timed (one pass)")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--classes", type=int, default=11)
    ap.add_argument("--dice-weight", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    torch_modes.add_mode_arg(ap)
    a = ap.parse_args()
    if a.scenes < a.batch or a.batch < 1 or a.threads < 1:
        ap.error("need scenes >= batch >= 1 and threads >= 1")

    wall0 = time.perf_counter()
    torch_modes.set_threads(a.threads)
    torch.manual_seed(a.seed)
    x = torch.randn(a.scenes, 1, a.size, a.size)
    y = torch.randint(0, a.classes, (a.scenes, a.size, a.size))
    model, x = torch_modes.prepare(UNet(1, a.classes, a.depth, a.width), x, a.mode)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    print("torch %s threads %d scenes %d size %d batch %d depth %d width %d params %d" %
          (torch.__version__, torch.get_num_threads(), a.scenes, a.size, a.batch, a.depth, a.width,
           sum(p.numel() for p in model.parameters())))

    def step(i):
        xb, yb = x[i:i + a.batch], y[i:i + a.batch]
        opt.zero_grad(set_to_none=True)
        with torch_modes.autocast(a.mode):
            loss = loss_fn(model(xb), yb, a.dice_weight)
        loss.backward()
        opt.step()
        return loss.item()

    step(0)  # warm-up, untimed
    seen, t0, loss = 0, time.perf_counter(), 0.0
    for i in range(0, a.scenes - a.batch + 1, a.batch):
        loss = step(i)
        seen += a.batch
    secs = time.perf_counter() - t0
    print("summary: model=unet transport=torch world=1 epochs=1 batch=%d loss=%.4f images_per_sec=%.0f wall_s=%.1f "
          "mode=%s" % (a.batch, loss, seen / secs, time.perf_counter() - wall0, a.mode))


if __name__ == "__main__":
    main()
