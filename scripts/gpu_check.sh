#!/usr/bin/env bash
# The device check of the CUDA backend (docs/gpu.md), for a machine with NVIDIA GPUs, CUDA 13,
# CMake, ninja and 16 cores but none of our Debian dependencies and no network: it unpacks the
# .deb files scripts/gpu_fetch_debs.sh fetched into gpu-debs/ (dpkg -x into a prefix, never /),
# configures build-cuda/ with -DMESHTRAIN_CUDA=ON against that prefix for the architecture of the
# GPU present (nvidia-smi's compute capability; 90 when none answers), builds only what the steps
# run (meshtrain, meshtrain_tests), and then runs each device check under its own timeout (about 8
# minutes in all):
#   compare     the per-op and whole-model comparisons against the reference backend (f32 and
#               bf16, full, LoRA, QLoRA, decoding)
#   repeat      two identical training runs on the GPU, bit for bit
#   staged      a 2-rank run sharing the one GPU (train.share_gpu, host-staged MPI) equal to the
#               1-rank run
#   nccl        a run with train.device_comm = "nccl" on one rank per GPU (with one GPU nothing is
#               communicated: its log says so)
#   bench-lora, bench-full  meshtrain bench --device cuda on an 8B-shaped model cut to 2 layers
#               (hidden 4096, intermediate 14336, 32/8 heads, vocabulary 128256, seq 2048): tokens/s,
#               ms/step, MFU against 989 TFLOP/s, the per-op profile, peak memory, GEMM TFLOP/s
# It ends with "N passed, N failed". Logs go to build-cuda/gpu_check/. When $OUT is set (the device
# tool, which brings back at most 8 files, and only what is there when the command ends or is
# stopped) each file is copied there as soon as it is complete, so a run cut short by its time
# limit still brings back what it did: build.log (configure and build) as the build ends, each
# step's log (<step>.log) as the step ends, and gpu_check.json (the steps so far: exit code,
# seconds, the bench figures) rewritten after every step; 8 files in all.
# Without a GPU it stops before the device steps, non-zero.
#
# --cpu runs every step of the check here, on the CPU-executed CUDA build (docs/gpu.md "CUDA executed
# on the CPU"): build-cuda-on-cpu/ configured with -DMESHTRAIN_CUDA_ON_CPU=ON from this machine's
# own packages (no .debs), the steps on the emulated GPUs (two of them for the nccl step, so it
# communicates), the benches on a one-block shape the emulator finishes, each timeout four times
# the GPU's. It tests the script itself: its steps, timeouts, logs, $OUT files and JSON.
# Usage: scripts/gpu_check.sh [--build-only] [--cpu]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build_only=0 cpu=0
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --cpu) cpu=1 ;;
    *) echo "gpu_check: unknown argument $arg (expected --build-only or --cpu)" >&2; exit 2 ;;
  esac
done
build_dir=$root/build-cuda
[ "$cpu" = 1 ] && build_dir=$root/build-cuda-on-cpu

out=$build_dir/gpu_check
rm -rf "$out" && mkdir -p "$out"
passed=0 failed=0
results=()
stopped=""
gpus=""
say() { echo "gpu_check: $*"; }
# A number of milliseconds as seconds with three decimals (no bc on every machine).
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# gpu_check.json: the steps so far (and why the check stopped, if it did), into $out and $OUT.
write_json() {
  {
    echo "{\"device\": \"$(echo "$gpus" | head -1 | sed 's/["\\]/\\&/g')\", \"passed\": $passed, \"failed\": $failed,"
    [ -n "$stopped" ] && echo "\"stopped\": \"$(echo "$stopped" | sed 's/["\\]/\\&/g')\","
    echo "\"steps\": ["
    (IFS=,; echo "${results[*]}")
    echo "]}"
  } > "$out/gpu_check.json"
  publish gpu_check.json
}
# Copies $out/NAME to $OUT (when set), now: what is there when a run is stopped comes back.
publish() {
  [ -n "${OUT:-}" ] || return 0
  cp "$out/$1" "$OUT/$1" 2> /dev/null || true
}
die() {
  echo "gpu_check: $*" >&2
  stopped="$*"
  [ -f "$out/build.log" ] && publish build.log
  write_json
  exit 1
}

