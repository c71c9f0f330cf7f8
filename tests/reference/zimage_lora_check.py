#!/usr/bin/env python3
"""zimage_lora_check.py — a Z-Image LoRA trained by orakul loads in diffusers and
under ComfyUI's rules with the trained scale alpha/rank (issue #30 point 3).

It trains the tiny preset (plugins/models/zimage: preset:tiny, the pixel
codec) with the given orakul binary on the CPU (2 steps, rank 8, alpha 3:
scale 0.375, saved float32), then:

  file       diffusion_model.<diffusers module>.lora_A / lora_B ("peft" format,
             the plugin's lora_format / lora_prefix), no .alpha, the metadata
             saying the scale is folded; each pair exactly float32(sqrt(alpha/rank))
             times one pair of the resumable state (which keeps them unscaled);
             expected ΔW = (alpha/rank)·B·A from the state.
  diffusers  ZImagePipeline.load_lora_weights (ZImageLoraLoaderMixin: its
             _convert_non_diffusers_z_image_lora_to_diffusers strips
             diffusion_model.) on a ZImageTransformer2DModel at the tiny config:
             every PEFT layer's scaling·B@A must equal ΔW, every trained module
             adapted, nothing else, no loader warning naming a key.
  ComfyUI    its rules replicated (comfyanonymous/ComfyUI, read for this):
             comfy/lora.py model_lora_keys_unet, for a Lumina2-class model
             (Z-Image), maps "diffusion_model.<diffusers name>" through
             comfy/utils.py z_image_to_diffusers onto its own weights: to_q /
             to_k / to_v onto rows [0, d), [d, 2d), [2d, 3d) of attention.qkv,
             to_out.0 onto attention.out, the rest by name; lora_A / lora_B are
             an (up, down) pair of comfy/weight_adapter/lora.py with scale 1
             without .alpha; every key must be loaded.
  Tolerance: max|applied - expected| <= 1e-6·max|expected|.

Usage: python3 zimage_lora_check.py ORAKUL_EXE     exit 0 pass, 1 fail, 77 skip
(77 when torch, diffusers, peft or safetensors is missing). CPU only."""
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
RANK, ALPHA = 8, 3.0
TOL = 1e-6

try:
    import torch
    import diffusers  # noqa: F401
    import peft  # noqa: F401
    from safetensors import safe_open
    from safetensors.torch import load_file
except ImportError as e:
    print(f"zimage_lora_check: skipped: {e}")
    sys.exit(77)

# the plugin's preset:tiny (zimage_plugin.c; tests/reference/zimage_ref.py CONFIG)
TINY = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=12, dim=32, n_layers=2, n_refiner_layers=1,
            n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True, cap_feat_dim=32, rope_theta=256.0,
            t_scale=1000.0, axes_dims=[4, 6, 6], axes_lens=[128, 64, 64])

CONFIG = """job: extension
config:
  name: lora_zimage
  process:
    - type: diffusion_trainer
      training_folder: {out}
      device: cpu
      network: {{type: lora, linear: {rank}, linear_alpha: {alpha}}}
      save: {{dtype: float32, save_every: 2}}
      datasets:
        - folder_path: {data}
          resolution: [64]
      train: {{batch_size: 1, steps: 2, optimizer: adamw, lr: 0.02, seed: 7, disable_sampling: true}}
      model:
        name_or_path: preset:tiny
        arch: zimage:turbo
        model_kwargs: {{pixel_patch: 4, seed: 3}}
      logging: {{log_every: 1}}
"""

failures = []


def check(what, cond, detail=""):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}{(': ' + detail) if detail else ''}")
    if not cond:
        failures.append(what)


def close(name, got, want):
    scale = max(want.abs().max().item(), 1e-30)
    err = (got - want).abs().max().item()
    return err <= TOL * scale, f"{name}: max err {err:.3g} (rel {err / scale:.3g})"


