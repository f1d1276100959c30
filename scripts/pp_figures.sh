#!/usr/bin/env bash
# The planner's pipeline prediction against measured runs: for a model of 8 blocks (the default
# tiny width), GPipe and 1F1B at pp = 2 and 4 and interleaved 1F1B (train.pp_virtual = 2, "1f1b v=2")
# at pp = 2, with m = 4, 8 and 16 micro-batches (train.grad_accum),
# a few steps each under mpirun, one rank per stage, and the same model on one rank (pp = 1, the
# baseline: what the planner misses there it misses on every stage). Prints a markdown table per
# run and stage:
# the planner's peak memory of the stage (`meshtrain plan --json`, its tensors: the total less the
# runtime overhead) against the stage's measured peak of tensor memory (run_summary.json; its peak
# resident set beside it, which also sees host vectors, libraries and heap), and the
# bubble fraction: the planner's (p-1)/(m+p-1) against the measured one, wait / (compute + wait)
# of the stage's pipeline time over the timed steps (run_summary.json's pipeline_per_rank: "-" for
# pp = 1, which has no pipeline).
# docs/distributed.md, "Pipeline: predicted and measured". Usage: scripts/pp_figures.sh [build/meshtrain]
set -euo pipefail
B=$(realpath "${1:-build/meshtrain}")
BATCH=2 SEQ=64 STEPS=3 LAYERS=8
# train.peak_gflops is given so that the trainer does not measure the GEMM peak for MFU: that probe's
# buffers (64 MiB) would be every rank's peak of tensor memory at this size.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "| schedule | pp | m | stage | units | predicted peak (tensors) | measured peak (tensors) | error | measured peak RSS | predicted bubble | measured bubble |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
# A third field: chunks per stage (train.pp_virtual, interleaved 1F1B), 1 when absent.
for run in "- 1" "gpipe 2" "gpipe 4" "1f1b 2" "1f1b 4" "1f1b 2 2"; do
  read -r schedule pp v <<<"$run"
  v=${v:-1}
  schedule_set=$schedule; [ $pp = 1 ] && schedule_set=1f1b  # no pipeline: the key is unused
  for m in 4 8 16; do
    out="$work/run_${pp}_${schedule_set}_${v}_${m}"
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n $pp "$B" train --mesh pp=$pp \
      --set model.num_hidden_layers=$LAYERS --set train.pp_schedule=$schedule_set --set train.pp_virtual=$v --set train.grad_accum=$m \
      --set train.batch_size=$BATCH --set train.seq_len=$SEQ --set train.steps=$STEPS \
      --set train.log_every=1 --set train.peak_gflops=100 --set output.dir="$out" >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
    "$B" plan --model "$out/model" --cluster cpu --mesh pp=$pp --pp-schedule $schedule_set --pp-virtual $v \
      --seq $SEQ --global-batch $((BATCH * m)) --micro-batch $BATCH --json >"$out.plan.json"
    python3 - "$schedule" "$pp" "$m" "$out" "$out.plan.json" "$v" <<'PY'
import json, sys
schedule, pp, m, run, plan = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], json.load(open(sys.argv[5]))
if int(sys.argv[6]) > 1: schedule += f" v={sys.argv[6]}"
summary = json.load(open(run + "/run_summary.json"))
per_rank = {r["rank"]: r for r in summary["memory_per_rank"]}
# pp = 1: the whole model on one stage, no pipeline section.
pipe = plan.get("pipeline") or {"bubble_fraction": 0.0, "stages": [
    {"stage": 0, "units": "whole model (one rank)", "memory_bytes": plan["memory_bytes"]}]}
stage_size = len(per_rank) // pp  # pp is the outermost mesh axis: stage s is ranks [s*size, (s+1)*size)
for st in pipe["stages"]:
    s = st["stage"]
    items = st["memory_bytes"]["items"]
    predicted = st["memory_bytes"]["total"] - items.get("overhead", 0.0)
    ranks = range(s * stage_size, (s + 1) * stage_size)
    measured = max(per_rank[r]["peak_tensor_bytes"] for r in ranks)
    rss = max(per_rank[r]["peak_rss_bytes"] for r in ranks)
    # Measured bubble: the stage's waiting over its pipeline time, summed over the timed steps
    # (run_summary.json's pipeline_per_rank; the stage's first rank). scripts/pp_bench.sh has more.
    bubble = "-"
    timing = [r for r in summary.get("pipeline_per_rank", []) if r["rank"] == s * stage_size]
    if timing:
        t = timing[0]
        bubble = f"{1 - t['compute_s'] / (t['compute_s'] + t['recv_wait_s'] + t['send_wait_s']):.3f}"
    pred_bubble = f"{pipe['bubble_fraction']:.3f}" if s == 0 else ""
    print(f"| {schedule} | {pp} | {m} | {s} | {st['units']} | {predicted / 2**20:.2f} MiB | "
          f"{measured / 2**20:.2f} MiB | {100 * (predicted / measured - 1):+.0f}% | {rss / 2**20:.0f} MiB | "
          f"{pred_bubble} | {bubble} |")
PY
  done
done
