#!/usr/bin/env bash
# The device check of the CUDA backend (docs/gpu.md), for a machine with one NVIDIA GPU, CUDA 13,
# CMake, ninja and 16 cores but none of our Debian dependencies and no network: it unpacks the
# .deb files scripts/gpu_fetch_debs.sh fetched into gpu-debs/ (dpkg -x into a prefix, never /),
# configures build-cuda/ with -DMESHTRAIN_CUDA=ON against that prefix, builds, and then runs each
# device check under its own timeout (about 8 minutes in all):
#   compare     the per-op and whole-model comparisons against the reference backend (f32 and
#               bf16, full, LoRA, QLoRA, decoding)
#   repeat      two identical training runs on the GPU, bit for bit
#   staged      a 2-rank run on the one GPU (host-staged MPI) equal to the 1-rank run
#   nccl        a 1-rank run with train.device_comm = "nccl"
#   bench-lora, bench-full  meshtrain bench --device cuda on an 8B-shaped model cut to 2 layers
#               (hidden 4096, intermediate 14336, 32/8 heads, vocabulary 128256, seq 2048): tokens/s,
#               ms/step, MFU against 989 TFLOP/s, the per-op profile, peak memory, GEMM TFLOP/s
# It ends with "N passed, N failed". Logs go to build-cuda/gpu_check/; when $OUT is set (the device
# tool, which brings back at most 8 files) it also gets gpu_check.json (the steps, their exit
# codes and seconds), gpu_check.log (every log, one after another) and the bench figures
# (bench_lora.json, bench_full.json). Without a GPU it stops before the device steps, non-zero.
# Usage: scripts/gpu_check.sh [--build-only]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build_only=0
[ "${1:-}" = "--build-only" ] && build_only=1

