#!/usr/bin/env python3
"""bench_torch.py — torchvision's VGG19 timed the way bench_vgg19 times ours, on the
same weights and inputs (bench_vgg19's DIR/vgg19_bench_in.safetensors), plus the
comparison table and a numerical cross-check against our outputs
(DIR/vgg19_bench_out.safetensors).

Usage: bench_torch.py OURS.jsonl DIR [--warmup 3] [--repeats 15]

torch side, both variants (see bench_vgg19.c):
  features  torchvision.models.vgg19(weights=None).features[:23] (conv1_1 .. relu4_2),
            weights frozen (requires_grad False), input requires_grad,
            loss = F.mse_loss(feat.float(), target.float()), torch.autograd.grad(loss, x).
  loss      the perceptual loss as the plugin computes it: x0p = x_t - t*v,
            x0p*(1/std) + (-mean/std), VGG on x0p (recorded) and on x0 (no_grad),
            content = mse(Fp, Ft) at conv2_2/3_2/4_2, style = mse(Gp, Gt) with
            G = F Fᵀ/(C·H·W) in float32 at conv2_1/3_1/4_1, + mse(v, target).
dtype: the SAME as ours — module and inputs in bfloat16 (model.to(torch.bfloat16)),
not autocast; Grams in float32 as ours. torch.backends.cudnn.benchmark = True
(cuDNN picks its fastest conv algorithms; the warm-up runs the search). NCHW.
Timing: warm-up runs, then each repeat is one whole step between two
torch.cuda.synchronize() calls on a host clock (as ours); median, min, max.
Peak memory: torch.cuda.max_memory_allocated() over one step run after the timing
(reset_peak_memory_stats() first), weights and inputs resident and counted (ours:
the allocator's high-water mark over all steps, weights and inputs included). Weights: ours are F32 and cast to bf16 per conv; torch's are bf16.
Numerical check: the same step in float32 (TF32 off) is the yardstick; printed are
ours-vs-f32 and torch-bf16-vs-f32 for the loss (relative) and the input gradient
(relative L2, cosine). Both bf16 implementations should land at ~1e-2 or better.
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

CONVS = [0, 2, 5, 7, 10, 12, 14, 16, 19, 21]
CONTENT = {7: "conv2_2", 12: "conv3_2", 21: "conv4_2"}   # conv index -> name; ReLU output at idx+1
STYLE = {5: "conv2_1", 10: "conv3_1", 19: "conv4_1"}
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def arg(name, default):
    if name in sys.argv:
        return int(sys.argv[sys.argv.index(name) + 1])
    return default


def build_vgg(weights, dtype, dev):
    import torchvision
    net = torchvision.models.vgg19(weights=None).features[:23]
    if weights is not None:
        sd = {k[len("features."):]: v for k, v in weights.items() if k.startswith("features.")}
        missing, unexpected = net.load_state_dict(sd, strict=False)
        if unexpected or any(k.split(".")[0] in {str(c) for c in CONVS} for k in missing):
            raise SystemExit("bench_torch: weights do not fit features[:23]: missing %s unexpected %s"
                             % (missing, unexpected))
    net = net.to(dev, dtype).eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def feats(net, x, want):
    out = {}
    last = max(want)
    for i, layer in enumerate(net):
        x = layer(x)
        if i - 1 in want:          # the ReLU after conv idx
            out[i - 1] = x
        if i == last + 1:
            break
    return out


def gram(f):
    b, c, h, w = f.shape
    f = f.reshape(b, c, h * w).float()
    return torch.matmul(f, f.transpose(1, 2)) / (c * h * w)


def make_steps(net, inp, dtype, dev):
    x = inp["in.x"].to(dev, dtype)
    tf = inp["in.feat_target"].to(dev, dtype)
    v = inp["in.v"].to(dev, dtype)
    tg = inp["in.target"].to(dev, dtype)
    xt = inp["in.x_t"].to(dev, dtype)
    x0 = inp["in.x0"].to(dev, dtype)
    t = float(inp["in.t"].reshape(-1)[0])
    mul = torch.tensor([1.0 / s for s in STD], dtype=torch.float32).view(1, 3, 1, 1).to(dev, dtype)
    add = torch.tensor([-m / s for m, s in zip(MEAN, STD)], dtype=torch.float32).view(1, 3, 1, 1).to(dev, dtype)

    def features_step():
        xl = x.detach().requires_grad_(True)
        f = net(xl)
        loss = F.mse_loss(f.float(), tf.float())   # an F32 scalar, as ours (mse accumulates in F32)
        g, = torch.autograd.grad(loss, xl)
        return loss, g

    layers = set(CONTENT) | set(STYLE)

    def loss_step():
        vl = v.detach().requires_grad_(True)
        x0p = xt - t * vl
        fp = feats(net, x0p * mul + add, layers)
        with torch.no_grad():
            ft = feats(net, x0 * mul + add, layers)
        loss = F.mse_loss(vl.float(), tg.float())
        for i in CONTENT:
            loss = loss + F.mse_loss(fp[i].float(), ft[i].float())
        for i in STYLE:
            loss = loss + F.mse_loss(gram(fp[i]), gram(ft[i]))
        g, = torch.autograd.grad(loss, vl)
        return loss, g

    return {"vgg19_features": features_step, "perceptual_loss": loss_step}


def time_step(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    med = ts[len(ts) // 2] if len(ts) % 2 else 0.5 * (ts[len(ts) // 2 - 1] + ts[len(ts) // 2])
    return med, ts[0], ts[-1]


def rel_l2(a, b):
    a = a.double().flatten()
    b = b.double().flatten()
    return float((a - b).norm() / b.norm()), float(torch.dot(a, b) / (a.norm() * b.norm()))


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    ours_path, d = sys.argv[1], sys.argv[2]
    warmup, repeats = arg("--warmup", 3), arg("--repeats", 15)
    dev = "cuda"
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch %s, torchvision %s, cuDNN %s, %s" % (torch.__version__, __import__("torchvision").__version__,
                                                   torch.backends.cudnn.version(), torch.cuda.get_device_name()))
    ours = {}
    if os.path.exists(ours_path):
        with open(ours_path) as fh:
            for line in fh:
                if line.startswith("{"):
                    r = json.loads(line)
                    ours[r["bench"]] = r
    inp = None
    in_path = os.path.join(d, "vgg19_bench_in.safetensors")
    try:
        from safetensors.torch import load_file
        inp = load_file(in_path)
    except Exception as e:  # no file or no safetensors: random torchvision weights, no cross-check
        print("bench_torch: cannot read %s (%s): timing torchvision's own random init, no numerical check" % (in_path, e))
    if inp is None:
        g = torch.Generator().manual_seed(0)
        S = int(ours.get("vgg19_features", {}).get("size", 512))
        rnd = lambda *s: torch.rand(*s, generator=g)
        inp = {"in.x": rnd(1, 3, S, S), "in.feat_target": rnd(1, 512, S // 8, S // 8), "in.v": rnd(1, 3, S, S) - 0.5,
               "in.target": rnd(1, 3, S, S), "in.x_t": rnd(1, 3, S, S), "in.x0": rnd(1, 3, S, S),
               "in.t": torch.tensor([0.6])}
        weights = None
    else:
        weights = {k: v for k, v in inp.items() if k.startswith("features.")}

    net = build_vgg(weights, torch.bfloat16, dev)
    steps = make_steps(net, inp, torch.bfloat16, dev)
    rows = {}
    for name, fn in steps.items():
        med, mn, mx = time_step(fn, warmup, repeats)
        # peak of one more step, after the timing (cuDNN's benchmark search in the
        # warm-up allocates trial workspaces that a training step does not keep)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        loss, g = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**20
        rows[name] = {"bench": name, "impl": "torch", "dtype": "bf16 (module and inputs), f32 Grams",
                      "warmup": warmup, "repeats": repeats, "median_ms": med, "min_ms": mn, "max_ms": mx,
                      "peak_mib": peak, "loss": float(loss), "grad_l2": float(g.double().norm())}
        rows[name]["_grad"] = g.float().cpu()
        print("torch " + json.dumps({k: v for k, v in rows[name].items() if not k.startswith("_")}))

    # float32 yardstick and the cross-check against our outputs
    check = {}
    out_path = os.path.join(d, "vgg19_bench_out.safetensors")
    if weights is not None:
        net32 = build_vgg(weights, torch.float32, dev)
        steps32 = make_steps(net32, inp, torch.float32, dev)
        try:
            from safetensors.torch import load_file
            mine = load_file(out_path)
        except Exception as e:
            print("bench_torch: cannot read our outputs %s (%s)" % (out_path, e))
            mine = None
        for name, key in [("vgg19_features", "features"), ("perceptual_loss", "loss")]:
            l32, g32 = steps32[name]()
            l32, g32 = float(l32), g32.float().cpu()
            c = {"torch_loss_rel": abs(rows[name]["loss"] - l32) / abs(l32)}
            c["torch_grad_rel_l2"], c["torch_grad_cos"] = rel_l2(rows[name]["_grad"], g32)
            if mine is not None:
                lo = float(mine["out.%s.loss" % key].reshape(-1)[0])
                c["ours_loss_rel"] = abs(lo - l32) / abs(l32)
                c["ours_grad_rel_l2"], c["ours_grad_cos"] = rel_l2(mine["out.%s.grad" % key], g32)
            check[name] = c
            print("check %s vs torch float32: %s" % (name, json.dumps(c)))

    print("\n%-16s %10s %10s %7s %11s %11s %9s %9s %9s %9s" % (
        "variant", "orakul ms", "torch ms", "ratio", "ork MiB", "torch MiB", "ork lossE", "pt lossE",
        "ork gradE", "pt gradE"))
    for name in steps:
        o, t, c = ours.get(name), rows[name], check.get(name, {})
        f = lambda k: ("%.1e" % c[k]) if k in c else "-"
        if o:
            print("%-16s %10.3f %10.3f %7.2f %11.1f %11.1f %9s %9s %9s %9s" % (
                name, o["median_ms"], t["median_ms"], o["median_ms"] / t["median_ms"], o["peak_mib"], t["peak_mib"],
                f("ours_loss_rel"), f("torch_loss_rel"), f("ours_grad_rel_l2"), f("torch_grad_rel_l2")))
        else:
            print("%-16s %10s %10.3f %7s %11s %11.1f   (no orakul row in %s)" % (
                name, "-", t["median_ms"], "-", "-", t["peak_mib"], ours_path))
    print("ratio = orakul median / torch median (> 1: orakul slower). lossE / gradE: relative error of the loss and"
          " relative L2 error of the input gradient against torch float32 on the same weights and inputs.")


if __name__ == "__main__":
    main()
