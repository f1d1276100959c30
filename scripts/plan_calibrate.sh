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
