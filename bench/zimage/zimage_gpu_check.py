#!/usr/bin/env python3
"""bench/zimage/zimage_gpu_check.py — the Z-Image plugin's forward and backward at the
REAL shape (ZImageTransformer2DModel's default config: dim 3840, 30 heads, 30 layers,
2 + 2 refiner layers, caption width 2560; 6.15 G parameters) with random weights,
against diffusers 0.42.1 on the same GPU.

  1. random BF16 weights (seeded; norm scales 1 + 0.1·N, pad tokens 0.5·N, linears
     N / sqrt(fan_in)) written as one diffusers-named file; inputs in the core's
     convention (tokens: channel-minor 2x2 patches of a (1, 16, H/8, W/8) latent;
     t the noise level; caption features (1, T, 2560)); two LoRA adapters (rank 32,
     alpha 32) on layers.5.attention.to_q and layers.20.feed_forward.w2;
  2. bench_zimage_check (orakul, BF16 weights and activations) -> pred, d/d tokens,
     d/d txt, d/d LoRA down/up of S = sum(pred·R);
  3. diffusers in float32 (the BF16 weights upcast) = the reference, and diffusers in
     BF16 (what a PyTorch trainer runs): its own error against float32 is the scale
     orakul's BF16 error is judged by.
Prints one JSON line per quantity: orakul's and diffusers-bf16's max|err|/max|ref|
and mean|err|/mean|ref| against float32, and ok = orakul's max error <= 4x
diffusers-bf16's (a mapping mistake is O(1)).
--tiny: the same at tests/reference/zimage_ref.py's tiny size on the CPU (a smoke run).
Usage: python3 zimage_gpu_check.py --bin build-gpu/bench/zimage/bench_zimage_check [--res 512] [--txt 256] [--work DIR]"""
import argparse, json, os, subprocess, sys, time
import torch
from safetensors.torch import load_file, save_file

TINY = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=12, dim=32, n_layers=2, n_refiner_layers=1,
            n_heads=2, n_kv_heads=2, cap_feat_dim=32, axes_dims=[4, 6, 6], axes_lens=[128, 64, 64])


class LoraLinear(torch.nn.Module):
    def __init__(self, base, down, up, scale):
        super().__init__()
        self.base, self.down, self.up, self.scale = base, down, up, scale

    def forward(self, x):
        return self.base(x) + self.scale * torch.nn.functional.linear(
            torch.nn.functional.linear(x, self.down.to(x.dtype)), self.up.to(x.dtype))


