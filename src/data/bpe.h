// Byte-level BPE core shared by the tiktoken, tokenizer.json and GPT-2 readers. Every reader
// turns its file into the same tables: the bytes of each token id, and a merge table keyed by a
// pair of token ids. tiktoken's rule (merge the adjacent pair whose concatenation has the lowest
// rank) becomes merges (left, right) -> rank of left+right; HF/GPT-2's rule (lowest index in the
// merges list) becomes merges (left, right) -> index. One encoder then serves all of them.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mt {

struct BpeTables {
  struct Merge {
    int32_t rank;  // smaller merges first
    int32_t id;    // token produced
  };
  std::vector<std::string> token_bytes;                // by id; "" where no token has that id
  std::unordered_map<std::string, int32_t> bytes_to_id;
  std::unordered_map<uint64_t, Merge> merges;          // key: pair_key(left, right)
  // tiktoken (and HF with ignore_merges) emit a piece that is itself a token directly.
  bool whole_piece_first = false;

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  // Adds a token; mt::Error (prefixed with `source`) on an empty or duplicate token or id.
  void add_token(int32_t id, std::string bytes, const std::string& source);
  // Adds merge (left, right) -> rank unless the pair is already present (an earlier merge wins).
  void add_merge(int32_t left, int32_t right, int32_t rank, int32_t id);
};

class BpeEncoder {
 public:
  // mt::Error (prefixed with `source`) if some single byte has no token: byte-level BPE must be
  // able to spell any input.
  BpeEncoder(BpeTables tables, const std::string& source);

  // Appends the ids of one pre-tokenized piece.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  const BpeTables& tables() const { return t_; }
  // Bytes of token `id`, or nullptr when no token has that id.
  const std::string* token_bytes(int32_t id) const;

 private:
  std::vector<int32_t> merge(std::string_view piece) const;

  BpeTables t_;
  std::array<int32_t, 256> byte_id_{};
  // Words repeat a lot in real text; caching their ids makes encoding several times faster.
  // Guarded by a mutex so one tokenizer can be shared by threads.
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace mt
