#!/usr/bin/env python3
"""tokenizer_ref.py — the expected token ids for tests/text/test_tokenizer.c, from
Hugging Face `tokenizers` / transformers (the reference orakul's tokenizers must match).

Reads tests/fixtures/text/captions.txt (format: see make_captions.py; invalid UTF-8 is
decoded with errors="replace", which is what orakul does to it too) and writes
tests/fixtures/text/tok/expected.txt.gz:

    T <name> <n_pre> <n_post> <pad_id> <max_length>   one line per tokenizer
    C <name> <caption index> <n> <ids...>             every caption, every tokenizer

where the ids are the full encoding (special tokens added, no truncation, no padding).
For every caption and tokenizer it also checks that transformers' call as the FLUX
pipelines make it (padding="max_length", max_length, truncation=True) equals
pre + body[:max_length - n_pre - n_post] + post + pad, so the C test can derive it.

Tokenizers (files under tests/fixtures/text/tok/):
  clip   clip/bpe_simple_vocab_16e6.txt.gz (open_clip's CLIP BPE, MIT), through
         transformers' CLIPTokenizer built from it (as FLUX's tokenizer/ folder loads);
  t5     t5/tokenizer.json.gz: a SentencePiece Unigram model trained here (nmt_nfkc
         normalization: T5's precompiled charsmap) converted by transformers' T5Tokenizer;
  t5_*   the same model with the normalizer / pre-tokenizer of other transformers
         versions (t5_variants.json: JSON patches the C test applies too);
  t5spm  t5spm/spiece.model: a small SentencePiece model (identity normalization) read by
         transformers' T5Tokenizer (orakul reads the .model itself);
  bbpe   bbpe/tokenizer.json.gz: a byte-level BPE (Qwen2-style regex, added tokens),
         trained here with `tokenizers` (the path FLUX.2's Mistral/Qwen3 tokenizers take).

Usage: python3 tests/reference/tokenizer_ref.py [--regen]   (--regen retrains t5 and bbpe)
Needs: tokenizers, transformers, sentencepiece (for --regen), open_clip_torch (for --regen).
"""
import copy
import gzip
import io
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "text")
TOK = os.path.join(FIX, "tok")


def read_captions():
    out = []
    for raw in open(os.path.join(FIX, "captions.txt"), "rb").read().split(b"\n")[:-1]:
        if raw.startswith(b"@@x "):
            b, i, r = bytearray(), 0, raw[4:]
            while i < len(r):
                if r[i] == 0x5C and i + 1 < len(r):
                    c = r[i + 1]
                    if c == ord("n"): b.append(10); i += 2; continue
                    if c == ord("r"): b.append(13); i += 2; continue
                    if c == ord("t"): b.append(9); i += 2; continue
                    if c == 0x5C: b.append(0x5C); i += 2; continue
                    if c == ord("x") and i + 3 < len(r):
                        b.append(int(r[i + 2:i + 4], 16)); i += 4; continue
                b.append(r[i]); i += 1
            raw = bytes(b)
        out.append(raw.decode("utf-8", errors="replace"))
    return out


def write_gz(path, data: bytes):
    with open(path, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write(data)


def clip_tokenizer():
    from transformers import CLIPTokenizer
    gzpath = os.path.join(TOK, "clip", "bpe_simple_vocab_16e6.txt.gz")
    merges = gzip.open(gzpath).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    merges = [tuple(m.split()) for m in merges]
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    chars = [chr(c) for c in cs]
    vocab = chars + [c + "</w>" for c in chars] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    return CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=merges)


def regen_t5(captions):
    import glob
    import sentencepiece as spm
    from transformers import T5Tokenizer
    tmp = tempfile.mkdtemp()
    try:
        text = [c for c in captions if c.strip()]
        for f in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:60]:
            text += open(f, encoding="utf-8", errors="replace").read().split("\n")
        open(os.path.join(tmp, "train.txt"), "w").write("\n".join(text))
        spm.SentencePieceTrainer.train(
            input=os.path.join(tmp, "train.txt"), model_prefix=os.path.join(tmp, "spiece"), vocab_size=2000,
            model_type="unigram", normalization_rule_name="nmt_nfkc", character_coverage=0.9995,
            pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2)
        os.makedirs(os.path.join(tmp, "in"))
        shutil.copy(os.path.join(tmp, "spiece.model"), os.path.join(tmp, "in", "spiece.model"))
        T5Tokenizer.from_pretrained(os.path.join(tmp, "in")).save_pretrained(os.path.join(tmp, "out"))
        os.makedirs(os.path.join(TOK, "t5"), exist_ok=True)
        write_gz(os.path.join(TOK, "t5", "tokenizer.json.gz"), open(os.path.join(tmp, "out", "tokenizer.json"), "rb").read())
    finally:
        shutil.rmtree(tmp)


def regen_t5spm(captions):
    """A small spiece.model (identity normalization, a user-defined piece): the loader's
    spiece.model path, checked against transformers' T5Tokenizer reading the same file."""
    import sentencepiece as spm
    tmp = tempfile.mkdtemp()
    try:
        open(os.path.join(tmp, "train.txt"), "w").write("\n".join(c for c in captions if c.strip()))
        spm.SentencePieceTrainer.train(
            input=os.path.join(tmp, "train.txt"), model_prefix=os.path.join(tmp, "spiece"), vocab_size=600,
            model_type="unigram", normalization_rule_name="identity", character_coverage=0.995,
            pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2, user_defined_symbols=["ohwx"])
        os.makedirs(os.path.join(TOK, "t5spm"), exist_ok=True)
        shutil.copy(os.path.join(tmp, "spiece.model"), os.path.join(TOK, "t5spm", "spiece.model"))
    finally:
        shutil.rmtree(tmp)


