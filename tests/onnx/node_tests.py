"""node_tests.py BUILD - ONNX's backend node tests judged against ddl (tests/test_onnx_nodes.sh).

Debian's python3-onnx ships the generators of its node tests (onnx.backend.test.cmd_tools
generate-data): each case is a model of one node (or a few), its inputs and its expected outputs.
For every case whose nodes are all operators ddl imports, or may be asked to (OPS), this:
  1. rewrites the case into the form ddl imports, keeping the node and its attributes: every input
     but the image (the first float input) becomes an initializer; the image becomes 4-D (N, C, H, W)
     where that keeps the op's meaning (a 2-D Gemm or MatMul input (N, K) as (N, K, 1, 1) and a
     Flatten; an elementwise or Softmax input of rank r < 4 as (1, d0, .., 1): constants get the same
     trailing 1s, a Softmax axis moves with its dim); else it keeps its rank, and ddl must refuse it
     (a 1-D or 3-D convolution, a 5-D input); a case without a parameter layer gets a 1x1 identity
     Conv on its input (a ddl model trains something: Relu alone is no model);
  2. checks the rewrite in onnxruntime-node: a rewrite whose output is not the case's expected one
     is "not representable" (its reason printed), never judged;
  3. runs ddl on every rewrite in one process (test_infer --onnx-cases) and compares ddl's output
     with the expected one: within 1e-4 of the output's scale (max |ddl - expected| over max
     |expected|) is "pass"; a refusal is "refused" (its message must name a node of the case, or
     the input); an answer that differs is "WRONG".
It asserts that nothing is WRONG, that every refusal names the node, and that every case of
tests/onnx/node_pass.txt passes; it prints each case and a table per operator, and ends with
"N passed, N failed". Cases that cannot be put in ddl's form at all (integer inputs, a training-mode
Dropout's random mask, ...) are listed as n/a with the reason.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

# numpy 1.24 removed these aliases; onnx 1.12's generators still use them
for _name, _type in (("float", float), ("int", int), ("bool", bool), ("object", object), ("complex", complex),
                     ("str", str)):
    if _name not in np.__dict__:
        setattr(np, _name, _type)

import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

OPS = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul",
       "Add", "Sub", "Mul", "Div", "Relu", "Flatten", "Reshape", "Concat", "Dropout", "Identity", "Softmax",
       "LogSoftmax", "BatchNormalization", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "HardSwish", "HardSigmoid",
       "Clip", "Resize", "Upsample", "InstanceNormalization", "GroupNormalization", "Pad", "PRelu", "Gelu",
       "ReduceMean", "Slice", "Transpose", "Expand"}
HELPERS = {"Constant"}
PARAM_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "InstanceNormalization",
             "GroupNormalization"}
# ops whose output at each position depends only on the inputs at that position (after broadcasting)
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Relu", "Dropout", "Identity", "LeakyRelu", "Sigmoid", "Tanh", "Elu",
               "HardSwish", "HardSigmoid", "Clip", "PRelu", "Gelu"}
AXIS_OPS = {"Softmax", "LogSoftmax", "Concat"}
TOL = 1e-4


def generate(out):
    from onnx.backend.test.cmd_tools import main as gen
    saved = sys.argv
    sys.argv = ["cmd_tools", "generate-data", "-o", out]
    try:
        gen()
    finally:
        sys.argv = saved


def tensors(d, kind):
    out = []
    i = 0
    while os.path.exists(os.path.join(d, "%s_%d.pb" % (kind, i))):
        t = onnx.TensorProto()
        with open(os.path.join(d, "%s_%d.pb" % (kind, i)), "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
        i += 1
    return out


# ops whose definition at the case's opset (below 7) is the one of opsets 7 to 21: the case is moved
# to opset 7, which ddl reads, unchanged otherwise
SAME_AT_7 = {"Elu", "HardSigmoid", "InstanceNormalization", "GlobalAveragePool", "GlobalMaxPool"}


def opset_of(m):
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


class Case:
    def __init__(self, name, op):
        self.name, self.op = name, op
        self.status, self.why = None, ""
        self.keep_rank = False      # not made 4-D: ddl must refuse it
        self.node_names = []
        self.expect = None          # ddl's own cases (own_cases.py): "pass" or "refused"
        self.want = None
        self.expected = None


def na(case, why):
    case.status, case.why = "n/a", why
    return None


def rewrite(case, m, inputs, expected, where):
    """the case in ddl's form, saved in where; (model path, image name, image array) or None (n/a)."""
    g = m.graph
    inits = {t.name for t in g.initializer}
    ins = [v for v in g.input if v.name not in inits]
    if len(ins) != len(inputs):
        return na(case, "inputs and input files differ in number")
    img = next((i for i, a in enumerate(inputs) if a.dtype == np.float32), None)
    if img is None:
        return na(case, "no float32 input (ddl takes float images)")
    if expected[0].dtype != np.float32:
        return na(case, "output of type %s (ddl's are float32)" % expected[0].dtype)
    ops = [n.op_type for n in g.node]
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Dropout" and len(n.input) > 2 and n.input[2]:
            k = [v.name for v in ins].index(n.input[2]) if n.input[2] in [v.name for v in ins] else -1
            ratio = 0.5
            if len(n.input) > 1 and n.input[1] in [v.name for v in ins]:
                ratio = float(inputs[[v.name for v in ins].index(n.input[1])])
            if k >= 0 and bool(inputs[k]) and ratio > 0:
                return na(case, "training_mode true: a random mask (ddl predicts in evaluation mode)")
        if n.op_type == "BatchNormalization" and attrs.get("training_mode", 0):
            return na(case, "training_mode 1: batch statistics (ddl predicts with the running ones)")
    x = inputs[img]
    xname = ins[img].name
    r = x.ndim
    new_inits = []
    consts = {}
    for i, (v, a) in enumerate(zip(ins, inputs)):
        if i != img:
            consts[v.name] = a
    nodes = list(g.node)
    prefix = []
    opset = opset_of(m)
    image = xname
    layout = False
    if r == 4:
        x4 = x
    elif r == 2 and ops[0] in ("Gemm", "MatMul") and len(ops) == 1 and nodes[0].input[0] == xname:
        x4 = x.reshape(x.shape[0], x.shape[1], 1, 1)
        prefix.append(helper.make_node("Flatten", ["ddl_image"], [xname], axis=1, name="ddl_flatten"))
        image = "ddl_image"
    elif 1 <= r < 4 and all(o in ELEMENTWISE or o in AXIS_OPS for o in ops):
        x4 = x.reshape((1,) + x.shape + (1,) * (3 - r))
        layout = True
        for k, a in consts.items():  # right-aligned broadcasting kept; a Concat's operand as the image
            if a.dtype == np.float32 and a.ndim == r:
                consts[k] = a.reshape((1,) + a.shape + (1,) * (3 - r))
            elif a.dtype == np.float32 and a.ndim > 0:
                consts[k] = a.reshape(a.shape + (1,) * (3 - r))
        fixed = []
        for n in nodes:
            if n.op_type in AXIS_OPS:
                attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
                dflt = None if n.op_type == "Concat" else -1 if opset >= 13 else 1
                ax = attrs.get("axis", dflt)
                if ax is None:
                    return na(case, "Concat without an axis")
                n = helper.make_node(n.op_type, list(n.input), list(n.output), name=n.name, axis=ax % r + 1)
            fixed.append(n)
        nodes = fixed
    else:
        x4 = x
        case.keep_rank = True
    if not case.keep_rank and not any(o in PARAM_OPS for o in ops):
        # a ddl model has a layer to train: a 1x1 identity convolution (exact) before the node
        c = x4.shape[1]
        eye = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
        new_inits.append(numpy_helper.from_array(eye, "ddl_identity"))
        prefix.append(helper.make_node("Conv", ["ddl_image", "ddl_identity"], [xname], kernel_shape=[1, 1],
                                       name="ddl_identity_conv"))
        image = "ddl_image"
    for k, a in consts.items():
        new_inits.append(numpy_helper.from_array(np.array(a, order="C"), k))  # 0-d stays 0-d
    want = expected[0]
    if layout and want.ndim == r:  # the output as the image was laid out
        want = want.reshape((1,) + want.shape + (1,) * (3 - r))
    outs = [g.output[0]]
    if not case.keep_rank and want.ndim in (2, 4) and want.shape[1] == 1:
        # ddl's models have 2 or more output channels: the output twice, side by side
        nodes = nodes + [helper.make_node("Concat", [outs[0].name, outs[0].name], ["ddl_twice"], axis=1,
                                          name="ddl_twice")]
        outs = [helper.make_tensor_value_info("ddl_twice", outs[0].type.tensor_type.elem_type, None)]
        want = np.concatenate([want, want], axis=1)
    case.want = want
    shape = list(x4.shape)
    img_vi = helper.make_tensor_value_info(image, onnx.TensorProto.FLOAT, shape)
    del outs[0].type.tensor_type.shape.dim[:]  # its shape may change with the rewrite
    graph = helper.make_graph(prefix + nodes, "ddl_" + case.name, [img_vi], outs,
                              initializer=list(g.initializer) + new_inits)
    imports = list(m.opset_import)
    if opset < 7 and all(o in SAME_AT_7 for o in ops):  # the same op at opset 7, which ddl reads
        imports = [helper.make_opsetid("", 7) if o.domain in ("", "ai.onnx") else o for o in imports]
    m2 = helper.make_model(graph, opset_imports=imports, ir_version=m.ir_version)
    path = os.path.join(where, "model.onnx")
    onnx.save(m2, path)
    case.node_names = [n.name or "(unnamed, output %s)" % n.output[0] for n in nodes + prefix]
    return path, image, np.ascontiguousarray(x4, dtype=np.float32)