out=$root/build-cuda/gpu_check
rm -rf "$out" && mkdir -p "$out"
# The logs so far, into $OUT (when set) as one file.
collect() {
  [ -n "${OUT:-}" ] || return 0
  for f in "$out"/*.log; do [ -e "$f" ] && { echo "===== $(basename "$f")"; cat "$f"; }; done > "$OUT/gpu_check.log"
  cp "$out"/*.json "$OUT"/ 2> /dev/null || true
}
say() { echo "gpu_check: $*"; }
die() { echo "gpu_check: $*" >&2; collect; exit 1; }

# ---- dependencies: the fetched .debs unpacked into a prefix -----------------------------------
prefix=$root/build-cuda/deps
ls gpu-debs/*.deb > /dev/null 2>&1 || die "no gpu-debs/*.deb: run scripts/gpu_fetch_debs.sh where the Debian mirror is reachable, and carry gpu-debs"
if [ ! -f "$prefix/.unpacked" ] || [ -n "$(find gpu-debs -name '*.deb' -newer "$prefix/.unpacked")" ]; then
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in gpu-debs/*.deb; do dpkg -x "$deb" "$prefix" || die "dpkg -x $deb failed"; done
  touch "$prefix/.unpacked"
  say "unpacked $(ls gpu-debs/*.deb | wc -l) packages into $prefix"
fi
usr=$prefix/usr
lib=$usr/lib/x86_64-linux-gnu
# Open MPI and PMIx are relocatable: their prefix variables point them at the unpacked tree.
export OPAL_PREFIX=$usr PMIX_INSTALL_PREFIX=$usr
export PATH=$usr/bin:$PATH
export LD_LIBRARY_PATH=$lib:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mpirun_bin=$usr/bin/mpirun.openmpi
# NCCL: the toolkit's, else the one PyTorch's wheels bring.
nccl_root=""
if [ ! -f /usr/local/cuda/include/nccl.h ]; then
  nccl_root=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  [ -n "$nccl_root" ] && export LD_LIBRARY_PATH=$nccl_root/lib:$LD_LIBRARY_PATH
fi

# ---- configure and build ------------------------------------------------------------------------
jobs=$(nproc)
cmake_args=(-S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_CUDA=ON
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_PREFIX_PATH="$usr;$lib/cmake"
  -DCMAKE_INCLUDE_PATH="$usr/include" -DCMAKE_LIBRARY_PATH="$lib"
  -DMPI_CXX_COMPILER="$usr/bin/mpicxx.openmpi" -DMPI_C_COMPILER="$usr/bin/mpicc.openmpi"
  -DMPIEXEC_EXECUTABLE="$mpirun_bin")
# PyTorch's NCCL wheel has libnccl.so.2 but no libnccl.so for find_library: named directly.
[ -n "$nccl_root" ] && cmake_args+=(-DNCCL_LIB="$nccl_root/lib/libnccl.so.2" -DNCCL_INCLUDE="$nccl_root/include")
[ -x "$(command -v ccache)" ] && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
say "configuring build-cuda/"
cmake "${cmake_args[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; die "configure failed (build-cuda/ log: $out/configure.log)"; }
# Every dependency must come from the prefix, not from the machine: a check that this script's
# unpacking is what the build uses.
for var in DNNL_LIB TOMLPP_INCLUDE CLI11_INCLUDE; do
  grep -q "^$var:.*=$prefix" build-cuda/CMakeCache.txt || die "configure took $var from outside $prefix: $(grep "^$var:" build-cuda/CMakeCache.txt)"
done
say "building build-cuda/ ($jobs jobs)"
start=$(date +%s)
cmake --build build-cuda -j "$jobs" > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -30; die "build failed (log: $out/build.log)"; }
grep -q "warning:" "$out/build.log" && say "the build printed warnings (see $out/build.log)"
say "built in $(( $(date +%s) - start )) s"
[ "$build_only" = 1 ] && { say "--build-only: stopping before the device steps"; exit 0; }

# ---- the device ---------------------------------------------------------------------------------
if ! command -v nvidia-smi > /dev/null; then
  die "no NVIDIA GPU: nvidia-smi is not installed (no driver), so the device checks cannot run here"
fi
gpus=$(nvidia-smi -L 2>&1) || die "no NVIDIA GPU: nvidia-smi -L failed: $gpus"
[ -n "$gpus" ] || die "no NVIDIA GPU: nvidia-smi -L lists none"
say "device: $gpus"

# ---- the checks ---------------------------------------------------------------------------------
passed=0 failed=0
results=()
# step NAME TIMEOUT_S COMMAND...: runs COMMAND under its timeout, its output into $out/NAME.log.
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" bash -c "$*" > "$out/$name.log" 2>&1
  rc=$?
  local secs
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  if [ $rc = 0 ]; then passed=$((passed + 1)); say "PASS $name (${secs}s)"
  else failed=$((failed + 1)); say "FAIL $name (rc $rc$([ $rc = 124 ] && echo ", timed out after ${limit}s"), ${secs}s): last lines:"; tail -15 "$out/$name.log" | sed 's/^/    /'; fi
  results+=("{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $secs}")
}

bin=$root/build-cuda/meshtrain
tests=$root/build-cuda/meshtrain_tests
runs=$root/build-cuda/gpu_runs
rm -rf "$runs" && mkdir -p "$runs"
tiny="--set train.steps=3 --set train.batch_size=4 --set train.seq_len=64 --set train.log_every=1 --set train.peak_gflops=989000"

# A comparison skipped on the GPU (the backend did not open) is a failure here, not a pass.
step compare 150 "set -o pipefail; $tests --gtest_filter='*/cuda:*_cuda:CudaBackend.*:GemmLayout*:DeviceMath*:OnlineSoftmax*' |
  tee $out/compare_tests.txt && ! grep -q 'SKIPPED \\]' $out/compare_tests.txt"
step repeat 60 "for r in a b; do $bin train --device cuda $tiny --set output.dir=$runs/repeat_\$r || exit 1; done;
  cmp $runs/repeat_a/model/model.safetensors $runs/repeat_b/model/model.safetensors &&
  diff <(grep -o '\"loss\":[^,]*' $runs/repeat_a/metrics.jsonl) <(grep -o '\"loss\":[^,]*' $runs/repeat_b/metrics.jsonl)"
step staged 90 "$bin train --device cuda $tiny --set train.precision=fp32 --set output.dir=$runs/one &&
  OMP_NUM_THREADS=4 $mpirun_bin --allow-run-as-root --oversubscribe -n 2 $bin train --device cuda --mesh dp=2 $tiny \
    --set train.precision=fp32 --set train.device_comm=mpi --set output.dir=$runs/two &&
  python3 -c \"
import json, sys
a = [json.loads(l)['loss'] for l in open('$runs/one/metrics.jsonl')]
b = [json.loads(l)['loss'] for l in open('$runs/two/metrics.jsonl')]
print('1 rank :', a); print('2 ranks:', b)
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)\""
step nccl 60 "$bin train --device cuda $tiny --set train.device_comm=nccl --set output.dir=$runs/nccl"
shape="--preset llama3-8b --layers 2 --seq 2048 --batch 1 --steps 3 --peak-gflops 989000"
step bench-lora 120 "$bin bench --device cuda --what lora --lora-rank 16 $shape --json $out/bench_lora.json"
step bench-full 120 "$bin bench --device cuda --what full $shape --json $out/bench_full.json"

{
  echo "{\"device\": \"$(echo "$gpus" | head -1 | sed 's/"/\\"/g')\", \"passed\": $passed, \"failed\": $failed, \"steps\": ["
  (IFS=,; echo "${results[*]}")
  echo "]}"
} > "$out/gpu_check.json"
collect
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
