#!/usr/bin/env python3
"""make_captions.py — writes the tokenizer test corpus tests/fixtures/text/captions.txt.

One caption per line, raw bytes (invalid UTF-8 included on purpose). A line that starts
with the four bytes "@@x " is escaped: the rest is read with \\n \\r \\t \\\\ and \\xHH
(two hex digits, one byte) interpreted, so captions can hold newlines and carriage
returns. tests/text/test_tokenizer.c and tests/reference/tokenizer_ref.py both read
this format. Deterministic (fixed seed): rerunning gives the same file.

Usage: python3 tests/reference/make_captions.py [OUT]
"""
import random
import sys

SUBJECTS = [
    "ohwx person", "[trigger]", "a photo of [trigger]", "sks dog", "a woman", "a man",
    "an old fisherman", "two children", "a tabby cat", "a red fox", "the Eiffel Tower",
    "a vintage car", "an astronaut", "a samurai", "a knight in armor", "a robot",
    "a barista", "Mona Lisa", "a golden retriever", "ohwx woman", "TOK man",
    "a bowl of ramen", "a crème brûlée", "a café au lait", "Zoë", "a piñata",
    "the façade of a building", "a naïve painting", "an Ångström-scale model",
    "a cat named Jörg", "São Paulo skyline", "Zürich old town", "İstanbul at dusk",
    "die Straße", "a GROSSE STRASSE sign", "東京タワー", "一只猫坐在窗台上", "서울의 밤거리",
    "Москва зимой", "Αθήνα, Ακρόπολη", "ラーメン屋", "ｶﾀｶﾅ sign", "ＦＵＬＬＷＩＤＴＨ text",
]
ACTIONS = [
    "standing in a field", "sitting on a bench", "running through the rain",
    "holding a cup of coffee", "looking at the camera", "smiling", "jumping",
    "reading a book", "wearing a red scarf", "in a spacesuit", "on a skateboard",
    "dancing under neon lights", "sleeping", "eating ramen", "playing the violin",
    "climbing a mountain", "at the beach", "in the snow", "in front of 東京駅",
    "next to a sign that says \"OPEN 24/7\"", "with a t-shirt reading 'I ♥ NY'",
    "it's raining", "they're laughing", "don't move", "we'll see", "I'M HERE",
    "you've got mail", "she'd know", "he’s waving", "l'été", "rock'n'roll",
]
STYLES = [
    "photorealistic", "35mm film", "shot on Kodak Portra 400", "f/1.8", "1/250s",
    "ISO 100", "8k", "4K UHD", "highly detailed", "cinematic lighting", "bokeh",
    "(masterpiece:1.2)", "((best quality))", "[[blurry]]", "{red|blue} hair",
    "<lora:ohwx_v2:0.8>", "oil painting", "watercolor", "anime style", "pixel art",
    "trending on artstation", "by Greg Rutkowski", "golden hour", "low-key", "HDR",
    "depth of field", "wide-angle, 24mm", "85 mm portrait lens", "ƒ/2.8", "½ exposure",
    "temperature 21℃", "™ logo", "© 2024", "x² + y² = z²", "H₂O", "Ⅻ o'clock",
    "…", "— em dash —", "“quoted”", "«guillemets»", "¿qué?", "¡olé!", "ﬁne ﬂowers",
]
EXTRAS = [
    "🎉", "👩‍🚀", "👍🏽", "🇯🇵", "❤️", "1️⃣", "🐱🐶", "😀😃😄", "✨", "🔥🔥🔥",
    "#nofilter", "@photographer", "$99.99", "50% off", "3.14159", "1,000,000",
    "2024-05-17", "12:30 PM", "v1.2.3", "model_v2.safetensors", "https://example.com/a?b=c&d=e",
    "C:\\Users\\ohwx\\pictures", "e-mail: someone@example.org", "+1 (555) 010-9999",
    "ID#4711", "0.5mm", "100x100", "A/B test", "snake_case_words", "CamelCaseWords",
    "UPPERCASE WORDS", "MiXeD CaSe", "n°5", "№7", "§3", "¶", "†", "•", "·", "°",
]
HANDWRITTEN = [
    "", " ", "  ", "a", ".", "ohwx", "[trigger]", "[trigger] [trigger]", "ohwx person",
    "A photo of ohwx person, 35mm, f/1.8", "photo of [trigger], wearing a hat",
    "ohwx", "OHWX PERSON", "Ohwx Person", "sks", "<|startoftext|>", "<|endoftext|>",
    "a <|endoftext|> b", "<|ENDOFTEXT|>", "</s>", "a </s> b", "<pad> <unk> </s>",
    "<extra_id_0> <extra_id_99>", "<extra_id_100>", "<s>", "<unk>",
    "   leading spaces", "trailing spaces   ", "multiple     inner     spaces",
    "tab\tseparated\twords", "non\u00a0breaking\u00a0space", "ideographic\u3000space",
    "zero\u200bwidth\u200bspace", "soft\u00adhyphen", "bom\ufeffinside", "\ufeffbom at start",
    "e\u0301 decomposed e acute", "caf\u0065\u0301 decomposed", "A\u030a ring", "n\u0303",
    "Hangul jamo \u1100\u1161\u11a8", "ligature ﬀ ﬃ", "ＡＢＣ１２３", "①②③", "⑴⑵", "ℌ ℍ ℕ",
    "Ω ohm sign \u2126", "K kelvin \u212a", "Å angstrom \u212b", "µ micro", "ǅ titlecase",
    "İ dotted I", "ı dotless i", "ß sharp s", "ẞ capital sharp s", "ﬆ st ligature",
    "Σίσυφος final sigma ΣΑΣ", "ǰ j caron", "ŉ", "ΐ", "ﬓ armenian",
    "control\x01char", "del\x7fchar", "bell\x07", "vertical\x0btab", "form\x0cfeed",
    "next\u0085line", "line\u2028separator", "para\u2029separator",
    "combining marks a\u0300\u0301\u0302\u0303\u0304 stack", "z\u0336\u0336alg\u0335o",
    "devanagari हिन्दी नमस्ते", "thai ภาษาไทย", "arabic مرحبا بالعالم", "hebrew שלום עולם",
    "emoji modifier 👋🏿", "family 👨‍👩‍👧‍👦", "flag 🏳️‍🌈", "keycap #️⃣", "tag flag 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "math 𝐀𝐁𝐂 𝔸𝔹ℂ", "musical 𝄞", "private use \ue000", "noncharacter \ufdd0",
    "replacement char \ufffd itself", "lone surrogate escapes are not here",
    "12345678901234567890", "3.0", "1e-4", "0x1F", "π ≈ 3.14", "∞", "√2", "∑∏∫",
    "don't", "DON'T", "it's", "IT'S", "they're", "we've", "I'm", "you'll", "he'd",
    "'s", "'t", "''quoted''", "`backticks`", "\"double\"", "’curly’", "l’amour",
    "hello!!!", "what???", "...", "!!!???...", "(parens)", "[brackets]", "{braces}",
    "<angle>", "a|b", "a\\b", "a/b", "a_b", "a-b", "a+b", "a=b", "a*b", "a&b", "a^b", "a~b",
    "word1 word2", "abc123def", "123abc", "a1b2c3", "１２３", "٣٤٥", "௧௨", "Ⅳ",
    "日本語のテキスト", "中文字符和English混合", "한국어 텍스트", "漢字かなカナ",
    "ｈａｌｆ　ｗｉｄｔｈ", "ﾊﾟﾋﾟﾌﾟ", "ガギグ", "㍿ ㌔ ㎞", "〜", "～",
    "a <think> b", "<think>", "x<think>y", "  <think>  spaced  ", "ohwx_v2", "ohwx!", "(ohwx)", "ohwxohwx",
    "[TRIGGER]", "[trigger][trigger]", "<|im_start|>user hi<|im_end|>", "<|im_start|><|im_end|>",
    "<|endoftext|><|endoftext|>", "</s></s>", "▁already▁metaspace", "▁", "_underscores_ and ▁▁",
]
# Raw invalid UTF-8 (bytes), written as-is.
INVALID = [
    b"bad \x80 continuation", b"bad \xff byte", b"truncated \xe2\x82 euro",
    b"overlong \xc0\xaf slash", b"surrogate \xed\xa0\x80 here", b"too big \xf4\x90\x80\x80",
    b"ends with lead \xe6", b"\xfe\xfe\xff", b"ohwx \xc3 person", b"caf\xe9 latin1",
    b"na\xefve latin1", b"mixed \xe6\x97\xa5\xe6\x9c valid then cut", b"\xf0\x9f\x8e",
    b"[trigger] \xa0\xa1", b"\x80\x81\x82\x83 leading junk",
]
# Captions with newlines / CR, written escaped.
ESCAPED = [
    "<|im_start|>system\nYou describe images.<|im_end|>\n<|im_start|>user\n[trigger] on a beach<|im_end|>",
    "line one\nline two", "windows\r\nline end", "\n\nleading newlines",
    "trailing newline\n", "mixed \t \n \r whitespace", "a\n\n\nb", "\r", "\t\t",
]


