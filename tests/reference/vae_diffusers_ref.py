#!/usr/bin/env python3
"""vae_diffusers_ref.py — the FLUX.1 autoencoder fixture of tests/fixtures/vae1_small.safetensors
(BFL's key layout, written by vae_ref.py) as diffusers saves it: converted with
diffusers' own single-file converter (diffusers.loaders.single_file_utils.
convert_ldm_vae_checkpoint: BFL's ae keys are LDM's), loaded into
diffusers.AutoencoderKL and written with save_pretrained, so the folder, the
config.json and the key names are diffusers', not ours:

    OUTDIR/vae1_small_diffusers/vae/config.json
    OUTDIR/vae1_small_diffusers/vae/diffusion_pytorch_model.safetensors   (BF16, as the BFL file)

i.e. a diffusers pipeline folder's vae/ (Tongyi-MAI/Z-Image-Turbo ships FLUX.1's
autoencoder that way). The weights are the BFL file's, bit for bit, so the C test
(tests/vae_diffusers) expects the codec to encode to the same tokens from either
file. The script checks the independent half here: diffusers' AutoencoderKL on
this folder encodes tests/fixtures/vae_small_ref.safetensors' in.image to its
v1.ref.tokens (vae_ref.py's float64 BFL reference): 0.3611 * (mean - 0.1159),
packed 2x2 as FLUX packs (channel c*4 + ph*2 + pw), and prints the error.

Usage:  python3 vae_diffusers_ref.py [OUTDIR]     (default tests/fixtures)
Needs:  torch, diffusers, safetensors. CPU, seconds. Deterministic.
"""
import json
import os
import sys

import torch
from diffusers import AutoencoderKL
from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint
from safetensors.torch import load_file

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
SRC = os.path.join(OUT, "vae1_small.safetensors")
REF = os.path.join(OUT, "vae_small_ref.safetensors")
DST = os.path.join(OUT, "vae1_small_diffusers", "vae")

bfl = load_file(SRC)
ch = bfl["encoder.conv_in.weight"].shape[0]
nlev = 0
while f"encoder.down.{nlev}.block.0.conv2.weight" in bfl:
    nlev += 1
mult = [bfl[f"encoder.down.{i}.block.0.conv2.weight"].shape[0] // ch for i in range(nlev)]
nres = 0
while f"encoder.down.0.block.{nres}.conv1.weight" in bfl:
    nres += 1
z = bfl["encoder.conv_out.weight"].shape[0] // 2
config = dict(
    in_channels=3, out_channels=3, latent_channels=z, block_out_channels=[ch * m for m in mult],
    down_block_types=["DownEncoderBlock2D"] * nlev, up_block_types=["UpDecoderBlock2D"] * nlev,
    layers_per_block=nres, act_fn="silu", norm_num_groups=32, sample_size=64,
    scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False, use_post_quant_conv=False,
    mid_block_add_attention=True)
vae = AutoencoderKL(**config)
sd = convert_ldm_vae_checkpoint(bfl, vae.config)
vae.load_state_dict(sd, strict=True)
vae = vae.to(torch.bfloat16)
os.makedirs(DST, exist_ok=True)
vae.save_pretrained(DST, safe_serialization=True)

# the weights are the BFL file's, unchanged
saved = load_file(os.path.join(DST, "diffusion_pytorch_model.safetensors"))
assert len(saved) == len(bfl), (len(saved), len(bfl))
assert all(saved[k].dtype == torch.bfloat16 for k in saved)
assert sum(v.numel() for v in saved.values()) == sum(v.numel() for v in bfl.values())

# diffusers' own encode of the reference image against vae_ref.py's float64 tokens
ref = load_file(REF)
img = ref["in.image"].double()
want = ref["v1.ref.tokens"].double()
m = AutoencoderKL.from_pretrained(DST).to(torch.float64).eval()
with torch.no_grad():
    mean = m.encode(2 * img - 1).latent_dist.mean
    lat = (mean - m.config.shift_factor) * m.config.scaling_factor
B, C, H, W = lat.shape
tok = lat.reshape(B, C, H // 2, 2, W // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(B, (H // 2) * (W // 2), C * 4)
err = (tok - want).abs().max().item() / want.abs().max().item()
print(f"diffusers AutoencoderKL vs vae_ref.py tokens: max |diff| / max|ref| = {err:.3g}")
assert err < 1e-9, "diffusers' model of this folder is not vae_ref.py's autoencoder"
print("wrote", DST, json.dumps({k: config[k] for k in ("block_out_channels", "layers_per_block", "latent_channels")}))
