#!/usr/bin/env bash
# Device-mesh benchmark on the reference shape (configs/reference.toml, ~125M parameters, bf16
# mixed precision, full training): tokens/s and MFU of each mesh, the largest rank's peak memory
# against its model states (from `meshtrain shard`), and the time FSDP spent waiting for its
# collectives with and without prefetching (each log has the per-op table). Ranks beyond the machine's cores are oversubscribed:
# their memory figures hold, their throughput does not. Then the overlap table: dp=2 and fsdp=2
# with overlap (the communication thread, gradient buckets, prefetched gathers: the defaults) and
# without (train.comm_progress=off, one all-reduce after the backward, no prefetch): the time
# blocked in collectives per step against the time the same bytes take moved alone (each run's
# "communication per step" lines, docs/distributed.md "Overlap"). Usage: scripts/bench_mesh.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/meshtrain
STEPS=${1:-5}
OUT=$(mktemp -d /tmp/meshtrain_bench_mesh.XXXXXX)
COMMON="--config configs/reference.toml --set train.steps=$STEPS --set train.batch_size=8 \
  --set train.seq_len=256 --set train.peak_gflops=610 --set train.log_every=1000 \
  --set output.checkpoint_every=0 --set train.profile=true"

run() {  # name ranks threads mesh [extra --set ...]
  local name=$1 ranks=$2 threads=$3 mesh=$4; shift 4
  local log=$OUT/$name.log
  if [ "$ranks" = 1 ]; then
    OMP_NUM_THREADS=$threads $BIN train $COMMON --set train.threads=$threads --set "output.dir=$OUT/$name" "$@" > "$log" 2>&1
  else
    OMP_NUM_THREADS=$threads mpirun --allow-run-as-root --oversubscribe -n "$ranks" $BIN train --mesh "$mesh" \
      $COMMON --set train.threads=$threads --set "output.dir=$OUT/$name" "$@" > "$log" 2>&1
  fi
  local tput mfu peak states wait
  tput=$(sed -n 's/^throughput: \([0-9]*\) tokens\/s.*/\1/p' "$log")
  mfu=$(sed -n 's/.*MFU \([0-9.]*%\), peak.*/\1/p' "$log")
  peak=$(sed -n 's/.*largest rank \(.*\)$/\1/p' "$log")
  [ -n "$peak" ] || peak=$(sed -n 's/.*peak memory \([0-9.]* [KMG]iB\).*/\1/p' "$log")
  wait=$(sed -n 's/^FSDP collectives: \([0-9.]*\) ms.*/\1 ms/p' "$log")
  states=$($BIN shard --config configs/reference.toml --mesh "$mesh" --json | python3 -c \
    'import json,sys; j=json.load(sys.stdin); print("%.2f GiB" % (max(r["bytes"]["total"] for r in j["ranks"]) / 2**30))')
  printf "| %-24s | %5s | %6s | %9s | %10s | %10s | %12s |\n" "$name" "$ranks x $threads" "$tput" "$mfu" "$peak" "$states" "${wait:--}"
}

echo "reference shape, bf16 full training, batch 8 x 256 tokens, $STEPS steps (figures: steps after the first)"
echo "| mesh                     | ranks x threads | tokens/s | MFU | peak memory (largest rank) | model states per rank | FSDP wait per step |"
echo "|---|---|---|---|---|---|---|"
run "dp=1"                  1 2 dp=1
run "dp=2"                  2 1 dp=2
run "fsdp=2"                2 1 fsdp=2
run "fsdp=2,no-prefetch"   2 1 fsdp=2 --set train.fsdp_prefetch=false
run "tp=2"                  2 1 tp=2
run "fsdp=4"                4 1 fsdp=4
run "fsdp=8"                8 1 fsdp=8
run "fsdp=2,tp=2"           4 1 fsdp=2,tp=2

overlap() {  # name mesh [extra --set ...]
  local name=$1 mesh=$2; shift 2
  local file=overlap_${name//[^a-z0-9]/_}
  local log=$OUT/$file.log
  OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n 2 $BIN train --mesh "$mesh" \
    $COMMON --set train.threads=1 --set "output.dir=$OUT/$file" "$@" > "$log" 2>&1
  local tput figures
  tput=$(sed -n 's/^throughput: \([0-9]*\) tokens\/s.*/\1/p' "$log")
  # "  dp all_reduce_sum: 14.0 calls, 497.7 MB, exposed 115.2 ms of 1350.4 ms transfer (91% hidden)"
  figures=$(awk '/ calls, .* MB, exposed .* ms of .* ms transfer/ {
      for (i = 1; i <= NF; ++i) { if ($i == "exposed") e += $(i + 1); if ($i == "of") t += $(i + 1) }
      detail = detail sprintf("%s%s %s %.0f/%.0f", (detail == "" ? "" : "; "), $1, $2, $(NF - 7), $(NF - 4)) }
    END { printf "%.0f | %.0f | %.0f%% | %s", e, t, (t > 0 ? 100 * (1 - e / t) : 0), detail }' "$log")
  printf "| %-30s | %6s | %s |\n" "$name" "$tput" "$figures"
}

echo
echo "overlap, 2 ranks x 1 thread, $STEPS steps (per step: ms blocked in collectives, ms the same bytes take alone)"
echo "| run | tokens/s | exposed ms | transfer ms | hidden | per group: exposed/transfer ms |"
echo "|---|---|---|---|---|---|"
overlap "dp=2, overlap" dp=2
overlap "dp=2, none" dp=2 --set train.comm_progress=off --set train.dp_bucket_mb=0
overlap "fsdp=2, overlap" fsdp=2
overlap "fsdp=2, none" fsdp=2 --set train.comm_progress=off --set train.fsdp_prefetch=false
echo "logs: $OUT"
