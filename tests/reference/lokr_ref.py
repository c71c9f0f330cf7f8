#!/usr/bin/env python3
"""lokr_ref.py — the LoKr fixtures tests/lokr/test_lokr_op.c checks against
(network.type: lokr, issue #32 point 3), from references we did not write:

  fact     float32 (n, 4): dim, factor, m, n of ai-toolkit's factorization(dim, factor)
           (ostris/ai-toolkit toolkit/models/lokr.py, copied below as aitk_factorization);
           for every row where both are defined the same way (factor -1, or a factor
           not above sqrt(dim)) LyCORIS's lycoris.functional.general.factorization must
           agree, and LyCORIS's LokrModule (full_matrix=True, as ai-toolkit's
           lokr_full_rank) must hold lokr_w1 (m_out, m_in) and lokr_w2 (n_out, n_in).
  c<i>.*   one adapted nn.Linear through lycoris-lora's LokrModule (full_matrix=True:
           scale 1) with random lokr_w1 / lokr_w2: x (M, K), w (N, K), b (N), w1, w2,
           dy (M, N); y = module(x), and dx, dw1, dw2 by torch autograd of sum(y·dy).
           All float32, computed in float64 and rounded.
  c3.*     the same with a low-rank w2 (lora_dim 3, alpha 2, full_matrix False: LyCORIS's
           lokr_w2_a (b, 3) · lokr_w2_b (3, d) at scale alpha / lora_dim, as ai-toolkit's
           lokr_full_rank: false): w2a, w2b and dw2a, dw2b in place of w2 and dw2.

Usage: PYTHONPATH=<lycoris-lora 4.x> python3 tests/reference/lokr_ref.py
       (writes tests/fixtures/lokr/lokr_ref.safetensors; pip install lycoris-lora)"""
import os

import torch
from safetensors.torch import save_file
from lycoris.functional.general import factorization as lycoris_factorization
from lycoris.modules.lokr import LokrModule

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "lokr", "lokr_ref.safetensors")


def aitk_factorization(dimension, factor=-1):
    """ai-toolkit toolkit/models/lokr.py factorization(), verbatim in behaviour."""
    if factor > 0 and (dimension % factor) == 0:
        return factor, dimension // factor
    if factor == -1:
        factor = dimension
    m, n = 1, dimension
    length = m + n
    while m < n:
        new_m = m + 1
        while dimension % new_m != 0:
            new_m += 1
        new_n = dimension // new_m
        if new_m + new_n > length or new_m > factor:
            break
        m, n = new_m, new_n
    if m > n:
        n, m = m, n
    return m, n


