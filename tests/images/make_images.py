"""make_images.py DIR - images for tests/test_images.c, and what PIL makes of them: every file
opened, converted to "L" or "RGB" and resized with Image.BILINEAR (antialiased), as Keras's
load_img and torchvision's loader do, written as raw (C, H, W) bytes next to it."""
import os
import sys

import numpy as np
from PIL import Image

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(3)
y, x = np.mgrid[0:100, 0:100]
rgb = np.stack([(x * 2.55), (y * 2.55), ((x + y) * 1.27)], -1) + rng.normal(0, 20, (100, 100, 3))
rgb = np.clip(rgb, 0, 255).astype(np.uint8)
src = Image.fromarray(rgb, "RGB")
src.save(os.path.join(d, "src.png"))
src.save(os.path.join(d, "src.jpg"), quality=90)
src.save(os.path.join(d, "src.ppm"))
src.convert("L").save(os.path.join(d, "gray.png"))
src.convert("L").save(os.path.join(d, "gray.pgm"))
src.convert("L").save(os.path.join(d, "gray.jpg"), quality=90)
rgba = np.concatenate([rgb, rng.integers(0, 256, (100, 100, 1), dtype=np.uint8)], -1)
Image.fromarray(rgba, "RGBA").save(os.path.join(d, "rgba.png"))
src.quantize(64).save(os.path.join(d, "palette.png"))

# references: NAME.MODE.WxH.raw
src.convert("CMYK").save(os.path.join(d, "cmyk.jpg"), quality=90)  # Adobe's inverted CMYK, as PIL writes it
for name in ["src.png", "src.jpg", "src.ppm", "gray.png", "gray.pgm", "gray.jpg", "rgba.png", "palette.png",
             "cmyk.jpg"]:
    for mode in ["L", "RGB"]:
        for w, h in [(28, 28), (64, 48), (130, 170), (100, 100), (7, 3)]:
            im = Image.open(os.path.join(d, name)).convert(mode).resize((w, h), Image.BILINEAR)
            a = np.asarray(im)
            a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
            open(os.path.join(d, "%s.%s.%dx%d.raw" % (name, mode, w, h)), "wb").write(a.tobytes())

# a folder of three classes, mixed formats; a text file and a hidden folder that are not data
for cls, n in [("b_kiwi", 3), ("a_apple", 4), ("c_guava", 2)]:
    os.makedirs(os.path.join(d, "fruits", cls))
    for i in range(n):
        im = Image.fromarray(np.roll(rgb, 7 * i + len(cls), axis=1), "RGB")
        ext = ["jpg", "png", "ppm", "JPEG"][i % 4]
        im.save(os.path.join(d, "fruits", cls, "%s_%d.%s" % (cls, i, ext)),
                format={"jpg": "JPEG", "JPEG": "JPEG", "png": "PNG", "ppm": "PPM"}[ext])
open(os.path.join(d, "fruits", "a_apple", "notes.txt"), "w").write("not an image\n")
os.makedirs(os.path.join(d, "fruits", ".cache"))

# bad files
jpg = open(os.path.join(d, "src.jpg"), "rb").read()
open(os.path.join(d, "cut.jpg"), "wb").write(jpg[: len(jpg) // 3])
open(os.path.join(d, "text.png"), "wb").write(b"hello, not a picture\n")
png = open(os.path.join(d, "src.png"), "rb").read()
huge = bytearray(png)
huge[16:24] = (100000).to_bytes(4, "big") + (100000).to_bytes(4, "big")  # IHDR width, height
import zlib
huge[29:33] = zlib.crc32(bytes(huge[12:29])).to_bytes(4, "big")  # the IHDR chunk's CRC
open(os.path.join(d, "huge.png"), "wb").write(bytes(huge))

# bombs: small files whose decoding would cost far more than their size
import struct


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# a 100 x 100 gray PNG whose deflate stream goes on for 64 MB of zeros past its rows: libpng
# inflates them all before it warns
z = zlib.compressobj(9)
idat = z.compress(b"\0" * (101 * 100)) + b"".join(z.compress(b"\0" * (1 << 20)) for _ in range(64)) + z.flush()
open(os.path.join(d, "trail.png"), "wb").write(
    b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100, 100, 8, 0, 0, 0, 0)) +
    b"".join(chunk(b"IDAT", idat[i:i + 65536]) for i in range(0, len(idat), 65536)) + chunk(b"IEND", b""))

# a 7 x 6 PNG whose tEXt chunk claims 1.6 GB, in a file of 100 bytes: libpng believed it (8 s)
open(os.path.join(d, "longtext.png"), "wb").write(
    b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 7, 6, 8, 0, 0, 0, 0)) +
    struct.pack(">I", 1643905027) + b"tEXtk\0v" + bytes(64))


def seg(marker, data):
    return b"\xff" + bytes([marker]) + struct.pack(">H", len(data) + 2) + data


def scans_jpeg(side, bands):
    """a gray progressive JPEG of side x side pixels, every coefficient 0, in 1 + 14 * len(bands)
    scans that libjpeg (and PIL) decode without a warning: the DC in one, then each AC band
    first at Al 13 and refined down to Al 0, each scan an EOB run over every block."""
    blocks = (side // 8) ** 2
    out = b"\xff\xd8" + seg(0xdb, b"\x00" + b"\x01" * 64)
    out += seg(0xc2, struct.pack(">BHHB", 8, side, side, 1) + b"\x01\x11\x00")
    out += seg(0xc4, b"\x00\x01" + b"\x00" * 15 + b"\x00")  # DC: category 0, code "0"
    out += seg(0xc4, b"\x10\x01" + b"\x00" * 15 + b"\xe0")  # AC: EOB14, code "0"

    def sos(ss, se, ah, al):
        return seg(0xda, bytes([1, 1, 0x00, ss, se, ah << 4 | al]))

    out += sos(0, 0, 0, 0) + b"\x00" * (blocks // 8)  # a 0 bit a block: DC difference 0
    bits = "0" * 15 * (blocks // 16384)  # EOB runs of 2^14 blocks: code "0", 14 bits of 0
    bits += "1" * (-len(bits) % 8)
    run = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)).replace(b"\xff", b"\xff\x00")
    for ss, se in bands:
        out += sos(ss, se, 0, 13) + run
        out += b"".join(sos(ss, se, al + 1, al) + run for al in range(12, -1, -1))
    return out + b"\xff\xd9"


# 4096 x 4096 in 113 scans: past the 64 that 2^30 pixels of scans allow an image of this size
open(os.path.join(d, "scans.jpg"), "wb").write(scans_jpeg(4096, [(k, k) for k in range(1, 9)]))
