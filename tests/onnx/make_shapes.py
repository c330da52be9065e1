"""make_shapes.py DIR - ONNX models laid out node for node as torch 1.13's torch.onnx.export
writes them (names, Constant nodes, the shape arithmetic), built with python3-onnx alone, for
tests/test_onnx_shapes.sh. Input (N, 3, 16, 16), random weights, logits out:
  up_nearest.onnx   opset 13: nn.Upsample(scale_factor=2) (Resize nearest, asymmetric, floor,
                    scales from a Constant, roi ''), then x.view(x.size(0), -1) (Shape, Gather,
                    Unsqueeze with its axes as an input, Concat, Reshape) and a Linear
  up_bilinear.onnx  opset 11: bilinear, align_corners=True (roi an empty Constant); bilinear,
                    align_corners=False at scale 1.5; F.interpolate(size=(7, 5)) (sizes from
                    Shape, Slice, Concat); nearest at 0.5; torch.flatten(x, 1); a Gemm whose bias
                    is (1, 5)
  up_sizes.onnx     opset 17: F.interpolate(size=(9, 11), mode='nearest') and bilinear to
                    (12, 10) (roi and scales ''), Upsample's form of opset 9 absent; a Gemm with a
                    scalar bias
  upsample9.onnx    opset 9: Upsample nearest x2 and bilinear x2 (scales as an input, asymmetric)
  resize10.onnx     opset 10: Resize nearest by (0.75, 0.5) (rounding up, as onnxruntime reads
                    opset 10), then linear by (2.5, 3)
  gn.onnx           opset 13: nn.GroupNorm(2, 8) as torch writes it in eval mode (Reshape to
                    (0, 2, -1), InstanceNormalization of ones and zeros, Reshape to Shape(x), Mul
                    and Add of (8, 1, 1) initializers), ReLU, nn.InstanceNorm2d(8, affine=True),
                    nn.InstanceNorm2d(8) (Constants of ones and zeros), ReLU, GAP, Flatten, Gemm
  gn_train.onnx     opset 13: the GroupNorm as a training-mode export writes it (Unsqueeze of
                    gn.weight and gn.bias, x.view through two Unsqueezes), bilinear upsampling
                    with its scales a Concat of two Constants
  gn18.onnx         opset 18: GroupNormalization (num_groups 4, scale and bias per group)
  gnshare.onnx      the GroupNorm of gn.onnx whose value before the Mul a Relu reads first: the
                    Mul and Add are not folded (ddl refuses them, or takes them as per-channel
                    layers of their own: never the folded weight where the Relu reads)
and models ddl must refuse, each naming the node and the attribute: cubic.onnx (mode cubic),
excl.onnx (exclude_outside 1), crop.onnx (tf_crop_and_resize), eps.onnx (an InstanceNormalization
of epsilon 0.001), flat2.onnx (Flatten axis 2), view1.onnx (Reshape to (1, -1)), gnread.onnx (a
node reading GroupNorm's (N, G, -1) values), gnlate.onnx (a node reading the value before a Mul
that was folded into the GroupNorm), sizesN.onnx (sizes with the batch fixed at 1)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(45)


def w(name, *shape, scale=None):
    fan = np.prod(shape[1:]) if len(shape) > 1 else (shape[0] if shape else 1)
    a = rng.normal(0, scale or np.sqrt(2.0 / fan), shape).astype(np.float32)
    return numpy_helper.from_array(a, name)


def const(out, value, dtype=np.float32):
    return helper.make_node("Constant", [], [out], name=out.replace("_output_0", ""),
                            value=numpy_helper.from_array(np.array(value, dtype)))


def node(op, ins, out, **attrs):
    return helper.make_node(op, ins, [out], name=out.replace("_output_0", ""), **attrs)


def resize(x, out, mode, coord, ins):
    return node("Resize", [x] + ins, out, coordinate_transformation_mode=coord, cubic_coeff_a=-0.75, mode=mode,
                nearest_mode="floor")


def view_flat(x, p, axes_input=True):
    """x.view(x.size(0), -1) as torch writes it; its output p + '/Reshape_output_0'."""
    return [node("Shape", [x], p + "/Shape_output_0"), const(p + "/Constant_output_0", 0, np.int64),
            node("Gather", [p + "/Shape_output_0", p + "/Constant_output_0"], p + "/Gather_output_0", axis=0)] + (
        [const("onnx::Unsqueeze_" + p[1:], [0], np.int64),
         node("Unsqueeze", [p + "/Gather_output_0", "onnx::Unsqueeze_" + p[1:]], p + "/Unsqueeze_output_0")]
        if axes_input else [node("Unsqueeze", [p + "/Gather_output_0"], p + "/Unsqueeze_output_0", axes=[0])]) + [
        const(p + "/Constant_1_output_0", [-1], np.int64),
        node("Concat", [p + "/Unsqueeze_output_0", p + "/Constant_1_output_0"], p + "/Concat_output_0", axis=0),
        node("Reshape", [x, p + "/Concat_output_0"], p + "/Reshape_output_0")]


def sizes(x, p, hw):
    """sizes (N, C, h, w) as F.interpolate(size=...) exports them: Shape, Slice (0:2), Concat."""
    return [node("Shape", [x], p + "/Shape_output_0"), const(p + "/Constant_output_0", [0], np.int64),
            const(p + "/Constant_1_output_0", [0], np.int64), const(p + "/Constant_2_output_0", [2], np.int64),
            node("Slice", [p + "/Shape_output_0", p + "/Constant_1_output_0", p + "/Constant_2_output_0",
                           p + "/Constant_output_0"], p + "/Slice_output_0"),
            const(p + "/Constant_3_output_0", hw, np.int64),
            node("Concat", [p + "/Slice_output_0", p + "/Constant_3_output_0"], p + "/Concat_output_0", axis=0)]


def gn_eval(x, p, groups, c):
    """nn.GroupNorm(groups, c) in eval mode: its weight and bias as (c, 1, 1) initializers."""
    inits = [w("onnx::Mul_" + p[1:], c, 1, 1, scale=0.5), w("onnx::Add_" + p[1:], c, 1, 1, scale=0.5)]
    inits[0] = numpy_helper.from_array(numpy_helper.to_array(inits[0]) + 1, inits[0].name)
    return [const(p + "/Constant_output_0", [0, groups, -1], np.int64),
            node("Reshape", [x, p + "/Constant_output_0"], p + "/Reshape_output_0"),
            const(p + "/Constant_1_output_0", [1.0] * groups), const(p + "/Constant_2_output_0", [0.0] * groups),
            node("InstanceNormalization", [p + "/Reshape_output_0", p + "/Constant_1_output_0",
                                           p + "/Constant_2_output_0"], p + "/InstanceNormalization_output_0",
                 epsilon=9.999999747378752e-06),
            node("Shape", [x], p + "/Shape_output_0"),
            node("Reshape", [p + "/InstanceNormalization_output_0", p + "/Shape_output_0"], p + "/Reshape_1_output_0"),
            node("Mul", [p + "/Reshape_1_output_0", "onnx::Mul_" + p[1:]], p + "/Mul_output_0"),
            node("Add", [p + "/Mul_output_0", "onnx::Add_" + p[1:]], p + "/Add_output_0")], inits


def model(name, nodes, inits, opset, out="logits", out_shape=("N", 5)):
    g = helper.make_graph(nodes, "torch_jit", [helper.make_tensor_value_info("pixels", TensorProto.FLOAT,
                                                                             ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(out_shape))], inits)
    m = helper.make_model(g, producer_name="pytorch", producer_version="1.13.0",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset >= 13 else 6
    save(m, os.path.join(d, name + ".onnx"))


def conv(x, out, name, cin, cout, k=3):
    return node("Conv", [x, name + ".weight", name + ".bias"], out, dilations=[1, 1], group=1,
                kernel_shape=[k, k], pads=[k // 2] * 4, strides=[1, 1]), [w(name + ".weight", cout, cin, k, k),
                                                                        w(name + ".bias", cout, scale=0.1)]


def gemm(x, out, name, k, bias_shape=(5,)):
    return node("Gemm", [x, name + ".weight", name + ".bias"], out, alpha=1.0, beta=1.0, transB=1), [
        w(name + ".weight", 5, k), w(name + ".bias", *bias_shape, scale=0.1)]


# ---- upsampling ----
c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 4)
nodes = [c1, const("/up/Constant_output_0", [1.0, 1.0, 2.0, 2.0]),
         resize("/conv1/Conv_output_0", "/up/Resize_output_0", "nearest", "asymmetric", ["", "/up/Constant_output_0"])]
nodes += view_flat("/up/Resize_output_0", "/view")
g1, i2 = gemm("/view/Reshape_output_0", "logits", "fc", 4 * 32 * 32)
model("up_nearest", nodes + [g1], i1 + i2, 13)

c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 4)
nodes = [c1, const("/up1/Constant_output_0", [1.0, 1.0, 2.0, 2.0]), const("/up1/Constant_1_output_0", []),
         resize("/conv1/Conv_output_0", "/up1/Resize_output_0", "linear", "align_corners",
                ["/up1/Constant_1_output_0", "/up1/Constant_output_0"]),                     # 32x32
         const("/up2/Constant_output_0", [1.0, 1.0, 1.5, 1.5]), const("/up2/Constant_1_output_0", []),
         resize("/up1/Resize_output_0", "/up2/Resize_output_0", "linear", "half_pixel",
                ["/up2/Constant_1_output_0", "/up2/Constant_output_0"])]                     # 48x48
nodes += sizes("/up2/Resize_output_0", "/up3", [7, 5])
nodes += [const("/up3/Constant_4_output_0", []), const("/up3/Constant_5_output_0", []),
          resize("/up2/Resize_output_0", "/up3/Resize_output_0", "linear", "half_pixel",
                 ["/up3/Constant_4_output_0", "/up3/Constant_5_output_0", "/up3/Concat_output_0"]),  # 7x5
          const("/down/Constant_output_0", [1.0, 1.0, 0.5, 0.5]), const("/down/Constant_1_output_0", []),
          resize("/up3/Resize_output_0", "/down/Resize_output_0", "nearest", "asymmetric",
                 ["/down/Constant_1_output_0", "/down/Constant_output_0"]),                  # 3x2
          node("Flatten", ["/down/Resize_output_0"], "/Flatten_output_0", axis=1)]
g1, i2 = gemm("/Flatten_output_0", "logits", "fc", 4 * 3 * 2, (1, 5))
model("up_bilinear", nodes + [g1], i1 + i2, 11)

c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 4)
nodes = [c1] + sizes("/conv1/Conv_output_0", "/up1", [9, 11])
nodes += [resize("/conv1/Conv_output_0", "/up1/Resize_output_0", "nearest", "asymmetric",
                 ["", "", "/up1/Concat_output_0"])]
nodes += sizes("/up1/Resize_output_0", "/up2", [12, 10])
nodes += [resize("/up1/Resize_output_0", "/up2/Resize_output_0", "linear", "pytorch_half_pixel",
                 ["", "", "/up2/Concat_output_0"]),
          node("Flatten", ["/up2/Resize_output_0"], "/Flatten_output_0", axis=-3)]
g1, i2 = gemm("/Flatten_output_0", "logits", "fc", 4 * 12 * 10, ())
model("up_sizes", nodes + [g1], i1 + i2, 17)

c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 4)
nodes = [c1, const("/up1/Constant_output_0", [1.0, 1.0, 2.0, 2.0]),
         node("Upsample", ["/conv1/Conv_output_0", "/up1/Constant_output_0"], "/up1/Upsample_output_0", mode="nearest"),
         const("/up2/Constant_output_0", [1.0, 1.0, 2.0, 2.0]),
         node("Upsample", ["/up1/Upsample_output_0", "/up2/Constant_output_0"], "/up2/Upsample_output_0", mode="linear"),
         node("GlobalAveragePool", ["/up2/Upsample_output_0"], "/gap/GlobalAveragePool_output_0")]
nodes += view_flat("/gap/GlobalAveragePool_output_0", "/view", axes_input=False)
g1, i2 = gemm("/view/Reshape_output_0", "logits", "fc", 4)
model("upsample9", nodes + [g1], i1 + i2, 9)

c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 4)
nodes = [c1, const("/up1/Constant_output_0", [1.0, 1.0, 0.75, 0.5]),
         node("Resize", ["/conv1/Conv_output_0", "/up1/Constant_output_0"], "/up1/Resize_output_0", mode="nearest"),
         const("/up2/Constant_output_0", [1.0, 1.0, 2.5, 3.0]),
         node("Resize", ["/up1/Resize_output_0", "/up2/Constant_output_0"], "/up2/Resize_output_0", mode="linear"),
         node("Flatten", ["/up2/Resize_output_0"], "/Flatten_output_0", axis=1)]
g1, i2 = gemm("/Flatten_output_0", "logits", "fc", 4 * 30 * 24)
model("resize10", nodes + [g1], i1 + i2, 10)

# ---- normalisation ----
c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 8)
gn, i2 = gn_eval("/conv1/Conv_output_0", "/gn", 2, 8)
nodes = [c1] + gn + [node("Relu", ["/gn/Add_output_0"], "/relu/Relu_output_0"),
                     node("InstanceNormalization", ["/relu/Relu_output_0", "inn.weight", "inn.bias"],
                          "/inn/InstanceNormalization_output_0", epsilon=9.999999747378752e-06),
                     const("/in2/Constant_output_0", [1.0] * 8), const("/in2/Constant_1_output_0", [0.0] * 8),
                     node("InstanceNormalization", ["/inn/InstanceNormalization_output_0", "/in2/Constant_output_0",
                                                    "/in2/Constant_1_output_0"], "/in2/InstanceNormalization_output_0",
                          epsilon=9.999999747378752e-06),
                     node("Relu", ["/in2/InstanceNormalization_output_0"], "/relu2/Relu_output_0"),
                     node("GlobalAveragePool", ["/relu2/Relu_output_0"], "/gap/GlobalAveragePool_output_0"),
                     node("Flatten", ["/gap/GlobalAveragePool_output_0"], "/Flatten_output_0", axis=1)]
g1, i3 = gemm("/Flatten_output_0", "logits", "fc", 8)
i4 = [numpy_helper.from_array((1 + rng.normal(0, 0.3, 8)).astype(np.float32), "inn.weight"), w("inn.bias", 8, scale=0.3)]
model("gn", nodes + [g1], i1 + i2 + i3 + i4, 13)

c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 8)
p, x = "/gn", "/conv1/Conv_output_0"
nodes = [c1, const(p + "/Constant_output_0", [0, 4, -1], np.int64),
         node("Reshape", [x, p + "/Constant_output_0"], p + "/Reshape_output_0"),
         const(p + "/Constant_1_output_0", [1.0] * 4), const(p + "/Constant_2_output_0", [0.0] * 4),
         node("InstanceNormalization", [p + "/Reshape_output_0", p + "/Constant_1_output_0", p + "/Constant_2_output_0"],
              p + "/InstanceNormalization_output_0", epsilon=9.999999747378752e-06),
         node("Shape", [x], p + "/Shape_output_0"),
         node("Reshape", [p + "/InstanceNormalization_output_0", p + "/Shape_output_0"], p + "/Reshape_1_output_0"),
         const(p + "/Constant_3_output_0", [1, 2], np.int64),
         node("Unsqueeze", ["gn.weight", p + "/Constant_3_output_0"], p + "/Unsqueeze_output_0"),
         node("Mul", [p + "/Reshape_1_output_0", p + "/Unsqueeze_output_0"], p + "/Mul_output_0"),
         const(p + "/Constant_4_output_0", [1, 2], np.int64),
         node("Unsqueeze", ["gn.bias", p + "/Constant_4_output_0"], p + "/Unsqueeze_1_output_0"),
         node("Add", [p + "/Mul_output_0", p + "/Unsqueeze_1_output_0"], p + "/Add_output_0"),
         const("/Constant_output_0", [1.0, 1.0]), const("/Constant_1_output_0", [2.0, 2.0]),
         node("Concat", ["/Constant_output_0", "/Constant_1_output_0"], "/Concat_output_0", axis=0),
         resize(p + "/Add_output_0", "/Resize_output_0", "linear", "align_corners", ["", "/Concat_output_0"]),
         node("MaxPool", ["/Resize_output_0"], "/pool/MaxPool_output_0", kernel_shape=[4, 4], strides=[4, 4]),
         node("Shape", ["/pool/MaxPool_output_0"], "/Shape_output_0"), const("/Constant_4_output_0", 0, np.int64),
         node("Gather", ["/Shape_output_0", "/Constant_4_output_0"], "/Gather_output_0", axis=0),
         const("/Constant_5_output_0", -1, np.int64), const("onnx::Unsqueeze_35", [0], np.int64),
         node("Unsqueeze", ["/Gather_output_0", "onnx::Unsqueeze_35"], "/Unsqueeze_output_0"),
         const("onnx::Unsqueeze_37", [0], np.int64),
         node("Unsqueeze", ["/Constant_5_output_0", "onnx::Unsqueeze_37"], "/Unsqueeze_1_output_0"),
         node("Concat", ["/Unsqueeze_output_0", "/Unsqueeze_1_output_0"], "/Concat_2_output_0", axis=0),
         node("Reshape", ["/pool/MaxPool_output_0", "/Concat_2_output_0"], "/Reshape_output_0")]
g1, i3 = gemm("/Reshape_output_0", "logits", "fc", 8 * 8 * 8)
i2 = [numpy_helper.from_array((1 + rng.normal(0, 0.3, 8)).astype(np.float32), "gn.weight"), w("gn.bias", 8, scale=0.3)]
model("gn_train", nodes + [g1], i1 + i2 + i3, 13)

c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 8)
nodes = [c1, node("GroupNormalization", ["/conv1/Conv_output_0", "gn.weight", "gn.bias"], "/gn/GroupNormalization_output_0",
                  num_groups=4, epsilon=1e-5),
         node("GlobalAveragePool", ["/gn/GroupNormalization_output_0"], "/gap/GlobalAveragePool_output_0"),
         node("Flatten", ["/gap/GlobalAveragePool_output_0"], "/Flatten_output_0", axis=1)]
g1, i3 = gemm("/Flatten_output_0", "logits", "fc", 8)
i2 = [numpy_helper.from_array((1 + rng.normal(0, 0.3, 4)).astype(np.float32), "gn.weight"), w("gn.bias", 4, scale=0.3)]
model("gn18", nodes + [g1], i1 + i2 + i3, 18)

# a GroupNorm whose output before the Mul is also read by a Relu: the Mul cannot fold
c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 8)
gn, i2 = gn_eval("/conv1/Conv_output_0", "/gn", 2, 8)
nodes = [c1] + gn[:7] + [node("Relu", ["/gn/Reshape_1_output_0"], "/relu/Relu_output_0")] + gn[7:] + [
    node("Add", ["/relu/Relu_output_0", "/gn/Add_output_0"], "/add/Add_output_0"),
    node("GlobalAveragePool", ["/add/Add_output_0"], "/gap/GlobalAveragePool_output_0"),
    node("Flatten", ["/gap/GlobalAveragePool_output_0"], "/Flatten_output_0", axis=1)]
g1, i3 = gemm("/Flatten_output_0", "logits", "fc", 8)
model("gnshare", nodes + [g1], i1 + i2 + i3, 13)

# ---- refused ----
def refused(name, nodes, inits, opset=13):
    c1, i1 = conv("pixels", "/conv1/Conv_output_0", "conv1", 3, 4)
    model(name, [c1] + nodes, i1 + inits, opset, out="out", out_shape=("N", 4, 16, 16))


up = [const("/up/Constant_output_0", [1.0, 1.0, 2.0, 2.0])]
refused("cubic", up + [resize("/conv1/Conv_output_0", "out", "cubic", "half_pixel", ["", "/up/Constant_output_0"])], [])
refused("excl", up + [node("Resize", ["/conv1/Conv_output_0", "", "/up/Constant_output_0"], "out", mode="linear",
                           exclude_outside=1)], [])
refused("crop", up + [node("Resize", ["/conv1/Conv_output_0", "", "/up/Constant_output_0"], "out", mode="linear",
                           coordinate_transformation_mode="tf_crop_and_resize")], [])
refused("eps", [const("/a", [1.0] * 4), const("/b", [0.0] * 4),
                node("InstanceNormalization", ["/conv1/Conv_output_0", "/a", "/b"], "out", epsilon=1e-3)], [])
refused("flat2", [node("Flatten", ["/conv1/Conv_output_0"], "out", axis=2)], [])
refused("view1", [const("/s", [1, -1], np.int64), node("Reshape", ["/conv1/Conv_output_0", "/s"], "out")], [])
refused("gnread", gn_eval("/conv1/Conv_output_0", "/gn", 2, 4)[0][:5] +
        [node("Relu", ["/gn/InstanceNormalization_output_0"], "out")], gn_eval("/conv1/Conv_output_0", "/gn", 2, 4)[1])
gn, i2 = gn_eval("/conv1/Conv_output_0", "/gn", 2, 4)
refused("gnlate", gn + [node("Relu", ["/gn/Reshape_1_output_0"], "/relu/Relu_output_0"),
                        node("Add", ["/relu/Relu_output_0", "/gn/Add_output_0"], "out")], i2)
refused("sizesN", [const("/s", [1, 4, 32, 32], np.int64),
                   node("Resize", ["/conv1/Conv_output_0", "", "", "/s"], "out", mode="nearest")], [])
