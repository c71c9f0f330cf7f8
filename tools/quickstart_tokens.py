#!/usr/bin/env python3
"""quickstart_tokens.py — a PyTorch probe of the quickstart at fewer tokens
(issue #32 point 9): does a 32x32 (8x8 tokens at pixel_patch 4) run on the
random tiny FLUX.1-shaped base learn the three photos' layout in a CPU budget?
Measured with it: docs/DECISIONS.md ("Quickstart"). Not used by any config.

The model is tests/reference/flux_ref.py's FLUX.1 at the quickstart's size
(hidden 96, 2 heads, 2 + 2 blocks, 48 token channels), with orakul's preset
init (linears and biases ~ N(0, 1/(3 fan_in)), fan_in = hidden for biases,
norm scales 1; not orakul's random stream, the same law). Trained on
assets/quickstart/*.png resized to RESxRES (Lanczos), zero text and pooled
conditioning, rectified flow as orakul (x_t = (1-t) x0 + t noise, target
noise - x0), t = sigmoid(randn) (--cs balanced) or its content_or_style:
content law (the quantile 1 - u^3), AdamW (wd 0), grad-norm clip 1.
  default:  a LoRA (alpha = rank: scale 1; down kaiming-uniform, up 0) on the
            linears of double_blocks / single_blocks, as orakul's default;
  --all:    a LoRA on every linear (orakul: network_kwargs.only_if_contains
            [double_blocks, single_blocks, final_layer, img_in, txt_in,
            time_in, vector_in]: the same 34 modules);
  --wonly:  the weights of every linear directly (no biases, no norm scales;
            no orakul mode);
  --full:   every weight, biases and norm scales included (no orakul mode).
Every --every steps: 6 samples (orakul's 8-step Euler sampler, shift exp(0.5),
seed 42) and each photo's best PSNR over them; a PNG (samples over photos,
4x nearest) in --outdir.
Usage: python3 tools/quickstart_tokens.py [--res 32] [--all|--full] [--rank R]
       [--lr LR] [--batch B] [--cs content|balanced] [--steps N] [--tag T]
Needs torch, numpy, pillow; CPU, one thread (2 ran 20x slower on a loaded
2-core machine).
"""
import argparse, math, os, sys, time
import numpy as np, torch, torch.nn.functional as F
from PIL import Image
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from flux_ref import Flux
ap = argparse.ArgumentParser()
ap.add_argument("--res", type=int, default=32); ap.add_argument("--rank", type=int, default=32)
ap.add_argument("--lr", type=float, default=5e-3); ap.add_argument("--steps", type=int, default=1000)
ap.add_argument("--batch", type=int, default=1); ap.add_argument("--cs", default="content")
ap.add_argument("--full", action="store_true"); ap.add_argument("--all", action="store_true"); ap.add_argument("--wonly", action="store_true"); ap.add_argument("--every", type=int, default=250)
ap.add_argument("--tag", default="probe"); ap.add_argument("--outdir", default="."); ap.add_argument("--nsamp", type=int, default=6, help="3 or more")
a = ap.parse_args()
torch.set_num_threads(1); torch.manual_seed(0)
RES, PATCH = a.res, 4
HEAD_DIM = 48
A0 = HEAD_DIM // 8 - (HEAD_DIM // 8) % 2
REST = (HEAD_DIM - A0) // 2 - ((HEAD_DIM - A0) // 2) % 2
CFG = dict(version=1, in_channels=48, hidden_size=96, num_heads=2, depth=2, depth_single_blocks=2,
           context_in_dim=32, vec_in_dim=16, mlp_ratio=4.0, axes_dim=[HEAD_DIM - 2 * REST, REST, REST],
           theta=10000, qkv_bias=True, guidance_embed=False)
