#!/usr/bin/env python3
"""timestep_ref.py — independent reference for orakul's training timesteps
(core/train/schedule.c, train.timestep_type and train.content_or_style), written
from ostris/ai-toolkit (MIT; read at commit 27a03a91, re-implemented here, not
imported) and diffusers' FlowMatchEulerDiscreteScheduler:

  table of n timesteps, descending (index 0 = most noise), t = timestep / 1000
  (toolkit/samplers/custom_flowmatch_sampler.py, set_train_timesteps; add_noise
  uses t = timesteps / 1000):
    linear, weighted  torch.linspace(1000, 1, n)
    sigmoid           sort((1 - sigmoid(randn(n))) * 1000, descending), per batch
    shift/flux_shift  np.linspace(sigma_max*1000, sigma_min*1000, n) / 1000, then
                      use_dynamic_shifting: time_shift(mu, 1, s), mu = calculate_shift(
                      image_seq_len, 256, 4096, 0.5, 1.15) (flux_config in toolkit/sampler.py,
                      FLUX.2's scheduler_config); else shift*s / (1 + (shift-1)*s).
                      sigma_min/sigma_max: diffusers __init__'s table (linspace(1, 1000)
                      reversed / 1000, shifted once when not dynamic), so a fixed shift
                      shifts sigma_min twice.
    lognorm_blend     750 LogNormal(0, 0.333) samples x -> (1 - x/max(x))*1000, and
                      torch.linspace(1000, 1, 250); sorted descending, .to(torch.int)
  index per batch item (jobs/process/BaseSDTrainProcess.py, 'prepare_timesteps_indices';
  min_denoising_steps 0, max_denoising_steps 999, num_train_timesteps 1000):
    two/four/eight_step  random.choices([0, 499] | [0, 250, 500, 750] | [0, 125, .., 875])
                         on the linear table; one_step: index 0 on the linear table
    next_sample          table of next_sample_timesteps (8) 'shift'; torch.randint(0, 8 - 2)
    content              (rand ** 3 * 1000), value_map(0..999 -> 0..999), .long(), clamp
    style                ((1 - rand ** 3) * 1000), the same
    balanced             torch.randint(0, 999)   (0 .. 998: index 999 is never drawn)
  weighted loss (extensions_built_in/sd_trainer/SDTrainer.py, do_weighted_timesteps;
  get_weights_for_timesteps): loss *= default_weighing_scheme[index]
  (toolkit/timestep_weighing/default_weighing_scheme.py, read from AITK_DIR).

Usage:  AITK_DIR=<ai-toolkit checkout> python3 timestep_ref.py [OUTDIR]
        (default OUTDIR: tests/fixtures next to this folder). With AITK_DIR it also
        checks this re-implementation against ai-toolkit's own
        CustomFlowMatchEulerDiscreteScheduler (needs diffusers) and prints the result.
Needs:  torch, numpy, safetensors (and diffusers for the AITK_CHECK cross-check). CPU, a few
        minutes.

Writes OUTDIR/timesteps_ref.safetensors (all F64):
  table.<name>        [n] t of each index: linear (=weighted, *_step), shift_dyn_<seq>
                      for seq in SEQS, shift_fixed3, next_sample_dyn_1024 ([8])
  weights             [1000] the weighted loss weight of each index
  mu                  [len(SEQS)] calculate_shift of each seq in SEQS (flux_config)
  q.<type>.<cs>       [1001] quantiles at p = k/1000 (k = 0..1000) of N_DRAWS draws of t:
                      sorted[max(ceil(p*N) - 1, 0)], so F(q-) < p <= F(q) for the draws
  qw.weighted.<cs>    [1001] the same for the weight of each draw
  the shift cases draw at image_seq_len 1024 (dynamic); <cs> balanced, content, style
  (the *_step and next_sample types ignore it: balanced only).
__metadata__: magic "orakul-fixture", version "1", script, torch, n_draws, seqs, seed.
"""
import math
import os
import random
import sys

import numpy as np
import torch
from safetensors.numpy import save_file

N = 1000
N_DRAWS = 200_000
SEQS = [256, 1024, 2304, 4096, 6144]
SEED = 1234
BASE_SEQ, MAX_SEQ, BASE_SHIFT, MAX_SHIFT = 256, 4096, 0.5, 1.15  # toolkit/sampler.py flux_config
SHIFT = 3.0


