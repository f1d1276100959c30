#!/usr/bin/env bash
# Fetches (here, where Debian's mirror is reachable) the Debian 12 packages the CUDA build needs
# and a GPU machine without our dependencies or a network lacks, into gpu-debs/ (git-ignored), for
# scripts/gpu_check.sh to unpack there with dpkg -x into a prefix. The -dev packages of oneDNN,
# Open MPI, nlohmann json, toml++, CLI11, GoogleTest and zlib, and the runtime libraries they
# link or Open MPI loads (found with ldd on this machine's installed copies; what every Debian or
# Ubuntu image with a compiler has, libc, libstdc++, libgcc, libgomp, libatomic, zlib's runtime, is
# left out: a second libgomp in the prefix would shadow the compiler's). Prints the total size,
# which must stay well under the 64 MiB a device run carries.
# Usage: scripts/gpu_fetch_debs.sh        (apt-get download needs no root; run apt-get update first
#                                          if the package lists are missing)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  # headers, static parts and CMake files the build reads
  libdnnl-dev libopenmpi-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libgtest-dev zlib1g-dev
  # runtime libraries of meshtrain and its tests
  libdnnl2 libtomlplusplus3
  # Open MPI: mpirun and orted, its help files and parameters, the libraries it and its plugins load
  openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libpsm2-2
  libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 ocl-icd-libopencl1
  # libopenmpi-dev's own dependencies that its wrapper and CMake files name
  libhwloc-dev libevent-dev libpmix-dev libibverbs-dev libnl-3-dev libnl-route-3-dev libnuma-dev
  libltdl7 libltdl-dev libjs-jquery
)

mkdir -p gpu-debs
cd gpu-debs
rm -f ./*.deb
apt-get download "${packages[@]}" > /dev/null
count=$(ls ./*.deb | wc -l)
bytes=$(du -cb ./*.deb | tail -1 | cut -f1)
echo "gpu-debs/: $count packages, $((bytes / 1024 / 1024)) MiB ($bytes bytes)"
if [ "$bytes" -gt $((48 * 1024 * 1024)) ]; then
  echo "gpu_fetch_debs: more than 48 MiB: too close to the 64 MiB a device run carries" >&2
  exit 1
fi
