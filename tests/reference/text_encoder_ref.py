#!/usr/bin/env python3
"""text_encoder_ref.py — the reference for the t5clip plugin
(plugins/text_encoders/t5clip): transformers' own T5EncoderModel and
CLIPTextModel with random weights, saved with save_pretrained (config.json +
model.safetensors, the HF weight names) beside their outputs for fixed token
ids. Truth is transformers' forward, not anything orakul wrote.

Usage:
  python3 text_encoder_ref.py [OUTDIR]
      TINY models on the CPU (default OUTDIR: tests/fixtures/text). Writes
        t5_tiny/{config.json,model.safetensors}        F32 weights
        t5_tiny_sharded/                               the same in shards + model.safetensors.index.json
        t5_tiny_fp8/                                   linear weights E4M3 + per-tensor .scale_weight (ComfyUI's form)
        clip_tiny/{config.json,model.safetensors}      legacy eos_token_id 2: pooled at argmax(ids)
        clip_tiny_eos/{config.json,model.safetensors}  the same weights, eos_token_id 7: pooled at the first 7
        text_ref.safetensors                           inputs and float64 outputs
  python3 text_encoder_ref.py --real OUTDIR [--t5-layers N] [--device cuda]
      The REAL shapes with random weights (transformers' own init): T5-XXL
      (24 layers, d_model 4096, 64 heads, d_ff 10240, vocab 32128) and CLIP-L
      (12 layers, 768, 12 heads, MLP 3072, 77 positions), weights saved in BF16
      (9.5 GB for T5) to OUTDIR/t5 and OUTDIR/clip, and OUTDIR/refs.safetensors:
      the outputs of the float32 forward of those bf16 weights (the truth the C
      side is measured against), with transformers' own bf16 forward's error
      against it in the metadata (hf_bf16_*), for scale. Run it on the GPU
      machine, then ORK_TE_REAL_DIR=OUTDIR ./test_t5clip_real.

Tiny configs: T5 v1.1 (gated-gelu) d_model 32, 4 heads of 8, d_ff 48, 2 layers,
vocab 64, 32 buckets to distance 128; CLIP text: width 32, 4 heads, MLP 37,
2 layers, 24 positions, vocab 99, quick_gelu. Tiny weights are redrawn so every
mapping mistake shows: linear ~ N(0, 1/fan_in), biases ~ N(0, 0.1), norm
scales ~ U(0.5, 1.5), norm biases ~ N(0, 0.1), tables ~ N(0, 1) (T5's position
bias table N(0, 1): it moves the scores by O(1)).
Inputs: T5: B = 2, L = 40 (relative distances past the bucket edges 16 and
32); the second sequence's last 9 positions are padding (mask 0) in the masked
case. CLIP: B = 2, L = 16, EOS (98, the highest id) at positions 9 and 13,
padded with EOS after it (as FLUX's tokenizer pads), id 7 once in each.

Fixture tensors (text_ref.safetensors): in.t5.ids, in.t5.mask I32 (B, L);
ref.t5.hidden, ref.t5.hidden_masked F64 (B, L, 32); in.clip.ids, in.clip.mask;
ref.clip.hidden, ref.clip.pooled, ref.clip.hidden_masked, ref.clip.pooled_masked,
ref.clip_eos.pooled F64; ref.t5_fp8.hidden F64 (the fp8 checkpoint, dequantized). Metadata: f32_err_* = transformers' own float32 forward
against its float64 one (max abs error / max |ref|), for scale.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel


def redraw(model, gen):
    """Tiny models: weights of a scale where mistakes show (see the header)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("relative_attention_bias.weight") or "embed" in name or name == "shared.weight":
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen, dtype=torch.float64))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / p.shape[-1] ** 0.5)


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def save_model(model, folder, dtype):
    os.makedirs(folder, exist_ok=True)
    model.to(dtype).save_pretrained(folder, safe_serialization=True)