CTX = 8
names = ["astronaut", "chelsea", "coffee"]
imgs = [Image.open(os.path.join(ROOT, "assets", "quickstart", n + ".png")).convert("RGB").resize((RES, RES), Image.LANCZOS) for n in names]
refs = np.stack([np.asarray(i, dtype=np.float32) for i in imgs])  # 0..255
x = torch.from_numpy(refs / 255.0).permute(0, 3, 1, 2) * 2 - 1
def pack(x):
    B, C, H, W = x.shape
    x = x.reshape(B, C, H // PATCH, PATCH, W // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // PATCH) * (W // PATCH), C * PATCH * PATCH)
def unpack(t):
    B = t.shape[0]
    x = t.reshape(B, RES // PATCH, RES // PATCH, 3, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, 3, RES, RES)
tokens = pack(x)
g = RES // PATCH
img_ids1 = torch.zeros(g, g, 3); img_ids1[..., 1] = torch.arange(g)[:, None].float(); img_ids1[..., 2] = torch.arange(g)[None, :].float()
img_ids1 = img_ids1.reshape(1, g * g, 3)
model = Flux(CFG)
gen = torch.Generator().manual_seed(1)
with torch.no_grad():
    for n, p in model.named_parameters():
        if n.endswith(".scale"): p.fill_(1.0); continue
        fan = p.shape[1] if p.ndim == 2 else 96
        p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(3 * fan))
params = []
if a.full:
    params = list(model.parameters())
elif a.wonly:
    params = [p for n, p in model.named_parameters() if n.endswith('.weight') and p.ndim == 2]
    for n, p in model.named_parameters(): p.requires_grad_(n.endswith('.weight') and p.ndim == 2)
else:
    for p in model.parameters(): p.requires_grad_(False)
    lora = []
    for n, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and (a.all or n.startswith("double_blocks.") or n.startswith("single_blocks.")):
            r = a.rank
            down = torch.nn.Parameter(torch.empty(r, m.in_features)); torch.nn.init.kaiming_uniform_(down, a=math.sqrt(5))
            up = torch.nn.Parameter(torch.zeros(m.out_features, r))
            params += [down, up]
            m.register_forward_hook(lambda mod, inp, out, d=down, u=up: out + F.linear(F.linear(inp[0], d), u))
    print("lora modules", len(params) // 2, "params", sum(p.numel() for p in params))
def predict(xt, t):
    B = xt.shape[0]
    return model(xt, img_ids1.repeat(B, 1, 1), torch.zeros(B, CTX, 32), torch.zeros(B, CTX, 3), t, torch.zeros(B, 16), None)
@torch.no_grad()
def sample(n, seed, steps=8):
    gg = torch.Generator().manual_seed(seed)
    xs = torch.randn(n, g * g, 48, generator=gg)
    ts = torch.linspace(1, 0, steps + 1); mu = math.exp(0.5)
    ts = mu / (mu + (1 / ts.clamp(min=1e-9) - 1)); ts[-1] = 0
    for i in range(steps):
        v = predict(xs, torch.full((n,), float(ts[i])))
        xs = xs + (ts[i + 1] - ts[i]) * v
    return unpack(xs).clamp(-1, 1)
def evaluate(step):
    s = sample(a.nsamp, 42)
    u8 = ((s + 1) / 2 * 255).round().permute(0, 2, 3, 1).numpy()
    ps = np.zeros((a.nsamp, 3))
    for i in range(a.nsamp):
        for r in range(3):
            mse = ((u8[i] - np.round(refs[r])) ** 2).mean(); ps[i, r] = 10 * math.log10(255 ** 2 / mse)
    big = np.concatenate([np.concatenate(list(u8.astype(np.uint8)), axis=1), np.concatenate(list(np.round(refs).astype(np.uint8)) + [np.zeros_like(refs[0], dtype=np.uint8)] * (a.nsamp - 3), axis=1)], axis=0)
    Image.fromarray(big).resize((big.shape[1] * 4, big.shape[0] * 4), Image.NEAREST).save(os.path.join(a.outdir, f"{a.tag}_{step}.png"))
    print(f"step {step} best per photo " + " ".join(f"{names[r]} {ps[:, r].max():.2f}" for r in range(3)) + f"  argmax {ps.argmax(1).tolist()}", flush=True)
opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
srt = None
evaluate(0)
t0 = time.time(); avg = None
for step in range(1, a.steps + 1):
    idx = torch.randint(0, 3, (a.batch,))
    x0 = tokens[idx]; noise = torch.randn_like(x0)
    if a.cs == "content":
        u = torch.rand(a.batch); q = 1 - u ** 3
        t = torch.sigmoid(math.sqrt(2) * torch.erfinv(2 * q.clamp(1e-6, 1 - 1e-6) - 1))
    else:
        t = torch.sigmoid(torch.randn(a.batch))
    xt = (1 - t[:, None, None]) * x0 + t[:, None, None] * noise
    loss = F.mse_loss(predict(xt, t), noise - x0)
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step()
    avg = loss.item() if avg is None else 0.98 * avg + 0.02 * loss.item()
    if step % 50 == 0: print(f"step {step} loss {avg:.4f} {time.time() - t0:.0f}s", flush=True)
    if step % a.every == 0: evaluate(step)
