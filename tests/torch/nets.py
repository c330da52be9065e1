"""nets.py - six networks written the way PyTorch users write them (issue 45, item 6), for
tests/torch/torch_trains.py and tools/bench/torch_trains.sh: none scales its input (ddl-train
normalises it with the data's per-channel mean and std; torch_trains.py does the same for PyTorch).

  resnet18   torchvision's ResNet-18 (BasicBlock [2, 2, 2, 2], 7x7 stem, max pool, 1x1 downsample
             with BatchNorm), written by hand: torchvision is not installed
  mobilenet  MobileNetV2's layout, narrower: inverted residuals (1x1 expand, depthwise 3x3,
             1x1 project, each with BatchNorm; ReLU6 after the first two), Dropout, Linear
  unet       a U-Net of (Conv-BN-ReLU) x 2 blocks, max pool down, bilinear Upsample
             (align_corners=True) up, skip concatenation, a 1x1 conv to per-pixel classes
  resnet     the issue's network: Conv-BN-ReLU, a residual block, AdaptiveAvgPool2d, Dropout, Linear
  effnet     EfficientNet's and MobileNetV3's blocks, small: MBConv (1x1 expand, depthwise 3x3, each
             with BatchNorm and SiLU), squeeze-and-excitation (average pool, 1x1 conv, SiLU, 1x1 conv,
             Sigmoid, the input times it), 1x1 project; a last block with Hardswish and Hardsigmoid
  senet      SENet's own gate (Linear layers, .view(b, c, 1, 1), x * y.expand_as(x)) after a
             residual block and after a strided Conv-BN-ReLU

make(name, classes, dropout) builds one from torch's global seed; "tiny" is tiny.py's network, and
"tv_NAME" torchvision's network NAME (resnet18, densenet121, ...) where torchvision is installed."""
import torch
import torch.nn as nn


