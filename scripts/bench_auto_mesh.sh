#!/usr/bin/env bash
# Does `--mesh auto` pick what measures fastest on this machine? For each world size given (default
# 2 and 4 ranks): `meshtrain train --mesh auto` on that many mpirun ranks (its pick), then every
# layout the planner's search prices for the same run (`meshtrain plan --search --cluster cpu`,
# at the background load --mesh auto read: the tasks of other work runnable as it started, which is
# how it prices this host),
# each trained for real on as many ranks; prints the
# predicted step and the measured tokens/s of each layout (best of REPEATS rounds over all of them:
# a shared machine only ever slows a run down) and the verdict: the pick within 10% of the fastest measured.
# The run is the built-in model (128 wide, 4 blocks) at train.seq_len=SEQ, train.batch_size=BATCH,
# STEPS steps, one thread per rank. Usage: scripts/bench_auto_mesh.sh [ranks ...]
# Environment: STEPS (20), SEQ (128), BATCH (8), REPEATS (2), MESHTRAIN (build/meshtrain), and
# MESHTRAIN_HOST_LOAD, which --mesh auto then takes for the background load instead of reading it.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MESHTRAIN:-build/meshtrain}
STEPS=${STEPS:-20}
SEQ=${SEQ:-128}
BATCH=${BATCH:-8}
REPEATS=${REPEATS:-2}
WORLDS=("$@")
[ ${#WORLDS[@]} -gt 0 ] || WORLDS=(2 4)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain_bench_auto_mesh.XXXXXX")
RUN="--steps $STEPS --set train.seq_len=$SEQ --set train.batch_size=$BATCH --set train.log_every=1000 \
  --set output.checkpoint_every=0 --set train.threads=1"
failed=0

# tokens/s of a finished run's log ("throughput: N tokens/s, ..."), or 0 when it failed.
throughput() { sed -n 's/^throughput: \([0-9]*\) tokens\/s.*/\1/p' "$1" | head -1 | grep . || echo 0; }

train() {  # ranks mesh log
  OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -n "$1" "$BIN" train --mesh "$2" $RUN \
    --out "$OUT/run_$1_${2//[=,]/_}" --overwrite < /dev/null > "$3" 2>&1 || true
}

echo "bench_auto_mesh: built-in model, batch $BATCH x seq $SEQ, $STEPS steps, 1 thread per rank, best of $REPEATS"
echo "machine: $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${WORLDS[@]}"; do
  auto_log=$OUT/auto_$n.log
  train "$n" auto "$auto_log"
  pick=$(sed -n 's/^mesh auto: \([^ ]*\) of .*/\1/p' "$auto_log")
  if [ -z "$pick" ]; then
    echo "$n ranks: --mesh auto failed, see $auto_log"
    failed=1
    continue
  fi
  # The planner's price of every layout of n ranks for this run (its model as the run saved it), on
  # this host with the background load --mesh auto read (its "host:" line).
  load=$(sed -n 's/^  host: .* background load \([0-9.e+]*\), .*/\1/p' "$auto_log")
  "$BIN" plan --search --devices "$n" --model "$OUT/run_${n}_auto/model" --cluster cpu --host-load "${load:-0}" \
    --seq "$SEQ" --global-batch "$BATCH" --grad-accum 1 --keep-checkpointing --json --top 1000 > "$OUT/plan_$n.json"
  python3 - "$OUT/plan_$n.json" > "$OUT/layouts_$n.txt" <<'EOF'
import json, sys
for c in json.load(open(sys.argv[1]))["top"]:
    m = c["mesh"]
    name = ",".join(f"{k}={m[k]}" for k in ("dp", "fsdp", "tp", "pp", "cp") if m[k] > 1) or "dp=1"
    print(name, c["time_s"]["step"])
EOF
  echo
  echo "$n ranks: --mesh auto picked $pick ($(throughput "$auto_log") tokens/s in that run), priced at background load ${load:-?}; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "| layout | predicted step ms | predicted rank | measured tokens/s (best of $REPEATS) | measured step ms | measured rank |"
  echo "|---|---|---|---|---|---|"
  # Rounds over every layout rather than repeats of one in a row: a spell of other work on the
  # cores then slows one run of each layout it meets, not every run of a few.
  for ((r = 0; r < REPEATS; ++r)); do
    while read -r mesh predicted; do
      train "$n" "$mesh" "$OUT/${n}_${mesh//[=,]/_}_$r.log"
    done < "$OUT/layouts_$n.txt"
  done
  rows=$OUT/rows_$n.txt
  : > "$rows"
  while read -r mesh predicted; do
    best=0
    [ "$mesh" = "$pick" ] && best=$(throughput "$auto_log")
    for ((r = 0; r < REPEATS; ++r)); do
      t=$(throughput "$OUT/${n}_${mesh//[=,]/_}_$r.log")
      [ "$t" -gt "$best" ] && best=$t
    done
    echo "$mesh $predicted $best" >> "$rows"
  done < "$OUT/layouts_$n.txt"
  python3 - "$rows" "$pick" "$BATCH" "$SEQ" <<'EOF' || failed=1
import sys
rows = [l.split() for l in open(sys.argv[1])]
pick, tokens = sys.argv[2], int(sys.argv[3]) * int(sys.argv[4])
rows = [(m, float(p), int(t)) for m, p, t in rows]
by_pred = sorted(rows, key=lambda r: r[1])
by_meas = sorted(rows, key=lambda r: -r[2])
for m, p, t in by_pred:
    step = f"{1e3 * tokens / t:.1f}" if t > 0 else "failed"
    mark = " (pick)" if m == pick else ""
    print(f"| {m}{mark} | {1e3 * p:.2f} | {by_pred.index((m, p, t)) + 1} | {t} | {step} | {by_meas.index((m, p, t)) + 1} |")
fastest = by_meas[0]
got = dict((m, t) for m, p, t in rows).get(pick, 0)
ratio = got / fastest[2] if fastest[2] > 0 else 0.0
verdict = "PASS" if ratio >= 0.9 else "FAIL"
print(f"verdict: {verdict}: the pick {pick} measures {got} tokens/s, {100 * ratio:.0f}% of the fastest "
      f"({fastest[0]}, {fastest[2]} tokens/s); within 10% needs >= 90%")
sys.exit(0 if ratio >= 0.9 else 1)
EOF
done
echo "logs: $OUT; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
