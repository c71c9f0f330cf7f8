"""bench/zimage/torch_zimage_ref.py — peer baseline: a Z-Image LoRA training step in
plain PyTorch, in the style of ../shared/bench/torch_flux_ref.py: the same math as
diffusers' ZImageTransformer2DModel (written out here: patches -> x_embedder,
noise refiner over the image, caption RMSNorm + linear and context refiner, the
joint [image, caption] layers with tanh-gated adaLN, RMS q/k norms, 3-axis RoPE
on adjacent pairs, SwiGLU FFN, final layer), eager SDPA, per-block activation
checkpointing, LoRA (rank r, alpha r) on the attention and feed-forward linears
of every block (to_q, to_k, to_v, to_out.0, w1, w2, w3: what orakul's zimage
plugin targets), fused AdamW on the LoRA parameters, bf16 weights and
activations, random weights at the real size. --compile: torch.compile each
block. Prints one JSON line per run: median s/it over the timed steps after
warm-up, achieved TFLOP/s (3x the forward FLOPs with checkpointing), peak memory.
--check: the forward at a tiny size against diffusers (float64), to show the
math is Z-Image's (needs diffusers; CPU).
Usage: python3 torch_zimage_ref.py [--res 1024] [--txt 512] [--ranks 32] [--steps 6] [--compile] [--check]"""
import argparse, json, math, statistics, time
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

REAL = dict(dim=3840, heads=30, layers=30, refiner=2, cap=2560, cin=16, axes=(32, 48, 48), theta=256.0)
TINY = dict(dim=32, heads=2, layers=2, refiner=1, cap=32, cin=12, axes=(4, 6, 6), theta=256.0)


class LoRALinear(nn.Module):
    def __init__(self, fin, fout, bias, rank, alpha):
        super().__init__()
        self.base = nn.Linear(fin, fout, bias=bias)
        self.base.requires_grad_(False)
        self.rank = rank
        if rank:
            self.down = nn.Parameter(torch.empty(rank, fin))
            self.up = nn.Parameter(torch.zeros(fout, rank))
            nn.init.kaiming_uniform_(self.down, a=math.sqrt(5))
            self.scale = alpha / rank

    def forward(self, x):
        y = self.base(x)
        if self.rank:
            y = y + F.linear(F.linear(x, self.down), self.up) * self.scale
        return y


def rms(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


class Block(nn.Module):
    def __init__(self, c, modulated, rank):
        super().__init__()
        d = c["dim"]; self.h = c["heads"]; hd = d // self.h; f = int(d / 3 * 8)
        L = lambda i, o: LoRALinear(i, o, False, rank, rank)
        self.to_q, self.to_k, self.to_v, self.to_out = L(d, d), L(d, d), L(d, d), L(d, d)
        self.w1, self.w2, self.w3 = L(d, f), L(f, d), L(d, f)
        self.nq, self.nk = nn.Parameter(torch.ones(hd)), nn.Parameter(torch.ones(hd))
        self.n1, self.n2, self.n3, self.n4 = (nn.Parameter(torch.ones(d)) for _ in range(4))
        self.ada = nn.Linear(min(d, 256), 4 * d) if modulated else None

    def forward(self, x, cos, sin, c):
        B, Lq, d = x.shape
        if self.ada is not None:
            s1, g1, s2, g2 = self.ada(c).unsqueeze(1).chunk(4, dim=2)
            g1, g2, s1, s2 = g1.tanh(), g2.tanh(), 1 + s1, 1 + s2
        h = rms(x, self.n1)
        if self.ada is not None:
            h = h * s1
        q = rms(self.to_q(h).unflatten(-1, (self.h, -1)), self.nq)
        k = rms(self.to_k(h).unflatten(-1, (self.h, -1)), self.nk)
        v = self.to_v(h).unflatten(-1, (self.h, -1))

        def rot(t):  # adjacent pairs (view_as_complex), in float32 like diffusers
            tf = t.float().unflatten(-1, (-1, 2))
            a, b = tf[..., 0], tf[..., 1]
            return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2).type_as(t)
        q, k = rot(q), rot(k)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        a = self.to_out(a.transpose(1, 2).reshape(B, Lq, d))
        x = x + (g1 * rms(a, self.n2) if self.ada is not None else rms(a, self.n2))
        h = rms(x, self.n3)
        if self.ada is not None:
            h = h * s2
        f = self.w2(F.silu(self.w1(h)) * self.w3(h))
        return x + (g2 * rms(f, self.n4) if self.ada is not None else rms(f, self.n4))


