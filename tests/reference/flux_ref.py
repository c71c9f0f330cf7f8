#!/usr/bin/env python3
"""flux_ref.py — independent PyTorch reference for the FLUX plugin
(plugins/models/flux): small FLUX.1 and FLUX.2 models written the way BFL's
reference code builds them (black-forest-labs/flux src/flux/model.py,
modules/layers.py, math.py; black-forest-labs/flux2 src/flux2/model.py, read,
not copied), so their state_dict keys ARE the BFL checkpoint keys. Truth comes
from torch (autograd for every gradient), not from anything orakul wrote.

Usage:  python3 flux_ref.py [OUTDIR]     (default: tests/fixtures next to this folder)
Needs:  torch, safetensors, numpy. CPU only; runs in a few seconds. Deterministic
        (torch.manual_seed; weights and inputs are drawn in F32 on the CPU generator).

Writes (all tensors little-endian, row-major):
  flux1_small_bfl.safetensors        FLUX.1 small checkpoint, BFL keys, F32
  flux1_small_diffusers.safetensors  the same weights in diffusers keys (FLUX.md §3.2:
                                     q/k/v split, single linear1 split into to_q/to_k/to_v/
                                     proj_mlp, final adaLN rows (shift, scale) -> (scale, shift))
  flux2_small_bfl.safetensors        FLUX.2 small checkpoint, BFL keys, F32 (no biases)
  flux1_small.safetensors            FLUX.1 fixture (inputs, outputs, gradients, LoRA case)
  flux2_small.safetensors            FLUX.2 fixture

Configs (both: hidden 64, heads 2 -> head_dim 32, depth 2, depth_single 2,
in_channels 48 = 3*4^2 (the pixel codec at patch 4), context 32, guidance on):
  FLUX.1: mlp 4d = 256, vec_in_dim 16, qkv_bias, GELU(tanh), per-block modulation,
          rope axes [4, 14, 14] (flux_variants.c flux_cfg_derive for head_dim 32), theta 10000.
  FLUX.2: mlp 3d = 192 (SwiGLU, gate = first half), no biases, shared modulation
          (double_stream_modulation_img/txt, single_stream_modulation), no vector_in,
          rope axes [8, 8, 8, 8], theta 2000.
Inputs: B = 2, image grid 4x4 tokens (N = 16, img_ids (0,row,col) / FLUX.2 (0,h,w,0)),
T = 8 text tokens (txt_ids 0 / FLUX.2 (0,0,0,l)), timesteps [0.3, 0.8], guidance [3.5, 1.0].

Weights: linear weights ~ U(+-1/sqrt(fan_in)), biases ~ U(+-1/sqrt(fan_in)),
RMSNorm scales ~ U(0.5, 1.5) (non-trivial so a missing/mis-mapped scale shows).

Fixture tensor names (F32 = the exact values the C side gets; F64 = reference):
  in.tokens    F32 (B, N, C)     packed image tokens
  in.txt       F32 (B, T, ctx)   text embeddings
  in.vec       F32 (B, vec)      pooled vector (FLUX.1 only)
  in.timesteps F32 (B)           t in [0, 1]
  in.guidance  F32 (B)
  in.R         F32 (B, N, C)     fixed weights of the scalar S = sum(pred * R)
  ref.pred     F64 (B, N, C)     prediction, float64 forward on the F32 weights/inputs
  ref.S        F64 ()            sum(ref.pred * R)
  ref.grad.in.tokens / ref.grad.in.txt / ref.grad.in.vec   F64  dS/d input
  ref.grad.w.<BFL key>           F64  dS/d weight, keys in GRAD_WEIGHTS below
  f32.pred / f32.S / f32.grad.in.* / f32.lora.pred / f32.lora.S / f32.lora.grad.in.tokens
                                 F32  the same quantities with the model run in float32
                                      exactly as BFL does (rope, temb, RMSNorm in fp32);
                                      weight gradients are stored as F64 only (file size)
  inter.temb / inter.gemb  F64 (B, 256)  timestep / guidance embedding
  inter.vec                F64 (B, d)    conditioning vector after the embed block
  inter.pe                 F64 (T+N, head_dim/2, 2)  rope (cos, sin), text first
                                         (the layout of the C carry slot FC_PE)
  inter.img.embed / inter.txt.embed      F64 after img_in / txt_in
  inter.img.double.<i> / inter.txt.double.<i>  F64 after double block i
  inter.x.single.<i>       F64 (B, T+N, d) after single block i (text first)
  LoRA case (rank 4, alpha 8, y += (alpha/rank) * up(down(x)) on the fused outputs of
  double_blocks.0.img_attn.qkv and single_blocks.0.linear1):
  lora.<module>.down  F32 (r, in)   ("lora_A", kohya lora_down)
  lora.<module>.up    F32 (out, r)  ("lora_B", kohya lora_up)
  lora.<module>.alpha F32 ()        8.0
  ref.lora.pred / ref.lora.S / ref.lora.grad.<module>.down|up / ref.lora.grad.in.tokens
  f32.lora.pred / f32.lora.S / f32.lora.grad.in.tokens   the float32 run
__metadata__: magic "orakul-fixture", version "1", script, torch, config (JSON),
  grid "4x4", precision notes.

Deviations from BFL's code, all for the float64 reference only: BFL casts to
float32 in rope(), apply_rope(), RMSNorm and timestep_embedding(); here those
run in the model's working dtype (float64 for ref.*, float32 for f32.*, where the
behaviour is exactly BFL's). SDPA is F.scaled_dot_product_attention (default
scale 1/sqrt(head_dim), no mask), as in BFL.

Precision and tolerance advice for the C F32 test (compare C F32 vs ref.* F64):
  The C forward runs the same graph in F32 from the same F32 weights and inputs.
  Error sources: F32 rounding in matmuls (K <= 448 -> ~sqrt(K)*eps relative to
  the row's magnitude), softmax, LayerNorm/RMSNorm (catastrophic cancellation is
  mild: rows are O(1) with non-zero variance), and the timestep embedding: t*1000
  in F32 gives args up to ~800 rad whose F32 rounding is ~3e-5 absolute in
  cos/sin (the C code computes temb in double, then rounds: ~6e-8).
  Measured with torch itself (the script prints it; f32.* vs ref.*), as a
  fraction of max|ref| of each tensor: pred 1.8e-6, grad.in.* <= 2.2e-5,
  weight grads <= 2.8e-5 (the largest are guidance_in / adaLN weight grads, whose
  error is mostly torch's F32 timestep embedding; the C side's is smaller).
  Recommended check per element, with M = max|ref| of that tensor:
      pred, S:        |c - ref| <= 5e-5 * M + 1e-4 * |ref|        (~25x margin)
      gradients:      |c - ref| <= 3e-4 * M + 1e-3 * |ref|        (~10x margin)
  An accumulation order different from torch's (blocked GEMM, tree reductions)
  changes F32 results by the same order as above, not more. Any mapping mistake
  (chunk order, swapped shift/scale, rope pairing, a missing norm scale, the LoRA
  scale, a q/k/v split) moves values by >= 1e-2 * M: >= 30x above these bounds.
  The float32 values (f32.*) should agree with a C F32 run to about the same
  bounds; prefer comparing against ref.*.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

SCRIPT = "tests/reference/flux_ref.py"
B, H_TOK, W_TOK, T = 2, 4, 4, 8
N = H_TOK * W_TOK
TIMESTEPS = [0.3, 0.8]
GUIDANCE = [3.5, 1.0]
LORA_RANK, LORA_ALPHA = 4, 8.0
LORA_MODULES = ["double_blocks.0.img_attn.qkv", "single_blocks.0.linear1"]

CFG1 = dict(version=1, in_channels=48, hidden_size=64, num_heads=2, depth=2, depth_single_blocks=2,
            context_in_dim=32, vec_in_dim=16, mlp_ratio=4.0, axes_dim=[4, 14, 14], theta=10000,
            qkv_bias=True, guidance_embed=True)
CFG2 = dict(version=2, in_channels=48, hidden_size=64, num_heads=2, depth=2, depth_single_blocks=2,
            context_in_dim=32, vec_in_dim=0, mlp_ratio=3.0, axes_dim=[8, 8, 8, 8], theta=2000,
            qkv_bias=False, guidance_embed=True)

GRAD_WEIGHTS = {
    1: ["img_in.weight", "guidance_in.out_layer.weight", "double_blocks.0.img_attn.qkv.weight",
        "double_blocks.0.img_attn.qkv.bias", "double_blocks.0.img_attn.norm.query_norm.scale",
        "double_blocks.1.txt_attn.proj.weight", "single_blocks.1.linear2.weight",
        "single_blocks.0.norm.key_norm.scale", "final_layer.linear.weight", "final_layer.linear.bias",
        "final_layer.adaLN_modulation.1.weight"],
    2: ["img_in.weight", "guidance_in.out_layer.weight", "double_blocks.0.img_attn.qkv.weight",
        "double_blocks.0.img_attn.norm.query_norm.scale", "double_blocks.1.txt_attn.proj.weight",
        "single_stream_modulation.lin.weight", "single_blocks.1.linear2.weight",
        "single_blocks.0.norm.key_norm.scale", "final_layer.linear.weight",
        "final_layer.adaLN_modulation.1.weight"],
}


# ---------------------------------------------------------------- BFL math ---
def _work(x):
    """BFL upcasts to float32 in rope/RMSNorm/temb; keep float64 when running in float64."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def timestep_embedding(t, dim=256, max_period=10000, time_factor=1000.0):
    dt = _work(t)
    t = time_factor * t.to(dt)
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=dt) / half)
    args = t[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def rope(pos, dim, theta):
    # (..., n) -> (..., n, dim/2, 2, 2) with [[cos, -sin], [sin, cos]]
    scale = torch.arange(0, dim, 2, dtype=pos.dtype) / dim
    omega = 1.0 / (theta ** scale)
    ang = pos[..., None] * omega
    out = torch.stack([torch.cos(ang), -torch.sin(ang), torch.sin(ang), torch.cos(ang)], dim=-1)
    return out.reshape(*out.shape[:-1], 2, 2)


def apply_rope(xq, xk, freqs):
    dt = _work(xq)
    xq_ = xq.to(dt).reshape(*xq.shape[:-1], -1, 1, 2)
    xk_ = xk.to(dt).reshape(*xk.shape[:-1], -1, 1, 2)
    f = freqs.to(dt)
    q = f[..., 0] * xq_[..., 0] + f[..., 1] * xq_[..., 1]
    k = f[..., 0] * xk_[..., 0] + f[..., 1] * xk_[..., 1]
    return q.reshape(*xq.shape).type_as(xq), k.reshape(*xk.shape).type_as(xk)


def attention(q, k, v, pe):
    q, k = apply_rope(q, k, pe)
    x = F.scaled_dot_product_attention(q, k, v)       # (B, H, L, D)
    Bq, Hh, L, D = x.shape
    return x.permute(0, 2, 1, 3).reshape(Bq, L, Hh * D)  # "B H L D -> B L (H D)"


def split_heads(qkv, heads):
    # "B L (K H D) -> K B H L D"
    Bq, L, three_d = qkv.shape
    D = three_d // (3 * heads)
    return qkv.reshape(Bq, L, 3, heads, D).permute(2, 0, 3, 1, 4)


class EmbedND(nn.Module):
    def __init__(self, dim, theta, axes_dim):
        super().__init__()
        self.theta, self.axes_dim = theta, axes_dim

    def forward(self, ids):
        emb = torch.cat([rope(ids[..., i], self.axes_dim[i], self.theta) for i in range(len(self.axes_dim))],
                        dim=-3)
        return emb.unsqueeze(1)


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim, hidden_dim, bias=True):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden_dim, bias=bias)
        self.silu = nn.SiLU()
        self.out_layer = nn.Linear(hidden_dim, hidden_dim, bias=bias)

    def forward(self, x):
        return self.out_layer(self.silu(self.in_layer(x)))


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xd = x.dtype
        x = x.to(_work(x))
        rrms = torch.rsqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-6)
        return (x * rrms).to(xd) * self.scale


class QKNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.query_norm = RMSNorm(dim)
        self.key_norm = RMSNorm(dim)

    def forward(self, q, k, v):
        return self.query_norm(q).to(v), self.key_norm(k).to(v)


class SelfAttention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, bias):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.norm = QKNorm(dim // num_heads)
        self.proj = nn.Linear(dim, dim, bias=bias)


class Modulation(nn.Module):
    def __init__(self, dim, double, bias=True):
        super().__init__()
        self.is_double = double
        self.multiplier = 6 if double else 3
        self.lin = nn.Linear(dim, self.multiplier * dim, bias=bias)

    def forward(self, vec):
        out = self.lin(F.silu(vec))[:, None, :].chunk(self.multiplier, dim=-1)
        return out[:3], (out[3:] if self.is_double else None)   # (shift, scale, gate) x 1 or 2


class SiLUActivation(nn.Module):
    def forward(self, x):
        x1, x2 = x.chunk(2, dim=-1)
        return F.silu(x1) * x2


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],), eps=1e-6)


class DoubleStreamBlock(nn.Module):
    def __init__(self, d, heads, mlp_ratio, version, qkv_bias):
        super().__init__()
        self.version, self.heads = version, heads
        m = int(d * mlp_ratio)
        bias = version == 1
        if version == 1:
            self.img_mod = Modulation(d, True)
            self.txt_mod = Modulation(d, True)
        self.img_attn = SelfAttention(d, heads, qkv_bias, bias)
        self.txt_attn = SelfAttention(d, heads, qkv_bias, bias)
        if version == 1:
            mk = lambda: nn.Sequential(nn.Linear(d, m), nn.GELU(approximate="tanh"), nn.Linear(m, d))
        else:
            mk = lambda: nn.Sequential(nn.Linear(d, 2 * m, bias=False), SiLUActivation(),
                                       nn.Linear(m, d, bias=False))
        self.img_mlp = mk()
        self.txt_mlp = mk()

    def forward(self, img, txt, vec, pe, mod_img=None, mod_txt=None):
        if self.version == 1:
            mod_img, mod_txt = self.img_mod(vec), self.txt_mod(vec)
        (is1, ic1, ig1), (is2, ic2, ig2) = mod_img
        (ts1, tc1, tg1), (ts2, tc2, tg2) = mod_txt
        iq, ik, iv = split_heads(self.img_attn.qkv((1 + ic1) * layer_norm(img) + is1), self.heads)
        iq, ik = self.img_attn.norm(iq, ik, iv)
        tq, tk, tv = split_heads(self.txt_attn.qkv((1 + tc1) * layer_norm(txt) + ts1), self.heads)
        tq, tk = self.txt_attn.norm(tq, tk, tv)
        a = attention(torch.cat((tq, iq), 2), torch.cat((tk, ik), 2), torch.cat((tv, iv), 2), pe)
        ta, ia = a[:, :txt.shape[1]], a[:, txt.shape[1]:]
        img = img + ig1 * self.img_attn.proj(ia)
        img = img + ig2 * self.img_mlp((1 + ic2) * layer_norm(img) + is2)
        txt = txt + tg1 * self.txt_attn.proj(ta)
        txt = txt + tg2 * self.txt_mlp((1 + tc2) * layer_norm(txt) + ts2)
        return img, txt


