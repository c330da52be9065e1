"""torch_geometry.py DIR - a network of the convolution and pooling geometry PyTorch users write,
exported by torch.onnx.export (opset 13) as DIR/torch_geometry.onnx, for tests/test_onnx_geometry.sh
where python3-torch is installed: non-square kernels, strides and pads, dilation, groups, a
MobileNetV2 inverted residual (depthwise 3x3), ConvTranspose2d with output_padding, MaxPool2d with
padding, dilation and ceil_mode, AvgPool2d with padding counted (exported as a Pad of zeros, then
the pool) and not. (nn.ZeroPad2d exports a computed Pad, which ddl refuses.)"""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Conv2d(3, 16, (3, 5), stride=(2, 1), padding=(1, 2))
        s.dil = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4)
        s.expand = nn.Conv2d(16, 48, 1, bias=False)
        s.dw = nn.Conv2d(48, 48, 3, padding=1, groups=48)
        s.project = nn.Conv2d(48, 16, 1, bias=False)
        s.down = nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=16)
        s.up = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)
        s.mp = nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1), dilation=(1, 2), ceil_mode=True)
        s.ap = nn.AvgPool2d(3, stride=2, padding=1)
        s.ap2 = nn.AvgPool2d((3, 1), stride=1, padding=(1, 0), count_include_pad=False)
        s.fc = nn.Linear(16, 5)

    def forward(s, x):
        x = torch.relu(s.stem(x / 255.0))
        x = torch.relu(s.dil(x))
        x = x + s.project(torch.relu(s.dw(torch.relu(s.expand(x)))))  # inverted residual
        x = torch.relu(s.down(x))
        x = torch.relu(s.up(x))
        x = s.ap2(s.ap(s.mp(x)))
        return s.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


m = Net().eval()
x = torch.rand(2, 3, 15, 17) * 255
torch.onnx.export(m, x, "%s/torch_geometry.onnx" % sys.argv[1], input_names=["pixels"], output_names=["logits"],
                  dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}}, opset_version=13)
