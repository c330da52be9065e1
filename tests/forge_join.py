#!/usr/bin/env python3
"""forge_join.py - a local stranger who asks an elastic job to admit a phantom, for
tests/test_forged_join.sh (python3 stdlib only).

  forge_join.py --job ID --slot S [--token T] [--seconds N] PORT...
      sends, every 20 ms for N seconds (default 30) or until terminated, a JOIN note for slot S
      to each heartbeat port on 127.0.0.1, MAC'd under the join key a job without a token had:
      HMAC-SHA256(T, "ddl elastic join 1 " ID) with T empty unless given (src/comm/heartbeat.c).
      Admissions that come back are counted. Prints "forge: N notes, A admissions" at the end.
  forge_join.py --ports N
      prints N UDP ports on 127.0.0.1 free right now, comma-separated.
"""
import hashlib
import hmac
import os
import signal
import socket
import struct
import sys
import time

MAGIC, JOIN, ADMIT = 0x48424444, 5, 6


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(str(s.getsockname()[1]))
    print(",".join(ports))


def note(key, slot, nonce, counter):
    head = struct.pack("<IIIIQQ", MAGIC, JOIN, slot, 0xFFFFFFFF, nonce, counter)
    body = struct.pack("<QII", int(time.time() * 1000), 0, 0) + bytes(32)
    p = head + body
    return p + hmac.new(key, p, hashlib.sha256).digest()[:16]


def main(argv):
    if argv[:1] == ["--ports"]:
        free_ports(int(argv[1]))
        return 0
    job, slot, token, seconds, ports = "ddl", 2, "", 30.0, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--job", "--slot", "--token", "--seconds"):
            v = argv[i + 1]
            i += 2
            if a == "--job":
                job = v
            elif a == "--slot":
                slot = int(v)
            elif a == "--token":
                token = v
            else:
                seconds = float(v)
            continue
        ports.append(int(a))
        i += 1
    key = hmac.new(token.encode(), ("ddl elastic join 1 " + job).encode(), hashlib.sha256).digest()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    nonce = int.from_bytes(os.urandom(8), "little")
    sent = admitted = counter = 0
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    end = time.time() + seconds
    while not stop[0] and time.time() < end:
        counter += 1
        p = note(key, slot, nonce, counter)
        for port in ports:
            try:
                s.sendto(p, ("127.0.0.1", port))
                sent += 1
            except OSError:
                pass
        time.sleep(0.02)
        try:
            while True:
                d = s.recv(200)
                if len(d) >= 8 and struct.unpack("<II", d[:8]) == (MAGIC, ADMIT):
                    admitted += 1
        except (BlockingIOError, OSError):
            pass
    print("forge: %d notes, %d admissions" % (sent, admitted), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