if [ "$cpu" = 1 ]; then
  # ---- the CPU-executed build: this machine's packages, the emulated GPUs ------------------------
  mpirun_bin=mpirun
  cmake_args=(-S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_CUDA_ON_CPU=ON)
  # ccache for a new build directory only: changing the launcher of one already built (by .ci/run,
  # say) would recompile all of it.
  [ -x "$(command -v ccache)" ] && [ ! -f "$build_dir/CMakeCache.txt" ] && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  build_log=$out/build.log
  say "configuring $build_dir (-DMESHTRAIN_CUDA_ON_CPU=ON)"
  cmake "${cmake_args[@]}" > "$build_log" 2>&1 || { tail -30 "$build_log"; die "configure failed (log: build.log)"; }
  say "building meshtrain and meshtrain_gpu_tests in $build_dir"
  start=$(date +%s)
  cmake --build "$build_dir" --target meshtrain meshtrain_gpu_tests >> "$build_log" 2>&1 ||
    { grep -E "error|Error" "$build_log" | head -30; die "build failed (log: build.log)"; }
  say "built in $(( $(date +%s) - start )) s"
  publish build.log
  [ "$build_only" = 1 ] && { say "--build-only: stopping before the device steps"; exit 0; }
  gpus="CUDA on CPU: emulated H100s (src/kernels/cuda_on_cpu), not a GPU"
  ngpus=2
  say "device: $gpus"
