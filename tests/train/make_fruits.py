"""make_fruits.py DIR TRAIN_PER_CLASS TEST_PER_CLASS [SIZE] - a small fruit-like data set nobody
tuned ddl for: DIR/{train,test}/{apple,guava,kiwi}/NNNN.jpg, RGB JPEG photos of one textured
shape each on a noisy background of random colour: apples round and red to orange with a stalk,
kiwis oval, brown and hairy, guavas pear-shaped, yellow-green and speckled; each at a random
place, size and angle, under random light. Deterministic (a fixed seed per split)."""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

out, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = int(sys.argv[4]) if len(sys.argv) > 4 else 64


def fruit(rng, kind):
    s = size * 2  # drawn at twice the size, then shrunk: smooth edges
    bg = rng.integers(60, 220, 3)
    img = np.clip(bg + rng.normal(0, 25, (s, s, 3)), 0, 255).astype(np.uint8)
    im = Image.fromarray(img, "RGB")
    d = ImageDraw.Draw(im)
    r = s * rng.uniform(0.22, 0.34)
    cx, cy = s / 2 + rng.uniform(-0.15, 0.15) * s, s / 2 + rng.uniform(-0.15, 0.15) * s
    if kind == "apple":
        col = (int(rng.integers(170, 240)), int(rng.integers(20, 110)), int(rng.integers(10, 50)))
        d.ellipse([cx - r, cy - r * 0.95, cx + r, cy + r * 0.95], fill=col)
        d.line([cx, cy - r * 0.9, cx + r * 0.15, cy - r * 1.3], fill=(70, 45, 20), width=max(2, int(r / 8)))
    elif kind == "kiwi":
        col = (int(rng.integers(100, 140)), int(rng.integers(75, 100)), int(rng.integers(40, 60)))
        a = rng.uniform(0, np.pi)
        box = [cx - r * 1.2, cy - r * 0.8, cx + r * 1.2, cy + r * 0.8]
        layer = Image.new("L", (s, s), 0)
        ImageDraw.Draw(layer).ellipse(box, fill=255)
        layer = layer.rotate(np.degrees(a), center=(cx, cy))
        hair = np.clip(np.array(col) + rng.normal(0, 30, (s, s, 3)), 0, 255).astype(np.uint8)
        im.paste(Image.fromarray(hair, "RGB"), (0, 0), layer)
    else:  # guava: a pear, yellow-green, speckled
        col = np.array([rng.integers(150, 200), rng.integers(190, 235), rng.integers(40, 90)])
        layer = Image.new("L", (s, s), 0)
        ld = ImageDraw.Draw(layer)
        ld.ellipse([cx - r, cy - r * 0.4, cx + r, cy + r * 1.2], fill=255)
        ld.ellipse([cx - r * 0.6, cy - r * 1.1, cx + r * 0.6, cy + r * 0.2], fill=255)
        layer = layer.rotate(rng.uniform(-40, 40), center=(cx, cy))
        skin = np.clip(col + rng.normal(0, 12, (s, s, 3)), 0, 255)
        dots = rng.random((s, s)) < 0.03
        skin[dots] *= 0.5
        im.paste(Image.fromarray(skin.astype(np.uint8), "RGB"), (0, 0), layer)
    im = im.filter(ImageFilter.GaussianBlur(0.6)).resize((size, size), Image.BILINEAR)
    light = rng.uniform(0.75, 1.25)
    return Image.fromarray(np.clip(np.asarray(im) * light, 0, 255).astype(np.uint8), "RGB")


for split, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
    rng = np.random.default_rng(seed)
    for kind in ("apple", "guava", "kiwi"):
        d = os.path.join(out, split, kind)
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            fruit(rng, kind).save(os.path.join(d, "%04d.jpg" % i), quality=int(rng.integers(70, 95)))
