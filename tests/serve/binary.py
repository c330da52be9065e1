"""binary.py PORT MODEL - KServe v2's binary tensors against ddl-serve's model MODEL (64x64x3):
the same float input sent as JSON and as binary (FP32, and UINT8 raw pixels) gives the same
answer, bit for bit, in JSON and in binary outputs; every malformed binary request is a 400
naming what was wrong, and the server answers after them. Prints "ok NAME" or "FAIL NAME: why"
per check."""
import http.client
import json
import struct
import sys

import numpy as np

port, model = int(sys.argv[1]), sys.argv[2]
url = "/v2/models/%s/infer" % model
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)


def post(body, headers=None):
    conn.request("POST", url, body=body, headers=headers or {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()


def binary(header, tail, length=None, extra=None):
    h = json.dumps(header).encode()
    hd = {"Content-Type": "application/octet-stream",
          "Inference-Header-Content-Length": str(len(h) if length is None else length)}
    hd.update(extra or {})
    return post(h + tail, hd)


def check(name, cond, why=""):
    print(("ok " if cond else "FAIL ") + name + ("" if cond else ": " + str(why)))


def split(status, hdrs, body):
    """the JSON header and the binary outputs of a reply, by name."""
    n = int(hdrs.get("inference-header-content-length", len(body)))
    j = json.loads(body[:n])
    outs, at = {}, n
    for o in j["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            outs[o["name"]] = body[at:at + size]
            at += size
    return j, outs, at == len(body)


rng = np.random.default_rng(7)
x = rng.uniform(0, 255, (2, 64, 64, 3)).astype(np.float32)   # (n, H, W, C), fractional values
x[0, 0, 0, :] = [0.5, 1.5, 254.5]                             # ties: rounded to even on both paths
inp = {"name": "input", "shape": [2, 64, 64, 3], "datatype": "FP32"}
as_json = {"inputs": [dict(inp, data=x.reshape(-1).tolist())]}
s, h, b = post(json.dumps(as_json))
check("the JSON form: 200", s == 200, b[:300])
ref = json.loads(b)
ref_probs = np.array(ref["outputs"][0]["data"], dtype=np.float32)
ref_classes = ref["outputs"][1]["data"]

tail = x.astype("<f4").tobytes()
bin_in = {"inputs": [dict(inp, parameters={"binary_data_size": len(tail)})]}
s, h, b = binary(bin_in, tail)
check("binary FP32 in, JSON out: 200", s == 200, b[:300])
check("binary FP32 in: the JSON form's outputs, the same text",
      s == 200 and json.loads(b)["outputs"] == ref["outputs"], b[:200])

s, h, b = binary(dict(bin_in, parameters={"binary_data_output": True}), tail)
j, outs, whole = split(s, h, b)
probs = np.frombuffer(outs.get("probabilities", b""), "<f4")
classes = np.frombuffer(outs.get("classes", b""), "<i4")
check("binary in and out: 200, Inference-Header-Content-Length, octet-stream",
      s == 200 and "inference-header-content-length" in h and h.get("content-type") == "application/octet-stream"
      and whole, (s, h))
check("binary outputs: the JSON form's probabilities bit for bit, and its classes",
      probs.shape == ref_probs.shape and probs.view("<u4").tolist() == ref_probs.view("<u4").tolist()
      and classes.tolist() == ref_classes, (probs[:4], ref_probs[:4]))
check("binary outputs: binary_data_size and shape named, no data",
      all("data" not in o and o["parameters"]["binary_data_size"] > 0 for o in j["outputs"])
      and j["outputs"][0]["shape"] == [2, 3] and j["model_version"] == "1", j)

# one output asked for, as binary; the other not asked for: left out
s, h, b = binary(dict(bin_in, outputs=[{"name": "probabilities", "parameters": {"binary_data": True}}]), tail)
j, outs, whole = split(s, h, b)
check("outputs: [probabilities as binary]: only it, bit for bit",
      s == 200 and [o["name"] for o in j["outputs"]] == ["probabilities"] and whole
      and np.frombuffer(outs["probabilities"], "<f4").view("<u4").tolist() == ref_probs.view("<u4").tolist(), b[:200])
s, h, b = post(json.dumps(dict(as_json, outputs=[{"name": "classes"}])))
check("JSON in, outputs: [classes]: JSON classes only, no binary header",
      s == 200 and "inference-header-content-length" not in h
      and json.loads(b)["outputs"] == [ref["outputs"][1]], b[:200])

# UINT8 raw pixels: the same answer as their JSON
u = rng.integers(0, 256, (1, 3, 64, 64), dtype=np.uint8)
s1, _, b1 = post(json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 64, 64], "datatype": "UINT8",
                                          "data": u.reshape(-1).tolist()}]}))