class SingleStreamBlock(nn.Module):
    def __init__(self, d, heads, mlp_ratio, version):
        super().__init__()
        self.version, self.heads, self.d = version, heads, d
        self.m = int(d * mlp_ratio)
        bias = version == 1
        mult = 1 if version == 1 else 2
        self.linear1 = nn.Linear(d, 3 * d + mult * self.m, bias=bias)
        self.linear2 = nn.Linear(d + self.m, d, bias=bias)
        self.norm = QKNorm(d // heads)
        self.mlp_act = nn.GELU(approximate="tanh") if version == 1 else SiLUActivation()
        if version == 1:
            self.modulation = Modulation(d, False)

    def forward(self, x, vec, pe, mod=None):
        if self.version == 1:
            mod, _ = self.modulation(vec)
        shift, scale, gate = mod
        h = self.linear1((1 + scale) * layer_norm(x) + shift)
        qkv, mlp = torch.split(h, [3 * self.d, h.shape[-1] - 3 * self.d], dim=-1)
        q, k, v = split_heads(qkv, self.heads)
        q, k = self.norm(q, k, v)
        a = attention(q, k, v, pe)
        return x + gate * self.linear2(torch.cat((a, self.mlp_act(mlp)), 2))


class LastLayer(nn.Module):
    def __init__(self, d, out, bias):
        super().__init__()
        self.linear = nn.Linear(d, out, bias=bias)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d, bias=bias))

    def forward(self, x, vec):
        shift, scale = self.adaLN_modulation(vec).chunk(2, dim=-1)
        return self.linear((1 + scale[:, None, :]) * layer_norm(x) + shift[:, None, :])


