"""bench/stream/pcie_ceilings.py — pinned-memory copy ceilings on the GPU machine
(issue #8 §6): host->device alone, device->host alone, and both at once on two
streams (what the backward pass of a run that streams its trainable state does).
The 'transfer-only' time of a step is its bytes over these rates: the H2D-only
rate for the forward pass, the concurrent rates for the backward.
Usage: python3 pcie_ceilings.py [--gib 1] [--reps 7]; prints one line per case."""
import argparse, statistics, torch

ap = argparse.ArgumentParser()
ap.add_argument("--gib", type=float, default=1.0)
ap.add_argument("--reps", type=int, default=7)
a = ap.parse_args()
n = int(a.gib * (1 << 30))
h_src = torch.empty(n, dtype=torch.uint8).pin_memory()
h_dst = torch.empty(n, dtype=torch.uint8).pin_memory()
d_dst = torch.empty(n, dtype=torch.uint8, device="cuda")
d_src = torch.empty(n, dtype=torch.uint8, device="cuda")
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

def timed(fn):
    fn(); torch.cuda.synchronize()  # warm-up
    ts = []
    for _ in range(a.reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); e0.record(); fn(); e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3)
    return statistics.median(ts)

def h2d():
    with torch.cuda.stream(s1): d_dst.copy_(h_src, non_blocking=True)
    torch.cuda.current_stream().wait_stream(s1)

def d2h():
    with torch.cuda.stream(s2): h_dst.copy_(d_src, non_blocking=True)
    torch.cuda.current_stream().wait_stream(s2)

def both():
    with torch.cuda.stream(s1): d_dst.copy_(h_src, non_blocking=True)
    with torch.cuda.stream(s2): h_dst.copy_(d_src, non_blocking=True)
    torch.cuda.current_stream().wait_stream(s1); torch.cuda.current_stream().wait_stream(s2)

t1, t2, t3 = timed(h2d), timed(d2h), timed(both)
print(f"pcie ceiling H2D alone: {n / t1 / 1e9:.1f} GB/s ({a.gib:g} GiB, median of {a.reps})")
print(f"pcie ceiling D2H alone: {n / t2 / 1e9:.1f} GB/s")
print(f"pcie ceiling both at once: {n / t3 / 1e9:.1f} GB/s each way ({2 * n / t3 / 1e9:.1f} GB/s together)")
