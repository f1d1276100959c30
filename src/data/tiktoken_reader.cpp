// tiktoken .model/.tiktoken files -> byte-level BPE with Llama 3 special tokens.
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/tokenizer_readers.h"

namespace mt {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 with padding; false on any malformed input.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad) return false;  // data after padding
      v[k] = base64_value(c);
      if (v[k] < 0) return false;
    }
    uint32_t bits = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | v[3];
    out += char(bits >> 16);
    if (pad < 2) out += char((bits >> 8) & 0xFF);
    if (pad < 1) out += char(bits & 0xFF);
  }
  return true;
}

// The Llama 3 special tokens in id order after the ranks.
std::vector<std::string> llama3_special_names() {
  std::vector<std::string> names = {
      "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
      "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
      "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"};
  for (int r = 3; names.size() < 256; ++r)
    names.push_back("<|reserved_special_token_" + std::to_string(r) + "|>");
  return names;
}

// which[n]: some token is n bytes long.
std::vector<bool> token_lengths(const BpeTables& t) {
  std::vector<bool> which;
  for (const std::string& tok : t.token_bytes) {
    if (tok.size() >= which.size()) which.resize(tok.size() + 1);
    which[tok.size()] = true;
  }
  return which;
}

// Every split of a token into two tokens is a merge at the token's rank: tiktoken merges the
// adjacent parts whose concatenation has the lowest rank, and parts are always tokens. Only splits
// where both parts have a length some token has are looked up: trying every split would hash
// every prefix, time quadratic in a token's length, which one long line of a bad file makes huge.
void add_split_merges(BpeTables& t) {
  const std::vector<bool> is_length = token_lengths(t);
  std::vector<size_t> lengths;  // ascending, so each token's loop stops at its own length
  for (size_t n = 1; n < is_length.size(); ++n)
    if (is_length[n]) lengths.push_back(n);
  std::string part;
  for (size_t id = 0; id < t.token_bytes.size(); ++id) {
    const std::string& tok = t.token_bytes[id];
    for (size_t k : lengths) {
      if (k >= tok.size()) break;
      if (!is_length[tok.size() - k]) continue;
      part.assign(tok, 0, k);
      auto l = t.bytes_to_id.find(part);
      if (l == t.bytes_to_id.end()) continue;
      part.assign(tok, k);
      auto r = t.bytes_to_id.find(part);
      if (r == t.bytes_to_id.end()) continue;
      t.add_merge(l->second, r->second, int32_t(id), int32_t(id));
    }
  }
}

}  // namespace

bool looks_like_tiktoken(std::string_view content) {
  std::string_view line = content.substr(0, content.find('\n'));
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size()) return false;
  for (size_t i = 0; i < sp; ++i)
    if (base64_value(line[i]) < 0 && line[i] != '=') return false;
  for (size_t i = sp + 1; i < line.size(); ++i)
    if ((line[i] < '0' || line[i] > '9') && !(line[i] == '\r' && i + 1 == line.size())) return false;
  return true;
}

std::unique_ptr<Tokenizer> read_tiktoken(std::string_view content, const std::string& name) {
  BpeTables t;
  t.whole_piece_first = true;  // tiktoken returns a piece that is a token without merging
  std::string bytes;
  size_t line_no = 0, count = 0;
  // Ranks are dense, so none can reach the line count; checking that first keeps a corrupt
  // rank from sizing the id table.
  const int64_t max_rank = int64_t(std::count(content.begin(), content.end(), '\n'));
  for (size_t pos = 0; pos < content.size();) {
    size_t nl = content.find('\n', pos);
    if (nl == std::string_view::npos) nl = content.size();
    std::string_view line = content.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    auto loc = [&] { return name + ":" + std::to_string(line_no); };
    auto where = [&] { return loc() + ": "; };
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) fail(where() + "expected `base64 rank`");
    if (!base64_decode(line.substr(0, sp), bytes)) fail(where() + "bad base64 token");
    std::string_view rank_text = line.substr(sp + 1);
    int64_t rank = -1;
    auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || end != rank_text.data() + rank_text.size() || rank < 0 ||
        rank > kMaxTokenId)
      fail(where() + "rank is not an integer in 0.." + std::to_string(kMaxTokenId) + ": '" +
           std::string(rank_text) + "'");
    if (rank > max_rank)
      fail(where() + "rank " + std::to_string(rank) + " is not below the number of lines, so the "
           "ranks cannot be 0..n-1");
    t.add_token(int32_t(rank), bytes, loc());
    ++count;
  }
  if (count == 0) fail(name + ": no tokens");
  // Ranks double as ids, and the specials follow them, so the ranks must have no gaps.
  if (t.token_bytes.size() != count)
    fail(name + ": ranks are not 0.." + std::to_string(count - 1) + " (largest is " +
         std::to_string(t.token_bytes.size() - 1) + ")");
  add_split_merges(t);
  BpeTokenizer::Config cfg;
  cfg.kind = "tiktoken";
  cfg.pattern = SplitPattern::kLlama3;
  auto names = llama3_special_names();
  for (size_t i = 0; i < names.size(); ++i) cfg.specials.push_back({names[i], int32_t(count + i)});
  cfg.bos = int32_t(count);
  cfg.eos = int32_t(count + 1);
  return std::make_unique<BpeTokenizer>(std::move(cfg), std::move(t), name);
}

}  // namespace mt
