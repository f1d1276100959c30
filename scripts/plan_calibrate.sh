#!/usr/bin/env bash
# Calibration of the planner against this machine: for configurations of the engine's reference
# shape, the planner's predicted peak memory and step time next to what `meshtrain bench` measures.
# Prints a markdown table (docs/planner.md, "Calibration"). Single device only: the trainer does
# not run meshes yet. Usage: scripts/plan_calibrate.sh [build/meshtrain] [peak GFLOP/s]
set -euo pipefail
B=${1:-build/meshtrain}
PEAK=${2:-610}
echo "| config | predicted memory | measured memory (tensors) | error | predicted step | measured step | error |"
echo "|---|---|---|---|---|---|---|"
for cfg in "full 1" "full 2" "full 4" "full 4 ckpt" "lora 2" "lora 4" "lora 4 ckpt"; do
  set -- $cfg
  mode=$1 batch=$2 ck=${3:-}
  flag=""; [ -n "$ck" ] && flag="--checkpointing"
  lora=""; [ "$mode" = lora ] && lora="--mode lora --lora-rank 8 --lora-targets q,k,v,o,gate,up,down"
  bench=$(OMP_NUM_THREADS=2 $B bench --what $mode --steps 2 --batch $batch --seq 512 --peak-gflops $PEAK $flag)
  plan=$($B plan --model reference --cluster cpu --mesh dp=1 --seq 512 --global-batch $batch \
         --micro-batch $batch $flag $lora --json)
  python3 - "$cfg" "$bench" "$plan" <<'PY'
import json, re, sys
cfg, bench, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ms = float(re.search(r"([\d.]+) ms/step", bench).group(1)) / 1e3
m = re.search(r"peak memory: tensors ([\d.]+) (\w+)", bench)
mem = float(m.group(1)) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]
items = plan["memory_bytes"]["items"]
pred_mem = plan["memory_bytes"]["total"] - items["overhead"] - items["comm buffers"]  # tensors only
pred_t = plan["time_s"]["step"]
print(f"| {cfg} x seq 512 | {pred_mem/2**30:.2f} GiB | {mem/2**30:.2f} GiB | {100*(pred_mem/mem-1):+.1f}% "
      f"| {pred_t:.2f} s | {ms:.2f} s | {100*(pred_t/ms-1):+.1f}% |")
PY
done

# Meshes: the trainer's data parallelism on two ranks of one core each (configs/reference.toml on
# the built-in text; step time from metrics.jsonl, steps after the first; rank 0's tensor peak).
if command -v mpirun >/dev/null; then
  for cfg in "full 4" "lora 4"; do
    set -- $cfg
    mode=$1 batch=$2
    out=$(mktemp -d)
    lora_set=""; lora_plan=""
    if [ "$mode" = lora ]; then
      lora_set="--set lora.enabled=true --set lora.random_base=true"
      lora_plan="--mode lora --lora-rank 8 --lora-targets q,k,v,o,gate,up,down"
    fi
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n 2 $B train --mesh dp=2 \
      --config configs/reference.toml --set train.steps=4 --set train.batch_size=$batch \
      --set train.peak_gflops=610 $lora_set --set output.dir=$out >/dev/null
    plan=$($B plan --model reference --cluster configs/cluster_cpu_2ranks.toml --devices 2 \
           --mesh dp=2 --seq 512 --global-batch $batch --micro-batch $((batch / 2)) $lora_plan --json)
    python3 - "dp=2 $cfg" "$out/metrics.jsonl" "$plan" <<'PY'
import json, sys
cfg, metrics, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
rows = [json.loads(l) for l in open(metrics)][1:]
tokens = 512 * int(cfg.split()[-1])
ms = sum(tokens / r["tokens_per_s"] for r in rows) / len(rows)
mem = max(r["peak_tensor_bytes"] for r in rows)
items = plan["memory_bytes"]["items"]
pred_mem = plan["memory_bytes"]["total"] - items["overhead"] - items["comm buffers"]
pred_t = plan["time_s"]["step"]
print(f"| {cfg} x seq 512 | {pred_mem/2**30:.2f} GiB | {mem/2**30:.2f} GiB | {100*(pred_mem/mem-1):+.1f}% "
      f"| {pred_t:.2f} s | {ms:.2f} s | {100*(pred_t/ms-1):+.1f}% |")
PY
    rm -rf "$out"
  done
fi
