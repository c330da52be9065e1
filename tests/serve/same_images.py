#!/usr/bin/env python3
"""same_images.py DIR - the images tests/test_serve_same.sh sends down every path (ddl-train
--predict, the C predictor, ddl-serve, ddl_predict_proba): the files of the image tests
(tests/images/make_images.py: RGB, grey, RGBA and palette PNGs, JPEGs in grey, RGB and CMYK, PPM
and PGM) and PNGs written here by hand in every colour type and bit depth PNG has (grey 1, 2, 4,
8 and 16 bits, RGB 8 and 16, palette 1, 2, 4 and 8, grey + alpha 8 and 16, RGBA 8 and 16, and
Adam7), of several sizes (the models' 16x16, smaller, larger, not square). Each file is
DIR/img/NAME.EXT (make_images.py's work in DIR/src); DIR/list has their names in sorted order."""
import os
import struct
import subprocess
import sys
import zlib

import numpy as np

top_dir = sys.argv[1]
d = os.path.join(top_dir, "img")
os.makedirs(d, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(top_dir, "src")
subprocess.run([sys.executable, os.path.join(here, "..", "images", "make_images.py"), src], check=True,
               stdout=subprocess.DEVNULL)
names = []
for f in ["src.png", "src.jpg", "src.ppm", "gray.png", "gray.pgm", "gray.jpg", "rgba.png", "palette.png", "cmyk.jpg"]:
    os.link(os.path.join(src, f), os.path.join(d, "mi_" + f))
    names.append("mi_" + f)


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_rows(a, depth):
    """a: (H, W*channels) samples of depth bits -> the PNG's raw rows, each after filter byte 0."""
    out = b""
    for row in a:
        if depth == 16:
            data = row.astype(">u2").tobytes()
        elif depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:
            bits = "".join(format(int(v), "0%db" % depth) for v in row)
            bits += "0" * (-len(bits) % 8)
            data = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
        out += b"\0" + data
    return out


def png(path, w, h, ctype, depth, samples, palette=None, interlace=False):
    """samples: (H, W, channels) ints below 2^depth."""
    flat = samples.reshape(h, -1)
    if interlace:
        raw = b""
        for xs, ys, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                               (0, 1, 1, 2)):
            sub = samples[ys::dy, xs::dx]
            if sub.size:
                raw += pack_rows(sub.reshape(sub.shape[0], -1), depth)
    else:
        raw = pack_rows(flat, depth)
    body = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
    if palette is not None:
        body += chunk(b"PLTE", bytes(palette.astype(np.uint8).reshape(-1)))
    body += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    open(path, "wb").write(body)


rng = np.random.default_rng(11)
channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
cases = [  # colour type, bit depth, width, height, interlaced
    (0, 1, 16, 16, False), (0, 2, 23, 9, False), (0, 4, 40, 30, False), (0, 8, 16, 16, False),
    (0, 16, 33, 17, False), (2, 8, 16, 16, False), (2, 16, 64, 48, False), (3, 1, 16, 16, False),
    (3, 2, 12, 20, False), (3, 4, 31, 31, False), (3, 8, 100, 75, False), (4, 8, 16, 16, False),
    (4, 16, 20, 25, False), (6, 8, 16, 16, False), (6, 8, 7, 3, False), (6, 16, 48, 64, False),
    (2, 8, 37, 29, True), (6, 8, 200, 120, False),
]
for ctype, depth, w, h, inter in cases:
    top = (1 << depth) - 1
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 7 + y * 13) % (top + 1)
    s = np.stack([(base + k * (top // 3 + 1)) % (top + 1) for k in range(channels[ctype])], -1)
    s = (s + rng.integers(0, top // 8 + 1, s.shape)) % (top + 1)
    pal = rng.integers(0, 256, (1 << depth, 3)) if ctype == 3 else None
    name = "c%d_d%d_%dx%d%s.png" % (ctype, depth, w, h, "_adam7" if inter else "")
    png(os.path.join(d, name), w, h, ctype, depth, s, pal, inter)
    names.append(name)
open(os.path.join(top_dir, "list"), "w").write("\n".join(sorted(names)) + "\n")
