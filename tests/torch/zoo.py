"""zoo.py DIR [NAME ...] - torchvision's own networks as a PyTorch user brings them (for
tests/test_torch_zoo.sh, where /usr/bin/python3 has torchvision): each built with 10 classes from a
seed, its BatchNorms given running statistics and affine weights that are not the identity, put in
eval mode and exported by torch.onnx.export (opset 13, a free batch) as DIR/NAME.onnx, with two
64x64 RGB images DIR/NAME.x.f32 (N, C, H, W) and the network's float64 answer to them
DIR/NAME.want.f32 (and PyTorch's own float32 answer, DIR/NAME.torch.f32, to say how far float32
is from float64 there); the images as uint8 DIR/x.npy, labels DIR/y.npy. Writes DIR/cases.txt, one "MODEL X OUT" line a network, for
test_infer --onnx-cases. Prints one line a network: its name, parameters and export time."""
import os
import sys
import time
import warnings

import numpy as np
import torch
import torchvision

warnings.filterwarnings("ignore")
ZOO = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "googlenet",
       "regnet_y_400mf", "mnasnet0_5", "densenet121", "shufflenet_v2_x0_5"]


def build(name):
    kw = {"num_classes": 10}
    if name == "googlenet":
        kw.update(aux_logits=False, init_weights=True)
    torch.manual_seed(1)
    m = getattr(torchvision.models, name)(**kw)
    g = torch.Generator().manual_seed(2)
    for mod in m.modules():  # statistics a trained network would have: every BatchNorm does something
        if isinstance(mod, torch.nn.BatchNorm2d):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            mod.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
    return m.eval()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    names = sys.argv[2:] or ZOO
    x = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    lines = []
    for name in names:
        t0 = time.time()
        m = build(name)
        path = os.path.join(out, name)
        torch.onnx.export(m, x, path + ".onnx", opset_version=13, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
        with torch.no_grad():
            y32 = m(x).numpy()
            y64 = m.double()(x.double()).numpy()
        x.numpy().astype(np.float32).tofile(path + ".x.f32")
        if not os.path.exists(os.path.join(out, "x.npy")):  # the images as ddl-train reads them
            np.save(os.path.join(out, "x.npy"), (x.numpy() * 255).astype(np.uint8))
            np.save(os.path.join(out, "y.npy"), np.arange(2, dtype=np.int64))
        y64.astype(np.float32).tofile(path + ".want.f32")
        y32.astype(np.float32).tofile(path + ".torch.f32")
        params = sum(p.numel() for p in m.parameters())
        print("%s: %d parameters, exported in %.1f s" % (name, params, time.time() - t0))
        lines.append("%s.onnx %s.x.f32 %s.ddl.f32" % (path, path, path))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


main()
