#!/usr/bin/env python3
"""vgg19_ref.py — independent PyTorch reference for the VGG19 perceptual / style
loss (FORMATS.md §6 and "VGG19 for the perceptual loss"): torchvision's
vgg19().features with fixed pseudo-random weights, ImageNet normalisation,
content and style losses on real photos, and the gradient w.r.t. the
predicted image.

Usage:  python3 vgg19_ref.py [OUTDIR] [PHOTOS_DIR] [--weights PATH]
        defaults: tests/fixtures, ../shared/assets/photos
        --weights PATH also writes the generated weights (features.0 .. features.21,
        torchvision layout, F32, 23.5 MB) — NOT committed; the C test can make the
        same file itself (below).
Needs:  torch, torchvision, safetensors, numpy, pillow. CPU, ~20 s. Deterministic.

Why no weights file is committed: the layers the loss needs (conv1_1 .. conv4_2
= features.0 .. features.21) hold 5,865,536 parameters: 23.5 MB in F32, 11.7 MB
in F16: too big to commit (limit 8 MB), and F16 would not be the values the F32
reference used unless the reference ran on F16-rounded weights anyway. Instead
the weights come from a tiny counter-based generator that C reproduces bit for bit:

  splitmix64(z): z += 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
                 z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31)   (mod 2^64)
  For features.<L>.weight (kind 0) / features.<L>.bias (kind 1), element e in
  row-major order:  m = splitmix64((SEED << 48) | (L << 40) | (kind << 32) | e) >> 40
                    (a 24-bit integer), v = (2m - 2^24 + 1) / 2^24 (exact in F32, in (-1, 1));
  weight = (float)v * bound (one F32 multiply, round to nearest even), with
           bound = sqrtf(6.0f / fan_in) in F32 (fan_in = Cin*9; He-uniform, so
           activations keep their scale through the ReLUs); stored in gen.bound.
  bias   = v / 16 (exact).
  SEED = 19. gen.check.<key> holds each tensor's first 8 values (F32) and
  gen.sum.<key> its float64 sum, so a C generator can verify itself.

Inputs: photos centre-cropped square, resized to 64x64 (PIL BICUBIC), RGB [0, 1];
the exact F32 images are stored. pred = [coffee, astronaut], target = [chelsea, coffee].
Loss (FORMATS.md §6; torchvision indices: conv2_1 = 5, conv2_2 = 7, conv3_1 = 10,
conv3_2 = 12, conv4_1 = 19, conv4_2 = 21; features are the ReLU outputs at idx+1):
  x_n = (x - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225] per channel
  content layers conv2_2, conv3_2, conv4_2: per sample sum((Fp - Ft)^2) / (C*H*W)
  style layers conv2_1, conv3_1, conv4_1: G = F F^T / (C*H*W) with F = (C, H*W),
                                          per sample sum((Gp - Gt)^2) / C^2
  total = sum over the 6 layers and both samples, every weight 1 (ai-toolkit's
  1/mean(loss on noise) scalers are not reproduced: they depend on random noise;
  the test recombines ref.loss.<layer> with whatever weights it uses).
  The target branch is a constant (no gradient through it).

Writes OUTDIR/vgg19_perceptual.safetensors:
  in.pred             F32 (2, 3, 64, 64)   predicted images
  in.target           F32 (2, 3, 64, 64)   target images
  ref.loss.<layer>    F64 (2)              per-sample loss, layer in conv2_1 conv2_2
                                           conv3_1 conv3_2 conv4_1 conv4_2
  ref.loss.content / ref.loss.style / ref.loss.total   F64 ()  sums
  ref.grad.pred.content F64 (2, 3, 64, 64) d content / d pred
  ref.grad.pred.style   F64 (2, 3, 64, 64) d style / d pred  (d total = the sum; stored apart
                                           because style is ~1e-4 of content here)
  ref.feat.conv2_1    F64 (1, 8, 32, 32)   features of pred[0] at conv2_1 (ReLU output),
                                           channels 0..7 — to localise a mismatch early
  f32.loss.<layer>, f32.loss.total       F64  the same, torch in float32 (yardstick)
  gen.bound.<L>  F32 ()   bound of features.<L>.weight
  gen.check.features.<L>.weight|bias  F32 (8)   first 8 generated values
  gen.sum.features.<L>.weight|bias    F64 ()    float64 sum of the tensor
__metadata__: magic "orakul-fixture", version "1", script, torch, torchvision, config (JSON).

Precision and tolerance advice (C F32 vs float64 ref.*):
  12 convs with K up to 2304 (256*9) and 4608 (512*9 at conv4_2); Gram sums
  over H*W = 1024 .. 64 products. Measured with torch (printed; f32 vs ref):
  per-layer losses <= 8.4e-7 relative, the conv2_1 features 9e-7 of max, both
  gradients 1.7e-6 of max (L2 1.5e-6). ReLU mask flips can make a gradient
  jump locally (see taef1_ref.py); none showed here, but keep a norm-wise check.
  Recommended, M = max|ref| of the tensor:
      losses:  |c - ref| <= 2e-5 * |ref|   (each layer, each sample, and the sums)
      feat:    |c - ref| <= 2e-5 * M + 1e-4 * |ref|
      grads:   ||c - ref||_2 <= 1e-3 * ||ref||_2  and  max|c - ref| <= 1e-2 * M
  A wrong normalisation, layer index, Gram scale or missing ReLU moves the
  losses by >= 1e-2 relative.
"""
import json
import os
import sys

