#!/usr/bin/env bash
# Optional check (not run by ctest or CI): the GGUF files meshtrain writes, loaded by the real
# llama.cpp, give the same text as meshtrain.
#
# llama.cpp comes from npm: node-llama-cpp ships prebuilt llama.cpp binaries as optional
# dependencies (@node-llama-cpp/linux-x64). It is installed into build-llamacpp/ (git-ignored)
# with its install scripts off and NODE_LLAMA_CPP_SKIP_DOWNLOAD=true, and run with
# build: "never", so nothing is built or downloaded from anywhere but the npm registry.
#
#   1. stories260K (llama2.c) -> meshtrain model -> GGUF f32, f16, bf16, q8_0, q4_0
#   2. llama.cpp greedy generation from BOS (60 tokens) on each float file = meshtrain generate =
#      the reference text of llama2.c; llama.cpp's tokenizer = meshtrain tokenize on a few strings
#   2b. on each quantised file, llama.cpp = meshtrain generate on that same file (its weights
#      dequantised), and how many tokens each keeps of the f32 text
#   3. a LoRA adapter trained by meshtrain (20 steps), exported as a GGUF adapter and as a merged
#      model: llama.cpp base + adapter = llama.cpp merged GGUF = meshtrain with the adapter
#   4. the tokenizer each GGUF carries, from an HF directory with a sentencepiece tokenizer.model
#      and from one with a byte-level (Llama 3) tokenizer.json: llama.cpp's tokenization =
#      meshtrain's (with the directory's and with the GGUF's own tokenizer), and llama.cpp's
#      greedy text = meshtrain generate on the file
#   5. the families in their llama.cpp architectures: a tiny qwen2 and qwen3 model (Qwen3's
#      tokenizer) and a mistral one (tok512.model), each trained 80 steps from a random start,
#      exported to f32, f16, bf16, q8_0 and q4_0: llama.cpp's tokenization of the prompt =
#      meshtrain's; llama.cpp's greedy text from it on the f32 file = meshtrain generate on the
#      file and on the HF directory; for the other types, llama.cpp on the file's weights widened
#      to f32 = meshtrain generate on the file, and whether llama.cpp on the file itself (which
#      rounds activations) keeps that text (printed, not failed); a mistral with a sliding window,
#      which llama.cpp's llama lacks: the export says so, and llama.cpp = meshtrain on the file;
#      a tiny gpt2 (GPT-2's tokenizer: llama.cpp's gpt2, fused attn_qkv, learned positions) and a
#      tiny gemma3 (the synthetic Gemma tokenizer of the tests: llama.cpp's gemma3, windows of 5
#      on two of its three layers, shorter than the prompt and the text) checked the same way;
#      the mixtures of experts: a tiny mixtral (llama.cpp's llama with experts), qwen3_moe
#      (qwen3moe) and olmoe (olmoe), their experts stacked into ffn_*_exps, checked the same way,
#      and on the mixtral a LoRA adapter on every expert alone (20 steps): llama.cpp base
#      + GGUF adapter (the experts' adapters stacked) = llama.cpp merged GGUF = meshtrain
#
#   6. data.add_tokens (case added_tokens): stories260K grown by <|im_start|> / <|im_end|> in a LoRA
#      chatml run, merged, exported to GGUF: llama.cpp reads the markers as single control tokens,
#      tokenizes the chat prompt (special tokens on) as meshtrain renders it, and gives meshtrain's
#      greedy answer, ending at <|im_end|>
#
#   scripts/check_llamacpp.sh [--stories DIR] [--data alpaca.json] [--work DIR] [--families-only]
#                             [--case NAME ...]   (step 5's and 6's cases by name, e.g. --case gpt2; default all)
# Needs node >= 20 and npm (and /usr/bin/python3 with numpy for step 5). Exits 0 when everything matches, 1 on a mismatch, 2 on bad setup.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD

STORIES=${STORIES:-$REPO/../shared/data/stories260K}
DATA=${DATA:-$REPO/../shared/data/instruct/alpaca_tiny.json}
LLAMA3_TOKENIZER=${LLAMA3_TOKENIZER:-$REPO/../shared/data/tokenizers/llama3/tokenizer.model}
QWEN_TOKENIZER=${QWEN_TOKENIZER:-$REPO/../shared/data/tokenizers/qwen3}
GPT2_TOKENIZER=${GPT2_TOKENIZER:-$REPO/../shared/data/tokenizers/gpt2}
GEMMA_TOKENIZER=${GEMMA_TOKENIZER:-$REPO/tests/data/hf_families/gemma_synthetic}
FAMILIES_ONLY=0
CASES=""
NLC_VERSION=${NODE_LLAMA_CPP_VERSION:-3.22.1}
NODE_DIR=$REPO/build-llamacpp
WORK=$NODE_DIR/work
while [ $# -gt 0 ]; do
  case "$1" in
    --stories) STORIES=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --families-only) FAMILIES_ONLY=1; shift ;;
    --case) CASES="$CASES $2"; shift 2 ;;
    *) echo "check_llamacpp: unknown argument $1" >&2; exit 2 ;;
  esac
