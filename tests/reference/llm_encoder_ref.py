#!/usr/bin/env python3
"""llm_encoder_ref.py — the reference for the llm text-encoder plugin
(plugins/text_encoders/llm): FLUX.2's text encoders, decoder-only language
models run forward only, taken exactly as diffusers' pipelines take them
(diffusers 0.42 pipelines/flux2/pipeline_flux2.py
_get_mistral_3_small_prompt_embeds and pipeline_flux2_klein.py
_get_qwen3_prompt_embeds):

    output = text_encoder(input_ids, attention_mask, output_hidden_states=True)
    out = torch.stack([output.hidden_states[k] for k in layers], dim=1)  # (B, 3, L, D)
    embeds = out.permute(0, 2, 1, 3).reshape(B, L, 3 * D)

hidden_states[0] is the embedding output, hidden_states[k] the output of
decoder layer k-1 (no final norm, except the last one, which transformers
replaces by the normed last_hidden_state). Every position is kept, padded
ones too, so the padding side and transformers' handling of the mask
(sdpa: causal AND the padding mask; a query row with no visible key gives
0, PyTorch's safe softmax) are part of the truth. Truth is transformers'
forward, not anything orakul wrote.

Usage:
  python3 llm_encoder_ref.py [OUTDIR]
      TINY models on the CPU (default OUTDIR: tests/fixtures/text). Writes
        llm_mistral3_tiny/   a Mistral3ForConditionalGeneration checkpoint in
                             transformers 4's layout (language_model.model.*,
                             plus vision_tower.* / multi_modal_projector.* /
                             language_model.lm_head.weight that the encoder
                             must skip), two shards + index, config.json with
                             text_config in transformers 4's words (rope_theta)
                             (5 layers; layers [1, 2, 4] used, so layer 4 is
                             never loaded)
        llm_mistral3_tiny_v5/  the same weights in transformers 5's layout
                             (model.language_model.*, rope_parameters), one file
        llm_qwen3_tiny/      a Qwen3ForCausalLM checkpoint (model.layers.*),
                             4 layers, layers [1, 3, 4] used (4 = the last:
                             the final norm applies, as transformers gives it)
        llm_ref.safetensors  inputs and float64 outputs
  python3 llm_encoder_ref.py --real OUTDIR [--which mistral|qwen3|both] [--device cuda] [--small]
      The REAL shapes with random bf16 weights (on the GPU machine):
      Mistral-Small-3.x's language model (hidden 5120, 32 heads of 128, 8 kv
      heads, intermediate 32768, vocab 131072, rope_theta 1e9; the 30 layers
      the pipeline reads, config.json saying 40) and Qwen3-4B (hidden 2560,
      32 heads of 128, 8 kv heads, intermediate 9728, vocab 151936, rope_theta
      1e6; 27 of 36 layers), saved as OUTDIR/<which>/ (config.json + shards
      of 4 layers + index) with OUTDIR/<which>_ref.safetensors: in.ids, in.mask
      (B = 2, L = 512, left- and right-padded rows), ref.f32 (the float32
      forward of the bf16 weights: the truth) and, in the metadata,
      transformers' own bf16 forward's error against it (hf_bf16_max,
      hf_bf16_mean, scale = max |ref|). --small: the same layer counts at tiny
      widths (a CPU smoke test: --device cpu).

Tiny configs: hidden 32, 4 heads of head_dim 12 (not hidden / heads, as
Mistral-Small's 128 is not 5120 / 32), 2 kv heads (GQA), intermediate 40,
vocab 64, rope_theta 1e9 (Mistral) / 1e6 (Qwen3), rms eps 1e-5 / 1e-6.
Weights redrawn so mapping mistakes show: linear ~ N(0, 1/fan_in), norm
scales ~ U(0.5, 1.5), the embedding table ~ N(0, 1).
Inputs: B = 3, L = 12; padding 5, 0 and 1 positions; pad id 11.
Fixture tensors (llm_ref.safetensors): in.ids I32 (3, 12), in.mask_left and
in.mask_right I32 (3, 12) with in.ids_left / in.ids_right the ids padded on
that side; ref.<m>.left / ref.<m>.right F64 (3, 12, 3·32) for m = mistral3,
qwen3. Metadata: f32_err_<m> = transformers' float32 forward against its
float64 one (max abs error / max |ref|), for scale.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import MistralConfig, MistralModel, Qwen3Config, Qwen3Model

HERE = os.path.dirname(os.path.abspath(__file__))
PAD = 11


def redraw(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed" in name:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif "norm" in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / p.shape[-1] ** 0.5)


def stacked(model, ids, mask, layers):
    """diffusers' stacking of output.hidden_states[k], k in layers."""
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
        hs = torch.stack([out.hidden_states[k] for k in layers], dim=1)
        B, C, L, D = hs.shape
        return hs.permute(0, 2, 1, 3).reshape(B, L, C * D)


