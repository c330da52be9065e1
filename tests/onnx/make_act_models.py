"""make_act_models.py DIR - one small ONNX model per activation layout ddl imports, written with
Debian's python3-onnx (no PyTorch), for tests/test_onnx_act.sh. Each is
    input (N, 3, 16, 16) -> Mul 1/64 -> Conv (4, 3x3, pad 1) -> THE ACTIVATION -> Conv (5, 1x1)
    -> GlobalAveragePool -> Flatten -> logits (N, 5)
(a classifier of the five fruit classes, which ddl-train can save and export), or the activation
last, its output (N, 4, 16, 16) the logits, where the name says "_out". The node layouts are
PyTorch 1.13's torch.onnx.export, as it writes them (seen once with torch installed):
  silu          Sigmoid(x) -> s, Mul(x, s)                             (nn.SiLU, every opset)
  gelu          Constant sqrt2, Div, Erf, Constant 1, Add, Mul(x, .), Constant 0.5, Mul(., 0.5)
  gelu_tanh     Mul(x, x), Mul(x, .), Mul(0.044715, .), Add(x, .), Mul(0.7978846, .), Tanh,
                Add(1, .), Mul(x, .), Mul(0.5, .)                      (nn.GELU(approximate='tanh'))
  hardswish     HardSwish (opset 14); hardswish13: HardSigmoid(alpha=1/6) + Mul (opsets before 14)
  relu6         Constant 0, Constant 6, Clip(x, min, max) (opset 11 on); relu6_9: Clip min= max=
  softmax_t     Transpose(0, 3, 2, 1), Softmax(axis=3), Transpose back: softmax(x, 1) before opset 13
and the others as single nodes (LeakyRelu, Elu, Sigmoid, Tanh, HardSigmoid, Softmax at opset 11
(coerced to 2-D) and 13 (one axis), LogSoftmax). Also other orders of GELU's Muls, a Sigmoid
that a second node reads besides the Mul, and models ddl must refuse (bad_*)."""
import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(11)
N = helper.make_node


