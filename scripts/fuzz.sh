#!/usr/bin/env bash
# Builds meshtrain's libFuzzer targets with clang++ (ASan + UBSan) into build-fuzz/ and runs each
# for a bounded time. Not part of the CMake build, which uses g++; ctest runs this as the `fuzz`
# test when clang++ is installed.
#
#   scripts/fuzz.sh                    # every target, 30 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh safetensors_header
#
# Adding a target NAME: write fuzz/fuzz_NAME.cpp (LLVMFuzzerTestOneInput), list it in TARGETS
# with the src/ files above core it needs in SOURCES (every target links all of src/core, which
# depends on nothing else, so a new core helper never breaks the lists), and optionally add
# fuzz/seed_NAME.cpp (a program that writes seed inputs into the directory given as its argument;
# it gets SEED_SOURCES[NAME]) and a dictionary fuzz/NAME.dict. Crashing inputs are saved under build-fuzz/artifacts/NAME/.
set -euo pipefail

cd "$(dirname "$0")/.."
CLANGXX=${CLANGXX:-clang++}
SECONDS_EACH=${FUZZ_SECONDS:-30}
OUT=${FUZZ_BUILD_DIR:-build-fuzz}

TARGETS=(safetensors_header tokenizers)
declare -A SOURCES=(
  [safetensors_header]="src/io/safetensors.cpp src/io/safetensors_header.cpp src/io/safetensors_dtype.cpp"
  [tokenizers]="src/data/unicode.cpp src/data/pretokenize.cpp src/data/bpe.cpp src/data/bpe_tokenizer.cpp src/data/byte_level.cpp src/data/tokenizer.cpp src/data/tiktoken_reader.cpp src/data/hf_bpe_reader.cpp src/data/sentencepiece_tokenizer.cpp src/data/tokenizer_loader.cpp src/data/byte_tokenizer.cpp"
)
declare -A SEED_SOURCES=(
  [safetensors_header]="src/io/safetensors_write.cpp src/io/safetensors_dtype.cpp"
)

if [ $# -gt 0 ]; then TARGETS=("$@"); fi
for t in "${TARGETS[@]}"; do
  if [ -z "${SOURCES[$t]+x}" ]; then echo "fuzz: unknown target '$t' (known: ${!SOURCES[*]})" >&2; exit 2; fi
done

COMMON=(-std=c++20 -O1 -g -Isrc -Wall -Wextra -Wno-unused-parameter)
CORE_SOURCES=$(ls src/core/*.cpp)
SAN=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
mkdir -p "$OUT"
failed=()
for t in "${TARGETS[@]}"; do
  echo "fuzz: building $t"
  # shellcheck disable=SC2086  # the source lists are space-separated on purpose
  "$CLANGXX" "${COMMON[@]}" "${SAN[@]}" "fuzz/fuzz_$t.cpp" ${SOURCES[$t]} $CORE_SOURCES -o "$OUT/fuzz_$t"

  seeds="$OUT/seeds/$t" corpus="$OUT/corpus/$t" artifacts="$OUT/artifacts/$t"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus" "$artifacts"
  if [ -f "fuzz/seed_$t.cpp" ]; then
    # shellcheck disable=SC2086
    "$CLANGXX" "${COMMON[@]}" "fuzz/seed_$t.cpp" ${SEED_SOURCES[$t]:-} $CORE_SOURCES -o "$OUT/seed_$t"
    "$OUT/seed_$t" "$seeds"
  fi
  dict=()
  if [ -f "fuzz/$t.dict" ]; then dict=("-dict=fuzz/$t.dict"); fi

  echo "fuzz: running $t for ${SECONDS_EACH}s"
  # New inputs go to the first directory (kept between runs); the seeds are read only.
  if "$OUT/fuzz_$t" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$SECONDS_EACH" -timeout=10 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$OUT/$t.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/$t.log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz: $t ok: $runs executions in ${SECONDS_EACH}s, corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "fuzz: $t FAILED; last lines of $OUT/$t.log:" >&2
    tail -n 40 "$OUT/$t.log" >&2
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]} (inputs in $OUT/artifacts/)" >&2
  exit 1
fi
