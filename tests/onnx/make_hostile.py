"""make_hostile.py DIR - hostile ONNX files for tests/test_onnx_hostile.sh, written with Debian's
python3-onnx (its protobuf classes, so that dims, data and attributes can be anything).

DIR/ok.onnx is a small valid model, input (N, 1, 8, 8):
  Conv c1 (4, 1, 3, 3) + bias, pads 1 -> Relu -> MaxPool 2 -> ConvTranspose up (4, 2, 2, 2) stride 2
  -> Flatten (2 x 8 x 8 = 128) -> Gemm fc1 (4, 128) transB 1 + bias -> Relu -> MatMul fc2 (4, 3)
  -> Add fc2.bias (3)
Every other DIR/NAME.onnx is ok.onnx with one thing made hostile. DIR/cases.txt lists them, one a
line: NAME<TAB>what the refusal must say (a fixed string, grep -F)."""
import os
import sys

import numpy as np
from onnx import AttributeProto, TensorProto, helper, save

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(3)
BIG = 1 << 62


def tensor(name, dims, n_floats=None, float_data=False, fill=None):
    """A float tensor named name of dims dims (any int64s), holding n_floats values (default: as
    many as the dims say, when they say a sane number)."""
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    if n_floats is None:
        n_floats = int(np.prod(dims)) if all(0 <= x < 4096 for x in dims) else 16
    a = rng.normal(0, 0.3, n_floats).astype(np.float32) if fill is None else np.full(n_floats, fill, np.float32)
    if float_data:
        t.float_data.extend(a.tolist())
    else:
        t.raw_data = a.tobytes()
    return t


def ints(name, values):
    a = AttributeProto()
    a.name = name
    a.type = AttributeProto.INTS
    a.ints.extend(values)
    return a


def node(op, ins, outs, name, **attrs):
    n = helper.make_node(op, ins, outs, name=name)
    for k, v in attrs.items():
        if isinstance(v, list):
            n.attribute.append(ints(k, v))
        else:
            n.attribute.append(helper.make_attribute(k, v))
    return n


def model(path, inits=None, nodes=None, in_dims=("N", 1, 8, 8), patch=None):
    base_inits = {
        "c1.weight": tensor("c1.weight", [4, 1, 3, 3]), "c1.bias": tensor("c1.bias", [4]),
        "up.weight": tensor("up.weight", [4, 2, 2, 2]), "up.bias": tensor("up.bias", [2]),
        "fc1.weight": tensor("fc1.weight", [4, 128]), "fc1.bias": tensor("fc1.bias", [4]),
        "fc2.weight": tensor("fc2.weight", [4, 3]), "fc2.bias": tensor("fc2.bias", [3]),
    }
    base_inits.update(inits or {})
    base_nodes = {
        "c1": node("Conv", ["input", "c1.weight", "c1.bias"], ["a"], "c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        "r1": node("Relu", ["a"], ["b"], "r1"),
        "p1": node("MaxPool", ["b"], ["c"], "p1", kernel_shape=[2, 2], strides=[2, 2]),
        "up": node("ConvTranspose", ["c", "up.weight", "up.bias"], ["u"], "up", kernel_shape=[2, 2], strides=[2, 2]),
        "fl": node("Flatten", ["u"], ["f"], "fl", axis=1),
        "fc1": node("Gemm", ["f", "fc1.weight", "fc1.bias"], ["g"], "fc1", transB=1),
        "r2": node("Relu", ["g"], ["h"], "r2"),
        "fc2": node("MatMul", ["h", "fc2.weight"], ["mm"], "fc2"),
        "add": node("Add", ["mm", "fc2.bias"], ["logits"], "add"),
    }
    base_nodes.update(nodes or {})
    if patch:
        patch(base_nodes)
    g = helper.make_graph(list(base_nodes.values()), "hostile",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(in_dims))],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])],
                          list(base_inits.values()))
    m = helper.make_model(g, producer_name="make_hostile.py", opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, os.path.join(d, path + ".onnx"))


def conv_attrs(**kw):
    a = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    a.update(kw)
    return {"c1": node("Conv", ["input", "c1.weight", "c1.bias"], ["a"], "c1", **a)}