def arr(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def const(name, v):
    """a Constant node of a float scalar, as torch.onnx writes them"""
    return N("Constant", [], [name], value=helper.make_tensor(name + "_t", TensorProto.FLOAT, [], [v]))


def model(name, body, opset=13, tail=True, out_c=5, extra_inits=()):
    """body(x) -> (nodes, output value, output channels)"""
    nodes = [N("Mul", ["input", "scale"], ["x0"]),
             N("Conv", ["x0", "c1.weight", "c1.bias"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    inits = [arr("scale", 1.0 / 64), arr("c1.weight", rng.normal(0, 0.5, (4, 3, 3, 3))),
             arr("c1.bias", rng.normal(0, 0.5, 4))] + list(extra_inits)
    body_nodes, out, c = body("c")
    nodes += body_nodes
    shape = ["N", c, 16, 16]
    if tail:  # a classifier: Conv 1x1, GlobalAveragePool, Flatten
        nodes += [N("Conv", [out, "c2.weight", "c2.bias"], ["h"], kernel_shape=[1, 1]),
                  N("GlobalAveragePool", ["h"], ["g"]), N("Flatten", ["g"], ["logits"], axis=1)]
        inits += [arr("c2.weight", rng.normal(0, 0.5, (out_c, c, 1, 1))), arr("c2.bias", rng.normal(0, 0.1, out_c))]
        shape = ["N", out_c]
    else:
        nodes.append(N("Identity", [out], ["logits"]))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, producer_name="onnx.helper", opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset >= 14 else 7
    save(m, os.path.join(d, name + ".onnx"))


def one(op, **attrs):
    return lambda x: ([N(op, [x], ["a"], **attrs)], "a", 4)


def gelu_erf(x, order="A", mul_inv=False):
    first = (N("Mul", [x, "k"], ["d"]) if mul_inv else N("Div", [x, "k"], ["d"]))
    nodes = [const("k", 1 / math.sqrt(2) if mul_inv else math.sqrt(2)), first, N("Erf", ["d"], ["e"]),
             const("one", 1.0), N("Add", ["e", "one"], ["p"]), const("half", 0.5)]
    if order == "A":    # 0.5 * (x * (1 + erf)): PyTorch 1.13
        nodes += [N("Mul", [x, "p"], ["xp"]), N("Mul", ["xp", "half"], ["a"])]
    elif order == "B":  # (x * 0.5) * (1 + erf), the Mul by 0.5 first in the file
        nodes = [const("half", 0.5), N("Mul", [x, "half"], ["hx"])] + nodes[:-1] + [N("Mul", ["hx", "p"], ["a"])]
    else:               # x * ((1 + erf) * 0.5)
        nodes += [N("Mul", ["half", "p"], ["hp"]), N("Mul", ["hp", x], ["a"])]
    return nodes, "a", 4


def gelu_tanh(x):
    return ([N("Mul", [x, x], ["sq"]), N("Mul", [x, "sq"], ["cube"]), const("kc", 0.044715),
             N("Mul", ["kc", "cube"], ["kcube"]), N("Add", [x, "kcube"], ["in"]), const("kb", math.sqrt(2 / math.pi)),
             N("Mul", ["kb", "in"], ["s"]), N("Tanh", ["s"], ["t"]), const("one", 1.0), N("Add", ["one", "t"], ["p"]),
             N("Mul", [x, "p"], ["xp"]), const("half", 0.5), N("Mul", ["half", "xp"], ["a"])], "a", 4)


def silu_shared(x):  # the Sigmoid read by the Mul and by a Concat: a sigmoid layer and a SiLU
    return ([N("Sigmoid", [x], ["s"]), N("Mul", [x, "s"], ["m"]), N("Concat", ["m", "s"], ["a"], axis=1)], "a", 8)


def relu6(x):
    return ([const("lo", 0.0), const("hi", 6.0), N("Clip", [x, "lo", "hi"], ["a"])], "a", 4)


def softmax_t(x):
    return ([N("Transpose", [x], ["t1"], perm=[0, 3, 2, 1]), N("Softmax", ["t1"], ["sm"], axis=3),
             N("Transpose", ["sm"], ["a"], perm=[0, 3, 2, 1])], "a", 4)


def dense_softmax(name):
    """GAP -> Flatten -> Gemm -> Softmax(axis=-1) -> Gemm: a softmax of a (N, F) tensor inside"""
    nodes = [N("Mul", ["input", "scale"], ["x0"]),
             N("Conv", ["x0", "c1.weight", "c1.bias"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             N("GlobalAveragePool", ["c"], ["g"]), N("Flatten", ["g"], ["f"], axis=1),
             N("Gemm", ["f", "fc1.weight", "fc1.bias"], ["h"], transB=1), N("Softmax", ["h"], ["sm"], axis=-1),
             N("Gemm", ["sm", "fc2.weight", "fc2.bias"], ["logits"], transB=1)]
    inits = [arr("scale", 1.0 / 64), arr("c1.weight", rng.normal(0, 0.5, (4, 3, 3, 3))),
             arr("c1.bias", rng.normal(0, 0.5, 4)), arr("fc1.weight", rng.normal(0, 1, (6, 4))),
             arr("fc1.bias", rng.normal(0, 0.5, 6)), arr("fc2.weight", rng.normal(0, 1, (5, 6))),
             arr("fc2.bias", rng.normal(0, 0.1, 5))]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])], inits)
    m = helper.make_model(g, producer_name="onnx.helper", opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    save(m, os.path.join(d, name + ".onnx"))


model("leaky", one("LeakyRelu", alpha=0.1))
model("sigmoid", one("Sigmoid"))
model("tanh_out", one("Tanh"), tail=False)
model("elu", one("Elu", alpha=0.7))
model("hardsigmoid", one("HardSigmoid"))  # ONNX's defaults: alpha 0.2, beta 0.5
model("silu", lambda x: ([N("Sigmoid", [x], ["s"]), N("Mul", [x, "s"], ["a"])], "a", 4))
model("silu_out", lambda x: ([N("Sigmoid", [x], ["s"]), N("Mul", ["s", x], ["a"])], "a", 4), tail=False)
model("silu_shared", silu_shared)
model("gelu", lambda x: gelu_erf(x, "A"))
model("gelu_b", lambda x: gelu_erf(x, "B", mul_inv=True))
model("gelu_c", lambda x: gelu_erf(x, "C"), opset=17)
model("gelu_tanh", gelu_tanh)
model("hardswish", one("HardSwish"), opset=14)
model("hardswish13", lambda x: ([N("HardSigmoid", [x], ["s"], alpha=1.0 / 6), N("Mul", [x, "s"], ["a"])], "a", 4))
model("relu6", relu6)
model("relu6_9", one("Clip", min=0.0, max=6.0), opset=9)
model("clip_max", lambda x: ([const("hi", 1.5), N("Clip", [x, "", "hi"], ["a"])], "a", 4), opset=12)
model("softmax1", one("Softmax", axis=1))                     # per-pixel class probabilities, inside
model("softmax11", one("Softmax", axis=1), opset=11)          # before 13: over C, H and W at once
model("softmax_t", softmax_t, opset=11)                       # PyTorch's softmax(x, 1) before 13
model("logsoftmax_out", one("LogSoftmax", axis=-1), tail=False)  # the last axis, the output
dense_softmax("softmax_dense")
# refused: an Erf outside GELU's layout, a broken GELU (its constant 2 where sqrt 2 is), axis 0
model("bad_erf", lambda x: ([N("Erf", [x], ["a"])], "a", 4))
model("bad_gelu", lambda x: ([const("k", 2.0), N("Div", [x, "k"], ["d"]), N("Erf", ["d"], ["e"]), const("one", 1.0),
                              N("Add", ["e", "one"], ["p"]), N("Mul", [x, "p"], ["xp"]), const("half", 0.5),
                              N("Mul", ["xp", "half"], ["a"])], "a", 4))
model("bad_axis", one("Softmax", axis=0))
