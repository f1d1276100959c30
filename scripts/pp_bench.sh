#!/usr/bin/env bash
# Pipeline benchmark (issue 10): the measured bubble of GPipe, 1F1B and interleaved 1F1B
# (train.pp_virtual = 2) at pp = 2 and 4 with m = 4, 8 and 16 micro-batches (train.grad_accum),
# against the planner's prediction (`meshtrain plan --json`, pipeline.bubble_fraction) and the ideal
# (p-1)/(m+p-1), interleaved (p-1)/(v m+p-1); then the time each stage spends in send and receive
# and how much of its sending compute hid. Model: the default tiny width with 8 blocks, micro-batches
# of 1 x 32 tokens (a few ms of compute each), a few steps per run under mpirun, one rank per stage,
# OMP_NUM_THREADS=1. Figures come from run_summary.json's pipeline_per_rank (every rank's sums over
# the timed steps, all but the first) and timed_seconds; see docs/distributed.md, "Pipeline
# benchmarks", for the definitions and a recorded table.
# Usage: scripts/pp_bench.sh [build/meshtrain] [--quick]
#   --quick: one pp=2 GPipe run with m = 2 and the ping-pong, checked the same way (the ctest
#   pp_bench_quick); every run's figures are checked (compute > 0, bubble in [0, 1)), not timed.
set -euo pipefail
B=$(realpath "${1:-build/meshtrain}")
QUICK=${2:-}
BATCH=1 SEQ=32 STEPS=6 LAYERS=8 VIRTUAL=2
RUNS=("gpipe 2" "gpipe 4" "1f1b 2" "1f1b 4" "interleaved 2" "interleaved 4")
MS=(4 8 16)
if [ "$QUICK" = --quick ]; then RUNS=("gpipe 2"); MS=(2); STEPS=2; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cores=$(nproc)
echo "machine: $cores cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), OMP_NUM_THREADS=1, one rank per stage"
echo "load average (1 min) at the start: $(cut -d' ' -f1 /proc/loadavg) (other processes on these cores stretch every figure)"
echo "model: tiny width (hidden 128), $LAYERS blocks; micro-batch $BATCH x $SEQ tokens; $STEPS steps per run, figures over the last $((STEPS - 1))"
if [ "$cores" -lt 4 ]; then
  echo "note: pp=4 runs 4 ranks on $cores cores: its stages share cores, so a stage's compute stretches whenever"
  echo "      another stage computes at the same time, and its measured bubble is not a clean figure."
fi

runs_list="$work/runs.txt"
: >"$runs_list"
for run in "${RUNS[@]}"; do
  read -r schedule pp <<<"$run"
  set_schedule=$schedule virtual=1
  [ "$schedule" = interleaved ] && set_schedule=1f1b virtual=$VIRTUAL
  for m in "${MS[@]}"; do
    out="$work/run_${schedule}_${pp}_${m}"
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n "$pp" "$B" train --mesh pp=$pp \
      --set model.num_hidden_layers=$LAYERS --set train.pp_schedule=$set_schedule \
      --set train.pp_virtual=$virtual --set train.grad_accum=$m \
      --set train.batch_size=$BATCH --set train.seq_len=$SEQ --set train.steps=$STEPS \
      --set train.log_every=1 --set train.peak_gflops=100 --set output.checkpoint_every=0 \
      --set output.dir="$out" >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
    "$B" plan --model "$out/model" --cluster cpu --mesh pp=$pp --pp-schedule $set_schedule --pp-virtual "$virtual" \
      --seq $SEQ --global-batch $((BATCH * m)) --micro-batch $BATCH --json >"$out.plan.json"
    echo "$schedule $pp $m $virtual $out" >>"$runs_list"
  done
done

# The stages' message: one micro-batch's residual stream (or its gradient) in the compute dtype,
# bf16 (the runs' default precision).
hidden=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hidden_size"])' "$(head -1 "$runs_list" | cut -d' ' -f5)/model/config.json")
msg=$((BATCH * SEQ * hidden * 2))
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n 2 "$B" bench --what p2p --p2p-bytes $msg \
  >"$work/p2p.log" 2>&1 || { cat "$work/p2p.log" >&2; exit 1; }