class Flux(nn.Module):
    """FLUX.1 (version 1) / FLUX.2 (version 2) with BFL module names."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d, H, v = c["hidden_size"], c["num_heads"], c["version"]
        bias = v == 1
        self.pe_embedder = EmbedND(d // H, c["theta"], c["axes_dim"])
        self.img_in = nn.Linear(c["in_channels"], d, bias=bias)
        self.time_in = MLPEmbedder(256, d, bias)
        if v == 1 and c["vec_in_dim"] > 0:
            self.vector_in = MLPEmbedder(c["vec_in_dim"], d)
        if c["guidance_embed"]:
            self.guidance_in = MLPEmbedder(256, d, bias)
        self.txt_in = nn.Linear(c["context_in_dim"], d, bias=bias)
        self.double_blocks = nn.ModuleList(
            [DoubleStreamBlock(d, H, c["mlp_ratio"], v, c["qkv_bias"]) for _ in range(c["depth"])])
        self.single_blocks = nn.ModuleList(
            [SingleStreamBlock(d, H, c["mlp_ratio"], v) for _ in range(c["depth_single_blocks"])])
        if v == 2:
            self.double_stream_modulation_img = Modulation(d, True, bias=False)
            self.double_stream_modulation_txt = Modulation(d, True, bias=False)
            self.single_stream_modulation = Modulation(d, False, bias=False)
        self.final_layer = LastLayer(d, c["in_channels"], bias)

    def forward(self, img, img_ids, txt, txt_ids, timesteps, y, guidance, inter=None):
        rec = (lambda k, t: inter.__setitem__(k, t.detach().clone())) if inter is not None else (lambda k, t: None)
        v = self.c["version"]
        temb = timestep_embedding(timesteps).to(img.dtype)
        rec("inter.temb", temb)
        vec = self.time_in(temb)
        if self.c["guidance_embed"]:
            gemb = timestep_embedding(guidance).to(img.dtype)
            rec("inter.gemb", gemb)
            vec = vec + self.guidance_in(gemb)
        if v == 1 and self.c["vec_in_dim"] > 0:
            vec = vec + self.vector_in(y)
        rec("inter.vec", vec)
        img = self.img_in(img)
        txt = self.txt_in(txt)
        rec("inter.img.embed", img)
        rec("inter.txt.embed", txt)
        pe = self.pe_embedder(torch.cat((txt_ids, img_ids), dim=1))   # (B, 1, L, D/2, 2, 2), text first
        rec("inter.pe", pe[0, 0, :, :, :, 0])                          # (L, D/2, (cos, sin))
        mi = mt = ms = None
        if v == 2:
            mi = self.double_stream_modulation_img(vec)
            mt = self.double_stream_modulation_txt(vec)
            ms, _ = self.single_stream_modulation(vec)
        for i, blk in enumerate(self.double_blocks):
            img, txt = blk(img, txt, vec, pe, mi, mt)
            rec(f"inter.img.double.{i}", img)
            rec(f"inter.txt.double.{i}", txt)
        x = torch.cat((txt, img), 1)
        for i, blk in enumerate(self.single_blocks):
            x = blk(x, vec, pe, ms)
            rec(f"inter.x.single.{i}", x)
        return self.final_layer(x[:, txt.shape[1]:], vec)


# ------------------------------------------------------------ construction ---
def init_weights(model, gen):
    """Deterministic F32 init: linears U(+-1/sqrt(fan_in)), RMSNorm scales U(0.5, 1.5)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".scale"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            else:
                fan_in = p.shape[1] if p.ndim == 2 else model.get_submodule(name.rsplit(".", 1)[0]).in_features
                bound = 1.0 / math.sqrt(fan_in)
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * bound)


