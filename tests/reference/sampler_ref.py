#!/usr/bin/env python3
"""sampler_ref.py — independent PyTorch reference for orakul's sampler
(core/train/sample.c): the flow-matching Euler sampler with FLUX's time shift,
run on the small FLUX.1 / FLUX.2 models of flux_ref.py from their committed
checkpoints (tests/fixtures/flux{1,2}_small_bfl.safetensors), from a fixed noise.

Sampler (BFL black-forest-labs/flux src/flux/sampling.py get_schedule/denoise,
black-forest-labs/flux2 sampling.py compute_empirical_mu; read, not copied):
    t = linspace(1, 0, steps + 1)
    flux1: mu = base + (max - base)·(seq - 256)/(4096 - 256)   (base 0.5, max 1.15)
    flux2: mu = compute_empirical_mu(seq, steps)                (diffusers/BFL FLUX.2)
    none:  no shift (FLUX.1-schnell)
    t <- exp(mu) / (exp(mu) + (1/t - 1))      (t = 0 stays 0, t = 1 stays 1)
    for each (t_cur, t_prev): v = model(x, t_cur, guidance); x <- x + (t_prev - t_cur)·v
    classifier-free guidance (cfg > 1): v = v(neg) + cfg·(v(pos) - v(neg)),
    two forwards of batch 1 (the model's guidance input is fed as well).

Usage:  python3 sampler_ref.py [OUTDIR]      (default: tests/fixtures next to this folder)
Needs:  torch, safetensors, numpy; imports flux_ref.py from this folder. CPU, seconds.

Writes OUTDIR/sampler_ref.safetensors; per case <c> (flux1, flux1_lora_cfg, flux2):
  <c>.noise      F32 (1, N, C)   x at t = 1 (N = h·w tokens, row-major grid)
  <c>.txt        F32 (1, T, ctx) text embedding of the prompt
  <c>.vec        F32 (1, vec)    pooled vector (FLUX.1 only)
  <c>.timesteps  F64 (steps + 1) the shifted schedule in double precision
  <c>.ref.x      F64 (1, N, C)   final latent: model and update in float64 on the F32
                                 weights and inputs, timesteps rounded to F32 first
                                 (the values the C side feeds the model)
  <c>.f32.x      F32 (1, N, C)   the same run in float32 (the yardstick for tolerances)
  flux1_lora_cfg also uses flux1_small.safetensors' LoRA (lora.<module>.down/up/alpha,
  y += alpha/rank · up(down(x))) and an empty negative prompt (zero txt and vec).
__metadata__: magic "orakul-fixture", version "1", script, torch, cases (JSON: per case
  ckpt, grid [h, w], steps, shift, mu, guidance, cfg, lora), worst_f32_rel.

Tolerance advice (C F32 vs <c>.ref.x, M = max|ref|): torch's own float32 run of the
same sampler differs from the float64 one by the printed 'rel' (~1e-6..1e-5 of M;
errors of each step's prediction carry through the following steps). A C F32 run
sums in a different order, which moves results by the same order. A bound of
2e-4·M + 1e-3·|ref| leaves a >= 10x margin; a wrong shift, a swapped grid,
a missing guidance input, the LoRA left out or a wrong Euler sign moves the result
by >= 1e-2·M.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flux_ref  # noqa: E402  (the model classes, written from BFL's code)

SCRIPT = "tests/reference/sampler_ref.py"
T = 8
CASES = [
    dict(name="flux1", ckpt="flux1_small", cfgname="CFG1", grid=[3, 5], steps=4, shift="flux1", guidance=3.5,
         cfg=1.0, lora=False, seed=31),
    dict(name="flux1_lora_cfg", ckpt="flux1_small", cfgname="CFG1", grid=[2, 3], steps=3, shift="none",
         guidance=1.0, cfg=2.5, lora=True, seed=32),
    dict(name="flux2", ckpt="flux2_small", cfgname="CFG2", grid=[4, 3], steps=4, shift="flux2", guidance=2.0,
         cfg=1.0, lora=False, seed=33),
]


def mu_of(kind, seq, steps, base=0.5, mx=1.15):
    if kind == "flux1":
        m = (mx - base) / (4096 - 256)
        return base + m * (seq - 256)
    if kind == "flux2":
        a1, b1 = 8.73809524e-05, 1.89833333
        a2, b2 = 0.00016927, 0.45666666
        if seq > 4300:
            return a2 * seq + b2
        m_200 = a2 * seq + b2
        m_10 = a1 * seq + b1
        a = (m_200 - m_10) / 190.0
        return a * steps + (m_200 - 200.0 * a)
    return None


def schedule(kind, steps, seq):
    ts = [1.0 - i / steps for i in range(steps + 1)]
    mu = mu_of(kind, seq, steps)
    if mu is None:
        return ts, None
    out = []
    for t in ts:
        out.append(0.0 if t <= 0 else math.exp(mu) / (math.exp(mu) + (1.0 / t - 1.0)))
    return out, mu


def ids(version, h, w, dtype):
    img = torch.zeros(h, w, 4 if version == 2 else 3, dtype=dtype)
    img[..., 1] = torch.arange(h, dtype=dtype)[:, None]
    img[..., 2] = torch.arange(w, dtype=dtype)[None, :]
    img = img.reshape(1, h * w, -1)
    txt = torch.zeros(1, T, img.shape[-1], dtype=dtype)
    if version == 2:
        txt[..., 3] = torch.arange(T, dtype=dtype)
    return img, txt


def load_model(c, ckpt, fixtures):
    model = flux_ref.Flux(c)
    sd = {}
    with safe_open(os.path.join(fixtures, f"{ckpt}_bfl.safetensors"), "pt") as f:
        for k in f.keys():
            sd[k] = f.get_tensor(k)
    model.load_state_dict(sd)
    return model.float()


def load_lora(ckpt, fixtures):
    lora = {}
    with safe_open(os.path.join(fixtures, f"{ckpt}.safetensors"), "pt") as f:
        for m in flux_ref.LORA_MODULES:
            lora[m] = (f.get_tensor(f"lora.{m}.down"), f.get_tensor(f"lora.{m}.up"),
                       float(f.get_tensor(f"lora.{m}.alpha")))
    return lora


def sample(model32, c, case, inp, ts32, lora32, dtype):
    model = type(model32)(c)
    model.load_state_dict(model32.state_dict())
    model = model.to(dtype).eval()
    hs = []
    if lora32:
        lora = {m: (d.to(dtype), u.to(dtype), a) for m, (d, u, a) in lora32.items()}
        for m in flux_ref.LORA_MODULES:
            down, up, alpha = lora[m]
            s = alpha / down.shape[0]
            hs.append(model.get_submodule(m).register_forward_hook(
                lambda mod, i, o, down=down, up=up, s=s: o + s * F.linear(F.linear(i[0], down), up)))
    h, w = case["grid"]
    img_ids, txt_ids = ids(c["version"], h, w, dtype)
    x = inp["noise"].to(dtype)
    txt, vec = inp["txt"].to(dtype), inp.get("vec")
    vec = vec.to(dtype) if vec is not None else None
    g = torch.tensor([case["guidance"]], dtype=torch.float32).to(dtype)
    with torch.no_grad():
        for i in range(case["steps"]):
            tc = torch.tensor([ts32[i]], dtype=dtype)
            v = model(x, img_ids, txt, txt_ids, tc, vec, g)
            if case["cfg"] > 1.0:
                v_neg = model(x, img_ids, torch.zeros_like(txt), txt_ids, tc,
                              torch.zeros_like(vec) if vec is not None else None, g)
                v = v_neg + case["cfg"] * (v - v_neg)
            x = x + (float(ts32[i + 1]) - float(ts32[i])) * v
    for hk in hs:
        hk.remove()
    return x


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.path.join(here, "..", "fixtures")
    outdir = sys.argv[1] if len(sys.argv) > 1 else fixtures
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    fx, meta_cases, worst = {}, {}, 0.0
    for case in CASES:
        c = getattr(flux_ref, case["cfgname"])
        model = load_model(c, case["ckpt"], fixtures)
        lora = load_lora(case["ckpt"], fixtures) if case["lora"] else None
        gen = torch.Generator().manual_seed(case["seed"])
        h, w = case["grid"]
        n = h * w
        inp = {"noise": torch.randn(1, n, c["in_channels"], generator=gen),
               "txt": torch.randn(1, T, c["context_in_dim"], generator=gen)}
        if c["version"] == 1:
            inp["vec"] = torch.randn(1, c["vec_in_dim"], generator=gen)
        ts, mu = schedule(case["shift"], case["steps"], n)
        ts32 = [float(torch.tensor(t, dtype=torch.float32)) for t in ts]
        x64 = sample(model, c, case, inp, ts32, lora, torch.float64)
        x32 = sample(model, c, case, inp, ts32, lora, torch.float32)
        M = x64.abs().max().item()
        err = (x32.double() - x64).abs().max().item()
        worst = max(worst, err / M)
        print(f"[{case['name']}] grid {h}x{w} steps {case['steps']} shift {case['shift']} mu {mu} "
              f"ts {['%.6f' % t for t in ts]}")
        print(f"[{case['name']}]   max|ref| {M:.4g}  max|f32-ref| {err:.3g}  rel {err / M:.3g}")
        p = case["name"]
        for k, v in inp.items():
            fx[f"{p}.{k}"] = v.contiguous()
        fx[f"{p}.timesteps"] = torch.tensor(ts, dtype=torch.float64)
        fx[f"{p}.ref.x"] = x64.contiguous()
        fx[f"{p}.f32.x"] = x32.float().contiguous()
        meta_cases[p] = dict(ckpt=case["ckpt"], grid=case["grid"], steps=case["steps"], shift=case["shift"],
                             mu=mu, guidance=case["guidance"], cfg=case["cfg"], lora=case["lora"], text_tokens=T)
    meta = {"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "torch": torch.__version__,
            "cases": json.dumps(meta_cases, sort_keys=True), "worst_f32_rel": f"{worst:.3g}",
            "tolerance": "C F32 vs <case>.ref.x, M = max|ref|: |d| <= 2e-4*M + 1e-3*|ref|"}
    path = os.path.join(outdir, "sampler_ref.safetensors")
    save_file(fx, path, metadata=meta)
    print(f"worst f32-vs-f64 error relative to max|ref|: {worst:.3g}")
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
