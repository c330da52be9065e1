#!/usr/bin/env python3
"""events.py FILE TAG=V1,V2,... [TAG=...]... - a TensorBoard event file of scalars, written by hand
(TFRecord framing with masked CRC-32C, the Event protobuf): value i of each TAG at step i + 1,
or at STEP when written STEP:V. Records follow the arguments' order, and a TAG may come again
(train/loss=10:2,20:1.8 test/loss=1:1.9 train/loss=30:1.5 ...: per-step and per-epoch scalars
interleaved as training writes them). A value may be nan, inf or -inf (as a diverged run logs
them). For tests of the readers."""
import struct
import sys
import time


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def record(event):
    head = struct.pack("<Q", len(event))
    return head + struct.pack("<I", masked(head)) + event + struct.pack("<I", masked(event))


def event(step, tag=None, value=None, version=None):
    e = field(1, 1, struct.pack("<d", time.time())) + field(2, 0, varint(step))
    if version:
        return e + field(3, 2, version.encode())
    val = field(1, 2, tag.encode()) + field(2, 5, struct.pack("<f", value))
    return e + field(5, 2, field(1, 2, val))


out = open(sys.argv[1], "wb")
out.write(record(event(0, version="brain.Event:2")))
for arg in sys.argv[2:]:
    tag, _, vals = arg.partition("=")
    for i, v in enumerate(vals.split(",")):
        step, _, value = v.rpartition(":")
        out.write(record(event(int(step) if step else i + 1, tag, float(value))))
out.close()
