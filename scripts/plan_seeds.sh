#!/usr/bin/env bash
# Reproduces the planner's seed numbers (docs/planner.md): the 405B LoRA run on 8 x MI300X and
# the Frontier study's GPT runs, their weak and strong scaling. Usage: scripts/plan_seeds.sh [build/meshtrain]
set -euo pipefail
B=${1:-build/meshtrain}
LORA="--model llama3-405b --cluster mi300x-node --devices 8 --mode lora --lora-rank 8 --lora-targets q,k,v,o,gate,up,down,lm_head"

echo "== 405B LoRA as the seed ran it (fsdp 8, batch 16 x seq 64)"
$B plan $LORA --mesh fsdp=8 --seq 64 --global-batch 16 --micro-batch 2
echo "== the same, eager (no overlap of gathers and compute)"
$B plan $LORA --mesh fsdp=8 --seq 64 --global-batch 16 --micro-batch 2 --no-overlap | grep -E "step |tokens/s"
echo "== best layouts at batch 16 x seq 64, then at 16 x 2048"
$B plan $LORA --seq 64 --global-batch 16 --search --top 5
$B plan $LORA --seq 2048 --global-batch 16 --search --top 5

# One line per run: model, mesh, GB per device, fits, step s, tokens/s, Megatron % of peak, MFU.
row() {
  $B plan --cluster frontier --seq 2048 --micro-batch 1 --zero 1 --checkpointing --json "$@" | python3 -c '
import json, sys
d = json.load(sys.stdin); m = d["mesh"]; t = d["throughput"]; mem = d["memory_bytes"]; ts = d["time_s"]
g = m["tp"] * m["pp"] * m["dp"] * m["fsdp"]
print("%-9s tp=%d pp=%-3d dp=%d gcds=%-5d batch=%-5d mem=%5.1fGB fits=%d step=%6.1fs bubble=%.3f "
      "tok/s/gcd=%6.2f megatron%%peak=%5.2f mfu=%5.2f" % (d["model"], m["tp"], m["pp"], m["dp"], g,
      d["global_batch"], mem["total"] / 1e9, mem["fits"], ts["step"], ts["bubble_fraction"],
      t["tokens_per_s"] / g, 100 * t["megatron_fraction_of_peak"], 100 * t["mfu"]))'
}
echo "== Frontier: the study's layouts (ZeRO-1, checkpointing, micro-batch 1)"
row --model gpt-22b --mesh dp=2,pp=8 --global-batch 1024
row --model gpt-175b --mesh dp=2,tp=4,pp=16 --global-batch 1280
row --model gpt-1t --mesh tp=4,pp=128 --global-batch 1024
row --model gpt-1t --mesh tp=8,pp=64 --global-batch 1024
echo "== weak scaling (batch per replica fixed)"
for dp in 2 4 8 16; do row --model gpt-175b --mesh dp=$dp,tp=4,pp=16 --global-batch $((640 * dp)); done
for dp in 1 2 6; do row --model gpt-1t --mesh dp=$dp,tp=4,pp=128 --global-batch $((1024 * dp)); done
echo "== strong scaling (global batch fixed)"
for dp in 2 4 8 16; do row --model gpt-175b --mesh dp=$dp,tp=4,pp=16 --global-batch 1280; done
for dp in 1 2 4; do row --model gpt-1t --mesh dp=$dp,tp=4,pp=128 --global-batch 1024; done