def escape(s: bytes) -> bytes:
    out = bytearray(b"@@x ")
    for b in s:
        if b == 0x5C:
            out += b"\\\\"
        elif b == 0x0A:
            out += b"\\n"
        elif b == 0x0D:
            out += b"\\r"
        elif b == 0x09:
            out += b"\\t"
        else:
            out.append(b)
    return bytes(out)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/text/captions.txt"
    rng = random.Random(20261201)
    lines = []
    for h in HANDWRITTEN:
        lines.append(h.encode("utf-8"))
    lines += INVALID
    for e in ESCAPED:
        lines.append(escape(e.encode("utf-8")))
    # Generated captions: short tags, sentences, and a few very long ones.
    while len(lines) < 1150:
        kind = rng.random()
        if kind < 0.25:
            parts = [rng.choice(SUBJECTS)] + rng.sample(STYLES, rng.randint(1, 4))
            cap = ", ".join(parts)
        elif kind < 0.8:
            cap = "%s %s, %s" % (rng.choice(SUBJECTS), rng.choice(ACTIONS),
                                 ", ".join(rng.sample(STYLES, rng.randint(0, 5))))
            if rng.random() < 0.4:
                cap += " " + " ".join(rng.sample(EXTRAS, rng.randint(1, 3)))
            if rng.random() < 0.2:
                cap = cap.upper() if rng.random() < 0.5 else cap.capitalize()
            if rng.random() < 0.15:
                cap = "  " + cap.replace(", ", " ,  ") + "   "
        elif kind < 0.99:
            n = rng.randint(2, 7)
            cap = ". ".join("%s %s" % (rng.choice(SUBJECTS), rng.choice(ACTIONS)) for _ in range(n))
            cap += ". " + ", ".join(rng.sample(STYLES, 6)) + " " + " ".join(rng.sample(EXTRAS, 3))
        else:
            # Very long: past T5's 512 tokens.
            n = rng.randint(45, 60)
            cap = " ".join("%s %s %s." % (rng.choice(SUBJECTS), rng.choice(ACTIONS), rng.choice(EXTRAS))
                           for _ in range(n))
        b = cap.encode("utf-8")
        if rng.random() < 0.02:  # sprinkle invalid bytes into generated captions
            i = rng.randint(0, len(b))
            b = b[:i] + rng.choice([b"\x80", b"\xff", b"\xe2\x82", b"\xc3"]) + b[i:]
        lines.append(b)
    with open(out, "wb") as f:
        for b in lines:
            assert b"\n" not in b
            f.write(b + b"\n")
    print("%s: %d captions" % (out, len(lines)))


if __name__ == "__main__":
    main()
