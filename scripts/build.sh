#!/usr/bin/env bash
# Configures (Ninja, Release) into build/ and builds everything: build/meshtrain and the tests.
# Extra arguments are passed to CMake's configure step, e.g. scripts/build.sh -DMESHTRAIN_NATIVE=OFF
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cache=build/CMakeCache.txt
if [ -f "$cache" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
  echo "build: build/ was configured with another generator; remove build/ and rerun" >&2
  exit 1
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build
