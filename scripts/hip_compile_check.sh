#!/usr/bin/env bash
# Compile-only check of the GPU kernels as HIP for AMD's gfx90a (MI250X), through the vendor
# mapping of src/kernels/cuda/gpu_runtime.h (MESHTRAIN_HIP): every src/kernels/cuda/*.cu (and
# src/parallel/nccl_comm.cu) whose includes this machine's ROCm can satisfy, plus the mapping's own
# probe kernel tests/gpu/vendor_probe.cu. Warnings are errors, as in the CPU build.
#
# What a file needs is read from what it includes, directly or through kernels/cuda headers
# (cmake/hip_sources.cmake, the same scan CMake's MESHTRAIN_HIP uses): hipBLASLt for cuBLASLt
# (<cublasLt.h>), hipCUB for CUB (<cub/...>, through kernels/cuda/gpu_sort.h), RCCL for NCCL. A file
# whose library is not installed is named with the reason instead of compiled; Debian 12's ROCm 5.2
# has none of the three.
# What this does not check: gfx942 (MI300X: Debian's clang 15 does not know it), linking, and
# running anything (no AMD GPU here). See docs/gpu.md.
# Exits 77 (ctest's skip) when hipcc is not installed (scripts/setup.sh installs it).
# Usage: scripts/hip_compile_check.sh [-j N]   (default: the number of cores)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=$(nproc)
if [ "${1:-}" = "-j" ] && [ -n "${2:-}" ]; then jobs=$2; fi
arch=gfx90a
if ! command -v hipcc > /dev/null; then
  echo "hip compile check: skipped: hipcc is not installed (scripts/setup.sh installs it; or apt-get install hipcc)"
  exit 77
fi

# Whether hipcc finds a library's header (so a ROCm that has it compiles the files needing it).
have_header() {
  echo "#include <$1>" | hipcc -x hip --offload-arch="$arch" -std=c++20 -fsyntax-only - > /dev/null 2>&1
}
declare -A why_missing=()
have_header hipblaslt/hipblaslt.h || why_missing[hipBLASLt]="needs hipBLASLt (cuBLASLt's counterpart), not in Debian 12"
have_header hipcub/hipcub.hpp || why_missing[hipCUB]="needs hipCUB (CUB's radix sort, through kernels/cuda/gpu_sort.h), not in Debian 12"
have_header rccl/rccl.h || why_missing[RCCL]="needs RCCL (NCCL's counterpart), not in Debian 12"

sources=(tests/gpu/vendor_probe.cu)
left_out=()
while read -r file needs; do
  [ -n "$file" ] || continue
  reason=""
  for lib in $needs; do
    if [ -n "${why_missing[$lib]:-}" ]; then reason="${reason:+$reason; }${why_missing[$lib]}"; fi
  done
  if [ -n "$reason" ]; then left_out+=("$file: $reason"); else sources+=("$file"); fi
done < <(cmake -DMT_SOURCE_DIR="$PWD" -P cmake/hip_sources.cmake)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export out arch
compile() {
  local src=$1 log
  log="$out/$(echo "$src" | tr / _).log"
  if hipcc -x hip --offload-arch="$arch" -std=c++20 -DMESHTRAIN_HIP=1 -Isrc -O2 \
       -Wall -Wextra -Wno-unused-parameter -Werror -c "$src" -o "$log.o" > "$log" 2>&1; then
    echo "ok      $src"
  else
    echo "FAILED  $src"
    sed 's/^/        /' "$log"
    return 1
  fi
}
export -f compile
status=0
printf '%s\n' "${sources[@]}" | xargs -P "$jobs" -I{} bash -c 'compile "$@"' _ {} || status=1
for l in "${left_out[@]}"; do echo "skipped $l"; done
echo "hip compile check ($arch): ${#sources[@]} files compiled, $([ $status = 0 ] && echo "all passed" || echo "some FAILED")," \
     "${#left_out[@]} left out for a library this ROCm lacks"
exit $status
