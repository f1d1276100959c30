#include "data/bpe.h"

#include "core/error.h"
#include "data/merge_queue.h"

namespace mt {
namespace {
constexpr size_t kMaxCachedPieceBytes = 64;  // longer pieces are rare; don't let them bloat it
constexpr size_t kMaxCacheEntries = 1 << 17;
}  // namespace

void BpeTables::add_token(int32_t id, std::string bytes, const std::string& source) {
  if (id < 0) fail(source + ": negative token id " + std::to_string(id));
  if (bytes.empty()) fail(source + ": empty token for id " + std::to_string(id));
  if (size_t(id) >= token_bytes.size()) token_bytes.resize(size_t(id) + 1);
  if (!token_bytes[id].empty()) fail(source + ": duplicate token id " + std::to_string(id));
  if (!bytes_to_id.emplace(bytes, id).second)
    fail(source + ": token of id " + std::to_string(id) + " duplicates id " +
         std::to_string(bytes_to_id[bytes]));
  token_bytes[id] = std::move(bytes);
}

void BpeTables::add_merge(int32_t left, int32_t right, int32_t rank, int32_t id) {
  merges.emplace(pair_key(left, right), Merge{rank, id});
}

BpeEncoder::BpeEncoder(BpeTables tables, const std::string& source) : t_(std::move(tables)) {
  for (int b = 0; b < 256; ++b) {
    auto it = t_.bytes_to_id.find(std::string(1, char(b)));
    if (it == t_.bytes_to_id.end())
      fail(source + ": no token for byte " + std::to_string(b) +
           " (a byte-level BPE needs all 256 single bytes)");
    byte_id_[b] = it->second;
  }
}

const std::string* BpeEncoder::token_bytes(int32_t id) const {
  if (id < 0 || size_t(id) >= t_.token_bytes.size() || t_.token_bytes[id].empty()) return nullptr;
  return &t_.token_bytes[id];
}

std::vector<int32_t> BpeEncoder::merge(std::string_view piece) const {
  std::vector<int32_t> ids(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) ids[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  merge_adjacent_pairs<int32_t>(ids, [&](int32_t l, int32_t r) -> std::optional<PairMerge<int32_t>> {
    auto it = t_.merges.find(BpeTables::pair_key(l, r));
    if (it == t_.merges.end()) return std::nullopt;
    return PairMerge<int32_t>{it->second.rank, it->second.id};
  });
  return ids;
}

void BpeEncoder::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (t_.whole_piece_first) {
    auto it = t_.bytes_to_id.find(std::string(piece));
    if (it != t_.bytes_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    auto ids = merge(piece);
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  auto ids = merge(piece);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

}  // namespace mt