def calculate_shift(seq, base_seq=BASE_SEQ, max_seq=MAX_SEQ, base_shift=BASE_SHIFT, max_shift=MAX_SHIFT):
    m = (max_shift - base_shift) / (max_seq - base_seq)
    b = base_shift - m * base_seq
    return seq * m + b


def init_sigmas(dynamic, shift=SHIFT):
    """diffusers FlowMatchEulerDiscreteScheduler.__init__: (sigma_min, sigma_max)."""
    ts = np.linspace(1, N, N, dtype=np.float32)[::-1].copy()
    s = torch.from_numpy(ts).to(torch.float32) / N
    if not dynamic:
        s = shift * s / (1 + (shift - 1) * s)
    return s[-1].item(), s[0].item()


def table_shift(n, dynamic, seq=None, shift=SHIFT):
    """set_train_timesteps' shift branch: t = timesteps / 1000 as add_noise sees it."""
    smin, smax = init_sigmas(dynamic, shift)
    ts = np.linspace(smax * N, smin * N, n)
    s = ts / N
    if dynamic:
        mu = calculate_shift(seq)
        s = math.exp(mu) / (math.exp(mu) + (1 / s - 1) ** 1.0)
    else:
        s = shift * s / (1 + (shift - 1) * s)
    timesteps = torch.from_numpy(s).to(torch.float32) * N
    return (timesteps / N).numpy()


def table_linear(n=N):
    return (torch.linspace(1000, 1, n) / 1000).numpy()


def table_sigmoid(gen, rows=1):
    """rows independent tables (one per batch in ai-toolkit)."""
    t = torch.sigmoid(torch.randn((rows, N), generator=gen))
    ts, _ = torch.sort((1 - t) * 1000, dim=1, descending=True)
    return (ts / 1000).numpy()


def table_lognorm_blend(gen, rows=1):
    alpha = 0.75
    # LogNormal(0, 0.333).sample == exp(0.333 * randn)
    t1 = torch.exp(0.333 * torch.randn((rows, int(N * alpha)), generator=gen))
    t1 = (1 - t1 / t1.max(dim=1, keepdim=True).values) * 1000
    t2 = torch.linspace(1000, 1, int(N * (1 - alpha))).expand(rows, -1)
    ts, _ = torch.sort(torch.cat((t1, t2), dim=1), dim=1, descending=True)
    return (ts.to(torch.int) / 1000).numpy()


STEP_CHOICES = {"two_step": [0, 499], "four_step": [0, 250, 500, 750],
                "eight_step": [0, 125, 250, 375, 500, 625, 750, 875]}


def indices(kind, cs, k, gen, rnd):
    """k indices as the train loop draws them (one batch of k)."""
    if kind in STEP_CHOICES:
        return np.array(rnd.choices(STEP_CHOICES[kind], k=k))
    if kind == "next_sample":
        return torch.randint(0, 8 - 2, (k,), generator=gen).numpy()
    if kind == "one_step":
        return np.zeros(k, dtype=np.int64)
    if cs in ("content", "style"):
        u = torch.rand((k,), generator=gen)
        x = u ** 3 * 1000 if cs == "content" else (1 - u ** 3) * 1000
        x = (x - 0) * (999 - 0) / (999 - 0) + 0  # value_map
        return x.long().clamp(0, 999).numpy()
    return torch.randint(0, 999, (k,), generator=gen).numpy()


def weights_table(aitk):
    sys.path.insert(0, os.path.join(aitk, "toolkit", "timestep_weighing"))
    from default_weighing_scheme import default_weighing_scheme
    w = np.array(default_weighing_scheme, dtype=np.float64)
    assert w.shape == (N,)
    return w


def draws(kind, cs, gen, rnd, weights):
    """N_DRAWS values of t (and of the loss weight), batches of 1 for the random tables
    (ai-toolkit draws one table per batch: a batch of B shares it, which changes no
    item's law), in blocks for the fixed ones."""
    if kind in ("sigmoid", "lognorm_blend"):
        out = np.empty(N_DRAWS)
        make = table_sigmoid if kind == "sigmoid" else table_lognorm_blend
        idx = indices(kind, cs, N_DRAWS, gen, rnd)
        for i in range(0, N_DRAWS, 10_000):  # 10,000 tables at a time, one per draw
            tab = make(gen, 10_000)
            out[i:i + 10_000] = tab[np.arange(10_000), idx[i:i + 10_000]]
        return out, None
    if kind == "shift":
        tab = table_shift(N, True, 1024)
    elif kind == "next_sample":
        tab = table_shift(8, True, 1024)
    else:
        tab = table_linear()
    idx = indices(kind, cs, N_DRAWS, gen, rnd)
    w = weights[idx] if kind == "weighted" else None
    return tab[idx].astype(np.float64), w