def tiny(out):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    meta = {}
    t = {}
    # ---- T5 ----
    tc = T5Config(vocab_size=64, d_model=32, d_kv=8, num_heads=4, d_ff=48, num_layers=2, num_decoder_layers=2,
                  relative_attention_num_buckets=32, relative_attention_max_distance=128,
                  feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6, dropout_rate=0.0)
    t5 = T5EncoderModel(tc).eval().double()
    t5.config._attn_implementation = "eager"
    redraw(t5, gen)
    t5 = t5.float().double()  # the weights the C side reads are the F32 ones
    B, L = 2, 40
    ids = torch.randint(2, 64, (B, L), generator=gen, dtype=torch.int32)
    ids[0, L - 1] = 1
    ids[1, L - 10] = 1
    ids[1, L - 9:] = 0
    mask = torch.ones(B, L, dtype=torch.int32)
    mask[1, L - 9:] = 0
    with torch.no_grad():
        h = t5(input_ids=ids.long()).last_hidden_state
        hm = t5(input_ids=ids.long(), attention_mask=mask.long()).last_hidden_state
        h32 = t5.float()(input_ids=ids.long()).last_hidden_state
    meta["f32_err_t5"] = "%.3g" % rel_err(h32, h)
    t5 = t5.double()
    # an fp8 checkpoint as ComfyUI ships T5 (t5xxl_fp8_e4m3fn_scaled): linear weights E4M3 with a
    # per-tensor .scale_weight, the rest F32; its reference runs on the dequantized weights
    sd8, deq = {}, {}
    for k, v in t5.state_dict().items():
        if k.endswith(("q.weight", "k.weight", "v.weight", "o.weight", "wi_0.weight", "wi_1.weight", "wo.weight")):
            s = (v.abs().max() / 448.0).float()
            q = (v.float() / s).to(torch.float8_e4m3fn)
            sd8[k] = q
            sd8[k[:-len(".weight")] + ".scale_weight"] = s.reshape(1)
            deq[k] = q.double() * s.double()
        else:
            sd8[k] = v.float()
            deq[k] = v
    os.makedirs(os.path.join(out, "t5_tiny_fp8"), exist_ok=True)
    save_file(sd8, os.path.join(out, "t5_tiny_fp8", "model.safetensors"))
    with open(os.path.join(out, "t5_tiny_fp8", "config.json"), "w") as f:
        f.write(t5.config.to_json_string())
    t5q = T5EncoderModel(tc).eval().double()
    t5q.config._attn_implementation = "eager"
    t5q.load_state_dict(deq, strict=False)
    with torch.no_grad():
        t["ref.t5_fp8.hidden"] = t5q(input_ids=ids.long()).last_hidden_state
    t["in.t5.ids"], t["in.t5.mask"] = ids, mask
    t["ref.t5.hidden"], t["ref.t5.hidden_masked"] = h, hm
    save_model(t5, os.path.join(out, "t5_tiny"), torch.float32)
    # the same weights in shards with an index json (how T5-XXL checkpoints come: FLUX's text_encoder_2)
    os.makedirs(os.path.join(out, "t5_tiny_sharded"), exist_ok=True)
    t5.to(torch.float32).save_pretrained(os.path.join(out, "t5_tiny_sharded"), safe_serialization=True,
                                         max_shard_size="40KB")
    t5 = t5.double()

    # ---- CLIP ----
    def clip_cfg(eos):
        return CLIPTextConfig(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                              num_attention_heads=4, max_position_embeddings=24, hidden_act="quick_gelu",
                              layer_norm_eps=1e-5, bos_token_id=0, eos_token_id=eos, pad_token_id=1,
                              attention_dropout=0.0)
    clip = CLIPTextModel(clip_cfg(2)).eval().double()
    clip.config._attn_implementation = "eager"
    redraw(clip, gen)
    clip = clip.float().double()
    B, L = 2, 16
    ids = torch.randint(2, 98, (B, L), generator=gen, dtype=torch.int32)
    ids[:, 0] = 97  # a BOS-like id below the EOS
    ids[0, 9:] = 98
    ids[1, 13:] = 98
    ids[0, 4] = 7
    ids[1, 2] = 7
    mask = torch.ones(B, L, dtype=torch.int32)
    mask[0, 10:] = 0
    mask[1, 14:] = 0
    with torch.no_grad():
        o = clip(input_ids=ids.long())
        om = clip(input_ids=ids.long(), attention_mask=mask.long())
        o32 = clip.float()(input_ids=ids.long())
    meta["f32_err_clip"] = "%.3g" % rel_err(o32.last_hidden_state, o.last_hidden_state)
    clip = clip.double()
    t["in.clip.ids"], t["in.clip.mask"] = ids, mask
    t["ref.clip.hidden"], t["ref.clip.pooled"] = o.last_hidden_state, o.pooler_output
    t["ref.clip.hidden_masked"], t["ref.clip.pooled_masked"] = om.last_hidden_state, om.pooler_output
    save_model(clip, os.path.join(out, "clip_tiny"), torch.float32)
    # the same weights with a non-legacy eos_token_id: pooled at the first 7
    clip_e = CLIPTextModel(clip_cfg(7)).eval().double()
    clip_e.config._attn_implementation = "eager"
    clip_e.load_state_dict(clip.state_dict())
    with torch.no_grad():
        t["ref.clip_eos.pooled"] = clip_e(input_ids=ids.long()).pooler_output
    save_model(clip_e, os.path.join(out, "clip_tiny_eos"), torch.float32)

    t = {k: v.contiguous() for k, v in t.items()}
    save_file(t, os.path.join(out, "text_ref.safetensors"), metadata=meta)
    print("wrote", out, meta)


