#!/usr/bin/env python3
"""cmp_safetensors.py DIR_A DIR_B — every .safetensors under DIR_A against the file of
the same relative path under DIR_B, tensor by tensor (names, dtypes, shapes, bytes).
When each side holds one run folder and the names differ (the seed configs name the run
after the budget), the run name is swapped in the path and the file names.
Metadata keys that differ are listed, not counted: a streamed trainable state records
the previous step's gradient norm (prev_norm) that a resident run has no use for.
Exit 0 when every tensor is bitwise equal (issue #8 §5)."""
import os, sys
import torch
from safetensors import safe_open

def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8)

def main(a_dir, b_dir):
    files = sorted(os.path.relpath(os.path.join(r, f), a_dir)
                   for r, _, fs in os.walk(a_dir) for f in fs if f.endswith(".safetensors"))
    if not files:
        print(f"no .safetensors under {a_dir}"); return 1
    runs_a, runs_b = sorted(os.listdir(a_dir)), sorted(os.listdir(b_dir))
    swap = len(runs_a) == 1 and len(runs_b) == 1 and runs_a != runs_b
    bad = 0
    for rel in files:
        pb = os.path.join(b_dir, rel.replace(runs_a[0], runs_b[0]) if swap else rel)
        if not os.path.exists(pb):
            print(f"{rel}: missing under {b_dir}"); bad += 1; continue
        a, b = safe_open(os.path.join(a_dir, rel), "pt"), safe_open(pb, "pt")
        ka, kb = sorted(a.keys()), sorted(b.keys())
        if ka != kb:
            print(f"{rel}: tensor names differ ({len(ka)} vs {len(kb)})"); bad += 1; continue
        nd, mx = 0, 0.0
        for k in ka:
            x, y = a.get_tensor(k), b.get_tensor(k)
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(raw(x), raw(y)):
                nd += 1
                if x.shape == y.shape: mx = max(mx, (x.float() - y.float()).abs().max().item())
        ma, mb = a.metadata() or {}, b.metadata() or {}
        md = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
        print(f"{rel}: {len(ka)} tensors, {'all bitwise equal' if nd == 0 else f'{nd} DIFFER (max abs {mx:g})'}"
              f"{'; metadata differs in ' + ', '.join(md) if md else ''}")
        bad += nd > 0
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
