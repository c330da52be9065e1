#!/usr/bin/env python3
"""slow_join.py - a real rank whose proof is slow, among strangers who know the job id, for
tests/test_slow_join.sh (python3 stdlib only; the wire helpers are flood.py's).

  DDL_TOKEN=T slow_join.py --proto tcp|zmq --job ID --world W --proof-ms D --strangers N
                           --stranger-from ADDR [--sources K] [--settle-ms S | --crowd-after]
                           [--deadline-s S] HOST:PORT

N strangers connect from ADDR (a loopback address such as 127.0.0.2: a host of their own), or
spread over the K addresses from ADDR on, and each keeps a HELLO of job ID (rank 1 of W)
waiting at HOST:PORT all the time: refused or closed, it greets again at once; none ever
proves. After S ms (default 1000), or with --crowd-after before the crowd comes, rank 1 of the
job greets from 127.0.0.1 as ddl's transports do: a HELLO, then the PROOF of the token in
DDL_TOKEN (empty with DDL_INSECURE=1: a job without a token), but D ms after the rank's HELLO came (a slow machine or a long way off); with
--crowd-after the crowd starts as that HELLO comes. Pushed out (refused as silent, or closed)
or turned away, rank 1 greets again as ddl does. Prints one line "join: ..." with how long it
took, how often it greeted, how often it was pushed out while its proof was on its way and how
often turned away; exits 0 once the rank accepted its proof (an OK whose MAC shows that the rank
knows the token too), 1 if not before the deadline (default 10 s), 2 if refused for another
reason.
"""
import hashlib
import hmac
import os
import selectors
import socket
import struct
import sys
import threading
import time

from flood import HS_BYTES, MAGIC, HELLO, PROOF, OK, REFUSE, decode, zmtp_greeting, zmtp_ready, zmtp_frame

LABEL = {"tcp": b"ddl-v1", "zmq": b"ddl-zmq-v1"}
R_SILENT = 8


def message(proto, typ, job, rank, world, nonce=b"", mac=b"", addr=b""):
    """One handshake message (net_handshake.c's wire format) with the given nonce, MAC and address."""
    m = bytearray(HS_BYTES)
    m[0:4] = MAGIC[proto]
    struct.pack_into("<5I", m, 4, typ, 1, rank, world, 0)
    j = job.encode()[:63]
    m[24:24 + len(j)] = j
    m[88:88 + len(nonce)] = nonce
    m[120:120 + len(mac)] = mac
    m[152:152 + len(addr)] = addr
    return bytes(m)


def proof_mac(proto, token, job, nonce_c, nonce_a, rank_c, rank_a, side):
    """net_handshake.c's mac(): HMAC-SHA256(token, label | len job | job | nonces | ranks | side)."""
    j = job.encode()
    text = LABEL[proto] + struct.pack("<I", len(j)) + j + nonce_c + nonce_a + struct.pack("<II", rank_c, rank_a) + side
    return hmac.new(token, text, hashlib.sha256).digest()


class Frames:
    """Handshake messages out of a byte stream: raw (tcp) or ZMTP 3 after the greeting (zmq)."""

    def __init__(self, proto):
        self.proto, self.buf, self.greeted = proto, b"", proto == "tcp"

    def feed(self, data):
        self.buf += data
        out = []
        while True:
            if not self.greeted:
                if len(self.buf) < 64:
                    return out
                self.buf, self.greeted = self.buf[64:], True
            if self.proto == "tcp":
                if len(self.buf) < HS_BYTES:
                    return out
                out.append(self.buf[:HS_BYTES])
                self.buf = self.buf[HS_BYTES:]
                continue
            if len(self.buf) < 2:
                return out
            flags = self.buf[0]
            head = 9 if flags & 0x02 else 2
            if len(self.buf) < head:
                return out
            size = struct.unpack(">Q", self.buf[1:9])[0] if flags & 0x02 else self.buf[1]
            if len(self.buf) < head + size:
                return out
            body, self.buf = self.buf[head:head + size], self.buf[head + size:]
            if not flags & 0x04 and len(body) == HS_BYTES:
                out.append(body)


