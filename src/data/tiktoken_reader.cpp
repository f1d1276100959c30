// tiktoken .model/.tiktoken files -> byte-level BPE with Llama 3 special tokens.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/clipped.h"
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

// For each token, the id of its longest proper prefix that is also a token, or -1. In sorted
// order the tokens that are prefixes of the current one are a chain on a stack (a string between
// P and P + x starts with P), and each token is pushed and popped once, each check no longer than
// the token it pops or the current one: time linear in the tokens' bytes, besides the sort.
std::vector<int32_t> longest_token_prefix(const std::vector<std::string>& tokens) {
  std::vector<int32_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[size_t(a)] < tokens[size_t(b)]; });
  std::vector<int32_t> parent(tokens.size(), -1), chain;
  for (const int32_t id : order) {
    const std::string& tok = tokens[size_t(id)];
    if (tok.empty()) continue;
    while (!chain.empty()) {
      const std::string& p = tokens[size_t(chain.back())];
      if (p.size() < tok.size() && tok.compare(0, p.size(), p) == 0) break;
      chain.pop_back();
    }
    parent[size_t(id)] = chain.empty() ? -1 : chain.back();
    chain.push_back(id);
  }
  return parent;
}

// Every split of a token into two tokens is a merge at the token's rank: tiktoken merges the
// adjacent parts whose concatenation has the lowest rank, and parts are always tokens. A split
// is where a token prefix meets a token suffix: following each token's chain of prefix tokens and
// of suffix tokens finds them all, in time linear in the file (hashing both halves of every split
// was quadratic in a token's length: 11.5 s for a 6 MB file of 3000 tokens of distinct lengths).
void add_split_merges(BpeTables& t) {
  const std::vector<std::string>& tokens = t.token_bytes;
  const std::vector<int32_t> prefix_of = longest_token_prefix(tokens);
  std::vector<int32_t> suffix_of;
  {
    std::vector<std::string> reversed(tokens.size());
    for (size_t id = 0; id < tokens.size(); ++id) reversed[id].assign(tokens[id].rbegin(), tokens[id].rend());
    suffix_of = longest_token_prefix(reversed);
  }
  std::vector<int32_t> right_at, lefts;  // right_at[k]: the id of the token tok[k..], or -1
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& tok = tokens[id];
    if (tok.size() < 2) continue;
    right_at.assign(tok.size(), -1);
    for (int32_t s = suffix_of[id]; s >= 0; s = suffix_of[size_t(s)])
      right_at[tok.size() - tokens[size_t(s)].size()] = s;
    lefts.clear();
    for (int32_t p = prefix_of[id]; p >= 0; p = prefix_of[size_t(p)]) lefts.push_back(p);
    for (auto left = lefts.rbegin(); left != lefts.rend(); ++left) {  // shortest first
      const int32_t right = right_at[tokens[size_t(*left)].size()];
      if (right >= 0) t.add_merge(*left, right, int32_t(id), int32_t(id));
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
           clipped(rank_text) + "'");
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
