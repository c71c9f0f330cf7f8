#!/usr/bin/env python3
"""Reference for the text conditioner (core/text/conditioner.h): tiny tokenizers,
a tiny CLIP text model of width 16 (FLUX.1's tiny test transformer,
tests/fixtures/flux1_small_diffusers.safetensors, takes txt of width 32 and
vec of width 16), and what FLUX.1's pipeline gives for a few captions:

  T5:   ids = tokenizer_2(caption, max_length T, truncation, padding
        "max_length"); txt = T5EncoderModel(ids).last_hidden_state (no
        attention mask, as diffusers' FluxPipeline) and, for attn_masking,
        with the mask;
  CLIP: ids = tokenizer(caption, max_length 24 (the tiny model's positions; 77
        for CLIP-L), truncation, padding); vec = CLIPTextModel(ids).pooler_output
        (no mask).

Writes tests/fixtures/text/cond/:
  tokenizer/tokenizer.json     CLIP-like BPE (lowercase, "</w>" word ends,
                               <|startoftext|> $A <|endoftext|>, padded with
                               <|endoftext|> = 98, the highest id: the legacy
                               config pools at argmax(ids)), vocab 99
  tokenizer_2/tokenizer.json   T5-like Unigram (Metaspace, "$A </s>", <pad> 0,
                               </s> 1, <unk> 2), vocab <= 64
  clip16/{config.json, model.safetensors}  CLIPTextModel, hidden 16, 2 layers
  cond_ref.safetensors         for T in (8, 16): ids.t5.T<T> I32 (K, T),
                               ref.txt.T<T>, ref.txt_masked.T<T> F64 (K, T, 32);
                               ids.clip I32 (K, 24), ref.vec F64 (K, 16);
                               ref.txt_fp8.T16: T5 with its linear weights E4M3,
                               per-row scales (model.quantize_te, qfloat8);
                               metadata "captions": the K captions as JSON
The T5 weights are tests/fixtures/text/t5_tiny (text_encoder_ref.py).
Truth is `tokenizers` and transformers in float64.
Usage: python3 tests/reference/text_cond_ref.py [repo root]
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import CLIPTextConfig, CLIPTextModel, T5EncoderModel

from text_encoder_ref import redraw  # the weight draw the t5clip fixtures use (same folder)

CAPTIONS = [
    "a photo of ohwx dog on the beach",
    "",
    "A close-up portrait of a woman with red hair, soft light, film grain, shot on 35mm, bokeh in the background",
    "café crème, 2 cups!",
    "[trigger] riding a bike",
]

TRAIN = [
    "a photo of a dog", "a photo of a cat on the beach", "portrait of a woman with red hair",
    "a man riding a bike in the city", "soft light, film grain, shot on 35mm", "two cups of coffee on a table",
    "a close up of a flower", "the background is blurry", "ohwx dog playing in the park",
] * 20


def clip_tokenizer():
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tr = trainers.BpeTrainer(vocab_size=98, special_tokens=["<|startoftext|>", "<unk>"], end_of_word_suffix="</w>",
                             show_progress=False)
    tok.train_from_iterator(TRAIN, tr)
    assert tok.get_vocab_size() <= 98, tok.get_vocab_size()
    eos = tok.get_vocab_size()
    tok.add_special_tokens(["<|endoftext|>"])
    assert tok.token_to_id("<|endoftext|>") == eos
    bos = tok.token_to_id("<|startoftext|>")
    tok.post_processor = processors.TemplateProcessing(single="<|startoftext|> $A <|endoftext|>",
                                                       special_tokens=[("<|startoftext|>", bos), ("<|endoftext|>", eos)])
    return tok, eos


def t5_tokenizer():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tr = trainers.UnigramTrainer(vocab_size=60, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                 show_progress=False, max_piece_length=6)
    tok.train_from_iterator(TRAIN, tr)
    assert tok.get_vocab_size() <= 64, tok.get_vocab_size()
    assert tok.token_to_id("<pad>") == 0 and tok.token_to_id("</s>") == 1 and tok.token_to_id("<unk>") == 2
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tok


def ids_of(tok, L, pad_id, pad_token):
    tok.enable_truncation(max_length=L)
    tok.enable_padding(length=L, pad_id=pad_id, pad_token=pad_token)
    enc = tok.encode_batch(CAPTIONS)
    tok.no_truncation()
    tok.no_padding()
    ids = torch.tensor([e.ids for e in enc], dtype=torch.int32)
    mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.int32)
    return ids, mask


def main(root):
    fx = os.path.join(root, "tests", "fixtures", "text")
    out = os.path.join(fx, "cond")
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    os.makedirs(os.path.join(out, "tokenizer_2"), exist_ok=True)
    ctok, eos = clip_tokenizer()
    ttok = t5_tokenizer()
    # padding is the pipeline's (max_length); the files carry the pad token only
    ctok.enable_padding(pad_id=eos, pad_token="<|endoftext|>")
    ctok.save(os.path.join(out, "tokenizer", "tokenizer.json"))
    ctok.no_padding()
    ttok.enable_padding(pad_id=0, pad_token="<pad>")
    ttok.save(os.path.join(out, "tokenizer_2", "tokenizer.json"))
    ttok.no_padding()

    t = {}
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(4321)
    t5 = T5EncoderModel.from_pretrained(os.path.join(fx, "t5_tiny")).eval().double()
    t5.config._attn_implementation = "eager"
    for T in (8, 16):
        ids, mask = ids_of(ttok, T, 0, "<pad>")
        with torch.no_grad():
            t["ref.txt.T%d" % T] = t5(input_ids=ids.long()).last_hidden_state
            t["ref.txt_masked.T%d" % T] = t5(input_ids=ids.long(), attention_mask=mask.long()).last_hidden_state
        t["ids.t5.T%d" % T] = ids
    # model.quantize_te (qfloat8): T5's linear weights E4M3 with one scale per
    # output row, s = max|row| / 448 (core/numerics/quantize.h); the reference
    # runs on the dequantized weights
    t5q = T5EncoderModel.from_pretrained(os.path.join(fx, "t5_tiny")).eval().double()
    t5q.config._attn_implementation = "eager"
    sd = {}
    for k, v in t5q.state_dict().items():
        if k.endswith(("q.weight", "k.weight", "v.weight", "o.weight", "wi_0.weight", "wi_1.weight", "wo.weight")):
            w = v.float()
            s = (w.abs().amax(dim=1, keepdim=True) / 448.0).clamp(min=torch.finfo(torch.float32).tiny)
            sd[k] = (w / s).to(torch.float8_e4m3fn).double() * s.double()
        else:
            sd[k] = v
    t5q.load_state_dict(sd, strict=False)
    ids = t["ids.t5.T16"]
    with torch.no_grad():
        t["ref.txt_fp8.T16"] = t5q(input_ids=ids.long()).last_hidden_state

    cc = CLIPTextConfig(vocab_size=99, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                        num_attention_heads=2, max_position_embeddings=24, hidden_act="quick_gelu",
                        layer_norm_eps=1e-5, bos_token_id=0, eos_token_id=2, pad_token_id=1)
    clip = CLIPTextModel(cc).eval().double()
    clip.config._attn_implementation = "eager"
    redraw(clip, gen)  # CLIP has no T5-only names: the same draws as before
    clip = clip.float().double()
    clip.to(torch.float32).save_pretrained(os.path.join(out, "clip16"), safe_serialization=True)
    clip = clip.double()
    ids, _ = ids_of(ctok, 24, eos, "<|endoftext|>")
    assert int(ids.max()) == eos
    with torch.no_grad():
        t["ref.vec"] = clip(input_ids=ids.long()).pooler_output
    t["ids.clip"] = ids
    t = {k: v.contiguous() for k, v in t.items()}
    save_file(t, os.path.join(out, "cond_ref.safetensors"), metadata={"captions": json.dumps(CAPTIONS)})
    print("wrote", out, {k: tuple(v.shape) for k, v in t.items()})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