done
# Absolute, since the run config written under $WORK reads its paths relative to itself.
DATA=$(realpath -m "$DATA") WORK=$(realpath -m "$WORK")
MT=${MESHTRAIN:-$REPO/build/meshtrain}  # MESHTRAIN: another binary to check
REFERENCE="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high"

for f in "$STORIES/stories260K.bin" "$STORIES/tok512.bin" "$STORIES/tok512.model" "$DATA" "$LLAMA3_TOKENIZER" \
         "$QWEN_TOKENIZER/tokenizer.json" "$GPT2_TOKENIZER/vocab.json" "$GEMMA_TOKENIZER/tokenizer.json"; do
  [ -f "$f" ] || { echo "check_llamacpp: $f not found" >&2; exit 2; }
done
command -v node >/dev/null && command -v npm >/dev/null || { echo "check_llamacpp: needs node and npm" >&2; exit 2; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "check_llamacpp: needs /usr/bin/python3 with numpy (python3-numpy)" >&2; exit 2; }
if [ ! -x "$MT" ]; then
  cmake -S . -B build -G Ninja >/dev/null && ninja -C build -j2 meshtrain
fi

export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
mkdir -p "$NODE_DIR" "$WORK"
if [ ! -f "$NODE_DIR/node_modules/node-llama-cpp/package.json" ] ||
   [ "$(node -p "require('$NODE_DIR/node_modules/node-llama-cpp/package.json').version")" != "$NLC_VERSION" ]; then
  echo "=== installing node-llama-cpp@$NLC_VERSION into build-llamacpp/ (npm registry only)"
  (cd "$NODE_DIR" && { [ -f package.json ] || npm init -y >/dev/null; } &&
   npm install --ignore-scripts --no-audit --no-fund --omit=optional \
     "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/linux-x64@$NLC_VERSION")
fi
cp scripts/llamacpp_generate.mjs "$NODE_DIR/"
LC() { node "$NODE_DIR/llamacpp_generate.mjs" "$@"; }

FAIL=0
same() {  # same NAME FILE_A FILE_B
  if cmp -s "$2" "$3"; then echo "  ok    $1"
  else echo "  FAIL  $1"; diff "$2" "$3" | sed 's/^/        /' || true; FAIL=1; fi
}

echo "=== llama.cpp"
LC --info
if command -v cc >/dev/null; then  # the build number and commit libllama-common.so was built from
  cat > "$WORK/llama_build.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  int (*num)(void) = (int (*)(void))dlsym(h, "_Z18llama_build_numberv");
  const char* (*commit)(void) = (const char* (*)(void))dlsym(h, "_Z12llama_commitv");
  if (!num || !commit) return 1;
  printf("llama.cpp build: b%d, commit %s\n", num(), commit());
  return 0;
}
C
  cc "$WORK/llama_build.c" -o "$WORK/llama_build" -ldl 2>/dev/null &&
    "$WORK/llama_build" "$(ls "$NODE_DIR"/node_modules/@node-llama-cpp/linux-x64/bins/*/libllama-common.so | head -1)" || true
fi

if [ "$FAMILIES_ONLY" = 0 ]; then
echo "=== meshtrain: stories260K -> GGUF"
rm -rf "$WORK/stories" "$WORK/lora" "$WORK/merged"
"$MT" convert --llama2c "$STORIES/stories260K.bin" --tokenizer "$STORIES/tok512.bin" --out "$WORK/stories" >/dev/null
for d in f32 f16 bf16; do
  "$MT" export -m "$WORK/stories" --gguf "$WORK/stories-$d.gguf" --gguf-dtype "$d"
done
echo "$REFERENCE" > "$WORK/reference.txt"
"$MT" generate -m "$WORK/stories" -n 60 > "$WORK/meshtrain.txt"

echo "=== greedy, 60 tokens from BOS"
same "meshtrain = llama2.c reference" "$WORK/reference.txt" "$WORK/meshtrain.txt"
for d in f32 f16 bf16; do
  LC --model "$WORK/stories-$d.gguf" -n 60 --text-out "$WORK/llamacpp-$d.txt" > "$WORK/llamacpp-$d.ids"
  same "llama.cpp $d GGUF = reference" "$WORK/reference.txt" "$WORK/llamacpp-$d.txt"
