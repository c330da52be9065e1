"""photos5.py DIR TRAIN_PER_CLASS TEST_PER_CLASS SIZE - a five-class image folder for make bench's
"trains as PyTorch trains" (torch_trains.sh): DIR/{train,test}/{disc,square,diamond,triangle,ring}/NNNNN.png,
lossless RGB photos-like images (a textured shape under random light on a noisy background of
random colour; the shape's colour random too, so only its form tells the class; random size,
place and blur), and DIR/{train,test}.npz: the same images (N, SIZE, SIZE, 3) and labels, the
training set interleaved in one fixed order (seed 5), for runs that must see the same batches.
Deterministic."""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ("disc", "square", "diamond", "triangle", "ring")


def photo(rng, k, size):
    s = size * 2  # drawn at twice the size, then shrunk: smooth edges
    bg = rng.integers(40, 216, 3)
    img = Image.fromarray(np.clip(bg + rng.normal(0, 28, (s, s, 3)), 0, 255).astype(np.uint8), "RGB")
    mask = Image.new("L", (s, s), 0)
    d = ImageDraw.Draw(mask)
    r = s * rng.uniform(0.16, 0.32)
    cx, cy = rng.uniform(r, s - r), rng.uniform(r, s - r)
    if k == 0:
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
    elif k == 1:
        d.rectangle([cx - r * 0.85, cy - r * 0.85, cx + r * 0.85, cy + r * 0.85], fill=255)
    elif k == 2:
        d.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=255)
    elif k == 3:
        d.polygon([(cx, cy - r), (cx + r * 0.95, cy + r * 0.7), (cx - r * 0.95, cy + r * 0.7)], fill=255)
    else:
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
        d.ellipse([cx - r * 0.55, cy - r * 0.55, cx + r * 0.55, cy + r * 0.55], fill=0)
    mask = mask.rotate(rng.uniform(0, 360), center=(cx, cy))
    col = rng.integers(20, 236, 3)
    tex = np.clip(col + rng.normal(0, rng.uniform(10, 40), (s, s, 3)), 0, 255).astype(np.uint8)
    img.paste(Image.fromarray(tex, "RGB"), (0, 0), mask)
    light = np.linspace(rng.uniform(0.7, 1.0), rng.uniform(1.0, 1.3), s)[None, :, None]
    if rng.integers(0, 2):
        light = light.transpose(1, 0, 2)
    img = Image.fromarray(np.clip(np.asarray(img) * light, 0, 255).astype(np.uint8), "RGB")
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.5)))
    return np.asarray(img.resize((size, size), Image.BILINEAR))


def split(out, name, per_class, size, seed):
    rng = np.random.default_rng(seed)
    x, y = [], []
    for k, c in enumerate(CLASSES):
        os.makedirs("%s/%s/%s" % (out, name, c), exist_ok=True)
        for i in range(per_class):
            a = photo(rng, k, size)
            Image.fromarray(a, "RGB").save("%s/%s/%s/%05d.png" % (out, name, c, i))
            x.append(a)
            y.append(k)
    order = np.random.default_rng(5).permutation(len(x))
    np.savez("%s/%s.npz" % (out, name), x=np.stack(x)[order], y=np.array(y, np.uint8)[order])


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    out, n_train, n_test, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    split(out, "train", n_train, size, 1)
    split(out, "test", n_test, size, 2)


main()