cat "$work/p2p.log"

python3 - "$runs_list" "$work/p2p.log" "$msg" <<'PY'
import json, re, sys
runs_list, p2p_log, msg = sys.argv[1], sys.argv[2], int(sys.argv[3])
one_way = float(re.search(r"%d bytes: one-way\s+([0-9.]+) us" % msg, open(p2p_log).read()).group(1)) * 1e-6
runs = [line.split() for line in open(runs_list)]

def fmt(values, spec):
    return " / ".join(format(v, spec) for v in values)

table1, table2 = [], []
for schedule, pp, m, v, out in runs:
    pp, m, v = int(pp), int(m), int(v)
    summary = json.load(open(out + "/run_summary.json"))
    plan = json.load(open(out + ".plan.json"))
    ranks = sorted(summary["pipeline_per_rank"], key=lambda r: r["stage"])
    steps = summary["timed_steps"]
    step_s = summary["timed_seconds"] / steps
    pipe_bubble, step_bubble = [], []
    for r in ranks:
        busy = r["compute_s"] + r["recv_wait_s"] + r["send_wait_s"]
        b = 1 - r["compute_s"] / busy
        # What the benchmark reads must be there and make sense, or its table means nothing.
        if not (r["compute_s"] > 0 and 0 <= b < 1 and r["sent_bytes"] > 0):
            sys.exit(f"{out}: stage {r['stage']}: compute_s {r['compute_s']}, bubble {b}, sent_bytes {r['sent_bytes']}")
        pipe_bubble.append(b)
        step_bubble.append(1 - r["compute_s"] / summary["timed_seconds"])
    ideal = (pp - 1) / (v * m + pp - 1)
    planner = f"{plan['pipeline']['bubble_fraction']:.3f}"
    table1.append(f"| {schedule} | {pp} | {m} | {ideal:.3f} | {planner} | {fmt(pipe_bubble, '.3f')} | "
                  f"{fmt(step_bubble, '.3f')} | {1e3 * step_s:.0f} | {summary['tokens_per_s']:.0f} |")
    # Sends: each stage's bytes at the ping-pong's one-way time per message of this size are what its
    # sends would cost if nothing hid them; send_wait_s is what they did cost (posting the
    # non-blocking sends and waiting for them). Overlapped share: 1 - send_wait / unhidden cost.
    unhidden = [r["sent_bytes"] / msg * one_way for r in ranks]
    overlap = [max(0.0, 1 - r["send_wait_s"] / u) for r, u in zip(ranks, unhidden)]
    table2.append(f"| {schedule} | {pp} | {m} | {fmt([1e3 * r['recv_wait_s'] / steps for r in ranks], '.1f')} | "
                  f"{fmt([1e3 * r['send_wait_s'] / steps for r in ranks], '.2f')} | "
                  f"{fmt([r['sent_bytes'] / steps / 2**20 for r in ranks], '.2f')} | "
                  f"{fmt([1e3 * u / steps for u in unhidden], '.2f')} | {fmt(overlap, '.2f')} |")

print()
print("Bubble fraction (per stage, first to last; interleaved: v = 2 chunks per stage). Ideal: (p-1)/(v m+p-1).")
print("Measured, pipeline time: 1 - compute_s / (compute_s + recv_wait_s + send_wait_s); step time: 1 - compute_s / step time")
print("(the step also sums gradients and steps the optimizer, which are not bubble).")
print("| schedule | pp | m | ideal | planner | measured (pipeline time) | measured (step time) | ms/step | tokens/s |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(table1))
print()
print(f"Send and receive per step (per stage). One message: {msg} bytes, one-way {1e6 * one_way:.1f} us on the ping-pong.")
print("Unhidden send cost: sent bytes / message size x one-way time; overlapped: 1 - send wait / unhidden cost (0 when the")
print("wait exceeds it: then the sends also waited for the receiving stage to post its receive).")
print("| schedule | pp | m | recv wait ms | send wait ms | MiB sent | unhidden send cost ms | overlapped share of sends |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(table2))
PY