done
echo "  llama.cpp: $(cat "$WORK/llamacpp-f32.txt")"

echo "=== quantised, greedy, 60 tokens from BOS: llama.cpp and meshtrain on the same file"
# Leading ids two "ids: ..." lines share.
common_prefix() {
  paste -d' ' <(sed 's/^ids: //' "$1" | tr ' ' '\n') <(sed 's/^ids: //' "$2" | tr ' ' '\n') |
    awk '$1 != $2 { exit } { n++ } END { print n + 0 }'
}
for q in q8_0 q4_0; do
  "$MT" export -m "$WORK/stories" --gguf "$WORK/stories-$q.gguf" --gguf-dtype "$q"
  "$MT" generate -m "$WORK/stories-$q.gguf" --tokenizer "$WORK/stories" -n 60 > "$WORK/meshtrain-$q.txt"
  LC --model "$WORK/stories-$q.gguf" -n 60 --text-out "$WORK/llamacpp-$q.txt" > "$WORK/llamacpp-$q.ids"
  same "llama.cpp $q GGUF = meshtrain on the same file" "$WORK/meshtrain-$q.txt" "$WORK/llamacpp-$q.txt"
  echo "  llama.cpp $q: $(cat "$WORK/llamacpp-$q.txt")"
  echo "  meshtrain $q: $(cat "$WORK/meshtrain-$q.txt")"
  echo "  $q keeps the first $(common_prefix "$WORK/llamacpp-f32.ids" "$WORK/llamacpp-$q.ids") of 60 tokens of the f32 text" \
       "($(stat -c %s "$WORK/stories-$q.gguf") bytes, f32 $(stat -c %s "$WORK/stories-f32.gguf"))"
done

echo "=== tokenizer"
for s in "Once upon a time" "Lily's big red ball, 123!" $'  two  spaces\nnewline' "café ☃ 猫"; do
  "$MT" tokenize --tokenizer "$STORIES/tok512.bin" --text "$s" | tr -d '[],' > "$WORK/tok-mt.txt"
  LC --model "$WORK/stories-f32.gguf" -n 0 --tokenize "$s" | sed 's/^tokens: //' > "$WORK/tok-lc.txt"
  same "tokenize $(printf '%q' "$s"): $(cat "$WORK/tok-lc.txt")" "$WORK/tok-mt.txt" "$WORK/tok-lc.txt"
done

echo "=== LoRA"
cat > "$WORK/lora.toml" <<TOML
[model]
path = "$WORK/stories"
[lora]
enabled = true
rank = 4
alpha = 8.0
targets = ["q", "k", "v", "o", "gate", "up", "down"]
[optim]
lr = 1e-2
warmup_steps = 2
weight_decay = 0.0
[train]
steps = 20
batch_size = 2
seq_len = 256
log_every = 10
[data]
path = "$DATA"
format = "alpaca"
[output]
dir = "$WORK/lora"
TOML
"$MT" train --config "$WORK/lora.toml" | grep -E '^done'
"$MT" export -m "$WORK/stories" --adapter "$WORK/lora/adapter" --gguf-adapter "$WORK/lora.gguf" --merged "$WORK/merged" >/dev/null
"$MT" export -m "$WORK/merged" --gguf "$WORK/merged-f32.gguf" --gguf-dtype f32
# --template none: llama.cpp is given the bare prompt, not the adapter's recorded Alpaca template.
"$MT" generate -m "$WORK/stories" --adapter "$WORK/lora/adapter" --template none -n 40 > "$WORK/meshtrain-lora.txt"
LC --model "$WORK/stories-f32.gguf" --lora "$WORK/lora.gguf" -n 40 --text-out "$WORK/llamacpp-lora.txt" > "$WORK/llamacpp-lora.ids"
LC --model "$WORK/merged-f32.gguf" -n 40 --text-out "$WORK/llamacpp-merged.txt" > "$WORK/llamacpp-merged.ids"
LC --model "$WORK/stories-f32.gguf" -n 40 --text-out "$WORK/llamacpp-base40.txt" > /dev/null
same "llama.cpp base + GGUF adapter = llama.cpp merged GGUF (ids)" "$WORK/llamacpp-lora.ids" "$WORK/llamacpp-merged.ids"
same "llama.cpp base + GGUF adapter = meshtrain with the adapter" "$WORK/meshtrain-lora.txt" "$WORK/llamacpp-lora.txt"
if cmp -s "$WORK/llamacpp-lora.txt" "$WORK/llamacpp-base40.txt"; then
  echo "  FAIL  the adapter changed nothing (no evidence it was applied)"; FAIL=1
else
  echo "  ok    the adapter changes the text (base and adapted differ)"