def opening(proto):
    return zmtp_greeting() + zmtp_ready() if proto == "zmq" else b""


def wrap(proto, m):
    return zmtp_frame(m) if proto == "zmq" else m


# ---- strangers ----

class Stranger:
    def __init__(self, crowd, src):
        self.c, self.src = crowd, src
        self.s = None
        self.start()

    def start(self):
        c = self.c
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.bind((self.src, 0))
        self.s.setblocking(False)
        self.s.connect_ex(c.target)
        self.frames = Frames(c.proto)
        self.out, self.hello_due = opening(c.proto), True
        if c.proto == "tcp":
            self.greet()
        c.sel.register(self.s, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    def greet(self):
        """Queue a HELLO (zmq: only once the rank's ZMTP greeting came: a HELLO sent along with
        our greeting got the connection closed)."""
        c = self.c
        self.out += wrap(c.proto, message(c.proto, HELLO, c.job, 1, c.world, os.urandom(32)))
        self.hello_due = False
        c.hellos += 1

    def restart(self):
        self.c.sel.unregister(self.s)
        self.s.close()
        self.start()

    def event(self, ev):
        c = self.c
        try:
            if ev & selectors.EVENT_WRITE and self.out:
                self.out = self.out[self.s.send(self.out):]
            if ev & selectors.EVENT_READ:
                data = self.s.recv(4096)
                if not data:
                    return self.restart()
                for m in self.frames.feed(data):
                    if decode(m)["type"] == REFUSE:  # tcp: the rank closes next; zmq: greet again
                        if c.proto == "tcp":
                            return self.restart()
                        self.hello_due = True
                if self.frames.greeted and self.hello_due:
                    self.greet()
        except OSError:
            return self.restart()
        c.sel.modify(self.s, selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0), self)


class Crowd:
    def __init__(self, proto, target, src, sources, job, world, n):
        self.proto, self.target, self.job, self.world = proto, target, job, world
        self.sel, self.hellos, self.stop = selectors.DefaultSelector(), 0, False
        base = struct.unpack(">I", socket.inet_aton(src))[0]
        self.members = [Stranger(self, socket.inet_ntoa(struct.pack(">I", base + i % sources))) for i in range(n)]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            for key, ev in self.sel.select(timeout=0.05):
                key.data.event(ev)
            time.sleep(0.001)  # a persistent crowd, not a busy loop


# ---- the real rank ----

def recv_message(s, frames, deadline):
    """The next handshake message on s, or None when it closed or the deadline passed."""
    pending = frames.feed(b"")
    while not pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            data = s.recv(4096)
        except (socket.timeout, OSError):
            return None
        if not data:
            return None
        pending = frames.feed(data)
    m = pending.pop(0)
    frames.buf = b"".join(wrap(frames.proto, p) for p in pending) + frames.buf  # keep the rest
    return m


def greeted(s, frames, deadline):
    """zmq: the rank's ZMTP greeting came (True), or s closed first (False); tcp: True."""
    while not frames.greeted:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = s.recv(64 - len(frames.buf))
        except OSError:
            return False
        if not data:
            return False
        frames.feed(data)
    return True


