"""make_corpus.py - the seed corpora of the data fuzzers (tests/fuzz/corpus/fuzz_X/), small real
files as PIL, numpy, gzip and ddl itself write them, each behind the mode byte its fuzzer reads
first. Run from the repository's root with Debian's python3 (python3-pil, python3-numpy); the
files it writes are committed, so that `make fuzz` starts from them. Run again, it writes the
same bytes but for the times in np.savez's zip headers."""
import gzip
import io
import os
import struct
import sys
import zipfile
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = np.random.default_rng(44)


def put(fuzzer, name, data):
    d = os.path.join(ROOT, fuzzer)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data)


# ---- fuzz_image: a mode byte (bit 0: 3 channels; bits 1-6: the size), then one image file ----

def pil(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


rgb = Image.fromarray(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8), "RGB")
gray = rgb.convert("L")
images = {
    "png_gray": pil(gray, "PNG"),
    "png_rgb": pil(rgb, "PNG"),
    "png_rgba": pil(rgb.convert("RGBA"), "PNG"),
    "png_la": pil(gray.convert("LA"), "PNG"),
    "png_palette": pil(rgb.quantize(4), "PNG"),
    "png_palette_trns": pil(rgb.quantize(4), "PNG", transparency=1),
    "png_1bit": pil(gray.convert("1"), "PNG"),
    "png_16bit": pil(Image.fromarray(np.arange(42, dtype=np.uint16).reshape(6, 7) * 1500), "PNG"),
    "jpg_gray": pil(gray, "JPEG", quality=80),
    "jpg_rgb_420": pil(rgb, "JPEG", quality=80),
    "jpg_rgb_444": pil(rgb, "JPEG", quality=80, subsampling=0),
    "jpg_progressive": pil(rgb.resize((17, 9)), "JPEG", quality=80, progressive=True),
    "jpg_optimized": pil(rgb, "JPEG", quality=60, optimize=True),
    "jpg_cmyk": pil(rgb.convert("CMYK"), "JPEG", quality=80),
    "pgm": pil(gray, "PPM"),
    "ppm": pil(rgb, "PPM"),
}
# an interlaced (Adam7) gray PNG, which PIL does not write: each pass's rows, filter byte 0
w, h = 7, 6
px = np.asarray(gray)
passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
raw = b""
for x0, y0, dx, dy in passes:
    for y in range(y0, h, dy):
        row = bytes(px[y, x0::dx])
        if row:
            raw += b"\0" + row
images["png_interlaced"] = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 1)) +
                            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
# a PNG with text, gamma and a colour profile before its pixels, and its IDAT cut in two
body = zlib.compress(b"".join(b"\0" + bytes(px[y]) for y in range(h)))
images["png_chunks"] = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                        chunk(b"gAMA", struct.pack(">I", 45455)) + chunk(b"tEXt", b"k\0v") +
                        chunk(b"zTXt", b"k\0\0" + zlib.compress(b"text")) +
                        chunk(b"iCCP", b"p\0\0" + zlib.compress(bytes(128))) +
                        chunk(b"IDAT", body[:10]) + chunk(b"IDAT", body[10:]) + chunk(b"IEND", b""))
# a JPEG with restart markers every MCU (PIL passes restart_marker_blocks to libjpeg)
images["jpg_restart"] = pil(rgb.resize((24, 16)), "JPEG", quality=80, restart_marker_blocks=1)
for i, (name, data) in enumerate(sorted(images.items())):
    put("fuzz_image", "seed_" + name, bytes([(2 * (3 + i % 20)) | (i & 1)]) + data)


# ---- fuzz_npy: mode byte even: one file (bit 1: a .npz, member x); odd: a data set of two files,
# the second starting at 3 + the little-endian u16 after the mode byte ----

def npy(a, version=None):
    b = io.BytesIO()
    if version:
        np.lib.format.write_array(b, a, version=version)
    else:
        np.save(b, a)
    return b.getvalue()


