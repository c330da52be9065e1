#!/usr/bin/env python3
"""attack.py - what a hostile or broken client does to ddl-serve, for tests/test_serve.sh
(python3 stdlib only). Prints one line per check, "PASS: what" or "FAIL: what (why)".

  attack.py PORT MODEL BODY_FILE [BODY_TIMEOUT IDLE_TIMEOUT]
      BODY_FILE: a valid :predict body for MODEL; the timeouts: ddl-serve's --body-timeout and
      --idle-timeout, in seconds (default 10 and 15, ddl-serve's own defaults)

Checks, in this order:
  huge body declared (Content-Length 100 MB): 413 with a JSON error, before the body is sent
  huge body undeclared (chunked, 1 MiB chunks): the server closes the connection before 16 MiB
  malformed requests: bad JSON, wrong shapes and types, unknown model, wrong method: 4xx + JSON
  1000 idle connections and a body trickled one byte a second, at the same time: other clients
  are still answered within 1 s each; the trickled body is cut off (connection closed) after the
  body timeout; the idle connections are closed after the idle timeout.
"""
import json
import socket
import sys
import time

PORT, MODEL, BODY = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read()
BODY_TIMEOUT, IDLE_TIMEOUT = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (10, 15)
fails = 0


def result(ok, what, why=""):
    global fails
    print(("PASS: " if ok else "FAIL: ") + what + ("" if ok else " (" + why + ")"), flush=True)
    fails += 0 if ok else 1


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    return s


