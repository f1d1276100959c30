#!/usr/bin/env bash
# Configures (Ninja, Release) into build/ and builds build/meshtrain, the binary the demo and every
# command run. With --tests it builds everything instead: the binary, the test programs ctest runs
# and the benchmarks. Other arguments go to CMake's configure step, e.g.
#   scripts/build.sh -DMESHTRAIN_NATIVE=OFF      # a portable binary
#   scripts/build.sh --tests                     # before ctest --test-dir build
# Prints how long it took: wall time, and the CPU time of the compilers (docs/building.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=(--target meshtrain) what="build/meshtrain"
configure_args=()
for arg in "$@"; do
  if [ "$arg" = --tests ]; then
    targets=() what="build/meshtrain, the tests and the benchmarks"
  else
    configure_args+=("$arg")
  fi
done

cache=build/CMakeCache.txt
if [ -f "$cache" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
  echo "build: build/ was configured with another generator; remove build/ and rerun" >&2
  exit 1
fi

configure_and_build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${configure_args[@]+"${configure_args[@]}"} &&
  cmake --build build ${targets[@]+"${targets[@]}"}
}

# The timing line covers every process the build ran (compilers, linker); a failed build says so
# instead of "built", with the same figures, and exits with the build's status.
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo unknown)
TIMEFORMAT="%0R %0U %0S"
status=0
{ timing=$( { time configure_and_build 1>&3 2>&4; } 2>&1 ); } 3>&1 4>&2 || status=$?
read -r wall user sys <<<"${timing##*$'\n'}"
figures="$wall s wall time; CPU $user s user + $sys s sys on $(nproc) cores (load average $load at the start)"
if [ "$status" -ne 0 ]; then
  echo "build: FAILED building $what after $figures" >&2
  exit "$status"
fi
echo "build: built $what in $figures"
