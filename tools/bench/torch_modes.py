"""torch_modes.py - the settings a PyTorch user turns on for speed on a CPU, for the bench peers.

    --mode nchw           PyTorch's default layout, float32
    --mode channels_last  float32 in the channels_last memory format (the usual CPU advice)
    --mode bf16           channels_last with torch.autocast("cpu", dtype=torch.bfloat16): bfloat16
                          convolutions and products, float32 master weights (as ddl's
                          --precision bf16 will be); fast where the CPU has AVX512-BF16 or AMX
make bench runs each peer in every mode and compares ddl with the fastest that runs (PyTorch 1.13's
autocast fails on GroupNorm on CPU: that mode then prints "failed" and is left out).
"""
import contextlib

import torch

MODES = ("nchw", "channels_last", "bf16")


def add_mode_arg(ap):
    ap.add_argument("--mode", choices=MODES, default="nchw", help="PyTorch's layout and precision")


def prepare(model, x, mode):
    """model and input tensor in the memory format of mode (inputs of 4 dims only)."""
    if mode == "nchw":
        return model, x
    model = model.to(memory_format=torch.channels_last)
    if x is not None and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return model, x


def autocast(mode):
    """the context the forward pass and loss run in."""
    if mode == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()