s2, _, b2 = binary({"inputs": [{"name": "input", "shape": [1, 3, 64, 64], "datatype": "UINT8",
                                 "parameters": {"binary_data_size": u.size}}]}, u.tobytes())
check("binary UINT8 (raw pixels, (C, H, W)): the answer of their JSON",
      s1 == 200 and s2 == 200 and json.loads(b1)["outputs"] == json.loads(b2)["outputs"], (b1[:100], b2[:100]))
# another input before ours, in binary too: ours is found after its bytes
s, h, b = binary({"inputs": [{"name": "other", "shape": [4], "datatype": "UINT8",
                              "parameters": {"binary_data_size": 4}},
                             dict(inp, parameters={"binary_data_size": len(tail)})]}, b"\1\2\3\4" + tail)
check("an input before ours in binary: ours read after its bytes",
      s == 200 and json.loads(b)["outputs"] == ref["outputs"], b[:200])

# ---- malformed: each a 400 naming what was wrong ----
one = x[:1].astype("<f4").tobytes()
one_in = {"inputs": [dict(inp, shape=[1, 64, 64, 3], parameters={"binary_data_size": len(one)})]}
hlen = len(json.dumps(one_in).encode())
bad = [
    ("header length past the body", binary(one_in, one, length=hlen + len(one) + 1),
     "Inference-Header-Content-Length"),
    ("a negative header length", binary(one_in, one, length=-5), "Inference-Header-Content-Length: \\\"-5\\\""),
    ("a header length of 30 digits", binary(one_in, one, length="9" * 30), "Inference-Header-Content-Length"),
    ("a header length cutting the JSON", binary(one_in, one, length=hlen - 3), "malformed JSON"),
    ("binary_data_size not the shape's", binary({"inputs": [dict(inp, shape=[1, 64, 64, 3],
                                                                 parameters={"binary_data_size": len(one) - 4})]},
                                                one[:-4]), "binary_data_size 49148, its shape [1, ...] of FP32 takes 49152"),
    ("binary_data_size past the body (a truncated tail)", binary(one_in, one[:-100]), "runs past the body"),
    ("binary_data_size of 2^63-1", binary({"inputs": [dict(inp, shape=[1, 64, 64, 3],
                                                           parameters={"binary_data_size": 2**63 - 1})]}, one),
     "runs past the body"),
    ("two sizes that overflow when added", binary({"inputs": [
        {"name": "a", "shape": [1], "datatype": "UINT8", "parameters": {"binary_data_size": 2**63 - 1}},
        dict(inp, shape=[1, 64, 64, 3], parameters={"binary_data_size": 2**63 - 1})]}, one), "runs past the body"),
    ("a binary_data_size too large for JSON", binary({"inputs": [dict(inp, shape=[1, 64, 64, 3],
                                                                      parameters={"binary_data_size": 2**64})]}, one),
     "malformed JSON"),
    ("a negative binary_data_size", binary({"inputs": [dict(inp, shape=[1, 64, 64, 3],
                                                            parameters={"binary_data_size": -1})]}, one),
     "binary_data_size is not a byte count"),
    ("bytes after the last input's", binary(one_in, one + b"xx"), "49154 bytes after the JSON header"),
    ("both JSON data and binary", binary({"inputs": [dict(inp, shape=[1, 64, 64, 3], data=[0] * 12288,
                                                          parameters={"binary_data_size": len(one)})]}, one),
     "both \\\"data\\\" and binary_data_size"),
    ("binary_data_size without the header", post(json.dumps(one_in).encode() + one), "malformed JSON"),
    ("binary_data_size in JSON only, without the header",
     post(json.dumps({"inputs": [dict(inp, shape=[1, 64, 64, 3], parameters={"binary_data_size": 0})]})),
     "without an Inference-Header-Content-Length"),
    ("a NaN pixel", binary(one_in, struct.pack("<f", float("nan")) + one[4:]), "pixel 0 is nan"),
    ("a pixel of 256", binary(one_in, struct.pack("<f", 256.0) + one[4:]), "pixel 0 is 256"),
    ("an FP16 binary input", binary({"inputs": [dict(inp, shape=[1, 64, 64, 3], datatype="FP16",
                                                     parameters={"binary_data_size": 24576})]}, one[:24576]), "FP16"),
    ("an output the model has not", binary(dict(one_in, outputs=[{"name": "logits"}]), one),
     "outputs[0]: no output named \\\"logits\\\""),
]
for name, (s, h, b), want in bad:
    text = b.decode("utf-8", "replace")
    check("%s: 400 saying %s" % (name, want), s == 400 and want in text, "%d %s" % (s, text[:300]))
conn.request("GET", "/v2/health/live")
r = conn.getresponse()
check("the server answers after them", r.status == 200 and r.read() == b'{"live":true}', r.status)
conn.request("GET", "/v2")
r = conn.getresponse()
check("/v2 lists the binary_tensor_data extension", b"binary_tensor_data" in r.read())
