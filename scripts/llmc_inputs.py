#!/usr/bin/python3
"""Writes the inputs of llm.c's CPU trainer (train_gpt2.c) in its own formats, for
scripts/llmc_side_by_side.sh:

  llmc_inputs.py checkpoint HF_DIR OUT.bin
      a GPT-2 model in Hugging Face's layout (config.json + model.safetensors, the directory
      meshtrain loads) as llm.c's checkpoint: a header of 256 int32 (magic 20240326, version 3,
      max_seq_len, vocab_size, num_layers, num_heads, channels, padded_vocab_size) and then the
      f32 tensors in llm.c's order, each Conv1D weight transposed from HF's [in, out] to llm.c's
      [out, in], the token embedding padded with zero rows to a multiple of 128 as llm.c pads it.

  llmc_inputs.py batch MESHTRAIN TOKENIZER TEXT N OUT.txt OUT.bin
      one batch both programs read alike: the first N tokens of TEXT as meshtrain eval reads a
      text (BOS first, then the encoded text), written as OUT.txt, a text whose encoding is
      exactly those N tokens (checked by encoding it again), and as llm.c's token shard OUT.bin:
      a header of 256 int32 (magic 20240520, version 1, the token count), then the ids as uint16.

The formats are those train_gpt2.c (gpt2_build_from_checkpoint) and llmc/dataloader.h read.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    from family_reference import read_safetensors  # the same safetensors reader as the family check
except ImportError:
    sys.exit("llmc_inputs: numpy is not installed (apt-get install python3-numpy)")

CHECKPOINT_MAGIC, CHECKPOINT_VERSION = 20240326, 3
SHARD_MAGIC, SHARD_VERSION = 20240520, 1
HEADER_INTS = 256


def header(*values):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[:len(values)] = values
    return h.tobytes()


def write_checkpoint(hf_dir, out):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "gpt2":
        sys.exit(f"llmc_inputs: {hf_dir}/config.json: model_type {cfg.get('model_type')!r}, expected \"gpt2\"")
    t = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    C, L, H, T, V = cfg["n_embd"], cfg["n_layer"], cfg["n_head"], cfg["n_positions"], cfg["vocab_size"]
    if (cfg.get("n_inner") or 4 * C) != 4 * C:
        sys.exit(f"llmc_inputs: {hf_dir}: n_inner {cfg['n_inner']}, llm.c's MLP is 4 x n_embd = {4 * C}")
    Vp = (V + 127) // 128 * 128
    wte = np.zeros((Vp, C))
    wte[:V] = t["transformer.wte.weight"]
    layer = lambda name, transpose=False: [t[f"transformer.h.{l}.{name}"].T if transpose else
                                           t[f"transformer.h.{l}.{name}"] for l in range(L)]
    # llm.c's order (ParameterTensors in train_gpt2.c): wte, wpe, then per kind all layers.
    tensors = [[wte], [t["transformer.wpe.weight"]],
               layer("ln_1.weight"), layer("ln_1.bias"),
               layer("attn.c_attn.weight", True), layer("attn.c_attn.bias"),
               layer("attn.c_proj.weight", True), layer("attn.c_proj.bias"),
               layer("ln_2.weight"), layer("ln_2.bias"),
               layer("mlp.c_fc.weight", True), layer("mlp.c_fc.bias"),
               layer("mlp.c_proj.weight", True), layer("mlp.c_proj.bias"),
               [t["transformer.ln_f.weight"]], [t["transformer.ln_f.bias"]]]
    with open(out, "wb") as f:
        f.write(header(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, T, V, L, H, C, Vp))
        for kind in tensors:
            for a in kind:
                f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def meshtrain_ids(meshtrain, tokenizer, text):
    out = subprocess.run([meshtrain, "tokenize", "--tokenizer", tokenizer, "--bos", "--text", text],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"llmc_inputs: meshtrain tokenize failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def write_batch(meshtrain, tokenizer, text_path, n, out_text, out_shard):
    with open(text_path, encoding="utf-8") as f:
        head = f.read(8 * n)  # GPT-2 averages about 4 characters a token: ample
    ids = meshtrain_ids(meshtrain, tokenizer, head)
    if len(ids) < n:
        sys.exit(f"llmc_inputs: {text_path}: {len(ids)} tokens in its first {len(head)} characters, need {n}")
    ids = ids[:n]
    out = subprocess.run([meshtrain, "detokenize", "--tokenizer", tokenizer, "--jsonl",
                          "--ids", " ".join(map(str, ids[1:]))], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"llmc_inputs: meshtrain detokenize failed: {out.stderr.strip()}")
    text = json.loads(out.stdout)["text"]
    if meshtrain_ids(meshtrain, tokenizer, text) != ids:
        sys.exit(f"llmc_inputs: the text of {text_path}'s first {n} tokens does not encode back to them "
                 "(the cut falls inside a word); choose another N")
    with open(out_text, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    if max(ids) > 65535:
        sys.exit("llmc_inputs: a token id above 65535 does not fit llm.c's uint16 shard")
    with open(out_shard, "wb") as f:
        f.write(header(SHARD_MAGIC, SHARD_VERSION, len(ids)))
        f.write(np.array(ids, dtype="<u2").tobytes())


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "checkpoint":
        write_checkpoint(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 8 and sys.argv[1] == "batch":
        write_batch(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], sys.argv[7])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
