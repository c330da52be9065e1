#!/usr/bin/python3
"""zoo_torch.py - torchvision's networks for make bench's zoo part (zoo.sh): the ONNX file ddl
trains and the PyTorch peer's speed on the same network.

    zoo_torch.py --export FILE.onnx --net NAME [--size 64] [--classes 3]
        torchvision's NAME (tests/torch/nets.py's tv_NAME: dropout 0, no stochastic depth) as
        torch.onnx.export writes it in training mode with do_constant_folding off (BatchNorm kept)
    zoo_torch.py --net NAME --images 320 [--size 64] [--threads 1] [--mode nchw|channels_last|bf16]
        times training steps (SGD lr 0.01 momentum 0.9, cross-entropy, batch 64) on RANDOM inputs:
        only the speed is compared. One untimed warm-up step; prints a summary line.
"""
import argparse
import os
import sys
import time
import warnings

import torch

import torch_modes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "torch"))
import nets  # noqa: E402

warnings.filterwarnings("ignore")


def main():
    ap = argparse.ArgumentParser(description="torchvision networks: ONNX export for ddl, PyTorch training speed")
    ap.add_argument("--net", required=True)
    ap.add_argument("--export")
    ap.add_argument("--images", type=int, default=320)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    torch_modes.add_mode_arg(ap)
    a = ap.parse_args()
    torch.manual_seed(42)
    torch_modes.set_threads(a.threads)
    model = nets.make("tv_" + a.net, a.classes)
    if a.export:
        torch.onnx.export(model, torch.zeros(2, 3, a.size, a.size), a.export, input_names=["pixels"],
                          output_names=["logits"], opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes={"pixels": {0: "N"}, "logits": {0: "N"}})
        return
    torch_modes.time_batch_steps(model.train(), a, time.perf_counter())

if __name__ == "__main__":
    main()
