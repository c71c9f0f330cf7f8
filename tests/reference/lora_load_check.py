#!/usr/bin/env python3
"""lora_load_check.py — orakul's LoRA files load in diffusers and under ComfyUI's
rules with the trained scale alpha/rank (issue #32 point 2).

It trains two LoRAs with the given orakul binary on the CPU (2 steps, rank 8,
alpha 3: scale 0.375, saved float32) on the small FLUX.1 and FLUX.2 checkpoints
of tests/fixtures (flux1_small_bfl / flux2_small_bfl, written by flux_ref.py),
then for each file:

  expected   ΔW_X = (alpha/rank)·B·A per adapted BFL module X, with B, A the
             TRAINED values: FLUX.1 (kohya) from the file itself, whose .alpha
             must be the config's; FLUX.2 (folded, docs/DECISIONS.md) from the
             resumable state file <name>_state.safetensors, which must hold the
             unscaled values: the file's lora_A / lora_B must be exactly
             float32(sqrt(alpha/rank))·A / ·B of a state pair, with no .alpha.
  diffusers  FluxPipeline / Flux2Pipeline.load_lora_weights on a transformer
             built at the fixture's config (FluxTransformer2DModel /
             Flux2Transformer2DModel); every PEFT layer's scaling·B@A, mapped
             back from the BFL deltas with flux_ref.py's / flux_check_diffusers.py's
             BFL->diffusers key maps (FLUX.md §3.2, §3.4), must match, every
             expected module must be adapted and no loader warning may name a key.
  ComfyUI    its rules replicated (read from comfyanonymous/ComfyUI; FLUX.md §4.1):
             comfy/lora.py model_lora_keys_unet maps "lora_unet_<X with . -> _>" and
             "diffusion_model.<X>" to each model weight X; load_lora reads
             "<x>.alpha" when present; comfy/weight_adapter/lora.py LoRAAdapter.load
             takes the up/down pairs below and calculate_weight adds
             strength·(alpha/down.shape[0] if alpha else 1.0)·up@down; every key of
             the file must be loaded ("lora key not loaded" otherwise).
  Tolerance: max|applied - expected| <= 1e-6·max|expected| (float64 products of
  float32 weights; the FLUX.2 fold rounds once more in float32: ~1e-7).

stable-diffusion.cpp (src/model/adapter/lora.hpp; FLUX.md §4.2) normalises the
lora_unet_ / diffusion_model. prefixes, reads lora_A/B and lora_down/up, and uses
alpha/rank with default 1.0: the same rule as ComfyUI, so the same files apply
with the same scale there (not run here).

Usage: python3 lora_load_check.py ORAKUL_EXE      exit 0 pass, 1 fail, 77 skip
(77 when torch, diffusers, peft or safetensors is missing). CPU only, ~20 s."""
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(SRC, "tests", "fixtures")
RANK, ALPHA = 8, 3.0
TOL = 1e-6

try:
    import torch
    import diffusers  # noqa: F401
    import peft  # noqa: F401
    from safetensors import safe_open
    from safetensors.torch import load_file
except ImportError as e:  # a machine without the Python stack: skip, do not fail
    print(f"lora_load_check: skipped: {e}")
    sys.exit(77)

sys.path.insert(0, HERE)
from flux_ref import to_diffusers_flux1  # noqa: E402  (BFL -> diffusers, FLUX.1)
from flux_check_diffusers import flux2_to_diffusers  # noqa: E402  (BFL -> diffusers, FLUX.2)

CONFIG = """job: extension
config:
  name: {name}
  process:
    - type: sd_trainer
      training_folder: {out}
      device: cpu
      network: {{type: lora, linear: {rank}, linear_alpha: {alpha}}}
      save: {{dtype: float32, save_every: 2}}
      datasets:
        - folder_path: {data}
          resolution: [64]
      train: {{batch_size: 1, steps: 2, optimizer: adamw, lr: 0.02, seed: 7, disable_sampling: true}}
      model:
        name_or_path: {model}
        arch: {arch}
      logging: {{log_every: 1}}
"""

# comfy/weight_adapter/lora.py LoRAAdapter.load: (up, down) suffixes, in its order
COMFY_PAIRS = [(".lora_up.weight", ".lora_down.weight"), ("_lora.up.weight", "_lora.down.weight"),
               (".lora_B.weight", ".lora_A.weight"), (".lora.up.weight", ".lora.down.weight"),
               (".lora_B", ".lora_A"), (".lora_linear_layer.up.weight", ".lora_linear_layer.down.weight"),
               (".lora_B.default.weight", ".lora_A.default.weight")]

failures = []


def check(what, cond, detail=""):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}{(': ' + detail) if detail else ''}")
    if not cond:
        failures.append(what)


def close(name, got, want):
    """max|got - want| <= TOL·max|want| (both float64)."""
    scale = max(want.abs().max().item(), 1e-30)
    err = (got - want).abs().max().item()
    return err <= TOL * scale, f"{name}: max err {err:.3g} (rel {err / scale:.3g})"


