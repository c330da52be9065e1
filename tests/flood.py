#!/usr/bin/env python3
"""flood.py - strangers at ddl's listening ports, for tests/test_strangers.sh (python3 stdlib only).

  flood.py --proto tcp|zmq --count N --conc C --hold S [--job ID] HOST:PORT...
      opens N connections in all (at most C at once, each held up to S seconds or until the rank
      closes it), spread over the ports, in turn: silent; slow (one random byte every 50 ms);
      garbage (random bytes); half a handshake (tcp: the first 100 bytes of a HELLO; zmq: the
      ZMTP greeting's first 10 bytes); a whole HELLO of job ID as rank 1 of W (--world; zmq:
      after a ZMTP greeting and READY), then silence. Prints "flood: N connections, K accepted,
      R closed by the rank" at the end or when terminated.
  flood.py --probe --proto tcp|zmq --job ID --world W HOST:PORT
      a stranger that does not know the token: a HELLO of another job, then a HELLO of job ID
      claiming 7 ranks followed by a proof with a wrong MAC; for zmq also peers of the old ZMTP
      1.0 and 2.0. Prints what came back and exits 1 if any answer tells the job id, the world
      size W or a rank, or an old-protocol peer is not closed within 1 s (0 otherwise).
"""
import os
import selectors
import signal
import socket
import struct
import sys
import time

HS_BYTES = 216
MAGIC = {"tcp": b"DDLH", "zmq": b"DDLZ"}
HELLO, PROOF, OK, REFUSE = 1, 2, 3, 4


def hs(proto, typ, job, rank=1, world=7, version=1):
    """One handshake message (net_handshake.c's wire format)."""
    m = bytearray(HS_BYTES)
    m[0:4] = MAGIC[proto]
    struct.pack_into("<5I", m, 4, typ, version, rank, world, 0)
    j = job.encode()[:63]
    m[24:24 + len(j)] = j
    m[88:120] = os.urandom(32)
    return bytes(m)


def decode(b):
    typ, version, rank, world, reason = struct.unpack_from("<5I", b, 4)
    job = b[24:88].split(b"\0")[0].decode(errors="replace")
    return {"type": typ, "version": version, "rank": rank, "world": world, "reason": reason, "job": job}


# ---- ZMTP 3 with the NULL mechanism, as a DEALER ----

def zmtp_greeting():
    return b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" + b"\0" * 31