def npz(compressed, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def zip64_npz(member):
    """member as x.npy in a zip whose central directory keeps the local offset in a zip64
    extra field (0xffffffff in its own place), as writers of large files do"""
    crc, name = zlib.crc32(member), b"x.npy"
    local = b"PK\3\4" + struct.pack("<HHHHHIIIHH", 20, 0, 0, 0, 0, crc, len(member), len(member), len(name), 0) + name
    extra = struct.pack("<HHQ", 1, 8, 0)
    central = b"PK\1\2" + struct.pack("<HHHHHHIIIHHHHHII", 45, 45, 0, 0, 0, 0, crc, len(member), len(member),
                                      len(name), len(extra), 0, 0, 0, 0, 0xffffffff) + name + extra
    return local + member + central + b"PK\5\6" + struct.pack("<HHHHIIH", 0, 0, 1, 1, len(central),
                                                             len(local) + len(member), 0)


def zip64_sizes_npz(member):
    """member as x.npy with every size and offset of the central entry in the zip64 field, as
    Python's zipfile writes with force_zip64, and a zip64 end of central directory"""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        with z.open("x.npy", "w", force_zip64=True) as f:
            f.write(member)
    return b.getvalue()


imgs = rng.integers(0, 256, (4, 5, 6), dtype=np.uint8)
labels = np.array([0, 2, 1, 2], dtype=np.int64)
one = {
    "u1": npy(imgs), "f4_nchw": npy(imgs[:, None].astype(np.float32) / 255), "f8": npy(imgs.astype(np.float64)),
    "i1": npy(imgs.astype(np.int8)), "b1": npy(imgs > 128), "i4": npy(labels.astype(np.int32)),
    "i8": npy(labels), "scalar": npy(np.float32(1.5)), "empty": npy(np.zeros((0, 3), np.uint8)),
    "v2": npy(imgs, (2, 0)), "v3": npy(imgs, (3, 0)), "fortran": npy(np.asfortranarray(imgs[0])),
    "big_endian": npy(imgs.astype(">f4")),
}
for name, data in sorted(one.items()):
    put("fuzz_npy", "seed_npy_" + name, b"\0" + data)
member = npy(imgs)
for name, data in [("stored", npz(False, x=imgs)), ("deflated", npz(True, x=imgs, y=labels)),
                   ("zip64_offset", zip64_npz(member)), ("zip64_sizes", zip64_sizes_npz(member))]:
    put("fuzz_npy", "seed_npz_" + name, b"\2" + data)
for name, (x, y) in sorted({"labels": (npy(imgs), npy(labels)), "nchw_f4": (one["f4_nchw"], npy(labels)),
                            "masks": (npy(imgs), npy((imgs > 100).astype(np.uint8)))}.items()):
    put("fuzz_npy", "seed_set_" + name, b"\1" + struct.pack("<H", len(x)) + x + y)


# ---- fuzz_idx: mode byte even: one IDX file (raw, or gzip as its first bytes say); odd: an
# MNIST pair, the labels starting at 3 + the little-endian u16 after the mode byte ----

def idx(a, code):
    return bytes([0, 0, code, a.ndim]) + b"".join(struct.pack(">I", d) for d in a.shape) + \
        a.astype(a.dtype.newbyteorder(">")).tobytes()


def gz(b):
    return gzip.compress(b, mtime=0)


images3 = rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)
labels3 = np.array([7, 0, 9], dtype=np.uint8)
for name, data in [("u8", idx(images3, 8)), ("i8", idx(images3.astype(np.int8), 9)),
                   ("i16", idx(images3.astype(np.int16), 11)), ("i32", idx(labels3.astype(np.int32), 12)),
                   ("f32", idx(images3.astype(np.float32), 13)), ("f64", idx(labels3.astype(np.float64), 14)),
                   ("labels", idx(labels3, 8)), ("gzip", gz(idx(images3, 8))),
                   ("gzip_two_members", gz(idx(images3, 8)[:9]) + gz(idx(images3, 8)[9:]))]:
    put("fuzz_idx", "seed_" + name, b"\0" + data)
