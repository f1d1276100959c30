#include "io/gguf_tokenizer.h"

#include "core/error.h"

namespace mt {

namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kPad = "tokenizer.ggml.padding_token_id";
constexpr const char* kAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr const char* kRemoveExtraWs = "tokenizer.ggml.remove_extra_whitespaces";

bool is_integer(GgufType t) {
  return t == GgufType::u8 || t == GgufType::i8 || t == GgufType::u16 || t == GgufType::i16 ||
         t == GgufType::u32 || t == GgufType::i32 || t == GgufType::u64 || t == GgufType::i64;
}

[[noreturn]] void bad_key(const GgufFile& g, const char* key, const std::string& expected) {
  fail(g.label + ": " + key + " should be " + expected);
}

const GgufValue* array_of(const GgufFile& g, const char* key, GgufType elem, const char* what) {
  const GgufValue* v = g.find(key);
  if (!v) return nullptr;
  if (v->type != GgufType::array || v->elem != elem) bad_key(g, key, std::string("an array of ") + what);
  return v;
}

// A token id key: any integer type (llama.cpp's converters write u32), within the vocabulary.
int32_t id_of(const GgufFile& g, const char* key, size_t n_tokens) {
  const GgufValue* v = g.find(key);
  if (!v) return -1;
  if (!is_integer(v->type)) bad_key(g, key, "an integer token id");
  const int64_t id = v->type == GgufType::i8 || v->type == GgufType::i16 || v->type == GgufType::i32 ||
                             v->type == GgufType::i64
                         ? v->i
                         : int64_t(v->u);
  if (id < 0 || uint64_t(id) >= n_tokens)
    bad_key(g, key, "a token id below " + std::to_string(n_tokens) + ", not " + std::to_string(id));
  return int32_t(id);
}

int8_t flag_of(const GgufFile& g, const char* key) {
  const GgufValue* v = g.find(key);
  if (!v) return -1;
  if (v->type != GgufType::boolean) bad_key(g, key, "a bool");
  return v->u ? 1 : 0;
}

}  // namespace

void append_tokenizer_keys(std::vector<GgufKV>& kvs, const TokenizerInfo& tok, int64_t vocab_size,
                           const std::string& path) {
  const size_t n = tok.tokens.size();
  if (int64_t(n) != vocab_size)
    fail(path + ": tokenizer has " + std::to_string(n) + " tokens but the model's vocab_size is " +
         std::to_string(vocab_size));
  if ((!tok.scores.empty() && tok.scores.size() != n) || (!tok.token_types.empty() && tok.token_types.size() != n))
    fail(path + ": tokenizer scores / token types must have one entry per token");
  if (tok.model.empty()) fail(path + ": tokenizer model (\"llama\" or \"gpt2\") is empty");
  for (int32_t id : {tok.bos, tok.eos, tok.unk, tok.pad})
    if (id >= int32_t(n)) fail(path + ": tokenizer special id " + std::to_string(id) + " is beyond the vocabulary");
  kvs.push_back({kModel, GgufValue::str(tok.model)});
  if (!tok.pre.empty()) kvs.push_back({kPre, GgufValue::str(tok.pre)});
  kvs.push_back({kTokens, GgufValue::str_array(tok.tokens)});
  if (!tok.scores.empty()) kvs.push_back({kScores, GgufValue::f32_array(tok.scores)});
  if (!tok.token_types.empty()) kvs.push_back({kTypes, GgufValue::i32_array(tok.token_types)});
  if (!tok.merges.empty()) kvs.push_back({kMerges, GgufValue::str_array(tok.merges)});
  for (const auto& [key, id] : {std::pair{kBos, tok.bos}, {kEos, tok.eos}, {kUnk, tok.unk}, {kPad, tok.pad}})
    if (id >= 0) kvs.push_back({key, GgufValue::u32(uint32_t(id))});
  for (const auto& [key, flag] : {std::pair{kAddBos, tok.add_bos}, {kAddEos, tok.add_eos},
                                  {kAddSpacePrefix, tok.add_space_prefix}})
    if (flag >= 0) kvs.push_back({key, GgufValue::boolean(flag == 1)});
  if (tok.remove_extra_whitespaces) kvs.push_back({kRemoveExtraWs, GgufValue::boolean(true)});
}

std::optional<TokenizerInfo> read_tokenizer_keys(const GgufFile& g) {
  const GgufValue* model = g.find(kModel);
  if (!model) return std::nullopt;
  if (model->type != GgufType::string) bad_key(g, kModel, "a string");
  TokenizerInfo tok;
  tok.model = model->s;
  if (const GgufValue* pre = g.find(kPre)) {
    if (pre->type != GgufType::string) bad_key(g, kPre, "a string");
    tok.pre = pre->s;
  }
  const GgufValue* tokens = array_of(g, kTokens, GgufType::string, "strings");
  if (!tokens) fail(g.label + ": has " + kModel + " but no " + kTokens);
  tok.tokens = tokens->strs;
  const size_t n = tok.tokens.size();
  if (const GgufValue* s = array_of(g, kScores, GgufType::f32, "f32")) {
    if (s->floats.size() != n) bad_key(g, kScores, "one score per token (" + std::to_string(n) + ")");
    tok.scores.assign(s->floats.begin(), s->floats.end());
  }
  if (const GgufValue* t = array_of(g, kTypes, GgufType::i32, "i32")) {
    if (t->ints.size() != n) bad_key(g, kTypes, "one type per token (" + std::to_string(n) + ")");
    for (int64_t type : t->ints) {
      if (type < kTokenNormal || type > kTokenByte) bad_key(g, kTypes, "token types 1..6, not " + std::to_string(type));
      tok.token_types.push_back(int32_t(type));
    }
  }
  if (const GgufValue* m = array_of(g, kMerges, GgufType::string, "strings")) tok.merges = m->strs;
  tok.bos = id_of(g, kBos, n);
  tok.eos = id_of(g, kEos, n);
  tok.unk = id_of(g, kUnk, n);
  tok.pad = id_of(g, kPad, n);
  tok.add_bos = flag_of(g, kAddBos);
  tok.add_eos = flag_of(g, kAddEos);
  tok.add_space_prefix = flag_of(g, kAddSpacePrefix);
  tok.remove_extra_whitespaces = flag_of(g, kRemoveExtraWs) == 1;
  return tok;
}

}  // namespace mt
