// A tokenised cache on disk, so a second run over the same data does not re-tokenise it.
// One file per (data file path, size, mtime, tokenizer fingerprint, format, max_tokens,
// truncate, model_limit, data.columns, cache version), named "<data file stem>-<16 hex digits of the key hash>.tokens":
//   header (80 bytes: magic "MTTOKEN1", version, format, key hash, counts, checksum)
//   uint64 offsets[n + 1] | uint32 tokens[offsets[n]] | uint8 trained[offsets[n]] | warning text
// in host byte order (little-endian machines). Written atomically (tmp + rename) and read back
// with mmap; the ExampleTable views the mapping without copying. A file that fails any check
// (magic, version, key, sizes, offsets, checksum) is rebuilt with a warning.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "data/example_table.h"
#include "data/examples.h"

namespace mt {

// Changes whenever encodings could: kind, vocab size, BOS/EOS, special tokens, and the ids of a
// few probe strings (calls tok.encode() a fixed few times).
uint64_t tokenizer_fingerprint(const Tokenizer& tok);

// $MESHTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/meshtrain/tokens, else ~/.cache/meshtrain/tokens.
std::string default_cache_dir();

struct LoadedExamples {
  ExampleTable table;
  DataFormat format = DataFormat::kAuto;
  int64_t records = 0, skipped = 0, too_long = 0;  // as in ExampleSet
  std::string warning;                              // the skip summary, empty when none
  bool from_cache = false;
  std::string cache_path;  // empty when caching was off or the cache could not be written
};

// read_examples() through the cache in `cache_dir` (empty: default_cache_dir(); "off": no
// cache). A hit prints the stored skip warning again (unless options.quiet) and does not call
// the tokenizer beyond tokenizer_fingerprint(). A cache that cannot be written only warns.
LoadedExamples load_examples(const std::string& path, const Tokenizer& tok,
                             const ExampleOptions& options = {}, const std::string& cache_dir = "");

// The cache file load_examples() would use (the data file must exist).
std::string cache_file_for(const std::string& path, const Tokenizer& tok,
                           const ExampleOptions& options, const std::string& cache_dir);

}  // namespace mt
