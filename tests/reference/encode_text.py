#!/usr/bin/env python3
"""encode_text.py — the PyTorch reference for orakul's text embeddings.
orakul reads captions itself (issue #28: core/text tokenizers, the T5/CLIP
text_encoder components, train/text_glue.c and its text cache); this script is
what it was checked against, and the way to give FLUX.2 real text conditioning
until orakul encodes Mistral / Qwen3. For every image in a dataset folder it
reads the caption (<stem><caption_ext>, the same rules as the trainer:
[trigger] replaced, the trigger word prepended when missing) and writes
<stem>.te.safetensors next to the image, which the trainer takes as an
override of the encoded caption:

    txt  F32 (T, context_dim)   the DiT's text tokens
    vec  F32 (vec_dim)          FLUX.1 only: CLIP-L pooled output
    __metadata__: format "orakul-te/1", family, encoder, caption

FLUX.1 (dev/schnell): T5-XXL encoder last_hidden_state, max_length 512 (256
for schnell), padded; plus CLIP-L pooler_output (max_length 77).
FLUX.2 dev: Mistral-Small-3.x hidden states of layers 10, 20, 30 stacked on
the feature axis (3 x 5120 = 15360), max_length 512. FLUX.2 klein: Qwen3
(4B: 3 x 2560, 9B: 3 x 4096) layers 9, 18, 27, chat template applied.

Usage (models from the local Hugging Face cache or a path; needs torch and
transformers):
  python3 tests/reference/encode_text.py --family flux1 --folder data/my_set \
      [--t5 google/t5-v1_1-xxl] [--clip openai/clip-vit-large-patch14] [--trigger sks]
  python3 tests/reference/encode_text.py --family flux2 --folder data/my_set --llm mistralai/Mistral-Small-3.1-24B-Instruct-2503
  python3 tests/reference/encode_text.py --family klein --folder data/my_set --llm Qwen/Qwen3-4B
The trainer logs at start how many images took these files.
"""
import argparse
import os
import sys

IMAGE_EXT = (".jpg", ".jpeg", ".png", ".webp")


def captions(folder, caption_ext, trigger, default_caption):
    ext = caption_ext if caption_ext.startswith(".") else "." + caption_ext
    for name in sorted(os.listdir(folder)):
        if name.startswith(".") or not name.lower().endswith(IMAGE_EXT):
            continue
        stem = os.path.splitext(name)[0]
        cap_path = os.path.join(folder, stem + ext)
        cap = default_caption or ""
        if os.path.exists(cap_path):
            with open(cap_path, encoding="utf-8") as f:
                cap = f.read().strip()
        if trigger:
            cap = cap.replace("[trigger]", trigger)
            if trigger not in cap:
                cap = trigger + " " + cap
        yield stem, cap


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=["flux1", "flux1-schnell", "flux2", "klein"], required=True)
    ap.add_argument("--folder", required=True)
    ap.add_argument("--caption-ext", default=".txt")
    ap.add_argument("--default-caption", default="")
    ap.add_argument("--trigger", default=None)
    ap.add_argument("--t5", default="google/t5-v1_1-xxl")
    ap.add_argument("--clip", default="openai/clip-vit-large-patch14")
    ap.add_argument("--llm", default=None)
    ap.add_argument("--device", default="cuda" if os.environ.get("CUDA_VISIBLE_DEVICES", "0") != "" else "cpu")
    ap.add_argument("--max-length", type=int, default=0)
    a = ap.parse_args()

    import torch
    from safetensors.torch import save_file
    import transformers as tf

    dev = a.device if (a.device != "cuda" or torch.cuda.is_available()) else "cpu"
    items = list(captions(a.folder, a.caption_ext, a.trigger, a.default_caption))
    if not items:
        sys.exit(f"{a.folder}: no images")

    if a.family.startswith("flux1"):
        T = a.max_length or (256 if a.family == "flux1-schnell" else 512)
        t5_tok = tf.T5TokenizerFast.from_pretrained(a.t5)
        t5 = tf.T5EncoderModel.from_pretrained(a.t5, torch_dtype=torch.bfloat16).to(dev).eval()
        clip_tok = tf.CLIPTokenizer.from_pretrained(a.clip)
        clip = tf.CLIPTextModel.from_pretrained(a.clip, torch_dtype=torch.bfloat16).to(dev).eval()
        for stem, cap in items:
            with torch.no_grad():
                ids = t5_tok(cap, max_length=T, padding="max_length", truncation=True, return_tensors="pt").input_ids
                txt = t5(input_ids=ids.to(dev)).last_hidden_state[0].float().cpu()
                cids = clip_tok(cap, max_length=77, padding="max_length", truncation=True, return_tensors="pt").input_ids
                vec = clip(input_ids=cids.to(dev)).pooler_output[0].float().cpu()
            out = os.path.join(a.folder, stem + ".te.safetensors")
            save_file({"txt": txt.contiguous(), "vec": vec.contiguous()}, out,
                      metadata={"format": "orakul-te/1", "family": "flux1", "encoder": f"{a.t5}+{a.clip}", "caption": cap})
            print(out)
        return

    if not a.llm:
        sys.exit("--llm is required for FLUX.2 (Mistral-Small for dev, Qwen3 for klein)")
    T = a.max_length or 512
    layers = (10, 20, 30) if a.family == "flux2" else (9, 18, 27)
    tok = tf.AutoTokenizer.from_pretrained(a.llm)
    llm = tf.AutoModelForCausalLM.from_pretrained(a.llm, torch_dtype=torch.bfloat16).to(dev).eval()
    for stem, cap in items:
        if a.family == "klein":
            text = tok.apply_chat_template([{"role": "user", "content": cap}], tokenize=False,
                                           add_generation_prompt=True, enable_thinking=False)
        else:
            text = cap
        enc = tok(text, max_length=T, padding="max_length", truncation=True, return_tensors="pt")
        with torch.no_grad():
            hs = llm(input_ids=enc.input_ids.to(dev), attention_mask=enc.attention_mask.to(dev),
                     output_hidden_states=True).hidden_states
        txt = torch.cat([hs[i][0] for i in layers], dim=-1).float().cpu()  # (T, 3*hidden)
        out = os.path.join(a.folder, stem + ".te.safetensors")
        save_file({"txt": txt.contiguous()}, out,
                  metadata={"format": "orakul-te/1", "family": a.family, "encoder": a.llm, "caption": cap})
        print(out)


if __name__ == "__main__":
    main()
