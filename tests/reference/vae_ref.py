#!/usr/bin/env python3
"""vae_ref.py — independent PyTorch reference for the FLUX plugin's "vae" codec
(now plugins/codecs/image/flux_vae.c): BFL's FLUX.1 autoencoder
(black-forest-labs/flux src/flux/modules/autoencoder.py) and FLUX.2 autoencoder
(black-forest-labs/flux2 src/flux2/autoencoder.py), written here from their
structure (FLUX.md §7) with the same module and key names, at a SMALL random
geometry so the fixtures stay small and the C test runs in seconds:

    ch 32, ch_mult [1, 2], 1 res block per encoder level (2 per decoder level),
    GroupNorm(32, eps 1e-6), z 4 (FLUX.1) / 8 (FLUX.2).

FLUX.1: tokens = pack2x2(0.3611 * (mean - 0.1159)); decode inverts.
FLUX.2: encoder ends with quant_conv (1x1, 2z -> 2z), decoder starts with
post_quant_conv (1x1, z -> z); tokens = BatchNorm_eval(patchify2x2(mean))
(eps 1e-4, no affine, stored running stats); decode inverts.
Pixels: the codec takes images in [0, 1] (x = 2*img - 1 into the encoder) and
returns 0.5*decoder(z) + 0.5 (unclamped), so the fixture uses that convention.

Usage:  python3 vae_ref.py [OUTDIR] [PHOTOS_DIR]
        defaults: tests/fixtures, ../shared/assets/photos (relative to the repo root).
Needs:  torch, safetensors, numpy, pillow. CPU, a few seconds. Deterministic.

Writes
  OUTDIR/vae1_small.safetensors   FLUX.1 AE weights, BFL key layout, BF16
  OUTDIR/vae2_small.safetensors   FLUX.2 AE weights, BFL key layout, BF16 (+ bn.* F32,
                                  bn.num_batches_tracked I64 like a real state dict)
  OUTDIR/vae_small_ref.safetensors
    in.image         F32 (1, 3, 64, 64)  astronaut.png, centre crop, BICUBIC to 64x64, [0, 1]
    in.R             F32 (1, 3, 64, 64)  fixed random weights of the gradient's projection
    v{1,2}.ref.tokens   F64 (1, 256, 4z)  encode(in.image) in float64 on the BF16 weights
    v{1,2}.ref.decoded  F64 (1, 3, 64, 64) decode(float32(ref.tokens)) in float64, [0, 1] convention
    v{1,2}.ref.grad.tokens F64 (1, 256, 4z) d sum(decode(t) * R) / dt at t = float32(ref.tokens)
    v{1,2}.f32.*        the same three computed by torch in float32 (error advice below)
  __metadata__: magic, script, torch version, the geometry, measured F32-vs-F64 errors.

Precision advice (printed and stored in the metadata): torch F32 vs F64,
relative to max|ref| of each tensor, is ~1e-6 for tokens and decoded images and
~1e-5 for the gradient (swish is smooth: no mask flips, element-wise bounds hold).
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import save_file

SCRIPT = "tests/reference/vae_ref.py"
SIZE = 64
CH, CH_MULT, NRES = 32, [1, 2], 1
Z = {1: 4, 2: 8}
SCALE, SHIFT, BN_EPS = 0.3611, 0.1159, 1e-4


def norm(c):
    return nn.GroupNorm(32, c, eps=1e-6, affine=True)


class Resnet(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1, self.conv1 = norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        if cin != cout:
            self.nin_shortcut = nn.Conv2d(cin, cout, 1)
        self.cin, self.cout = cin, cout

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (self.nin_shortcut(x) if self.cin != self.cout else x) + h


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = norm(c)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(c, c, 1) for _ in range(4))

    def forward(self, x):
        b, c, h, w = x.shape
        hn = self.norm(x)
        q, k, v = (m(hn).reshape(b, 1, c, h * w).transpose(2, 3) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v)  # (b, 1, hw, c)
        return x + self.proj_out(a.transpose(2, 3).reshape(b, c, h, w))


class Mid(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block_1, self.attn_1, self.block_2 = Resnet(c, c), Attn(c), Resnet(c, c)

    def forward(self, x):
        return self.block_2(self.attn_1(self.block_1(x)))


class Level(nn.Module):
    pass


class Encoder(nn.Module):
    def __init__(self, z, version):
        super().__init__()
        self.conv_in = nn.Conv2d(3, CH, 3, padding=1)
        self.down = nn.ModuleList()
        cin = CH
        for i, m in enumerate(CH_MULT):
            lv = Level()
            lv.block = nn.ModuleList()
            for _ in range(NRES):
                lv.block.append(Resnet(cin, CH * m))
                cin = CH * m
            if i != len(CH_MULT) - 1:
                lv.downsample = Level()
                lv.downsample.conv = nn.Conv2d(cin, cin, 3, stride=2, padding=0)
            self.down.append(lv)
        self.mid = Mid(cin)
        self.norm_out, self.conv_out = norm(cin), nn.Conv2d(cin, 2 * z, 3, padding=1)
        if version == 2:
            self.quant_conv = nn.Conv2d(2 * z, 2 * z, 1)
        self.version = version

    def forward(self, x):
        h = self.conv_in(x)
        for i, lv in enumerate(self.down):
            for blk in lv.block:
                h = blk(h)
            if i != len(self.down) - 1:
                h = lv.downsample.conv(F.pad(h, (0, 1, 0, 1)))
        h = self.conv_out(F.silu(self.norm_out(self.mid(h))))
        return self.quant_conv(h) if self.version == 2 else h


class Decoder(nn.Module):
    def __init__(self, z, version):
        super().__init__()
        top = CH * CH_MULT[-1]
        if version == 2:
            self.post_quant_conv = nn.Conv2d(z, z, 1)
        self.conv_in = nn.Conv2d(z, top, 3, padding=1)
        self.mid = Mid(top)
        ups = []
        cin = top
        for i in reversed(range(len(CH_MULT))):
            lv = Level()
            lv.block = nn.ModuleList()
            for _ in range(NRES + 1):
                lv.block.append(Resnet(cin, CH * CH_MULT[i]))
                cin = CH * CH_MULT[i]
            if i != 0:
                lv.upsample = Level()
                lv.upsample.conv = nn.Conv2d(cin, cin, 3, padding=1)
            ups.insert(0, lv)
        self.up = nn.ModuleList(ups)
        self.norm_out, self.conv_out = norm(cin), nn.Conv2d(cin, 3, 3, padding=1)
        self.version = version

    def forward(self, z):
        if self.version == 2:
            z = self.post_quant_conv(z)
        h = self.mid(self.conv_in(z))
        for i in reversed(range(len(self.up))):
            for blk in self.up[i].block:
                h = blk(h)
            if i != 0:
                h = self.up[i].upsample.conv(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return self.conv_out(F.silu(self.norm_out(h)))


class AE(nn.Module):
    def __init__(self, version):
        super().__init__()
        self.version, self.z = version, Z[version]
        self.encoder, self.decoder = Encoder(self.z, version), Decoder(self.z, version)
        if version == 2:
            self.bn = nn.BatchNorm2d(4 * self.z, eps=BN_EPS, momentum=0.1, affine=False, track_running_stats=True)

    def encode(self, img):  # img (B, 3, H, W) in [0, 1] -> tokens (B, N, 4z)
        mean = torch.chunk(self.encoder(2 * img - 1), 2, dim=1)[0]
        b, c, h, w = mean.shape
        if self.version == 1:
            mean = SCALE * (mean - SHIFT)
        p = mean.reshape(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, 4 * c, h // 2, w // 2)
        if self.version == 2:
            self.bn.eval()
            p = self.bn(p)
        return p.reshape(b, 4 * c, -1).transpose(1, 2)  # (B, h·w, c·4 + pi·2 + pj)

    def decode(self, tok, h, w):  # tokens (B, h·w, 4z) -> pixels [0, 1] convention (unclamped)
        b, n, c4 = tok.shape
        p = tok.transpose(1, 2).reshape(b, c4, h, w)
        if self.version == 2:
            s = torch.sqrt(self.bn.running_var.view(1, -1, 1, 1) + BN_EPS)
            p = p * s + self.bn.running_mean.view(1, -1, 1, 1)
        c = c4 // 4
        z = p.reshape(b, c, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c, 2 * h, 2 * w)
        if self.version == 1:
            z = z / SCALE + SHIFT
        return 0.5 * self.decoder(z) + 0.5


def load_image(path):
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = min(w, h)
    l, t = (w - s) // 2, (h - s) // 2
    im = im.crop((l, t, l + s, t + s)).resize((SIZE, SIZE), Image.BICUBIC)
    a = np.asarray(im, dtype=np.float32) / np.float32(255.0)
    return torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous().unsqueeze(0)


def make(version, gen):
    """Random weights: torch's default conv init from a seeded generator,
    norm affine 1 + 0.2·N / 0.2·N (so the affine path matters), BF16-rounded."""
    torch.manual_seed(1000 + version)
    ae = AE(version)
    with torch.no_grad():
        for name, p in ae.named_parameters():
            if ".norm" in name or name.endswith("norm_out.weight") or name.endswith("norm_out.bias"):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=gen))
            p.copy_(p.to(torch.bfloat16).float())
        if version == 2:
            ae.bn.running_mean.copy_(0.5 * torch.randn(4 * ae.z, generator=gen))
            ae.bn.running_var.copy_(0.5 + 1.5 * torch.rand(4 * ae.z, generator=gen))
            ae.bn.num_batches_tracked.fill_(1234)
    return ae


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures")
    pdir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "..", "shared", "assets", "photos")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(20261129)
    img = load_image(os.path.join(pdir, "astronaut.png"))
    R = torch.randn(1, 3, SIZE, SIZE, generator=gen)
    fx = {"in.image": img.clone(), "in.R": R.clone()}
    meta = {"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "torch": torch.__version__}
    errs = {}
    for v in (1, 2):
        ae = make(v, gen)
        sd = {k: (t.to(torch.bfloat16) if t.is_floating_point() and not k.startswith("bn.") else t).contiguous()
              for k, t in ae.state_dict().items()}
        save_file(sd, os.path.join(outdir, f"vae{v}_small.safetensors"),
                  metadata={"script": SCRIPT, "format": "BFL AutoEncoder state dict (FLUX.%d), small random" % v})
        hw = SIZE // 4
        res = {}
        for dt in (torch.float64, torch.float32):
            a = ae.to(dt)
            with torch.no_grad():
                tok = a.encode(img.to(dt))
            res[dt] = {"tokens": tok}
        t32 = res[torch.float64]["tokens"].float()  # decoder input: float32(ref.tokens), like the C test
        for dt in (torch.float64, torch.float32):
            a = ae.to(dt)
            t = t32.to(dt).clone().requires_grad_(True)
            dec = a.decode(t, hw, hw)
            (dec * R.to(dt)).sum().backward()
            res[dt]["decoded"] = dec.detach()
            res[dt]["grad"] = t.grad.detach()
        for key, name in (("tokens", "tokens"), ("decoded", "decoded"), ("grad", "grad.tokens")):
            r, f = res[torch.float64][key], res[torch.float32][key]
            fx[f"v{v}.ref.{name}"] = r.contiguous()
            fx[f"v{v}.f32.{name}"] = f.contiguous()
            e = ((f.double() - r).abs().max() / r.abs().max()).item()
            errs[f"v{v}.{name}"] = e
            print(f"FLUX.{v} {name:12s} shape {tuple(r.shape)}  max|ref| {r.abs().max().item():.4g}  "
                  f"torch f32 vs f64: max err / max|ref| = {e:.3g}")
    meta["config"] = json.dumps({"ch": CH, "ch_mult": CH_MULT, "num_res_blocks": NRES, "z": Z, "size": SIZE})
    meta["f32_errors"] = json.dumps(errs)
    save_file(fx, os.path.join(outdir, "vae_small_ref.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