class ZImage(nn.Module):
    def __init__(self, c, rank):
        super().__init__()
        d = c["dim"]; a = min(d, 256); self.c = c
        self.t1, self.t2 = nn.Linear(256, 1024), nn.Linear(1024, a)
        self.x_emb = nn.Linear(4 * c["cin"], d)
        self.cap_norm = nn.Parameter(torch.ones(c["cap"])); self.cap_emb = nn.Linear(c["cap"], d)
        self.x_pad, self.cap_pad = nn.Parameter(torch.zeros(1, d)), nn.Parameter(torch.zeros(1, d))
        self.noise = nn.ModuleList([Block(c, True, rank) for _ in range(c["refiner"])])
        self.ctx = nn.ModuleList([Block(c, False, rank) for _ in range(c["refiner"])])
        self.layers = nn.ModuleList([Block(c, True, rank) for _ in range(c["layers"])])
        self.f_ada, self.f_lin = nn.Linear(a, d), nn.Linear(d, 4 * c["cin"])
        self.requires_grad_(False)
        for m in self.modules():
            if isinstance(m, LoRALinear) and m.rank:
                m.down.requires_grad_(True); m.up.requires_grad_(True)

    def rope(self, pos, dev):  # pos (L, 3) -> cos, sin (L, 1, hd/2) as RopeEmbedder
        cs, ss = [], []
        for i, ax in enumerate(self.c["axes"]):
            fr = 1.0 / (self.c["theta"] ** (torch.arange(0, ax, 2, dtype=torch.float64, device=dev) / ax))
            ang = (pos[:, i].double()[:, None] * fr[None]).float()
            cs.append(torch.cos(ang)); ss.append(torch.sin(ang))
        return torch.cat(cs, -1)[:, None], torch.cat(ss, -1)[:, None]

    def forward(self, tok, txt, t, hw, ckpt=True):
        """tok (B, N, 4·cin) channel-minor patches, txt (B, T, cap), t = 1 - sigma; returns (B, N, 4·cin)."""
        B, N, _ = tok.shape; T = txt.shape[1]; dev = tok.device; h, w = hw
        Np, Cp = -(-N // 32) * 32, -(-T // 32) * 32
        half = 128
        fr = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=dev) / half)
        arg = (t * 1000.0)[:, None].float() * fr[None]
        c = self.t2(F.silu(self.t1(torch.cat([arg.cos(), arg.sin()], -1).to(tok.dtype))))
        x = self.x_emb(tok)
        x = torch.cat([x, self.x_pad.expand(B, Np - N, -1)], 1)
        y = self.cap_emb(rms(txt, self.cap_norm))
        y = torch.cat([y, self.cap_pad.expand(B, Cp - T, -1)], 1)
        ip = torch.zeros(Np, 3, dtype=torch.long, device=dev)
        k = torch.arange(N, device=dev)
        ip[:N, 0] = Cp + 1; ip[:N, 1] = k // w; ip[:N, 2] = k % w
        cp = torch.zeros(Cp, 3, dtype=torch.long, device=dev); cp[:, 0] = torch.arange(1, Cp + 1, device=dev)
        ic, isn = self.rope(ip, dev); cc, cs = self.rope(cp, dev)
        run = lambda b, *a: checkpoint(b, *a, use_reentrant=False) if ckpt else b(*a)
        for b in self.noise:
            x = run(b, x, ic, isn, c)
        for b in self.ctx:
            y = run(b, y, cc, cs, None)
        u = torch.cat([x, y], 1); uc, us = torch.cat([ic, cc]), torch.cat([isn, cs])
        for b in self.layers:
            u = run(b, u, uc, us, c)
        sc = 1 + self.f_ada(F.silu(c)).unsqueeze(1)
        return self.f_lin(F.layer_norm(u, (u.shape[-1],), eps=1e-6) * sc)[:, :N]