import numpy as np
import torch
import torchvision
from PIL import Image
from safetensors.torch import save_file

SCRIPT = "tests/reference/vgg19_ref.py"
SEED = 19
SIZE = 64
CONVS = [0, 2, 5, 7, 10, 12, 14, 16, 19, 21]
CONTENT = {"conv2_2": 7, "conv3_2": 12, "conv4_2": 21}
STYLE = {"conv2_1": 5, "conv3_1": 10, "conv4_1": 19}
LAYERS = ["conv2_1", "conv2_2", "conv3_1", "conv3_2", "conv4_1", "conv4_2"]
PRED, TARGET = ["coffee.png", "astronaut.png"], ["chelsea.png", "coffee.png"]
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def splitmix64(z):
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def gen_tensor(L, kind, shape):
    n = int(np.prod(shape))
    base = (np.uint64(SEED) << np.uint64(48)) | (np.uint64(L) << np.uint64(40)) | (np.uint64(kind) << np.uint64(32))
    m = (splitmix64(base | np.arange(n, dtype=np.uint64)) >> np.uint64(40)).astype(np.int64)
    v = ((2 * m - (1 << 24) + 1).astype(np.float64) / float(1 << 24)).astype(np.float32)   # exact
    if kind == 0:
        bound = np.sqrt(np.float32(6.0) / np.float32(shape[1] * 9), dtype=np.float32)
        w = (v * bound).astype(np.float32)
    else:
        bound = None
        w = v / np.float32(16.0)
    return torch.from_numpy(w.reshape(shape)), bound


def load_image(path):
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = min(w, h)
    l, t = (w - s) // 2, (h - s) // 2
    im = im.crop((l, t, l + s, t + s)).resize((SIZE, SIZE), Image.BICUBIC)
    return torch.from_numpy((np.asarray(im, dtype=np.float32) / np.float32(255.0)).copy()).permute(2, 0, 1).contiguous()


def features(net, x, dtype):
    mean = torch.tensor(MEAN, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=dtype).view(1, 3, 1, 1)
    h = (x - mean) / std
    out = {}
    want = {v + 1: k for k, v in {**CONTENT, **STYLE}.items()}   # ReLU outputs
    for i, layer in enumerate(net):
        h = layer(h)
        if i in want:
            out[want[i]] = h
        if i == 22:
            break
    return out


def gram(f):
    Bn, C, H, W = f.shape
    F_ = f.reshape(Bn, C, H * W)
    return torch.matmul(F_, F_.transpose(1, 2)) / (C * H * W)


def losses(net, pred, target, dtype):
    fp = features(net, pred, dtype)
    with torch.no_grad():
        ft = features(net, target, dtype)
    res = {}
    for k in CONTENT:
        res[k] = ((fp[k] - ft[k]) ** 2).sum(dim=(1, 2, 3)) / fp[k][0].numel()
    for k in STYLE:
        C = fp[k].shape[1]
        res[k] = ((gram(fp[k]) - gram(ft[k])) ** 2).sum(dim=(1, 2)) / (C * C)
    return res, fp


