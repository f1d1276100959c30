#!/usr/bin/env bash
# Optional check (not run by ctest or CI): the tokenizer.json files meshtrain writes from a
# sentencepiece model or a byte-level tokenizer load in Hugging Face's tokenizers.js
# (@huggingface/tokenizers, the tokenizer of transformers.js) and encode exactly as meshtrain and
# python3-sentencepiece do.
#
# tokenizers.js comes from npm into build-hftok/ (git-ignored), install scripts off; it has no
# dependencies. The files are made the way a user makes them:
#   1. `meshtrain convert` of stories260K with llama2.c's tok512.bin -> tokenizer.json
#   2. `meshtrain export --merged` of a model directory whose tokenizer is each fixture
#      tests/data/sentencepiece/*.model -> tokenizer.json (the Prepend/Replace normalizer form)
#   3. the same files rewritten to the Metaspace pre-tokenizer form of newer HF files
#   4. `meshtrain export --merged` of model directories whose tokenizer is the byte tokenizer's
#      marker, tiktoken (tiktoken_small, Llama 3) or GPT-2's vocab.json + merges.txt from
#      ../shared/data/tokenizers -> the byte-level tokenizer.json (hf_byte_level_writer.h)
# and the reference strings of tests/data/sentencepiece/reference_ids.json are encoded by
# tokenizers.js, `meshtrain tokenize` and (for 2) python3-sentencepiece's committed ids.
#
#   scripts/check_hf_tokenizer_json.sh
# Needs node >= 18, npm and build/meshtrain. Exits 0 when everything matches, 1 on a mismatch,
# 2 on bad setup.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
STORIES=${STORIES:-$REPO/../shared/data/stories260K}
VERSION=${HF_TOKENIZERS_VERSION:-0.2.0}
NODE_DIR=$REPO/build-hftok
WORK=$NODE_DIR/work
MT=$REPO/build/meshtrain
FIX=$REPO/tests/data/sentencepiece

[ -x "$MT" ] || { echo "check_hf_tokenizer_json: build/meshtrain missing (scripts/build.sh)" >&2; exit 2; }
for f in "$STORIES/stories260K.bin" "$STORIES/tok512.bin"; do
  [ -f "$f" ] || { echo "check_hf_tokenizer_json: $f not found" >&2; exit 2; }
done
command -v node >/dev/null && command -v npm >/dev/null || { echo "check_hf_tokenizer_json: needs node and npm" >&2; exit 2; }
mkdir -p "$NODE_DIR"
if [ ! -f "$NODE_DIR/node_modules/@huggingface/tokenizers/package.json" ] ||
   [ "$(node -p "require('$NODE_DIR/node_modules/@huggingface/tokenizers/package.json').version")" != "$VERSION" ]; then
  echo "=== installing @huggingface/tokenizers@$VERSION into build-hftok/ (npm registry only)"
  (cd "$NODE_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
   npm install --ignore-scripts --no-audit --no-fund "@huggingface/tokenizers@$VERSION")
fi
cp scripts/hf_tokenizer_check.mjs "$NODE_DIR/"
rm -rf "$WORK"
mkdir -p "$WORK"

echo "=== 1. meshtrain convert (tok512.bin -> tokenizer.json)"
"$MT" convert --llama2c "$STORIES/stories260K.bin" --tokenizer "$STORIES/tok512.bin" --out "$WORK/stories" >/dev/null
dirs=("$WORK/stories")
echo "=== 2. meshtrain export --merged from a model directory with each fixture's tokenizer.model"
for model in llama_bpe1000 squeeze_bpe400; do
  src=$WORK/src_$model
  mkdir -p "$src"
  cp "$WORK/stories/config.json" "$WORK/stories"/*.safetensors "$src/"
  cp "$FIX/$model.model" "$src/tokenizer.model"
  "$MT" export -m "$src" --merged "$WORK/$model" >/dev/null
  dirs+=("$WORK/$model=$model.model")
done
echo "=== 3. the Metaspace pre-tokenizer form"
for model in llama_bpe1000 stories; do
  out=$WORK/${model}_metaspace
  mkdir -p "$out"
  cp "$WORK/$model/tokenizer_config.json" "$out/"
  node -e '
    const fs = require("fs");
    const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    const ms = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
    j.normalizer = null; j.pre_tokenizer = ms;  // the decoder stays: newer files keep it
    fs.writeFileSync(process.argv[2], JSON.stringify(j));' "$WORK/$model/tokenizer.json" "$out/tokenizer.json"
  dirs+=("$out")
done
echo "=== 4. meshtrain export --merged from model directories with byte-level tokenizers (byte, tiktoken, GPT-2)"
TOKS=${TOKS:-$REPO/../shared/data/tokenizers}
for name in byte tiktoken_small llama3 gpt2; do
  src=$WORK/src_$name
  mkdir -p "$src"
  cp "$WORK/stories/config.json" "$WORK/stories"/*.safetensors "$src/"
  case $name in
    byte) echo "meshtrain byte-level tokenizer" > "$src/tokenizer.byte" ;;
    gpt2) cp "$TOKS/gpt2/vocab.json" "$TOKS/gpt2/merges.txt" "$src/" ;;
    *) cp "$TOKS/$name/tokenizer.model" "$src/tokenizer.model" ;;
  esac
  "$MT" export -m "$src" --merged "$WORK/$name" >/dev/null
  dirs+=("$WORK/$name")
done
echo "=== tokenizers.js vs meshtrain (vs python3-sentencepiece)"
cd "$NODE_DIR" && node hf_tokenizer_check.mjs "$MT" "$FIX/reference_ids.json" "${dirs[@]}"
