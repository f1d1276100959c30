#!/usr/bin/env bash
# meshtrain's reference shape side by side with the same model in plain PyTorch on the same machine,
# threads and work (docs/benchmarks.md, "Side by side with PyTorch"):
#   scripts/torch_side_by_side.sh [STEPS [BATCH [SEQ [ROUNDS]]]]   (defaults: 3 timed steps, 4 x 512, 2 rounds)
# The model is the reference shape (hidden 768, intermediate 2048, 12 layers, 12 heads, 4 KV heads,
# vocabulary 32000, untied head: `meshtrain bench`'s default), as a random LLaMA in Hugging Face's
# layout (scripts/family_reference.py --write). The script
#   1. writes that model and a batch (the first BATCH x SEQ + 1 tokens of tinyshakespeare through
#      stories260K's 512-token SentencePiece model, BOS first, as `meshtrain eval` reads a text:
#      scripts/llmc_inputs.py);
#   2. checks that PyTorch's fp32 loss of that batch (scripts/torch_side_by_side.py, a LLaMA written
#      in PyTorch eager) equals `meshtrain eval`'s within 1e-4: the two compute the same model;
#   3. times, ROUNDS times alternately so that a changing load hits both alike, PyTorch's full
#      training and LoRA (rank 8 on q, k, v, o, gate, up, down) and `meshtrain bench --what full` /
#      `--what lora` at the same shape, batch, threads and PRECISION, STEPS timed steps after one
#      warm-up step each; prints every run and the means.
# PRECISION (environment): bf16 (mixed: torch.autocast, meshtrain's default) or fp32. Default bf16
# where the CPU has AVX512-BF16 or AMX, else fp32: without them PyTorch's CPU bf16 products fall
# back to a generic loop (0.4 GFLOP/s measured on an AVX2 machine, where its fp32 products run on
# the BLAS), which would time that fallback rather than the framework.
# Needs PyTorch for /usr/bin/python3 (Debian: apt-get install python3-torch, 1.13 in Debian 12, and
# an optimised BLAS under it, e.g. libopenblas0-pthread: Debian's default libblas is the reference
# netlib one) — optional benchmark dependencies, not build or test ones.
# Environment: MESHTRAIN (default build/meshtrain), OMP_NUM_THREADS (default: every core), PRECISION.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "torch_side_by_side: $*" >&2; exit 1; }
[ $# -le 4 ] || die "usage: scripts/torch_side_by_side.sh [STEPS [BATCH [SEQ [ROUNDS]]]]"
steps=${1:-3} batch=${2:-4} seq=${3:-512} rounds=${4:-2}
for v in "STEPS $steps" "BATCH $batch" "SEQ $seq" "ROUNDS $rounds"; do
  [[ ${v#* } =~ ^[1-9][0-9]*$ ]] || die "${v% *} '${v#* }': expected a positive whole number"
done
[ "$seq" -le 2048 ] || die "SEQ $seq: the reference shape has 2048 positions"
meshtrain=${MESHTRAIN:-$root/build/meshtrain}
[ -x "$meshtrain" ] || die "$meshtrain: no meshtrain binary (run scripts/build.sh, or set MESHTRAIN)"
tokenizer=$root/../shared/data/stories260K/tok512.model
text=$root/../shared/data/text/tinyshakespeare.txt
[ -f "$tokenizer" ] && [ -f "$text" ] || die "$tokenizer or $text: the shared test data is not there"
/usr/bin/python3 -c 'import numpy, torch' 2>/dev/null ||
  die "/usr/bin/python3 has no PyTorch or numpy (apt-get install python3-torch python3-numpy)"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
if [ -z "${PRECISION:-}" ]; then
  PRECISION=fp32
  grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && PRECISION=bf16
fi
[ "$PRECISION" = bf16 ] || [ "$PRECISION" = fp32 ] || die "PRECISION '$PRECISION': expected bf16 or fp32"
torch_py=$root/scripts/torch_side_by_side.py

work=$(mktemp -d -t torch_side_by_side.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== inputs: a random LLaMA at the reference shape and tinyshakespeare's first $((batch * seq + 1)) tokens"
/usr/bin/python3 "$root/scripts/family_reference.py" --write llama "$work/hf" 32000 hidden_size=768 \
  intermediate_size=2048 num_hidden_layers=12 num_attention_heads=12 num_key_value_heads=4 \
  max_position_embeddings=2048
/usr/bin/python3 "$root/scripts/llmc_inputs.py" batch "$meshtrain" "$tokenizer" "$text" $((batch * seq + 1)) \
  "$work/batch.txt" "$work/batch.bin"

echo "== the same model: fp32 loss of the batch, PyTorch and meshtrain eval"
torch_loss=$(/usr/bin/python3 "$torch_py" loss "$work/hf" "$work/batch.bin" "$batch" "$seq")
"$meshtrain" eval --model "$work/hf" --tokenizer "$tokenizer" --data "$work/batch.txt" --seq-len "$seq" --batch "$batch" \
  --precision fp32 >"$work/eval.log" 2>&1 || die "meshtrain eval failed: $(tail -n 2 "$work/eval.log")"
mt_loss=$(sed -n 's/.*mean loss \([0-9.eE+-]*\),.*/\1/p' "$work/eval.log")
[ -n "$mt_loss" ] || die "meshtrain eval printed no mean loss: $(tail -n 2 "$work/eval.log")"
echo "   PyTorch $torch_loss, meshtrain $mt_loss"
awk -v a="$torch_loss" -v b="$mt_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4) }' ||
  die "the losses differ by more than 1e-4: PyTorch $torch_loss, meshtrain $mt_loss"

# One line per run: PROGRAM WHAT ms/step tokens/s.
: >"$work/runs"
run_torch() {
  /usr/bin/python3 "$torch_py" time "$work/hf" "$work/batch.bin" "$batch" "$seq" "$steps" "$1" 8 "$PRECISION" >"$work/t.log" 2>&1 ||
    die "PyTorch's $1 run failed: $(tail -n 2 "$work/t.log")"
  sed 's/^/   /' "$work/t.log"
  sed -n "s/^torch $1 $PRECISION: \([0-9]*\) ms\/step, \([0-9.]*\) tokens\/s.*/torch $1 \1 \2/p" "$work/t.log" >>"$work/runs"
}
run_meshtrain() {
  "$meshtrain" bench --what "$1" --batch "$batch" --seq "$seq" --steps "$steps" --precision "$PRECISION" >"$work/m.log" 2>&1 ||
    die "meshtrain bench --what $1 failed: $(tail -n 2 "$work/m.log")"
  grep -E 'tokens/s|peak used' "$work/m.log" | sed 's/^ */   meshtrain '"$1"': /'
  sed -n 's/^ *\([0-9]*\) tokens\/s, \([0-9]*\) ms\/step.*/\2 \1/p' "$work/m.log" | head -n 1 |
    sed "s/^/meshtrain $1 /" >>"$work/runs"
}
for r in $(seq "$rounds"); do
  echo "== round $r of $rounds ($PRECISION, $OMP_NUM_THREADS threads, batch $batch x $seq, $steps timed steps; load average $(cut -d' ' -f1-3 /proc/loadavg))"
  for what in full lora; do
    run_torch "$what"
    run_meshtrain "$what"
  done
done

echo
echo "== reference shape, batch $batch x $seq, $PRECISION, $OMP_NUM_THREADS threads ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), load average $(cut -d' ' -f1 /proc/loadavg)); means of $rounds runs"
awk '{ k = $1 " " $2; ms[k] += $3; tok[k] += $4; n[k]++ } END {
  printf "  %-18s %10s %10s\n", "", "ms/step", "tokens/s"
  split("torch full,meshtrain full,torch lora,meshtrain lora", order, ",")
  for (i = 1; i <= 4; i++) { k = order[i]; if (n[k]) printf "  %-18s %10.0f %10.1f\n", k, ms[k] / n[k], tok[k] / n[k] }
  if (n["torch full"] && n["meshtrain full"]) printf "  meshtrain / PyTorch: full %.2fx", (tok["meshtrain full"] / n["meshtrain full"]) / (tok["torch full"] / n["torch full"])
  if (n["torch lora"] && n["meshtrain lora"]) printf ", LoRA %.2fx", (tok["meshtrain lora"] / n["meshtrain lora"]) / (tok["torch lora"] / n["torch lora"])
  printf "\n" }' "$work/runs"