def join(proto, target, job, world, token, proof_ms, deadline, answered=None):
    """Rank 1's side of the handshake, again and again as ddl's does: (ok, greetings, pushed, busy).
    answered() is called once, when the rank first answers our HELLO with its own."""
    greetings = pushed = busy = 0
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            s.connect(target)
            s.sendall(opening(proto))
        except OSError:
            s.close()
            time.sleep(0.05)
            continue
        frames = Frames(proto)
        if not greeted(s, frames, deadline):
            s.close()
            time.sleep(0.05)
            continue
        while time.monotonic() < deadline:
            greetings += 1
            nonce_c = os.urandom(32)
            try:
                s.sendall(wrap(proto, message(proto, HELLO, job, 1, world, nonce_c, addr=b"127.0.0.1:9")))
            except OSError:
                break
            m = recv_message(s, frames, deadline)
            if m is None:
                break  # closed unanswered: dial again
            d = decode(m)
            if d["type"] == REFUSE and d["reason"] == R_SILENT:
                busy += 1  # every slot taken: tcp closes, zmq says greet again
                if proto == "tcp":
                    break
                time.sleep(0.05)
                continue
            if d["type"] != HELLO:
                print("join: refused: %s" % d)
                sys.exit(2)
            if answered:
                answered()
                answered = None
            time.sleep(proof_ms / 1000.0)  # the slow part
            nonce_a = m[88:120]
            mac = proof_mac(proto, token, job, nonce_c, nonce_a, 1, 0, b"c")
            try:
                s.sendall(wrap(proto, message(proto, PROOF, job, 1, world, mac=mac)))
            except OSError:
                pushed += 1
                break
            m = recv_message(s, frames, deadline)
            d = decode(m) if m is not None else None
            if d and d["type"] == OK:
                good = hmac.compare_digest(m[120:152], proof_mac(proto, token, job, nonce_c, nonce_a, 1, 0, b"a"))
                s.close()
                if not good:
                    print("join: the OK did not prove the token")
                    sys.exit(2)
                return True, greetings, pushed, busy
            if d and not (d["type"] == REFUSE and d["reason"] == R_SILENT):
                print("join: refused after the proof: %s" % d)
                sys.exit(2)
            pushed += 1  # our slot went to someone else while the proof was on its way
            if m is None or proto == "tcp":
                break
            time.sleep(0.05)
        s.close()
        time.sleep(0.05)  # and dial again, as ddl does
    return False, greetings, pushed, busy


def main(argv):
    opts = {"--proto": "tcp", "--job": "x", "--world": "2", "--proof-ms": "150", "--strangers": "60",
            "--stranger-from": "127.0.0.2", "--sources": "1", "--settle-ms": "1000", "--deadline-s": "10"}
    targets, crowd_after, k = [], False, 0
    while k < len(argv):
        if argv[k] in opts:
            opts[argv[k]] = argv[k + 1]
            k += 2
        elif argv[k] == "--crowd-after":
            crowd_after = True
            k += 1
        else:
            targets.append(argv[k])
            k += 1
    token = os.environ.get("DDL_TOKEN", "").encode()
    if len(targets) != 1 or (not token and os.environ.get("DDL_INSECURE") != "1"):
        print(__doc__, file=sys.stderr)
        return 2
    host, port = targets[0].rsplit(":", 1)
    target = (host, int(port))
    proto, job, world = opts["--proto"], opts["--job"], int(opts["--world"])
    crowd = []

    def gather():
        crowd.append(Crowd(proto, target, opts["--stranger-from"], int(opts["--sources"]), job, world,
                           int(opts["--strangers"])))

    if not crowd_after:
        gather()
        time.sleep(int(opts["--settle-ms"]) / 1000.0)
    t0 = time.monotonic()
    ok, greetings, pushed, busy = join(proto, target, job, world, token, int(opts["--proof-ms"]),
                                       t0 + float(opts["--deadline-s"]), gather if crowd_after else None)
    dt = int((time.monotonic() - t0) * 1000)
    for c in crowd:
        c.stop = True
        c.thread.join()
    print("join: rank 1 (proof %s ms late) %s after %d ms: %d greetings, pushed out %d times while proving, "
          "turned away %d times; %d strangers from %s addresses sent %d HELLOs" %
          (opts["--proof-ms"], "joined" if ok else "did not join", dt, greetings, pushed, busy,
           int(opts["--strangers"]), opts["--sources"], sum(c.hellos for c in crowd)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
