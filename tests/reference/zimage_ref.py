#!/usr/bin/env python3
"""zimage_ref.py — fixtures for the Z-Image plugin (plugins/models/zimage), made
by diffusers' own ZImageTransformer2DModel (diffusers 0.42.1,
models/transformers/transformer_z_image.py) at a tiny size with random
weights, so the plugin is checked against code we did not write.

Writes tests/fixtures/zimage/:
  zimage_tiny_diffusers.safetensors  the transformer's state dict (diffusers
                                     names, BF16: every value exactly BF16 so
                                     the F32/F64 runs below see the same weights)
  zimage_tiny.safetensors            inputs in the core's convention, the
                                     prediction, S = sum(pred·R) and gradients:
    in.tokens (B, N, 4·C)   latents in 2x2 patches, channel (ph·2 + pw)·C + c (Z-Image's own
                            order: the plugin's patch_order ORK_PATCH_CHANNEL_MINOR)
    in.txt (B, T, cap)      caption features (all T tokens valid)
    in.timesteps (B)        the core's t (noise level); diffusers is called with 1 - t
    in.R (B, N, 4·C)        the cotangent
    ref.pred                -(diffusers' output), packed like in.tokens: the core's
                            flow target is noise - x0, Z-Image predicts x0 - noise
    ref.S, ref.grad.in.tokens, ref.grad.in.txt, ref.grad.w.<name>
    ref.sched.sigmas.<n>    the reference scheduler's n-step sigmas (n + 1, the last 0)
    lora.<module>.down/up/alpha and ref.lora.pred, ref.lora.S,
    ref.lora.grad.in.tokens, ref.lora.grad.<module>.down/up: y = W·x + (alpha/r)·up(down(x))
The reference runs in float64 (model.double()); diffusers keeps the timestep
sinusoid and the RoPE rotation in float32 inside it, as the plugin does.
Also prints torch's float32 run's worst error against it (the tolerance's basis).

Run: python3 tests/reference/zimage_ref.py [OUT_DIR]   (torch, diffusers, safetensors)"""
import os
import sys

import torch
from diffusers import FlowMatchEulerDiscreteScheduler, ZImageTransformer2DModel
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "fixtures", "zimage")

# the plugin's preset:tiny (zimage_plugin.c): dim 32, 2 heads (head_dim 16,
# rope axes 4 + 6 + 6), 2 layers, 1 refiner layer each, caption width 32,
# 12 latent channels (48 per token: the pixel codec's 3·4²)
CONFIG = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=12, dim=32, n_layers=2, n_refiner_layers=1,
              n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True, cap_feat_dim=32, rope_theta=256.0,
              t_scale=1000.0, axes_dims=[4, 6, 6], axes_lens=[128, 64, 64])
B, C, H, W, T = 2, 12, 6, 10, 20  # 3x5 = 15 image tokens (padded to 32), 20 caption tokens (padded to 32)
TS = [0.3, 0.85]
LORA = [("layers.0.attention.to_q", 2, 3.0), ("context_refiner.0.feed_forward.w2", 3, 1.5)]
WGRADS = ["layers.0.attention.to_k.weight", "layers.1.feed_forward.w1.weight", "noise_refiner.0.adaLN_modulation.0.weight",
          "noise_refiner.0.adaLN_modulation.0.bias", "context_refiner.0.attention.to_v.weight", "x_pad_token",
          "cap_pad_token", "all_final_layer.2-1.linear.weight", "all_final_layer.2-1.adaLN_modulation.1.weight",
          "layers.1.attention.norm_k.weight", "layers.0.ffn_norm2.weight", "cap_embedder.0.weight",
          "all_x_embedder.2-1.weight", "t_embedder.mlp.2.weight"]


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


def make_model(g):
    m = ZImageTransformer2DModel(**CONFIG)
    sd = {}
    for k, v in m.state_dict().items():
        if k.endswith(".weight") and v.ndim == 1:  # norm scales around 1
            x = 1.0 + 0.2 * torch.randn(v.shape, generator=g)
        elif "pad_token" in k:
            x = 0.5 * torch.randn(v.shape, generator=g)
        else:  # linears: a scale that keeps activations O(1) through the blocks
            fan_in = v.shape[1] if v.ndim == 2 else 16
            x = torch.randn(v.shape, generator=g) / fan_in ** 0.5
        sd[k] = bf16(x)
    m.load_state_dict(sd)
    return m, sd


