#!/usr/bin/env bash
# The QLoRA figures of docs/qlora.md, printed: the held-out perplexity of the pretrained
# stories260K with its base in bf16 and in NF4, and of a larger model trained here on
# tinyshakespeare; LoRA fine-tuning of it on the bf16 base and on the
# NF4 base with the same data and seed (loss per step side by side, peak memory of each run); the
# peak memory of LoRA on a larger random base, bf16 against NF4; and the base's bytes for
# stories260K and the Llama 3.1 405B shape (from `meshtrain shard`, which counts what the trainer
# places). A few minutes on two cores.
# Usage: scripts/qlora_figures.sh [STEPS]   (MESHTRAIN=path/to/meshtrain to use another binary;
#        big_steps=N for the larger model's training steps, default 400)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${MESHTRAIN:-build/meshtrain}
steps=${1:-30}
s260=../shared/data/stories260K
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== held-out perplexity of stories260K (tests/data/heldout_story.txt, bf16 compute)"
for dt in bf16 nf4; do
  printf '%-5s base: ' "$dt"
  "$bin" eval -m $s260/stories260K.bin --tokenizer $s260/tok512.bin -d tests/data/heldout_story.txt \
    --seq-len 128 --precision bf16 --base-dtype "$dt" | sed 's/^eval: //'
done

echo "== held-out perplexity of a larger model trained here (hidden 256, MLP 768, 6 layers, tok512;"
echo "   ${big_steps:=400} full-training steps on tinyshakespeare less its last 100 kB, evaluated on those 100 kB)"
head -c -100000 ../shared/data/text/tinyshakespeare.txt > "$work/shakespeare_train.txt"
tail -c 100000 ../shared/data/text/tinyshakespeare.txt > "$work/shakespeare_heldout.txt"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$bin" train --data "$work/shakespeare_train.txt" --out "$work/trained" \
  --set data.tokenizer=$s260/tok512.bin --set model.vocab_size=512 --set model.hidden_size=256 \
  --set model.intermediate_size=768 --set model.num_hidden_layers=6 --set model.num_attention_heads=8 \
  --set model.num_key_value_heads=4 --set train.steps="$big_steps" --set train.seq_len=256 \
  --set train.batch_size=8 --set train.seed=1 --set train.log_every=100 --set train.peak_gflops=100 \
  --set optim.lr=3e-3 --set optim.warmup_steps=40 > "$work/trained.log" 2>&1 || { cat "$work/trained.log"; exit 1; }
grep -o 'final loss [0-9.]*' "$work/trained.log"
for dt in bf16 nf4; do
  printf '%-5s base: ' "$dt"
  "$bin" eval -m "$work/trained/model" -d "$work/shakespeare_heldout.txt" --seq-len 256 --precision bf16 \
    --base-dtype "$dt" | sed 's/^eval: //'
done

echo "== LoRA fine-tuning of stories260K on 200 kB of tinyshakespeare, $steps steps, seed 1"
head -c 200000 ../shared/data/text/tinyshakespeare.txt > "$work/train.txt"
for dt in bf16 nf4; do
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$bin" train --model $s260/stories260K.bin --data "$work/train.txt" --lora \
    --out "$work/$dt" --set data.tokenizer=$s260/tok512.bin --set lora.base_dtype="$dt" \
    --set train.steps="$steps" --set train.seed=1 --set train.seq_len=128 --set train.batch_size=8 \
    --set train.log_every=1000 --set train.peak_gflops=100 --set optim.lr=5e-3 --set lora.rank=8 \
    > "$work/$dt.log" 2>&1 || { cat "$work/$dt.log"; exit 1; }
  sed -n 's/.*"loss":\([-0-9.eE+]*\).*/\1/p' "$work/$dt/metrics.jsonl" > "$work/$dt.losses"
done
echo "step  bf16-base  nf4-base"
paste "$work/bf16.losses" "$work/nf4.losses" | awk '{ printf "%4d  %9.4f  %8.4f\n", NR, $1, $2 }'
for dt in bf16 nf4; do printf '%-5s base: ' "$dt"; grep -o 'peak memory.*' "$work/$dt.log"; done

echo "== peak memory of a larger model (random base: hidden 1024, MLP 2816, 4 layers; 3 LoRA steps)"
for dt in bf16 nf4; do
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$bin" train --lora --out "$work/big-$dt" --set lora.random_base=true \
    --set lora.base_dtype="$dt" --set model.hidden_size=1024 --set model.intermediate_size=2816 \
    --set model.num_attention_heads=16 --set model.num_key_value_heads=8 --set train.steps=3 \
    --set train.seq_len=32 --set train.batch_size=2 --set train.peak_gflops=100 --set train.seed=1 \
    > "$work/big-$dt.log" 2>&1 || { cat "$work/big-$dt.log"; exit 1; }
  printf '%-5s base: ' "$dt"; grep -o 'final loss [0-9.]*' "$work/big-$dt.log" | tr '\n' ','; grep -o ' peak memory.*' "$work/big-$dt.log"
done

echo "== base bytes (meshtrain shard, one unsharded copy, frozen base + adapters)"
base_bytes() {  # weights of one rank on a one-rank mesh: bf16 part + NF4 part
  "$bin" shard --mesh dp=1 --json "$@" --set lora.enabled=true |
    python3 -c 'import json,sys; b=json.load(sys.stdin)["ranks"][0]["bytes"]; print(b["weights_bf16"], b.get("weights_nf4", 0))'
}
for model in "--model $s260/stories260K.bin" "--preset llama3-405b"; do
  read -r b16 _ < <(base_bytes $model --set lora.base_dtype=bf16)
  read -r rest nf4 < <(base_bytes $model --set lora.base_dtype=nf4)
  python3 -c "b=$b16; r=$rest; q=$nf4; print(f'${model##* }: bf16 base {b/2**20:.2f} MiB; nf4 base {(r+q)/2**20:.2f} MiB (projections {q/2**20:.2f} MiB NF4, rest bf16): {b/(r+q):.2f}x smaller; projections alone {(b-r)/q:.2f}x')"
done