def tiny_cfg(kind):
    common = dict(vocab_size=64, hidden_size=32, intermediate_size=40, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=12, max_position_embeddings=128, pad_token_id=PAD,
                  bos_token_id=1, eos_token_id=2, attn_implementation="sdpa")
    if kind == "mistral3":
        return MistralConfig(num_hidden_layers=5, rms_norm_eps=1e-5, sliding_window=None,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e9}, **common)
    return Qwen3Config(num_hidden_layers=4, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **common)


def make_inputs(gen):
    B, L, pads = 3, 12, (5, 0, 1)
    real = [torch.randint(0, 64, (L - p,), generator=gen, dtype=torch.int64) for p in pads]
    for r in real:
        r[r == PAD] = 3  # pad id only where padding is
    ids_l = torch.full((B, L), PAD, dtype=torch.int64)
    ids_r = torch.full((B, L), PAD, dtype=torch.int64)
    m_l = torch.zeros((B, L), dtype=torch.int64)
    m_r = torch.zeros((B, L), dtype=torch.int64)
    for b, (p, r) in enumerate(zip(pads, real)):
        ids_l[b, p:] = r
        m_l[b, p:] = 1
        ids_r[b, :L - p] = r
        m_r[b, :L - p] = 1
    return ids_l, m_l, ids_r, m_r


def save_sharded(sd, outdir, n_shards):
    names = sorted(sd)
    per = (len(names) + n_shards - 1) // n_shards
    wmap = {}
    for i in range(n_shards):
        part = names[i * per:(i + 1) * per]
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, n_shards)
        save_file({k: sd[k].contiguous() for k in part}, os.path.join(outdir, fn))
        for k in part:
            wmap[k] = fn
    with open(os.path.join(outdir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(t.numel() * t.element_size() for t in sd.values())},
                   "weight_map": wmap}, f, indent=1)


