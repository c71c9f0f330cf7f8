#!/usr/bin/env python3
"""lokr_load_check.py — orakul's LoKr files (network.type: lokr, issue #32 point 3)
apply under ComfyUI's LoKr rule the delta orakul trained.

It trains LoKrs (lokr_factor -1; 2 steps, saved float32) with the given orakul binary
on the CPU on the small FLUX.1 and FLUX.2 checkpoints of tests/fixtures
(flux1_small_bfl / flux2_small_bfl): full rank on both, and on FLUX.1 also
lokr_full_rank: false with linear 4, linear_alpha 2 (LyCORIS's low-rank w2 = w2_a ·
w2_b at alpha / 4 where 4 < max(b, d) / 2), then for each file:

  expected   ΔW_X = kron(w1, w2) per adapted BFL module X (scale 1: w1 and w2 full,
             LyCORIS/ai-toolkit set alpha = lora_dim), with w1, w2 the TRAINED values
             from the resumable state file <name>_state.safetensors (tensors lora.2i,
             lora.2i+1 of module i): the file's lokr_w1 / lokr_w2 must be exactly one
             state pair. Low-rank: ΔW = kron(w1, (alpha/r)·w2_a·w2_b), the state's second
             tensor packing w2_a over w2_bᵀ (tensor/tensor.h), the file's .alpha the
             config's linear_alpha. That orakul's linear op applies W + kron(w1, w2) with those
             tensors is tests/lokr/test_lokr_op.c's check (against lycoris-lora).
  ComfyUI    its rules replicated (read from Comfy-Org/ComfyUI, comfy/lora.py
             model_lora_keys_unet: "lora_unet_<X with . -> _>" and "diffusion_model.<X>"
             name model weight X; comfy/weight_adapter/lokr.py LoKrAdapter.load reads
             <x>.lokr_w1, .lokr_w2, .lokr_w1_a/_b, .lokr_w2_a/_b, .lokr_t2 and the
             loader's <x>.alpha; calculate_weight: w1 = w1_a @ w1_b and w2 = w2_a @ w2_b
             where not full, alpha = alpha / dim only when one of them was rebuilt
             (dim = that w_b's rows) else 1.0, weight += strength·alpha·kron(w1, w2)
             reshaped to the weight, whose rows must match); every key of the file must
             be loaded.
  Tolerance: max|applied - expected| <= 1e-6·max|expected| (float64 products of
  float32 values).

Usage: python3 lokr_load_check.py ORAKUL_EXE      exit 0 pass, 1 fail, 77 skip
(77 when torch or safetensors is missing). CPU only, ~20 s."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(SRC, "tests", "fixtures")
TOL = 1e-6

try:
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file
except ImportError as e:  # a machine without the Python stack: skip, do not fail
    print(f"lokr_load_check: skipped: {e}")
    sys.exit(77)

CONFIG = """job: extension
config:
  name: {name}
  process:
    - type: sd_trainer
      training_folder: {out}
      device: cpu
      network: {network}
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
SUFFIXES = ["lokr_w1", "lokr_w2", "lokr_w1_a", "lokr_w1_b", "lokr_w2_a", "lokr_w2_b", "lokr_t2"]

failures = []


def check(what, cond, detail=""):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}{(': ' + detail) if detail else ''}")
    if not cond:
        failures.append(what)


FULL = "{type: lokr, lokr_factor: -1, lokr_full_rank: true}"
LOWRANK = "{type: lokr, lokr_factor: -1, lokr_full_rank: false, linear: 4, linear_alpha: 2}"


def train(exe, tmp, version, network):
    data = os.path.join(tmp, f"data{version}" + ("_lr" if network == LOWRANK else ""))
    os.makedirs(data)
    photos = os.path.join(SRC, "assets", "photos")
    for f in sorted(os.listdir(photos)):
        if f.endswith((".png", ".txt")):
            shutil.copy(os.path.join(photos, f), data)
    name = f"lokr_flux{version}" + ("_lr" if network == LOWRANK else "")
    cfg = os.path.join(tmp, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(name=name, out=os.path.join(tmp, "out"), data=data, network=network,
                              model=os.path.join(FIXTURES, f"flux{version}_small_bfl.safetensors"),
                              arch=f"flux{version}" if version == 2 else "flux"))
    r = subprocess.run([exe, "run", cfg], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"orakul run {cfg}: exit {r.returncode}")
    d = os.path.join(tmp, "out", name)
    return os.path.join(d, f"{name}_000000002.safetensors"), os.path.join(d, f"{name}_state.safetensors")