else
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
  # Debian installs PMIx under its own prefix, usr/lib/x86_64-linux-gnu/pmix2 (lib/libpmix.so.2 and
  # its plugins in lib/pmix; `dpkg -L libpmix2`), not under usr/.
  export OPAL_PREFIX=$usr PMIX_INSTALL_PREFIX=$lib/pmix2
  export PATH=$usr/bin:$PATH
  export LD_LIBRARY_PATH=$lib:$lib/openmpi/lib:$lib/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  mpirun_bin=$usr/bin/mpirun.openmpi
  [ -d "$PMIX_INSTALL_PREFIX/lib/pmix" ] || die "PMIx is not where Debian puts it: no $PMIX_INSTALL_PREFIX/lib/pmix (is libpmix2 in gpu-debs?)"
  # NCCL: the toolkit's, else the one PyTorch's wheels bring (nvidia-nccl-cu*: nvidia.nccl is a
  # namespace package, whose __file__ is None: its directories are __path__). A directory counts only
  # when it holds include/nccl.h and lib/libnccl.so.2.
  nccl_root=""
  if [ ! -f /usr/local/cuda/include/nccl.h ]; then
    nccl_root=$(python3 - 2> /dev/null << 'PY' || true
import os
import nvidia.nccl as m
dirs = list(getattr(m, "__path__", []) or [])
if getattr(m, "__file__", None):
    dirs.append(os.path.dirname(m.__file__))
for d in dirs:
    if os.path.isfile(os.path.join(d, "include", "nccl.h")) and os.path.isfile(os.path.join(d, "lib", "libnccl.so.2")):
        print(d)
        break
PY
  )
    [ -n "$nccl_root" ] || die "no NCCL: neither /usr/local/cuda/include/nccl.h nor PyTorch's nvidia.nccl (include/nccl.h, lib/libnccl.so.2)"
    say "NCCL from $nccl_root"
    export LD_LIBRARY_PATH=$nccl_root/lib:$LD_LIBRARY_PATH
  fi
  
  # ---- configure and build ------------------------------------------------------------------------
  # One architecture: the GPU's own (compute capability 9.0 -> 90), 90 (H100/H200) when nvidia-smi
  # does not answer (a rehearsal of the build without a GPU).
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | tr -d ' .')
  if ! [[ "$arch" =~ ^[0-9]+$ ]]; then
    say "no compute capability from nvidia-smi: building for sm_90"
    arch=90
  fi
  jobs=$(nproc)
  cmake_args=(-S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_CUDA=ON
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DMESHTRAIN_CUDA_ARCHITECTURES="$arch"
    -DCMAKE_PREFIX_PATH="$usr;$lib/cmake"
    -DCMAKE_INCLUDE_PATH="$usr/include" -DCMAKE_LIBRARY_PATH="$lib"
    -DMPI_CXX_COMPILER="$usr/bin/mpicxx.openmpi" -DMPI_C_COMPILER="$usr/bin/mpicc.openmpi"
    -DMPIEXEC_EXECUTABLE="$mpirun_bin")
  # PyTorch's NCCL wheel has libnccl.so.2 but no libnccl.so for find_library: named directly.
  [ -n "$nccl_root" ] && cmake_args+=(-DNCCL_LIB="$nccl_root/lib/libnccl.so.2" -DNCCL_INCLUDE="$nccl_root/include")
  [ -x "$(command -v ccache)" ] && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  build_log=$out/build.log
  say "configuring build-cuda/ for sm_$arch"
  cmake "${cmake_args[@]}" > "$build_log" 2>&1 || { tail -30 "$build_log"; die "configure failed (log: build.log)"; }
  # Every dependency must come from the prefix, not from the machine: a check that this script's
  # unpacking is what the build uses.
  for var in DNNL_LIB TOMLPP_INCLUDE CLI11_INCLUDE; do
    grep -q "^$var:.*=$prefix" build-cuda/CMakeCache.txt || die "configure took $var from outside $prefix: $(grep "^$var:" build-cuda/CMakeCache.txt)"
  done
  # Only what the steps run: meshtrain and meshtrain_tests (not the MPI tests or benchmarks).
  say "building meshtrain and meshtrain_tests in build-cuda/ ($jobs jobs)"
  start=$(date +%s)
  cmake --build build-cuda -j "$jobs" --target meshtrain meshtrain_tests >> "$build_log" 2>&1 ||
    { grep -E "error|Error" "$build_log" | head -30; die "build failed (log: build.log)"; }
  grep -q "warning:" "$build_log" && say "the build printed warnings (see build.log)"
  say "built in $(( $(date +%s) - start )) s"
  publish build.log
  [ "$build_only" = 1 ] && { say "--build-only: stopping before the device steps"; exit 0; }
  
  # ---- the device ---------------------------------------------------------------------------------
  if ! command -v nvidia-smi > /dev/null; then
    die "no NVIDIA GPU: nvidia-smi is not installed (no driver), so the device checks cannot run here"
  fi
  gpus=$(nvidia-smi -L 2>&1) || die "no NVIDIA GPU: nvidia-smi -L failed: $gpus"
  [ -n "$gpus" ] || die "no NVIDIA GPU: nvidia-smi -L lists none"
  ngpus=$(echo "$gpus" | grep -c '^GPU ')
  [ "$ngpus" -ge 1 ] || ngpus=1
  say "device: $gpus"
  
fi

# ---- the checks ---------------------------------------------------------------------------------
# step NAME TIMEOUT_S COMMAND...: runs COMMAND under its timeout, its output into $out/NAME.log;
# the log, and gpu_check.json with the step's result, go to $OUT as soon as it ends. A step that
# writes $out/NAME.json (the benches) has those figures in its gpu_check.json entry and its log.
step() {
  local name=$1 limit=$2 t0 rc secs figures=""
  shift 2
  t0=$(now_ms)
  limit=$((limit * slow))
  timeout --kill-after=10 "$limit" bash -c "$*" > "$out/$name.log" 2>&1
  rc=$?
  secs=$(seconds $(( $(now_ms) - t0 )))
  if [ $rc = 0 ]; then passed=$((passed + 1)); say "PASS $name (${secs}s)"
  else failed=$((failed + 1)); say "FAIL $name (rc $rc$([ $rc = 124 ] && echo ", timed out after ${limit}s"), ${secs}s): last lines:"; tail -15 "$out/$name.log" | sed 's/^/    /'; fi
  if [ -s "$out/$name.json" ]; then
    figures=", \"figures\": $(tr '\n' ' ' < "$out/$name.json")"
    { echo "===== $name.json"; cat "$out/$name.json"; } >> "$out/$name.log"
  fi
  results+=("{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $secs$figures}")
  publish "$name.log"
  write_json
}

