#!/usr/bin/python3
"""resnet_torch.py - ResNet-18 for make bench: the PyTorch peer's speed, and the ONNX file ddl trains.

torchvision's ResNet-18 layout written out (torchvision is not installed here): a 7x7 stride-2
stem with BatchNorm, ReLU and a 3x3 stride-2 max-pool, four stages of two BasicBlocks (3x3 conv,
BN, ReLU, 3x3 conv, BN, the shortcut added, ReLU; a 1x1 stride-2 conv + BN shortcut where the
width doubles), global average pooling and a Linear layer. At 64x64 the stages run at 16, 8, 4
and 2 pixels a side.

    resnet_torch.py --export FILE.onnx [--size 64] [--classes 5]
        writes the model as torch.onnx.export does in training mode with do_constant_folding off
        (BatchNormalization nodes kept), for `ddl-train --arch FILE.onnx`
    resnet_torch.py --images 640 --size 64 --threads 1 [--mode nchw|channels_last|bf16]
        times training steps (SGD lr 0.01 momentum 0.9, cross-entropy, batch 64) on RANDOM
        inputs: only the speed is compared. One untimed warm-up step; prints ddl's summary line.
"""
import argparse
import time

import torch
import torch.nn as nn

import torch_modes


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (self.down(x) if self.down is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes, in_c=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_c, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, c = [], 64
        for w, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(c, w, s), BasicBlock(w, w, 1)]
            c = w
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def main():
    ap = argparse.ArgumentParser(description="ResNet-18: ONNX export for ddl, PyTorch training speed")
    ap.add_argument("--export")
    ap.add_argument("--images", type=int, default=640)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    torch_modes.add_mode_arg(ap)
    a = ap.parse_args()
    torch.manual_seed(42)
    torch_modes.set_threads(a.threads)
    model = ResNet18(a.classes)
    if a.export:
        x = torch.zeros(1, 3, a.size, a.size)
        torch.onnx.export(model, x, a.export, input_names=["pixels"], output_names=["logits"], opset_version=13,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}})
        return
    torch_modes.time_batch_steps(model, a, time.perf_counter())

if __name__ == "__main__":
    main()
