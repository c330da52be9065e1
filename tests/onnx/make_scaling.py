"""make_scaling.py DIR - two small classifiers of (N, 3, 16, 16) photos into 3 classes for
tests/test_onnx_nodes.sh (input scaling that says what it does):
  plain.onnx  no normalisation of its own (raw pixels in), a per-channel Mul and Add after its first
              Conv (an affine layer in ddl)
  own.onnx    the same after torchvision's normalisation (x / 255 - mean) / std per channel"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(5)


def arr(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def net(path, prefix, first):
    inits = [arr("c1.weight", rng.normal(0, 0.05, (6, 3, 3, 3))), arr("c1.bias", rng.normal(0, 0.1, 6)),
             arr("s", [[[[1.5]], [[0.5]], [[-1.0]], [[2.0]], [[1.0]], [[0.25]]]]), arr("t", np.linspace(-1, 1, 6).reshape(6, 1, 1)),
             arr("fc.weight", rng.normal(0, 0.3, (3, 6))), arr("fc.bias", np.zeros(3)),
             arr("k255", 255.0), arr("mean", np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)),
             arr("std", np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1))]
    nodes = prefix + [
        helper.make_node("Conv", [first, "c1.weight", "c1.bias"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="c1"),
        helper.make_node("Mul", ["c1", "s"], ["m"], name="scale"),
        helper.make_node("Add", ["m", "t"], ["a"], name="shift"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1, name="fc")]
    g = helper.make_graph(nodes, "scaling", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, path)


net(os.path.join(d, "plain.onnx"), [], "input")
net(os.path.join(d, "own.onnx"), [helper.make_node("Div", ["input", "k255"], ["x1"], name="div255"),
                                  helper.make_node("Sub", ["x1", "mean"], ["x2"], name="sub_mean"),
                                  helper.make_node("Div", ["x2", "std"], ["x"], name="div_std")], "x")