def train(exe, tmp, version):
    data = os.path.join(tmp, f"data{version}")
    os.makedirs(data)
    photos = os.path.join(SRC, "assets", "photos")
    for f in sorted(os.listdir(photos)):
        if f.endswith((".png", ".txt")):
            shutil.copy(os.path.join(photos, f), data)
    name = f"lora_flux{version}"
    cfg = os.path.join(tmp, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(name=name, out=os.path.join(tmp, "out"), rank=RANK, alpha=ALPHA, data=data,
                              model=os.path.join(FIXTURES, f"flux{version}_small_bfl.safetensors"),
                              arch=f"flux{version}" if version == 2 else "flux"))
    r = subprocess.run([exe, "run", cfg], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"orakul run {cfg}: exit {r.returncode}")
    d = os.path.join(tmp, "out", name)
    return os.path.join(d, f"{name}_000000002.safetensors"), os.path.join(d, f"{name}_state.safetensors")


def fixture_config(version):
    with safe_open(os.path.join(FIXTURES, f"flux{version}_small.safetensors"), "pt") as f:
        return json.loads(f.metadata()["config"])


def expected_deltas(version, lora, meta, state_path, model_keys):
    """{BFL module: (alpha/rank)·B·A in float64} from the trained values."""
    s = ALPHA / RANK
    exp = {}
    if version == 1:
        under = {k[:-len(".weight")].replace(".", "_"): k[:-len(".weight")] for k in model_keys if k.endswith(".weight")}
        mods = sorted(k[len("lora_unet_"):-len(".lora_down.weight")] for k in lora if k.endswith(".lora_down.weight"))
        alphas = [lora[f"lora_unet_{m}.alpha"].item() for m in mods]
        check("FLUX.1 file: kohya keys with .alpha = linear_alpha", len(mods) > 0 and all(a == ALPHA for a in alphas),
              f"{len(mods)} modules")
        for m in mods:
            down = lora[f"lora_unet_{m}.lora_down.weight"].double()
            up = lora[f"lora_unet_{m}.lora_up.weight"].double()
            exp[under[m]] = (lora[f"lora_unet_{m}.alpha"].item() / down.shape[0]) * (up @ down)
        return exp
    mods = sorted(k[len("diffusion_model."):-len(".lora_A.weight")] for k in lora if k.endswith(".lora_A.weight"))
    check("FLUX.2 file: diffusion_model.* lora_A/lora_B, no .alpha",
          len(mods) > 0 and not any(k.endswith(".alpha") for k in lora) and len(lora) == 2 * len(mods),
          f"{len(mods)} modules")
    check("FLUX.2 metadata says the scale is folded", "folded" in meta.get("orakul_lora_scale", ""),
          meta.get("orakul_lora_scale", "(missing)"))
    check("FLUX.2 metadata ss_network_alpha is the file's (= rank)", meta.get("ss_network_alpha") == str(RANK))
    st = load_file(state_path)
    pairs = [(st[f"lora.{2 * i}"], st[f"lora.{2 * i + 1}"]) for i in range(len([k for k in st if k.startswith("lora.")]) // 2)]
    r = torch.tensor(math.sqrt(s), dtype=torch.float32)
    unscaled = True
    for m in mods:
        a_f, b_f = lora[f"diffusion_model.{m}.lora_A.weight"], lora[f"diffusion_model.{m}.lora_B.weight"]
        hit = [(a, b) for a, b in pairs if a.shape == a_f.shape and b.shape == b_f.shape
               and torch.equal((a * r).to(torch.float32), a_f) and torch.equal((b * r).to(torch.float32), b_f)]
        if len(hit) != 1:
            check(f"FLUX.2 {m}: the file is sqrt(alpha/rank) x one state pair", False, f"{len(hit)} matches")
            continue
        a, b = hit[0]
        unscaled &= not torch.equal(a, a_f)
        exp[m] = s * (b.double() @ a.double())
    check("FLUX.2 state keeps the unscaled values (resume unchanged)", unscaled)
    return exp


def comfy_deltas(lora, model_keys):
    """ComfyUI's rules (see the docstring): {model weight module: applied delta}, keys not loaded."""
    key_map = {}
    for k in model_keys:
        if k.endswith(".weight"):
            x = k[:-len(".weight")]
            key_map["lora_unet_" + x.replace(".", "_")] = x
            key_map["diffusion_model." + x] = x
    loaded, out = set(), {}
    for x, target in key_map.items():
        alpha = None
        if x + ".alpha" in lora:
            alpha = lora[x + ".alpha"].item()
            loaded.add(x + ".alpha")
        for up_s, down_s in COMFY_PAIRS:
            if x + up_s in lora:
                up, down = lora[x + up_s].double(), lora[x + down_s].double()
                loaded |= {x + up_s, x + down_s}
                scale = alpha / down.shape[0] if alpha is not None else 1.0
                out[target] = scale * (up @ down)
                break
    return out, sorted(set(lora) - loaded)


def narrow_kohya_flux1(hidden, mlp):
    """diffusers' FLUX.1 kohya converter splits single_blocks.N.linear1 with FLUX.1's
    widths written in (dims=[3072, 3072, 3072, 12288]); the small model is 64 wide.
    The same converter with those four numbers replaced by the small model's, and
    nothing else changed, stands in for it (asserted: exactly one replacement)."""
    import inspect
    import diffusers.loaders.lora_conversion_utils as lcu
    import diffusers.loaders.lora_pipeline as lp
    src = inspect.getsource(lcu._convert_kohya_flux_lora_to_diffusers)
    old = "dims=[3072, 3072, 3072, 12288]"
    if src.count(old) != 1:
        raise SystemExit(f"diffusers {diffusers.__version__}: its FLUX.1 kohya converter changed ({old!r})")
    ns = dict(vars(lcu))
    exec(src.replace(old, f"dims=[{hidden}, {hidden}, {hidden}, {mlp}]"), ns)
    lp._convert_kohya_flux_lora_to_diffusers = ns["_convert_kohya_flux_lora_to_diffusers"]


class Catch(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def diffusers_deltas(version, path, c):
    """{diffusers weight name: scaling·B@A} of every PEFT layer after load_lora_weights, and warnings."""
    from diffusers import Flux2Pipeline, Flux2Transformer2DModel, FluxPipeline, FluxTransformer2DModel
    hd = c["hidden_size"] // c["num_heads"]
    common = dict(patch_size=1, in_channels=c["in_channels"], num_layers=c["depth"],
                  num_single_layers=c["depth_single_blocks"], attention_head_dim=hd,
                  num_attention_heads=c["num_heads"], joint_attention_dim=c["context_in_dim"],
                  guidance_embeds=c["guidance_embed"], axes_dims_rope=tuple(c["axes_dim"]))
    if version == 1:
        narrow_kohya_flux1(c["hidden_size"], int(c["mlp_ratio"] * c["hidden_size"]))
        m = FluxTransformer2DModel(pooled_projection_dim=c["vec_in_dim"], **common)
        pipe = FluxPipeline(scheduler=None, vae=None, text_encoder=None, tokenizer=None, text_encoder_2=None,
                            tokenizer_2=None, transformer=m)
    else:
        m = Flux2Transformer2DModel(mlp_ratio=c["mlp_ratio"], rope_theta=c["theta"], **common)
        pipe = Flux2Pipeline(scheduler=None, vae=None, text_encoder=None, tokenizer=None, transformer=m)
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
            out[name + ".weight"] = mod.scaling["orakul"] * (b @ a)
    return out, catch.lines


def run_family(exe, tmp, version):
    print(f"FLUX.{version}:")
    path, state = train(exe, tmp, version)
    lora = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    model_keys = list(load_file(os.path.join(FIXTURES, f"flux{version}_small_bfl.safetensors")).keys())
    exp = expected_deltas(version, lora, meta, state, model_keys)
    if not exp:
        return
    nonzero = max(v.abs().max().item() for v in exp.values())
    check("the trained LoRA is not zero", nonzero > 0, f"max |ΔW| {nonzero:.3g}")

    got, not_loaded = comfy_deltas(lora, model_keys)
    check("ComfyUI: every key loaded", not not_loaded, ", ".join(not_loaded[:4]))
    check("ComfyUI: the same modules", sorted(got) == sorted(exp), f"{len(got)} of {len(exp)}")
    worst = max((close(k, got[k], exp[k]) for k in exp if k in got), key=lambda t: (not t[0], t[1]))
    check("ComfyUI: ΔW = (alpha/rank)·B·A", all(close(k, got[k], exp[k])[0] for k in exp if k in got), worst[1])

    c = fixture_config(version)
    mapper = (lambda sd: to_diffusers_flux1(sd, c)) if version == 1 else flux2_to_diffusers
    exp_d = mapper({k + ".weight": v for k, v in exp.items()})
    got_d, warns = diffusers_deltas(version, path, c)
    # (the FLUX.1 pipeline built here has no text encoder: its note about text_encoder keys is moot)
    key_warns = [w for w in warns if "key" in w.lower() and "prefix='text_encoder'" not in w]
    check("diffusers: no warning about keys", not key_warns, " | ".join(key_warns)[:300])
    check("diffusers: every expected layer adapted, nothing else", sorted(got_d) == sorted(exp_d),
          f"{len(got_d)} adapted, {len(exp_d)} expected")
    res = [close(k, got_d[k], exp_d[k]) for k in exp_d if k in got_d]
    worst = max(res, key=lambda t: (not t[0], t[1])) if res else (False, "nothing to compare")
    check("diffusers: ΔW = (alpha/rank)·B·A", bool(res) and all(t[0] for t in res), worst[1])


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    torch.manual_seed(0)
    tmp = tempfile.mkdtemp(prefix="orakul-lora-load-")
    try:
        for version in (1, 2):
            run_family(os.path.abspath(sys.argv[1]), tmp, version)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("lora_load_check:", "PASS" if not failures else f"FAIL ({len(failures)}: {', '.join(failures)})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