def zmtp_frame(body, command=False):
    flags = 0x04 if command else 0
    if len(body) > 255:
        return bytes([flags | 0x02]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def zmtp_ready():
    return zmtp_frame(b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER", command=True)


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += k
    return b


def zmtp_message(s):
    """The next message frame's body, skipping commands (READY, PING)."""
    while True:
        flags = recv_exact(s, 1)[0]
        size = struct.unpack(">Q", recv_exact(s, 8))[0] if flags & 0x02 else recv_exact(s, 1)[0]
        body = recv_exact(s, size)
        if not flags & 0x04:
            return body


# ---- probe ----

def probe(proto, addr, job, world):
    host, port = addr.rsplit(":", 1)
    leaks, answers, mechanisms = [], [], set()

    def exchange(msgs):
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        got = []
        try:
            if proto == "zmq":
                s.sendall(zmtp_greeting() + zmtp_ready())
                try:
                    mechanisms.add(recv_exact(s, 64)[12:32].rstrip(b"\0").decode(errors="replace"))
                except (EOFError, OSError):  # a CURVE server closes a NULL peer in the greeting, before its mechanism
                    mechanisms.add("closed in the greeting")
                    raise
            for m in msgs:
                s.sendall(zmtp_frame(m) if proto == "zmq" else m)
                r = zmtp_message(s) if proto == "zmq" else recv_exact(s, HS_BYTES)
                got.append(r)
                if len(r) != HS_BYTES or decode(r)["type"] != HELLO:
                    break
        except (EOFError, OSError) as e:
            got.append(("closed: %s" % e).encode())
        finally:
            s.close()
        return got

    def judge(what, r):
        if len(r) != HS_BYTES:
            answers.append("%s: %s" % (what, r.decode(errors="replace")))
            return
        d = decode(r)
        answers.append("%s: %s" % (what, d))
        if job.encode() in r and d["type"] != HELLO:  # a HELLO repeats the job id the stranger sent
            leaks.append("%s: the job id" % what)
        if d["type"] == REFUSE and (d["rank"] or d["world"] or d["job"]):
            leaks.append("%s: a refusal with rank %d world %d job '%s'" % (what, d["rank"], d["world"], d["job"]))
        if d["type"] == HELLO and d["world"] == world and world != 7:
            leaks.append("%s: the world size in its HELLO" % what)

    for r in exchange([hs(proto, HELLO, "not-" + job)]):
        judge("HELLO of another job", r)
    for r in exchange([hs(proto, HELLO, job), hs(proto, PROOF, job)]):
        judge("HELLO of job %s, 7 ranks, wrong proof" % job, r)
    for a in answers:
        print("probe: " + a)
    refusals = sum(1 for a in answers if "'type': 4" in a)
    for l in leaks:
        print("probe: LEAK: " + l)
    print("probe: %d refusals, %d leaks" % (refusals, len(leaks)))
    old_ok = True
    if proto == "zmq":
        for name, hello in OLD_ZMTP:
            ms = closed_after(host, int(port), hello, 4.0)
            print("probe: %s stranger: %s" % (name, "closed after %d ms" % ms if ms is not None else "still open after 4 s"))
            old_ok = old_ok and ms is not None and ms < 1000
    # A zmq job with a token speaks CURVE (transports/zmq_curve.c): a stranger of ZMTP's NULL
    # mechanism is closed before ddl's handshake, so it hears no refusal at all.
    curve = mechanisms == {"closed in the greeting"}
    if curve:
        print("probe: closed in ZeroMQ's greeting (the rank speaks CURVE), before any ddl message")
    want = 0 if curve else 2
    closed = all(": closed: " in a for a in answers) if curve else True
    return 0 if refusals == want and closed and not leaks and old_ok else 1


# Peers of ZMTP 1.0 and 2.0 (libzmq 2.x-3.x): libzmq 4.3 takes their first frame as a routing id
# and asserts (aborting the rank) if it cannot hand it on; the rank must close them at once.
# 1.0: an identity frame (length 1: flags only) then a message; 2.0: the signature, revision 1,
# socket type DEALER (5), an empty identity frame.
OLD_ZMTP = [("ZMTP 1.0", b"\x01\x00" + b"\x06\x00hello"),
            ("ZMTP 2.0", b"\xff" + b"\0" * 8 + b"\x7f" + b"\x01\x05" + b"\x00\x00")]


def closed_after(host, port, hello, limit):
    """Milliseconds until the peer closed the connection after hello, or None after limit s."""
    s = socket.create_connection((host.strip("[]"), port), timeout=limit)
    t0 = time.monotonic()
    try:
        s.sendall(hello)
        while time.monotonic() - t0 < limit:
            if not s.recv(4096):
                return int((time.monotonic() - t0) * 1000)
    except socket.timeout:
        return None
    except OSError:
        return int((time.monotonic() - t0) * 1000)
    finally:
        s.close()
    return None


# ---- flood ----

class Conn:
    def __init__(self, proto, target, mode, job, world, hold):
        self.mode, self.until = mode, time.monotonic() + hold
        self.out, self.slow, self.accepted = b"", 0, False
        host, port = target.rsplit(":", 1)
        self.s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.s.setblocking(False)
        self.s.connect_ex((host.strip("[]"), int(port)))
        if mode == 1:
            self.slow = 10 ** 9
        elif mode == 2:
            self.out = os.urandom(1024 + len(target) * 37 % 3000)
        elif mode == 3:
            self.out = zmtp_greeting()[:10] if proto == "zmq" else hs(proto, HELLO, job)[:100]
        elif mode == 4:
            m = hs(proto, HELLO, job, world=world)
            self.out = zmtp_greeting() + zmtp_ready() + zmtp_frame(m) if proto == "zmq" else m


stats = [0, 0, 0]  # opened, accepted, closed by the rank


def flood(proto, targets, count, conc, hold, job, world):
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    try:
        flood_loop(proto, targets, count, conc, hold, job, world)
    finally:
        print("flood: %d connections, %d accepted, %d closed by the rank" % tuple(stats))
    return 0


def flood_loop(proto, targets, count, conc, hold, job, world):
    sel = selectors.DefaultSelector()
    live, opened = {}, 0
    last_slow = 0.0
    while opened < count or live:
        while opened < count and len(live) < conc:
            try:
                c = Conn(proto, targets[opened % len(targets)], opened % 5, job, world, hold)
            except OSError:
                break
            live[c.s] = c
            sel.register(c.s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
            opened += 1
            stats[0] = opened
        now = time.monotonic()
        slow_tick = now - last_slow >= 0.05
        if slow_tick:
            last_slow = now
        for key, ev in sel.select(timeout=0.05):
            c = key.data
            gone = False
            if ev & selectors.EVENT_WRITE:
                if not c.accepted and c.s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    c.accepted = True
                    stats[1] += 1
                try:
                    if c.out:
                        c.out = c.out[c.s.send(c.out):]
                except OSError:
                    gone = True
                if not c.out and not gone:
                    sel.modify(c.s, selectors.EVENT_READ, c)
            if ev & selectors.EVENT_READ and not gone:
                try:
                    gone = not c.s.recv(4096)
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
            if gone:
                stats[2] += 1
                sel.unregister(c.s)
                c.s.close()
                del live[c.s]
        now = time.monotonic()
        for s, c in list(live.items()):
            if c.slow and c.accepted and slow_tick and now < c.until:
                try:
                    s.send(os.urandom(1))
                except OSError:
                    c.until = now
            if now >= c.until:
                sel.unregister(s)
                s.close()
                del live[s]


def main(argv):
    opts = {"--proto": "tcp", "--count": "1000", "--conc": "100", "--hold": "3", "--job": "x", "--world": "0"}
    targets, do_probe, k = [], False, 0
    while k < len(argv):
        a = argv[k]
        if a == "--probe":
            do_probe = True
        elif a in opts:
            k += 1
            opts[a] = argv[k]
        else:
            targets.append(a)
        k += 1
    if not targets:
        print(__doc__, file=sys.stderr)
        return 2
    if do_probe:
        return probe(opts["--proto"], targets[0], opts["--job"], int(opts["--world"]))
    return flood(opts["--proto"], targets, int(opts["--count"]), int(opts["--conc"]), float(opts["--hold"]),
                 opts["--job"], int(opts["--world"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