def main():
    torch.manual_seed(0)
    rows = []
    dims = [1, 2, 7, 12, 96, 127, 128, 250, 288, 360, 384, 512, 1024, 3072, 9216, 12288, 18432, 21504]
    for dim in dims:
        for factor in [-1, 2, 3, 4, 8, 16, 64]:
            m, n = aitk_factorization(dim, factor)
            assert m * n == dim
            rows.append([dim, factor, m, n])
            if factor == -1 or factor * factor <= dim:
                assert (m, n) == lycoris_factorization(dim, factor), (dim, factor)
    # LyCORIS's module shapes for full-rank LoKr = (factorization(out), factorization(in))
    for out_f, in_f, factor in [(288, 96, -1), (12288, 3072, -1), (3072, 3072, 16), (384, 96, 4), (21504, 3072, 8)]:
        lin = torch.nn.Linear(in_f, out_f, bias=False)
        mod = LokrModule("m", lin, lora_dim=10**10, alpha=1, factor=factor, full_matrix=True)
        mo, no = aitk_factorization(out_f, factor)
        mi, ni = aitk_factorization(in_f, factor)
        assert tuple(mod.lokr_w1.shape) == (mo, mi) and tuple(mod.lokr_w2.shape) == (no, ni), (out_f, in_f, factor)
        assert float(mod.scale) == 1.0
    t = {"fact": torch.tensor(rows, dtype=torch.float32)}  # exact: every value < 2^24
    for i, (M, out_f, in_f, factor) in enumerate([(5, 12, 8, -1), (7, 24, 18, 3), (3, 96, 288, -1)]):
        lin = torch.nn.Linear(in_f, out_f, bias=True).double()
        with torch.no_grad():
            lin.weight.normal_(0, 0.5)
            lin.bias.normal_(0, 0.5)
        mod = LokrModule("m", lin, lora_dim=10**10, alpha=1, factor=factor, full_matrix=True).double()
        with torch.no_grad():
            mod.lokr_w1.normal_(0, 0.5)
            mod.lokr_w2.normal_(0, 0.5)
        mod.apply_to()
        x = torch.randn(M, in_f, dtype=torch.float64, requires_grad=True)
        dy = torch.randn(M, out_f, dtype=torch.float64)
        y = lin(x)  # LokrModule.apply_to routes the Linear's forward through the adapter
        ref = x @ (lin.weight + torch.kron(mod.lokr_w1, mod.lokr_w2)).T + lin.bias
        assert torch.allclose(y, ref, atol=1e-10), "LokrModule forward is not W + kron(w1, w2)"
        (y * dy).sum().backward()
        f = lambda v: v.detach().to(torch.float32).contiguous()
        t.update({f"c{i}.x": f(x), f"c{i}.w": f(lin.weight), f"c{i}.b": f(lin.bias), f"c{i}.w1": f(mod.lokr_w1),
                  f"c{i}.w2": f(mod.lokr_w2), f"c{i}.dy": f(dy), f"c{i}.y": f(y), f"c{i}.dx": f(x.grad),
                  f"c{i}.dw1": f(mod.lokr_w1.grad), f"c{i}.dw2": f(mod.lokr_w2.grad),
                  f"c{i}.factor": torch.tensor([factor], dtype=torch.float32)})
    # c3: low-rank w2 (LyCORIS: lora_dim < max(b, d) / 2 -> lokr_w2_a @ lokr_w2_b, scale alpha / lora_dim)
    M, out_f, in_f, factor = 5, 24, 18, 3
    lin = torch.nn.Linear(in_f, out_f, bias=True).double()
    with torch.no_grad():
        lin.weight.normal_(0, 0.5)
        lin.bias.normal_(0, 0.5)
    mod = LokrModule("m", lin, lora_dim=3, alpha=2, factor=factor, full_matrix=False).double()
    assert not mod.use_w2 and mod.use_w1 and abs(float(mod.scale) - 2 / 3) < 1e-12
    with torch.no_grad():
        mod.lokr_w1.normal_(0, 0.5)
        mod.lokr_w2_a.normal_(0, 0.5)
        mod.lokr_w2_b.normal_(0, 0.5)
    mod.apply_to()
    x = torch.randn(M, in_f, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(M, out_f, dtype=torch.float64)
    y = lin(x)
    ref = x @ (lin.weight + torch.kron(mod.lokr_w1, (2 / 3) * mod.lokr_w2_a @ mod.lokr_w2_b)).T + lin.bias
    assert torch.allclose(y, ref, atol=1e-10), "LokrModule low-rank forward is not W + kron(w1, scale w2a w2b)"
    (y * dy).sum().backward()
    f = lambda v: v.detach().to(torch.float32).contiguous()
    t.update({"c3.x": f(x), "c3.w": f(lin.weight), "c3.b": f(lin.bias), "c3.w1": f(mod.lokr_w1),
              "c3.w2a": f(mod.lokr_w2_a), "c3.w2b": f(mod.lokr_w2_b), "c3.dy": f(dy), "c3.y": f(y),
              "c3.dx": f(x.grad), "c3.dw1": f(mod.lokr_w1.grad), "c3.dw2a": f(mod.lokr_w2_a.grad),
              "c3.dw2b": f(mod.lokr_w2_b.grad)})
    save_file(t, OUT, metadata={"source": "tests/reference/lokr_ref.py, lycoris-lora LokrModule"})
    print(f"wrote {OUT}: {len(rows)} factorizations, 4 linear cases")


if __name__ == "__main__":
    main()
