#!/usr/bin/env python3
"""taef1_ref.py — independent PyTorch reference for the TAEF1 codec of the FLUX
plugin (now plugins/codecs/image/taef1.c): madebyollin's Tiny AutoEncoder for
FLUX.1, built as an nn.Sequential exactly the way madebyollin/taesd's taesd.py
builds Encoder(16) / Decoder(16) (read, not copied): conv = Conv2d 3x3 pad 1;
Block = relu(conv-relu-conv-relu-conv(x) + x); Clamp = tanh(x/3)*3;
Upsample = nearest x2. The state dict keys are the Sequential indices, so the
real weights load with strict=True.

Usage:  python3 taef1_ref.py [OUTDIR] [TAEF1_DIR] [PHOTOS_DIR]
        defaults: tests/fixtures, ../shared/assets/taef1, ../shared/assets/photos
        (relative to the repository root; the assets are not committed).
Needs:  torch, safetensors, numpy, pillow. CPU, ~10 s. Deterministic.

Inputs: astronaut.png and coffee.png (scikit-image sample data, public domain /
CC0), converted to RGB, centre-cropped to a square, resized to 128x128 with
PIL's BICUBIC filter, scaled to [0, 1] F32. The exact F32 image is in the
fixture, so the C test does not depend on resize equality.

Writes OUTDIR/taef1_photos.safetensors:
  in.images     F32 (2, 3, 128, 128)  the exact encoder inputs, [0, 1], RGB, NCHW
                                      (0 = astronaut, 1 = coffee)
  ref.latents   F64 (2, 16, 16, 16)   encoder(in.images), float64 on the BF16 weights
  ref.recon     F32 (2, 3, 128, 128)  decoder(float32(ref.latents)) computed in
                                      float64, stored rounded to F32 (size); NOT clamped
  ref.psnr      F64 (2)               PSNR(clamp(ref.recon, 0, 1), in.images) in dB, peak 1
  in.R          F16 (1, 3, 128, 128)  fixed random weights (exact F16 values)
  ref.grad.latents F64 (1, 16, 16, 16) d/dz sum(decoder(z) * R) at z = float32(ref.latents[0:1])
  ref.S         F64 ()                sum(decoder(z) * R) at that z
  f32.grad.latents F32 (1, 16, 16, 16) the same gradient with torch in float32
  f32.psnr      F64 (2)               PSNR of the float32 encoder run, decoded (float32)
                                      from float32(ref.latents) like ref.recon
__metadata__: magic "orakul-fixture", version "1", script, torch, config (JSON),
  the measured float32-vs-float64 errors.
The decoder reference takes float32(ref.latents) as input, like a C pipeline whose
F32 encoder output feeds its decoder; the test may feed float32(ref.latents)
to its decoder alone, or run the full round trip.

Precision and tolerance advice (C F32 vs these float64 values):
  Weights are BF16, upcast exactly. Each conv sums K = 576 (64*9) products;
  the encoder is 15 convs deep along the residual path, the decoder 20. F32 error
  grows roughly like sqrt(K)*eps per layer through well-conditioned ReLU layers.
  Measured here with torch (printed; f32.* vs ref.*), relative to max|ref|:
  latents 1.8e-6, recon 5.5e-6 (decoded from the same z), PSNR 2e-8.
  The gradient is different: the decoder has ~25 ReLUs, and an F32 forward
  flips the ReLU mask wherever a pre-activation lies within rounding of 0.
  The exact float64 gradient itself jumps by 3% of max|grad| (L2: 5.5e-4
  relative) when z is perturbed by 1e-7 relative; torch F32 vs F64 differs by
  (same z) 0.36% of max at one element, 1.2e-3 in L2, ~440 of 4096 elements beyond 1e-4*M.
  So compare the gradient norm-wise, not element-wise.
  Recommended, M = max|ref| of the tensor:
      latents:         |c - ref| <= 2e-5 * M + 1e-4 * |ref|  per element
      recon:           |c - ref| <= 2e-4 * M + 1e-4 * |ref|  per element
      grad.latents:    ||c - ref||_2 <= 1e-2 * ||ref||_2  and  max|c - ref| <= 0.1 * M
                       (a wrong upsample/conv/clamp backward gives O(1) relative L2)
      psnr:            |c - ref| <= 0.01 dB. At 128x128 the photos give ~22.7 dB
                       (astronaut) and ~26.7 dB (coffee); random weights give 5-7 dB.
  The C round trip's encoder output is F32; feeding it to the decoder instead of
  float32(ref.latents) changes recon by ~1e-6 relative, inside these bounds.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from safetensors.torch import load_file, save_file

SCRIPT = "tests/reference/taef1_ref.py"
SIZE = 128
PHOTOS = ["astronaut.png", "coffee.png"]


def conv(n_in, n_out, **kw):
    return nn.Conv2d(n_in, n_out, 3, padding=1, **kw)


class Clamp(nn.Module):
    def forward(self, x):
        return torch.tanh(x / 3) * 3


class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.conv = nn.Sequential(conv(n_in, n_out), nn.ReLU(), conv(n_out, n_out), nn.ReLU(), conv(n_out, n_out))
        self.skip = nn.Identity()   # n_in == n_out everywhere in TAEF1
        self.fuse = nn.ReLU()

    def forward(self, x):
        return self.fuse(self.conv(x) + self.skip(x))


def encoder(lc=16):
    return nn.Sequential(
        conv(3, 64), Block(64, 64),
        conv(64, 64, stride=2, bias=False), Block(64, 64), Block(64, 64), Block(64, 64),
        conv(64, 64, stride=2, bias=False), Block(64, 64), Block(64, 64), Block(64, 64),
        conv(64, 64, stride=2, bias=False), Block(64, 64), Block(64, 64), Block(64, 64),
        conv(64, lc))


def decoder(lc=16):
    return nn.Sequential(
        Clamp(), conv(lc, 64), nn.ReLU(),
        Block(64, 64), Block(64, 64), Block(64, 64), nn.Upsample(scale_factor=2), conv(64, 64, bias=False),
        Block(64, 64), Block(64, 64), Block(64, 64), nn.Upsample(scale_factor=2), conv(64, 64, bias=False),
        Block(64, 64), Block(64, 64), Block(64, 64), nn.Upsample(scale_factor=2), conv(64, 64, bias=False),
        Block(64, 64), conv(64, 3))


def load_image(path):
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = min(w, h)
    l, t = (w - s) // 2, (h - s) // 2
    im = im.crop((l, t, l + s, t + s)).resize((SIZE, SIZE), Image.BICUBIC)
    a = np.asarray(im, dtype=np.float32) / np.float32(255.0)
    return torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()


def psnr(rec, img):
    mse = ((rec.clamp(0, 1).double() - img.double()) ** 2).mean(dim=(1, 2, 3))
    return 10 * torch.log10(1.0 / mse)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures")
    tdir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "..", "shared", "assets", "taef1")
    pdir = sys.argv[3] if len(sys.argv) > 3 else os.path.join(root, "..", "shared", "assets", "photos")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    enc, dec = encoder(), decoder()
    enc.load_state_dict({k: v.float() for k, v in load_file(os.path.join(tdir, "taef1_encoder.safetensors")).items()},
                        strict=True)
    dec.load_state_dict({k: v.float() for k, v in load_file(os.path.join(tdir, "taef1_decoder.safetensors")).items()},
                        strict=True)
    enc.eval(), dec.eval()
    imgs = torch.stack([load_image(os.path.join(pdir, p)) for p in PHOTOS])
    gen = torch.Generator().manual_seed(3003)
    R = torch.randn(1, 3, SIZE, SIZE, generator=gen).half()

    out = {}
    zin = None   # float32(ref.latents): the decoder input of both runs
    for dt, tag in ((torch.float64, "ref"), (torch.float32, "f32")):
        e, d = encoder().to(dt), decoder().to(dt)
        e.load_state_dict(enc.state_dict()), d.load_state_dict(dec.state_dict())
        with torch.no_grad():
            lat = e(imgs.to(dt))
            if zin is None:
                zin = lat.float()
            rec = d(zin.to(dt))
        z = zin[0:1].to(dt).requires_grad_(True)
        S = (d(z) * R.to(dt)).sum()
        g, = torch.autograd.grad(S, z)
        out[tag] = dict(latents=lat, recon=rec, psnr=psnr(rec, imgs), grad=g, S=S.detach())

    r, f = out["ref"], out["f32"]
    errs = {}
    for k in ("latents", "recon", "grad", "psnr"):
        m = r[k].abs().max().item()
        errs[k] = (r[k] - f[k].double()).abs().max().item() / m
        l2 = ((r[k] - f[k].double()).norm() / r[k].norm()).item()
        print(f"{k:8s} max|ref| {m:10.4g}  max|f32-ref|/max|ref| {errs[k]:.3g}  L2 rel {l2:.3g}")
    print("PSNR (dB) f64:", [round(v, 4) for v in r["psnr"].tolist()], " f32:", [round(v, 4) for v in f["psnr"].tolist()])
    print("latent mean/std:", r["latents"].mean().item(), r["latents"].std().item())

    fx = {"in.images": imgs, "in.R": R,
          "ref.latents": r["latents"].double(), "ref.recon": r["recon"].float(), "ref.psnr": r["psnr"].double(),
          "ref.grad.latents": r["grad"].double(), "ref.S": r["S"].double(),
          "f32.grad.latents": f["grad"].float(), "f32.psnr": f["psnr"].double()}
    fx = {k: v.detach().contiguous() for k, v in fx.items()}
    cfg = dict(photos=PHOTOS, size=SIZE, crop="centre square", resize="PIL BICUBIC", latent_channels=16,
               grad_photo=0, R_seed=3003, weights="../shared/assets/taef1/taef1_{encoder,decoder}.safetensors (BF16)")
    meta = {"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "torch": torch.__version__,
            "config": json.dumps(cfg, sort_keys=True),
            "precision": "ref.*: float64 on the BF16 weights (exact upcast); ref.recon rounded to F32 for size",
            "f32_rel_err": json.dumps({k: float(f"{v:.3g}") for k, v in errs.items()}),
            "tolerance": "M = max|ref|: latents |d| <= 2e-5*M + 1e-4*|ref|; recon |d| <= 2e-4*M + 1e-4*|ref|; "
                         "grad.latents L2: ||d|| <= 1e-2*||ref|| and max|d| <= 0.1*M (ReLU mask flips); psnr 0.01 dB"}
    path = os.path.join(outdir, "taef1_photos.safetensors")
    save_file(fx, path, metadata=meta)
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