def fwd_flops(c, N, T):
    d = c["dim"]; f = int(d / 3 * 8); Np, Cp = -(-N // 32) * 32, -(-T // 32) * 32
    def blk(L):
        return 2 * L * (4 * d * d + 3 * d * f) + 4 * L * L * d
    return c["refiner"] * (blk(Np) + blk(Cp)) + c["layers"] * blk(Np + Cp)


def run(res, T, rank, steps, compile_blocks):
    c = REAL; dev = "cuda"
    torch.manual_seed(0)
    with torch.device(dev):
        torch.set_default_dtype(torch.bfloat16)
        model = ZImage(c, rank)
        torch.set_default_dtype(torch.float32)
    if compile_blocks:
        for b in list(model.noise) + list(model.ctx) + list(model.layers):
            b.compile()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    hh = ww = res // 16; N = hh * ww

    def step():
        x0 = torch.randn(1, N, 4 * c["cin"], device=dev, dtype=torch.bfloat16)
        noise = torch.randn_like(x0)
        s = torch.sigmoid(torch.randn(1, device=dev))
        xt = (1 - s) * x0 + s * noise
        txt = torch.randn(1, T, c["cap"], device=dev, dtype=torch.bfloat16)
        pred = -model(xt.to(torch.bfloat16), txt, 1 - s, (hh, ww))
        loss = F.mse_loss(pred.float(), (noise - x0).float())
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter(); step(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
    dt = statistics.median(ts)
    fl = fwd_flops(c, N, T)
    out = dict(impl="torch", compiled=compile_blocks, res=res, txt=T, rank=rank, steps=steps,
               params=sum(p.numel() for p in model.parameters()), trainable=sum(p.numel() for p in params),
               s_per_it=round(dt, 4), s_per_it_all=[round(x, 4) for x in ts], fwd_tflop=round(fl / 1e12, 2),
               eff_tflops=round(3 * fl / dt / 1e12, 1), peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2))
    print(json.dumps(out), flush=True)
    del model, opt, params; torch.cuda.empty_cache()


def check():
    """The forward at TINY against diffusers' ZImageTransformer2DModel (float64)."""
    from diffusers import ZImageTransformer2DModel
    c = TINY
    ref = ZImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=c["cin"], dim=c["dim"],
                                   n_layers=c["layers"], n_refiner_layers=c["refiner"], n_heads=c["heads"],
                                   n_kv_heads=c["heads"], cap_feat_dim=c["cap"], axes_dims=list(c["axes"]),
                                   axes_lens=[128, 64, 64]).double()
    g = torch.Generator().manual_seed(1)
    for p in ref.parameters():
        p.data = torch.randn(p.shape, generator=g, dtype=torch.float64) * (0.3 if p.ndim == 2 else 0.2) + (p.ndim == 1)
    m = ZImage(c, 0).double()
    sd = dict(ref.named_parameters())
    def cp(dst, name):
        dst.data.copy_(sd[name].data.reshape(dst.shape))
    cp(m.t1.weight, "t_embedder.mlp.0.weight"); cp(m.t1.bias, "t_embedder.mlp.0.bias")
    cp(m.t2.weight, "t_embedder.mlp.2.weight"); cp(m.t2.bias, "t_embedder.mlp.2.bias")
    cp(m.x_emb.weight, "all_x_embedder.2-1.weight"); cp(m.x_emb.bias, "all_x_embedder.2-1.bias")
    cp(m.cap_norm, "cap_embedder.0.weight"); cp(m.cap_emb.weight, "cap_embedder.1.weight")
    cp(m.cap_emb.bias, "cap_embedder.1.bias"); cp(m.x_pad, "x_pad_token"); cp(m.cap_pad, "cap_pad_token")
    cp(m.f_ada.weight, "all_final_layer.2-1.adaLN_modulation.1.weight")
    cp(m.f_ada.bias, "all_final_layer.2-1.adaLN_modulation.1.bias")
    cp(m.f_lin.weight, "all_final_layer.2-1.linear.weight"); cp(m.f_lin.bias, "all_final_layer.2-1.linear.bias")
    for mine, name in [(m.noise, "noise_refiner"), (m.ctx, "context_refiner"), (m.layers, "layers")]:
        for i, b in enumerate(mine):
            p = f"{name}.{i}."
            for a, n in [("to_q", "attention.to_q"), ("to_k", "attention.to_k"), ("to_v", "attention.to_v"),
                         ("to_out", "attention.to_out.0"), ("w1", "feed_forward.w1"), ("w2", "feed_forward.w2"),
                         ("w3", "feed_forward.w3")]:
                cp(getattr(b, a).base.weight, p + n + ".weight")
            for a, n in [("nq", "attention.norm_q"), ("nk", "attention.norm_k"), ("n1", "attention_norm1"),
                         ("n2", "attention_norm2"), ("n3", "ffn_norm1"), ("n4", "ffn_norm2")]:
                cp(getattr(b, a), p + n + ".weight")
            if b.ada is not None:
                cp(b.ada.weight, p + "adaLN_modulation.0.weight"); cp(b.ada.bias, p + "adaLN_modulation.0.bias")
    H, W, T = 6, 10, 20
    lat = torch.randn(1, c["cin"], H, W, generator=g, dtype=torch.float64)
    txt = torch.randn(1, T, c["cap"], generator=g, dtype=torch.float64)
    t = torch.tensor([0.3], dtype=torch.float64)
    want = ref([lat[0].unsqueeze(1)], t, [txt[0]], return_dict=False)[0][0].squeeze(1)
    tok = lat.reshape(1, c["cin"], H // 2, 2, W // 2, 2).permute(0, 2, 4, 3, 5, 1).reshape(1, -1, 4 * c["cin"])
    got = m(tok, txt, t, (H // 2, W // 2), ckpt=False)
    got = got.reshape(1, H // 2, W // 2, 2, 2, c["cin"]).permute(0, 5, 1, 3, 2, 4).reshape(c["cin"], H, W)
    err = ((got - want).abs().max() / want.abs().max()).item()
    print(json.dumps(dict(check="torch_zimage_ref vs diffusers (tiny, float64)", max_err_rel=err)), flush=True)
    return err < 1e-6


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--res", type=int, default=1024); ap.add_argument("--txt", type=int, default=512)
    ap.add_argument("--ranks", default="32"); ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--compile", action="store_true"); ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        raise SystemExit(0 if check() else 1)
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for r in [int(x) for x in a.ranks.split(",")]:
        run(a.res, a.txt, r, a.steps, a.compile)
