#!/usr/bin/env python3
"""flux_check_diffusers.py — cross-checks flux_ref.py against a second, independent
implementation: diffusers' FluxTransformer2DModel / Flux2Transformer2DModel.
It loads tests/fixtures/flux1_small_diffusers.safetensors (the diffusers-key
checkpoint flux_ref.py wrote, so the BFL->diffusers mapping is checked too) and
flux2_small_bfl.safetensors (converted here with FLUX.md §3.4's mapping), runs
the fixture inputs in float64 and compares with ref.pred. Not needed to build
the fixtures; run it after flux_ref.py when diffusers is installed
(`pip install diffusers`). Exit status 1 on a mismatch.
Usage: python3 flux_check_diffusers.py [FIXTURE_DIR]
diffusers computes the timestep embedding in float32 even for a float64 model,
so agreement is ~1e-5 relative, not 1e-12."""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from safetensors import safe_open

B, H_TOK, W_TOK, T = 2, 4, 4, 8


def fixture(path):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, json.loads(f.metadata()["config"])


def ids(version):
    n = 4 if version == 2 else 3
    img = torch.zeros(H_TOK, W_TOK, n)
    img[..., 1] = torch.arange(H_TOK)[:, None]
    img[..., 2] = torch.arange(W_TOK)[None, :]
    txt = torch.zeros(T, n)
    if version == 2:
        txt[:, 3] = torch.arange(T)
    return img.reshape(-1, n), txt


def flux2_to_diffusers(sd):
    out = {}
    simple = {"img_in": "x_embedder", "txt_in": "context_embedder",
              "time_in.in_layer": "time_guidance_embed.timestep_embedder.linear_1",
              "time_in.out_layer": "time_guidance_embed.timestep_embedder.linear_2",
              "guidance_in.in_layer": "time_guidance_embed.guidance_embedder.linear_1",
              "guidance_in.out_layer": "time_guidance_embed.guidance_embedder.linear_2",
              "double_stream_modulation_img.lin": "double_stream_modulation_img.linear",
              "double_stream_modulation_txt.lin": "double_stream_modulation_txt.linear",
              "single_stream_modulation.lin": "single_stream_modulation.linear",
              "final_layer.linear": "proj_out"}
    dbl = {"img_attn.norm.query_norm.scale": "attn.norm_q.weight", "img_attn.norm.key_norm.scale": "attn.norm_k.weight",
           "txt_attn.norm.query_norm.scale": "attn.norm_added_q.weight",
           "txt_attn.norm.key_norm.scale": "attn.norm_added_k.weight",
           "img_attn.proj.weight": "attn.to_out.0.weight", "txt_attn.proj.weight": "attn.to_add_out.weight",
           "img_mlp.0.weight": "ff.linear_in.weight", "img_mlp.2.weight": "ff.linear_out.weight",
           "txt_mlp.0.weight": "ff_context.linear_in.weight", "txt_mlp.2.weight": "ff_context.linear_out.weight"}
    sgl = {"linear1.weight": "attn.to_qkv_mlp_proj.weight", "linear2.weight": "attn.to_out.weight",
           "norm.query_norm.scale": "attn.norm_q.weight", "norm.key_norm.scale": "attn.norm_k.weight"}
    for k, t in sd.items():
        mod, leaf = k.rsplit(".", 1)
        if mod in simple:
            out[f"{simple[mod]}.{leaf}"] = t
        elif mod == "final_layer.adaLN_modulation.1":
            shift, scale = t.chunk(2, 0)
            out["norm_out.linear.weight"] = torch.cat([scale, shift], 0)
        elif k.startswith("double_blocks."):
            i, rest = k.split(".", 2)[1:]
            if rest in ("img_attn.qkv.weight", "txt_attn.qkv.weight"):
                names = ["to_q", "to_k", "to_v"] if rest[0] == "i" else ["add_q_proj", "add_k_proj", "add_v_proj"]
                for n, p in zip(names, t.chunk(3, 0)):
                    out[f"transformer_blocks.{i}.attn.{n}.weight"] = p
            else:
                out[f"transformer_blocks.{i}.{dbl[rest]}"] = t
        elif k.startswith("single_blocks."):
            i, rest = k.split(".", 2)[1:]
            out[f"single_transformer_blocks.{i}.{sgl[rest]}"] = t
        else:
            raise KeyError(k)
    return {k: v.contiguous() for k, v in out.items()}


def check(name, pred, ref):
    err = (pred - ref).abs().max().item()
    m = ref.abs().max().item()
    ok = err <= 1e-4 * m
    print(f"{name}: max|ref| {m:.4g}  max|diffusers-ref| {err:.3g}  ({err / m:.3g} rel) {'OK' if ok else 'MISMATCH'}")
    return ok


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    from diffusers import Flux2Transformer2DModel, FluxTransformer2DModel
    ok = True
    fx, c = fixture(os.path.join(d, "flux1_small.safetensors"))
    hd = c["hidden_size"] // c["num_heads"]
    m = FluxTransformer2DModel(patch_size=1, in_channels=c["in_channels"], num_layers=c["depth"],
                               num_single_layers=c["depth_single_blocks"], attention_head_dim=hd,
                               num_attention_heads=c["num_heads"], joint_attention_dim=c["context_in_dim"],
                               pooled_projection_dim=c["vec_in_dim"], guidance_embeds=c["guidance_embed"],
                               axes_dims_rope=tuple(c["axes_dim"]))
    m.load_state_dict(load_file(os.path.join(d, "flux1_small_diffusers.safetensors")), strict=True)
    m = m.double().eval()
    img_ids, txt_ids = ids(1)
    with torch.no_grad():
        p = m(hidden_states=fx["in.tokens"].double(), encoder_hidden_states=fx["in.txt"].double(),
              pooled_projections=fx["in.vec"].double(), timestep=fx["in.timesteps"].double(),
              img_ids=img_ids.double(), txt_ids=txt_ids.double(), guidance=fx["in.guidance"].double(),
              return_dict=False)[0]
    ok &= check("FLUX.1 diffusers (from flux1_small_diffusers.safetensors)", p, fx["ref.pred"])

    fx, c = fixture(os.path.join(d, "flux2_small.safetensors"))
    hd = c["hidden_size"] // c["num_heads"]
    m = Flux2Transformer2DModel(patch_size=1, in_channels=c["in_channels"], num_layers=c["depth"],
                                num_single_layers=c["depth_single_blocks"], attention_head_dim=hd,
                                num_attention_heads=c["num_heads"], joint_attention_dim=c["context_in_dim"],
                                mlp_ratio=c["mlp_ratio"], axes_dims_rope=tuple(c["axes_dim"]),
                                rope_theta=c["theta"], guidance_embeds=c["guidance_embed"])
    m.load_state_dict(flux2_to_diffusers(load_file(os.path.join(d, "flux2_small_bfl.safetensors"))), strict=True)
    m = m.double().eval()
    img_ids, txt_ids = ids(2)
    with torch.no_grad():
        p = m(hidden_states=fx["in.tokens"].double(), encoder_hidden_states=fx["in.txt"].double(),
              timestep=fx["in.timesteps"].double(), img_ids=img_ids.double(), txt_ids=txt_ids.double(),
              guidance=fx["in.guidance"].double(), return_dict=False)[0]
    ok &= check("FLUX.2 diffusers (from flux2_small_bfl.safetensors, §3.4 mapping)", p, fx["ref.pred"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
