#!/usr/bin/env bash
# GPT-2 124M side by side with llm.c's CPU trainer on the same machine, threads and work
# (docs/benchmarks.md, "GPT-2 124M, llm.c's shape"):
#   scripts/llmc_side_by_side.sh LLMC_DIR [STEPS [BATCH [SEQ]]]      (defaults: 3 timed steps, 4 x 1024)
# LLMC_DIR is a checkout of https://github.com/karpathy/llm.c (the user's; nothing is downloaded,
# nothing of it is kept). In a temp dir the script
#   1. copies llm.c's train_gpt2.c (and its llmc/ headers) and patches the copy: batch BATCH x SEQ,
#      STEPS + 1 steps (step 0 is the warm-up), no validation or sampling between steps; refuses
#      when llm.c's memory at that shape (it keeps every activation and its gradient, the attention
#      matrices too: about 20 GiB at 4 x 1024) exceeds what the machine has available;
#   2. builds it as llm.c's Makefile does for the CPU (cc -Ofast -march=native -fopenmp; LLMC_CFLAGS
#      overrides);
#   3. writes its inputs in its own formats (scripts/llmc_inputs.py): a random GPT-2 124M in Hugging
#      Face's layout (scripts/family_reference.py --write), which meshtrain loads, as llm.c's
#      checkpoint; and the first BATCH x SEQ + 1 tokens of tinyshakespeare (meshtrain's GPT-2 tokenizer, BOS
#      first, as meshtrain eval reads a text) as llm.c's token shard;
#   4. checks that llm.c's step-0 loss on that batch equals `meshtrain eval`'s loss of the same
#      weights and tokens (fp32, within 1e-4), printing both;
#   5. runs llm.c's STEPS timed steps and `meshtrain bench --preset gpt2 --batch BATCH --seq SEQ` fp32
#      and bf16 for STEPS timed steps, all with OMP_NUM_THREADS (default: every core), and prints
#      ms/step, tokens/s and MFU for each (llm.c's MFU with meshtrain's FLOP count and GEMM peak).
# Environment: MESHTRAIN (default build/meshtrain), OMP_NUM_THREADS, LLMC_CFLAGS, CC (default cc).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "llmc_side_by_side: $*" >&2; exit 1; }
[ $# -ge 1 ] && [ $# -le 4 ] ||
  die "usage: scripts/llmc_side_by_side.sh LLMC_DIR [STEPS [BATCH [SEQ]]] (LLMC_DIR: a checkout of github.com/karpathy/llm.c)"
llmc=$1 steps=${2:-3} batch=${3:-4} seq=${4:-1024}
[ -f "$llmc/train_gpt2.c" ] && [ -d "$llmc/llmc" ] ||
  die "$llmc: not an llm.c checkout (expected train_gpt2.c and llmc/ there; git clone https://github.com/karpathy/llm.c)"
for v in "STEPS $steps" "BATCH $batch" "SEQ $seq"; do
  [[ ${v#* } =~ ^[1-9][0-9]*$ ]] || die "${v% *} '${v#* }': expected a positive whole number"
done
[ "$seq" -le 1024 ] || die "SEQ $seq: GPT-2 has 1024 positions"
meshtrain=${MESHTRAIN:-$root/build/meshtrain}
[ -x "$meshtrain" ] || die "$meshtrain: no meshtrain binary (run scripts/build.sh, or set MESHTRAIN)"
tokenizer=$root/../shared/data/tokenizers/gpt2
text=$root/../shared/data/text/tinyshakespeare.txt
[ -e "$tokenizer" ] && [ -f "$text" ] || die "$tokenizer or $text: the shared test data is not there"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || die "/usr/bin/python3 has no numpy (apt-get install python3-numpy)"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
cc=${CC:-cc}
cflags=${LLMC_CFLAGS:--Ofast -march=native -fopenmp -DOMP}

# llm.c's CPU trainer mallocs every activation of the step and as much again for their gradients
# (train_gpt2.c: fill_in_activation_sizes, gpt2_backward), the B x heads x T x T attention
# matrices among them, besides weights, gradients and AdamW's two moments.
need=$(awk -v B="$batch" -v T="$seq" 'BEGIN { C = 768; L = 12; H = 12; Vp = 50304; P = 1024
  acts = B * T * (2 * C + L * (18 * C + 4) + 2 + 2 * Vp + 1) + 2 * L * B * H * T * T
  params = Vp * C + P * C + L * (12 * C * C + 13 * C) + 2 * C
  printf "%.0f", 4 * (2 * acts + 4 * params) / 2^30 + 1 }')
avail=$(awk '/^MemAvailable:/ {printf "%.0f", $2 / 2^20}' /proc/meminfo)
[ "$need" -le "$avail" ] ||
  die "llm.c's train_gpt2 needs about $need GiB at $batch x $seq, $avail GiB are available: give a smaller BATCH or SEQ"

work=$(mktemp -d -t llmc_side_by_side.XXXXXX)
trap 'rm -rf "$work"' EXIT

# 1-2. llm.c's CPU trainer, patched in the copy. Each patch must match exactly once, so a changed
# train_gpt2.c is refused rather than timed on the wrong work.
mkdir -p "$work/llmc/dev/data/tinyshakespeare"
cp "$llmc/train_gpt2.c" "$work/llmc/" && cp -r "$llmc/llmc" "$work/llmc/llmc"
patch_once() {  # FROM TO: replace the one line FROM (a fixed string) by TO
  local n
  n=$(grep -cF -- "$1" "$work/llmc/train_gpt2.c" || true)
  [ "$n" = 1 ] || die "$llmc/train_gpt2.c: expected one line '$1' to patch, found $n (another llm.c version?)"
  FROM=$1 TO=$2 perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$work/llmc/train_gpt2.c"
}
patch_once 'int B = 4;' "int B = $batch;"
patch_once 'int T = 64;' "int T = $seq;"
patch_once 'for (int step = 0; step <= 40; step++) {' "for (int step = 0; step <= $steps; step++) {"
patch_once 'if (step % 10 == 0) {' 'if (0) { // validation: not between timed steps'
patch_once 'if (step > 0 && step % 20 == 0) {' 'if (0) { // sampling: not between timed steps'
# shellcheck disable=SC2086
"$cc" $cflags -I"$work/llmc" "$work/llmc/train_gpt2.c" -lm -o "$work/llmc/train_gpt2" 2>"$work/cc.log" ||
  die "building llm.c's train_gpt2.c failed ($cc $cflags): $(head -c 400 "$work/cc.log")"

# 3. The same model and batch for both.
echo "== inputs: a random GPT-2 124M (scripts/family_reference.py --write) and tinyshakespeare's first $((batch * seq + 1)) tokens"
/usr/bin/python3 "$root/scripts/family_reference.py" --write gpt2 "$work/hf" 50257 n_embd=768 n_layer=12 n_head=12 \
  n_positions=1024 n_ctx=1024 bos_token_id=50256 eos_token_id=50256
/usr/bin/python3 "$root/scripts/llmc_inputs.py" checkpoint "$work/hf" "$work/llmc/gpt2_124M.bin"
/usr/bin/python3 "$root/scripts/llmc_inputs.py" batch "$meshtrain" "$tokenizer" "$text" $((batch * seq + 1)) \
  "$work/batch.txt" "$work/llmc/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
cp "$work/llmc/dev/data/tinyshakespeare/tiny_shakespeare_train.bin" "$work/llmc/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"

# 4-5. llm.c: step 0 (warm-up) gives the loss of the batch before any update; the timed steps follow.
echo "== llm.c train_gpt2 ($cc $cflags), $OMP_NUM_THREADS threads, batch $batch x $seq, fp32, steps 0..$steps"
(cd "$work/llmc" && ./train_gpt2) >"$work/llmc.log" 2>&1 || die "llm.c's train_gpt2 failed: $(tail -n 3 "$work/llmc.log")"
grep '^step ' "$work/llmc.log"
llmc_loss=$(awk '/^step 0: train loss/ {print $5}' "$work/llmc.log")
llmc_ms=$(awk '/^step [0-9]+: train loss/ && $2 != "0:" {s += $7; n++} END {if (n) printf "%.0f", s / n}' "$work/llmc.log")
[ -n "$llmc_loss" ] && [ -n "$llmc_ms" ] || die "llm.c's output has no step lines: $(tail -n 3 "$work/llmc.log")"

echo "== meshtrain eval of the same weights and tokens (fp32)"
"$meshtrain" eval --model "$work/hf" --tokenizer "$tokenizer" --data "$work/batch.txt" --seq-len "$seq" --batch "$batch" \
  --precision fp32 | tee "$work/eval.log"
mt_loss=$(sed -n 's/.*mean loss \([0-9.eE+-]*\),.*/\1/p' "$work/eval.log")
[ -n "$mt_loss" ] || die "meshtrain eval printed no mean loss: $(tail -n 2 "$work/eval.log")"

bench() {  # PRECISION: meshtrain bench's figures of STEPS timed steps after a warm-up step
  "$meshtrain" bench --what full --preset gpt2 --batch "$batch" --seq "$seq" --precision "$1" --steps "$steps" \
    >"$work/bench_$1.log" 2>&1 || die "meshtrain bench --precision $1 failed: $(tail -n 3 "$work/bench_$1.log")"
  grep -E 'tokens/s|FLOPs/token|peak used' "$work/bench_$1.log" | sed 's/^ */  /'
}
echo "== meshtrain bench --preset gpt2 --batch $batch --seq $seq, $OMP_NUM_THREADS threads, $steps timed steps"
bench fp32
bench bf16

figure() { sed -n "s/^ *\([0-9]*\) tokens\/s, \([0-9]*\) ms\/step.*MFU \([0-9.]*\)%.*/\\$2/p" "$work/bench_$1.log"; }
flops=$(sed -n 's/.*FLOPs\/token: \([0-9.]*\) M.*/\1/p' "$work/bench_fp32.log")
peak=$(sed -n 's/.*peak used for MFU: \([0-9.]*\) GFLOP.*/\1/p' "$work/bench_fp32.log")
echo
echo "== GPT-2 124M, batch $batch x $seq, $OMP_NUM_THREADS threads ($(date -u +%Y-%m-%d), $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg))"
awk -v l="$llmc_ms" -v tokens=$((batch * seq)) -v mf="$(figure fp32 1)" -v mfm="$(figure fp32 2)" -v mfu="$(figure fp32 3)" \
    -v mb="$(figure bf16 1)" -v mbm="$(figure bf16 2)" -v mbu="$(figure bf16 3)" -v f="$flops" -v p="$peak" 'BEGIN {
  printf "  %-28s %10s %10s %8s\n", "", "ms/step", "tokens/s", "MFU"
  printf "  %-28s %10d %10.0f %7.1f%%\n", "llm.c train_gpt2 (fp32)", l, 1000 * tokens / l, 100 * 1000 * tokens / l * f / 1e3 / p
  printf "  %-28s %10d %10d %7.1f%%\n", "meshtrain fp32", mfm, mf, mfu
  printf "  %-28s %10d %10d %7.1f%%\n", "meshtrain bf16 mixed", mbm, mb, mbu
  printf "  (MFU: %.1f MFLOP/token, meshtrain'\''s count, against the measured bf16 GEMM peak %.1f GFLOP/s)\n", f, p }'
echo "== first-step loss of the same weights and batch: llm.c $llmc_loss, meshtrain eval $mt_loss"
awk -v a="$llmc_loss" -v b="$mt_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4) }' ||
  die "the losses differ by more than 1e-4: llm.c $llmc_loss, meshtrain $mt_loss"
echo "   equal within 1e-4"
