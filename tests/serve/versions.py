"""versions.py SERVE TMP - ddl-serve's directory of versions, canary and inference log, driven from
here: TMP holds m1.ckpt, m2.ckpt, m3.ckpt (three colour models of 16x16 that answer differently)
and is where the directories, logs and servers' output go; SERVE is the ddl-serve program.
Prints "ok NAME" or "FAIL NAME: why" per check."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time

serve, tmp = sys.argv[1], sys.argv[2]
procs = []


def check(name, cond, why=""):
    print(("ok " if cond else "FAIL ") + name + ("" if cond else ": " + str(why)[:400]), flush=True)
    return cond


def start(name, *args):
    """ddl-serve with args on a free port; its stderr in TMP/NAME.log; returns (proc, port)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(os.path.join(tmp, name + ".log"), "w")
    p = subprocess.Popen([serve, "--listen", "127.0.0.1:%d" % port] + list(args), stderr=log)
    procs.append(p)
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/ping")
            c.getresponse().read()
            return p, port
        except OSError:
            time.sleep(0.05)
    return p, port


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def req(self, method, path, body=None):
        self.c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = self.c.getresponse()
        return r.status, r.getheader("X-Model-Version"), r.read().decode()


px = json.dumps({"instances": [[[[(x * 7 + y * 3 + c * 50) % 256 for x in range(16)] for y in range(16)]
                                for c in range(3)]]})
v2px = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 16, 16], "datatype": "UINT8",
                               "data": json.loads(px)["instances"][0]}]})


