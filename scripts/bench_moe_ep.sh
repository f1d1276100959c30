#!/usr/bin/env bash
# Expert parallelism against one rank (issue 32): the same mixture-of-experts training, the same
# global batch, run as one process with 1 thread, one process with 2 threads, and `--mesh ep=2`
# under mpirun (two processes of 1 thread each: on a 2-core machine a rank has one core). Prints
# tokens/s and ms a step for each (run_summary.json: the timed steps, all but the first) and the
# time ep=2 spends in its expert exchanges (the all-to-all of rows, "moe all-to-all" in the op
# table). The model is a Mixtral-like one in the HF layout, made here: a one-step run of the
# built-in config exports its tokenizer and dense config, which this script turns into E experts
# of width I, k a token, with fresh random weights (pure Python: no numpy needed).
# Usage: scripts/bench_moe_ep.sh [build/meshtrain] [steps] [precision]
#   defaults: 6 steps, bf16 (mixed); hidden 256, 4 blocks, 8 experts of 512, 2 a token,
#   batch 8 x 256 tokens, full training. Override the shape with HIDDEN, EXPERTS, EXPERT_WIDTH,
#   TOP_K, LAYERS, BATCH, SEQ in the environment.
set -euo pipefail
B=$(realpath "${1:-build/meshtrain}")
STEPS=${2:-6}
PRECISION=${3:-bf16}
HIDDEN=${HIDDEN:-256} EXPERTS=${EXPERTS:-8} EXPERT_WIDTH=${EXPERT_WIDTH:-512} TOP_K=${TOP_K:-2}
LAYERS=${LAYERS:-4} BATCH=${BATCH:-8} SEQ=${SEQ:-256}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load average (1 min) at the start: $(cut -d' ' -f1 /proc/loadavg) (other processes on these cores stretch every figure)"
echo "model: Mixtral-like, hidden $HIDDEN, $LAYERS blocks, $EXPERTS experts of $EXPERT_WIDTH, $TOP_K a token; $PRECISION full training, global batch $BATCH x $SEQ tokens, $STEPS steps (figures over the last $((STEPS - 1)))"

# The dense source: its tokenizer and config.
"$B" train --set model.hidden_size="$HIDDEN" --set model.num_hidden_layers="$LAYERS" \
  --set model.intermediate_size="$EXPERT_WIDTH" --set train.seq_len="$SEQ" --set train.batch_size=2 \
  --set model.max_position_embeddings="$SEQ" --set train.steps=1 --set train.peak_gflops=100 \
  --set output.checkpoint_every=0 --set output.dir="$work/src" >"$work/src.log" 2>&1 ||
  { cat "$work/src.log" >&2; exit 1; }

python3 - "$work/src/model" "$work/moe" "$EXPERTS" "$TOP_K" <<'PY'
import json, os, random, shutil, struct, sys
src, dst, E, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(dst)
cfg = json.load(open(f"{src}/config.json"))
cfg.update(model_type="mixtral", architectures=["MixtralForCausalLM"], num_local_experts=E,
           num_experts_per_tok=k, router_aux_loss_coef=0.0, output_router_logits=False)
json.dump(cfg, open(f"{dst}/config.json", "w"), indent=2)
with open(f"{src}/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
C, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
rng = random.Random(5)
tensors = []  # (name, dtype, shape, bytes)
for name, t in header.items():
    if name == "__metadata__" or ".mlp." in name:
        continue
    a, b = t["data_offsets"]
    tensors.append((name, t["dtype"], t["shape"], data[a:b]))
def normal(shape, std=0.02):
    count = 1
    for d in shape:
        count *= d
    return struct.pack(f"<{count}f", *(rng.gauss(0.0, std) for _ in range(count)))
for l in range(L):
    p = f"model.layers.{l}.block_sparse_moe"
    tensors.append((f"{p}.gate.weight", "F32", [E, C], normal([E, C])))
    for e in range(E):
        for w, shape in (("w1", [I, C]), ("w2", [C, I]), ("w3", [I, C])):
            tensors.append((f"{p}.experts.{e}.{w}.weight", "F32", shape, normal(shape)))
out, offset = {}, 0
for name, dtype, shape, raw in tensors:
    out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
    offset += len(raw)
head = json.dumps(out).encode()
head += b" " * (-len(head) % 8)
with open(f"{dst}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(head)) + head)
    for *_, raw in tensors:
        f.write(raw)
for name in os.listdir(src):  # the tokenizer files
    if name not in ("config.json", "model.safetensors", "generation_config.json"):
        shutil.copy(f"{src}/{name}", f"{dst}/{name}")
PY

common=(--set model.path="$work/moe" --set train.precision="$PRECISION" --set train.batch_size="$BATCH"
        --set train.seq_len="$SEQ" --set train.steps="$STEPS" --set train.log_every=1000
        --set train.peak_gflops=100 --set output.checkpoint_every=0 --set data.val_fraction=0
        --set train.profile=true)
run() {  # name ranks threads [mesh]
  local name=$1 ranks=$2 threads=$3 mesh=${4:-}
  if [ "$ranks" = 1 ]; then
    OMP_NUM_THREADS=$threads "$B" train "${common[@]}" --set train.threads="$threads" \
      --set output.dir="$work/$name" >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
  else
    OMP_NUM_THREADS=$threads mpirun --allow-run-as-root --oversubscribe -n "$ranks" "$B" train --mesh "$mesh" \
      "${common[@]}" --set train.threads="$threads" --set output.dir="$work/$name" >"$work/$name.log" 2>&1 ||
      { cat "$work/$name.log" >&2; exit 1; }
  fi
}
run one_1thread 1 1
run one_2threads 1 2
run ep2 2 1 ep=2

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
rows = [("one rank, 1 thread", "one_1thread", "1 x 1"), ("one rank, 2 threads", "one_2threads", "1 x 2"),
        ("ep=2 (a core a rank)", "ep2", "2 x 1")]
print("\n| run | ranks x threads | tokens/s | ms/step | experts (fwd + bwd) ms/step | expert exchanges ms/step |")
print("|---|---|---|---|---|---|")
for label, d, shape in rows:
    s = json.load(open(f"{work}/{d}/run_summary.json"))
    steps, ops = s["timed_steps"], s.get("op_seconds", {})
    experts = 1e3 * (ops.get("moe experts", 0) + ops.get("moe experts backward", 0)) / steps
    a2a = 1e3 * ops.get("moe all-to-all", 0) / steps
    print(f"| {label} | {shape} | {s['tokens_per_s']:.0f} | {1e3 * s['timed_seconds'] / steps:.0f} | {experts:.0f} | "
          + (f"{a2a:.0f} |" if d == "ep2" else "- |"))
PY
echo "load average (1 min) at the end: $(cut -d' ' -f1 /proc/loadavg)"