cases = []


def case(name, expect, **kw):
    model(name, **kw)
    cases.append((name, expect))


model("ok")
# the weights' dims: the issue's MatMul (-1, 10) and (2^62, 4), zero, Gemm, ConvTranspose's -1
# (no data: what the dims' count of values, wrapped or clamped to 0, asked for before)
case("matmul_neg", "weight fc2.weight has dims (-1, 10)",
     inits={"fc2.weight": tensor("fc2.weight", [-1, 10], 0), "fc2.bias": tensor("fc2.bias", [10])})
case("matmul_huge", "weight fc2.weight has dims (%d, 4)" % BIG,
     inits={"fc2.weight": tensor("fc2.weight", [BIG, 4], 0), "fc2.bias": tensor("fc2.bias", [4])})
case("matmul_zero", "weight fc2.weight has dims (0, 10)",
     inits={"fc2.weight": tensor("fc2.weight", [0, 10], 0), "fc2.bias": tensor("fc2.bias", [10])})
case("gemm_neg", "weight fc1.weight has dims (4, -1)", inits={"fc1.weight": tensor("fc1.weight", [4, -1], 0)})
case("deconv_neg", "weight up.weight has dims (4, -1, 2, 2)", inits={"up.weight": tensor("up.weight", [4, -1, 2, 2], 0)},
     nodes={"up": node("ConvTranspose", ["c", "up.weight"], ["u"], "up", kernel_shape=[2, 2], strides=[2, 2])})
case("deconv_neg_data", "weight up.weight has dims (4, -1, 2, 2)",
     inits={"up.weight": tensor("up.weight", [4, -1, 2, 2], 120)})  # 480 bytes of the file's own
case("dims_wrap", "weight c1.weight has dims (4294967296, 4294967296, 1, 1)",
     inits={"c1.weight": tensor("c1.weight", [1 << 32, 1 << 32, 1, 1], 0)})  # 2^64 values: 0 in a size_t
case("dims_overflow", "weight fc1.weight has dims (2097152, 2097152)",
     inits={"fc1.weight": tensor("fc1.weight", [1 << 21, 1 << 21], 4)})
# dims that disagree with the graph
case("conv_channels", "weight c1.weight has dims (4, 2, 3, 3), the graph needs (4, 1, 3, 3) (its input has 1 channels",
     inits={"c1.weight": tensor("c1.weight", [4, 2, 3, 3])})
case("deconv_channels", "weight up.weight has dims (3, 2, 2, 2), the graph needs (4, 2, 2, 2)",
     inits={"up.weight": tensor("up.weight", [3, 2, 2, 2])})
case("conv_kernel", "weight c1.weight has dims (4, 1, 3, 2), the graph needs (4, 1, 3, 3)",
     inits={"c1.weight": tensor("c1.weight", [4, 1, 3, 2])})
case("dense_in", "weight fc1.weight has dims (4, 100), the graph needs (4, 128) (its input has 128 values",
     inits={"fc1.weight": tensor("fc1.weight", [4, 100])})
case("matmul_in", "weight fc2.weight has dims (12, 3), the graph needs (4, 3)",
     inits={"fc2.weight": tensor("fc2.weight", [12, 3])})
case("weight_3d", "weight fc1.weight has dims (4, 128, 1): ddl takes 2 dims",
     inits={"fc1.weight": tensor("fc1.weight", [4, 128, 1])})
case("conv_bias", "bias c1.bias has dims (3), the graph needs 4 values",
     inits={"c1.bias": tensor("c1.bias", [3])})
case("gemm_bias", "bias fc1.bias has dims (10): ddl takes a bias that broadcasts to (N, 4)",
     inits={"fc1.bias": tensor("fc1.bias", [10])})
# data shorter or longer than the dims say
case("raw_short", "weight c1.weight: dims (4, 1, 3, 3) say 36 float32 values (144 bytes), its raw_data holds 140",
     inits={"c1.weight": tensor("c1.weight", [4, 1, 3, 3], 35)})
