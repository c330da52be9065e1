"""folder5.py DIR TRAIN_PER_CLASS TEST_PER_CLASS SIZE [SEED] - a five-class image folder that a
small CNN learns to about 0.75-0.8 test accuracy in a few epochs but not to 1.0, for make bench's
accuracy comparison with PyTorch (acc5.sh; issue 45, item 6):

  DIR/{train,test}/{checks,diagonal,dots,horizontal,vertical}/NNNNN.png   lossless RGB, SIZE x SIZE
  DIR/{train,test}.npz   the same pixels, x (N, SIZE, SIZE, 3) uint8 and y (N,) uint8 (labels in
                         the folders' sorted order, as ddl-train and torchvision's ImageFolder
                         number them), all classes interleaved in one order drawn from SEED: for
                         runs that must see the same batches

Each image: a background of a random colour under a light gradient in a random direction, one to
three distractors (thin lines, small blobs) of random colours, and an elliptic patch of random size
and place filled with the class's pattern (checks, diagonal stripes, dots, horizontal stripes,
vertical stripes; period 3 to 7 pixels, random phase, the angle jittered by up to 0.2 rad) in two
random colours, mixed into the background with a contrast of CONTRAST to 1; drawn at twice the size
and averaged down, then Gaussian noise of a random sigma up to NOISE. Only the pattern tells the
class. What keeps it below 1.0: a patch whose two colours are close, a small one, a pattern near
the noise's scale: even a person mistakes those. The issue's network (tests/torch/nets.py resnet)
reaches 0.73 to 0.79 after 8 epochs of SGD at 32x32 (acc5.sh's recipe).
Deterministic from SEED (default 1): the training set from SEED, the test set from SEED + 1000;
acc5.sh's 6500 images at 32x32 take about 17 s of one core."""
import os
import sys

import numpy as np
from PIL import Image

CLASSES = ("checks", "diagonal", "dots", "horizontal", "vertical")  # sorted: the folders' label order
CONTRAST, NOISE = 0.5, 20  # the patch's least contrast (of 1) and the noise's largest sigma (of 255)


def texture(name, rng, xx, yy):
    """The class's pattern in -1..1 over the grid: period (3 to 7 pixels of the image)
    and phase random, the angle jittered by up to 0.2 rad."""
    p = 2 * rng.uniform(3, 7)  # drawn at twice the size
    j = rng.uniform(-0.2, 0.2)
    quarter = (np.pi / 2) * rng.integers(0, 2)  # diagonal: either; checks and dots: upright or at 45
    ang = {"horizontal": np.pi / 2, "vertical": 0.0, "diagonal": np.pi / 4 + quarter}.get(name, quarter / 2) + j
    u = xx * np.cos(ang) + yy * np.sin(ang) + rng.uniform(0, p)
    v = -xx * np.sin(ang) + yy * np.cos(ang) + rng.uniform(0, p)
    if name in ("horizontal", "vertical", "diagonal"):  # stripes, across u
        return np.sin(2 * np.pi * u / p)
    if name == "checks":
        return np.tanh(3 * np.sin(2 * np.pi * u / p) * np.sin(2 * np.pi * v / p))
    # dots: a lattice of discs
    du, dv = (u % p) / p - 0.5, (v % p) / p - 0.5
    return np.clip((0.3 - np.hypot(du, dv)) * 10, -1, 1)


def image(rng, k, size):
    s = 2 * size
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float64) + 0.5
    # background: a colour and a light gradient in a random direction
    bg = rng.uniform(30, 225, 3)
    t = rng.uniform(0, 2 * np.pi)
    light = 1 + rng.uniform(0, 0.35) * ((xx * np.cos(t) + yy * np.sin(t)) / s - 0.5)
    img = bg[None, None, :] * light[:, :, None]
    # distractors: thin lines and small blobs, under the patch
    for _ in range(rng.integers(1, 4)):
        col = rng.uniform(0, 255, 3)
        if rng.integers(0, 2):
            x0, y0, a = rng.uniform(0, s), rng.uniform(0, s), rng.uniform(0, np.pi)
            d = np.abs((xx - x0) * np.sin(a) - (yy - y0) * np.cos(a)) - rng.uniform(0.6, 1.4)
        else:
            d = np.hypot(xx - rng.uniform(0, s), yy - rng.uniform(0, s)) - rng.uniform(1.5, 3.5)
        m = np.clip(0.5 - d, 0, 1)[:, :, None] * rng.uniform(0.3, 0.8)
        img = img * (1 - m) + col * m
    # the patch: an ellipse of the class's pattern in two random colours, at a random place, size
    # and contrast
    rx, ry = s * rng.uniform(0.18, 0.45), s * rng.uniform(0.18, 0.45)
    cx, cy = rng.uniform(rx, s - rx), rng.uniform(ry, s - ry)
    m = np.clip((1 - np.hypot((xx - cx) / rx, (yy - cy) / ry)) * min(rx, ry), 0, 1)
    c1, c2 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    f = (texture(CLASSES[k], rng, xx, yy)[:, :, None] + 1) / 2
    pat = c1 * f + c2 * (1 - f)
    m = m[:, :, None] * rng.uniform(CONTRAST, 1.0)
    img = img * (1 - m) + pat * m
    img = img.reshape(size, 2, size, 2, 3).mean((1, 3))
    img += rng.normal(0, rng.uniform(4, NOISE), img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def split(out, name, per_class, size, seed):
    rng = np.random.default_rng(seed)
    x, y = [], []
    for i in range(per_class):  # classes interleaved in the draws: a prefix is balanced
        for k, c in enumerate(CLASSES):
            a = image(rng, k, size)
            d = "%s/%s/%s" % (out, name, c)
            os.makedirs(d, exist_ok=True)
            Image.fromarray(a, "RGB").save("%s/%05d.png" % (d, i))
            x.append(a)
            y.append(k)
    order = np.random.default_rng(seed + 7).permutation(len(x))
    np.savez("%s/%s.npz" % (out, name), x=np.stack(x)[order], y=np.array(y, np.uint8)[order])


def main():
    if len(sys.argv) not in (5, 6):
        raise SystemExit(__doc__)
    out, n_train, n_test, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    split(out, "train", n_train, size, seed)
    split(out, "test", n_test, size, seed + 1000)


main()