def crc32c(b):
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    c = 0xFFFFFFFF
    for x in b:
        c = t[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def canary_newest(seed, k, pct):
    m = (1 << 64) - 1
    z = (seed + (k + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return z % 100 < pct


def put_version(d, v, ckpt):
    """d/v/model.ckpt appears at once: written under a hidden name, then renamed."""
    os.makedirs(os.path.join(d, ".tmp"), exist_ok=True)
    shutil.copy(ckpt, os.path.join(d, ".tmp", "model.ckpt"))
    os.rename(os.path.join(d, ".tmp"), os.path.join(d, str(v)))


def wait_for(f, seconds=5):
    t = time.time() + seconds
    while time.time() < t:
        if f():
            return True
        time.sleep(0.05)
    return False


def ckpt(i):
    return os.path.join(tmp, "m%d.ckpt" % i)


# ---- a directory of versions 1 and 2, and names that are no versions ----
d = os.path.join(tmp, "m")
for v in (1, 2):
    put_version(d, v, ckpt(v))
for bad in ("01", "99999999999", "junk"):  # a leading zero, past 999999999 (it would wrap an int), a word
    os.makedirs(os.path.join(d, bad))
    shutil.copy(ckpt(3), os.path.join(d, bad, "model.ckpt"))
logf = os.path.join(tmp, "req.log")
p, port = start("main", "--model", "m=" + d, "--model", "f=" + ckpt(1), "--keep-versions", "2",
                "--log-requests", logf, "--log-max-mb", "0.004")
cl = Client(port)
s, ver, body = cl.req("POST", "/v1/models/m:predict", px)
check("the newest version (2) answers :predict, X-Model-Version names it", s == 200 and ver == "2", (s, ver, body))
ans2 = json.loads(body)["predictions"] if s == 200 else None
s, ver, body = cl.req("POST", "/v1/models/m/versions/1:predict", px)
ans1 = json.loads(body)["predictions"] if s == 200 else None
check("/v1/models/m/versions/1:predict: version 1 answers, another answer than 2's",
      s == 200 and ver == "1" and ans1 != ans2, (s, ver, body))
s, ver, body = cl.req("POST", "/v1/models/f:predict", px)
check("--model NAME=FILE still served (version 1): the same file's answer as DIR/1",
      s == 200 and json.loads(body)["predictions"] == ans1, (s, body))
s, _, body = cl.req("GET", "/v1/models/m")
st = json.loads(body)["model_version_status"] if s == 200 else []
check("GET /v1/models/m: versions 2 and 1 AVAILABLE", [(x["version"], x["state"]) for x in st] ==
      [("2", "AVAILABLE"), ("1", "AVAILABLE")], body)
s, _, body = cl.req("GET", "/v1/models/m/versions/1")
check("GET /v1/models/m/versions/1: its status", s == 200 and '"version":"1"' in body and "/m/1/model.ckpt" in body,
      body)
s, _, body = cl.req("GET", "/v2/models/m")
check("GET /v2/models/m: versions [1, 2]", s == 200 and json.loads(body)["versions"] == ["1", "2"], body)
s, _, body = cl.req("GET", "/v2/models/m/versions/1")
check("GET /v2/models/m/versions/1: its metadata", s == 200 and json.loads(body)["versions"] == ["1"], body)
s, _, body = cl.req("GET", "/v2/models/m/versions/1/ready")
check("GET /v2/models/m/versions/1/ready: 200", s == 200, body)
s, ver, body = cl.req("POST", "/v2/models/m/versions/1/infer", v2px)
check("POST /v2/models/m/versions/1/infer: version 1 answers",
      s == 200 and ver == "1" and json.loads(body)["model_version"] == "1"
      and json.loads(body)["outputs"][0]["data"] == ans1[0], body)
s, ver, body = cl.req("POST", "/v2/models/m/infer", v2px)
check("POST /v2/models/m/infer: version 2", s == 200 and json.loads(body)["model_version"] == "2", body)
for path in ("/v1/models/m/versions/+1", "/v1/models/m/versions/01", "/v1/models/m/versions/1abc",
             "/v1/models/m/versions/../1", "/v1/models/m/versions/..%2F1", "/v1/models/m/versions/-1",
             "/v1/models/m/versions/4294967297", "/v1/models/m/versions/99999999999"):
    s, _, body = cl.req("GET", path)
    check("GET %s: 404, not a version served" % path, s == 404 and "is not served (versions 2, 1 are" in body,
          (s, body))
log = open(os.path.join(tmp, "main.log")).read()
check("DIR/01, DIR/99999999999 and DIR/junk: ignored, named in the log",
      all("m/%s is not a version" % n in log for n in ("01", "99999999999", "junk")), log)

# ---- version 3 appears; --keep-versions 2 drops 1 ----
put_version(d, 3, ckpt(3))
check("version 3 appears: loaded, it answers",
      wait_for(lambda: cl.req("POST", "/v1/models/m:predict", px)[1] == "3"), log)
s, _, body = cl.req("GET", "/v1/models/m/versions/1")
check("--keep-versions 2: version 1 dropped (404)", s == 404 and "versions 3, 2 are" in body, body)
check("version 2 still reachable", cl.req("POST", "/v1/models/m/versions/2:predict", px)[:2] == (200, "2"))

# ---- a corrupt version 4 is refused; 3 keeps serving ----
os.makedirs(os.path.join(d, ".4"))
open(os.path.join(d, ".4", "model.ckpt"), "wb").write(b"not a checkpoint at all" * 10)
os.rename(os.path.join(d, ".4"), os.path.join(d, "4"))
check("a corrupt version 4: refused, logged",
      wait_for(lambda: "version 4 refused, version 3 keeps serving" in open(os.path.join(tmp, "main.log")).read()))
s, ver, _ = cl.req("POST", "/v1/models/m:predict", px)
check("version 3 keeps serving", s == 200 and ver == "3", ver)
s, _, body = cl.req("GET", "/v1/models/m")
st = json.loads(body)["model_version_status"]
check("the status shows version 4 END with why", any(x["version"] == "4" and x["state"] == "END" and
                                                    "checkpoint" in x["status"]["error_message"] for x in st), body)

# ---- links out of DIR are refused ----
out = os.path.join(tmp, "outside")
os.makedirs(out)
shutil.copy(ckpt(1), os.path.join(out, "model.ckpt"))
os.symlink(out, os.path.join(d, "5"))                      # the version directory a link out
os.makedirs(os.path.join(d, ".6"))
os.symlink(os.path.join(out, "model.ckpt"), os.path.join(d, ".6", "model.ckpt"))  # the file a link out
os.rename(os.path.join(d, ".6"), os.path.join(d, "6"))
check("DIR/5 -> a directory outside, DIR/6/model.ckpt -> a file outside: both refused as outside DIR",
      wait_for(lambda: all("version %d refused, version 3 keeps serving: %s/%d/model.ckpt resolves to" % (v, d, v)
                               in open(os.path.join(tmp, "main.log")).read() for v in (5, 6))),
      open(os.path.join(tmp, "main.log")).read()[-600:])
check("version 3 still serves", cl.req("POST", "/v1/models/m:predict", px)[:2] == (200, "3"))
# version 4's file replaced by a good one: tried again, loaded (5 and 6 stay refused)
os.makedirs(os.path.join(d, ".4b"))
shutil.copy(ckpt(1), os.path.join(d, ".4b", "model.ckpt"))
os.rename(os.path.join(d, ".4b", "model.ckpt"), os.path.join(d, "4", "model.ckpt"))
check("version 4 mended: loaded and serving",
      wait_for(lambda: cl.req("POST", "/v1/models/m:predict", px)[1] == "4"))
s, _, metrics = cl.req("GET", "/metrics")
check("/metrics: the version served, requests per version, refusals",
      'ddl_serve_model_version{model="m"} 4' in metrics and
      'ddl_serve_version_requests_total{model="m",version="3"}' in metrics and
      'ddl_serve_model_reloads_total{model="m",result="refused"} 3' in metrics, metrics[-1500:])

# ---- the inference log ----
for _ in range(30):  # enough lines to pass 4 KiB: moved to req.log.1
    cl.req("POST", "/v1/models/m:predict", px)
s, ver, _ = cl.req("POST", "/v2/models/m/versions/3/infer", v2px)
time.sleep(0.3)
ok_lines = []
try:
    for f in (logf + ".1", logf):
        ok_lines += [json.loads(line) for line in open(f)]
    parsed = True
except (OSError, ValueError) as e:
    parsed = e
check("the log's lines parse as JSON (req.log.1 and req.log)", parsed is True and len(ok_lines) >= 10, parsed)
limit = int(0.004 * 1048576)
check("rotated by size: req.log.1 kept, each file under --log-max-mb (%d bytes)" % limit,
      os.path.exists(logf + ".1") and os.path.getsize(logf + ".1") <= limit and os.path.getsize(logf) <= limit,
      [os.path.getsize(f) for f in (logf, logf + ".1") if os.path.exists(f)])
last = ok_lines[-1] if ok_lines else {}
check("a line: time, model, version, route, status, input size and CRC-32C, answer, latency",
      last.get("model") == "m" and last.get("version") == 3 and last.get("route") == "infer"
      and last.get("status") == 200 and last.get("input_bytes") == len(v2px)
      and last.get("input_crc32c") == "%08x" % crc32c(v2px.encode()) and last.get("instances") == 1
      and isinstance(last.get("top"), list) and 0 < last["top"][0]["p"] <= 1 and last.get("latency_us", -1) >= 0
      and last.get("time", "").endswith("Z"), last)
s, _, metrics = cl.req("GET", "/metrics")
check("/metrics: the log's lines written, none dropped", 'ddl_serve_log_lines_total{result="dropped"} 0' in metrics
      and 'ddl_serve_log_rotations_total 0' not in metrics, metrics[-700:])

# ---- the canary: 200 requests, the hash's count exactly ----
d2 = os.path.join(tmp, "c")
for v in (1, 2):
    put_version(d2, v, ckpt(v))
p2, port2 = start("canary", "--model", "c=" + d2, "--canary", "c=30", "--canary-seed", "7")
c2 = Client(port2)
got = [c2.req("POST", "/v1/models/c:predict", px)[1] for _ in range(200)]
want = sum(canary_newest(7, k, 30) for k in range(200))
check("--canary c=30 --canary-seed 7: %d of 200 to version 2, as the hash says (%d), the rest to 1"
      % (got.count("2"), want), got.count("2") == want and got.count("1") == 200 - want and 40 <= want <= 80,
      got[:20])
check("the same 200 decisions as the hash, request by request",
      [g == "2" for g in got] == [canary_newest(7, k, 30) for k in range(200)])
s, ver, _ = c2.req("POST", "/v1/models/c/versions/1:predict", px)
check("a request naming a version gets it, whatever the canary", s == 200 and ver == "1")

# ---- a full log queue drops lines, counted, and never holds a request ----
fifo = os.path.join(tmp, "fifo")
os.mkfifo(fifo)
hold = os.open(fifo, os.O_RDWR)  # a reader that never reads: the writer blocks once the pipe is full
p3, port3 = start("fifo", "--model", "c=" + d2, "--log-requests", fifo, "--log-queue", "4")
c3 = Client(port3)
t0 = time.time()
codes = [c3.req("POST", "/v1/models/c:predict", px)[0] for _ in range(400)]
took = time.time() - t0
s, _, metrics = c3.req("GET", "/metrics")
dropped = [int(line.split()[-1]) for line in metrics.splitlines()
           if line.startswith('ddl_serve_log_lines_total{result="dropped"}')]
# a request held by the log would never be answered: the client's 10 s timeout fails the check
check("a log nobody reads (a full pipe, --log-queue 4): 400 requests answered (in %.1f s), %s lines dropped and "
      "counted" % (took, dropped), codes.count(200) == 400 and dropped and dropped[0] > 50, (codes.count(200), dropped))
os.close(hold)  # the writer's write fails now (EPIPE): it ends at once when stopped

for p in procs:
    p.terminate()
for p, name in zip(procs, ("main", "canary", "fifo")):
    rc = p.wait(10)
    check("ddl-serve (%s) stops cleanly" % name, rc == 0, rc)
logs = "".join(open(os.path.join(tmp, n + ".log")).read() for n in ("main", "canary", "fifo"))
check("no sanitizer report", "Sanitizer" not in logs and "runtime error" not in logs, logs[-800:])