# What the steps run, in one place: a mode that runs the same steps elsewhere (another build of
# the binaries, another launcher or environment) sets these instead.
bin=$build_dir/meshtrain                    # the meshtrain binary
tests=$build_dir/meshtrain_tests            # the test binary
mpirun="$mpirun_bin --allow-run-as-root --oversubscribe"  # launches N ranks: $mpirun -n N ...
device="--device cuda"                      # where the runs compute
slow=1                                      # each step's timeout is its GPU limit times this
shape="--preset llama3-8b --layers 2 --seq 2048 --batch 1 --steps 3 --peak-gflops 989000"
if [ "$cpu" = 1 ]; then
  tests=$build_dir/meshtrain_gpu_tests      # the CPU-executed build's tests of the CUDA backend
  slow=4
  shape="--preset reference --layers 1 --seq 32 --batch 1 --steps 1 --peak-gflops 989000"
fi
runs=$build_dir/gpu_runs
rm -rf "$runs" && mkdir -p "$runs"
tiny="--set train.steps=3 --set train.batch_size=4 --set train.seq_len=64 --set train.log_every=1 --set train.peak_gflops=989000"

# A comparison skipped on the GPU (the backend did not open) is a failure here, not a pass.
step compare 150 "set -o pipefail; $tests --gtest_filter='*/cuda:*_cuda:CudaBackend.*:GemmLayout*:DeviceMath*:OnlineSoftmax*' |
  tee $out/compare_tests.txt && ! grep -q 'SKIPPED \\]' $out/compare_tests.txt"
step repeat 60 "for r in a b; do $bin train $device $tiny --set output.dir=$runs/repeat_\$r || exit 1; done;
  cmp $runs/repeat_a/model/model.safetensors $runs/repeat_b/model/model.safetensors &&
  diff <(grep -o '\"loss\":[^,]*' $runs/repeat_a/metrics.jsonl) <(grep -o '\"loss\":[^,]*' $runs/repeat_b/metrics.jsonl)"
# Two ranks on one GPU: backend_factory refuses more ranks than GPUs unless train.share_gpu.
step staged 90 "$bin train $device $tiny --set train.precision=fp32 --set output.dir=$runs/one &&
  OMP_NUM_THREADS=4 $mpirun -n 2 $bin train $device --mesh dp=2 $tiny \
    --set train.precision=fp32 --set train.device_comm=mpi --set train.share_gpu=true --set output.dir=$runs/two &&
  python3 -c \"
import json, sys
a = [json.loads(l)['loss'] for l in open('$runs/one/metrics.jsonl')]
b = [json.loads(l)['loss'] for l in open('$runs/two/metrics.jsonl')]
print('1 rank :', a); print('2 ranks:', b)
sys.exit(0 if len(a) == len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)\""
# NCCL: one rank per GPU (NCCL refuses two ranks on one GPU). With one GPU every group has one
# rank, so no NCCL communicator is made at all (device_comms.h): the step then only shows that
# the setting starts and trains.
if [ "$ngpus" = 1 ]; then
  nccl_note="nccl: 1 GPU, so 1 rank: every group has one rank and nothing is communicated (no NCCL communicator is made); this step only shows that train.device_comm=nccl starts and trains"
  step nccl 60 "echo '$nccl_note'; $bin train $device $tiny --set train.device_comm=nccl --set output.dir=$runs/nccl"
else
  step nccl 90 "echo 'nccl: $ngpus ranks, one GPU each, dp=$ngpus over NCCL'; OMP_NUM_THREADS=4 $mpirun -n $ngpus $bin train $device --mesh dp=$ngpus \
    ${tiny/train.batch_size=4/train.batch_size=$((4 * ngpus))} --set train.device_comm=nccl --set output.dir=$runs/nccl"
fi
step bench-lora 120 "$bin bench $device --what lora --lora-rank 16 $shape --json $out/bench-lora.json"
step bench-full 120 "$bin bench $device --what full $shape --json $out/bench-full.json"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