def conv_bn(cin, cout, k, stride=1, groups=1):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for i, c in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, c, stride), BasicBlock(c, c)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += conv_bn(cin, hidden, 1) + [nn.ReLU6(inplace=True)]
        layers += conv_bn(hidden, hidden, 3, stride, groups=hidden) + [nn.ReLU6(inplace=True)]
        layers += conv_bn(hidden, cout, 1)
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, first stride s), as torchvision's table, narrower
    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2), (6, 96, 1, 1))

    def __init__(self, classes, dropout):
        super().__init__()
        layers, cin = conv_bn(3, 32, 3, 2) + [nn.ReLU6(inplace=True)], 32
        for t, c, n, s in self.SETTING:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += conv_bn(cin, 256, 1) + [nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(256, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class SqueezeExcitation(nn.Module):
    """torchvision's: the input times a gate per channel from its average"""

    def __init__(self, c, squeeze, act, gate):
        super().__init__()
        self.fc1, self.fc2, self.act, self.gate = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1), act(), gate()

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class MBConv(nn.Module):
    def __init__(self, cin, cout, stride, expand, act=nn.SiLU, gate=nn.Sigmoid):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = conv_bn(cin, hidden, 1) + [act()] if expand != 1 else []
        layers += conv_bn(hidden, hidden, 3, stride, groups=hidden) + [act()]
        layers += [SqueezeExcitation(hidden, max(1, cin // 4), act, gate)] + conv_bn(hidden, cout, 1)
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class EffNet(nn.Module):
    def __init__(self, classes, dropout):
        super().__init__()
        self.features = nn.Sequential(*conv_bn(3, 16, 3, 2), nn.SiLU(), MBConv(16, 16, 1, 1), MBConv(16, 24, 2, 4),
                                      MBConv(24, 24, 1, 4, nn.Hardswish, nn.Hardsigmoid), *conv_bn(24, 96, 1),
                                      nn.SiLU())
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(96, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class SELayer(nn.Module):
    """SENet's own (senet.pytorch's SELayer): Linear layers on the pooled values, the gate viewed
    as (b, c, 1, 1) and expanded to the input's shape"""

    def __init__(self, c, r=4):
        super().__init__()
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(nn.Linear(c, c // r, bias=False), nn.ReLU(inplace=True), nn.Linear(c // r, c, bias=False),
                                nn.Sigmoid())

    def forward(self, x):
        b, c, _, _ = x.size()
        y = self.fc(self.avg(x).view(b, c)).view(b, c, 1, 1)
        return x * y.expand_as(x)


class SENet(nn.Module):
    """a residual block with SENet's gate, then a strided Conv-BN-ReLU with another"""

    def __init__(self, classes, dropout):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn(3, 16, 3), nn.ReLU())
        self.block = nn.Sequential(*conv_bn(16, 16, 3), nn.ReLU(), *conv_bn(16, 16, 3), SELayer(16))
        self.down = nn.Sequential(*conv_bn(16, 32, 3, 2), nn.ReLU(), SELayer(32))
        self.fc = nn.Sequential(nn.Dropout(dropout), nn.Linear(32, classes))

    def forward(self, x):
        x = self.stem(x)
        x = self.down(torch.relu(x + self.block(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(*conv_bn(cin, cout, 3), nn.ReLU(inplace=True), *conv_bn(cout, cout, 3), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, classes, width=8, depth=3):
        super().__init__()
        self.inc = DoubleConv(3, width)
        self.down = nn.ModuleList()
        self.up = nn.ModuleList()
        c = width
        for _ in range(depth):
            self.down.append(DoubleConv(c, c * 2))
            c *= 2
        for _ in range(depth):
            self.up.append(DoubleConv(c + c // 2, c // 2))
            c //= 2
        self.pool = nn.MaxPool2d(2)
        self.upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.outc = nn.Conv2d(width, classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for d in self.down:
            skips.append(d(self.pool(skips[-1])))
        x = skips.pop()
        for u in self.up:
            x = u(torch.cat([skips.pop(), self.upsample(x)], 1))
        return self.outc(x)


class ResNetSmall(nn.Module):
    """The issue's: Conv-BN-ReLU, a residual block, a strided Conv-BN-ReLU, another residual
    block, AdaptiveAvgPool2d, Dropout, Linear."""

    def __init__(self, classes, dropout):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(2))
        self.block1 = BasicBlock(16, 16)
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.block2 = BasicBlock(32, 32)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.block2(self.down(self.block1(self.stem(x))))
        return self.fc(self.drop(torch.flatten(self.pool(x), 1)))


class Tiny(nn.Module):
    """tiny.py's network, which python3-onnx writes without PyTorch for the fixture of
    tests/test_torch_trains.sh: Conv-BN-ReLU, a residual block, global average pool, Linear."""

    def __init__(self, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.block = BasicBlock(8, 8)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = self.block(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


NAMES = ("resnet18", "mobilenet", "unet", "resnet", "effnet", "senet")
SEGMENT = {"unet"}


def make(name, classes, dropout=0.0):
    if name == "resnet18":
        return ResNet18(classes)
    if name == "mobilenet":
        return MobileNetV2(classes, dropout)
    if name == "unet":
        return UNet(classes)
    if name == "resnet":
        return ResNetSmall(classes, dropout)
    if name == "effnet":
        return EffNet(classes, dropout)
    if name == "senet":
        return SENet(classes, dropout)
    if name == "tiny":
        return Tiny(classes)
    if name.startswith("tv_"):  # torchvision's own, where installed (tests/test_torch_zoo.sh)
        import torchvision
        kw = {"aux_logits": False, "init_weights": True} if name == "tv_googlenet" else {}
        if name.startswith("tv_efficientnet"):  # stochastic depth's random drop: no training-mode export
            kw["stochastic_depth_prob"] = 0.0
        m = getattr(torchvision.models, name[3:])(num_classes=classes, **kw)
        for d in m.modules():  # its own dropout (MobileNetV3's 0.2) is a random mask ddl cannot share
            if isinstance(d, nn.Dropout):
                d.p = dropout
        return m
    raise SystemExit("nets.py: no network %r (%s)" % (name, ", ".join(NAMES)))