case("raw_long", "weight c1.weight: dims (4, 1, 3, 3) say 36 float32 values (144 bytes), its raw_data holds 148",
     inits={"c1.weight": tensor("c1.weight", [4, 1, 3, 3], 37)})
case("float_data_short", "its float_data holds 120 bytes",
     inits={"fc2.weight": tensor("fc2.weight", [4, 3], 30, float_data=True)})
case("bias_short", "bias fc2.bias: dims (3) say 3 float32 values (12 bytes), its raw_data holds 8",
     inits={"fc2.bias": tensor("fc2.bias", [3], 2)})
# attributes: negative, zero, absurd (past 32 bits: once cut to an int without a word)
case("kernel_neg", "kernel_shape (-3, -3)", nodes=conv_attrs(kernel_shape=[-3, -3]))
case("kernel_huge", "kernel_shape (4294967299, 4294967299)", nodes=conv_attrs(kernel_shape=[(1 << 32) + 3] * 2))
case("strides_zero", "strides (0, 0): ddl takes 2 values (2-D) from 1 to 32767", nodes=conv_attrs(strides=[0, 0]))
case("strides_neg", "strides (-1, -1)", nodes=conv_attrs(strides=[-1, -1]))
case("strides_huge", "strides (4294967297, 4294967297)", nodes=conv_attrs(strides=[(1 << 32) + 1] * 2))
case("strides_three", "strides (1, 2, 1): ddl takes 2 values", nodes=conv_attrs(strides=[1, 2, 1]))
case("pads_neg", "pads (-1, -1, -1, -1)", nodes=conv_attrs(pads=[-1] * 4))
case("pads_huge", "pads (4294967296, 4294967296, 4294967296, 4294967296)", nodes=conv_attrs(pads=[1 << 32] * 4))
case("pads_three", "pads (1, 1, 1): ddl takes 4 values", nodes=conv_attrs(pads=[1, 1, 1]))
case("pads_past_int16", "pads (40000, 40000, 40000, 40000): ddl takes 4 values (2-D) from 0 to 32767",
     nodes=conv_attrs(pads=[40000] * 4))
case("group_neg", "group (-1): ddl takes 1 or more", nodes=conv_attrs(group=-1))
case("group_zero", "group (0)", nodes=conv_attrs(group=0))
case("group_two", "group (2)", nodes=conv_attrs(group=2))
case("dilations", "dilations (256, 256)", nodes=conv_attrs(dilations=[256, 256]))
case("auto_pad", "auto_pad SAME_UPPER", nodes=conv_attrs(auto_pad="SAME_UPPER"))
case("pool_huge", "kernel_shape (4294967298, 4294967298)",
     nodes={"p1": node("MaxPool", ["b"], ["c"], "p1", kernel_shape=[(1 << 32) + 2] * 2, strides=[2, 2])})
case("pool_big", "a 8x8 input is smaller than the 9x9 window",
     nodes={"p1": node("MaxPool", ["b"], ["c"], "p1", kernel_shape=[9, 9])})
case("pool_stride_neg", "strides (-2, -2)",
     nodes={"p1": node("MaxPool", ["b"], ["c"], "p1", kernel_shape=[2, 2], strides=[-2, -2])})
case("deconv_stride_huge", "node up (ConvTranspose): strides (1073741824, 1073741824): ddl takes 2 values",
     nodes={"up": node("ConvTranspose", ["c", "up.weight", "up.bias"], ["u"], "up", kernel_shape=[2, 2],
                       strides=[1 << 30] * 2)})
case("deconv_outpad", "output_padding (300, 300)",
     nodes={"up": node("ConvTranspose", ["c", "up.weight", "up.bias"], ["u"], "up", kernel_shape=[2, 2],
                       strides=[2, 2], output_padding=[300, 300])})
case("deconv_output_shape", "node up (ConvTranspose): output_shape (7, 7): an odd total padding of 1",
     nodes={"up": node("ConvTranspose", ["c", "up.weight", "up.bias"], ["u"], "up", kernel_shape=[2, 2],
                       strides=[2, 2], output_shape=[7, 7])})
