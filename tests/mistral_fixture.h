// A synthetic tokenizer with Mistral v0.3's structure (no real v0.3 file is in the repository or
// the shared data): <unk> <s> </s>, the control tokens [INST] [/INST] [TOOL_CALLS] ... and
// [control_N] up to id 770, the 256 byte tokens, then "▁", the letters, ten merges and filler
// pieces, 32768 in all; written as an HF tokenizer.json (the Prepend/Replace normalizer form of
// Mistral's and Llama 2's files) or as a sentencepiece tokenizer.model.
#pragma once
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mt::testing::mistral {

namespace fs = std::filesystem;

// Mistral v0.3's layout: <unk> <s> </s>, control tokens [INST] [/INST] [TOOL_CALLS] ... and
// [control_N] up to id 770, the 256 byte tokens, then the pieces; 32768 in all.
inline constexpr int kMistralVocab = 32768, kMistralFirstByte = 771, kMistralFirstPiece = 1027;

inline std::vector<std::string> mistral_controls() {
  std::vector<std::string> c = {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                                "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"};
  for (int i = int(c.size()); i < kMistralFirstByte; ++i) c.push_back("[control_" + std::to_string(i - 2) + "]");
  return c;
}

// Pieces after the bytes: "▁", the letters, a few merges' results, then fillers to 32768.
inline const std::vector<std::pair<std::string, std::string>> kMistralMerges = {
    {"h", "e"}, {"l", "l"}, {"\xE2\x96\x81", "he"}, {"ll", "o"}, {"\xE2\x96\x81he", "llo"},
    {"\xE2\x96\x81", "w"}, {"o", "r"}, {"\xE2\x96\x81w", "or"}, {"l", "d"}, {"\xE2\x96\x81wor", "ld"}};

inline std::vector<std::string> mistral_pieces() {
  std::vector<std::string> p = mistral_controls();
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    p.push_back(hex);
  }
  p.push_back("\xE2\x96\x81");
  for (char c = 'a'; c <= 'z'; ++c) p.push_back(std::string(1, c));
  for (const auto& [a, b] : kMistralMerges) p.push_back(a + b);
  for (int i = 0; int(p.size()) < kMistralVocab; ++i) p.push_back("\xE2\x96\x81zz" + std::to_string(i));
  return p;
}

inline std::string write_mistral_json(const fs::path& dir) {
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array(), merges = nlohmann::json::array();
  const auto pieces = mistral_pieces();
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = i;
  for (int i = 0; i < kMistralFirstByte; ++i)
    added.push_back({{"id", i}, {"content", pieces[size_t(i)]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  for (const auto& [a, b] : kMistralMerges) merges.push_back(a + " " + b);
  const std::string space = "\xE2\x96\x81";
  nlohmann::json doc = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", space}},
                                                            {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}}}}}},
      {"pre_tokenizer", nullptr},
      {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                                                       {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                       {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true},
                 {"byte_fallback", true}, {"vocab", vocab}, {"merges", merges}}}};
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << doc.dump();
  return (dir / "tokenizer.json").string();
}

// Protobuf bytes of a sentencepiece ModelProto (sentencepiece_model.proto).
inline std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += char(0x80 | (v & 0x7F));
  return s + char(v);
}
inline std::string field(int number, const std::string& payload) {
  return varint(uint64_t(number) << 3 | 2) + varint(payload.size()) + payload;
}
inline std::string varint_field(int number, uint64_t v) { return varint(uint64_t(number) << 3) + varint(v); }
inline std::string float_field(int number, float f) {
  char b[4];
  std::memcpy(b, &f, 4);
  return varint(uint64_t(number) << 3 | 5) + std::string(b, 4);
}

inline std::string write_mistral_model(const fs::path& dir) {
  const auto pieces = mistral_pieces();
  std::string proto;
  for (size_t i = 0; i < pieces.size(); ++i) {
    // Types: UNKNOWN 2, CONTROL 3, BYTE 6, NORMAL 1; merged pieces score higher the earlier their merge.
    const int type = i == 0 ? 2 : i < size_t(kMistralFirstByte) ? 3 : i < size_t(kMistralFirstPiece) ? 6 : 1;
    const float score = type == 1 ? -float(i) : 0.0f;
    proto += field(1, field(1, pieces[i]) + float_field(2, score) + varint_field(3, uint64_t(type)));
  }
  proto += field(2, varint_field(3, 2) + varint_field(35, 1) + varint_field(40, 0) + varint_field(41, 1) +
                        varint_field(42, 2));                                      // BPE, byte fallback
  proto += field(3, field(1, "identity") + varint_field(3, 1) + varint_field(4, 0));  // dummy prefix
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.model", std::ios::binary) << proto;
  return (dir / "tokenizer.model").string();
}


}  // namespace mt::testing::mistral