def positions(version, dtype):
    img_ids = torch.zeros(H_TOK, W_TOK, 4 if version == 2 else 3, dtype=dtype)
    img_ids[..., 1] = torch.arange(H_TOK, dtype=dtype)[:, None]
    img_ids[..., 2] = torch.arange(W_TOK, dtype=dtype)[None, :]
    img_ids = img_ids.reshape(1, N, -1).repeat(B, 1, 1)
    txt_ids = torch.zeros(B, T, img_ids.shape[-1], dtype=dtype)
    if version == 2:
        txt_ids[..., 3] = torch.arange(T, dtype=dtype)
    return img_ids, txt_ids


def to_diffusers_flux1(sd, c):
    """BFL FLUX.1 state dict -> diffusers FluxTransformer2DModel keys (FLUX.md §3.2)."""
    d = c["hidden_size"]
    out = {}
    simple = {"img_in": "x_embedder", "txt_in": "context_embedder",
              "time_in.in_layer": "time_text_embed.timestep_embedder.linear_1",
              "time_in.out_layer": "time_text_embed.timestep_embedder.linear_2",
              "vector_in.in_layer": "time_text_embed.text_embedder.linear_1",
              "vector_in.out_layer": "time_text_embed.text_embedder.linear_2",
              "guidance_in.in_layer": "time_text_embed.guidance_embedder.linear_1",
              "guidance_in.out_layer": "time_text_embed.guidance_embedder.linear_2",
              "final_layer.linear": "proj_out"}
    dbl = {"img_mod.lin": "norm1.linear", "txt_mod.lin": "norm1_context.linear",
           "img_attn.norm.query_norm.scale": "attn.norm_q.weight", "img_attn.norm.key_norm.scale": "attn.norm_k.weight",
           "txt_attn.norm.query_norm.scale": "attn.norm_added_q.weight",
           "txt_attn.norm.key_norm.scale": "attn.norm_added_k.weight",
           "img_attn.proj": "attn.to_out.0", "txt_attn.proj": "attn.to_add_out",
           "img_mlp.0": "ff.net.0.proj", "img_mlp.2": "ff.net.2",
           "txt_mlp.0": "ff_context.net.0.proj", "txt_mlp.2": "ff_context.net.2"}
    sgl = {"modulation.lin": "norm.linear", "norm.query_norm.scale": "attn.norm_q.weight",
           "norm.key_norm.scale": "attn.norm_k.weight", "linear2": "proj_out"}
    for k, t in sd.items():
        mod, leaf = k.rsplit(".", 1)
        if mod in simple:
            out[f"{simple[mod]}.{leaf}"] = t
        elif mod == "final_layer.adaLN_modulation.1":
            shift, scale = t.chunk(2, dim=0)
            out[f"norm_out.linear.{leaf}"] = torch.cat([scale, shift], dim=0)
        elif k.startswith("double_blocks."):
            i, rest = k.split(".", 2)[1:]
            if rest.startswith(("img_attn.qkv.", "txt_attn.qkv.")):
                names = ["to_q", "to_k", "to_v"] if rest.startswith("img") else ["add_q_proj", "add_k_proj", "add_v_proj"]
                for n, part in zip(names, t.chunk(3, dim=0)):
                    out[f"transformer_blocks.{i}.attn.{n}.{leaf}"] = part
                continue
            for a, b in dbl.items():
                if rest == a or rest.startswith(a + "."):
                    out[f"transformer_blocks.{i}.{b}{rest[len(a):]}"] = t
                    break
            else:
                raise KeyError(k)
        elif k.startswith("single_blocks."):
            i, rest = k.split(".", 2)[1:]
            if rest.startswith("linear1."):
                parts = torch.split(t, [d, d, d, t.shape[0] - 3 * d], dim=0)
                for n, part in zip(["attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"], parts):
                    out[f"single_transformer_blocks.{i}.{n}.{leaf}"] = part
                continue
            for a, b in sgl.items():
                if rest == a or rest.startswith(a + "."):
                    out[f"single_transformer_blocks.{i}.{b}{rest[len(a):]}"] = t
                    break
            else:
                raise KeyError(k)
        else:
            raise KeyError(k)
    return {k: v.contiguous() for k, v in out.items()}