for name, (x, y) in [("pair", (idx(images3, 8), idx(labels3, 8))),
                     ("pair_gzip", (gz(idx(images3, 8)), gz(idx(labels3, 8))))]:
    put("fuzz_idx", "seed_" + name, b"\1" + struct.pack("<H", len(x)) + x + y)


# ---- fuzz_cache: a mode byte (bit 0: CRCs left as they are; bit 1: a key other than the
# stored one), then a data cache as ddl_dataset_save_cache writes it ----

def cache(key, imgs, targets, th, tw, n_classes, names):
    n, c, h, w = imgs.shape
    tb = 2 if n_classes > 256 else 1
    names_b = b"".join(s.encode() + b"\0" for s in names)
    payload = key + names_b + imgs.tobytes() + targets.astype("<u2" if tb == 2 else "u1").tobytes()
    head = b"DDLDSET\0" + struct.pack("<10I", 1, n, c, h, w, th, tw, n_classes, len(key), len(names_b))
    head += struct.pack("<QI", len(payload), zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


small = rng.integers(0, 256, (3, 1, 2, 2), dtype=np.uint8)
for name, data in [("classes", cache(b"folder /x", small, np.array([0, 1, 2]), 1, 1, 3, ["a", "bb", "c"])),
                   ("no_names", cache(b"k", small, np.array([1, 0, 1]), 1, 1, 2, [])),
                   ("masks", cache(b"k", small, (small[:, 0] > 99).astype(np.uint8), 2, 2, 2, [])),
                   ("wide", cache(b"k", small, np.array([0, 299, 300]), 1, 1, 301, [])),
                   ("rgb", cache(b"rgb", rng.integers(0, 256, (2, 3, 2, 1), dtype=np.uint8), np.array([0, 1]), 1, 1,
                                 2, ["x", "y"]))]:
    put("fuzz_cache", "seed_" + name, b"\0" + data)


# ---- fuzz_folder: a mode byte (bit 0: 3 channels; bit 1: skip_bad; bits 2-4: the size), then
# entries, each: a byte (bits 0-1: the class folder c0..c3; bits 2-4: the kind: 0 to 4 an
# image file .png .jpg .jpeg .pgm .ppm, 5 a .txt file, 6 a FIFO named .png, 7 a directory
# named .jpg), a u16 little-endian length, and that many bytes of the file ----

def entry(cls, kind, data=b""):
    return bytes([cls | kind << 2]) + struct.pack("<H", len(data)) + data


tiny = {k: images[k] for k in ("png_gray", "jpg_rgb_420", "pgm", "ppm", "png_palette")}
put("fuzz_folder", "seed_two_classes", b"\x03" + entry(0, 0, tiny["png_gray"]) + entry(0, 1, tiny["jpg_rgb_420"]) +
    entry(1, 3, tiny["pgm"]) + entry(1, 4, tiny["ppm"]))
put("fuzz_folder", "seed_skip_bad", b"\x06" + entry(0, 0, tiny["png_palette"]) + entry(0, 0, b"not an image") +
    entry(1, 2, tiny["jpg_rgb_420"][:40]) + entry(1, 3, tiny["pgm"]) + entry(2, 5, b"notes"))
put("fuzz_folder", "seed_fifo_dir", b"\x02" + entry(0, 0, tiny["png_gray"]) + entry(0, 6) + entry(1, 7) +
    entry(1, 4, tiny["ppm"]))
put("fuzz_folder", "seed_empty_class", b"\x01" + entry(0, 0, tiny["png_gray"]) + entry(2, 5, b"x"))
print("corpora written under", ROOT, file=sys.stderr)