fi
echo "  meshtrain + adapter: $(cat "$WORK/meshtrain-lora.txt")"
echo "  llama.cpp + adapter: $(cat "$WORK/llamacpp-lora.txt")"

echo "=== tokenizers the GGUF files carry (tokenizer.ggml.*), from HF directories"
# (a) sentencepiece: stories260K with tok512.model as its only tokenizer file (llama.cpp's "llama" model).
rm -rf "$WORK/spm" "$WORK/l3" "$WORK/tok-gguf"
mkdir -p "$WORK/tok-gguf"
"$MT" convert --llama2c "$STORIES/stories260K.bin" --tokenizer "$STORIES/tok512.model" --out "$WORK/spm" >/dev/null
rm -f "$WORK/spm/tokenizer.json" "$WORK/spm/tokenizer_config.json"
"$MT" export -m "$WORK/spm" --gguf "$WORK/tok-gguf/spm.gguf" --gguf-dtype f32
# (b) byte-level BPE: a tiny model trained one step with the Llama 3 tokenizer; its HF directory
# holds the byte-level tokenizer.json meshtrain writes (llama.cpp's "gpt2" model, pre "llama-bpe").
"$MT" train --set data.tokenizer="$LLAMA3_TOKENIZER" --set model.vocab_size=128256 \
  --set model.hidden_size=64 --set model.intermediate_size=128 --set model.num_hidden_layers=2 \
  --set model.num_attention_heads=4 --set model.num_key_value_heads=2 --set train.steps=1 \
  --set train.seq_len=64 --set train.batch_size=1 --set train.peak_gflops=100 --set output.dir="$WORK/l3" >/dev/null