def regen_bbpe(captions):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers, Regex, AddedToken
    qwen = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
            r"\s+(?!\S)|\s+")
    tok = Tokenizer(models.BPE(byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(qwen), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator([c for c in captions if c], trainer=trainer)
    tok.add_tokens([AddedToken("[trigger]", normalized=True, special=False),
                    AddedToken("ohwx", normalized=False, special=False, single_word=True),
                    AddedToken("<think>", normalized=False, special=False, lstrip=True, rstrip=True)])
    from tokenizers import processors
    tok.post_processor = processors.TemplateProcessing(
        single="<|im_start|> $A <|im_end|>", special_tokens=[("<|im_start|>", 1), ("<|im_end|>", 2)])
    os.makedirs(os.path.join(TOK, "bbpe"), exist_ok=True)
    write_gz(os.path.join(TOK, "bbpe", "tokenizer.json.gz"), tok.to_str().encode("utf-8"))


def substitute(v, base):
    """t5_variants.json's "@base_normalizer" stands for the base file's normalizer."""
    if v == "@base_normalizer":
        return copy.deepcopy(base["normalizer"])
    if isinstance(v, list):
        return [substitute(x, base) for x in v]
    if isinstance(v, dict):
        return {k: substitute(x, base) for k, x in v.items()}
    return v


def load_json_gz(path):
    return json.loads(gzip.open(path).read().decode("utf-8"))


def main():
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast
    captions = read_captions()
    if "--regen" in sys.argv:
        regen_t5(captions)
        regen_t5spm(captions)
        regen_bbpe(captions)
    variants = json.load(open(os.path.join(TOK, "t5_variants.json")))

    # name -> (tokenizers.Tokenizer, pad_id, max_length, transformers-style callable)
    toks = {}
    clip = clip_tokenizer()
    toks["clip"] = (clip.backend_tokenizer, clip.pad_token_id, 77, clip)
    t5json = load_json_gz(os.path.join(TOK, "t5", "tokenizer.json.gz"))
    for name, patch in [("t5", {})] + sorted(variants.items()):
        j = copy.deepcopy(t5json)
        for k, v in patch.items():
            j[k] = substitute(copy.deepcopy(v), t5json)
        bt = Tokenizer.from_str(json.dumps(j))
        ft = PreTrainedTokenizerFast(tokenizer_object=bt, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
        toks[name] = (bt, ft.pad_token_id, 512 if name != "t5_schnell" else 256, ft)
    from transformers import T5Tokenizer
    ts = T5Tokenizer.from_pretrained(os.path.join(TOK, "t5spm"))
    toks["t5spm"] = (ts.backend_tokenizer, ts.pad_token_id, 512, ts)
    bb = Tokenizer.from_str(gzip.open(os.path.join(TOK, "bbpe", "tokenizer.json.gz")).read().decode("utf-8"))
    fb = PreTrainedTokenizerFast(tokenizer_object=copy.deepcopy(bb), pad_token="<|endoftext|>")
    toks["bbpe"] = (bb, fb.pad_token_id, 64, fb)

    lines, rows = [], {}
    for name, (bt, pad, maxlen, ft) in toks.items():
        bt.no_truncation()
        bt.no_padding()
        plain = bt.encode("").ids
        empty_body = bt.encode("", add_special_tokens=False).ids
        assert empty_body == [], (name, empty_body)
        probe = bt.encode("a b c").ids
        body = bt.encode("a b c", add_special_tokens=False).ids
        n_pre = next(i for i in range(len(probe)) if probe[i:i + len(body)] == body)
        n_post = len(probe) - n_pre - len(body)
        assert len(plain) == n_pre + n_post
        lines.append("T %s %d %d %d %d" % (name, n_pre, n_post, pad, maxlen))
        for i, cap in enumerate(captions):
            bt.no_truncation()  # transformers' call below sets them on the backend
            bt.no_padding()
            ids = bt.encode(cap).ids
            rows.setdefault(i, []).append("C %s %d %d %s" % (name, i, len(ids), " ".join(map(str, ids))))
            # FLUX's call, checked against the derivation the C test makes.
            got = ft(cap, padding="max_length", max_length=maxlen, truncation=True)
            keep = maxlen - n_pre - n_post
            b = ids[n_pre:len(ids) - n_post]
            exp = ids[:n_pre] + b[:keep] + ids[len(ids) - n_post:]
            mask = [1] * len(exp) + [0] * (maxlen - len(exp))
            exp = exp + [pad] * (maxlen - len(exp))
            assert got["input_ids"] == exp, (name, i, cap, got["input_ids"], exp)
            assert got["attention_mask"] == mask, (name, i)
    for i in range(len(captions)):  # caption-major: the t5 variants' rows compress together
        lines += rows[i]
    out = os.path.join(TOK, "expected.txt.gz")
    write_gz(out, ("\n".join(lines) + "\n").encode("utf-8"))
    print("%s: %d tokenizers x %d captions" % (out, len(toks), len(captions)))


if __name__ == "__main__":
    main()
