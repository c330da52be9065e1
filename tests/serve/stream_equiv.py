#!/usr/bin/env python3
"""stream_equiv.py PORT MODEL SEGMODEL: ddl-serve's fast :predict path (stream.c, a body of exactly
{"instances": [...]}) answers every body exactly as the tree path does. Each case is sent as is and
again with one more key ("x": 0), which the fast path declines, so the tree path answers it; the
two answers (status and bytes) must be equal. Valid bodies must also get 200 where expected.
Prints PASS/FAIL lines."""
import gzip
import http.client
import json
import random
import re
import sys

port, model, seg = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(7)


def post(name, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/v1/models/%s:predict" % name, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = (r.status, r.read())
    c.close()
    return out


def with_extra_key(body):
    """The same object with one more key at its end (the tree path only reads "instances")."""
    s = body.rstrip()
    return s[:-1] + ', "x": 0}' if s.endswith("}") else None


def case(label, body, want=None, name=model):
    fast = post(name, body)
    ok = want is None or fast[0] == want
    slow_body = with_extra_key(body)
    if slow_body is not None and slow_body != body:
        slow = post(name, slow_body)
        # a malformed body's error names a position, which the added key can move: status only
        same = fast == slow if fast[0] == 200 or want == 200 else fast[0] == slow[0]
        ok = ok and same
    print("%s %s: %d %s" % ("PASS" if ok else "FAIL", label, fast[0], fast[1][:120].decode(errors="replace")))
    return ok


img = [rng.randrange(256) for _ in range(784)]
rows = [img[r * 28:(r + 1) * 28] for r in range(28)]
cases = [
    ("flat 784 integers", json.dumps({"instances": [img]}), 200),
    ("28 x 28 rows", json.dumps({"instances": [rows]}), 200),
    ("28 x 28 x 1", json.dumps({"instances": [[[[v] for v in r] for r in rows]]}), 200),
    ("1 x 28 x 28", json.dumps({"instances": [[rows]]}), 200),
    ("numbers with fractions and exponents",
     json.dumps({"instances": [[v + rng.choice([0, 0.5, 0.25, -0.5 if v else 0]) for v in img]]}).replace("100,", "1e2,")
     .replace(" 0,", " -0.0,"), 200),
    ("halves round to even", json.dumps({"instances": [[12.5, 13.5, 254.5] + img[3:]]}), 200),
    ("whitespace and newlines", json.dumps({"instances": [rows]}, indent=3), 200),
    ("3 instances of different shapes", json.dumps({"instances": [img, rows, [rows]]}), 200),
    ("an escaped key", '{"\\u0069nstances": %s}' % json.dumps([img]), 200),
    ("64 instances (the most)", json.dumps({"instances": [img] * 64}), 200),
    ("65 instances", json.dumps({"instances": [img] * 65}), 400),
    ("ragged rows", json.dumps({"instances": [rows[:27] + [rows[27] + [0]]]}), 400),
    ("783 pixels", json.dumps({"instances": [img[:783]]}), 400),
    ("785 pixels", json.dumps({"instances": [img + [0]]}), 400),
    ("pixel 256", json.dumps({"instances": [[256] + img[1:]]}), 400),
    ("pixel -1", json.dumps({"instances": [img[:5] + [-1] + img[6:]]}), 400),
    ("pixel 255.0001", json.dumps({"instances": [[255.0001] + img[1:]]}), 400),
    ("a string pixel", json.dumps({"instances": [["7"] + img[1:]]}), 400),
    ("a null pixel", json.dumps({"instances": [[None] + img[1:]]}), 400),
    ("a true pixel", json.dumps({"instances": [[True] + img[1:]]}), 400),
    ("an object among pixels", json.dumps({"instances": [[{"a": 1}] + img[1:]]}), 400),
    ("a bare number instance", json.dumps({"instances": [5]}), 400),
    ("no instances", json.dumps({"instances": []}), 400),
    ("instances not an array", json.dumps({"instances": 5}), 400),
    ("an empty object", "{}", 400),
    ("arrays nested 8 deep", json.dumps({"instances": [[[[[[[[img]]]]]]]]}), 400),
    ("an integer beyond 64 bits", '{"instances": [[%s%s]]}' % ("9" * 30, ", 0" * 783), 400),
    ("a number beyond double", '{"instances": [[1e400%s]]}' % (", 0" * 783), 400),
    ("the key twice", '{"instances": [%s], "instances": [%s]}' % (json.dumps(img), json.dumps(rows)), 200),
    ("inputs instead of instances", json.dumps({"inputs": [img]}), 200),
    ("trailing garbage", json.dumps({"instances": [img]}) + " x", 400),
    ("two objects", json.dumps({"instances": [img]}) * 2, 400),
    ("cut short", json.dumps({"instances": [img]})[:-3], 400),
    ("a comment", '{"instances": /* c */ [%s]}' % json.dumps(img), 400),
    ("a top-level array", json.dumps([img]), 400),
    ("invalid UTF-8 in a key", b'{"instances\xff": [1]}'.decode("latin-1"), 400),
]
passed = sum(case(label, body, want) for label, body, want in cases)
scene = [[(x * y + 3 * x) % 256 for x in range(64)] for y in range(64)]
passed += case("a U-Net scene", json.dumps({"instances": [scene]}), 200, seg)


# :predict writes its probabilities without jansson (sv_reply_probs); KServe's /infer still
# encodes them with jansson at the same precision: the numbers must read the same, digit for
# digit, from 0 and 1 to the tiniest exponents a confident model gives.
def number_texts(body, key):
    at = body.index(key)
    return re.findall(rb"-?[0-9][0-9.e+-]*", body[at:at + body[at:].index(b"]")])


def v2_post(name, pixels):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"inputs": [{"name": "input", "shape": [len(pixels), 784], "datatype": "UINT8",
                                   "data": [p for img in pixels for p in img]}]})
    c.request("POST", "/v2/models/%s/infer" % name, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = (r.status, r.read())
    c.close()
    return out


images = [img, [0] * 784, [255] * 784] + [[rng.randrange(256) for _ in range(784)] for _ in range(20)]
images += [[255 if (i % 28) in (13, 14) else 0 for i in range(784)], [(i * 37) % 256 for i in range(784)]]
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
images += [list(raw[16 + 784 * j:16 + 784 * (j + 1)]) for j in range(40)]  # confident: tiny probabilities
same = exponents = 0
for k, im in enumerate(images):
    st1, fast = post(model, json.dumps({"instances": [im]}))
    st2, tree = v2_post(model, [im])
    a = number_texts(fast, b'"predictions":[[') if st1 == 200 else None
    b = number_texts(tree, b'"data":[') if st2 == 200 else None
    ok = a is not None and a == b and len(a) == 10
    same += ok
    exponents += ok and sum(b"e" in t for t in a)
    print("%s: probabilities of image %d written as jansson writes them%s" % ("PASS" if ok else "FAIL", k,
                                                                           "" if ok else ": %r vs %r" % (a, b)))
print("%s: numbers in exponent form among them (%d)" % ("PASS" if exponents else "FAIL", exponents))
print("%d of %d cases; %d of %d images" % (passed, len(cases) + 1, same, len(images)))
