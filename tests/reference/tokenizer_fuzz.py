#!/usr/bin/env python3
"""tokenizer_fuzz.py — random strings through orakul's tokenizer (the tok_dump tool of
tests/text) and Hugging Face `tokenizers`, ids compared. Not run by CI (no Python
there); run it after touching core/text, or on a new tokenizer file (a Qwen3 or
Mistral tokenizer.json for issue 29).

Usage:
  python3 tests/reference/tokenizer_fuzz.py BUILD_DIR [--n 5000] [--seed 1] [PATH ...]
PATH: a tokenizer.json, or a folder holding one (default: the fixtures of
tests/fixtures/text/tok, CLIP through transformers' CLIPTokenizer). A mismatch is
reported as explained when the string holds a code point unassigned in Python's
Unicode tables (14.0 on 3.11): the system's Oniguruma/utf8proc and the ones
`tokenizers` bundles disagree on such characters (see <orakul/tokenizer.h>).
"""
import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOK = os.path.join(ROOT, "tests", "fixtures", "text", "tok")


def random_strings(n, seed):
    rng = random.Random(seed)
    pools = [
        lambda: chr(rng.randint(0x20, 0x7E)),
        lambda: chr(rng.randint(0xA0, 0x24F)),
        lambda: chr(rng.randint(0x300, 0x36F)),
        lambda: chr(rng.randint(0x4E00, 0x4E80)),
        lambda: chr(rng.randint(0x1F300, 0x1F6FF)),
        lambda: rng.choice(["\u200d", "\ufe0f", "\u20e3", "\U0001f3fb", "\u200b", "\ufeff", "\u00ad"]),
        lambda: chr(rng.randint(0x1100, 0x11FF)),
        lambda: chr(rng.randint(0xAC00, 0xAC40)),
        lambda: chr(rng.randint(0x1F1E6, 0x1F1FF)),
        lambda: rng.choice([" ", "  ", "\t", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\r", "\x85", "\u2009"]),
        lambda: chr(rng.randint(0x0, 0x1F)) if rng.random() < 0.5 else chr(rng.randint(0x7F, 0x9F)),
        lambda: chr(rng.choice([rng.randint(0x20, 0xD7FF), rng.randint(0xE000, 0xFFFD)])),
        lambda: chr(rng.randint(0x10000, 0x10FFFF)),
        lambda: rng.choice(["'s", "'T", "'re", "\u2019s", "<|endoftext|>", "</s>", "<pad>", "[trigger]", "ohwx",
                            "<think>", "\u2581", "_", "0", "12", "\u0130", "\u00df", "\ufb01", "\u216b", "\uff71"]),
    ]
    out = []
    for _ in range(n):
        s = "".join(rng.choice(pools)() for _ in range(rng.randint(0, 40)))
        out.append(s.replace("\n", " "))
    return out


def reference(path):
    """(tokenizers.Tokenizer, the path tok_dump loads)."""
    from tokenizers import Tokenizer
    if path == "clip":
        sys.path.insert(0, HERE)
        import tokenizer_ref
        return tokenizer_ref.clip_tokenizer().backend_tokenizer, os.path.join(TOK, "clip")
    f = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if os.path.exists(f):
        return Tokenizer.from_file(f), path
    if os.path.exists(f + ".gz"):
        return Tokenizer.from_str(gzip.open(f + ".gz").read().decode("utf-8")), path
    sys.exit("%s: no tokenizer.json" % path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_intermixed_args()
    dump = os.path.join(a.build, "tests", "text", "tok_dump")
    paths = a.paths or ["clip", os.path.join(TOK, "t5"), os.path.join(TOK, "bbpe")]
    strings = random_strings(a.n, a.seed)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", suffix=".txt", delete=False) as f:
        f.write("\n".join(strings) + "\n")
        lines = f.name
    failed = 0
    try:
        for p in paths:
            tok, load = reference(p)
            tok.no_truncation()
            tok.no_padding()
            r = subprocess.run([dump, load, lines], capture_output=True, text=True)
            if r.returncode != 0:
                print("%s: tok_dump failed: %s" % (p, r.stderr.strip()))
                failed += 1
                continue
            got = r.stdout.split("\n")
            bad = unexplained = 0
            for i, s in enumerate(strings):
                want = tok.encode(s).ids
                if list(map(int, got[i].split())) != want:
                    bad += 1
                    if not any(unicodedata.category(c) == "Cn" for c in s):
                        unexplained += 1
                        if unexplained <= 3:
                            print("  %s string %d %s" % (p, i, ascii(s)))
            print("%s: %d of %d differ, %d not explained by a newer Unicode" % (p, bad, len(strings), unexplained))
            failed += unexplained > 0
    finally:
        os.unlink(lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
