"""torch_act.py DIR - a classifier of every activation ddl imports, exported by PyTorch's own
torch.onnx.export at opsets 11, 13, 14 and 17 as DIR/torch_act11.onnx ... (for
tests/test_onnx_act.sh, where python3-torch is installed; make test does not need it): what
tests/onnx/make_act_models.py writes by hand, as PyTorch writes it."""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.convs = nn.ModuleList([nn.Conv2d(3 if i == 0 else 6, 6, 3 if i == 0 else 1, padding=1 if i == 0 else 0)
                                 for i in range(12)])
        s.acts = [nn.LeakyReLU(0.2), nn.GELU(), nn.GELU(approximate='tanh'), nn.SiLU(), nn.Hardswish(),
                  nn.Hardsigmoid(), nn.ELU(0.5), nn.ReLU6(), nn.Tanh(), nn.Softmax(dim=1), nn.LogSoftmax(dim=-1),
                  nn.Sigmoid()]
        s.fc = nn.Linear(6, 5)

    def forward(s, x):
        x = x / 64
        for c, a in zip(s.convs, s.acts):
            x = a(c(x))
        return s.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


m = Net().eval()
for opset in (11, 13, 14, 17):
    torch.onnx.export(m, torch.rand(2, 3, 16, 16) * 255, "%s/torch_act%d.onnx" % (sys.argv[1], opset),
                      input_names=["input"], output_names=["logits"], opset_version=opset,
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
