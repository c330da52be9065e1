"""torch_layout.py DIR - small ONNX files laid out as torch.onnx.export writes them, written with
python3-onnx (no PyTorch needed): node names "/conv1/Conv", outputs "/conv1/Conv_output_0",
initializers "conv1.weight" and "onnx::Gemm_12", Constant nodes for scalars and shapes, the Pad
of zeros before avg_pool2d (opset 13: pads as an input; opset 7-10: as an attribute), Flatten or
Reshape to (-1, K), Gemm with transB 1, Identity for a weight used twice, a last Softmax. For
the fuzzers' seed corpus (tests/fuzz/corpus/fuzz_onnx, fuzz_infer): each file a few KiB.
  torch_cnn13.onnx   opset 13: pixels / 255 - 0.5, Conv+Relu, MaxPool, Pad + AveragePool,
                     Flatten, Gemm, Relu, Gemm, Softmax
  torch_cnn17.onnx   opset 17: the same with a Reshape (-1, 32) of a Constant shape
  torch_unet11.onnx  opset 11: a U-Net step, Conv, MaxPool, ConvTranspose, Concat, Conv 1x1,
                     GlobalAveragePool, Flatten, MatMul + Add
  torch_res9.onnx    opset 9: a residual Add, Dropout, Pad of zeros with pads as an attribute,
                     an Identity of a weight"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(11)


def w(name, *shape):
    fan = np.prod(shape[1:]) if len(shape) > 1 else shape[0]
    return numpy_helper.from_array(rng.normal(0, np.sqrt(2.0 / fan), shape).astype(np.float32), name)


def const(name, value, dtype=np.float32):
    t = numpy_helper.from_array(np.array(value, dtype), name + "_value")
    return helper.make_node("Constant", [], [name], name=name.replace("_output_0", ""), value=t)


def n(op, mod, ins, **attrs):
    """A node named as PyTorch names it: /mod/Op, its output /mod/Op_output_0."""
    return helper.make_node(op, ins, ["/%s/%s_output_0" % (mod, op)], name="/%s/%s" % (mod, op), **attrs)


def o(op, mod):
    return "/%s/%s_output_0" % (mod, op)


def save_model(nodes, inits, c, h, classes, opset, path, out="logits"):
    nodes[-1].output[0] = out
    g = helper.make_graph(nodes, "main_graph",
                          [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", c, h, h])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", classes])], inits)
    m = helper.make_model(g, producer_name="pytorch", producer_version="2.1.0",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 13 else 8
    save(m, os.path.join(d, path))


def cnn(opset, reshape):
    inits = [w("conv1.weight", 4, 3, 3, 3), w("conv1.bias", 4), w("onnx::Gemm_fc1_w", 8, 16),
             w("fc1.bias", 8), w("fc2.weight", 3, 8), w("fc2.bias", 3)]
    nodes = [const("/Constant_output_0", 255.0),
             helper.make_node("Div", ["pixels", "/Constant_output_0"], ["/Div_output_0"], name="/Div"),
             const("/Constant_1_output_0", 0.5),
             helper.make_node("Sub", ["/Div_output_0", "/Constant_1_output_0"], ["/Sub_output_0"], name="/Sub"),
             n("Conv", "conv1", ["/Sub_output_0", "conv1.weight", "conv1.bias"], dilations=[1, 1], group=1,
               kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
             n("Relu", "relu", [o("Conv", "conv1")]),
             n("MaxPool", "pool", [o("Relu", "relu")], ceil_mode=0, kernel_shape=[2, 2], pads=[0, 0, 0, 0],
               strides=[2, 2]),  # 4x4x4
             const("/avg/Constant_output_0", [0, 0, 0, 0, 0, 0, 0, 0], np.int64),
             n("Pad", "avg", [o("MaxPool", "pool"), "/avg/Constant_output_0"], mode="constant"),
             n("AveragePool", "avg", [o("Pad", "avg")], ceil_mode=0, count_include_pad=1, kernel_shape=[2, 2],
               pads=[0, 0, 0, 0], strides=[2, 2])]  # 4x2x2 = 16
    if reshape:
        nodes += [const("/Constant_2_output_0", [-1, 16], np.int64),
                  n("Reshape", "flat", [o("AveragePool", "avg"), "/Constant_2_output_0"])]
        flat = o("Reshape", "flat")
    else:
        nodes += [n("Flatten", "flat", [o("AveragePool", "avg")], axis=1)]
        flat = o("Flatten", "flat")
    nodes += [n("Gemm", "fc1", [flat, "onnx::Gemm_fc1_w", "fc1.bias"], alpha=1.0, beta=1.0, transB=1),
              n("Relu", "relu_1", [o("Gemm", "fc1")]),
              n("Gemm", "fc2", [o("Relu", "relu_1"), "fc2.weight", "fc2.bias"], alpha=1.0, beta=1.0, transB=1),
              helper.make_node("Softmax", ["logits"], ["probs"], name="/Softmax", axis=1)]
    nodes[-2].output[0] = "logits"
    g = helper.make_graph(nodes, "main_graph",
                          [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 3])], inits)
    m = helper.make_model(g, producer_name="pytorch", producer_version="2.1.0",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    save(m, os.path.join(d, "torch_cnn%d.onnx" % opset))


def unet():
    inits = [w("enc.weight", 4, 1, 3, 3), w("enc.bias", 4), w("up.weight", 4, 2, 2, 2), w("up.bias", 2),
             w("head.weight", 3, 6, 1, 1), w("head.bias", 3), w("onnx::MatMul_30", 3, 3), w("fc.bias", 3)]
    nodes = [n("Conv", "enc", ["pixels", "enc.weight", "enc.bias"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", "enc_relu", [o("Conv", "enc")]),
             n("MaxPool", "down", [o("Relu", "enc_relu")], kernel_shape=[2, 2], strides=[2, 2]),
             n("ConvTranspose", "up", [o("MaxPool", "down"), "up.weight", "up.bias"], kernel_shape=[2, 2],
               strides=[2, 2]),
             n("Concat", "cat", [o("Relu", "enc_relu"), o("ConvTranspose", "up")], axis=1),
             n("Conv", "head", [o("Concat", "cat"), "head.weight", "head.bias"], kernel_shape=[1, 1]),
             n("GlobalAveragePool", "gap", [o("Conv", "head")]),
             n("Flatten", "flat", [o("GlobalAveragePool", "gap")], axis=1),
             n("MatMul", "fc", [o("Flatten", "flat"), "onnx::MatMul_30"]),
             n("Add", "fc", [o("MatMul", "fc"), "fc.bias"])]
    save_model(nodes, inits, 1, 8, 3, 11, "torch_unet11.onnx")


def res():
    inits = [w("conv1.weight", 4, 1, 3, 3), w("conv1.bias", 4), w("conv2.weight", 4, 4, 3, 3),
             w("fc.weight", 2, 4), w("fc.bias", 2)]
    nodes = [n("Conv", "conv1", ["pixels", "conv1.weight", "conv1.bias"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Relu", "r1", [o("Conv", "conv1")]),
             helper.make_node("Identity", ["conv2.weight"], ["onnx::Conv_shared"], name="/Identity"),
             n("Conv", "conv2", [o("Relu", "r1"), "onnx::Conv_shared"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Add", "add", [o("Conv", "conv2"), o("Relu", "r1")]),
             n("Pad", "pad", [o("Add", "add")], mode="constant", pads=[0, 0, 0, 0, 0, 0, 0, 0]),
             n("AveragePool", "pool", [o("Pad", "pad")], kernel_shape=[2, 2], strides=[2, 2]),
             n("GlobalAveragePool", "gap", [o("AveragePool", "pool")]),
             n("Flatten", "flat", [o("GlobalAveragePool", "gap")], axis=1),
             n("Dropout", "drop", [o("Flatten", "flat")], ratio=0.5),
             n("Gemm", "fc", [o("Dropout", "drop"), "fc.weight", "fc.bias"], transB=1)]
    save_model(nodes, inits, 1, 6, 2, 9, "torch_res9.onnx")


cnn(13, False)
cnn(17, True)
unet()
res()
