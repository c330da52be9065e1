"""batch_client.py PORT DIR MODE - requests for tests/test_serve_batch.sh.

DIR holds the images (DIR/img/*.png) and the models' shapes (DIR/models: "NAME C H W" lines).
The requests: for each of 48, a model (in turn), and a body: the PNG itself, TF Serving JSON of
one or two instances, or KServe v2 JSON; one in 12 is malformed JSON (its own 400).
MODE:
  seq       send them one by one; write DIR/seq/N (status and body)
  par       send all 48 at once (48 threads, started together); write DIR/par/N
  compare   print how many of par differ from seq (status or body, byte for byte); exit 1 if any
  hold K    send K requests at once and write DIR/hold/N as they come back (for the shutdown check)
"""
import http.client
import json
import os
import sys
import threading

import numpy as np
from PIL import Image

port, d, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
models = [l.split() for l in open(os.path.join(d, "models")) if l.strip()]
imgs = sorted(os.listdir(os.path.join(d, "img")))
N = 48


def pixels(name, c, h, w):
    im = Image.open(os.path.join(d, "img", name)).convert("L" if c == 1 else "RGB").resize((w, h), Image.BILINEAR)
    return np.asarray(im, dtype=np.uint8).reshape(h, w, c)


def request(i):
    name, c, h, w = models[i % len(models)][0], *map(int, models[i % len(models)][1:])
    kind = (i // len(models)) % 4
    img = imgs[i % len(imgs)]
    if i % 12 == 11:
        return "/v1/models/%s:predict" % name, "application/json", b'{"instances": [[1, 2,'
    if kind == 0:
        return "/v1/models/%s:predict" % name, "image/png", open(os.path.join(d, "img", img), "rb").read()
    if kind == 1:  # (H, W, C), one instance
        body = {"instances": [pixels(img, c, h, w).tolist()]}
        return "/v1/models/%s:predict" % name, "application/json", json.dumps(body).encode()
    if kind == 2:  # (C, H, W), two instances
        a = pixels(img, c, h, w).transpose(2, 0, 1)
        b = pixels(imgs[(i + 1) % len(imgs)], c, h, w).transpose(2, 0, 1)
        return "/v1/models/%s:predict" % name, "application/json", json.dumps({"instances": [a.tolist(), b.tolist()]}).encode()
    x = pixels(img, c, h, w).transpose(2, 0, 1)
    body = {"inputs": [{"name": "input", "shape": [1, c, h, w], "datatype": "UINT8", "data": x.flatten().tolist()}]}
    return "/v2/models/%s/infer" % name, "application/json", json.dumps(body).encode()


def send(i, out, start=None):
    url, ctype, body = request(i)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        try:
            conn.connect()
        finally:
            if start:  # every connection is made before any request goes: none connects after a stop
                start.wait()
        conn.request("POST", url, body, {"Content-Type": ctype})
        r = conn.getresponse()
        got = b"%d\n" % r.status + r.read()
    except Exception as e:  # the connection closed: written as such
        got = b"closed " + repr(e).encode()
    with open(os.path.join(d, out, str(i)), "wb") as f:
        f.write(got)


def at_once(k, out):
    os.makedirs(os.path.join(d, out), exist_ok=True)
    start = threading.Barrier(k, timeout=30)
    ts = [threading.Thread(target=send, args=(i, out, start)) for i in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


if mode == "seq":
    os.makedirs(os.path.join(d, "seq"), exist_ok=True)
    for i in range(N):
        send(i, "seq")
elif mode == "par":
    at_once(N, "par")
elif mode == "hold":
    at_once(int(sys.argv[4]), "hold")
elif mode == "compare":
    bad = [i for i in range(N) if open(os.path.join(d, "seq", str(i)), "rb").read() !=
           open(os.path.join(d, "par", str(i)), "rb").read()]
    ok200 = sum(open(os.path.join(d, "seq", str(i)), "rb").read().startswith(b"200\n") for i in range(N))
    print("%d of %d differ (%d answered 200 alone)%s" % (len(bad), N, ok200, (": " + " ".join(map(str, bad[:8]))) if bad else ""))
    sys.exit(1 if bad or ok200 != N - N // 12 else 0)
