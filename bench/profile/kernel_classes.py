#!/usr/bin/env python3
"""bench/profile/kernel_classes.py — where one training step's GPU time goes,
from a trace written by bench/profile/cupti_trace.c (issue #31).

The step: the last complete one in the trace, from the end of the
second-to-last optimizer kernel group (a name with "adam") to the end of the
last. Each kernel falls in a class by its name (orakul's k_* kernels,
cuBLASLt, cuDNN, PyTorch's aten and Triton kernels); GEMMs are split by
duration into the base GEMMs and the thin ones (the LoRA's rank-r products
and other small ones, under --thin-us). Prints, per class, the summed kernel
time, its share of the step's wall time, the kernel count; then the idle
time (no kernel or copy running on any stream) and the longest kernels.

  python3 kernel_classes.py TRACE.tsv [--label NAME] [--flops TFLOP] [--json OUT]
"""
import argparse
import json
import re
import sys
from collections import defaultdict

# Ordered: the first class whose pattern matches names the kernel.
CLASSES = [
    ("optimizer", r"adam"),
    ("attention", r"sdpa|flash|fmha|attn|attention"),
    ("GEMM", r"gemm|nvjet|xmma|cutlass|cublas|sm90_|sm80_|matmul|s16816|wgmma"),
    ("norm / modulation / rope", r"layernorm|layer_norm|rmsnorm|rms_norm|rms_dw|modulate|rope|k_gn_|group_norm"),
    ("fused (Triton, reduction)", r"triton_(per|red)_"),
    ("fused (Triton, pointwise)", r"triton_poi_|triton_"),
    ("reduction", r"reduce|k_sum|k_chan_sum|k_mse|sum_parts|softmax"),
    ("elementwise / casts", r"k_binary|k_unary|k_axpby|gelu|k_copy|cvt|k_fill|k_dropout|k_mul|k_bcast|swiglu|"
                            r"elementwise|vectorized|unrolled|copy|fill|cat|index|bf16_to|f32_to|k_embedding"),
]


def classify(name, dur_us, thin_us):
    low = name.lower()
    for cls, pat in CLASSES:
        if re.search(pat, low):
            if cls == "GEMM":
                return "GEMM, base (>= %g us)" % thin_us if dur_us >= thin_us else "GEMM, thin (< %g us: LoRA)" % thin_us
            return cls
    return "other"


def short(name, n=70):
    m = re.match(r"_Z(\d+)", name)
    if m:  # a mangled C++ name: its identifier
        name = name[m.end(): m.end() + int(m.group(1))]
    return name if len(name) <= n else name[: n - 3] + "..."


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 6:
                continue
            try:
                recs.append((p[0], int(p[1]), int(p[2]), int(p[3]), int(p[4]), p[5]))
            except ValueError:
                continue
    recs.sort(key=lambda r: r[1])
    return recs


def last_step(recs):
    """(t0, t1) of the last complete step: between the ends of the last two
    optimizer groups (consecutive kernels with "adam" in the name)."""
    ends = []
    in_group = False
    for r in recs:
        if r[0] != "K":
            continue
        if "adam" in r[5].lower():
            if not in_group:
                ends.append(r[2])
            else:
                ends[-1] = max(ends[-1], r[2])
            in_group = True
        else:
            in_group = False
    if len(ends) < 2:
        return None
    return ends[-2], ends[-1]


def union_busy(iv):
    busy, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--label", default="")
    ap.add_argument("--thin-us", type=float, default=20.0)
    ap.add_argument("--flops", type=float, default=0.0, help="the step's GEMM+attention TFLOP, for the rate line")
    ap.add_argument("--json", default="")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    recs = load(a.trace)
    w = last_step(recs)
    if not w:
        print("%s: fewer than two optimizer steps in the trace (%d records)" % (a.trace, len(recs)))
        return 1
    t0, t1 = w
    step = [r for r in recs if r[1] >= t0 and r[2] <= t1]
    wall = (t1 - t0) / 1e6
    cls_t, cls_n = defaultdict(float), defaultdict(int)
    per_kernel = defaultdict(lambda: [0.0, 0])
    for kind, s, e, _st, _grid, name in step:
        d = (e - s) / 1e3  # us
        if kind == "K":
            c = classify(name, d, a.thin_us)
            k = short(name)
            per_kernel[(c, k)][0] += d / 1e3
            per_kernel[(c, k)][1] += 1
        else:
            c = "copies (memcpy D2D/H2D/D2H)" if kind == "C" else "memset"
        cls_t[c] += d / 1e3
        cls_n[c] += 1
    busy = union_busy([(r[1], r[2]) for r in step]) / 1e6
    idle = wall - busy
    title = a.label or a.trace
    print("== %s: one step %.1f ms (kernels busy %.1f ms, idle %.1f ms = %.1f%%), %d kernels"
          % (title, wall, busy, idle, 100 * idle / wall, sum(1 for r in step if r[0] == "K")))
    print("| class | ms | share of the step | count |")
    print("|---|---|---|---|")
    for c, t in sorted(cls_t.items(), key=lambda x: -x[1]):
        print("| %s | %.1f | %.1f%% | %d |" % (c, t, 100 * t / wall, cls_n[c]))
    print("| idle (no kernel on any stream) | %.1f | %.1f%% | |" % (idle, 100 * idle / wall))
    if a.flops > 0:
        g = sum(t for c, t in cls_t.items() if c.startswith("GEMM") or c == "attention")
        print("GEMM + attention: %.1f ms for %.1f TFLOP: %.0f TFLOP/s while they run; the whole step %.0f TFLOP/s"
              % (g, a.flops, a.flops / (g / 1e3), a.flops / (wall / 1e3)))
    print("top kernels:")
    for (c, k), (t, n) in sorted(per_kernel.items(), key=lambda x: -x[1][0])[: a.top]:
        print("  %7.1f ms %5d x  %-26s %s" % (t, n, c, k))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(label=title, step_ms=wall, busy_ms=busy, idle_ms=idle,
                           classes={c: dict(ms=t, n=cls_n[c]) for c, t in cls_t.items()},
                           top=[dict(cls=c, kernel=k, ms=t, n=n) for (c, k), (t, n) in
                                sorted(per_kernel.items(), key=lambda x: -x[1][0])[:40]]), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
