#!/usr/bin/env bash
# The main job: a small real fine-tuning run, start to finish, with nothing to download.
#
#   1. a base model: by default pretrained here on the built-in text (byte-level tokenizer, a
#      minute on two cores); or a llama2.c checkpoint you point at (--llama2c, --tokenizer)
#   2. LoRA fine-tuning on instruction data (default examples/village_qa.jsonl, or --data), with
#      validation loss before and after
#   3. export: the PEFT adapter (written by training), a GGUF adapter and a merged model
#   4. a sample answer generated with the adapter
#
# Rerunning it replaces the previous demo's runs under --out (the training runs pass --overwrite).
#
#   scripts/demo.sh
#   scripts/demo.sh --llama2c ../shared/data/stories260K/stories260K.bin \
#                   --tokenizer ../shared/data/stories260K/tok512.bin \
#                   --data ../shared/data/instruct/alpaca_tiny.json --question "Give three tips for staying healthy."
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MT=build/meshtrain
OUT=runs/demo
LLAMA2C="" TOKENIZER="" DATA="examples/village_qa.jsonl" QUESTION="Who is the baker?" STEPS=200
while [ $# -gt 0 ]; do
  case "$1" in
    --llama2c) LLAMA2C=$2; shift 2 ;;
    --tokenizer) TOKENIZER=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --question) QUESTION=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "demo: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$MT" ] || { echo "demo: $MT not built; run scripts/build.sh first" >&2; exit 1; }

step() { printf '\n=== %s\n' "$*"; }

if [ -n "$LLAMA2C" ]; then
  step "1/4 base model: converting $LLAMA2C"
  [ -n "$TOKENIZER" ] || { echo "demo: --llama2c needs --tokenizer" >&2; exit 2; }
  "$MT" convert --llama2c "$LLAMA2C" --tokenizer "$TOKENIZER" --out "$OUT/base"
  BASE=$OUT/base
  SEQ=$(python3 -c 'import json,sys; print(min(512, json.load(open(sys.argv[1]))["max_position_embeddings"]))' "$BASE/config.json" 2>/dev/null || echo 256)
else
  step "1/4 base model: pretraining a small LLaMA on the built-in text"
  "$MT" train --set model.max_position_embeddings=512 --set train.steps=600 \
              --set output.dir="$OUT/pretrain" --overwrite
  BASE=$OUT/pretrain/model
  SEQ=384
fi

step "2/4 LoRA fine-tuning $BASE on $DATA"
"$MT" train --config configs/demo_lora.toml --set model.path="$BASE" --set data.path="$DATA" \
            --set train.seq_len="$SEQ" --set train.steps="$STEPS" --set output.dir="$OUT/lora" --overwrite

step "3/4 export"
"$MT" export --model "$BASE" --adapter "$OUT/lora/adapter" \
             --gguf-adapter "$OUT/lora/adapter.gguf" --merged "$OUT/merged"

step "4/4 sample: \"$QUESTION\""
"$MT" generate --model "$BASE" --adapter "$OUT/lora/adapter" --template alpaca \
               --prompt "$QUESTION" --max-new-tokens 60