def compare(got, want):
    """max |got - want| over max |want| (absolute when want is all 0); inf on a size mismatch."""
    want = want.astype(np.float64).ravel()
    got = got.astype(np.float64).ravel()
    if got.size != want.size:
        return float("inf")
    if not np.all(np.isfinite(want) == np.isfinite(got)):
        return float("inf")
    f = np.isfinite(want)
    if not np.array_equal(got[~f], want[~f]):
        return float("inf")
    scale = np.max(np.abs(want[f])) if f.any() else 0.0
    d = np.max(np.abs(got[f] - want[f])) if f.any() else 0.0
    return d / scale if scale > 0 else d


def channel_softmax(y, log):
    z = y - y.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    return z - np.log(s) if log else e / s


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    here = os.path.dirname(os.path.abspath(__file__))
    runner = os.path.join(build, "tests", "test_infer")
    tmp = tempfile.mkdtemp(prefix="ddl-nodes-")
    try:
        return run(here, runner, tmp, build)
    finally:
        if not os.environ.get("KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def run(here, runner, tmp, build):
    """generated once per onnx version into BUILD/onnx-node-tests-VERSION (12 s on a busy machine)"""
    t0 = time.time()
    import contextlib
    import io
    gen = os.path.join(build, "onnx-node-tests-" + onnx.__version__)
    if not os.path.isdir(os.path.join(gen, "node")):
        part = gen + ".part-%d" % os.getpid()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            generate(part)
        shutil.rmtree(gen, ignore_errors=True)
        os.rename(part, gen)
    t_gen = time.time() - t0
    root = os.path.join(gen, "node")
    cases, ort_list, ddl_list = [], [], []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        m = onnx.load(os.path.join(d, "model.onnx"))
        ops = [n.op_type for n in m.graph.node]
        main_ops = [o for o in ops if o not in HELPERS]
        if not main_ops or not all(o in OPS for o in main_ops):
            continue
        case = Case(name, main_ops[0])
        cases.append(case)
        data = os.path.join(d, "test_data_set_0")
        try:
            inputs, expected = tensors(data, "input"), tensors(data, "output")
        except Exception:  # a sequence or an optional, not a tensor
            na(case, "inputs or outputs that are no tensors")
            continue
        case.expected = expected[0] if expected else None
        where = os.path.join(tmp, "cases", name)
        os.makedirs(where)
        try:
            r = rewrite(case, m, inputs, expected, where)
        except Exception as e:  # a case the rewrite does not know how to take
            r = na(case, "rewrite: %s" % e)
        if r is None:
            continue
        path, xname, x = r
        case.path = path
        x.tofile(os.path.join(where, "x.f32"))
        ort_list.append("%s %s %s %s %s" % (path, xname, os.path.join(where, "x.f32"),
                                            ",".join(str(v) for v in x.shape), os.path.join(where, "ort.f32")))
        case.where = where
    sys.path.insert(0, here)
    import own_cases
    for name, op, expect, m, x in own_cases.cases():
        case = Case(name, op)
        case.expect = expect
        cases.append(case)
        case.where = os.path.join(tmp, "cases", name)
        os.makedirs(case.where)
        case.path = os.path.join(case.where, "model.onnx")
        onnx.save(m, case.path)
        case.node_names = [n.name for n in m.graph.node]
        x.tofile(os.path.join(case.where, "x.f32"))
        ort_list.append("%s x %s %s %s" % (case.path, os.path.join(case.where, "x.f32"),
                                           ",".join(str(v) for v in x.shape), os.path.join(case.where, "ort.f32")))
    t_rw = time.time() - t0
    # onnxruntime on every rewrite
    lf = os.path.join(tmp, "ort.txt")
    with open(lf, "w") as f:
        f.write("\n".join(ort_list) + "\n")
    p = subprocess.run(["node", os.path.join(here, "run_ort.js"), lf], capture_output=True, text=True)
    if p.returncode == 2 or p.stdout.startswith("skipped"):
        print(p.stdout.strip() or "skipped: onnxruntime-node cannot load")
        print("0 passed, 0 failed")
        return 0
    ort_lines = p.stdout.splitlines()
    run_cases = [c for c in cases if c.status is None]
    if len(ort_lines) != len(run_cases):
        print("onnxruntime: %d answers to %d cases: %s" % (len(ort_lines), len(run_cases), p.stderr[-500:]))
        print("0 passed, 1 failed")
        return 1
    for c, line in zip(run_cases, ort_lines):
        if c.expect and line.startswith("ok "):  # ddl's own: onnxruntime's answer is the reference
            c.want = np.fromfile(os.path.join(c.where, "ort.f32"), dtype=np.float32)
            continue
        if c.expect:
            c.ort_error = line[6:][:150]
            continue
        if not line.startswith("ok "):
            if not c.keep_rank:
                na(c, "onnxruntime cannot run the rewrite: %s" % line[6:][:150])
            continue
        got = np.fromfile(os.path.join(c.where, "ort.f32"), dtype=np.float32)
        d = compare(got, c.want)
        if d > TOL:
            na(c, "the rewrite is not the case (onnxruntime's output differs by %.3g of its scale)" % d)
        else:
            c.ort_ok = True
    t_ort = time.time() - t0
    # ddl on every rewrite, one process
    judged = [c for c in cases if c.status is None]
    with open(os.path.join(tmp, "ddl.txt"), "w") as f:
        for c in judged:
            f.write("%s %s %s\n" % (c.path, os.path.join(c.where, "x.f32"), os.path.join(c.where, "ddl.f32")))
    p = subprocess.run([runner, "--onnx-cases", os.path.join(tmp, "ddl.txt")], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    if p.returncode != 0 or len(lines) != len(judged):
        print("ddl: %d answers to %d cases (exit %d): %s" % (len(lines), len(judged), p.returncode, p.stderr[-800:]))
        print("0 passed, 1 failed")
        return 1
    for c, line in zip(judged, lines):
        if line.startswith("refused "):
            c.status, c.why = "refused", line[8:]
            continue
        if c.want is None:
            c.status, c.why = "WRONG", "ddl ran what onnxruntime refuses: %s" % getattr(c, "ort_error", "")
            continue
        if c.keep_rank:
            c.status, c.why = "WRONG", "ddl took a %d-D input as 4-D" % c.expected.ndim
            continue
        _, ch, h, w, sm = line.split()
        y = np.fromfile(os.path.join(c.where, "ddl.f32"), dtype=np.float32)
        n = y.size // max(1, int(ch) * int(h) * int(w))
        if int(sm):
            y = channel_softmax(y.reshape(n, int(ch), int(h), int(w)).astype(np.float64), int(sm) == 2)
        d = compare(y, c.want)
        if d <= TOL:
            c.status, c.why = "pass", "%.2g" % d
        else:
            c.status, c.why = "WRONG", "differs by %.3g of the output's scale (ddl %s, expected %s)" % (
                d, "x".join((str(n), ch, h, w)), "x".join(str(v) for v in c.want.shape))
    t_ddl = time.time() - t0
    return report(here, cases, (t_gen, t_rw, t_ort, t_ddl))


def report(here, cases, times):
    with open(os.path.join(here, "node_pass.txt")) as f:
        want = {l.split("#")[0].strip() for l in f} - {""}
    passed = failed = 0
    for c in cases:
        named = c.status != "refused" or any("node %s" % n[:24] in c.why for n in c.node_names) or any(
            w in " " + c.why for w in (" input ", " opset "))
        bad = c.status == "WRONG" or not named or (c.name in want and c.status != "pass")
        bad = bad or (c.expect is not None and c.status != c.expect)
        note = " (expected to pass)" if c.name in want and c.status != "pass" else ""
        note += " (expected: %s)" % c.expect if c.expect and c.status != c.expect else ""
        note += " (the refusal names no node)" if not named else ""
        print("%-8s %-58s %s%s" % (c.status if not bad or c.status == "WRONG" else "FAIL", c.name, c.why[:200], note))
        if c.status in ("pass", "refused", "WRONG"):
            passed += not bad
            failed += bad
    unknown = want - {c.name for c in cases}
    for u in sorted(unknown):
        print("FAIL     %-58s in node_pass.txt but not a node test of this onnx" % u)
        failed += 1
    print()
    print("%-22s %5s %8s %6s %5s" % ("op", "pass", "refused", "WRONG", "n/a"))
    by = {}
    for c in cases:
        by.setdefault(c.op, {"pass": 0, "refused": 0, "WRONG": 0, "n/a": 0})[c.status] += 1
    tot = {"pass": 0, "refused": 0, "WRONG": 0, "n/a": 0}
    for op in sorted(by):
        s = by[op]
        for k in tot:
            tot[k] += s[k]
        print("%-22s %5d %8d %6d %5d" % (op, s["pass"], s["refused"], s["WRONG"], s["n/a"]))
    print("%-22s %5d %8d %6d %5d" % ("total", tot["pass"], tot["refused"], tot["WRONG"], tot["n/a"]))
    print("seconds: generate (or find in build/) %.1f, rewrite %.1f, onnxruntime %.1f, ddl %.1f" % (
        times[0], times[1] - times[0], times[2] - times[1], times[3] - times[2]))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
