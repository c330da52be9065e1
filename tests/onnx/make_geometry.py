"""make_geometry.py DIR - ONNX models (python3-onnx's onnx.helper, random weights) of every
convolution and pooling attribute ddl takes, for tests/test_onnx_geometry.sh; each ends in
GlobalAveragePool, Flatten and a Gemm to 5 "logits":
  conv.onnx    input (N, 3, 15, 17): Conv 3x5 with strides (2, 1), pads (1, 2, 0, 1) and dilations
               (1, 2); Conv group 2 auto_pad SAME_UPPER stride 2; Conv 4x4 SAME_LOWER; Conv VALID
  dwsep.onnx   input (N, 3, 16, 16), MobileNetV2's depthwise-separable blocks: 1x1 expand, Relu,
               depthwise 3x3 (group = channels) stride 2, Relu, 1x1 project; the same at stride 1
               with a residual Add; a depthwise 2x2 Conv of multiplier 2 with SAME_LOWER
  convt.onnx   input (N, 3, 6, 7): ConvTranspose 3x3 stride 2 pads 1 output_padding 1; 2x3 strides
               (2, 3) pads (0, 1, 1, 0) dilations (2, 1); one sized by output_shape; one SAME_UPPER
  pool.onnx    input (N, 3, 15, 17): MaxPool 3x2 strides (2, 1) pads (1, 0, 1, 1) dilations (1, 2)
               ceil_mode; MaxPool SAME_UPPER; AveragePool pads 1 with ceil_mode (padding not counted),
               then counted; AveragePool SAME_LOWER
  padfold.onnx a Pad of zeros before a Conv and before an AveragePool (PyTorch's AvgPool2d with
               padding), folded into their pads
and the refused ones, each for one attribute value: convt_group, odd_output_shape, storage_order,
ceil_drop, max_indices, avg_dilations, auto_pad_bad, ceil_count_pad, pad_maxpool."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(11)


def w(name, *shape, scale=None):
    fan = np.prod(shape[1:]) if len(shape) > 1 else shape[0]
    a = rng.normal(0, scale or np.sqrt(2.0 / fan), shape).astype(np.float32)
    return numpy_helper.from_array(a, name)


def model(name, c, h, wd, nodes, inits, last, channels, opset=13):
    """the nodes, then GlobalAveragePool, Flatten, Gemm to 5 logits"""
    nodes = nodes + [helper.make_node("GlobalAveragePool", [last], ["gap"]),
                     helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
                     helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1)]
    inits = inits + [w("fc.weight", 5, channels), w("fc.bias", 5, scale=0.1)]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", c, h, wd])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])], inits)
    m = helper.make_model(g, producer_name="onnx.helper", opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    save(m, os.path.join(d, name + ".onnx"))


N = helper.make_node
# inputs are raw pixels 0..255: a first scale keeps the activations near 1
scale = [numpy_helper.from_array(np.array(1 / 255.0, np.float32), "k")]

model("conv", 3, 15, 17, [
    N("Mul", ["input", "k"], ["x"]),
    N("Conv", ["x", "c1.weight", "c1.bias"], ["c1"], kernel_shape=[3, 5], strides=[2, 1], pads=[1, 2, 0, 1],
      dilations=[1, 2]),                                                             # 8 x 7 x 12
    N("Relu", ["c1"], ["r1"]),
    N("Conv", ["r1", "c2.weight", "c2.bias"], ["c2"], group=2, strides=[2, 2], auto_pad="SAME_UPPER"),  # 6 x 4 x 6
    N("Relu", ["c2"], ["r2"]),
    N("Conv", ["r2", "c3.weight"], ["c3"], kernel_shape=[4, 4], auto_pad="SAME_LOWER"),  # 6 x 4 x 6
    N("Conv", ["c3", "c4.weight", "c4.bias"], ["c4"], auto_pad="VALID"),             # 7 x 2 x 4
], scale + [w("c1.weight", 8, 3, 3, 5), w("c1.bias", 8, scale=0.1), w("c2.weight", 6, 4, 3, 3),
            w("c2.bias", 6, scale=0.1), w("c3.weight", 6, 6, 4, 4), w("c4.weight", 7, 6, 3, 3),
            w("c4.bias", 7, scale=0.1)], "c4", 7)

model("dwsep", 3, 16, 16, [
    N("Mul", ["input", "k"], ["x"]),
    N("Conv", ["x", "stem.weight", "stem.bias"], ["s"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),      # 8 x 16 x 16
    N("Relu", ["s"], ["s1"]),
    N("Conv", ["s1", "a.expand.weight"], ["a1"], kernel_shape=[1, 1]),                             # 24 x 16 x 16
    N("Relu", ["a1"], ["a2"]),
    N("Conv", ["a2", "a.dw.weight", "a.dw.bias"], ["a3"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
      group=24),                                                                        # 24 x 8 x 8
    N("Relu", ["a3"], ["a4"]),
    N("Conv", ["a4", "a.project.weight"], ["a5"], kernel_shape=[1, 1]),                            # 12 x 8 x 8
    N("Conv", ["a5", "b.expand.weight"], ["b1"], kernel_shape=[1, 1]),                             # 36 x 8 x 8
    N("Relu", ["b1"], ["b2"]),
    N("Conv", ["b2", "b.dw.weight", "b.dw.bias"], ["b3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=36),
    N("Relu", ["b3"], ["b4"]),
    N("Conv", ["b4", "b.project.weight"], ["b5"], kernel_shape=[1, 1]),                            # 12 x 8 x 8
    N("Add", ["b5", "a5"], ["res"]),
    N("Conv", ["res", "m.weight", "m.bias"], ["m"], kernel_shape=[2, 2], group=12,
      auto_pad="SAME_LOWER"),                                                           # 24 x 8 x 8, pads 1,1,0,0
], scale + [w("stem.weight", 8, 3, 3, 3), w("stem.bias", 8, scale=0.1), w("a.expand.weight", 24, 8, 1, 1),
            w("a.dw.weight", 24, 1, 3, 3), w("a.dw.bias", 24, scale=0.1), w("a.project.weight", 12, 24, 1, 1),
            w("b.expand.weight", 36, 12, 1, 1), w("b.dw.weight", 36, 1, 3, 3), w("b.dw.bias", 36, scale=0.1),
            w("b.project.weight", 12, 36, 1, 1), w("m.weight", 24, 1, 2, 2), w("m.bias", 24, scale=0.1)], "m", 24)

model("convt", 3, 6, 7, [
    N("Mul", ["input", "k"], ["x"]),
    N("ConvTranspose", ["x", "t1.weight", "t1.bias"], ["t1"], kernel_shape=[3, 3], strides=[2, 2],
      pads=[1, 1, 1, 1], output_padding=[1, 1]),                                        # 4 x 12 x 14
    N("Relu", ["t1"], ["r1"]),
    N("ConvTranspose", ["r1", "t2.weight"], ["t2"], strides=[2, 3], pads=[0, 1, 1, 0], dilations=[2, 1]),
                                                                                        # 4 x 24 x 41
    N("ConvTranspose", ["t2", "t3.weight", "t3.bias"], ["t3"], strides=[2, 2], output_shape=[47, 81]),  # pads 1
    N("ConvTranspose", ["t3", "t4.weight", "t4.bias"], ["t4"], strides=[2, 2], auto_pad="SAME_UPPER"),  # 94 x 162
], scale + [w("t1.weight", 3, 4, 3, 3), w("t1.bias", 4, scale=0.1), w("t2.weight", 4, 4, 2, 3),
            w("t3.weight", 4, 3, 3, 3), w("t3.bias", 3, scale=0.1), w("t4.weight", 3, 5, 4, 4),
            w("t4.bias", 5, scale=0.1)], "t4", 5)

model("pool", 3, 15, 17, [
    N("Mul", ["input", "k"], ["x"]),
    N("Conv", ["x", "c.weight", "c.bias"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),        # 6 x 15 x 17
    N("MaxPool", ["c"], ["m1"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2],
      ceil_mode=1),                                                                     # 6 x 8 x 16
    N("MaxPool", ["m1"], ["m2"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),  # 6 x 4 x 8
    N("AveragePool", ["m2"], ["a1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),  # 3 x 5
    N("AveragePool", ["a1"], ["a2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),  # 6 x 3 x 5
    N("AveragePool", ["a2"], ["a3"], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"),  # 6 x 2 x 3
], scale + [w("c.weight", 6, 3, 3, 3), w("c.bias", 6, scale=0.1)], "a3", 6)


def refused(name, node, inits, c=4, h=9, wd=9, extra=()):
    model(name, c, h, wd, [node] + list(extra), inits, "y", 4)


refused("convt_group", N("ConvTranspose", ["input", "t.weight"], ["y"], group=2), [w("t.weight", 4, 2, 3, 3)])
refused("odd_output_shape", N("ConvTranspose", ["input", "t.weight"], ["y"], strides=[2, 2], output_shape=[18, 19]),
        [w("t.weight", 4, 4, 3, 3)])
refused("storage_order", N("MaxPool", ["input"], ["y"], kernel_shape=[2, 2], storage_order=1), [])
refused("ceil_drop", N("MaxPool", ["input"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                       ceil_mode=1), [], h=9, wd=9)
refused("max_indices", N("MaxPool", ["input"], ["y", "idx"], kernel_shape=[2, 2]), [])
refused("avg_dilations", N("AveragePool", ["input"], ["y"], kernel_shape=[2, 2], dilations=[2, 2]), [])
refused("auto_pad_bad", N("Conv", ["input", "c.weight"], ["y"], auto_pad="SAME"), [w("c.weight", 4, 4, 3, 3)])
refused("ceil_count_pad", N("AveragePool", ["input"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            ceil_mode=1, count_include_pad=1), [], h=10, wd=10)

# a Pad of zeros folded into the Conv and the AveragePool after it (PyTorch's AvgPool2d with
# padding writes one: count_include_pad), the Pad's pads as an input (opset 11 on)
pads = numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 0, 2, 1], np.int64), "pads")
pads2 = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads2")
model("padfold", 3, 15, 17, [
    N("Mul", ["input", "k"], ["x"]),
    N("Pad", ["x", "pads"], ["xp"], mode="constant"),                               # 3 x 18 x 18
    N("Conv", ["xp", "c.weight", "c.bias"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 0, 1]),
    N("Relu", ["c"], ["r"]),
    N("Pad", ["r", "pads2"], ["rp"]),
    N("AveragePool", ["rp"], ["a"], kernel_shape=[3, 3], strides=[2, 2]),
], scale + [pads, pads2, w("c.weight", 6, 3, 3, 3), w("c.bias", 6, scale=0.1)], "a", 6)
# a Pad of zeros before a MaxPool: the zeros would take part in the maximum; refused
g = helper.make_graph([N("Pad", ["input", "pads2"], ["p"]), N("MaxPool", ["p"], ["y"], kernel_shape=[2, 2]),
                       N("GlobalAveragePool", ["y"], ["gap"]), N("Flatten", ["gap"], ["flat"], axis=1),
                       N("Gemm", ["flat", "fc.weight"], ["logits"], transB=1)], "pad_maxpool",
                      [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 4, 9, 9])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])],
                      [pads2, w("fc.weight", 5, 4)])
mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
mp.ir_version = 8
save(mp, os.path.join(d, "pad_maxpool.onnx"))
