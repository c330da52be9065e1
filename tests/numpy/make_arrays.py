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

# zip64 as a writer of large files puts it in the central directory: the local header's offset
# 0xffffffff there, the real one in the zip64 extra field; right (zip64.npz), and 8 bytes short
# of 2^64 (zip64_wrap.npz), which wraps around to before the file's first byte
import struct
import zlib


def zip64_npz(offset):
    name = b"x.npy"  # uint8 (784,): 0, 1, .. 255, three times, then 16 zeros
    body = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + \
        b"{'descr': '|u1', 'fortran_order': False, 'shape': (784,), }".ljust(117) + b"\n" + bytes(range(256)) * 3 + bytes(16)
    crc = zlib.crc32(body)
    local = b"PK\3\4" + struct.pack("<HHHHHIIIHH", 20, 0, 0, 0, 0, crc, len(body), len(body), len(name), 0) + name
    extra = struct.pack("<HHQ", 1, 8, offset)
    central = b"PK\1\2" + struct.pack("<HHHHHHIIIHHHHHII", 45, 45, 0, 0, 0, 0, crc, len(body), len(body), len(name),
                                      len(extra), 0, 0, 0, 0, 0xffffffff) + name + extra
    at = len(local) + len(body)
    return local + body + central + b"PK\5\6" + struct.pack("<HHHHIIH", 0, 0, 1, 1, len(central), at, 0)


open(os.path.join(d, "zip64.npz"), "wb").write(zip64_npz(0))
open(os.path.join(d, "zip64_wrap.npz"), "wb").write(zip64_npz(2 ** 64 - 8))
