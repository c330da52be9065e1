#!/usr/bin/env python3
"""pngs.py DIR - the PNG bodies test_serve_limits.sh sends, written by hand (zlib, no imaging
library), all of one 28x28 grey image whose pixels are also written as DIR/img.pgm:
  ok.png      one IDAT, as any encoder writes it
  split.png   the same stream cut into 100-byte IDAT chunks, with a tEXt chunk before them
  adam7.png   the same pixels interlaced (Adam7)
  bomb.png    the rows, then 512 MiB of zeros in the same deflate stream (~0.5 MB): libpng
              would inflate all of it after the last row
  ztxt.png    ok.png with a 512 MiB zTXt comment deflated into ~0.5 MB
  longchunk.png  IHDR, then a tEXt chunk that says it holds 1.5 GiB and ends after 200 bytes:
              libpng skips such a chunk 1 KiB at a time before it finds the end (6 s)
"""
import struct
import sys
import zlib

out = sys.argv[1]
W = H = 28
pix = [[(x * 7 + y * 3) % 256 for x in range(W)] for y in range(H)]


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(stream, interlace=0, extra=b"", split=0):
    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 0, 0, 0, interlace)) + extra
    parts = [stream[i:i + split] for i in range(0, len(stream), split)] if split else [stream]
    return head + b"".join(chunk(b"IDAT", p) for p in parts) + chunk(b"IEND", b"")


def zeros_deflated(prefix, mib):
    c = zlib.compressobj(9)
    s = c.compress(prefix)
    block = b"\0" * (1 << 20)
    for _ in range(mib):
        s += c.compress(block)
    return s + c.flush()


rows = b"".join(b"\0" + bytes(r) for r in pix)
adam7 = b""
for xs, ys, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
    for y in range(ys, H, dy):
        adam7 += b"\0" + bytes(pix[y][x] for x in range(xs, W, dx))
files = {
    "ok.png": png(zlib.compress(rows)),
    "split.png": png(zlib.compress(rows), extra=chunk(b"tEXt", b"Comment\0made by hand"), split=100),
    "adam7.png": png(zlib.compress(adam7), interlace=1),
    "bomb.png": png(zeros_deflated(rows, 512)),
    "ztxt.png": png(zlib.compress(rows), extra=chunk(b"zTXt", b"Comment\0\0" + zeros_deflated(b"", 512))),
    "longchunk.png": b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 0, 0, 0, 0))
    + struct.pack(">I", 0x60000000) + b"tEXt" + b"Comment\0" + b"x" * 200,
    "img.pgm": b"P5\n28 28\n255\n" + bytes(v for r in pix for v in r),
}
for name, data in files.items():
    open("%s/%s" % (out, name), "wb").write(data)
