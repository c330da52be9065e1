#!/usr/bin/env python3
"""same_probs.py - the probabilities of each path of tests/test_serve_same.sh, as lines
"NAME BITS BITS ..." (each probability as the 8 hex digits of its float32), so that the paths
compare with cmp, bit for bit.
  same_probs.py lib LIBDDL CKPT IMGDIR LIST C H W OUTDIR [PORT MODEL]
      the C predictor through libddl.so (ctypes): each image of LIST (names in IMGDIR) read by
      ddl_image_load, run alone (OUTDIR/c.txt) and all in one ddl_predictor_run (cbatch.txt);
      with PORT, ddl-serve's model MODEL given each file as an image body (v1_image.txt), and
      ddl_image_load's pixels as JSON: TF Serving's instances in (C, H, W) and (H, W, C)
      (v1_chw.txt, v1_hwc.txt; v1_hwc_tree.txt with another key, which the fast path declines), KServe v2's [1, C, H, W] and [1, H, W, C] (v2_chw.txt, v2_hwc.txt);
      the pixels as "NAME HEX" lines in pixels.txt
  same_probs.py csv FILE     ddl-train --predict's CSV (file,predicted,p...) on standard output
  same_probs.py pg FILE      psql's "NAME|{p,...}" rows on standard output
  same_probs.py ulps A B     the largest distance, in float32 ulps, between two such files"""
import ctypes
import http.client
import json
import os
import struct
import sys


def bits(p):
    return " ".join("%08x" % struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in p)


def post(port, path, body, ctype):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, body=body, headers={"Content-Type": ctype})
    r = c.getresponse()
    out = r.read()
    c.close()
    if r.status != 200:
        sys.exit("same_probs.py: %s: %d %s" % (path, r.status, out[:300].decode(errors="replace")))
    return json.loads(out)


def lib_mode(libpath, ckpt, imgdir, listfile, C, H, W, outdir, port=None, model=None):
    L = ctypes.CDLL(libpath)
    vp = ctypes.c_void_p
    L.ddl_predictor_open.argtypes = [ctypes.c_char_p, vp, vp, ctypes.POINTER(vp), ctypes.c_char_p, ctypes.c_size_t]
    L.ddl_predictor_model.argtypes = [vp]
    L.ddl_predictor_model.restype = vp
    L.ddl_model_output_shape.argtypes = [vp] + [ctypes.POINTER(ctypes.c_int)] * 3
    L.ddl_image_load.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, vp, vp, ctypes.c_char_p,
                                 ctypes.c_size_t]
    L.ddl_predictor_run.argtypes = [vp, vp, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, vp, vp, vp]
    L.ddl_predictor_error.argtypes = [vp]
    L.ddl_predictor_error.restype = ctypes.c_char_p
    L.ddl_predictor_close.argtypes = [vp]
    err = ctypes.create_string_buffer(256)
    pr = vp()
    if L.ddl_predictor_open(ckpt.encode(), None, None, ctypes.byref(pr), err, 256) != 0:
        sys.exit("same_probs.py: " + err.value.decode())
    k, oh, ow = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    L.ddl_model_output_shape(L.ddl_predictor_model(pr), ctypes.byref(k), ctypes.byref(oh), ctypes.byref(ow))
    K, one = k.value, C * H * W
    names = open(listfile).read().split()
    px = (ctypes.c_uint8 * (one * len(names)))()
    for i, n in enumerate(names):
        if L.ddl_image_load(os.path.join(imgdir, n).encode(), C, H, W, None, ctypes.byref(px, i * one), err, 256):
            sys.exit("same_probs.py: " + err.value.decode())

    def run(first, n):
        probs = (ctypes.c_float * (K * n))()
        if L.ddl_predictor_run(pr, ctypes.byref(px, first * one), n, C, H, W, None, probs, None) != 0:
            sys.exit("same_probs.py: " + L.ddl_predictor_error(pr).decode())
        return list(probs)

    with open(os.path.join(outdir, "pixels.txt"), "w") as f:  # for ddl_predict_proba's raw form
        for i, n in enumerate(names):
            f.write("%s %s\n" % (n, bytes(px[i * one:(i + 1) * one]).hex()))
    alone = [run(i, 1) for i in range(len(names))]
    together = run(0, len(names))
    out = {"c": alone, "cbatch": [together[i * K:(i + 1) * K] for i in range(len(names))]}
    if port:
        port = int(port)
        v1, v2 = "/v1/models/%s:predict" % model, "/v2/models/%s/infer" % model
        for key in ("v1_image", "v1_chw", "v1_hwc", "v1_hwc_tree", "v2_chw", "v2_hwc"):
            out[key] = []
        for i, n in enumerate(names):
            chw = [[[px[i * one + (c * H + y) * W + x] for x in range(W)] for y in range(H)] for c in range(C)]
            hwc = [[[chw[c][y][x] for c in range(C)] for x in range(W)] for y in range(H)]
            ext = n.rsplit(".", 1)[1].lower()
            ctype = {"png": "image/png", "jpg": "image/jpeg", "pgm": "image/x-portable-graymap",
                     "ppm": "image/x-portable-pixmap"}[ext]
            out["v1_image"].append(post(port, v1, open(os.path.join(imgdir, n), "rb").read(), ctype)["predictions"][0])
            out["v1_chw"].append(post(port, v1, json.dumps({"instances": [chw]}), "application/json")["predictions"][0])
            out["v1_hwc"].append(post(port, v1, json.dumps({"instances": [hwc]}), "application/json")["predictions"][0])
            # another key: not the fast path's body (stream.c), so jansson's tree path reads it
            out["v1_hwc_tree"].append(post(port, v1, json.dumps({"instances": [hwc], "x": 0}),
                                           "application/json")["predictions"][0])
            for key, shape, data in (("v2_chw", [1, C, H, W], chw), ("v2_hwc", [1, H, W, C], hwc)):
                body = {"inputs": [{"name": "input", "shape": shape, "datatype": "UINT8", "data": data}]}
                ans = post(port, v2, json.dumps(body), "application/json")
                out[key].append([o for o in ans["outputs"] if o["name"] == "probabilities"][0]["data"])
    for key, rows in out.items():
        with open(os.path.join(outdir, key + ".txt"), "w") as f:
            for n, p in zip(names, rows):
                f.write("%s %s\n" % (n, bits(p)))
    L.ddl_predictor_close(pr)


if sys.argv[1] == "lib":
    a = sys.argv[2:]
    lib_mode(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6]), a[7], *(a[8:10]))
elif sys.argv[1] == "csv":
    for line in open(sys.argv[2]).read().splitlines()[1:]:
        f = line.split(",")
        print("%s %s" % (os.path.basename(f[0].strip('"')), bits(f[2:])))
elif sys.argv[1] == "ulps":
    def rows(f):
        return [[int(x, 16) for x in line.split()[1:]] for line in open(f)]
    print(max(abs(x - y) for a, b in zip(rows(sys.argv[2]), rows(sys.argv[3])) for x, y in zip(a, b)))
elif sys.argv[1] == "pg":
    for line in open(sys.argv[2]).read().splitlines():
        name, arr = line.split("|")
        print("%s %s" % (name, bits(arr.strip("{}").split(","))))