case("gemm_transB", "transB (2): ddl takes 0 or 1",
     nodes={"fc1": node("Gemm", ["f", "fc1.weight", "fc1.bias"], ["g"], "fc1", transB=2)})
case("gemm_transA", "transA (1)",
     nodes={"fc1": node("Gemm", ["f", "fc1.weight", "fc1.bias"], ["g"], "fc1", transB=1, transA=1)})
case("flatten_axis", "axis 4294967297 of a rank-4 input: ddl keeps the batch axis alone first",
     nodes={"fl": node("Flatten", ["u"], ["f"], "fl", axis=(1 << 32) + 1)})
# the input's dims
case("input_neg", "input input: dims (0, 1, -1, 8)", in_dims=("N", 1, -1, 8))
case("input_huge", "input input: dims (0, 4294967297, 8, 8)", in_dims=("N", (1 << 32) + 1, 8, 8))
case("input_big", "65536x65536 images: more than 2147483647 values each", in_dims=("N", 1, 65536, 65536))
case("input_5d", "input input: dims (0, 1, 8, 8, 1)", in_dims=("N", 1, 8, 8, 1))


def concat_overflow(ns):  # 2^30 + 2^30 channels: an int's sum
    ns.clear()
    ns["cat"] = node("Concat", ["input", "input"], ["cc"], "cat", axis=1)
    ns["fl"] = node("Flatten", ["cc"], ["f"], "fl", axis=1)
    ns["fc2"] = node("MatMul", ["f", "fc2.weight"], ["logits"], "fc2")


case("concat_overflow", "node cat (Concat): graph: layer 1 (concat): an output of 2147483648 x 1 x 1 values",
     in_dims=("N", 1 << 30, 1, 1), patch=concat_overflow)


def scale_zero(ns):  # pixels * 0: a normalisation of std 1 / 0
    ns["c1"].input[0] = "x0"
    rest = list(ns.items())
    ns.clear()
    ns["mul"] = node("Mul", ["input", "zero"], ["x0"], "mul")
    ns.update(rest)


case("scale_zero", "node mul (Mul): constant zero: a scale of 0 in channel 0: ddl takes non-zero scales",
     inits={"zero": tensor("zero", [], 1, fill=0.0)}, patch=scale_zero)


def insert_after(ns, key, name, n):
    """ns with node n, named name, right after the node key"""
    rest = list(ns.items())
    ns.clear()
    for k, v in rest:
        ns[k] = v
        if k == key:
            ns[name] = n


def resize_sizes8(ns):  # 8 int64 sizes where the sizes' room holds 4: written past it before (make fuzz)
    ns["p1"].input[0] = "b2"
    insert_after(ns, "r1", "rs", node("Resize", ["b", "", "", "sz"], ["b2"], "rs"))


case("resize_sizes8", "node rs (Resize): input sz: not up to 4 float or int64 values",
     inits={"sz": helper.make_tensor("sz", TensorProto.INT64, [8], [1, 4, 8, 8, 1, 1, 1, 1])}, patch=resize_sizes8)


def mul_shapes(ns):  # a Mul of two layers whose shapes ONNX broadcasts only by H and W: not ddl's
    ns["up"].input[0] = "c2"
    insert_after(ns, "p1", "m1", node("Mul", ["c", "b"], ["c2"], "m1"))


case("mul_shapes", "node m1 (Mul): inputs (N, 4, 4, 4) and (N, 4, 8, 8): ddl multiplies two layers of the same "
     "shape, or a (N, C, 1, 1) or (N, 1, H, W) and a (N, C, H, W)", patch=mul_shapes)


def softsign(ns):  # an operator ddl does not take (Sigmoid was one before ddl took it)
    ns["r2"] = node("Softsign", ["g"], ["h"], "r2")


case("unsupported", "node r2 (Softsign): ddl cannot train this operator (docs/DATA.md, \"ONNX operators\", "
     "lists those it takes)", patch=softsign)

with open(os.path.join(d, "cases.txt"), "w") as f:
    for name, expect in cases:
        f.write("%s\t%s\n" % (name, expect))
