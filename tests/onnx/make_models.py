"""make_models.py DIR - ONNX models built by another tool than ddl (Debian's python3-onnx, its
onnx.helper; no PyTorch), with random weights, for tests/test_onnx_import.sh:
  cnn.onnx    input (N, 3, 16, 16), the way PyTorch exports a small CNN: Conv+Relu, MaxPool,
              Conv (stride 2), a residual Add, AveragePool, ConvTranspose, Concat, GlobalAveragePool,
              Flatten, Gemm (transB=1), Dropout, MatMul + Add, Softmax at the end; opset 13
  scaled.onnx the same with a Div by 255 and a Sub on the input (pixels scaled in the model); opset 17
  bn.onnx     Conv, BatchNormalization (epsilon 1e-3, momentum 0.8), Relu, Flatten, Gemm: imported
  bn_train.onnx  the same as a training-mode export writes it (training_mode 1, three outputs); opset 15
  bn_read.onnx   a node that reads the running mean a training-mode BatchNormalization outputs: refused
  bn_attr.onnx   a BatchNormalization with an attribute ddl does not know: refused, named with its value
  dyn.onnx    a Reshape to a shape of Shape and Gather alone (a scalar, no Unsqueeze or Concat): refused, named"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(7)


def w(name, *shape, scale=None):
    fan = np.prod(shape[1:]) if len(shape) > 1 else shape[0]
    a = rng.normal(0, scale or np.sqrt(2.0 / fan), shape).astype(np.float32)
    return numpy_helper.from_array(a, name)


def cnn(prefix_nodes, first, opset, path, extra=()):
    inits = [w("conv1.weight", 8, 3, 3, 3), w("conv1.bias", 8, scale=0.1), w("conv2.weight", 8, 8, 3, 3),
             w("up.weight", 8, 4, 2, 2), w("up.bias", 4, scale=0.1), w("head.weight", 8, 12, 1, 1),
             w("fc1.weight", 16, 8), w("fc1.bias", 16, scale=0.1), w("fc2.weight", 16, 5), w("fc2.bias", 5, scale=0.1)]
    nodes = list(prefix_nodes) + [
        helper.make_node("Conv", [first, "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),  # 8x8x8
        helper.make_node("Conv", ["p1", "conv2.weight"], ["c2"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Add", ["r2", "p1"], ["res"]),                                   # residual
        helper.make_node("ConvTranspose", ["res", "up.weight", "up.bias"], ["u"], strides=[2, 2],
                         kernel_shape=[2, 2]),                                              # 4x16x16
        helper.make_node("Concat", ["r1", "u"], ["cat"], axis=1),                         # 12x16x16
        helper.make_node("Conv", ["cat", "head.weight"], ["h"], kernel_shape=[1, 1]),      # 8x16x16
        helper.make_node("AveragePool", ["h"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["a"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc1.weight", "fc1.bias"], ["d1"], transB=1),
        helper.make_node("Relu", ["d1"], ["r3"]),
        helper.make_node("Dropout", ["r3"], ["dr"]),
        helper.make_node("MatMul", ["dr", "fc2.weight"], ["mm"]),
        helper.make_node("Add", ["mm", "fc2.bias"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ] + list(extra)
    out = "probs"
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", 5]),
                           helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])], inits)
    m = helper.make_model(g, producer_name="onnx.helper", opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    save(m, path)


cnn([], "input", 13, os.path.join(d, "cnn.onnx"))
k255 = numpy_helper.from_array(np.array(255.0, np.float32), "k255")
mean = numpy_helper.from_array(np.array(0.5, np.float32), "mean")
cnn([helper.make_node("Constant", [], ["k255c"], value=k255), helper.make_node("Div", ["input", "k255c"], ["s"]),
     helper.make_node("Constant", [], ["meanc"], value=mean), helper.make_node("Sub", ["s", "meanc"], ["x"])],
    "x", 17, os.path.join(d, "scaled.onnx"))

# BatchNormalization: the running statistics as initializers (a positive variance)
bn_inits = [w("cw", 4, 3, 3, 3), w("bn1.weight", 4), w("bn1.bias", 4), w("bn1.running_mean", 4, scale=2.0),
            numpy_helper.from_array(rng.uniform(0.5, 3.0, 4).astype(np.float32), "bn1.running_var"),
            w("fw", 5, 4 * 14 * 14)]
for name, opset, bn_out, attrs, tail in (
        ("bn", 13, ["bn"], {"epsilon": 1e-3, "momentum": 0.8}, []),
        ("bn_train", 15, ["bn", "rm", "rv"], {"epsilon": 1e-3, "momentum": 0.8, "training_mode": 1}, []),
        ("bn_read", 15, ["bn", "rm", "rv"], {"training_mode": 1}, [helper.make_node("Add", ["f", "rm"], ["f2"])]),
        ("bn_attr", 13, ["bn"], {"foo": 3}, [])):
    nodes = [helper.make_node("Conv", ["input", "cw"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("BatchNormalization", ["c", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                                     "bn1.running_var"], bn_out, name="bn1", **attrs),
             helper.make_node("Relu", ["bn"], ["r"]), helper.make_node("Flatten", ["r"], ["f"])] + tail + [
             helper.make_node("Gemm", ["f2" if tail else "f", "fw"], ["logits"], transB=1)]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])], bn_inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    save(m, os.path.join(d, name + ".onnx"))

# refused ones
for name, nodes, inits in (
        ("dyn", [helper.make_node("Shape", ["input"], ["sh"]),
                 helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
                 helper.make_node("Reshape", ["input", "n"], ["f"]),
                 helper.make_node("Gemm", ["f", "fw"], ["out"], transB=1)],
         [numpy_helper.from_array(np.array(0, np.int64), "zero"), w("fw", 5, 768)]),):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, os.path.join(d, name + ".onnx"))
