#!/usr/bin/env bash
# Installs meshtrain's build and test dependencies on Debian 12. Idempotent: when every package is
# already installed it only checks (no network access, no root needed).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build g++
  libdnnl-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  iproute2 procps  # scripts/two_hosts.sh (ip netns) and the killed-rank test (pkill)
  slurm-wlm munge libpmix-dev  # scripts/slurm_test.sh: slurmctld, slurmd, srun; srun --mpi=pmix loads libpmix.so
  clang libclang-rt-14-dev  # scripts/fuzz.sh: clang++ with libFuzzer and the sanitizers
  chromium  # tests/test_report.cpp: renders `meshtrain report`'s page headless
  libcurl4-openssl-dev  # io/hub_download.cpp: models fetched from the Hugging Face Hub (--model ORG/NAME)
  zlib1g-dev  # the report's PNG charts are deflated with zlib; the report test inflates them
  python3-numpy  # scripts/family_reference.py: the model families' float64 reference forward
  libboost-context-dev  # the CUDA-on-CPU build (-DMESHTRAIN_CUDA_ON_CPU=ON): GPU threads as fibers
  # scripts/hip_compile_check.sh (ctest hip_compile_check): the kernels compiled as HIP for AMD by
  # Debian's ROCm 5.2 hipcc (clang 15 and the HIP runtime headers: 26 packages, 66 MB to download,
  # 353 MB installed, 26 s to install from the local cache, measured 2026-12-06)
  hipcc
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup: missing packages (${missing[*]}) and not root, and sudo is not available;" \
       "run as root: apt-get install ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
