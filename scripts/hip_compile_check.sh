#!/usr/bin/env bash
# Compile-only check of the GPU kernels as HIP for AMD's gfx90a (MI250X), through the vendor
# mapping of src/kernels/cuda/gpu_runtime.h (MESHTRAIN_HIP): every src/kernels/cuda/*.cu except the
# GEMM sources (those that use cuBLASLt: Debian 12's ROCm 5.2 has no hipBLASLt) and those that use
# CUB (directly or through kernels/cuda/gpu_sort.h: no hipCUB either), and the mapping's own probe
# kernel tests/gpu/vendor_probe.cu. Warnings are errors, as in the CPU build.
# What this does not check: gfx942 (MI300X: Debian's clang 15 does not know it), the GEMM files,
# RCCL (nccl_comm.cu), linking, and running anything (no AMD GPU here). See docs/gpu.md.
# Exits 77 (ctest's skip) when hipcc is not installed (apt-get install hipcc).
# Usage: scripts/hip_compile_check.sh [-j N]   (default: the number of cores)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=$(nproc)
if [ "${1:-}" = "-j" ] && [ -n "${2:-}" ]; then jobs=$2; fi
arch=gfx90a
if ! command -v hipcc > /dev/null; then
  echo "hip compile check: skipped: hipcc is not installed (apt-get install hipcc)"
  exit 77
fi

sources=(tests/gpu/vendor_probe.cu)
left_out=()
for f in src/kernels/cuda/*.cu; do
  [ -e "$f" ] || continue
  if grep -q -i -E 'cublas|cub/|gpu_sort\.h' "$f"; then left_out+=("$f"); else sources+=("$f"); fi
done

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
echo "hip compile check ($arch): ${#sources[@]} files compiled, $([ $status = 0 ] && echo "all passed" || echo "some FAILED")," \
     "${#left_out[@]} files using cuBLASLt or CUB left out${left_out:+: ${left_out[*]}}"
exit $status
