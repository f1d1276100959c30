#!/usr/bin/env bash
# Device-mesh benchmark on the reference shape (configs/reference.toml, ~125M parameters, bf16
# mixed precision, full training): tokens/s and MFU of each mesh, the largest rank's peak memory
# against its model states (from `meshtrain shard`), and the time FSDP spent waiting for its
# collectives with and without prefetching (each log has the per-op table). Ranks beyond the machine's cores are oversubscribed:
# their memory figures hold, their throughput does not. Usage: scripts/bench_mesh.sh [steps]
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
echo "logs: $OUT"
