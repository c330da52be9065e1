"""torch_modes.py - the settings a PyTorch user turns on for speed on a CPU, for the bench peers.

    --mode nchw           PyTorch's default layout, float32
    --mode channels_last  float32 in the channels_last memory format (the usual CPU advice)
    --mode bf16           channels_last with torch.autocast("cpu", dtype=torch.bfloat16): bfloat16
                          convolutions and products, float32 master weights (as ddl's
                          --precision bf16 will be); fast where the CPU has AVX512-BF16 or AMX
make bench runs each peer in every mode and compares ddl with the fastest that runs (PyTorch 1.13's
autocast fails on GroupNorm on CPU: that mode then prints "failed" and is left out).

Importing this module also keeps freed memory in the process (keep_freed_memory): with glibc's
defaults PyTorch gives every large tensor back to the kernel when it is freed and takes fresh
pages for the next, and on the VMs this project runs on a fresh page costs 10-20 us: the U-Net
peer made 52 images/s so and 185 with the memory kept (tcmalloc, PyTorch's own advice, gives the
same). A PyTorch user who tunes for speed preloads tcmalloc or jemalloc; this is the same effect
without a preload.
"""
import contextlib
import ctypes
import ctypes.util

import torch

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3


def keep_freed_memory():
    """glibc keeps freed blocks for reuse: blocks up to 32 MiB (its largest mmap threshold) come
    from the heap, and the heap is never trimmed. Returns whether glibc took the settings."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return all(libc.mallopt(opt, val) == 1 for opt, val in
                   ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 40), (M_TOP_PAD, 64 << 20)))
    except (OSError, AttributeError):
        return False


KEPT = keep_freed_memory()


def set_threads(n):
    """n threads for PyTorch's own kernels and one for the BLAS it calls. Debian's PyTorch calls
    OpenBLAS (libblas.so.3), which starts one thread per core whatever torch.set_num_threads says:
    a "1 thread" peer used the second core for its products and spun in sched_yield. At n > 1
    PyTorch already splits its work over its own threads (a convolution by samples), each calling
    the BLAS, so BLAS threads of their own only crowd the cores: at 2 threads the LeNet peer made
    6,000 images/s with OpenBLAS at 2 threads and 14,700 at 1, the U-Net peer 114-209 and 319-358
    (OPENBLAS_NUM_THREADS=1, the usual advice for a threaded caller)."""
    torch.set_num_threads(n)
    for name in ("libblas.so.3", "libopenblas.so.0"):
        try:
            getattr(ctypes.CDLL(name), "openblas_set_num_threads")(1)
            return
        except (OSError, AttributeError):
            continue

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


def time_batch_steps(model, a, wall0):
    """a.images // a.batch training steps (SGD lr 0.01 momentum 0.9, cross-entropy) of model on one
    RANDOM batch of a.size x a.size RGB images (only the speed is compared), in a.mode, after one
    untimed warm-up step; prints the summary line the bench scripts read (images_per_sec=)."""
    import time
    g = torch.Generator().manual_seed(1)
    model, x = prepare(model, torch.rand(a.batch, 3, a.size, a.size, generator=g), a.mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    y = torch.randint(0, a.classes, (a.batch,), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast(a.mode):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    step()  # warm-up, untimed
    steps = max(1, a.images // a.batch)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    dt = time.perf_counter() - t0
    print("epoch=1 loss=%.4f images_per_sec=%.1f step_ms=%.1f wall_s=%.1f threads=%d mode=%s" %
          (loss, steps * a.batch / dt, 1e3 * dt / steps, time.perf_counter() - wall0, a.threads, a.mode))