def tiny(outdir):
    gen = torch.Generator().manual_seed(29)
    ids_l, m_l, ids_r, m_r = make_inputs(gen)
    fx = {"in.ids_left": ids_l.int(), "in.mask_left": m_l.int(), "in.ids_right": ids_r.int(),
          "in.mask_right": m_r.int()}
    meta = {}
    for kind, layers in (("mistral3", (1, 2, 4)), ("qwen3", (1, 3, 4))):
        cfg = tiny_cfg(kind)
        model = (MistralModel if kind == "mistral3" else Qwen3Model)(cfg).double().eval()
        redraw(model, gen)
        for side, ids, m in (("left", ids_l, m_l), ("right", ids_r, m_r)):
            ref = stacked(model, ids, m, layers)
            fx["ref.%s.%s" % (kind, side)] = ref
            m32 = (MistralModel if kind == "mistral3" else Qwen3Model)(cfg).eval()
            m32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
            got = stacked(m32, ids, m, layers).double()
            meta["f32_err_%s_%s" % (kind, side)] = "%.3g" % ((got - ref).abs().max() / ref.abs().max()).item()
        sd = {k: v.float() for k, v in model.state_dict().items()}
        tc = json.loads(cfg.to_json_string())
        if kind == "mistral3":
            old = {"language_model.model." + k: v for k, v in sd.items()}
            old["language_model.lm_head.weight"] = torch.randn(64, 32, generator=gen)
            old["vision_tower.transformer.layers.0.attention.q_proj.weight"] = torch.randn(16, 16, generator=gen)
            old["vision_tower.ln_pre.weight"] = torch.ones(16)
            old["multi_modal_projector.linear_1.weight"] = torch.randn(32, 16, generator=gen)
            full = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
                    "text_config": tc, "vision_config": {"model_type": "pixtral", "hidden_size": 16},
                    "image_token_index": 10, "spatial_merge_size": 2, "vision_feature_layer": -1}
            d = os.path.join(outdir, "llm_mistral3_tiny")
            os.makedirs(d, exist_ok=True)
            save_sharded(old, d, 2)
            # transformers 4 wrote rope_theta at the top of text_config (5 writes rope_parameters)
            old_tc = dict(tc, rope_theta=tc["rope_parameters"]["rope_theta"])
            del old_tc["rope_parameters"]
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(dict(full, text_config=old_tc), f, indent=1)
            new = {("model.language_model." + k[len("language_model.model."):] if k.startswith("language_model.model.")
                    else "lm_head.weight" if k == "language_model.lm_head.weight" else "model." + k): v
                   for k, v in old.items()}
            d = os.path.join(outdir, "llm_mistral3_tiny_v5")
            os.makedirs(d, exist_ok=True)
            save_file(new, os.path.join(d, "model.safetensors"))
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(full, f, indent=1)
        else:
            d = os.path.join(outdir, "llm_qwen3_tiny")
            os.makedirs(d, exist_ok=True)
            tc["architectures"] = ["Qwen3ForCausalLM"]
            save_file({"model." + k: v for k, v in sd.items()}, os.path.join(d, "model.safetensors"))
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(tc, f, indent=1)
    save_file({k: v.contiguous() for k, v in fx.items()}, os.path.join(outdir, "llm_ref.safetensors"), metadata=meta)
    print("wrote", outdir, meta)


# ---- real shapes (GPU machine) ------------------------------------------------------------------

def real_cfg(which):
    # rope_theta=: transformers 4 keeps it, 5 turns it into rope_parameters (the GPU machine may have either)
    if which == "mistral":
        # Mistral-Small-3.x text_config (FLUX.2-dev's text_encoder)
        return MistralConfig(vocab_size=131072, hidden_size=5120, intermediate_size=32768, num_hidden_layers=40,
                             num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-5,
                             max_position_embeddings=131072, sliding_window=None, pad_token_id=11,
                             rope_theta=1e9,
                             attn_implementation="sdpa"), (10, 20, 30)
    return Qwen3Config(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                       max_position_embeddings=40960, tie_word_embeddings=True, pad_token_id=151643,
                       rope_theta=1e6,
                       attn_implementation="sdpa"), (9, 18, 27)


