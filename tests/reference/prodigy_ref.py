#!/usr/bin/env python3
"""prodigy_ref.py — reference trajectories of the Prodigy optimizer for
plugins/optimizers/prodigy (tests/optimizers/test_prodigy.c): prodigyopt's own
Prodigy (PyPI prodigyopt, the version printed below and stored in the metadata)
driven on three float32 tensors for STEPS steps with fixed gradients, as
ai-toolkit builds it (toolkit/optimizer.py: Prodigy(params, lr=use_lr, eps=1e-6,
**optimizer_params), use_lr = 1.0 when train.lr < 0.1).

Cases (c):
  default   ai-toolkit's defaults: lr 1.0, eps 1e-6, betas (0.9, 0.999), beta3 None,
            weight_decay 0, decouple, no bias correction, d0 1e-6, d_coef 1, growth inf
  tuned     weight_decay 0.01 (decoupled), use_bias_correction, safeguard_warmup,
            beta3 0.99, d_coef 2, growth_rate 1.5, d0 1e-5, and a schedule: the lr of
            step k is lr[k] (linear warm-up over 5 steps, then 1.0, then a cosine tail)
  coupled   weight_decay 0.1 coupled (decouple false), beta1 0
Tensors: a (6, 5) random, b (5, 6) zeros (a LoRA up), c (37,) random. Gradient of
each at step k: (p − target) + noise[k] in float32 (a quadratic pull towards a fixed
target plus fixed noise: two float32 operations, so C computes the same bits).

Usage:  python3 prodigy_ref.py [OUTDIR]   (default: tests/fixtures next to this folder)
Needs:  torch (CPU), prodigyopt, numpy, safetensors. Seconds.

Writes OUTDIR/prodigy_ref.safetensors:
  <c>.init.<t>   F32 (numel)          the tensor before step 1
  <c>.target.<t> F32 (numel)          the quadratic's target
  <c>.noise.<t>  F32 (STEPS, numel)   the noise added to the gradient at each step
  <c>.traj.<t>   F32 (STEPS, numel)   the tensor after each step
  <c>.lr         F64 (STEPS)          the lr of each step (group['lr'])
  <c>.d, <c>.d_max, <c>.d_numerator   F64 (STEPS) after each step
__metadata__: magic "orakul-fixture", version "1", script, torch, prodigyopt,
  steps, cases (JSON: the keyword arguments of each case).
"""
import json
import math
import os
import sys
from importlib.metadata import version

import numpy as np
import torch
from prodigyopt import Prodigy
from safetensors.numpy import save_file

STEPS = 20
SHAPES = {"a": (6, 5), "b": (5, 6), "c": (37,)}
CASES = {
    "default": dict(lr=1.0, eps=1e-6),
    "tuned": dict(lr=1.0, eps=1e-6, weight_decay=0.01, decouple=True, use_bias_correction=True,
                  safeguard_warmup=True, beta3=0.99, d_coef=2.0, growth_rate=1.5, d0=1e-5),
    "coupled": dict(lr=1.0, eps=1e-6, weight_decay=0.1, decouple=False, betas=(0.0, 0.999)),
}


def lr_of(case, k):
    if case != "tuned":
        return 1.0
    if k < 5:
        return (k + 1) / 5
    if k < 12:
        return 1.0
    return 0.5 * (1 + math.cos(math.pi * (k - 12) / (STEPS - 12)))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "..", "fixtures")
    gen = torch.Generator().manual_seed(20261202)
    t = {}
    for c, kw in CASES.items():
        ps = {}
        for name, shape in SHAPES.items():
            init = torch.zeros(shape) if name == "b" else torch.randn(shape, generator=gen) * 0.1
            ps[name] = torch.nn.Parameter(init.clone())
            t[f"{c}.init.{name}"] = init.flatten().numpy().astype(np.float32)
        target = {n: torch.randn(SHAPES[n], generator=gen) for n in SHAPES}
        noise = {n: torch.randn((STEPS,) + SHAPES[n], generator=gen) * 0.01 for n in SHAPES}
        opt = Prodigy(list(ps.values()), **kw)
        traj = {n: [] for n in SHAPES}
        d, dm, dn, lrs = [], [], [], []
        for k in range(STEPS):
            for g in opt.param_groups:
                g["lr"] = lr_of(c, k)
            lrs.append(lr_of(c, k))
            for n, p in ps.items():
                p.grad = (p.detach() - target[n]) + noise[n][k]
            opt.step()
            for n, p in ps.items():
                traj[n].append(p.detach().flatten().clone())
            g = opt.param_groups[0]
            d.append(g["d"]), dm.append(g["d_max"]), dn.append(float(g["d_numerator"]))
        for n in SHAPES:
            t[f"{c}.target.{n}"] = target[n].flatten().numpy().astype(np.float32)
            t[f"{c}.noise.{n}"] = noise[n].reshape(STEPS, -1).numpy().astype(np.float32)
            t[f"{c}.traj.{n}"] = torch.stack(traj[n]).numpy().astype(np.float32)
        t[f"{c}.lr"] = np.array(lrs, dtype=np.float64)
        t[f"{c}.d"] = np.array(d, dtype=np.float64)
        t[f"{c}.d_max"] = np.array(dm, dtype=np.float64)
        t[f"{c}.d_numerator"] = np.array(dn, dtype=np.float64)
        print(f"{c:8s} d: {d[0]:.3g} -> {d[4]:.3g} -> {d[-1]:.3g}")
    meta = {"magic": "orakul-fixture", "version": "1", "script": "tests/reference/prodigy_ref.py",
            "torch": torch.__version__, "prodigyopt": version("prodigyopt"), "steps": str(STEPS),
            "cases": json.dumps({c: {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}
                                 for c, kw in CASES.items()})}
    path = os.path.join(out_dir, "prodigy_ref.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in t.items()}, path, metadata=meta)
    print("wrote", path)


if __name__ == "__main__":
    main()