def read_reply(s):
    """status, headers text, body of one HTTP reply (Content-Length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a reply")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    status = int(head.split()[1])
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, head.decode("latin1"), body


def request(method, path, body=b"", ctype="application/json", extra=""):
    s = connect()
    s.sendall(("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
               % (method, path, ctype, len(body), extra)).encode() + body)
    try:
        return read_reply(s)
    finally:
        s.close()


def json_error(status, body, lo, hi):
    try:
        return lo <= status <= hi and isinstance(json.loads(body)["error"], str)
    except (ValueError, KeyError, TypeError):
        return False


def closed(s, within):
    """the server closes s within `within` seconds (EOF or reset)."""
    s.settimeout(within)
    try:
        while True:
            if not s.recv(65536):
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


PREDICT = "/v1/models/%s:predict" % MODEL

# ---- huge bodies ----
s = connect()
s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
           % (PREDICT, 100 << 20)).encode() + b"[" * 4096)
try:
    st, _, body = read_reply(s)
    result(json_error(st, body, 413, 413), "100 MB declared body: 413 with a JSON error", "got %d %r" % (st, body[:80]))
except OSError as e:
    result(False, "100 MB declared body: 413 with a JSON error", str(e))
s.close()

s = connect()
s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
           % PREDICT).encode())
sent, chunk = 0, b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
try:
    while sent < (100 << 20):
        s.sendall(chunk)
        sent += 1 << 20
except OSError:
    pass
result(sent < (16 << 20), "100 MB chunked body: cut off before 16 MiB (4 MiB and the socket buffers)", "sent %d MiB" % (sent >> 20))
s.close()

# ---- malformed requests ----
cases = [
    ("bad JSON", "POST", PREDICT, b'{"instances": [[1, 2', 400),
    ("not an object", "POST", PREDICT, b'[1, 2, 3]', 400),
    ("no instances", "POST", PREDICT, b'{"inputs_x": 1}', 400),
    ("instances not an array", "POST", PREDICT, b'{"instances": "abc"}', 400),
    ("empty instances", "POST", PREDICT, b'{"instances": []}', 400),
    ("wrong shape", "POST", PREDICT, b'{"instances": [[1, 2, 3]]}', 400),
    ("ragged rows", "POST", PREDICT, json.dumps({"instances": [[[0] * 28] * 27 + [[0] * 29]]}).encode(), 400),
    ("a string pixel", "POST", PREDICT, json.dumps({"instances": [["a"] * 784]}).encode(), 400),
    ("a pixel of 300", "POST", PREDICT, json.dumps({"instances": [[300] * 784]}).encode(), 400),
    ("a negative pixel", "POST", PREDICT, json.dumps({"instances": [[-1] * 784]}).encode(), 400),
    ("too many instances", "POST", PREDICT, json.dumps({"instances": [[0] * 784] * 65}).encode(), 400),
    ("nested 1000 deep", "POST", PREDICT, b'{"instances": ' + b"[" * 1000 + b"]" * 1000 + b"}", 400),
    ("a million tiny values", "POST", PREDICT, b'{"instances": [' + b"0," * 1000000 + b"0]}", (400, 413)),
    ("a PNG that is not one", "POST", PREDICT, b"\x89PNG\r\n\x1a\n" + b"garbage" * 10, 400),
    ("a PGM claiming 60000x60000", "POST", PREDICT, b"P5 60000 60000 255\n" + b"\0" * 100, 400),
    ("unknown model", "POST", "/v1/models/nosuch:predict", BODY, 404),
    ("unknown model, v2", "GET", "/v2/models/nosuch", b"", 404),
    ("GET on :predict", "GET", PREDICT, b"", 405),
    ("v2 infer, shape and data disagree", "POST", "/v2/models/%s/infer" % MODEL,
     json.dumps({"inputs": [{"name": "input", "shape": [2, 784], "datatype": "UINT8", "data": [0] * 784}]}).encode(), 400),
    ("v2 infer, bad datatype", "POST", "/v2/models/%s/infer" % MODEL,
     json.dumps({"inputs": [{"name": "input", "shape": [1, 784], "datatype": "BYTES", "data": [0] * 784}]}).encode(), 400),
    ("unknown path", "GET", "/etc/passwd", b"", 404),
]
for what, method, path, body, want in cases:
    lo, hi = want if isinstance(want, tuple) else (want, want)
    try:
        st, _, b = request(method, path, body)
        result(json_error(st, b, lo, hi), "%s: %s with a JSON error" % (what, want), "got %d %r" % (st, b[:100]))
    except OSError as e:
        result(False, "%s: %s with a JSON error" % (what, want), str(e))

# ---- 1000 idle connections and a trickled body ----
idle = []
try:
    for _ in range(1000):
        idle.append(connect())
except OSError as e:
    result(False, "1000 idle connections opened", str(e))
half = []  # headers sent, body never
for _ in range(20):
    h = connect()
    h.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % (PREDICT, len(BODY))).encode())
    half.append(h)
slow = connect()
slow.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % (PREDICT, len(BODY))).encode())
t0 = time.time()
worst, good, slow_closed_at, k, open_early = 0.0, 0, None, 0, None


def still_open():
    """of the 100 idle connections opened last, how many the server has not closed"""
    return sum(not closed(s, 0.001) for s in idle[-100:])


LOOP = max(BODY_TIMEOUT + 4, 8)  # seconds of trickling, one request of another client a second
while time.time() - t0 < LOOP:
    if slow_closed_at is None:
        try:
            slow.sendall(BODY[k:k + 1])
            k += 1
        except OSError:
            slow_closed_at = time.time() - t0
        if slow_closed_at is None and closed(slow, 0.01):
            slow_closed_at = time.time() - t0
    if open_early is None and time.time() - t0 >= IDLE_TIMEOUT - 2.5:
        open_early = still_open()
    t = time.time()
    try:
        st, _, b = request("POST", PREDICT, BODY)
        good += st == 200 and b"predictions" in b
    except OSError:
        pass
    worst = max(worst, time.time() - t)
    time.sleep(max(0.0, 1.0 - (time.time() - t)))
result(good >= LOOP - 3 and worst < 1.0, "with 1000 idle and 20 half-sent requests open, others are answered (%d, worst %.3f s)"
       % (good, worst), "%d answered, worst %.3f s" % (good, worst))
result(slow_closed_at is not None and BODY_TIMEOUT - 1 <= slow_closed_at < BODY_TIMEOUT + 3,
       "a body trickled one byte a second is cut off after the body timeout of %d s (after %s s)"
       % (BODY_TIMEOUT, slow_closed_at), "closed after %s s" % slow_closed_at)
if open_early is None:
    time.sleep(max(0.0, IDLE_TIMEOUT - 2.5 - (time.time() - t0)))
    open_early = still_open()
result(open_early == 100, "idle connections still open 2 s before the idle timeout of %d s (%d of 100)"
       % (IDLE_TIMEOUT, open_early), "%d of 100 open" % open_early)
time.sleep(max(0.0, IDLE_TIMEOUT + 4 - (time.time() - t0)))
n_closed = sum(closed(s, 0.001) for s in idle + half)
result(n_closed == len(idle) + len(half), "idle connections closed after the idle timeout (%d of %d)" % (n_closed, len(idle) + len(half)),
       "%d of %d closed" % (n_closed, len(idle) + len(half)))
for s in idle + half + [slow]:
    s.close()
sys.exit(1 if fails else 0)
