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
# Each source is compiled once (build-fuzz/obj/, FUZZ_JOBS in parallel) for every target using it.
# The targets and what each checks: docs/reliability.md, "Fuzzing".
set -euo pipefail

cd "$(dirname "$0")/.."
CLANGXX=${CLANGXX:-clang++}
SECONDS_EACH=${FUZZ_SECONDS:-30}
OUT=${FUZZ_BUILD_DIR:-build-fuzz}

TARGETS=(safetensors_header tokenizers gguf hf_configs run_config safetensors_index checkpoint_manifest examples preference_pairs cli)
SAFETENSORS="src/io/safetensors.cpp src/io/safetensors_header.cpp src/io/safetensors_dtype.cpp"
# chat_templates.cpp renders through a tokenizer's own chat_template with the Jinja interpreter, so
# the targets that read conversations link it; their fuzz tokenizers carry no template, so the
# interpreter itself is not fuzzed here (its hostile-template limits: tests/test_chat_jinja.cpp).
CHAT="src/data/chat_jinja.cpp src/data/chat_rendering.cpp $(ls src/data/jinja/*.cpp | tr '\n' ' ')"
declare -A SOURCES=(
  [safetensors_header]="$SAFETENSORS"
  [tokenizers]="src/data/unicode.cpp src/data/pretokenize.cpp src/data/bpe.cpp src/data/bpe_tokenizer.cpp src/data/byte_level.cpp src/data/tokenizer.cpp src/data/longest_match.cpp src/data/tiktoken_reader.cpp src/data/hf_bpe_reader.cpp src/data/sentencepiece_tokenizer.cpp src/data/llama2c_tokenizer_reader.cpp src/data/sentencepiece_model_reader.cpp src/data/hf_sentencepiece_reader.cpp src/data/tokenizer_loader.cpp src/data/byte_tokenizer.cpp"
  [gguf]="src/io/gguf_reader.cpp src/io/gguf_types.cpp src/io/ggml_quants.cpp"
  [hf_configs]="src/io/hf_config.cpp src/io/gpt2_config.cpp src/io/hf_gemma3.cpp src/io/hf_moe.cpp src/io/peft_config.cpp src/model/config.cpp src/model/presets.cpp"
  [run_config]="src/train/run_config.cpp src/train/config_aliases.cpp src/train/config_schema.cpp src/train/config_values.cpp src/train/config_toml.cpp src/train/config_docs.cpp src/parallel/partition.cpp src/parallel/mesh.cpp src/model/config.cpp src/data/unicode.cpp src/io/hub_cache.cpp src/train/data_sources.cpp"
  [safetensors_index]="src/io/safetensors_index.cpp src/io/safetensors_write.cpp $SAFETENSORS"
  [checkpoint_manifest]="src/train/checkpoint_manifest.cpp src/train/checkpoint_files.cpp src/train/checkpoint_dir.cpp"
  [examples]="$CHAT src/data/example_reader.cpp src/data/json_records.cpp src/data/templates.cpp src/data/chat_templates.cpp src/data/tokenizer.cpp src/data/longest_match.cpp"
  [preference_pairs]="$CHAT src/data/preference_pairs.cpp src/data/example_reader.cpp src/data/json_records.cpp src/data/templates.cpp src/data/chat_templates.cpp src/data/tokenizer.cpp src/data/longest_match.cpp"
)
# A manifest of an older checkpoint is read with its run config (train.batch_size counts its rows).
SOURCES[checkpoint_manifest]+=" ${SOURCES[run_config]}"
# The command line: src/cli/ (all but main.cpp) compiled here, everything below it taken from the
# g++ build's library (FUZZ_LINK_BUILD, default build/; build it first): the whole library under
# the sanitizers would cost CI a quarter of an hour of compiling. Its core objects come from there
# too, so this target links neither the clang-compiled core nor its own copy.
SOURCES[cli]=$(ls src/cli/*.cpp | grep -v '^src/cli/main\.cpp$' | tr '\n' ' ')
LINK_BUILD=${FUZZ_LINK_BUILD:-build}
declare -A SEED_SOURCES=(
  [safetensors_header]="src/io/safetensors_write.cpp src/io/safetensors_dtype.cpp"
  [gguf]="src/io/gguf_writer.cpp src/io/gguf_types.cpp src/io/ggml_quants.cpp"
  [hf_configs]="src/io/hf_config.cpp src/io/gpt2_config.cpp src/io/hf_gemma3.cpp src/io/hf_moe.cpp src/model/config.cpp src/model/presets.cpp"
  [run_config]="${SOURCES[run_config]}"
)

if [ $# -gt 0 ]; then TARGETS=("$@"); fi
for t in "${TARGETS[@]}"; do
  if [ -z "${SOURCES[$t]+x}" ]; then echo "fuzz: unknown target '$t' (known: ${!SOURCES[*]})" >&2; exit 2; fi
  if [ "$t" = cli ] && [ ! -f "$LINK_BUILD/libmeshtrain_lib.a" ]; then
    echo "fuzz: the cli target links $LINK_BUILD/libmeshtrain_lib.a: build it first (scripts/build.sh), or set FUZZ_LINK_BUILD" >&2
    exit 2
  fi
done
# libFuzzer options of one target: the command line's allocations are bounded by the counts it
# checks, so an allocation of 1 GiB is a count let through.
declare -A RUN_FLAGS=([cli]="-malloc_limit_mb=1024")

COMMON=(-std=c++20 -O1 -g -Isrc -I"$LINK_BUILD/generated" -Wall -Wextra -Wno-unused-parameter)
# Every object is compiled once with the sanitizers and coverage (fuzzer-no-link) and shared by the
# targets and the seed programs; only the fuzz targets link libFuzzer (and its main).
# -fno-sanitize=unreachable: toml++ 3.3's is_non_ascii_horizontal_whitespace reaches its
# TOML_UNREACHABLE (__builtin_unreachable) for most code points in U+00A1..U+0499 (a key followed
# by 'ɖ'); g++ -O3 happens to compile it to "not whitespace", the right answer. Nothing in src/
# marks code unreachable, so only the library's markers go unchecked.
INSTR=(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=unreachable -fno-sanitize-recover=undefined)
LINK_SAN=address,undefined
JOBS=${FUZZ_JOBS:-$(nproc)}
LAUNCHER=${FUZZ_LAUNCHER:-$(command -v ccache || true)}
CORE_SOURCES=$(ls src/core/*.cpp)
OBJ="$OUT/obj"
obj_of() { for s in "$@"; do echo "$OBJ/${s%.cpp}.o"; done; }

# shellcheck disable=SC2086  # the source lists are space-separated on purpose
all_sources=$(for t in "${TARGETS[@]}"; do
  echo "fuzz/fuzz_$t.cpp" ${SOURCES[$t]}
  if [ -f "fuzz/seed_$t.cpp" ]; then echo "fuzz/seed_$t.cpp" ${SEED_SOURCES[$t]:-}; fi
done | tr ' ' '\n' | cat - <(echo "$CORE_SOURCES") | sort -u)
echo "fuzz: compiling $(echo "$all_sources" | wc -l) sources ($JOBS jobs)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: the cli target runs in a scratch directory of its own
OBJ="$OUT/obj"
export FUZZ_CC="$LAUNCHER $CLANGXX ${COMMON[*]} ${INSTR[*]}" FUZZ_OBJ="$OBJ"
echo "$all_sources" | xargs -P "$JOBS" -n 1 bash -c 'o="$FUZZ_OBJ/${1%.cpp}.o"; mkdir -p "${o%/*}"; $FUZZ_CC -c "$1" -o "$o"' _

# The g++ build's library and what it links (the meshtrain binary's link line, from ninja): its
# archive, oneDNN, OpenMP, MPI, zlib and their rpath.
library_link_args() {
  ninja -C "$LINK_BUILD" -t commands meshtrain | tail -n 1 | tr ' ' '\n' |
    awk -v build="$LINK_BUILD" '/^-Wl,-rpath/ { print; next }
                                /libmeshtrain_lib\.a$/ { libs = 1 }
                                libs && /\.(a|so)$/ { print (substr($0, 1, 1) == "/" ? $0 : build "/" $0) }'
}

failed=()
for t in "${TARGETS[@]}"; do
  echo "fuzz: linking $t"
  if [ "$t" = cli ]; then
    # shellcheck disable=SC2046,SC2086
    "$CLANGXX" -fsanitize=fuzzer,"$LINK_SAN" $(obj_of "fuzz/fuzz_$t.cpp" ${SOURCES[$t]}) $(library_link_args) \
      -o "$OUT/fuzz_$t"
  else
    # shellcheck disable=SC2046,SC2086
    "$CLANGXX" -fsanitize=fuzzer,"$LINK_SAN" $(obj_of "fuzz/fuzz_$t.cpp" ${SOURCES[$t]} $CORE_SOURCES) -o "$OUT/fuzz_$t"
  fi

  seeds="$OUT/seeds/$t" corpus="$OUT/corpus/$t" artifacts="$OUT/artifacts/$t"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus" "$artifacts"
  if [ -f "fuzz/seed_$t.cpp" ]; then
    # shellcheck disable=SC2046,SC2086
    "$CLANGXX" -fsanitize="$LINK_SAN" $(obj_of "fuzz/seed_$t.cpp" ${SEED_SOURCES[$t]:-} $CORE_SOURCES) \
      -o "$OUT/seed_$t"
    "$OUT/seed_$t" "$seeds"
  fi
  dict=()
  if [ -f "fuzz/$t.dict" ]; then dict=("-dict=$PWD/fuzz/$t.dict"); fi

  echo "fuzz: running $t for ${SECONDS_EACH}s"
  # New inputs go to the first directory (kept between runs); the seeds are read only.
  # shellcheck disable=SC2086  # RUN_FLAGS: space-separated options
  if "$OUT/fuzz_$t" "$corpus" "$seeds" "${dict[@]}" ${RUN_FLAGS[$t]:-} -max_total_time="$SECONDS_EACH" -timeout=10 \
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