def pack(lat):  # (B, C, 2h, 2w) -> (B, h·w, 4·C), channel (ph·2 + pw)·C + c (_patchify_image's order)
    b, c, hh, ww = lat.shape
    return lat.reshape(b, c, hh // 2, 2, ww // 2, 2).permute(0, 2, 4, 3, 5, 1).reshape(b, (hh // 2) * (ww // 2), c * 4)


def unpack(tok):
    b = tok.shape[0]
    return tok.reshape(b, H // 2, W // 2, 2, 2, C).permute(0, 5, 1, 3, 2, 4).reshape(b, C, H, W)


class LoraLinear(torch.nn.Module):
    def __init__(self, base, down, up, scale):
        super().__init__()
        self.base, self.down, self.up, self.scale = base, down, up, scale

    def forward(self, x):
        return self.base(x) + self.scale * torch.nn.functional.linear(torch.nn.functional.linear(x, self.down), self.up)


def set_module(model, name, mod):
    parent = model.get_submodule(name.rsplit(".", 1)[0])
    setattr(parent, name.rsplit(".", 1)[1], mod)


def run(model, tokens, txt, dtype, lora=None):
    """pred (core convention) for tokens, txt leaves of dtype."""
    lat = unpack(tokens)
    t = (1.0 - torch.tensor(TS, dtype=torch.float32)).to(dtype)  # the plugin: (float)(1 - t)
    out = model([lat[i].unsqueeze(1) for i in range(B)], t, [txt[i] for i in range(B)], return_dict=False)[0]
    out = torch.stack([o.squeeze(1) for o in out])
    return -pack(out)


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(30)
    model, sd = make_model(g)
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()},
              os.path.join(OUT, "zimage_tiny_diffusers.safetensors"), metadata={"format": "pt"})
    lat = torch.randn(B, C, H, W, generator=g)
    tokens = pack(lat).contiguous()
    txt = torch.randn(B, T, CONFIG["cap_feat_dim"], generator=g)
    R = torch.randn(B, (H // 2) * (W // 2), C * 4, generator=g)
    fx = {"in.tokens": tokens, "in.txt": txt, "in.timesteps": torch.tensor(TS, dtype=torch.float32), "in.R": R}

    def case(m, dtype, params):
        tok = tokens.to(dtype).requires_grad_(True)
        tx = txt.to(dtype).requires_grad_(True)
        pred = run(m, tok, tx, dtype)
        S = (pred * R.to(dtype)).sum()
        grads = torch.autograd.grad(S, [tok, tx] + params)
        return pred.detach(), S.detach(), grads

    m64 = model.double()
    named = dict(m64.named_parameters())
    pred, S, gr = case(m64, torch.float64, [named[n] for n in WGRADS])
    fx["ref.pred"], fx["ref.S"] = pred, S.reshape(1)
    fx["ref.grad.in.tokens"], fx["ref.grad.in.txt"] = gr[0], gr[1]
    for n, gw in zip(WGRADS, gr[2:]):
        fx["ref.grad.w." + n] = gw

    m32, _ = make_model(torch.Generator().manual_seed(30))
    m32.load_state_dict(sd)
    p32, _, g32 = case(m32, torch.float32, [dict(m32.named_parameters())[n] for n in WGRADS])
    worst = lambda a, b: ((a.double() - b.double()).abs().max() / b.abs().max()).item()
    print("float32 vs float64: pred %.2e, grad tokens %.2e, grad txt %.2e, weight grads %.2e" % (
        worst(p32, pred), worst(g32[0], gr[0]), worst(g32[1], gr[1]),
        max(worst(a, b) for a, b in zip(g32[2:], gr[2:]))))

    # LoRA on two linears of different blocks
    params = []
    for mod, r, alpha in LORA:
        base = m64.get_submodule(mod)
        down = torch.nn.Parameter(bf16(torch.randn(r, base.in_features, generator=g) / base.in_features ** 0.5).double())
        up = torch.nn.Parameter(bf16(torch.randn(base.out_features, r, generator=g) * 0.3).double())
        set_module(m64, mod, LoraLinear(base, down, up, alpha / r))
        fx["lora.%s.down" % mod], fx["lora.%s.up" % mod] = down.detach(), up.detach()
        fx["lora.%s.alpha" % mod] = torch.tensor([alpha])
        params += [down, up]
    pred, S, gr = case(m64, torch.float64, params)
    fx["ref.lora.pred"], fx["ref.lora.S"], fx["ref.lora.grad.in.tokens"] = pred, S.reshape(1), gr[0]
    for i, (mod, _, _) in enumerate(LORA):
        fx["ref.lora.grad.%s.down" % mod], fx["ref.lora.grad.%s.up" % mod] = gr[2 + 2 * i], gr[3 + 2 * i]
    # the sampler: the pipelines' FlowMatchEulerDiscreteScheduler with
    # Z-Image-Turbo's scheduler_config.json (num_train_timesteps 1000, shift 3.0,
    # use_dynamic_shifting false: the mu the pipeline passes is unused) and
    # pipeline_z_image.get_default_z_image_sigmas: sigmas linspace(1, 1/n, n)
    for n in (8, 30):
        sch = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
        sch.set_timesteps(sigmas=torch.linspace(1.0, 1.0 / n, n).tolist(), mu=0.6)
        fx["ref.sched.sigmas.%d" % n] = sch.sigmas.double()  # n + 1 values, the terminal 0 last
    save_file({k: v.to(torch.float32).contiguous() for k, v in fx.items()}, os.path.join(OUT, "zimage_tiny.safetensors"),
              metadata={"source": "tests/reference/zimage_ref.py", "diffusers": __import__("diffusers").__version__})
    print("wrote", OUT)


if __name__ == "__main__":
    main()
