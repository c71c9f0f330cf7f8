#!/usr/bin/env python3
"""quickstart_base.py — fits a tiny pre-trained base model for the quickstart
(issue #32 point 9), so that its LoRA can be a short fine-tune of a model that
already draws 64x64 pictures instead of random weights. Not used by
configs/quickstart.yaml yet: docs/DECISIONS.md ("Quickstart") has what its
LoRA fine-tune measured. orakul opens the file as model.name_or_path (any
FLUX.1 size, BFL keys) with model_kwargs {codec: pixel, pixel_patch: 4}.

The model is FLUX.1-shaped (tests/reference/flux_ref.py builds it with BFL's
module names, so the state_dict keys are the BFL checkpoint keys orakul loads):
hidden 96, 2 heads, 2 double + 2 single blocks, context 32, vec 16, no guidance,
48 token channels (orakul's pixel codec at pixel_patch 4: [0,1] -> [-1,1],
"b c (h 4) (w 4) -> b (h w) (c 4 4)"). It is trained from scratch, every weight,
on the conditioning the quickstart trains with (zero text embeddings, zero
pooled vector, text ids 0, image ids (0, row, col)), by rectified flow as orakul
trains (x_t = (1 - t) x0 + t noise, target noise - x0, t = sigmoid(randn)).

Its pictures are OTHER pictures than the quickstart's three photos (astronaut,
chelsea, coffee are excluded): the public-domain / CC0 colour and grey images of
scikit-image's sample data (Debian package python3-skimage 0.19.3), several
square crops of each with their mirror images, at 64x64. So the base draws
photo-like pictures (textures in their palettes), but not the quickstart's
photos.

Usage:  python3 tools/quickstart_base.py SKIMAGE_DATA_DIR [OUT]
        (defaults: AdamW lr 2e-3, batch 16, a 1500-step warm-up + cosine lr
        schedule stopped after step 500: about 10 CPU-minutes, the file
        measured in docs/DECISIONS.md. --save-every N writes OUT_<step>.)
  SKIMAGE_DATA_DIR: .../skimage/data of python3-skimage 0.19.3, e.g. after
      apt-get download python3-skimage && dpkg-deb -x python3-skimage_*.deb x
      -> x/usr/lib/python3/dist-packages/skimage/data
  OUT: default assets/quickstart_base.safetensors (2 MB, F16)
Needs torch, numpy, pillow, safetensors; CPU, deterministic for one torch build
and thread count (torch.manual_seed; 1 thread).
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from flux_ref import Flux  # noqa: E402

# scikit-image sample images and their licences (skimage.data docstrings):
# camera CC0 (Lav Varshney); rocket, hubble_deep_field public domain (NASA);
# coins public domain (Walters Art Museum); retina CC0 (Mikael Häggström);
# brick, grass, gravel CC0 (ambientCG textures); horse public domain;
# moon, text, page: no copyright restrictions per skimage.
IMAGES = ["rocket.jpg", "hubble_deep_field.jpg", "retina.jpg", "camera.png", "coins.png", "brick.png",
          "grass.png", "gravel.png", "moon.png", "horse.png", "text.png", "page.png"]
EXCLUDED = {"astronaut.png", "chelsea.png", "coffee.png"}  # the quickstart's own photos
RES, PATCH = 64, 4

HEAD_DIM = 48
A0 = HEAD_DIM // 8 - (HEAD_DIM // 8) % 2          # flux_variants.c flux_cfg_derive
REST = (HEAD_DIM - A0) // 2 - ((HEAD_DIM - A0) // 2) % 2
CFG = dict(version=1, in_channels=3 * PATCH * PATCH, hidden_size=96, num_heads=2, depth=2, depth_single_blocks=2,
           context_in_dim=32, vec_in_dim=16, mlp_ratio=4.0, axes_dim=[HEAD_DIM - 2 * REST, REST, REST],
           theta=10000, qkv_bias=True, guidance_embed=False)
CTX_LEN = 8


def crops(img):
    """Square crops of a PIL image: the centre one, the two ends of its long
    side, and a centre one at 2/3 of the short side; each at RESxRES (area /
    Lanczos as the dataset resizes is not needed: any good resize will do)."""
    w, h = img.size
    s = min(w, h)
    boxes = [((w - s) // 2, (h - s) // 2, s), (0, 0, s), (w - s, h - s, s)]
    t = (2 * s) // 3
    boxes.append(((w - t) // 2, (h - t) // 2, t))
    out = []
    for x, y, sz in boxes:
        c = img.crop((x, y, x + sz, y + sz)).resize((RES, RES), Image.LANCZOS)
        out.append(c)
        out.append(c.transpose(Image.FLIP_LEFT_RIGHT))
    return out


def load_set(data_dir):
    pics = []
    for name in IMAGES:
        assert name not in EXCLUDED
        img = Image.open(os.path.join(data_dir, name)).convert("RGB")
        pics += crops(img)
    x = np.stack([np.asarray(p, dtype=np.float32) / 255.0 for p in pics])  # (n, 64, 64, 3)
    x = torch.from_numpy(x).permute(0, 3, 1, 2) * 2 - 1                       # (n, 3, 64, 64) in [-1, 1]
    return x


def pack(x):
    """(B, 3, H, W) -> (B, H/4 * W/4, 48), channel-major patches (orakul's order)."""
    B, C, H, W = x.shape
    x = x.reshape(B, C, H // PATCH, PATCH, W // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // PATCH) * (W // PATCH), C * PATCH * PATCH)


def unpack(t, H=RES, W=RES):
    B = t.shape[0]
    x = t.reshape(B, H // PATCH, W // PATCH, 3, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, 3, H, W)


def ids(B):
    g = RES // PATCH
    img_ids = torch.zeros(g, g, 3)
    img_ids[..., 1] = torch.arange(g, dtype=torch.float32)[:, None]
    img_ids[..., 2] = torch.arange(g, dtype=torch.float32)[None, :]
    return img_ids.reshape(1, g * g, 3).repeat(B, 1, 1), torch.zeros(B, CTX_LEN, 3)


def predict(model, xt, t):
    B = xt.shape[0]
    img_ids, txt_ids = ids(B)
    txt = torch.zeros(B, CTX_LEN, CFG["context_in_dim"])
    y = torch.zeros(B, CFG["vec_in_dim"])
    return model(xt, img_ids, txt, txt_ids, t, y, None)


def init(model):
    """PyTorch's default init, then adaLN-zero (DiT): every modulation and the
    final linear start at zero, so the model starts as the identity per block."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".scale"):
                p.fill_(1.0)
            if (".lin." in name and "_mod" in name) or ("modulation.lin." in name) or name.startswith("final_layer"):
                p.zero_()


@torch.no_grad()
def sample(model, n, seed, steps=8):
    """A flowmatch Euler sampler as orakul's (a preview only: t from 1 to 0,
    shifted by exp(0.5), FLUX's resolution shift at 256 tokens or fewer)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, (RES // PATCH) ** 2, CFG["in_channels"], generator=g)
    ts = torch.linspace(1, 0, steps + 1)
    mu = math.exp(0.5)
    ts = mu / (mu + (1 / ts.clamp(min=1e-9) - 1))
    ts[-1] = 0
    for i in range(steps):
        t = torch.full((n,), float(ts[i]))
        v = predict(model, x, t)
        x = x + (ts[i + 1] - ts[i]) * v
    return unpack(x).clamp(-1, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out", nargs="?", default=os.path.join(HERE, "..", "assets", "quickstart_base.safetensors"))
    ap.add_argument("--steps", type=int, default=1500, help="length of the lr schedule")
    ap.add_argument("--stop", type=int, default=500, help="write OUT after this step (0: at the end)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--preview", default="")
    ap.add_argument("--save-every", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)  # 2 threads ran 20x slower on a shared 2-core machine
    torch.manual_seed(a.seed)
    data = load_set(a.data)
    tokens = pack(data)
    print(f"{len(IMAGES)} images, {tokens.shape[0]} crops, tokens {tuple(tokens.shape[1:])}", flush=True)
    model = Flux(CFG)
    init(model)
    print(f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * (0.5 * (1 + math.cos(math.pi * s / a.steps)) * 0.9 + 0.1))
    t0 = time.time()
    avg = None
    for step in range(a.steps):
        idx = torch.randint(0, tokens.shape[0], (a.batch,))
        x0 = tokens[idx]
        noise = torch.randn_like(x0)
        t = torch.sigmoid(torch.randn(a.batch))
        xt = (1 - t[:, None, None]) * x0 + t[:, None, None] * noise
        loss = F.mse_loss(predict(model, xt, t), noise - x0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        avg = loss.item() if avg is None else 0.98 * avg + 0.02 * loss.item()
        if step % 100 == 0 or step == a.steps - 1:
            print(f"step {step} loss {avg:.4f} {time.time() - t0:.0f}s", flush=True)
        if a.save_every and step and step % a.save_every == 0:
            save(model, a, a.out.replace(".safetensors", f"_{step}.safetensors"), step)
        if a.stop and step == a.stop:
            break
    save(model, a, a.out, a.stop or a.steps)
    print(f"wrote {a.out}", flush=True)
    if a.preview:
        s = sample(model, 8, 42)
        grid = ((s + 1) / 2 * 255).round().byte().permute(0, 2, 3, 1).numpy()
        Image.fromarray(np.concatenate(list(grid), axis=1)).save(a.preview)


def save(model, a, path, steps):
    sd = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    meta = {"script": "tools/quickstart_base.py", "torch": torch.__version__, "steps": str(steps),
            "batch": str(a.batch), "lr": str(a.lr), "seed": str(a.seed), "images": ",".join(IMAGES),
            "note": "FLUX.1-shaped tiny base for configs/quickstart.yaml; BFL keys; not trained on the "
                    "quickstart's photos"}
    save_file(sd, path, metadata=meta)


if __name__ == "__main__":
    main()
