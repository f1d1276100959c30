#!/usr/bin/env python3
"""Prints python3-sentencepiece's encodings of a fixed corpus of tricky strings as JSON.

  spm_reference_ids.py MODEL... > reference_ids.json

{"strings": [...], "models": {"<file name>": {"ids": [[...], ...], "decoded": [...]}}}, where
decoded is sentencepiece's decode of those ids. Used by scripts/make_spm_fixtures.sh; the
strings cover whitespace runs, leading/trailing spaces, newlines, digits, text that forces byte
fallback (accents, CJK, emoji), control-token look-alikes and the empty string.
"""
import json
import os
import random
import sys

import sentencepiece as spm

STRINGS = [
    "", " ", "  ", "   ", "\n", "\n\n", "\t", "hello", " hello", "hello ", "  hello  world  ",
    "   leading", "trailing   ", "a\nb", "line one\nline two\n", "\r\n", "\t tab\tthen",
    "12345 67", "3.14159", "year 2024, 10,000 men", "Hello, World!",
    "ROMEO:\nBut, soft! what light through yonder window breaks?",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "émigré café", "naïve façade", "e\u0301 combining", "\u00a0non-breaking space",
    "日本語のテキスト", "中文字符", "한국어", "مرحبا بالعالم", "Ω≈ç√∫", "😀 emoji 🎉",
    "mixed 😀中文 text", "👨\u200d👩\u200d👧 family", "\u2581 literal meta symbol", "▁▁x",
    "<s> not special </s>", "<unk>", "<0x41>", "<sep> user symbol", "a<sep>b", "x" * 70,
    "thethethethe the the", "Once upon a time, there was a little girl named Lily.",
]


def random_strings(n, seed=17):
    rng = random.Random(seed)
    alphabet = list("abcdefghij ABC  \n\t0123456789.,!?'") + ["é", "ß", "中", "😀", "\u2581", "<s>"]
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    return out


def main():
    strings = STRINGS + random_strings(60)
    models = {}
    for path in sys.argv[1:]:
        sp = spm.SentencePieceProcessor(model_file=path)
        ids = [sp.encode(s) for s in strings]
        models[os.path.basename(path)] = {"ids": ids, "decoded": [sp.decode(i) for i in ids]}
    json.dump({"strings": strings, "models": models}, sys.stdout, ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
