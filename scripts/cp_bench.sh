#!/usr/bin/env bash
# Context-parallel benchmark (issue 22): per cp rank, the bytes of its share in the K/V all-gathers
# and the gradient reduce-scatters (the collective's buffer on one rank, as the checked comm records
# it: each rank sends that share to the cp - 1 others), the time it spends in them (transfer plus waiting for the slowest rank),
# the time in attention (its cp exchanges included), and its peak tensor memory beside what one
# rank of fsdp = cp needs for seq_len / cp tokens (the same tokens a rank and the same shards of
# the parameters: they are sharded over fsdp x cp) plus the exchange buffers of
# parallel/context_parallel.cpp (the whole rows' K, V and their gradients, the gather and f32
# reduce-scatter staging: (6 cp + 1) x B x seq/cp x kv_dim x 4 bytes in fp32). Runs cp = 1, 2 and 4 on the default tiny
# width at train.seq_len = SEQ (1024 unless given), one rank per cp rank, OMP_NUM_THREADS=1, fp32;
# figures from run_summary.json (collectives, op_seconds and memory_per_rank over the timed steps,
# all but the first). See docs/distributed.md, "Context parallelism", for a recorded table.
# Every run's figures are checked: collective bytes > 0 under cp, and each rank's peak within 2% of
# the fsdp-rank-at-seq/cp figure plus the exchange buffers and within 2% of `meshtrain plan`'s
# per-rank figure for the same run, less its runtime overhead (the script fails otherwise).
# Usage: scripts/cp_bench.sh [build/meshtrain] [SEQ | --quick]
#   --quick: cp = 1 and 2 at SEQ = 128 for 2 steps, checked the same way (the ctest cp_bench_quick).
set -euo pipefail
B=$(realpath "${1:-build/meshtrain}")
SEQ=${2:-1024}
BATCH=1 STEPS=4 CPS=(1 2 4)
if [ "$SEQ" = --quick ]; then SEQ=128 STEPS=2 CPS=(1 2); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), OMP_NUM_THREADS=1, one process per rank"
echo "load average (1 min) at the start: $(cut -d' ' -f1 /proc/loadavg) (other processes on these cores stretch every time figure)"
echo "model: tiny width (hidden 128, 4 blocks, 8 heads / 4 KV heads of 16), fp32; batch $BATCH x $SEQ tokens; $STEPS steps, figures over the last $((STEPS - 1))"

common=(--set train.precision=fp32 --set train.batch_size=$BATCH --set train.seq_len=$SEQ
        --set model.max_position_embeddings=$SEQ --set train.steps=$STEPS --set train.log_every=100
        --set train.peak_gflops=100 --set output.checkpoint_every=0 --set data.val_fraction=0)
for cp in "${CPS[@]}"; do
  out="$work/cp$cp"
  OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n "$cp" "$B" train --mesh cp=$cp "${common[@]}" \
    --set output.dir="$out" >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
  # fsdp = cp ranks, each with the tokens a cp rank holds (cp rows of seq / cp) and the same shards
  # of the parameters: their memory is what cp leaves a rank, less the exchange.
  if [ "$cp" -gt 1 ]; then
    OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n "$cp" "$B" train --mesh fsdp=$cp "${common[@]}" \
      --set train.seq_len=$((SEQ / cp)) --set train.batch_size=$((BATCH * cp)) \
      --set output.dir="$out.local" >"$out.local.log" 2>&1 || { cat "$out.local.log" >&2; exit 1; }
  fi
  # The planner's figure for the same run (its model directory, this machine's cluster).
  "$B" plan --model "$out/model" --cluster cpu --mesh cp=$cp --precision fp32 --seq "$SEQ" \
    --micro-batch $BATCH --global-batch $BATCH --json >"$out.plan.json" 2>"$out.plan.log" ||
    { cat "$out.plan.log" >&2; exit 1; }
done

python3 - "$work" "$SEQ" "$BATCH" "${CPS[@]}" <<'PY'
import json, math, sys
work, seq, batch, cps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(c) for c in sys.argv[4:]]
mib = lambda b: b / 2**20

print("\n| cp | a rank's share in the cp collectives, MiB per step (all-gather / reduce-scatter) | cp collective ms per step | attention ms per step | peak tensor MiB per rank | an fsdp=cp rank at seq/cp + exchange buffers, MiB | planner, MiB | tokens/s |")
print("|---|---|---|---|---|---|---|---|")
for cp in cps:
    d = f"{work}/cp{cp}"
    s = json.load(open(f"{d}/run_summary.json"))
    cfg = json.load(open(f"{d}/model/config.json"))
    steps = s["timed_steps"]
    coll = {(c["group"], c["collective"]): c for c in s["collectives"]}
    ag, rs = coll.get(("cp", "all_gather"), {}), coll.get(("cp", "reduce_scatter_sum"), {})
    sent = f"{mib(ag.get('bytes', 0)) / steps:.2f} / {mib(rs.get('bytes', 0)) / steps:.2f}" if cp > 1 else "-"
    wait = f"{1e3 * (ag.get('seconds', 0) + rs.get('seconds', 0)) / steps:.1f}" if cp > 1 else "-"
    ops = s["op_seconds"]
    attention = 1e3 * (ops.get("attention forward", 0) + ops.get("attention backward", 0)) / steps
    peaks = " / ".join(f"{mib(r['peak_tensor_bytes']):.2f}" for r in s["memory_per_rank"])
    predicted = "-"
    if cp > 1:
        local = json.load(open(f"{d}.local/run_summary.json"))
        kv = cfg["num_key_value_heads"] * cfg["hidden_size"] // cfg["num_attention_heads"]
        exchange = (6 * cp + 1) * batch * (seq // cp) * kv * 4
        base = max(r['peak_tensor_bytes'] for r in local['memory_per_rank'])
        expected = base + exchange
        predicted = f"{mib(base):.2f} + {mib(exchange):.2f}"
        for r in s["memory_per_rank"]:
            if abs(r["peak_tensor_bytes"] - expected) > 0.02 * expected:
                sys.exit(f"cp={cp} rank {r['rank']}: peak {r['peak_tensor_bytes']} bytes, expected {expected} within 2%")
        if not ag.get("bytes") or not rs.get("bytes"):
            sys.exit(f"cp={cp}: no cp all-gather or reduce-scatter recorded")
    # The planner's per-rank total less its runtime overhead (which the tensor peak does not see).
    plan = json.load(open(f"{d}.plan.json"))["memory_bytes"]
    planned = plan["total"] - plan["items"].get("overhead", 0.0)
    for r in s["memory_per_rank"]:
        if abs(r["peak_tensor_bytes"] - planned) > 0.02 * planned:
            sys.exit(f"cp={cp} rank {r['rank']}: peak {r['peak_tensor_bytes']} bytes, the planner's {planned:.0f} not within 2%")
    print(f"| {cp} | {sent} | {wait} | {attention:.1f} | {peaks} | {predicted} | {mib(planned):.2f} | {s['tokens_per_s']:.0f} |")
PY