def real(out, t5_layers, device):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(4321)
    meta = {}
    t = {}
    dev = torch.device(device)
    # ---- T5-XXL ----
    tc = T5Config(vocab_size=32128, d_model=4096, d_kv=64, num_heads=64, d_ff=10240, num_layers=t5_layers,
                  num_decoder_layers=t5_layers, relative_attention_num_buckets=32,
                  relative_attention_max_distance=128, feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6,
                  dropout_rate=0.0, tie_word_embeddings=False)
    with dev:
        t5 = T5EncoderModel(tc).eval().to(torch.bfloat16)
    t5.config._attn_implementation = "eager"
    B, L = 2, 512
    ids = torch.randint(2, 32128, (B, L), generator=gen, dtype=torch.int32)
    ids[0, 300] = 1
    ids[0, 301:] = 0
    ids[1, L - 1] = 1
    with torch.no_grad():
        hb = t5(input_ids=ids.long().to(dev)).last_hidden_state.float().cpu()
        save_model(t5, os.path.join(out, "t5"), torch.bfloat16)
        t5 = t5.float()
        h = t5(input_ids=ids.long().to(dev)).last_hidden_state.cpu()
    del t5
    meta["hf_bf16_err_t5"] = "%.4g" % rel_err(hb, h)
    meta["t5_layers"] = str(t5_layers)
    t["in.t5.ids"], t["ref.t5.hidden"] = ids, h
    torch.cuda.empty_cache() if dev.type == "cuda" else None
    # ---- CLIP-L ----
    cc = CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                        num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                        layer_norm_eps=1e-5, bos_token_id=0, eos_token_id=2, pad_token_id=1, attention_dropout=0.0,
                        projection_dim=768)
    with dev:
        clip = CLIPTextModel(cc).eval().to(torch.bfloat16)
    clip.config._attn_implementation = "eager"
    B, L = 2, 77
    ids = torch.randint(0, 49406, (B, L), generator=gen, dtype=torch.int32)
    ids[:, 0] = 49406
    ids[0, 20:] = 49407
    ids[1, 76] = 49407
    with torch.no_grad():
        ob = clip(input_ids=ids.long().to(dev))
        save_model(clip, os.path.join(out, "clip"), torch.bfloat16)
        clip = clip.float()
        o = clip(input_ids=ids.long().to(dev))
    meta["hf_bf16_err_clip_hidden"] = "%.4g" % rel_err(ob.last_hidden_state.float().cpu(), o.last_hidden_state.cpu())
    meta["hf_bf16_err_clip_pooled"] = "%.4g" % rel_err(ob.pooler_output.float().cpu(), o.pooler_output.cpu())
    t["in.clip.ids"] = ids
    t["ref.clip.hidden"], t["ref.clip.pooled"] = o.last_hidden_state.cpu(), o.pooler_output.cpu()
    t = {k: v.contiguous() for k, v in t.items()}
    save_file(t, os.path.join(out, "refs.safetensors"), metadata=meta)
    print("wrote", out, json.dumps(meta))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--real":
        if len(args) < 2:
            sys.exit("usage: text_encoder_ref.py --real OUTDIR [--t5-layers N] [--device cuda]")
        layers = int(args[args.index("--t5-layers") + 1]) if "--t5-layers" in args else 24
        device = args[args.index("--device") + 1] if "--device" in args else ("cuda" if torch.cuda.is_available() else "cpu")
        real(args[1], layers, device)
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        tiny(args[0] if args else os.path.join(here, "..", "fixtures", "text"))
