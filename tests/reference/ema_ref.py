#!/usr/bin/env python3
"""tests/reference/ema_ref.py — the fixture of tests/ema (ema_ref.safetensors):
ai-toolkit's EMA update (ostris/ai-toolkit toolkit/ema.py,
ExponentialMovingAverage.update with use_num_updates, use_feedback and
param_multiplier at their defaults, as BaseSDTrainProcess.setup_ema makes it),
run in PyTorch on a sequence of parameter values, F32 and BF16 parameters,
with an F32 shadow (orakul's; ema.py keeps the shadow in the parameter's dtype,
stochastically rounded: train/ema.h says why orakul does not).

The update, as ema.py writes it (decay a Python float):
    one_minus_decay = 1.0 - decay
    s_param_float = s_param.float()            # the F32 shadow itself
    param_float = param.to(torch.float32)
    tmp = (s_param_float - param_float)
    tmp.mul_(one_minus_decay)
    s_param_float.sub_(tmp)

Writes: p_f32 (K, N) F32 and p_bf16 (K, N) BF16, the parameter after each of
K optimizer steps (row 0: before the first, the shadow's start); s_f32,
s_bf16 (K, N) F32, the shadow after each update (row 0: the start, a copy);
metadata decay. Run: python3 tests/reference/ema_ref.py tests/fixtures/ema_ref.safetensors
"""
import sys

import torch
from safetensors.torch import save_file

DECAY = 0.99
K, N = 7, 1000


class EMA:
    """The parts of ai-toolkit's ExponentialMovingAverage this fixture uses."""

    def __init__(self, params, decay):
        self.decay = decay
        self.num_updates = None  # use_num_updates=False
        # p.clone().detach() in ema.py; here an F32 copy (orakul's shadow dtype)
        self.shadow_params = [p.clone().detach().to(torch.float32) for p in params]

    def update(self, parameters):
        decay = self.decay
        one_minus_decay = 1.0 - decay
        with torch.no_grad():
            for s_param, param in zip(self.shadow_params, parameters):
                s_param_float = s_param.float()
                param_float = param
                if param.dtype != torch.float32:
                    param_float = param_float.to(torch.float32)
                tmp = (s_param_float - param_float)
                tmp.mul_(one_minus_decay)
                s_param_float.sub_(tmp)


def run(dtype, gen):
    p = (torch.randn(N, generator=gen) * 0.05).to(dtype)
    ema = EMA([p], DECAY)
    ps, ss = [p.clone()], [ema.shadow_params[0].clone()]
    for _ in range(1, K):
        # an optimizer step: a small change, in the parameter's dtype
        p = (p.float() + torch.randn(N, generator=gen) * 0.01).to(dtype)
        ema.update([p])
        ps.append(p.clone())
        ss.append(ema.shadow_params[0].clone())
    return torch.stack(ps), torch.stack(ss)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/ema_ref.safetensors"
    gen = torch.Generator().manual_seed(32)
    p32, s32 = run(torch.float32, gen)
    p16, s16 = run(torch.bfloat16, gen)
    save_file({"p_f32": p32.contiguous(), "s_f32": s32.contiguous(), "p_bf16": p16.contiguous(),
               "s_bf16": s16.contiguous()}, out, metadata={"decay": repr(DECAY), "torch": torch.__version__})
    print(f"wrote {out}: K={K} N={N} decay={DECAY}")


if __name__ == "__main__":
    main()