def quantiles(x):
    s = np.sort(x)
    p = np.arange(N + 1) / N
    k = np.maximum(np.ceil(p * len(s)).astype(np.int64) - 1, 0)
    return s[k]


def check_against_aitk(aitk, weights):
    """This re-implementation == ai-toolkit's own scheduler (where deterministic)."""
    sys.path.insert(0, aitk)
    from toolkit.samplers.custom_flowmatch_sampler import CustomFlowMatchEulerDiscreteScheduler as C
    flux = dict(base_image_seq_len=256, base_shift=0.5, max_image_seq_len=4096, max_shift=1.15,
                num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True)
    worst = 0.0
    for seq in SEQS:
        s = C(**flux)
        side = int(round(math.sqrt(seq))) * 2  # flux: patch 2 over 16-channel latents
        lat = torch.zeros(1, 16, side, side)
        ts = s.set_train_timesteps(N, "cpu", timestep_type="flux_shift", latents=lat, patch_size=2)
        worst = max(worst, float(np.abs((ts / 1000).numpy() - table_shift(N, True, (side // 2) ** 2)).max()))
    s = C(**dict(flux, use_dynamic_shifting=False))
    ts = s.set_train_timesteps(N, "cpu", timestep_type="shift")
    worst = max(worst, float(np.abs((ts / 1000).numpy() - table_shift(N, False)).max()))
    s = C(**flux)
    ts = s.set_train_timesteps(N, "cpu", timestep_type="weighted")
    worst = max(worst, float(np.abs((ts / 1000).numpy() - table_linear()).max()))
    wt = s.get_weights_for_timesteps(ts[:N], timestep_type="weighted").numpy()
    worst = max(worst, float(np.abs(wt - weights).max()))
    print(f"ai-toolkit's scheduler vs this reference: max |diff| {worst:.3g}")
    assert worst < 1e-6, worst


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "..", "fixtures")
    aitk = os.environ.get("AITK_DIR")
    if not aitk:
        sys.exit("timestep_ref.py: set AITK_DIR to an ostris/ai-toolkit checkout (its weighing table)")
    weights = weights_table(aitk)
    if os.environ.get("AITK_CHECK", "1") == "1":
        check_against_aitk(aitk, weights)
    t = {"weights": weights, "table.linear": table_linear().astype(np.float64),
         "table.shift_fixed3": table_shift(N, False).astype(np.float64),
         "table.next_sample_dyn_1024": table_shift(8, True, 1024).astype(np.float64),
         "mu": np.array([calculate_shift(s) for s in SEQS], dtype=np.float64)}
    for s in SEQS:
        t[f"table.shift_dyn_{s}"] = table_shift(N, True, s).astype(np.float64)
    gen = torch.Generator().manual_seed(SEED)
    rnd = random.Random(SEED)
    cases = [(k, cs) for k in ("sigmoid", "linear", "weighted", "shift", "lognorm_blend")
             for cs in ("balanced", "content", "style")]
    cases += [(k, "balanced") for k in ("one_step", "two_step", "four_step", "eight_step", "next_sample")]
    for kind, cs in cases:
        x, w = draws(kind, cs, gen, rnd, weights)
        t[f"q.{kind}.{cs}"] = quantiles(x)
        if w is not None:
            t[f"qw.{kind}.{cs}"] = quantiles(w)
        print(f"{kind:14s} {cs:8s} mean t {x.mean():.4f}" + (f"  mean w {w.mean():.4f}" if w is not None else ""))
    meta = {"magic": "orakul-fixture", "version": "1", "script": "tests/reference/timestep_ref.py",
            "torch": torch.__version__, "n_draws": str(N_DRAWS), "seqs": ",".join(map(str, SEQS)),
            "seed": str(SEED)}
    path = os.path.join(out_dir, "timesteps_ref.safetensors")
    save_file({k: np.ascontiguousarray(v, dtype=np.float64) for k, v in t.items()}, path, metadata=meta)
    print("wrote", path)


if __name__ == "__main__":
    main()