def lora_hooks(model, lora):
    """y += (alpha/r)·up(down(x)) on the named linears; returns hook handles."""
    hs = []
    for m in LORA_MODULES:
        down, up, alpha = lora[m]
        s = alpha / down.shape[0]
        hs.append(model.get_submodule(m).register_forward_hook(
            lambda mod, inp, out, down=down, up=up, s=s: out + s * F.linear(F.linear(inp[0], down), up)))
    return hs


def run(model32, c, inputs, R, lora32, dtype, inter):
    """Forward + autograd in dtype; returns dict of name -> tensor (prefix-free)."""
    model = type(model32)(c)
    model.load_state_dict(model32.state_dict())
    model = model.to(dtype)
    res = {}
    img_ids, txt_ids = positions(c["version"], dtype)
    x = {k: v.to(dtype).requires_grad_(k in ("tokens", "txt", "vec")) for k, v in inputs.items()}
    Rd = R.to(dtype)
    args = (x["tokens"], img_ids, x["txt"], txt_ids, x["timesteps"], x.get("vec"), x["guidance"])
    pred = model(*args, inter=inter)
    S = (pred * Rd).sum()
    wnames = GRAD_WEIGHTS[c["version"]]
    params = dict(model.named_parameters())
    ins = [k for k in ("tokens", "txt", "vec") if k in x]
    grads = torch.autograd.grad(S, [x[k] for k in ins] + [params[n] for n in wnames])
    res["pred"], res["S"] = pred.detach(), S.detach()
    for k, g in zip(ins + [f"w.{n}" for n in wnames], grads):
        res[f"grad.{'in.' if not k.startswith('w.') else ''}{k}"] = g
    # LoRA case
    lora = {m: (d.to(dtype).requires_grad_(True), u.to(dtype).requires_grad_(True), a) for m, (d, u, a) in lora32.items()}
    hs = lora_hooks(model, lora)
    tok = inputs["tokens"].to(dtype).requires_grad_(True)
    pred_l = model(tok, *args[1:])
    for h in hs:
        h.remove()
    S_l = (pred_l * Rd).sum()
    leaves = [tok] + [t for m in LORA_MODULES for t in lora[m][:2]]
    g = torch.autograd.grad(S_l, leaves)
    res["lora.pred"], res["lora.S"], res["lora.grad.in.tokens"] = pred_l.detach(), S_l.detach(), g[0]
    for j, m in enumerate(LORA_MODULES):
        res[f"lora.grad.{m}.down"], res[f"lora.grad.{m}.up"] = g[1 + 2 * j], g[2 + 2 * j]
    return res


