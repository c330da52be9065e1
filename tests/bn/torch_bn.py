"""torch_bn.py export DIR | check DIR REFDIR MODEL.onnx - PyTorch's own BatchNorm, for tests/test_batchnorm.sh
where python3-torch is installed: a Conv-BN-ReLU network with a residual block (bias-free convs,
nn.BatchNorm2d of momentum 0.1 and 0.3), trained three steps in PyTorch so its running statistics
are its own, then exported by torch.onnx.export three ways: DIR/train13.onnx and DIR/train15.onnx
in training mode (TrainingMode.TRAINING: BatchNormalization with training_mode 1 at opset 15),
DIR/nofold.onnx in eval mode with do_constant_folding=False (torch 1.13 folds the BatchNorm into
the conv all the same); DIR/state.pt keeps the weights. A training-mode export runs the network
in training mode, which moves its running statistics: each export is of a copy.
check: PyTorch's eval-mode logits of REFDIR/pixels.f32 (test_infer --reference) with the weights
and running statistics MODEL.onnx holds under state_dict's names (the others from state.pt)
against ddl's REFDIR/logits.f32: prints the largest difference relative to each image's scale; exit 0 when it
is <= 1e-4 and the classes agree."""
import copy
import sys

import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        s.bn1 = nn.BatchNorm2d(8)
        s.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        s.bn2 = nn.BatchNorm2d(8, momentum=0.3)
        s.fc = nn.Linear(8, 3)

    def forward(s, x):
        a = torch.relu(s.bn1(s.conv1(x / 255.0)))
        b = torch.relu(s.bn2(s.conv2(a)) + a)
        return s.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(b, 1), 1))


def main():
    torch.manual_seed(0)
    m = Net()
    if sys.argv[1] == "export":
        d = sys.argv[2]
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):  # running statistics of its own, not 0 and 1
            x = torch.rand(16, 3, 16, 16) * 255 + 20
            loss = nn.functional.cross_entropy(m(x), torch.randint(0, 3, (16,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.save(m.state_dict(), d + "/state.pt")
        x = torch.rand(2, 3, 16, 16) * 255
        kw = dict(input_names=["pixels"], output_names=["logits"], dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}})
        for opset in (13, 15):
            torch.onnx.export(copy.deepcopy(m), x, "%s/train%d.onnx" % (d, opset), opset_version=opset,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, **kw)
        torch.onnx.export(copy.deepcopy(m).eval(), x, d + "/nofold.onnx", opset_version=13, do_constant_folding=False,
                          **kw)
        return 0
    import onnx
    from onnx import numpy_helper
    state = torch.load(sys.argv[2] + "/state.pt")
    for t in onnx.load(sys.argv[4]).graph.initializer:
        if t.name in state:
            state[t.name] = torch.from_numpy(numpy_helper.to_array(t).copy()).reshape(state[t.name].shape)
    m.load_state_dict(state)
    m.eval()
    ref = sys.argv[3]
    n, c, h, w, k = [int(v) for v in open(ref + "/shape.txt").read().split()[:5]]
    px = torch.from_numpy(np.fromfile(ref + "/pixels.f32", np.float32).reshape(n, c, h, w))
    ddl = np.fromfile(ref + "/logits.f32", np.float32).reshape(n, k)
    with torch.no_grad():
        want = m(px).numpy()
    rel = (np.abs(ddl - want).max(1) / np.abs(want).max(1)).max()
    same = (ddl.argmax(1) == want.argmax(1)).mean()
    print("pytorch: images=%d max_rel_diff=%.2g classes_equal=%.3f" % (n, rel, same))
    return 0 if rel <= 1e-4 and same == 1.0 else 1


sys.exit(main())