rm -f "$WORK/l3/model/tokenizer.model"
"$MT" export -m "$WORK/l3/model" --gguf "$WORK/tok-gguf/l3.gguf" --gguf-dtype f32
for case in spm l3; do
  src=$WORK/spm; [ "$case" = l3 ] && src=$WORK/l3/model
  for s in "Once upon a time" "Lily's big red ball, 123!" $'  two  spaces\nnewline\ttab ' "café ☃ 猫 😀" \
           "I'm sure you'll see it's 3.14159 or 1,000,000" "<s> </s> <|begin_of_text|> <0x41>"; do
    "$MT" tokenize --tokenizer "$src" --text "$s" | tr -d '[],' > "$WORK/tok-mt.txt"
    "$MT" tokenize --tokenizer "$WORK/tok-gguf/$case.gguf" --text "$s" | tr -d '[],' > "$WORK/tok-mtg.txt"
    # tok512.model sets sentencepiece's remove_extra_whitespaces (runs of spaces squeezed, none
    # at either end), which meshtrain applies and writes as tokenizer.ggml.remove_extra_whitespaces;
    # llama.cpp's "llama" tokenizer does not apply it, so it is given the text squeezed.
    lc_text=$s
    if [ "$case" = spm ]; then lc_text=$(printf '%s' "$s" | tr -s ' '); lc_text=${lc_text# }; lc_text=${lc_text% }; fi
    LC --model "$WORK/tok-gguf/$case.gguf" -n 0 --tokenize "$lc_text" | sed 's/^tokens: //' > "$WORK/tok-lc.txt"
    same "$case: llama.cpp tokenize $(printf '%q' "$lc_text") = meshtrain (HF dir) on $(printf '%q' "$s")" \
      "$WORK/tok-mt.txt" "$WORK/tok-lc.txt"
    same "$case: meshtrain with the GGUF's own tokenizer = with the HF dir's" "$WORK/tok-mt.txt" "$WORK/tok-mtg.txt"
  done
  # Greedy from BOS: llama.cpp on the file = meshtrain on the file with the file's own tokenizer.
  n=60; [ "$case" = l3 ] && n=20
  LC --model "$WORK/tok-gguf/$case.gguf" -n "$n" --text-out "$WORK/lc-$case.txt" > /dev/null
  "$MT" generate -m "$WORK/tok-gguf/$case.gguf" -n "$n" | sed 's/^<|begin_of_text|>//' > "$WORK/mt-$case.txt"
  same "$case: llama.cpp greedy text = meshtrain generate -m $case.gguf" "$WORK/mt-$case.txt" "$WORK/lc-$case.txt"
  echo "  $case: $(head -c 200 "$WORK/lc-$case.txt")"
done

fi

# ---- 5. the families -------------------------------------------------------------------------
# family_case NAME FAMILY VOCAB TOKENIZER PROMPT [KEY=JSON ...]: a random FAMILY model in its HF
# layout (scripts/family_reference.py, config keys overridden by KEY=JSON), trained on the
# built-in text with TOKENIZER (FAMILY_STEPS steps at FAMILY_LR: 80 at 1e-2 unless set for the
# call), exported to every GGUF type; greedy text from PROMPT compared.
family_case() {
  local name=$1 family=$2 vocab=$3 tokenizer=$4 prompt=$5 dir=$WORK/families/$1
  shift 5
  if [ -n "$CASES" ] && [[ " $CASES " != *" $name "* ]]; then return 0; fi
  echo "--- $name ($family)"
  rm -rf "$dir"
  mkdir -p "$dir"
  /usr/bin/python3 scripts/family_reference.py --write "$family" "$dir/init" "$vocab" "$@"
  "$MT" train --set model.path="$dir/init" --set data.tokenizer="$tokenizer" --set train.steps="${FAMILY_STEPS:-80}" \
    --set train.seq_len=64 --set train.batch_size=8 --set optim.lr="${FAMILY_LR:-1e-2}" --set optim.warmup_steps=5 \
    --set train.log_every=40 --set train.peak_gflops=100 --set output.dir="$dir/run" | grep -E '^done' || true
  local model=$dir/run/model
  for d in f32 f16 bf16 q8_0 q4_0; do
    "$MT" export -m "$model" --gguf "$dir/$d.gguf" --gguf-dtype "$d" | tee "$dir/export-$d.txt" | sed 's/^/  /'
  done
  # The prompt's ids as meshtrain generate starts from them (BOS where the tokenizer has one).
  { "$MT" tokenize --tokenizer "$model" --bos --text "$prompt" 2>/dev/null ||
    "$MT" tokenize --tokenizer "$model" --text "$prompt"; } | tr -d '[],' > "$dir/prompt-bos.txt"
  "$MT" tokenize --tokenizer "$model" --text "$prompt" | tr -d '[],' > "$dir/prompt.txt"
  LC --model "$dir/f32.gguf" -n 0 --tokenize "$prompt" | sed 's/^tokens: //' > "$dir/prompt-lc.txt"
  same "$name: llama.cpp tokenize $(printf '%q' "$prompt") = meshtrain ($(cat "$dir/prompt-lc.txt"))" \
    "$dir/prompt.txt" "$dir/prompt-lc.txt"
  # meshtrain prints the prompt with its BOS; llama.cpp's detokenizer leaves special tokens out.
  mt_text() { "$MT" generate "$@" | sed -e 's/^<|endoftext|>//' -e 's/^<|begin_of_text|>//'; }
  mt_text -m "$model" --prompt "$prompt" -n 40 > "$dir/mt-source.txt"
  for d in f32 f16 bf16 q8_0 q4_0; do
    LC --model "$dir/$d.gguf" --prompt-ids "$(cat "$dir/prompt-bos.txt")" -n 40 --text-out "$dir/lc-$d.txt" > "$dir/lc-$d.ids"
    mt_text -m "$dir/$d.gguf" --prompt "$prompt" -n 40 > "$dir/mt-$d.txt"
    if [ "$d" = f32 ]; then
      same "$name f32: llama.cpp greedy text = meshtrain generate -m f32.gguf" "$dir/mt-f32.txt" "$dir/lc-f32.txt"
      if grep -q "note: " "$dir/export-f32.txt"; then
        echo "  (not compared with the HF directory: the export's note says llama.cpp computes otherwise)"
      else
        same "$name f32: llama.cpp greedy text = meshtrain generate -m the HF directory" "$dir/mt-source.txt" "$dir/lc-f32.txt"
      fi
      continue
    fi
    # llama.cpp's CPU products round the activations to the weights' vec-dot type (f16, bf16, or
    # Q8_0 for Q8_0 / Q4_0 weights), which meshtrain does not: on such a file the two programs may
    # part where two logits are close. The file's own content is checked exactly: meshtrain
    # widens its weights to an f32 GGUF, and llama.cpp on that file must give meshtrain's text.
    "$MT" export -m "$dir/$d.gguf" --gguf "$dir/$d-as-f32.gguf" --gguf-dtype f32 > /dev/null
    LC --model "$dir/$d-as-f32.gguf" --prompt-ids "$(cat "$dir/prompt-bos.txt")" -n 40 \
      --text-out "$dir/lc-$d-as-f32.txt" > /dev/null
    same "$name $d: llama.cpp on the file's weights widened to f32 = meshtrain generate -m $d.gguf" \
      "$dir/mt-$d.txt" "$dir/lc-$d-as-f32.txt"
    if cmp -s "$dir/mt-$d.txt" "$dir/lc-$d.txt"; then
      echo "  ok    $name $d: llama.cpp on $d.gguf itself gives the same text"
    else
      echo "  note  $name $d: llama.cpp on $d.gguf itself (activations rounded) parts from it after" \
           "$(common_text_prefix "$dir/mt-$d.txt" "$dir/lc-$d.txt") characters:"
      echo "          meshtrain: $(head -c 200 "$dir/mt-$d.txt")"
      echo "          llama.cpp: $(head -c 200 "$dir/lc-$d.txt")"
    fi
  done
  echo "  meshtrain (HF directory): $(head -c 300 "$dir/mt-source.txt")"
  echo "  llama.cpp (f32 GGUF):     $(head -c 300 "$dir/lc-f32.txt")"
}

# Characters two one-line files share from their start.
common_text_prefix() {
  /usr/bin/python3 -c 'import os, sys; print(len(os.path.commonprefix([open(f, encoding="utf-8").read() for f in sys.argv[1:]])))' "$1" "$2"
}

echo "=== families in their llama.cpp architectures"
# Qwen2.5-like: q/k/v biases, tied embeddings, rope theta 1e6, no window (as released Qwen2.5).
family_case qwen2 qwen2 151936 "$QWEN_TOKENIZER" "In the village by the" use_sliding_window=false
# Qwen3-like: q/k norms, head_dim 24 (not 64 / 4), untied head.
family_case qwen3 qwen3 151936 "$QWEN_TOKENIZER" "In the village by the"
# Mistral v0.3-like: no window (sliding_window null), an explicit head_dim of 32 (not 64 / 4 = 16;
# llama.cpp reads it as attention.key_length), sentencepiece tokenizer.
family_case mistral mistral 512 "$STORIES/tok512.model" "In the village by the" sliding_window=null
# Mistral v0.1-like: a window of 6 on every layer. llama.cpp's llama attends to the whole context.
family_case mistral-window mistral 512 "$STORIES/tok512.model" "In the village by the"
# GPT-2: LayerNorms with biases, GeLU MLP, learned positions (128), q/k/v fused into llama.cpp's
# attn_qkv, tied head; GPT-2's own byte-level BPE (llama.cpp's "gpt2" vocabulary, pre "gpt-2").
# 80 steps at 1e-2 leave its greedy text repeating "the": it trains longer, at a lower rate.
FAMILY_STEPS=240 FAMILY_LR=3e-3 family_case gpt2 gpt2 50257 "$GPT2_TOKENIZER" "In the village by the" bos_token_id=50256 eos_token_id=50256
# Gemma 3: four (1 + w) norms a layer, q/k norms, GeGLU, scaled embeddings, head_dim 24, windows
# of 5 on layers 0 and 1 (RoPE base 10000) and layer 2 global (1e6, linear scaling 8);
# query_pre_attn_scalar = head_dim, the scale llama.cpp's gemma3 applies. The synthetic Gemma
# tokenizer (byte-fallback BPE, written as llama.cpp's sentencepiece-style "llama" vocabulary).
family_case gemma3 gemma3 723 "$GEMMA_TOKENIZER" "In the village by the" query_pre_attn_scalar=24 \
  bos_token_id=2 eos_token_id=1

# Mixtures of experts (docs/gguf.md). Mixtral: Mistral's attention without a window, 4 experts
# (intermediate_size 96 wide), 2 a token, renormalised; llama.cpp's llama with expert_count.
family_case mixtral mixtral 512 "$STORIES/tok512.model" "In the village by the"
# Qwen3-MoE as Qwen3-30B-A3B routes: every layer sparse and the top k renormalised (llama.cpp's
# qwen3moe always renormalises, so the fixture's norm_topk_prob false and dense layer are turned
# off), 6 experts 64 wide (whole Q8_0 / Q4_0 blocks), 3 a token, per-head q/k norms, head_dim 24.
family_case qwen3_moe qwen3_moe 151936 "$QWEN_TOKENIZER" "In the village by the" norm_topk_prob=true \
  'mlp_only_layers=[]' moe_intermediate_size=64
# OLMoE: q/k norms over the whole projections, weights not renormalised; as many kv heads as heads
# (llama.cpp's olmoe sizes k's norm [hidden]); sentencepiece tokenizer (the vocabulary is not the
# architecture's: llama.cpp reads tokenizer.ggml.model).
family_case olmoe olmoe 512 "$STORIES/tok512.model" "In the village by the" num_key_value_heads=4

# family_lora_case NAME: on step 5's NAME model, a LoRA adapter on every expert's gate, up and
# down and nothing else (so a text the adapter changes shows llama.cpp applied the experts'
# stacked adapters), trained 20 steps on the built-in text (the model's context, 128, is shorter
# than the Alpaca records), exported as a GGUF adapter and merged:
# llama.cpp base + adapter = llama.cpp merged GGUF (ids) = meshtrain generate with the adapter.
family_lora_case() {
  local name=$1 prompt=$2 dir=$WORK/families/$1
  if [ -n "$CASES" ] && [[ " $CASES " != *" $name "* ]]; then return 0; fi
  echo "--- $name LoRA"
  rm -rf "$dir/lora" "$dir/merged"
  cat > "$dir/lora.toml" <<TOML
[model]
path = "$dir/run/model"
[lora]
enabled = true
rank = 4
alpha = 8.0
targets = ["gate", "up", "down"]
[optim]
lr = 1e-2
warmup_steps = 2
weight_decay = 0.0
[train]
steps = 20
batch_size = 2
seq_len = 64
log_every = 10
peak_gflops = 100
[output]
dir = "$dir/lora"
TOML
  "$MT" train --config "$dir/lora.toml" | grep -E '^done' || true
  "$MT" export -m "$dir/run/model" --adapter "$dir/lora/adapter" --gguf-adapter "$dir/lora.gguf" --merged "$dir/merged" >/dev/null
  "$MT" export -m "$dir/merged" --gguf "$dir/merged-f32.gguf" --gguf-dtype f32 > /dev/null
  "$MT" generate -m "$dir/run/model" --adapter "$dir/lora/adapter" --template none --prompt "$prompt" -n 40 |
    sed -e 's/^<|endoftext|>//' -e 's/^<|begin_of_text|>//' > "$dir/mt-lora.txt"
  LC --model "$dir/f32.gguf" --lora "$dir/lora.gguf" --prompt-ids "$(cat "$dir/prompt-bos.txt")" -n 40 \
    --text-out "$dir/lc-lora.txt" > "$dir/lc-lora.ids"
  LC --model "$dir/merged-f32.gguf" --prompt-ids "$(cat "$dir/prompt-bos.txt")" -n 40 \
    --text-out "$dir/lc-merged.txt" > "$dir/lc-merged.ids"
  same "$name: llama.cpp base + GGUF adapter = llama.cpp merged GGUF (ids)" "$dir/lc-lora.ids" "$dir/lc-merged.ids"
  same "$name: llama.cpp base + GGUF adapter = meshtrain with the adapter" "$dir/mt-lora.txt" "$dir/lc-lora.txt"
  if cmp -s "$dir/lc-lora.txt" "$dir/lc-f32.txt"; then
    echo "  FAIL  $name: the adapter changed nothing (no evidence it was applied)"; FAIL=1
  else
    echo "  ok    $name: the adapter changes the text (base and adapted differ)"
  fi
  echo "  meshtrain + adapter: $(head -c 300 "$dir/mt-lora.txt")"
  echo "  llama.cpp + adapter: $(head -c 300 "$dir/lc-lora.txt")"
}
family_lora_case mixtral "In the village by the"

# added_tokens_case: data.add_tokens on stories260K (whose tokenizer has no chat markers): a LoRA
# run on chatml data adds <|im_start|> and <|im_end|> (embedding and head rows grown, trained in
# full as PEFT's modules_to_save), merged and exported to GGUF. llama.cpp must read the grown
# vocabulary: the markers as control tokens (parsed from text only when special tokens are asked
# for, as meshtrain's template writes them), the same prompt ids as meshtrain's chat rendering,
# and the same greedy answer as meshtrain generate on the merged directory and on the GGUF.
added_tokens_case() {
  local name=added_tokens dir=$WORK/added_tokens
  if [ -n "$CASES" ] && [[ " $CASES " != *" $name "* ]]; then return 0; fi
  echo "--- $name (stories260K + <|im_start|>, <|im_end|>)"
  rm -rf "$dir"
  mkdir -p "$dir"
  "$MT" convert --llama2c "$STORIES/stories260K.bin" --tokenizer "$STORIES/tok512.bin" --out "$dir/base" >/dev/null
  /usr/bin/python3 - "$dir/chat.jsonl" <<'PY'
import json, sys
names = ["Lily", "Tom", "Sue", "Max", "Ben", "Mia", "Sam", "Amy"]
things = ["ball", "cat", "tree", "cake", "dog", "boat"]
with open(sys.argv[1], "w") as f:
    for i in range(48):
        n, t = names[i % 8], things[i % 6]
        f.write(json.dumps({"messages": [{"role": "user", "content": f"Who has the {t}?"},
                                         {"role": "assistant", "content": f"{n} has the {t}. {n} is happy."}]}) + "\n")
PY
  "$MT" train --model "$dir/base" --lora --data "$dir/chat.jsonl" --set data.format=chatml --seq-len 64 \
    --batch-size 4 --steps 60 --lr 5e-3 --set optim.schedule=constant --set optim.warmup_steps=0 \
    --set 'data.add_tokens=["<|im_start|>", "<|im_end|>"]' --set data.val_fraction=0 --set train.log_every=30 \
    --set train.peak_gflops=100 --set data.cache_dir=off --out "$dir/run" | grep -E '^done' || true
  "$MT" export -m "$dir/base" --adapter "$dir/run/adapter" --merged "$dir/merged" >/dev/null
  "$MT" export -m "$dir/merged" --gguf "$dir/merged.gguf" --gguf-dtype f32 | sed 's/^/  /'
  # The markers' ids in the grown tokenizer.json (meshtrain tokenize reads text, never markers).
  added_id() {
    /usr/bin/python3 -c 'import json, sys
print(next(a["id"] for a in json.load(open(sys.argv[1]))["added_tokens"] if a["content"] == sys.argv[2]))' \
      "$dir/merged/tokenizer.json" "$1"
  }
  local start_id end_id
  start_id=$(added_id "<|im_start|>") end_id=$(added_id "<|im_end|>")
  echo "$start_id $end_id" > "$dir/markers-mt.txt"
  { LC --model "$dir/merged.gguf" -n 0 --tokenize-special "<|im_start|>"
    LC --model "$dir/merged.gguf" -n 0 --tokenize-special "<|im_end|>"; } | sed 's/^tokens: //' | paste -sd' ' > "$dir/markers-lc.txt"
  same "$name: llama.cpp reads each marker as one token with meshtrain's id ($(cat "$dir/markers-lc.txt"))" \
    "$dir/markers-mt.txt" "$dir/markers-lc.txt"
  local ask=(--template chatml --prompt "Who has the cake?" -n 24 -v)
  "$MT" generate -m "$dir/merged" "${ask[@]}" > "$dir/answer-mt.txt" 2> "$dir/answer-mt.log"
  sed -n 's/^generate: prompt of [0-9]* tokens: //p' "$dir/answer-mt.log" | tr -d '[],' > "$dir/prompt-mt.txt"
  local prompt=$'<|im_start|>user\nWho has the cake?<|im_end|>\n<|im_start|>assistant\n'
  LC --model "$dir/merged.gguf" -n 0 --tokenize-special "$prompt" | sed 's/^tokens: //' > "$dir/prompt-lc.txt"
  same "$name: llama.cpp's tokenization of the chatml prompt (special tokens on) = meshtrain's rendering" \
    "$dir/prompt-mt.txt" "$dir/prompt-lc.txt"
  "$MT" generate -m "$dir/merged.gguf" "${ask[@]}" > "$dir/answer-mtg.txt" 2> /dev/null
  same "$name: meshtrain on the GGUF = on the merged directory" "$dir/answer-mt.txt" "$dir/answer-mtg.txt"
  grep -q "stopped at id $end_id " "$dir/answer-mt.log" ||
    { echo "  FAIL  $name: meshtrain's answer did not end at <|im_end|>: $(tail -1 "$dir/answer-mt.log")"; FAIL=1; }
  # Both print the prompt and the answer without the markers. The prompt starts with a control
  # token, not BOS, so llama.cpp's detokenizer keeps the first word's leading space, which
  # meshtrain's (as at the start of any text) drops: one leading space is taken off.
  LC --model "$dir/merged.gguf" --prompt-ids "$(cat "$dir/prompt-mt.txt")" --stop-id "$end_id" -n 24 \
    --text-out "$dir/answer-lc-raw.txt" > "$dir/answer-lc.ids"
  sed '1s/^ //' "$dir/answer-lc-raw.txt" > "$dir/answer-lc.txt"
  same "$name: llama.cpp greedy answer = meshtrain's" "$dir/answer-mt.txt" "$dir/answer-lc.txt"
  # node-llama-cpp ends at an end-of-generation token without yielding it (llama.cpp marks
  # <|im_end|> as one), or yields --stop-id's: either way fewer than the 24 tokens asked for.
  if [ "$(sed 's/^ids: //' "$dir/answer-lc.ids" | wc -w)" -lt 24 ]; then
    echo "  ok    $name: llama.cpp ended the answer at the end of turn ($(sed 's/^ids: //' "$dir/answer-lc.ids" | wc -w) tokens), as meshtrain did"
  else echo "  FAIL  $name: llama.cpp ran on to 24 tokens: $(cat "$dir/answer-lc.ids")"; FAIL=1; fi
  echo "  llama.cpp: $(head -c 300 "$dir/answer-lc.txt")"
}
added_tokens_case

if [ "$FAIL" = 0 ]; then echo "=== all match"; else echo "=== MISMATCH" >&2; fi
exit "$FAIL"