def comfy_deltas(lora, model):
    """ComfyUI's rules (see the docstring): {model weight module: applied delta}, keys not loaded."""
    key_map = {}
    for k in model:
        if k.endswith(".weight"):
            x = k[:-len(".weight")]
            key_map["lora_unet_" + x.replace(".", "_")] = x
            key_map["diffusion_model." + x] = x
    loaded, out = set(), {}
    for x, target in key_map.items():
        v = {s: lora.get(f"{x}.{s}") for s in SUFFIXES}
        if v["lokr_w1"] is None and v["lokr_w2"] is None and v["lokr_w1_a"] is None and v["lokr_w2_a"] is None:
            continue
        loaded.update(f"{x}.{s}" for s in SUFFIXES if v[s] is not None)
        alpha = None
        if f"{x}.alpha" in lora:
            alpha = lora[f"{x}.alpha"].item()
            loaded.add(f"{x}.alpha")
        dim = None
        w1 = v["lokr_w1"]
        if w1 is None:
            dim = v["lokr_w1_b"].shape[0]
            w1 = v["lokr_w1_a"].double() @ v["lokr_w1_b"].double()
        w2 = v["lokr_w2"]
        if w2 is None:
            dim = v["lokr_w2_b"].shape[0]
            w2 = v["lokr_w2_a"].double() @ v["lokr_w2_b"].double()
        a = alpha / dim if (alpha is not None and dim is not None) else 1.0
        diff = torch.kron(w1.double(), w2.double())
        weight = model[target + ".weight"]
        if diff.shape[0] != weight.shape[0]:
            check(f"ComfyUI: {x}: kron rows {diff.shape[0]} fit the weight's {weight.shape[0]}", False)
            continue
        out[target] = 1.0 * a * diff.reshape(weight.shape)
    return out, sorted(set(lora) - loaded)


def run_family(exe, tmp, version, network=FULL):
    lowrank = network == LOWRANK
    print(f"FLUX.{version}{' (lokr_full_rank: false, linear 4, alpha 2)' if lowrank else ''}:")
    path, state_path = train(exe, tmp, version, network)
    lora = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    model = load_file(os.path.join(FIXTURES, f"flux{version}_small_bfl.safetensors"))
    pre = "lora_unet_" if version == 1 else "diffusion_model."
    mods = sorted(k[:-len(".lokr_w1")] for k in lora if k.endswith(".lokr_w1"))
    if lowrank:
        lr = [m for m in mods if m + ".lokr_w2_a" in lora]
        check(f"FLUX.{version} file: {pre}* .lokr_w1 + .lokr_w2_a / .lokr_w2_b / .alpha (2) where low-rank",
              len(lr) > 0 and all(m.startswith(pre) for m in mods)
              and all(m + ".lokr_w2_b" in lora and lora[m + ".alpha"].item() == 2.0 for m in lr)
              and len(lora) == sum(4 if m in lr else 2 for m in mods), f"{len(lr)} of {len(mods)} modules low-rank")
    else:
        check(f"FLUX.{version} file: {pre}* .lokr_w1 / .lokr_w2 only, no .alpha",
              len(mods) > 0 and all(m.startswith(pre) for m in mods) and len(lora) == 2 * len(mods)
              and all(m + ".lokr_w2" in lora for m in mods), f"{len(mods)} modules")
    check("metadata: lycoris.kohya, algo lokr", meta.get("ss_network_module") == "lycoris.kohya"
          and '"algo": "lokr"' in meta.get("ss_network_args", ""))
    st = load_file(state_path)
    n = len([k for k in st if k.startswith("lora.")]) // 2
    pairs = [(st[f"lora.{2 * i}"], st[f"lora.{2 * i + 1}"]) for i in range(n)]
    check("the state holds one pair per module", n == len(mods), f"{n} pairs, {len(mods)} modules")
    exp = {}
    under = {k[:-len(".weight")].replace(".", "_"): k[:-len(".weight")] for k in model if k.endswith(".weight")}
    for m in mods:
        w1f = lora[m + ".lokr_w1"]
        if m + ".lokr_w2_a" in lora:  # the state packs w2_a (b, r) over w2_bᵀ (d, r)
            wa, wb = lora[m + ".lokr_w2_a"], lora[m + ".lokr_w2_b"]
            w2f = torch.cat([wa, wb.T])
        else:
            w2f = lora[m + ".lokr_w2"]
        hit = [(a, b) for a, b in pairs if a.shape == w1f.shape and b.shape == w2f.shape
               and torch.equal(a, w1f) and torch.equal(b, w2f)]
        if len(hit) != 1:
            check(f"{m}: the file's w1, w2 are one state pair", False, f"{len(hit)} matches")
            continue
        x = m[len(pre):]
        a, b = hit[0][0].double(), hit[0][1].double()
        if m + ".lokr_w2_a" in lora:
            nb = lora[m + ".lokr_w2_a"].shape[0]
            b = (2.0 / b.shape[1]) * (b[:nb] @ b[nb:].T)  # alpha 2 / r
        exp[under[x] if version == 1 else x] = torch.kron(a, b)
    nonzero = max((v.abs().max().item() for v in exp.values()), default=0.0)
    check("the trained delta is not zero (w2 starts at zero)", nonzero > 0, f"max |ΔW| {nonzero:.3g}")
    got, not_loaded = comfy_deltas(lora, model)
    check("ComfyUI: every key loaded", not not_loaded, ", ".join(not_loaded[:4]))
    check("ComfyUI: the same modules", sorted(got) == sorted(exp), f"{len(got)} of {len(exp)}")
    errs = [((got[k] - exp[k]).abs().max().item(), max(exp[k].abs().max().item(), 1e-30)) for k in exp if k in got]
    worst = max((e / s for e, s in errs), default=float("inf"))
    check("ComfyUI: ΔW = the trained kron(w1, w2)", bool(errs) and worst <= TOL, f"worst rel err {worst:.3g}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    tmp = tempfile.mkdtemp(prefix="orakul-lokr-load-")
    try:
        for version in (1, 2):
            run_family(os.path.abspath(sys.argv[1]), tmp, version)
        run_family(os.path.abspath(sys.argv[1]), tmp, 1, LOWRANK)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("lokr_load_check:", "PASS" if not failures else f"FAIL ({len(failures)}: {', '.join(failures)})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