def train(exe, tmp):
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    photos = os.path.join(SRC, "assets", "photos")
    for f in sorted(os.listdir(photos)):
        if f.endswith((".png", ".txt")):
            shutil.copy(os.path.join(photos, f), data)
    cfg = os.path.join(tmp, "lora_zimage.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(out=os.path.join(tmp, "out"), rank=RANK, alpha=ALPHA, data=data))
    r = subprocess.run([exe, "run", cfg], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"orakul run {cfg}: exit {r.returncode}")
    d = os.path.join(tmp, "out", "lora_zimage")
    return os.path.join(d, "lora_zimage_000000002.safetensors"), os.path.join(d, "lora_zimage_state.safetensors")


def expected_deltas(lora, meta, state_path):
    """{diffusers module: (alpha/rank)·B·A in float64} from the state's unscaled pairs."""
    s = ALPHA / RANK
    mods = sorted(k[len("diffusion_model."):-len(".lora_A.weight")] for k in lora if k.endswith(".lora_A.weight"))
    check("file: diffusion_model.* lora_A/lora_B only, no .alpha",
          len(mods) > 0 and len(lora) == 2 * len(mods) and all(k.startswith("diffusion_model.") for k in lora),
          f"{len(mods)} modules")
    check("metadata says the scale is folded", "folded" in meta.get("orakul_lora_scale", ""),
          meta.get("orakul_lora_scale", "(missing)"))
    st = load_file(state_path)
    n = len([k for k in st if k.startswith("lora.")]) // 2
    pairs = [(st[f"lora.{2 * i}"], st[f"lora.{2 * i + 1}"]) for i in range(n)]
    r = torch.tensor(math.sqrt(s), dtype=torch.float32)
    exp = {}
    for m in mods:
        a_f, b_f = lora[f"diffusion_model.{m}.lora_A.weight"], lora[f"diffusion_model.{m}.lora_B.weight"]
        hit = [(a, b) for a, b in pairs if a.shape == a_f.shape and b.shape == b_f.shape
               and torch.equal((a * r).to(torch.float32), a_f) and torch.equal((b * r).to(torch.float32), b_f)]
        if len(hit) != 1:
            check(f"{m}: the file is sqrt(alpha/rank) x one state pair", False, f"{len(hit)} matches")
            continue
        a, b = hit[0]
        exp[m] = s * (b.double() @ a.double())
    return exp


def comfy_map(n_layers, n_refiner, dim):
    """ComfyUI's z_image_to_diffusers (comfy/utils.py), restated: {diffusers weight:
    (its weight, row offset or None)} for the linears a LoRA can reach."""
    m = {}
    blocks = ([f"layers.{i}" for i in range(n_layers)] + [f"context_refiner.{i}" for i in range(n_refiner)]
              + [f"noise_refiner.{i}" for i in range(n_refiner)])
    for b in blocks:
        for j, p in enumerate(("to_q", "to_k", "to_v")):
            m[f"{b}.attention.{p}.weight"] = (f"{b}.attention.qkv.weight", (j * dim, dim))
        m[f"{b}.attention.to_out.0.weight"] = (f"{b}.attention.out.weight", None)
        for w in ("feed_forward.w1", "feed_forward.w2", "feed_forward.w3", "adaLN_modulation.0"):
            m[f"{b}.{w}.weight"] = (f"{b}.{w}.weight", None)
    for d, c in (("all_final_layer.2-1.linear", "final_layer.linear"), ("all_x_embedder.2-1", "x_embedder"),
                 ("cap_embedder.1", "cap_embedder.1"), ("t_embedder.mlp.0", "t_embedder.mlp.0"),
                 ("t_embedder.mlp.2", "t_embedder.mlp.2"),
                 ("all_final_layer.2-1.adaLN_modulation.1", "final_layer.adaLN_modulation.1")):
        m[d + ".weight"] = (c + ".weight", None)
    return m


def comfy_deltas(lora, dim):
    """ComfyUI's rules: {diffusers module: the delta it adds to its own weight (the
    rows of the slice for q/k/v)}, keys not loaded."""
    cmap = comfy_map(TINY["n_layers"], TINY["n_refiner_layers"], dim)
    key_map = {}
    for k, target in cmap.items():
        base = k[:-len(".weight")]
        key_map["diffusion_model." + base] = (base, target)
        key_map["transformer." + base] = (base, target)
    loaded, out = set(), {}
    for x, (base, (target, off)) in key_map.items():
        alpha = lora[x + ".alpha"].item() if x + ".alpha" in lora else None
        if alpha is not None:
            loaded.add(x + ".alpha")
        for up_s, down_s in ((".lora_up.weight", ".lora_down.weight"), (".lora_B.weight", ".lora_A.weight")):
            if x + up_s in lora:
                up, down = lora[x + up_s].double(), lora[x + down_s].double()
                loaded |= {x + up_s, x + down_s}
                scale = alpha / down.shape[0] if alpha is not None else 1.0
                full = torch.zeros(3 * dim if off else (up @ down).shape[0], down.shape[1], dtype=torch.float64)
                delta = scale * (up @ down)
                if off:
                    full[off[0]:off[0] + off[1]] += delta  # calculate_weight on weight.narrow(0, *off)
                    out[base] = full[off[0]:off[0] + off[1]]
                else:
                    out[base] = delta
                break
    return out, sorted(set(lora) - loaded)


class Catch(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def diffusers_deltas(path):
    from diffusers import ZImagePipeline, ZImageTransformer2DModel
    m = ZImageTransformer2DModel(**TINY)
    pipe = ZImagePipeline(scheduler=None, vae=None, text_encoder=None, tokenizer=None, transformer=m)
    catch = Catch()
    loggers = [logging.getLogger(n) for n in ("diffusers", "peft")]
    for lg in loggers:
        lg.addHandler(catch)
    try:
        pipe.load_lora_weights(path, adapter_name="orakul")
    finally:
        for lg in loggers:
            lg.removeHandler(catch)
    out = {}
    for name, mod in m.named_modules():
        if hasattr(mod, "lora_A") and "orakul" in getattr(mod, "lora_A", {}):
            a = mod.lora_A["orakul"].weight.detach().double()
            b = mod.lora_B["orakul"].weight.detach().double()
            out[name] = mod.scaling["orakul"] * (b @ a)
    return out, catch.lines


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    tmp = tempfile.mkdtemp(prefix="orakul-zimage-lora-")
    try:
        path, state = train(os.path.abspath(sys.argv[1]), tmp)
        lora = load_file(path)
        with safe_open(path, "pt") as f:
            meta = f.metadata() or {}
        exp = expected_deltas(lora, meta, state)
        want = {f"{b}.{w}" for b in ("noise_refiner.0", "context_refiner.0", "layers.0", "layers.1")
                for w in ("attention.to_q", "attention.to_k", "attention.to_v", "attention.to_out.0",
                          "feed_forward.w1", "feed_forward.w2", "feed_forward.w3")}
        check("the declared targets: attention and feed-forward linears of every block", set(exp) == want,
              f"{len(exp)} of {len(want)}")
        nonzero = max((v.abs().max().item() for v in exp.values()), default=0.0)
        check("the trained LoRA is not zero", nonzero > 0, f"max |ΔW| {nonzero:.3g}")

        got, not_loaded = comfy_deltas(lora, TINY["dim"])
        check("ComfyUI: every key loaded", not not_loaded, ", ".join(not_loaded[:4]))
        check("ComfyUI: the same modules", sorted(got) == sorted(exp), f"{len(got)} of {len(exp)}")
        res = [close(k, got[k], exp[k]) for k in exp if k in got]
        worst = max(res, key=lambda t: (not t[0], t[1])) if res else (False, "nothing")
        check("ComfyUI: ΔW = (alpha/rank)·B·A", bool(res) and all(t[0] for t in res), worst[1])

        got_d, warns = diffusers_deltas(path)
        key_warns = [w for w in warns if "key" in w.lower()]
        check("diffusers: no warning about keys", not key_warns, " | ".join(key_warns)[:300])
        check("diffusers: every trained module adapted, nothing else", sorted(got_d) == sorted(exp),
              f"{len(got_d)} adapted, {len(exp)} expected")
        res = [close(k, got_d[k], exp[k]) for k in exp if k in got_d]
        worst = max(res, key=lambda t: (not t[0], t[1])) if res else (False, "nothing")
        check("diffusers: ΔW = (alpha/rank)·B·A", bool(res) and all(t[0] for t in res), worst[1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"zimage_lora_check: {len(failures)} failed")
        sys.exit(1)
    print("zimage_lora_check: all passed")


if __name__ == "__main__":
    main()