def build(c, seed, outdir, tag):
    gen = torch.Generator().manual_seed(seed)
    model = Flux(c).float()
    init_weights(model, gen)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    inputs = {
        "tokens": torch.randn(B, N, c["in_channels"], generator=gen),
        "txt": torch.randn(B, T, c["context_in_dim"], generator=gen),
        "timesteps": torch.tensor(TIMESTEPS, dtype=torch.float32),
        "guidance": torch.tensor(GUIDANCE, dtype=torch.float32),
    }
    if c["version"] == 1:
        inputs["vec"] = torch.randn(B, c["vec_in_dim"], generator=gen)
    R = torch.randn(B, N, c["in_channels"], generator=gen)
    lora = {}
    for m in LORA_MODULES:
        lin = model.get_submodule(m)
        down = (torch.rand(LORA_RANK, lin.in_features, generator=gen) * 2 - 1) / math.sqrt(lin.in_features)
        up = (torch.rand(lin.out_features, LORA_RANK, generator=gen) * 2 - 1) / math.sqrt(LORA_RANK)
        lora[m] = (down, up, LORA_ALPHA)

    inter = {}
    ref = run(model, c, inputs, R, lora, torch.float64, inter)
    f32 = run(model, c, inputs, R, lora, torch.float32, None)

    fx = {f"in.{k}": v for k, v in inputs.items()}
    fx["in.R"] = R
    for m, (d_, u_, a) in lora.items():
        fx[f"lora.{m}.down"], fx[f"lora.{m}.up"] = d_, u_
        fx[f"lora.{m}.alpha"] = torch.tensor(a, dtype=torch.float32)
    for k, v in ref.items():
        fx[f"ref.{k}"] = v.to(torch.float64)
    for k, v in f32.items():   # F32 outputs; weight/LoRA-weight gradients only as F64 (size)
        if not k.startswith(("grad.w.", "lora.grad.d", "lora.grad.s")):
            fx[f"f32.{k}"] = v.to(torch.float32)
    fx.update({k: v.to(torch.float64) for k, v in inter.items()})
    fx = {k: v.detach().contiguous() for k, v in fx.items()}

    # report the F32-vs-F64 error (the yardstick for the C tolerances)
    print(f"[{tag}] S ref {ref['S'].item():.12g}  f32 {f32['S'].item():.12g}  lora S {ref['lora.S'].item():.12g}")
    worst = 0.0
    for k in ref:
        r, f = ref[k], f32[k].double()
        scale = r.abs().max().item()
        err = (r - f).abs().max().item()
        worst = max(worst, err / scale if scale else err)
        print(f"[{tag}]   {k:52s} max|ref| {scale:10.4g}  max|f32-ref| {err:9.3g}  rel {err / scale if scale else 0:9.3g}")
    print(f"[{tag}] worst f32-vs-f64 error relative to max|ref|: {worst:.3g}")

    cfgjson = json.dumps(dict(c, batch=B, grid=[H_TOK, W_TOK], text_tokens=T, seed=seed, timesteps=TIMESTEPS,
                              guidance=GUIDANCE, lora=dict(rank=LORA_RANK, alpha=LORA_ALPHA, modules=LORA_MODULES),
                              grad_weights=GRAD_WEIGHTS[c["version"]]), sort_keys=True)
    meta = {"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "torch": torch.__version__,
            "config": cfgjson, "grid": f"{H_TOK}x{W_TOK}",
            "precision": "ref.* and inter.*: float64 forward/autograd on the F32 weights and inputs; "
                         "f32.*: the same in float32 (BFL behaviour); in.*/lora.*: exact F32 inputs",
            "tolerance": "C F32 vs ref, M = max|ref| per tensor: pred, S |d| <= 5e-5*M + 1e-4*|ref|; gradients |d| <= 3e-4*M + 1e-3*|ref|",
            "worst_f32_rel": f"{worst:.3g}"}
    save_file(fx, os.path.join(outdir, f"{tag}.safetensors"), metadata=meta)
    wmeta = {"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "torch": torch.__version__,
             "config": cfgjson, "format": "bfl"}
    save_file(sd, os.path.join(outdir, f"{tag}_bfl.safetensors"), metadata=wmeta)
    if c["version"] == 1:
        dsd = to_diffusers_flux1(sd, c)
        assert sum(v.numel() for v in dsd.values()) == sum(v.numel() for v in sd.values())
        save_file(dsd, os.path.join(outdir, f"{tag}_diffusers.safetensors"), metadata=dict(wmeta, format="diffusers"))
    return fx


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)   # deterministic reductions
    build(CFG1, 1001, outdir, "flux1_small")
    build(CFG2, 2002, outdir, "flux2_small")
    for f in sorted(os.listdir(outdir)):
        if f.startswith("flux"):
            print(f"{f}: {os.path.getsize(os.path.join(outdir, f))} bytes")


if __name__ == "__main__":
    main()