def pack(lat):
    b, c, hh, ww = lat.shape
    return lat.reshape(b, c, hh // 2, 2, ww // 2, 2).permute(0, 2, 4, 3, 5, 1).reshape(b, -1, 4 * c)


def unpack(tok, c, hh, ww):
    return tok.reshape(tok.shape[0], hh // 2, ww // 2, 2, 2, c).permute(0, 5, 1, 3, 2, 4).reshape(tok.shape[0], c, hh, ww)


def reference(cfg, sd, io, lora_mods, dtype, dev):
    from diffusers import ZImageTransformer2DModel
    with torch.device("meta"):
        m = ZImageTransformer2DModel(**cfg)
    m = m.to_empty(device=dev)
    m.load_state_dict({k: v.to(dev) for k, v in sd.items()})
    m = m.to(dtype).requires_grad_(False)
    params = []
    for mod in lora_mods:
        base = m.get_submodule(mod)
        down = io[f"lora.{mod}.down"].to(dev, torch.float32).requires_grad_(True)
        up = io[f"lora.{mod}.up"].to(dev, torch.float32).requires_grad_(True)
        parent = m.get_submodule(mod.rsplit(".", 1)[0])
        setattr(parent, mod.rsplit(".", 1)[1], LoraLinear(base, down, up, io[f"lora.{mod}.alpha"].item() / down.shape[0]))
        params += [down, up]
    c = cfg.get("in_channels", 16)
    hh, ww = [int(v) * 2 for v in io["in.grid"].tolist()]
    tok = io["in.tokens"].to(dev, dtype).requires_grad_(True)
    txt = io["in.txt"].to(dev, dtype).requires_grad_(True)
    t = (1.0 - io["in.timesteps"].to(dev)).to(dtype)  # Z-Image's t' = 1 - t
    lat = unpack(tok, c, hh, ww)
    out = m([lat[i].unsqueeze(1) for i in range(lat.shape[0])], t, [txt[i] for i in range(txt.shape[0])],
            return_dict=False)[0]
    pred = -pack(torch.stack([o.squeeze(1) for o in out]))  # the core's target: noise - x0
    S = (pred.float() * io["in.R"].to(dev)).sum()
    grads = torch.autograd.grad(S, [tok, txt] + params)
    res = {"pred": pred.detach().float().cpu(), "grad.in.tokens": grads[0].float().cpu(),
           "grad.in.txt": grads[1].float().cpu()}
    for i, mod in enumerate(lora_mods):
        res[f"lora.grad.{mod}.down"] = grads[2 + 2 * i].float().cpu()
        res[f"lora.grad.{mod}.up"] = grads[3 + 2 * i].float().cpu()
    del m
    if dev == "cuda":
        torch.cuda.empty_cache()
    return res


def err(a, b):
    d = (a.double() - b.double()).abs()
    return d.max().item() / max(b.abs().max().item(), 1e-30), d.mean().item() / max(b.abs().mean().item(), 1e-30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True); ap.add_argument("--work", default="/tmp/orakul_zimage_check")
    ap.add_argument("--res", type=int, default=512); ap.add_argument("--txt", type=int, default=256)
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    dev = "cpu" if a.tiny else "cuda"
    cfg = dict(TINY) if a.tiny else {}
    os.makedirs(a.work, exist_ok=True)
    t0 = time.time()
    from diffusers import ZImageTransformer2DModel
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in ZImageTransformer2DModel(**cfg).state_dict().items()}
    g = torch.Generator(device=dev).manual_seed(30)
    sd = {}
    for k, s in shapes.items():
        if len(s) == 1 and k.endswith(".weight"):
            x = 1.0 + 0.1 * torch.randn(s, generator=g, device=dev)
        elif "pad_token" in k:
            x = 0.5 * torch.randn(s, generator=g, device=dev)
        else:
            x = torch.randn(s, generator=g, device=dev) / (s[1] if len(s) == 2 else 16) ** 0.5
        sd[k] = x.to(torch.bfloat16).cpu()
    ckpt = os.path.join(a.work, "zimage_random.safetensors")
    save_file(sd, ckpt)
    c = cfg.get("in_channels", 16); cap = cfg.get("cap_feat_dim", 2560); dim = cfg.get("dim", 3840)
    lat_side = 6 if a.tiny else a.res // 8
    T = 20 if a.tiny else a.txt
    lora_mods = (["layers.0.attention.to_q", "context_refiner.0.feed_forward.w2"] if a.tiny
                 else ["layers.5.attention.to_q", "layers.20.feed_forward.w2"])
    gc = torch.Generator().manual_seed(7)
    lat = torch.randn(1, c, lat_side, lat_side + (4 if a.tiny else 0), generator=gc)
    io = {"in.tokens": pack(lat).contiguous(), "in.txt": torch.randn(1, T, cap, generator=gc),
          "in.timesteps": torch.tensor([0.7]), "in.grid": torch.tensor([lat.shape[2] / 2, lat.shape[3] / 2])}
    io["in.R"] = torch.randn(io["in.tokens"].shape, generator=gc)
    rank = 4 if a.tiny else 32
    for mod in lora_mods:
        w = sd[mod + ".weight"]
        io[f"lora.{mod}.down"] = torch.randn(rank, w.shape[1], generator=gc) / w.shape[1] ** 0.5
        io[f"lora.{mod}.up"] = torch.randn(w.shape[0], rank, generator=gc) * 0.05
        io[f"lora.{mod}.alpha"] = torch.tensor([float(rank)])
    iop, outp = os.path.join(a.work, "io.safetensors"), os.path.join(a.work, "orakul.safetensors")
    save_file({k: v.contiguous() for k, v in io.items()}, iop)
    print(f"weights + inputs written in {time.time() - t0:.1f} s ({ckpt})", flush=True)
    t0 = time.time()
    r = subprocess.run([a.bin, ckpt, iop, outp], capture_output=True, text=True, timeout=400)
    print(r.stdout.strip(), flush=True)
    if r.returncode != 0:
        print(r.stderr[-4000:])
        raise SystemExit(f"bench_zimage_check: exit {r.returncode}")
    print(f"orakul done in {time.time() - t0:.1f} s", flush=True)
    ours = load_file(outp)
    t0 = time.time()
    f32 = reference(cfg, sd, io, lora_mods, torch.float64 if a.tiny else torch.float32, dev)
    bf = reference(cfg, sd, io, lora_mods, torch.bfloat16, dev)
    print(f"diffusers float32 and bf16 in {time.time() - t0:.1f} s", flush=True)
    ok_all = True
    for k in f32:
        om, oa = err(ours[k], f32[k])
        dm, da = err(bf[k], f32[k])
        ok = om <= 4 * max(dm, 1e-3 if not a.tiny else 1e-6)
        ok_all &= ok
        print(json.dumps(dict(what=k, n=f32[k].numel(), orakul_bf16_max=round(om, 6), orakul_bf16_mean=round(oa, 6),
                              diffusers_bf16_max=round(dm, 6), diffusers_bf16_mean=round(da, 6), ok=ok)), flush=True)
    print("zimage_gpu_check:", "all within 4x diffusers' own bf16 error" if ok_all else "FAILED")
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
