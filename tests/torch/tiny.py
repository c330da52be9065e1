"""tiny.py DIR SEED - DIR/tiny.onnx, written with python3-onnx and numpy alone (no PyTorch), as
torch.onnx.export writes nets.py's Tiny in training mode (opset 14: BatchNormalization with
training_mode 1 and its three outputs, ONNX's momentum 0.9, state_dict's names): the weights
drawn from SEED (He-normal convolutions, BatchNorm's scale and shift near 1 and 0 and running
statistics of their own, a Linear as PyTorch initialises one). The same seed gives the same
bytes: tests/test_torch_trains.sh compares ddl's training of it with PyTorch's, recorded in
tests/torch/fixture/."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CLASSES, SIZE = 3, 16


def build(seed):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def init(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def conv(x, name, cin, cout):
        w = init(name + ".weight", rng.normal(0, np.sqrt(2.0 / (cout * 9)), (cout, cin, 3, 3)))
        y = "/%s/Conv_output_0" % name
        nodes.append(helper.make_node("Conv", [x, w], [y], dilations=[1, 1], group=1, kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1], strides=[1, 1]))
        return y

    def bn(x, name, c):
        ins = [x, init(name + ".weight", rng.uniform(0.8, 1.2, c)), init(name + ".bias", rng.normal(0, 0.1, c)),
               init(name + ".running_mean", rng.normal(0, 0.2, c)), init(name + ".running_var", rng.uniform(0.5, 1.5, c))]
        outs = ["/%s/BatchNormalization_output_%d" % (name, i) for i in range(3)]
        nodes.append(helper.make_node("BatchNormalization", ins, outs, epsilon=1e-5, momentum=0.9, training_mode=1))
        return outs[0]

    def relu(x, name):
        nodes.append(helper.make_node("Relu", [x], ["/%s/Relu_output_0" % name]))
        return "/%s/Relu_output_0" % name

    a = relu(bn(conv("pixels", "stem.0", 3, 8), "stem.1", 8), "stem.2")
    b = relu(bn(conv(a, "block.conv1", 8, 8), "block.bn1", 8), "block.relu")
    b = bn(conv(b, "block.conv2", 8, 8), "block.bn2", 8)
    nodes.append(helper.make_node("Add", [b, a], ["/block/Add_output_0"]))
    b = relu("/block/Add_output_0", "block.relu_1")
    nodes.append(helper.make_node("GlobalAveragePool", [b], ["/GlobalAveragePool_output_0"]))
    nodes.append(helper.make_node("Flatten", ["/GlobalAveragePool_output_0"], ["/Flatten_output_0"], axis=1))
    bound = 1 / np.sqrt(8)
    w = init("fc.weight", rng.uniform(-bound, bound, (CLASSES, 8)))
    bias = init("fc.bias", rng.uniform(-bound, bound, CLASSES))
    nodes.append(helper.make_node("Gemm", ["/Flatten_output_0", w, bias], ["logits"], alpha=1.0, beta=1.0, transB=1))
    g = helper.make_graph(nodes, "torch_jit", [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, SIZE, SIZE])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], producer_name="pytorch",
                          producer_version="1.13.0")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    onnx.save(build(int(sys.argv[2])), sys.argv[1] + "/tiny.onnx")
