"""bn_step.py write DIR | check DIR - a numpy reference of one training step of a Conv-BN-ReLU
network (tests/test_batchnorm.sh): conv c1 3 3x3 pad 1 without bias, batchnorm bn1 (training: the
batch's mean and biased variance over (N, H, W); running statistics with momentum 0.1 and the
unbiased variance), relu, global average pool, dense fc 3; softmax cross-entropy (mean over the
batch), plain SGD with lr 0.1.
  write: DIR/in.f32 = x (4, 2, 6, 6), labels (4, as floats), then the parameters in the order the
         model declares them: c1.weight (3, 2, 3, 3), bn1.weight (3), bn1.bias (3), fc.weight
         (3, 3), fc.bias (3).
  check: reads DIR/out.f32 (test_batchnorm --step: logits (4, 3), loss, the parameters after the
         step, running mean and variance) and compares it with the reference; prints the largest
         differences relative to each quantity's scale; exit 0 when all are <= 1e-4."""
import sys

import numpy as np

N, C, O, H, K, LR, MOM, EPS = 4, 2, 3, 6, 3, 0.1, 0.1, 1e-5


def inputs():
    rng = np.random.default_rng(45)
    x = rng.normal(0.5, 2.0, (N, C, H, H))
    y = np.array([0, 2, 1, 2])
    w = rng.normal(0, 0.4, (O, C, 3, 3))
    g = rng.uniform(0.5, 1.5, O)
    b = rng.normal(0, 0.2, O)
    fw = rng.normal(0, 0.5, (K, O))
    fb = rng.normal(0, 0.1, K)
    return [a.astype(np.float32).astype(np.float64) for a in (x, y, w, g, b, fw, fb)]


def step(x, y, w, g, b, fw, fb):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((N, O, H, H))
    for kh in range(3):
        for kw in range(3):
            conv += np.einsum("oc,ncij->noij", w[:, :, kh, kw], xp[:, :, kh:kh + H, kw:kw + H])
    mu, var = conv.mean((0, 2, 3)), conv.var((0, 2, 3))
    M = N * H * H
    rstd = 1 / np.sqrt(var + EPS)
    xh = (conv - mu[None, :, None, None]) * rstd[None, :, None, None]
    z = xh * g[None, :, None, None] + b[None, :, None, None]
    a = np.maximum(z, 0)
    p = a.mean((2, 3))
    logits = p @ fw.T + fb
    e = np.exp(logits - logits.max(1, keepdims=True))
    prob = e / e.sum(1, keepdims=True)
    yi = y.astype(int)
    loss = -np.log(prob[np.arange(N), yi]).mean()
    d = prob.copy()
    d[np.arange(N), yi] -= 1
    d /= N
    dfw, dfb = d.T @ p, d.sum(0)
    dp = d @ fw
    dz = np.broadcast_to(dp[:, :, None, None] / (H * H), z.shape) * (z > 0)
    dg, db = (dz * xh).sum((0, 2, 3)), dz.sum((0, 2, 3))
    dxh = dz * g[None, :, None, None]
    dconv = rstd[None, :, None, None] * (dxh - dxh.mean((0, 2, 3))[None, :, None, None]
                                         - xh * (dxh * xh).mean((0, 2, 3))[None, :, None, None])
    dw = np.zeros_like(w)
    for kh in range(3):
        for kw in range(3):
            dw[:, :, kh, kw] = np.einsum("noij,ncij->oc", dconv, xp[:, :, kh:kh + H, kw:kw + H])
    new = [w - LR * dw, g - LR * dg, b - LR * db, fw - LR * dfw, fb - LR * dfb]
    run = [MOM * mu, (1 - MOM) + MOM * var * M / (M - 1)]
    return logits, loss, new, run


def main():
    mode, d = sys.argv[1], sys.argv[2]
    x, y, w, g, b, fw, fb = inputs()
    if mode == "write":
        np.concatenate([a.ravel() for a in (x, y, w, g, b, fw, fb)]).astype(np.float32).tofile(d + "/in.f32")
        return 0
    logits, loss, new, run = step(x, y, w, g, b, fw, fb)
    got = np.fromfile(d + "/out.f32", np.float32).astype(np.float64)
    want = [("logits", logits.ravel()), ("loss", np.array([loss])), ("weights after the step",
            np.concatenate([a.ravel() for a in new])), ("running statistics", np.concatenate(run))]
    if got.size != sum(v.size for _, v in want):
        print("out.f32 holds %d floats, expected %d" % (got.size, sum(v.size for _, v in want)))
        return 1
    at, worst = 0, 0.0
    for name, v in want:
        diff = np.abs(got[at:at + v.size] - v).max() / max(np.abs(v).max(), 1e-6)
        print("%s: max difference %.2g of their scale" % (name, diff))
        worst, at = max(worst, diff), at + v.size
    # the step moved the weights by more than the tolerance: the check can tell a missing step
    moved = np.abs(np.concatenate([a.ravel() for a in new]) - np.concatenate([a.ravel() for a in (w, g, b, fw, fb)]))
    print("the step moves the weights by up to %.2g" % moved.max())
    return 0 if worst <= 1e-4 and moved.max() > 1e-3 else 1


sys.exit(main())