def real(outdir, which, device, small=False):
    import time
    import transformers
    print("torch", torch.__version__, "transformers", transformers.__version__, "device", device, flush=True)
    cfg, layers = real_cfg(which)
    if small:  # a smoke test of this path and the C side on the CPU: the real layer counts, tiny widths
        cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.head_dim = 1000, 64, 96, 16
        cfg.num_attention_heads, cfg.num_key_value_heads, cfg.pad_token_id = 4, 2, 11
    full_layers = cfg.num_hidden_layers
    cfg_json = json.loads(cfg.to_json_string())
    cfg.num_hidden_layers = max(layers)  # only the layers the pipeline reads: hooks take their outputs
    t0 = time.time()
    torch.manual_seed(29)
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 truth in f32
    torch.set_default_dtype(torch.bfloat16)  # as from_pretrained(torch_dtype=bf16): bf16 parameters,
    with torch.device(device):               # the rotary inv_freq float32 (made with dtype=torch.float)
        model = (MistralModel if which == "mistral" else Qwen3Model)(cfg).eval()
    torch.set_default_dtype(torch.float32)
    assert model.rotary_emb.inv_freq.dtype == torch.float32 and model.embed_tokens.weight.dtype == torch.bfloat16
    with torch.no_grad():  # transformers' init gives N(0, 0.02) linears: norms ~U(0.5, 1.5) to exercise them
        for n, p in model.named_parameters():
            if "norm" in n:
                p.copy_(0.5 + torch.rand_like(p, dtype=torch.float32))
    print("init %.1fs" % (time.time() - t0), flush=True)
    B, L = 2, 512
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, cfg.vocab_size, (B, L), generator=g)
    mask = torch.zeros(B, L, dtype=torch.int64)
    n0, n1 = 77, 301  # row 0 left-padded (Mistral's tokenizer pads left), row 1 right-padded
    mask[0, L - n0:] = 1
    mask[1, :n1] = 1
    ids[mask == 0] = cfg.pad_token_id

    def run(m):
        caps = {}
        hooks = [m.layers[k - 1].register_forward_hook(
            lambda mod, a, o, k=k: caps.__setitem__(k, (o[0] if isinstance(o, tuple) else o).float()))
            for k in layers]
        with torch.no_grad():
            m(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
        for h in hooks:
            h.remove()
        hs = torch.stack([caps[k] for k in layers], dim=1)
        return hs.permute(0, 2, 1, 3).reshape(B, L, -1).cpu()

    t0 = time.time()
    got16 = run(model)
    print("bf16 forward %.1fs" % (time.time() - t0), flush=True)
    d = os.path.join(outdir, which)
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    sd = model.state_dict()  # shards of 4 layers (the index path, and no 35 GB host copy at once)
    wmap, shards = {}, {}
    for k in sd:
        i = int(k.split(".")[1]) // 4 + 1 if k.startswith("layers.") else 0
        shards.setdefault(i, []).append(k)
    n = len(shards)
    for j, (i, keys) in enumerate(sorted(shards.items())):
        fn = "model-%05d-of-%05d.safetensors" % (j + 1, n)
        save_file({"model." + k: sd[k].contiguous().cpu() for k in keys}, os.path.join(d, fn))
        for k in keys:
            wmap["model." + k] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    del sd
    cfg_json["architectures"] = ["MistralForCausalLM" if which == "mistral" else "Qwen3ForCausalLM"]
    cfg_json["num_hidden_layers"] = full_layers
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=1)
    print("saved %.1fs" % (time.time() - t0), flush=True)
    model = model.float()
    t0 = time.time()
    ref = run(model)
    print("f32 forward %.1fs" % (time.time() - t0), flush=True)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    err = (got16 - ref).abs()
    meta = {"hf_bf16_max": "%.6g" % err.max().item(), "hf_bf16_mean": "%.6g" % err.mean().item(),
            "scale": "%.6g" % ref.abs().max().item(), "layers": ",".join(map(str, layers))}
    save_file({"in.ids": ids.int().contiguous(), "in.mask": mask.int().contiguous(), "ref.f32": ref.contiguous()},
              os.path.join(outdir, which + "_ref.safetensors"), metadata=meta)
    print(which, meta, flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "--real":
        outdir = a[1]
        which = a[a.index("--which") + 1] if "--which" in a else "both"
        device = a[a.index("--device") + 1] if "--device" in a else "cuda"
        for w in (("mistral", "qwen3") if which == "both" else (which,)):
            real(outdir, w, device, "--small" in a)
    else:
        tiny(a[0] if a else os.path.join(HERE, "..", "fixtures", "text"))
