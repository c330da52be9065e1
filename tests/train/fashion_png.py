"""fashion_png.py IDX_DIR OUT N_TRAIN N_TEST - the first N_TRAIN training and N_TEST test images of
Fashion-MNIST written out as PNG folders OUT/{train,test}/CLASS/NNNNN.png, as a user who has
photos (not IDX files) would have them. Class folders are named 0_tshirt ... 9_boot, so their
sorted order is the IDX labels' order."""
import gzip
import os
import sys

import numpy as np
from PIL import Image

names = ["0_tshirt", "1_trouser", "2_pullover", "3_dress", "4_coat", "5_sandal", "6_shirt", "7_sneaker", "8_bag",
         "9_boot"]


def idx(path):
    op = gzip.open if os.path.exists(path + ".gz") else open
    with op(path + ".gz" if op is gzip.open else path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


src, out = sys.argv[1], sys.argv[2]
for split, prefix, n in (("train", "train", int(sys.argv[3])), ("test", "t10k", int(sys.argv[4]))):
    images = idx(os.path.join(src, prefix + "-images-idx3-ubyte"))
    labels = idx(os.path.join(src, prefix + "-labels-idx1-ubyte"))
    for name in names:
        os.makedirs(os.path.join(out, split, name), exist_ok=True)
    for i in range(n):
        Image.fromarray(images[i], "L").save(os.path.join(out, split, names[labels[i]], "%05d.png" % i))
