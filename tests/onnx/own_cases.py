"""own_cases.py - ddl's own cases for tests/onnx/node_tests.py, already in the form ddl imports:
what the backend node tests do not reach (the input normalisation ddl folds out of the graph,
per-channel constants anywhere, the last Softmax, Reshape's shapes, unknown attributes). Each is
(name, op, expect, model, input): expect "pass" (ddl's output equals onnxruntime's on the same
file) or "refused" (ddl must refuse it, naming the node); onnxruntime gives the reference."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(45)


def t(name, *shape, scale=1.0):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def c(name, values, shape):
    return numpy_helper.from_array(np.array(values, np.float32).reshape(shape), name)


def model(nodes, inits, c_in=3, hw=6, batch=2, opset=13, out="y", n=None):
    g = helper.make_graph(nodes, "own", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [n if n else "N", c_in, hw, hw])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    x = (rng.random((batch, c_in, hw, hw)) * 255).astype(np.float32)
    return m, x


def conv(src, dst, cin=3, cout=4, name="conv"):
    return helper.make_node("Conv", [src, name + ".w"], [dst], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                            name=name), t(name + ".w", cout, cin, 3, 3, scale=0.2)


def cases():
    out = []

    def add(name, op, expect, nodes, inits, **kw):
        m, x = model(nodes, inits, **kw)
        out.append((name, op, expect, m, x))

    # the input normalisation: torchvision's per channel, (1, 3, 1, 1) and (3, 1, 1)
    n1, w1 = conv("xn", "y")
    add("own_norm_per_channel", "Sub", "pass",
        [helper.make_node("Div", ["x", "k255"], ["x1"], name="div255"),
         helper.make_node("Sub", ["x1", "mean"], ["x2"], name="sub_mean"),
         helper.make_node("Div", ["x2", "std"], ["xn"], name="div_std"), n1],
        [c("k255", 255.0, ()), c("mean", [0.485, 0.456, 0.406], (1, 3, 1, 1)),
         c("std", [0.229, 0.224, 0.225], (3, 1, 1)), w1])
    # 1 - x and 2 * x + 1 in the constant-first order
    n1, w1 = conv("xn", "y")
    add("own_norm_one_minus_x", "Sub", "pass",
        [helper.make_node("Div", ["x", "k255"], ["x1"], name="div255"),
         helper.make_node("Sub", ["one", "x1"], ["xn"], name="one_minus"), n1],
        [c("k255", 255.0, ()), c("one", 1.0, ()), w1])
    n1, w1 = conv("xn", "y")
    add("own_norm_constant_first", "Mul", "pass",
        [helper.make_node("Mul", ["two", "x"], ["x1"], name="two_times"),
         helper.make_node("Add", ["one", "x1"], ["xn"], name="one_plus"), n1],
        [c("two", [0.01, 0.02, 0.03], (3, 1, 1)), c("one", 1.0, ()), w1])
    n1, w1 = conv("xn", "y")
    add("own_norm_two_div_x", "Div", "refused",
        [helper.make_node("Div", ["two", "x"], ["xn"], name="two_div"), n1], [c("two", 2.0, ()), w1])
    # more channels than ddl's normalisation holds: an affine layer at the input
    n1, w1 = conv("xn", "y", cin=5)
    add("own_norm_five_channels", "Sub", "pass",
        [helper.make_node("Sub", ["x", "mean"], ["xn"], name="sub_mean"), n1],
        [c("mean", [10, 20, 30, 40, 50], (1, 5, 1, 1)), w1], c_in=5)
    # a node reading the raw input after the folding
    n1, w1 = conv("xn", "a", name="c1")
    n2, w2 = conv("x", "b", name="c2")
    add("own_norm_raw_reader", "Sub", "refused",
        [helper.make_node("Sub", ["x", "mean"], ["xn"], name="sub_mean"), n1, n2,
         helper.make_node("Add", ["a", "b"], ["y"], name="join")], [c("mean", 100.0, ()), w1, w2])
    # per-channel constants after a layer: an affine layer
    n1, w1 = conv("x", "a")
    add("own_affine_per_channel", "Mul", "pass",
        [n1, helper.make_node("Mul", ["a", "s"], ["b"], name="scale"),
         helper.make_node("Sub", ["t", "b"], ["y"], name="shift")],
        [c("s", [0.5, -2, 3, 0.25], (1, 4, 1, 1)), c("t", [1, 2, 3, 4], (4, 1, 1)), w1])
    n1, w1 = conv("x", "a")
    add("own_affine_scalar_div", "Div", "pass",
        [n1, helper.make_node("Div", ["a", "s"], ["y"], name="div")], [c("s", 4.0, (1,)), w1])
    n1, w1 = conv("x", "a")
    add("own_affine_along_width", "Mul", "refused",
        [n1, helper.make_node("Mul", ["a", "s"], ["y"], name="along_w")], [c("s", [1, 2, 3, 4, 5, 6], (6,)), w1])
    # on a flat (N, K): Gemm, then a per-feature Mul; a bias of (K, 1) broadcasts to a matrix
    n1, w1 = conv("x", "a")
    add("own_affine_flat", "Mul", "pass",
        [n1, helper.make_node("Flatten", ["a"], ["f"], name="flat"),
         helper.make_node("Gemm", ["f", "fc.w"], ["g"], transB=1, name="fc"),
         helper.make_node("Mul", ["g", "s"], ["y"], name="per_feature")],
        [w1, t("fc.w", 3, 144, scale=0.1), c("s", [1, -1, 2], (3,))])
    n1, w1 = conv("x", "a")
    add("own_matmul_bias_column", "Add", "refused",
        [n1, helper.make_node("Flatten", ["a"], ["f"], name="flat"),
         helper.make_node("MatMul", ["f", "fc.w"], ["g"], name="fc"),
         helper.make_node("Add", ["g", "b"], ["y"], name="bias")],
        [w1, t("fc.w", 144, 3, scale=0.1), c("b", [1, 2, 3], (3, 1))])
    # the last Softmax: over the classes of (N, K) it is ddl's own (dropped); of an image at opset 11,
    # over C, H and W together: a softmax layer, not dropped
    n1, w1 = conv("x", "a")
    add("own_softmax_flat_opset11", "Softmax", "pass",
        [n1, helper.make_node("Flatten", ["a"], ["f"], name="flat"),
         helper.make_node("Gemm", ["f", "fc.w"], ["g"], transB=1, name="fc"),
         helper.make_node("Softmax", ["g"], ["y"], axis=1, name="probs")], [w1, t("fc.w", 3, 144)], opset=11)
    n1, w1 = conv("x", "a")
    add("own_softmax_image_opset11", "Softmax", "pass",
        [n1, helper.make_node("Softmax", ["a"], ["y"], axis=1, name="probs")], [w1], opset=11)
    n1, w1 = conv("x", "a")
    add("own_logsoftmax_channels", "LogSoftmax", "pass",
        [n1, helper.make_node("LogSoftmax", ["a"], ["y"], axis=1, name="logp")], [w1])
    # Reshape: (0, -1) and (-1, K) flatten; (1, -1) of a batch that is not fixed 1, and (N, 7), not
    for name, shape, expect in (("own_reshape_zero", [0, -1], "pass"), ("own_reshape_minus_one", [-1, 144], "pass"),
                                ("own_reshape_one", [1, -1], "refused"), ("own_reshape_wrong_k", [0, 72], "refused")):
        n1, w1 = conv("x", "a")
        add(name, "Reshape", expect,
            [n1, helper.make_node("Reshape", ["a", "shape"], ["f"], name="reshape"),
             helper.make_node("Gemm", ["f", "fc.w"], ["y"], transB=1, name="fc")],
            [w1, numpy_helper.from_array(np.array(shape, np.int64), "shape"),
             t("fc.w", 3, 144 if shape[1] != 72 else 72)])
    # an attribute ONNX does not define for the op
    n1, w1 = conv("x", "a")
    add("own_unknown_attribute", "Relu", "refused",
        [n1, helper.make_node("Relu", ["a"], ["y"], name="relu", alpha=0.1)], [w1])
    # auto_pad SAME_UPPER of an odd kernel at stride 1: symmetric pads ddl has
    add("own_conv_same_upper", "Conv", "pass",
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], auto_pad="SAME_UPPER", name="same")],
        [t("w", 4, 3, 3, 3, scale=0.2)])
    # Dropout: a dropout layer of its ratio (attribute before opset 12), nothing when predicting
    n1, w1 = conv("x", "a")
    add("own_dropout_ratio_opset10", "Dropout", "pass",
        [n1, helper.make_node("Dropout", ["a"], ["y"], ratio=0.3, name="drop")], [w1], opset=10)
    # ConvTranspose's output_shape: pads derived from it; an odd total (13 -> 12) is refused, named:
    # runtimes put the extra row at different ends
    add("own_convtranspose_output_shape", "ConvTranspose", "pass",
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                          output_shape=[13, 13], name="up")], [t("w", 3, 4, 3, 3, scale=0.2)])
    add("own_convtranspose_output_shape_odd", "ConvTranspose", "refused",
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                          output_shape=[12, 12], name="up")], [t("w", 3, 4, 3, 3, scale=0.2)])
    # ConvTranspose with auto_pad SAME_UPPER, kernel 4 at stride 2: pads of 1 on every side
    add("own_convtranspose_same_upper", "ConvTranspose", "pass",
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[4, 4], strides=[2, 2],
                          auto_pad="SAME_UPPER", name="up")], [t("w", 3, 4, 4, 4, scale=0.2)])
    # a MaxPool at SAME_LOWER that needs no padding (2x2 at stride 2 of 6x6)
    n1, w1 = conv("x", "a")
    add("own_maxpool_same_no_pad", "MaxPool", "pass",
        [n1, helper.make_node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER",
                              name="pool")], [w1])
    # Mul of two layers: a gate a channel (squeeze-and-excitation) and a gate a position (spatial
    # attention), each on either side; a gate of other planes is refused
    for name, gate_first, spatial in (("own_mul_channel_gate", 0, 0), ("own_mul_channel_gate_first", 1, 0),
                                      ("own_mul_spatial_gate", 0, 1), ("own_mul_spatial_gate_first", 1, 1)):
        n1, w1 = conv("x", "a")
        g1 = helper.make_node("Conv", ["p" if not spatial else "a", "g.w"], ["gl"], kernel_shape=[1, 1], name="g")
        gw = t("g.w", 1 if spatial else 4, 4, 1, 1, scale=0.5)
        nodes = [n1] + ([] if spatial else [helper.make_node("GlobalAveragePool", ["a"], ["p"], name="pool")])
        nodes += [g1, helper.make_node("Sigmoid", ["gl"], ["s"], name="sig"),
                  helper.make_node("Mul", ["s", "a"] if gate_first else ["a", "s"], ["y"], name="gate")]
        add(name, "Mul", "pass", nodes, [w1, gw])
    n1, w1 = conv("x", "a")
    add("own_mul_other_planes", "Mul", "refused",
        [n1, helper.make_node("MaxPool", ["a"], ["b"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
         helper.make_node("Mul", ["b", "a"], ["y"], name="gate")], [w1])
    # ReduceMean over the height and width (x.mean([2, 3]), keepdim or not) is a global average
    # pool; over the channels it is refused
    n1, w1 = conv("x", "a")
    n2, w2 = conv("m", "y", cin=4, cout=5, name="conv2")
    add("own_reducemean_keepdims", "ReduceMean", "pass",
        [n1, helper.make_node("ReduceMean", ["a"], ["m"], axes=[2, 3], name="mean"), n2], [w1, w2])
    n1, w1 = conv("x", "a")
    add("own_reducemean_flat", "ReduceMean", "pass",
        [n1, helper.make_node("ReduceMean", ["a"], ["m"], axes=[-1, -2], keepdims=0, name="mean"),
         helper.make_node("Gemm", ["m", "fc.w"], ["y"], transB=1, name="fc")], [w1, t("fc.w", 5, 4)])
    n1, w1 = conv("x", "a")
    add("own_reducemean_channels", "ReduceMean", "refused",
        [n1, helper.make_node("ReduceMean", ["a"], ["y"], axes=[1], name="mean")], [w1])
    # Concat of one input (DenseNet's first torch.cat) and of ten (DenseNet's later ones)
    n1, w1 = conv("x", "a")
    add("own_concat_one", "Concat", "pass", [n1, helper.make_node("Concat", ["a"], ["y"], axis=1, name="cat")], [w1])
    n1, w1 = conv("x", "a")
    acts = [helper.make_node("Relu" if i % 2 else "Sigmoid", ["a"], ["a%d" % i], name="act%d" % i) for i in range(9)]
    add("own_concat_ten", "Concat", "pass",
        [n1] + acts + [helper.make_node("Concat", ["a"] + ["a%d" % i for i in range(9)], ["y"], axis=1, name="cat")],
        [w1])
    # ShuffleNet's channel shuffle (Reshape to 5-D, Transpose (0, 2, 1, 3, 4), Reshape back) and its
    # chunk along the channels (two Slices, the second to INT64_MAX as torch writes x[:, a:]);
    # another Transpose of the 5-D values, another reader of them, a Slice of the height: refused
    def shuffle_nodes(src, dst, perm=(0, 2, 1, 3, 4), back="back"):
        return [helper.make_node("Reshape", [src, "five"], ["s5"], name="split"),
                helper.make_node("Transpose", ["s5"], ["t5"], perm=list(perm), name="swap"),
                helper.make_node("Reshape", ["t5", back], [dst], name="join")]
    shapes = [numpy_helper.from_array(np.array([0, 2, 3, 6, 6], np.int64), "five"),
              numpy_helper.from_array(np.array([0, -1, 6, 6], np.int64), "back")]
    n1, w1 = conv("x", "a", cout=6)
    n2, w2 = conv("sh", "y", cin=6, cout=4, name="conv2")
    add("own_channel_shuffle", "Transpose", "pass", [n1] + shuffle_nodes("a", "sh") + [n2], [w1, w2] + shapes)
    n1, w1 = conv("x", "a", cout=6)
    add("own_channel_shuffle_other_perm", "Transpose", "refused",
        [n1] + shuffle_nodes("a", "y", perm=(0, 1, 2, 4, 3)), [w1] + shapes)
    n1, w1 = conv("x", "a", cout=6)
    add("own_channel_shuffle_other_reader", "Reshape", "refused",
        [n1, helper.make_node("Reshape", ["a", "five"], ["s5"], name="split"),
         helper.make_node("Relu", ["s5"], ["y"], name="relu5")], [w1] + shapes)

    def ints(name, *v):
        return numpy_helper.from_array(np.array(v, np.int64), name)
    n1, w1 = conv("x", "a", cout=6)
    n2, w2 = conv("cat", "y", cin=6, cout=4, name="conv2")
    add("own_slice_channels", "Slice", "pass",
        [n1, helper.make_node("Slice", ["a", "s0", "e0", "ax"], ["lo"], name="first"),
         helper.make_node("Slice", ["a", "s1", "e1", "ax"], ["hi"], name="rest"),
         helper.make_node("Sigmoid", ["hi"], ["hs"], name="sig"),
         helper.make_node("Concat", ["hs", "lo"], ["cat"], axis=1, name="cat"), n2],
        [w1, w2, ints("s0", 0), ints("e0", 3), ints("ax", 1), ints("s1", -3), ints("e1", 2 ** 63 - 1)])
    n1, w1 = conv("x", "a", cout=6)
    add("own_slice_height", "Slice", "refused",
        [n1, helper.make_node("Slice", ["a", "s0", "e0", "ax"], ["y"], name="rows")],
        [w1, ints("s0", 0), ints("e0", 3), ints("ax", 2)])
    # SENet's gate as its own code writes it: Linear layers on the pooled values, y.view(b, c, 1, 1)
    # (a Reshape of a flat value to 4-D), x * y.expand_as(x) (an Expand to Shape(x) read by a Mul);
    # a flat value reshaped to (N, K, 1, 1) and read by a Conv; an Expand read by a Relu: refused
    def se_nodes(tail):
        return [helper.make_node("GlobalAveragePool", ["a"], ["p"], name="pool"),
                helper.make_node("Flatten", ["p"], ["f"], name="flat"),
                helper.make_node("Gemm", ["f", "fc1.w"], ["h"], transB=1, name="fc1"),
                helper.make_node("Relu", ["h"], ["hr"], name="relu"),
                helper.make_node("Gemm", ["hr", "fc2.w"], ["z"], transB=1, name="fc2"),
                helper.make_node("Sigmoid", ["z"], ["s"], name="sig"),
                helper.make_node("Reshape", ["s", "c411"], ["s4"], name="view"),
                helper.make_node("Shape", ["a"], ["sa"], name="shape"),
                helper.make_node("Expand", ["s4", "sa"], ["e"], name="expand")] + tail
    se_inits = [t("fc1.w", 2, 4), t("fc2.w", 4, 2), ints("c411", 0, 4, 1, 1)]
    n1, w1 = conv("x", "a")
    add("own_se_view_expand", "Expand", "pass",
        [n1] + se_nodes([helper.make_node("Mul", ["a", "e"], ["y"], name="gate")]), [w1] + se_inits)
    n1, w1 = conv("x", "a")
    add("own_expand_relu", "Expand", "refused",
        [n1] + se_nodes([helper.make_node("Relu", ["e"], ["y"], name="relu2")]), [w1] + se_inits)
    n1, w1 = conv("x", "a")
    n2 = helper.make_node("Conv", ["s4", "conv2.w"], ["y"], kernel_shape=[1, 1], name="conv2")
    add("own_unflat_conv", "Reshape", "pass", [n1] + se_nodes([])[:7] + [n2],
        [w1, t("conv2.w", 5, 4, 1, 1, scale=0.5)] + se_inits)
    return out
