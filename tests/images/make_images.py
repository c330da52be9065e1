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
for name in ["src.png", "src.jpg", "src.ppm", "gray.png", "gray.pgm", "gray.jpg", "rgba.png", "palette.png"]:
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
open(os.path.join(d, "cmyk.jpg"), "wb").write(open(os.path.join(d, "src.jpg"), "rb").read())
src.convert("CMYK").save(os.path.join(d, "cmyk.jpg"), quality=90)
