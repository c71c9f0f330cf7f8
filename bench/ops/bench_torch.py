#!/usr/bin/env python3
"""bench_torch.py — PyTorch reference timings for bench_ops (same shapes, same
method: warm-up, median of 7 repeats of 20 calls timed with CUDA events) and the
comparison table. Usage: bench_torch.py [bench_ops.jsonl] > table.
Ratio = orakul time / torch time (< 1: orakul faster)."""
import json, sys
import torch
import torch.nn.functional as F


def time_it(fn):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 20)
    return sorted(ts)[3]


def main():
    dev = "cuda"
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    rows = []
    M = 4608
    for K, N in [(3072, 3072), (3072, 9216), (3072, 12288), (12288, 3072), (3072, 21504), (15360, 3072)]:
        x = torch.rand(M, K, device=dev, dtype=torch.bfloat16) * 2 - 1
        w = (torch.rand(N, K, device=dev, dtype=torch.bfloat16) * 2 - 1) * 0.05
        dy = torch.rand(M, N, device=dev, dtype=torch.bfloat16) * 2 - 1
        for name, fn in [("fwd", lambda: torch.matmul(x, w.t())), ("dgrad", lambda: torch.matmul(dy, w)),
                         ("wgrad", lambda: torch.matmul(dy.t(), x))]:
            ms = time_it(fn)
            rows.append({"kind": "gemm_" + name, "M": M, "K": K, "N": N, "ms": ms, "tflops": 2 * M * K * N / ms / 1e9})
        del x, w, dy
    B, H, L, D = 1, 24, 4608, 128
    for causal in (0, 1):
        q = (torch.rand(B, H, L, D, device=dev, dtype=torch.bfloat16) * 2 - 1) * 1.5
        k = (torch.rand(B, H, L, D, device=dev, dtype=torch.bfloat16) * 2 - 1) * 1.5
        v = torch.rand(B, H, L, D, device=dev, dtype=torch.bfloat16) * 2 - 1
        dy = torch.rand(B, H, L, D, device=dev, dtype=torch.bfloat16) * 2 - 1
        q.requires_grad_(); k.requires_grad_(); v.requires_grad_()
        with torch.no_grad():
            f = time_it(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))

        def fb():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            torch.autograd.grad(y, (q, k, v), dy)
        fbt = time_it(fb)
        fl = 4 * B * H * L * L * D * (0.5 if causal else 1)
        rows.append({"kind": "attn", "L": L, "H": H, "D": D, "causal": causal, "fwd_ms": f, "bwd_ms": fbt - f,
                     "fwd_tflops": fl / f / 1e9, "bwd_tflops": 2.5 * fl / (fbt - f) / 1e9})
        # which SDPA backend is fast here: time each one alone (non-causal)
        if not causal:
            from torch.nn.attention import sdpa_kernel, SDPBackend
            for nm, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                           ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
                try:
                    with sdpa_kernel([be]):
                        with torch.no_grad():
                            f1 = time_it(lambda: F.scaled_dot_product_attention(q, k, v))
                        fb1 = time_it(fb)
                    print("torch sdpa backend %-9s fwd %.3f ms (%.0f TF/s)  bwd %.3f ms (%.0f TF/s)" % (
                        nm, f1, fl / f1 / 1e9, fb1 - f1, 2.5 * fl / (fb1 - f1) / 1e9))
                except Exception as e:  # backend not available for this shape/build
                    print("torch sdpa backend %s: %s" % (nm, str(e).splitlines()[0][:100]))
    for r in rows:
        print("torch " + json.dumps(r))
    ours = []
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as fh:
            ours = [json.loads(l) for l in fh if l.startswith("{")]
    if not ours:
        return
    print("\n%-26s %10s %10s %8s %8s %7s" % ("op", "orakul ms", "torch ms", "ork TF/s", "pt TF/s", "ratio"))
    for o in ours:
        if o["kind"].startswith("gemm"):
            t = next(r for r in rows if r["kind"] == o["kind"] and r["K"] == o["K"] and r["N"] == o["N"])
            nm = "%s %dx%dx%d" % (o["kind"], o["M"], o["K"], o["N"])
            print("%-26s %10.3f %10.3f %8.0f %8.0f %7.2f" % (nm, o["ms"], t["ms"], o["tflops"], t["tflops"], o["ms"] / t["ms"]))
        else:
            t = next(r for r in rows if r["kind"] == "attn" and r["causal"] == o["causal"])
            c = (" causal" if o["causal"] else "") + (" cudnn" if o.get("path") == "cudnn" else "")
            for part in ("fwd", "bwd"):
                print("%-26s %10.3f %10.3f %8.0f %8.0f %7.2f" % ("attn %s L%d%s" % (part, o["L"], c), o[part + "_ms"],
                      t[part + "_ms"], o[part + "_tflops"], t[part + "_tflops"], o[part + "_ms"] / t[part + "_ms"]))
            tot_o, tot_t = o["fwd_ms"] + o["bwd_ms"], t["fwd_ms"] + t["bwd_ms"]
            print("%-26s %10.3f %10.3f %8s %8s %7.2f" % ("attn fwd+bwd L%d%s" % (o["L"], c), tot_o, tot_t, "", "", tot_o / tot_t))
    print("torch %s, SDPA backends enabled: flash=%s cudnn=%s" % (torch.__version__, torch.backends.cuda.flash_sdp_enabled(),
          torch.backends.cuda.cudnn_sdp_enabled()))


if __name__ == "__main__":
    main()
