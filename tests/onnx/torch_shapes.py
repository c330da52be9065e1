"""torch_shapes.py DIR - the layers of make_shapes.py exported by PyTorch's own torch.onnx.export
(opsets 11, 13 and 17; eval mode, and training mode with do_constant_folding=False), for
tests/test_onnx_shapes.sh where python3-torch is installed: nn.Upsample nearest and bilinear
(align_corners True and False), F.interpolate to a size and by 1.5, nn.GroupNorm, nn.InstanceNorm2d
with and without affine, x.view(x.size(0), -1), torch.flatten(x, 1), a Linear. Writes
DIR/torchNAME_OPSET.onnx, input "pixels" (N, 3, 16, 16), output "logits" (N, 5)."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(45)


class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(3, 8, 3, padding=1); s.gn = nn.GroupNorm(2, 8); s.inn = nn.InstanceNorm2d(8, affine=True)
        s.in2 = nn.InstanceNorm2d(8); s.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
        s.conv2 = nn.Conv2d(8, 4, 3, padding=1); s.fc = nn.Linear(4 * 6 * 6 + 4 * 3 * 2, 5)
        with torch.no_grad():
            for m in (s.gn, s.inn):
                m.weight.uniform_(0.5, 1.5); m.bias.uniform_(-0.5, 0.5)

    def forward(s, x):
        y = torch.relu(s.gn(s.conv1(x)))
        y = torch.relu(s.in2(s.inn(y)))
        y = s.conv2(s.up(y))                                                           # 4x32x32
        a = F.interpolate(y, scale_factor=1.5, mode='bilinear', align_corners=False)   # 48x48
        a = F.interpolate(a, size=(6, 6), mode='nearest')
        b = F.interpolate(y, size=(7, 5), mode='bilinear', align_corners=False)
        b = F.interpolate(b, scale_factor=0.5, mode='nearest')                         # 3x2
        return s.fc(torch.cat([a.view(a.size(0), -1), torch.flatten(b, 1)], 1))


m = Net()
x = torch.rand(4, 3, 16, 16) * 255
for opset in (11, 13, 17):
    for mode, tag in ((torch.onnx.TrainingMode.EVAL, "eval"), (torch.onnx.TrainingMode.TRAINING, "train")):
        torch.onnx.export(m, x, "%s/torch%s_%d.onnx" % (sys.argv[1], tag, opset), input_names=["pixels"],
                          output_names=["logits"], dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}},
                          opset_version=opset, training=mode, do_constant_folding=mode == torch.onnx.TrainingMode.EVAL)
