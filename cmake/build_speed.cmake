# How meshtrain's C++ is compiled quickly without changing what is compiled (docs/building.md).
#
# A clean build of the binary spent most of its time parsing the same headers (the standard
# library, nlohmann-json, toml++, CLI11) and generating the same inline code (every JSON accessor,
# every std::string and std::vector member) again in each of ~200 files. Unity batches remove the
# repetition without changing a flag of the code generator (-O3, -march stay): CMake compiles the
# sources of a target in batches of MESHTRAIN_UNITY_BATCH files, each batch one translation unit,
# so a header is parsed and an inline function compiled once per batch instead of once per file.
#
# Files of a batch share one translation unit, so two files may not both define the same name at
# namespace scope, anonymous namespaces and `static` included: give such helpers distinct names
# (or share one definition through a header). -DMESHTRAIN_UNITY=OFF compiles file by file, as a
# check that every file still includes what it uses (the fuzz build, scripts/fuzz.sh, compiles its
# sources file by file too). Only C++ files are batched: the .cu files of the CUDA build are not.
#
# Precompiled headers were tried and left out: with g++ 12 a translation unit that loads a .gch
# gets -Wstringop-overflow / -Warray-bounds warnings from inside libstdc++'s std::string (the
# compiler's known false positives, silenced in system headers) that the same includes read as
# text do not give, and on top of the unity batches they saved no measurable time (docs/building.md).
option(MESHTRAIN_UNITY "Compile the library and the binary in unity batches (docs/building.md)" ON)
set(MESHTRAIN_UNITY_BATCH 16 CACHE STRING "Source files per unity batch")

# meshtrain_unity_batches(TARGET): TARGET's C++ sources compiled in unity batches (when
# MESHTRAIN_UNITY). Not for the test programs: each test file keeps its helpers in an anonymous
# namespace under short names (fresh, kShared, ...) that would clash in a batch.
function(meshtrain_unity_batches target)
  if(MESHTRAIN_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${MESHTRAIN_UNITY_BATCH})
  endif()
endfunction()
