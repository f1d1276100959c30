#include "data/hf_byte_level_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <vector>

#include "data/byte_level.h"
#include "data/hf_tokenizer_json.h"

namespace mt {
namespace {

using ojson = nlohmann::ordered_json;

std::string quoted(const std::string& s) { return ojson(s).dump(); }

ojson byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

ojson pre_tokenizer(SplitPattern p) {
  if (p == SplitPattern::kNone) return byte_level(false);
  ojson split = {{"type", "Split"},
                 {"pattern", {{"Regex", std::string(split_pattern_regex(p))}}},
                 {"behavior", "Isolated"},
                 {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level(false)}}};
}

// A BOS of its own (Llama 3's <|begin_of_text|>) starts every sequence, as in HF's Llama 3 files;
// GPT-2's <|endoftext|>, BOS and EOS at once, is not added (nor is it by HF's GPT-2 files).
bool prepends_bos(const BpeTokenizer& tok) { return tok.bos_id() >= 0 && tok.bos_id() != tok.eos_id(); }

std::string name_of(const BpeTokenizer& tok, int32_t id) {
  for (const auto& s : tok.special_tokens())
    if (s.id == id) return s.text;
  return bytes_to_byte_level(tok.tables().token_bytes.at(size_t(id)));
}

ojson post_processor(const BpeTokenizer& tok) {
  if (!prepends_bos(tok)) return nullptr;
  return hf_bos_post_processor(name_of(tok, tok.bos_id()), tok.bos_id());
}

// Specials in id order.
std::vector<Tokenizer::Special> specials_by_id(const BpeTokenizer& tok) {
  std::vector<Tokenizer::Special> s = tok.special_tokens();
  std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return s;
}

}  // namespace

std::string hf_byte_level_tokenizer_json(const BpeTokenizer& tok) {
  const BpeTables& t = tok.tables();
  ojson added = ojson::array();
  for (const auto& s : specials_by_id(tok))
    added.push_back(hf_added_token(s.id, s.text, true));
  ojson model = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", t.whole_piece_first}};
  const std::pair<const char*, ojson> head[] = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", tok.normalizes_nfc() ? ojson{{"type", "NFC"}} : ojson(nullptr)},
      {"pre_tokenizer", pre_tokenizer(tok.pattern())},
      {"post_processor", post_processor(tok)},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}}};
  // vocab and merges are written by hand: ordered_json looks keys up linearly, which a 128k
  // vocabulary makes quadratic.
  std::vector<std::string> mapped(t.token_bytes.size());
  for (size_t id = 0; id < t.token_bytes.size(); ++id)
    if (!t.token_bytes[id].empty()) mapped[id] = quoted(bytes_to_byte_level(t.token_bytes[id]));
  std::vector<std::tuple<int32_t, int32_t, int32_t>> merges;  // rank, left, right
  merges.reserve(t.merges.size());
  for (const auto& [key, m] : t.merges) merges.emplace_back(m.rank, int32_t(key >> 32), int32_t(uint32_t(key)));
  std::sort(merges.begin(), merges.end());

  std::ostringstream os;
  os << "{\n";
  for (const auto& [key, value] : head) os << " " << quoted(key) << ": " << value.dump() << ",\n";
  os << " \"model\": {\n";
  for (const auto& [key, value] : model.items()) os << "  " << quoted(key) << ": " << value.dump() << ",\n";
  os << "  \"vocab\": {";
  const char* sep = "\n   ";
  for (size_t id = 0; id < mapped.size(); ++id) {
    if (mapped[id].empty()) continue;
    os << sep << mapped[id] << ": " << id;
    sep = ",\n   ";
  }
  os << "\n  },\n  \"merges\": [";
  sep = "\n   ";
  for (const auto& [rank, l, r] : merges) {
    // Byte-level strings contain no space, so "left right" is unambiguous.
    os << sep << quoted(bytes_to_byte_level(t.token_bytes[l]) + " " + bytes_to_byte_level(t.token_bytes[r]));
    sep = ",\n   ";
  }
  os << "\n  ]\n }\n}\n";
  return os.str();
}

std::string hf_byte_level_tokenizer_config_json(const BpeTokenizer& tok) {
  auto name = [&](int32_t id) { return id >= 0 ? ojson(name_of(tok, id)) : ojson(nullptr); };
  ojson decoder = ojson::object();
  for (const auto& s : specials_by_id(tok))
    decoder[std::to_string(s.id)] = hf_added_token_decoder_entry(s.text, true);
  ojson doc = {{"add_bos_token", prepends_bos(tok)},
               {"add_eos_token", false},
               {"added_tokens_decoder", decoder},
               {"bos_token", name(tok.bos_id())},
               {"eos_token", name(tok.eos_id())},
               {"clean_up_tokenization_spaces", false},
               {"model_input_names", {"input_ids", "attention_mask"}},
               {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return doc.dump(2) + "\n";
}

std::unique_ptr<BpeTokenizer> byte_tokenizer_as_bpe() {
  BpeTables t;
  for (int b = 0; b < 256; ++b) t.add_token(b, std::string(1, char(b)), "byte tokenizer");
  BpeTokenizer::Config cfg;
  cfg.kind = "byte";
  cfg.pattern = SplitPattern::kNone;
  return std::make_unique<BpeTokenizer>(std::move(cfg), std::move(t), "byte tokenizer");
}

}  // namespace mt