def main():
    args = [a for a in sys.argv[1:]]
    wpath = None
    if "--weights" in args:
        i = args.index("--weights")
        wpath = args[i + 1]
        del args[i:i + 2]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    outdir = args[0] if len(args) > 0 else os.path.join(root, "tests", "fixtures")
    pdir = args[1] if len(args) > 1 else os.path.join(root, "..", "shared", "assets", "photos")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)

    sd, fx = {}, {}
    net32 = torchvision.models.vgg19(weights=None).features
    for L in CONVS:
        conv = net32[L]
        w, bound = gen_tensor(L, 0, tuple(conv.weight.shape))
        b, _ = gen_tensor(L, 1, tuple(conv.bias.shape))
        sd[f"features.{L}.weight"], sd[f"features.{L}.bias"] = w, b
        fx[f"gen.bound.{L}"] = torch.tensor(bound, dtype=torch.float32)
        for key, t in ((f"features.{L}.weight", w), (f"features.{L}.bias", b)):
            fx[f"gen.check.{key}"] = t.flatten()[:8].clone()
            fx[f"gen.sum.{key}"] = t.double().sum()
    # the keys are torchvision's full-model keys: load them into a whole vgg19 to prove the layout
    full = torchvision.models.vgg19(weights=None)
    inc = full.load_state_dict(sd, strict=False)
    assert not inc.unexpected_keys and all(not k.startswith("features.") or int(k.split(".")[1]) > 21
                                           for k in inc.missing_keys), inc
    fsd = {k[len("features."):]: v for k, v in sd.items()}

    pred = torch.stack([load_image(os.path.join(pdir, p)) for p in PRED])
    target = torch.stack([load_image(os.path.join(pdir, p)) for p in TARGET])
    fx["in.pred"], fx["in.target"] = pred, target

    res = {}
    for dt, tag in ((torch.float64, "ref"), (torch.float32, "f32")):
        net = torchvision.models.vgg19(weights=None).features[:23]
        net.load_state_dict(fsd)
        net = net.to(dt).eval().requires_grad_(False)
        p = pred.to(dt).requires_grad_(True)
        ls, fp = losses(net, p, target.to(dt), dt)
        content = sum(ls[k].sum() for k in CONTENT)
        style = sum(ls[k].sum() for k in STYLE)
        total = content + style
        g_style, = torch.autograd.grad(style, p, retain_graph=True)
        g_content, = torch.autograd.grad(content, p)
        res[tag] = dict(ls=ls, content=content.detach(), style=style.detach(), total=total.detach(),
                        g_style=g_style, g_content=g_content, feat=fp["conv2_1"].detach()[0:1, 0:8])

    r, f = res["ref"], res["f32"]
    for k in LAYERS:
        fx[f"ref.loss.{k}"] = r["ls"][k].detach().double()
        fx[f"f32.loss.{k}"] = f["ls"][k].detach().double()
        rel = ((r["ls"][k] - f["ls"][k].double()).abs() / r["ls"][k].abs()).max().item()
        print(f"{k}: ref {r['ls'][k].tolist()}  f32 rel err {rel:.3g}")
    for k in ("content", "style", "total"):
        fx[f"ref.loss.{k}"] = r[k].double()
    fx["f32.loss.total"] = f["total"].double()
    fx["ref.grad.pred.content"] = r["g_content"].double()
    fx["ref.grad.pred.style"] = r["g_style"].double()
    fx["ref.feat.conv2_1"] = r["feat"].double()
    errs = {}
    for k in ("g_content", "g_style", "feat"):
        d = r[k] - f[k].double()
        errs[k] = dict(max_rel=float(f"{(d.abs().max() / r[k].abs().max()).item():.3g}"),
                       l2_rel=float(f"{(d.norm() / r[k].norm()).item():.3g}"))
        print(f"{k}: max|ref| {r[k].abs().max().item():.4g}  f32 err {errs[k]}")
    print(f"total: ref {r['total'].item():.12g}  f32 {f['total'].item():.12g}  "
          f"(content {r['content'].item():.6g}, style {r['style'].item():.6g})")

    fx = {k: v.detach().contiguous() for k, v in fx.items()}
    cfg = dict(seed=SEED, size=SIZE, pred=PRED, target=TARGET, crop="centre square", resize="PIL BICUBIC",
               content=CONTENT, style=STYLE, mean=MEAN, std=STD, convs=CONVS,
               generator="splitmix64 counter, see script header", weights_in_fixture=False)
    meta = {"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "torch": torch.__version__,
            "torchvision": torchvision.__version__, "config": json.dumps(cfg, sort_keys=True),
            "precision": "ref.*: float64 torchvision forward/autograd on the F32 generated weights and F32 images",
            "f32_err": json.dumps(errs, sort_keys=True),
            "tolerance": "losses |d| <= 2e-5*|ref|; feat |d| <= 2e-5*M + 1e-4*|ref|; "
                         "grads ||d||2 <= 1e-3*||ref||2 and max|d| <= 1e-2*M"}
    path = os.path.join(outdir, "vgg19_perceptual.safetensors")
    save_file(fx, path, metadata=meta)
    print(f"{path}: {os.path.getsize(path)} bytes")
    if wpath:
        save_file({k: v.contiguous() for k, v in sd.items()}, wpath,
                  metadata={"magic": "orakul-fixture", "version": "1", "script": SCRIPT, "format": "torchvision",
                            "note": "vgg19().features.0..21, generated (see script header)"})
        print(f"{wpath}: {os.path.getsize(wpath)} bytes")


if __name__ == "__main__":
    main()
