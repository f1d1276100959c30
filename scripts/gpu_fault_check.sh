#!/usr/bin/env bash
# Proof that the CPU-executed CUDA build catches what it must (docs/gpu.md "Faults it catches"):
# applies each deliberate fault of scripts/gpu_faults/*.patch to the work tree, one at a time,
# rebuilds the CPU-executed build incrementally, runs the tests the patch's header names, and
# requires at least one of them to fail; the patch is reverted whatever happens (also on Ctrl-C).
# Faults are never committed in the sources: they live only as these patches.
#
# A patch's header (before its first "diff --git") says what it breaks and which tests should catch it:
#   # fault: a __syncthreads removed from the block reduction
#   # tests: ^gpu\.Backends/BackendOps\..*/cuda   (a ctest -R regex; ctest names end in "# GetParam() = ...")
# Usage: scripts/gpu_fault_check.sh [--build DIR] [PATCH...]   (default: build-cuda-on-cpu, every patch)
# Prints one line per fault (CAUGHT or MISSED, with the tests that failed) and ends with
# "N passed, N failed" (a fault caught is a pass). Needs the build configured with
# -DMESHTRAIN_CUDA_ON_CPU=ON (.ci/run makes it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build-cuda-on-cpu
patches=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    *) patches+=("$1"); shift ;;
  esac
done
[ ${#patches[@]} -gt 0 ] || patches=(scripts/gpu_faults/*.patch)
[ -f "$build/CMakeCache.txt" ] && grep -q '^MESHTRAIN_CUDA_ON_CPU:BOOL=ON' "$build/CMakeCache.txt" || {
  echo "gpu_fault_check: $build is not a -DMESHTRAIN_CUDA_ON_CPU=ON build (configure it as .ci/run does)" >&2
  exit 2
}

applied=""
revert() {
  if [ -n "$applied" ]; then
    git apply -R "$applied" || echo "gpu_fault_check: could not revert $applied: restore the files it names with git checkout" >&2
    applied=""
  fi
}
trap 'revert; exit 130' INT TERM
trap revert EXIT

rebuild() { cmake --build "$build" --target meshtrain meshtrain_gpu_tests meshtrain_mpi_tests > "$1" 2>&1; }

logs=$(mktemp -d)
caught=0 missed=0
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  fault=$(sed -n 's/^# fault: //p' "$patch" | head -1)
  tests=$(sed -n 's/^# tests: //p' "$patch" | head -1)
  if [ -z "$tests" ]; then echo "gpu_fault_check: $patch has no '# tests:' line" >&2; missed=$((missed + 1)); continue; fi
  # The files it changes must be as committed, so that reverting restores them exactly.
  files=$(sed -n 's|^+++ b/||p' "$patch")
  if ! git diff --quiet -- $files; then
    echo "gpu_fault_check: $name: $files have uncommitted changes; not applying it" >&2
    missed=$((missed + 1))
    continue
  fi
  git apply "$patch" || { echo "gpu_fault_check: $name does not apply to these sources" >&2; missed=$((missed + 1)); continue; }
  applied=$patch
  start=$(date +%s)
  if ! rebuild "$logs/$name.build.log"; then
    # A fault the compiler refuses is caught too, but not by a test: say so.
    echo "CAUGHT  $name ($fault): the build fails ($(grep -m1 'error' "$logs/$name.build.log"))"
    caught=$((caught + 1))
    revert
    continue
  fi
  ctest --test-dir "$build" -R "$tests" --timeout 300 -j2 > "$logs/$name.test.log" 2>&1
  # The failed tests' names, without the "  # GetParam() = ..." that ctest appends to parameterized ones.
  failed=$(sed -nE 's/^[[:space:]]*[0-9]+ - (.*) \(.*\)$/\1/p' "$logs/$name.test.log" | sed 's/  # GetParam.*//' |
           sort -u | tr '\n' ' ')
  ran=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$logs/$name.test.log")
  secs=$(( $(date +%s) - start ))
  if [ -n "$failed" ]; then
    echo "CAUGHT  $name ($fault) in ${secs}s by: $failed"
    caught=$((caught + 1))
  else
    echo "MISSED  $name ($fault): ${ran:-no} tests matching '$tests' all passed (log: $logs/$name.test.log)"
    missed=$((missed + 1))
  fi
  revert
done
# The tree as committed again: rebuild so the build directory matches the sources.
rebuild "$logs/final.build.log" || echo "gpu_fault_check: the rebuild after the faults failed (log: $logs/final.build.log)" >&2
echo "$caught passed, $missed failed"
[ "$missed" = 0 ]
