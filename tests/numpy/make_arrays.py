"""make_arrays.py DIR - the arrays tests/test_numpy.c reads, written by numpy itself (np.save,
np.savez, np.savez_compressed), as a Keras or PyTorch user would write them."""
import os
import sys

import numpy as np

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(7)
save = lambda name, a: np.save(os.path.join(d, name), a)

# pixels i % 256, in three layouts of the same images (N=5, C=3, H=4, W=6)
chw = (np.arange(5 * 3 * 4 * 6) % 256).astype(np.uint8).reshape(5, 3, 4, 6)
save("nchw_u8.npy", chw)
save("nhwc_u8.npy", np.ascontiguousarray(chw.transpose(0, 2, 3, 1)))
save("nhw_u8.npy", chw[:, 0])
save("nchw_f32_unit.npy", chw.astype(np.float32) / 255.0)
save("nhwc_f64_255.npy", np.ascontiguousarray(chw.transpose(0, 2, 3, 1)).astype(np.float64))
save("labels_i64.npy", np.array([0, 3, 1, 9, 2], dtype=np.int64))
save("labels_u8.npy", np.array([4, 3, 1, 0, 2], dtype=np.uint8))
save("labels_i32_big.npy", np.array([0, 3, 1, 999, 2], dtype=np.int32))
save("labels_i32_huge.npy", np.array([0, 3, 1, 70000, 2], dtype=np.int32))
inf = (chw.astype(np.float32) / 255.0)
inf[2, 1, 0, 0] = np.inf
save("inf_f32.npy", inf)
save("labels_f32.npy", np.array([0, 3, 1, 9, 2], dtype=np.float32))
save("labels_4.npy", np.array([0, 1, 2, 3], dtype=np.int64))
masks = rng.random((5, 4, 6, 1)).astype(np.float32)
save("masks_f32.npy", masks)
save("masks_expected.npy", (masks[..., 0] >= 0.5).astype(np.uint8))
save("masks_wrong.npy", masks[:, :3])
save("normalised_f32.npy", (chw.astype(np.float32) - 128.0) / 64.0)
save("rgba_u8.npy", np.zeros((5, 4, 6, 4), dtype=np.uint8))
save("fortran.npy", np.asfortranarray(chw[:, 0]))
save("big_endian.npy", chw.astype(">f4"))
save("complex.npy", np.zeros((2, 2), dtype=np.complex64))

# the same training set as .npz: stored and deflated (zip64 fields as numpy writes them)
x = rng.integers(0, 256, (300, 28, 28), dtype=np.uint8)
x[:, :14] = 0  # compressible, so that deflate really works
y = rng.integers(0, 10, 300).astype(np.int64)
save("x.npy", x)
save("y.npy", y)
np.savez(os.path.join(d, "xy.npz"), x_train=x, y_train=y)
np.savez_compressed(os.path.join(d, "xy_compressed.npz"), x_train=x, y_train=y)
np.savez_compressed(os.path.join(d, "one.npz"), x)

# damaged copies
raw = open(os.path.join(d, "xy_compressed.npz"), "rb").read()
i = raw.find(b"x_train.npy") + 200
open(os.path.join(d, "flipped.npz"), "wb").write(raw[:i] + bytes([raw[i] ^ 0x55]) + raw[i + 1:])
open(os.path.join(d, "cut.npz"), "wb").write(raw[: len(raw) // 2])
npy = open(os.path.join(d, "x.npy"), "rb").read()
open(os.path.join(d, "short.npy"), "wb").write(npy[:-10])
open(os.path.join(d, "not_npy.npy"), "wb").write(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
